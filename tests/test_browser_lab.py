"""The training lab in a real browser, and deep links into a server that has just started."""
import re

from playwright.sync_api import expect

from browser_support import open_view, serve

FIRST_LOSS = 2.48                # ln(12): a random model's loss on the roses poem's 12 tokens


def progress(page) -> str:
    return page.locator("[data-testid='stProgress']").inner_text()


def pick(page, label: str, option: str) -> None:
    """Choose `option` in the selectbox labelled `label`."""
    page.locator(f"[data-testid='stSelectbox']:has(input[aria-label='{label}'])").click()
    page.get_by_role("option", name=option, exact=True).click()
    page.wait_for_timeout(300)
    page.wait_for_selector("[data-test-script-state='notRunning']")


def test_train_the_roses_poem_watch_the_loss_fall_pause_and_explore_it(tab, app_url):
    open_view(tab, app_url, "training")
    tab.get_by_role("button", name="Start", exact=True).click()
    expect(tab.locator("[data-testid='stProgress']")).to_contain_text("done", timeout=60_000)
    tab.wait_for_selector("[data-test-script-state='notRunning']")
    expect(tab.locator("[data-testid='stVegaLiteChart'] canvas, [data-testid='stVegaLiteChart'] svg").first) \
        .to_be_visible()                                      # the live loss curve (Vega-Lite, updated in place)
    loss = float(re.search(r"loss (\d+\.\d+)", progress(tab)).group(1))
    assert loss < 0.2 * FIRST_LOSS, progress(tab)
    assert tab.locator("[data-testid='stException']").count() == 0

    # a second run in slow motion, paused while it is still learning
    tab.get_by_text("Slow motion").click()
    tab.get_by_role("button", name="Reset", exact=True).click()
    tab.wait_for_selector("[data-test-script-state='notRunning']")
    tab.get_by_role("button", name="Start", exact=True).click()
    expect(tab.locator("[data-testid='stProgress']")).to_contain_text("running", timeout=20_000)
    tab.get_by_role("button", name="Pause", exact=True).click()
    expect(tab.locator("[data-testid='stProgress']")).to_contain_text("paused", timeout=20_000)
    steps = progress(tab)
    tab.wait_for_timeout(1500)
    assert progress(tab) == steps                 # paused means no more steps

    # the first run's model is in the picker: explore it on the attention page
    tab.locator("[data-testid='stSidebarNav'] a", has_text="4. Attention").click()
    tab.wait_for_selector("[data-test-script-state='notRunning']")
    pick(tab, "Model", "lab: run 1")
    expect(tab.locator("h1").first).to_contain_text("Attention")
    assert tab.locator("[data-testid='stSidebar'] input[aria-label='Model']").input_value() == "lab: run 1"
    tab.wait_for_selector(".js-plotly-plot .main-svg", state="attached")
    assert tab.locator("[data-testid='stException']").count() == 0


def test_a_deep_link_works_on_a_server_that_just_started(chromium):
    """The first visitor of a fresh server arrives by a copied link, not at the home page."""
    with serve() as (base, _):
        page = chromium.new_page()
        open_view(page, base, "attention", model="roses", text="roses are red", layer=1, head=0)
        assert page.locator("[data-testid='stException']").count() == 0
        expect(page.locator("h1").first).to_contain_text("Attention")
        assert page.locator("[data-testid='stSidebar'] input[aria-label='Model']").input_value() == "roses"
        assert page.locator("[data-testid='stSidebarNav']").count() == 1     # our navigation, not a fallback
        page.close()


def test_the_architecture_panel_draws_its_knobs_when_opened_and_keeps_them_when_closed(tab, app_url):
    open_view(tab, app_url, "training")
    layers = tab.get_by_label("Layers", exact=True)
    expect(layers).to_have_count(0)                                    # closed: the knobs are not on the page
    tab.get_by_text("Architecture", exact=True).click()
    expect(layers).to_have_value("2")                                  # the walkthrough preset: 2 layers
    layers.fill("3")
    layers.press("Enter")
    tab.wait_for_selector("[data-test-script-state='notRunning']")
    tab.get_by_text("Architecture", exact=True).click()                # closed again
    expect(layers).to_have_count(0)
    tab.get_by_text("Architecture", exact=True).click()
    expect(layers).to_have_value("3")                                  # the student's value is still there
    assert tab.locator("[data-testid='stException']").count() == 0


# Watches the lab's live views (the progress bar and every chart): how long each stays marked stale, and whether
# any is drawn dimmed. Streamlit marks a rerunning fragment's elements stale (data-stale) until they are drawn
# again, and its CSS greys a stale element after half a second (opacity, "1s ease-in 0.5s").
WATCH_STALE = """() => {
  const watch = window.__stale = {periods: [], since: new Map()};
  const live = c => c.querySelector('[data-testid=stProgress], [data-testid=stVegaLiteChart], .js-plotly-plot');
  const check = () => { const now = performance.now();
    for (const c of document.querySelectorAll('[data-testid=stElementContainer]')) {
      if (!live(c)) continue;
      const stale = c.getAttribute('data-stale') === 'true';
      if (stale && !watch.since.has(c)) watch.since.set(c, now);
      if (!stale && watch.since.has(c)) { watch.periods.push(now - watch.since.get(c)); watch.since.delete(c); }
    } };
  new MutationObserver(check).observe(document.body, {subtree: true, childList: true, attributes: true,
                                                       attributeFilter: ['data-stale']});
}"""

# One sample: the live views drawn dimmed (their own or an ancestor's computed opacity below 1), and how long
# the longest of those still marked stale has been.
SAMPLE_DIMMED = """() => {
  const live = [...document.querySelectorAll('[data-testid=stElementContainer]')].filter(c =>
    c.querySelector('[data-testid=stProgress], [data-testid=stVegaLiteChart], .js-plotly-plot'));
  const dimmed = c => { for (let n = c; n && n !== document.body; n = n.parentElement)
    if (parseFloat(getComputedStyle(n).opacity) < 1) return true; return false; };
  const now = performance.now();
  return {live: live.length, dimmed: live.filter(dimmed).length,
          staleFor: Math.max(0, ...[...window.__stale.since.values()].map(t => now - t))};
}"""


def test_the_labs_live_views_never_grey_while_a_model_trains(tab, app_url):
    """A student watching tiny tales train sees the progress bar and the charts, never greyed: 60 samples
    250 ms apart, after the first steps, find none dimmed, and none is marked stale for as long as Streamlit
    waits before greying it (0.5 s). Its training ticks in a fragment that draws nothing (pages/training.py)."""
    from bench.live import start_tiny_tales
    start_tiny_tales(tab, app_url)
    expect(tab.locator("[data-testid='stProgress']")).to_contain_text(re.compile(r"step [1-9]\d* of"),
                                                                      timeout=60_000)
    expect(tab.locator("[data-testid='stVegaLiteChart']")).to_have_count(3)    # loss, metrics, attention
    tab.evaluate(WATCH_STALE)
    first = progress(tab)
    samples = []
    for _ in range(60):
        samples.append(tab.evaluate(SAMPLE_DIMMED))
        tab.wait_for_timeout(250)
    periods = tab.evaluate("window.__stale.periods")
    last = progress(tab)
    tab.get_by_role("button", name="Pause", exact=True).click()
    expect(tab.locator("[data-testid='stProgress']")).to_contain_text("paused")

    assert last != first and "running" in last                       # it trained all along
    assert min(s["live"] for s in samples) == 4                      # the progress bar and the three charts
    assert [s for s in samples if s["dimmed"]] == []
    assert max(s["staleFor"] for s in samples) < 500
    assert periods and max(periods) < 500, periods                   # the live views were redrawn, never greyed
