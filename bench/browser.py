"""Where a browser's time goes: the Plotly charts it builds from scratch per update on each step page and the
encoder-decoder page (a chart redrawn in place builds none), and the CPU Chromium spends on a training tab."""
import time

from .live import (CHARTS_DRAWN, COUNT_CHARTS, PAGE_SENTENCE, ChromiumCpu, launch, open_view, own_chromium_pids,
                   serve, start_tiny_tales, typing_latencies, watch_network)
from .report import Report

AREA = "browser"
TRAINING_AFTER_S, TRAINING_WINDOW_S = 4.0, 15.0     # the training tab is measured from 4 s after Start, for 15 s


def visits(playwright, base: str, slug: str = "attention") -> list[dict]:
    """A student's first visit (a browser that has never seen the app) to a step page, then a later one in
    a new tab: for each, seconds from opening the address to every chart drawn, and megabytes on the wire
    (everything, and plotly.js alone)."""
    from explorer.app.plotly_component import PLOTLY_JS
    browser = launch(playwright)
    measured = []
    try:
        context = browser.new_context()
        for _ in range(2):
            page = context.new_page()
            log = watch_network(page)
            start = time.perf_counter()
            page.goto(f"{base}/{slug}?model=tinytales&text={PAGE_SENTENCE.replace(' ', '+')}")
            page.wait_for_function(CHARTS_DRAWN, polling=50)
            seconds = time.perf_counter() - start
            page.wait_for_selector("[data-test-script-state='notRunning']")
            page.close()
            wire = [(load.get("url", ""), load.get("wire", 0)) for load in log.values()]
            measured.append(dict(seconds=seconds, mb=sum(w for _, w in wire) / 1e6,
                                 plotly_mb=sum(w for url, w in wire if PLOTLY_JS.name in url) / 1e6))
    finally:
        browser.close()
    return measured


def training_tab(playwright, base: str, after: float = TRAINING_AFTER_S, window: float = TRAINING_WINDOW_S):
    """A browser of its own with one tab training tiny tales: the cores all its processes use (browser,
    renderer, GPU, utility: every process Chromium started) from `after` s after Start for `window` s, the
    number of those processes, and the charts the tab built from scratch in that window (Plotly, Vega-Lite)."""
    browser = launch(playwright)
    try:
        page = browser.new_page()
        start_tiny_tales(page, base)
        started = time.perf_counter()
        page.evaluate(COUNT_CHARTS)
        time.sleep(max(0.0, after - (time.perf_counter() - started)))
        cpu = ChromiumCpu()
        page.evaluate(COUNT_RUNS)
        cpu.start()
        time.sleep(window)
        cores = cpu.stop()
        runs = page.evaluate("window.__runs")
        processes = len(own_chromium_pids())
        built = (page.evaluate("window.__built"), page.evaluate("window.__builtVega"))
        page.get_by_role("button", name="Pause", exact=True).click()
    finally:
        browser.close()
    return cores, processes, built, runs


# Counts the script runs (the page's and its fragments') that end while the training tab is measured.
COUNT_RUNS = """() => { window.__runs = 0;
  new MutationObserver(() => { if (document.querySelector('[data-testid=stApp]')
    .getAttribute('data-test-script-state') === 'notRunning') window.__runs += 1; })
  .observe(document.querySelector('[data-testid=stApp]'), {attributes: true,
                                                           attributeFilter: ['data-test-script-state']}); }"""


def run(report: Report, updates: int = 3) -> None:
    from playwright.sync_api import sync_playwright

    from explorer.registry import ENCODER_DECODER, STEPS

    views = [(step.slug, "tinytales", PAGE_SENTENCE) for step in STEPS if step.slug != "home"]
    views.append((ENCODER_DECODER.slug, "translate", "the red cat sees a green mouse"))
    built = {}
    with sync_playwright() as playwright, serve() as (base, _):
        browser = launch(playwright)
        page = browser.new_page()
        for slug, model, sentence in views:
            open_view(page, base, slug, model=model, text=sentence)
            page.wait_for_function(CHARTS_DRAWN)         # the first drawing is not an update
            page.evaluate(COUNT_CHARTS)
            typing_latencies([page], [sentence], rounds=updates, together=False)
            shown = page.locator(".js-plotly-plot").count()
            built[slug] = (shown, page.evaluate("window.__built") / updates)
        browser.close()
        first, later = visits(playwright, base)
        cores, processes, lab_built, runs = training_tab(playwright, base)
    report.record("browser.charts_built", max(n / shown if shown else float("inf") if n else 0.0
                                              for shown, n in built.values()))
    report.record("browser.first_chart_s", first["seconds"])
    report.record("browser.plotly_first_mb", first["plotly_mb"])
    report.record("browser.plotly_later_mb", later["plotly_mb"])
    report.record("browser.training_cores", cores)
    report.line(AREA, "Plotly charts per update (shown on the page / built by the browser): " + ", ".join(
        f"{slug} {shown} / {n:.1f}" for slug, (shown, n) in built.items()))
    report.line(AREA, f"a first visit (the attention page, an empty browser cache): {first['mb']:.2f} MB on the "
                      f"wire, {first['plotly_mb']:.2f} MB of it plotly.js (gzipped), every chart drawn after "
                      f"{first['seconds']:.1f} s; a later visit: {later['mb']:.2f} MB, plotly.js "
                      f"{later['plotly_mb']:.2f} MB, {later['seconds']:.1f} s")
    report.line(AREA, f"a training tab (tiny tales), in a browser of its own: its {processes} Chromium processes use "
                      f"{cores:.2f} cores from {TRAINING_AFTER_S:.0f} s after Start for {TRAINING_WINDOW_S:.0f} s "
                      f"({runs} script runs ended in it); "
                      f"meanwhile the tab built {lab_built[0]} Plotly and {lab_built[1]} Vega-Lite charts (the live "
                      "charts update in place)")
