"""Where a browser's time goes: the Plotly charts it builds from scratch per update on each step page and the
encoder-decoder page (a chart redrawn in place builds none), and the CPU Chromium spends on a training tab."""
import time

from .live import (CHARTS_DRAWN, COUNT_CHARTS, PAGE_SENTENCE, chromium_pids, cpu_seconds, launch, open_view, serve,
                   start_tiny_tales, typing_latencies)
from .report import Report

AREA = "browser"


def run(report: Report, updates: int = 3, train_seconds: float = 10.0) -> None:
    from playwright.sync_api import sync_playwright

    from explorer.registry import ENCODER_DECODER, STEPS

    views = [(step.slug, "tinytales", PAGE_SENTENCE) for step in STEPS if step.slug != "home"]
    views.append((ENCODER_DECODER.slug, "translate", "the red cat sees a green mouse"))
    built = {}
    with sync_playwright() as playwright:
        browser = launch(playwright)
        with serve() as (base, _):
            page = browser.new_page()
            for slug, model, sentence in views:
                open_view(page, base, slug, model=model, text=sentence)
                page.wait_for_function(CHARTS_DRAWN)         # the first drawing is not an update
                page.evaluate(COUNT_CHARTS)
                typing_latencies([page], [sentence], rounds=updates, together=False)
                shown = page.locator(".js-plotly-plot").count()
                built[slug] = (shown, page.evaluate("window.__built") / updates)
            page.close()
            trainer = browser.new_page()
            start_tiny_tales(trainer, base)
            time.sleep(2)
            trainer.evaluate(COUNT_CHARTS)
            busy = []                   # the first window includes the page's warm-up (Vega's code, first charts)
            for _ in range(2):
                before, start = cpu_seconds(chromium_pids()), time.perf_counter()
                time.sleep(train_seconds)
                busy.append((cpu_seconds(chromium_pids()) - before) / (time.perf_counter() - start))
            lab_built = (trainer.evaluate("window.__built"), trainer.evaluate("window.__builtVega"))
            trainer.get_by_role("button", name="Pause", exact=True).click()
        browser.close()
    report.record("browser.charts_built", max(n / shown if shown else float("inf") if n else 0.0
                                              for shown, n in built.values()))
    report.record("browser.training_cores", busy[1])
    report.line(AREA, "Plotly charts per update (shown on the page / built by the browser): " + ", ".join(
        f"{slug} {shown} / {n:.1f}" for slug, (shown, n) in built.items()))
    report.line(AREA, f"a training tab (tiny tales): Chromium uses {busy[0]:.2f} cores in its first "
                      f"{train_seconds:.0f} s (the page's warm-up included), {busy[1]:.2f} cores in the next "
                      f"{train_seconds:.0f} s; in those {2 * train_seconds:.0f} s it built {lab_built[0]} Plotly and "
                      f"{lab_built[1]} Vega-Lite charts (the live charts update in place)")
