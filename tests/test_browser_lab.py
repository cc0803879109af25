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


# Watches the lab's live views (the progress bar and every chart): how long each stays marked stale, and the
# faintest any is drawn, read at every frame the page paints. Streamlit marks a rerunning fragment's elements stale
# (data-stale) until they are drawn again, and its CSS greys a stale element after half a second ("opacity 1s
# ease-in 0.5s", down to a third): a view redrawn a little late on a busy machine fades by a hair, one left stale
# for a second and a half greys.
WATCH_STALE = """() => {
  const live = () => [...document.querySelectorAll('[data-testid=stElementContainer]')].filter(c =>
    c.querySelector('[data-testid=stProgress], [data-testid=stVegaLiteChart], .js-plotly-plot'));
  const watch = window.__stale = {live, periods: [], since: new Map(), faintest: 1, frames: 0};
  const check = () => { const now = performance.now();
    for (const c of live()) {
      const stale = c.getAttribute('data-stale') === 'true';
      if (stale && !watch.since.has(c)) watch.since.set(c, now);
      if (!stale && watch.since.has(c)) { watch.periods.push(now - watch.since.get(c)); watch.since.delete(c); }
    } };
  new MutationObserver(check).observe(document.body, {subtree: true, childList: true, attributes: true,
                                                       attributeFilter: ['data-stale']});
  const shown = c => { let o = 1; for (let n = c; n && n !== document.body; n = n.parentElement)
    o *= parseFloat(getComputedStyle(n).opacity); return o; };
  const frame = () => { watch.frames++;
    for (const c of live()) watch.faintest = Math.min(watch.faintest, shown(c));
    requestAnimationFrame(frame); };
  requestAnimationFrame(frame);
}"""
LIVE_VIEWS = "() => window.__stale.live().length"          # how many live views the page shows now


def test_the_labs_live_views_never_grey_while_a_model_trains(tab, app_url):
    """A student watching tiny tales train sees the progress bar and the charts, never greyed: for 15 s after the
    first steps they are redrawn again and again, and at every frame the page paints each is drawn at least 90%
    opaque (Streamlit greys a view left stale, to a third). Its training ticks in a fragment that draws nothing
    (pages/training.py). Timed on the page's own frames, not against a clock: a busy machine paints fewer."""
    from bench.live import start_tiny_tales
    start_tiny_tales(tab, app_url)
    expect(tab.locator("[data-testid='stProgress']")).to_contain_text(re.compile(r"step [1-9]\d* of"),
                                                                      timeout=60_000)
    expect(tab.locator("[data-testid='stVegaLiteChart']")).to_have_count(3)    # loss, metrics, attention
    tab.evaluate(WATCH_STALE)
    first = progress(tab)
    counts = []
    for _ in range(60):
        counts.append(tab.evaluate(LIVE_VIEWS))
        tab.wait_for_timeout(250)
    watch = tab.evaluate("() => ({periods: window.__stale.periods, faintest: window.__stale.faintest,"
                         " frames: window.__stale.frames})")
    last = progress(tab)
    tab.get_by_role("button", name="Pause", exact=True).click()
    expect(tab.locator("[data-testid='stProgress']")).to_contain_text("paused")

    assert last != first and "running" in last                       # it trained all along
    assert min(counts) == 4                                          # the progress bar and the three charts
    assert len(watch["periods"]) >= 4 and watch["frames"] > 0, watch   # redrawn while it trained ...
    assert watch["faintest"] >= 0.9, watch                           # ... and never greyed
