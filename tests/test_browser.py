"""The app in a real browser: headless Chromium (Debian's) driven by Playwright against `streamlit run`.

What AppTest cannot see: that every page's figures are really drawn, that the sidebar drives the page,
that a copied link reopens a view, and that user text stays text (no script runs, no element appears).
Under CI (CI=true) a missing Chromium or Playwright fails these tests; on a laptop without them they skip.
"""
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from browser_support import open_view, type_sentence
from explorer.registry import LAB, STEPS
from explorer.view import DEFAULT_SENTENCE

WITHOUT_CHARTS = {"home"}                # every other step page draws Plotly figures
XSS = "<img src=x onerror=alert(1)>"


def rendered_plots(page) -> int:
    """How many Plotly figures are really drawn (their SVG exists), after waiting for the first one."""
    try:
        page.wait_for_selector(".js-plotly-plot .main-svg", state="attached", timeout=15_000)
    except PlaywrightTimeout:
        return 0
    return page.locator(".js-plotly-plot").count()


def selectbox_value(page, label: str) -> str:
    return page.locator(f"[data-testid='stSelectbox'] input[aria-label='{label}']").input_value()


def test_typing_a_sentence_in_the_sidebar_updates_the_page(tab, app_url):
    open_view(tab, app_url, "prediction")
    last = DEFAULT_SENTENCE.split()[-1]
    expect(tab.locator(".js-plotly-plot .gtitle").first).to_contain_text(f"after “{last}”")
    type_sentence(tab, "the dog chased the")
    titles = tab.locator(".js-plotly-plot .gtitle")
    expect(titles.filter(has_text="Next-token probabilities")).to_contain_text("after “the” (position 3)")
    assert selectbox_value(tab, "Show what the model predicted after token") == "3: the"
    assert "text=the+dog+chased+the" in tab.url
    assert tab.locator("[data-testid='stException']").count() == 0


# Marks every chart div and counts the charts plotly.js builds from scratch (each adds an .svg-container).
WATCH_CHARTS = """() => { window.__built = 0;
  document.querySelectorAll('.js-plotly-plot').forEach((plot, n) => plot.dataset.seen = n);
  new MutationObserver(ms => { for (const m of ms) for (const n of m.addedNodes) if (n.nodeType === 1)
    window.__built += (n.matches('.svg-container') ? 1 : 0) + n.querySelectorAll('.svg-container').length; })
  .observe(document.body, {subtree: true, childList: true}); }"""


def test_a_new_sentence_redraws_the_same_charts_in_place(tab, app_url):
    open_view(tab, app_url, "prediction")
    expect(tab.locator(".js-plotly-plot .gtitle").first).to_contain_text(f"after “{DEFAULT_SENTENCE.split()[-1]}”")
    tab.evaluate(WATCH_CHARTS)
    for sentence in ["the dog chased the", "the zqx cat sat on", "a cat"]:     # a notice comes and goes
        type_sentence(tab, sentence)
        picked = selectbox_value(tab, "Show what the model predicted after token").split(": ", 1)[1]
        expect(tab.locator(".js-plotly-plot .gtitle").first).to_contain_text(f"after “{picked}”")
        assert picked == sentence.split()[-1]       # a new sentence opens on its last token, as the big picture
    assert tab.evaluate("window.__built") == 0, "a chart was built again instead of redrawn"
    seen = tab.evaluate("[...document.querySelectorAll('.js-plotly-plot')].map(plot => plot.dataset.seen)")
    assert seen == ["0", "1"]                       # the very chart elements of the first sentence
    bars = tab.locator(".js-plotly-plot").nth(1).locator(".bars .point").first      # the favourite's bar
    bars.hover(force=True)                          # plotly reads the mouse from the layer above the bar
    expect(tab.locator(".hoverlayer .hovertext").first).to_contain_text("logit")    # exact values on hover


def test_show_the_math_draws_its_content_when_opened(tab, app_url):
    open_view(tab, app_url, "prediction")
    expect(tab.locator(".js-plotly-plot")).to_have_count(2)          # closed: the forecast's two charts only
    tab.get_by_text("Show the math").click()
    expect(tab.get_by_text("Softmax at temperature 1")).to_be_visible()
    expect(tab.locator(".js-plotly-plot")).to_have_count(3)          # + the cumulative chance
    assert tab.locator("[data-testid='stException']").count() == 0


def test_a_copied_link_reopens_the_same_view(tab, app_url):
    open_view(tab, app_url, "attention", model="roses", text="roses are red", layer=1, head=1, token=2,
              section="Who looks at whom")
    sidebar = tab.locator("[data-testid='stSidebar']")
    expect(sidebar.locator("input[aria-label='Model']")).to_have_value("roses")      # waits for the page's
    expect(sidebar.get_by_role("textbox", name="Sentence")).to_have_value("roses are red")   # widgets to fill
    assert tab.locator("[data-testid='stException']").count() == 0
    assert selectbox_value(tab, "Layer") == "1"
    assert selectbox_value(tab, "Head") == "1"
    assert selectbox_value(tab, "Query token") == "2: red"
    expect(tab.get_by_role("tab", name="Who looks at whom")).to_have_attribute("aria-selected", "true")
    expect(tab.locator(".gtitle").filter(has_text="Attention pattern of layer 1 head 1")).to_be_visible()


def test_only_the_open_section_is_drawn_and_a_click_opens_another(tab, app_url):
    open_view(tab, app_url, "attention", text="the cat sat on the mat")
    expect(tab.locator(".js-plotly-plot")).to_have_count(1)                 # Q, K and V: one figure
    expect(tab.locator(".js-plotly-plot .annotation-text")).to_have_text(
        ["Q: the questions", "K: the labels", "V: the answers"])
    tab.get_by_role("tab", name="Every head").click()
    expect(tab.locator(".gtitle").filter(has_text="Every head in every layer")).to_be_visible()
    expect(tab.locator(".js-plotly-plot")).to_have_count(1)
    tab.wait_for_url(lambda url: "section=Every+head" in url)               # the link reopens this section


def test_html_in_the_sentence_is_shown_as_text_and_never_runs(tab, app_url):
    open_view(tab, app_url, "prediction")
    type_sentence(tab, XSS)
    assert tab.get_by_role("textbox", name="Sentence").input_value() == XSS
    tab.get_by_role("button", name="Next token").click()
    expect(tab.get_by_text(f"“{XSS}” +")).to_be_visible()        # the sentence, shown as plain text
    for step in STEPS:                                             # and on every page, opened from a link
        open_view(tab, app_url, step.slug, text=XSS)
        assert tab.locator("img[src='x']").count() == 0, f"an <img> from the sentence appeared on {step.slug}"
        assert tab.locator("[data-testid='stException']").count() == 0, step.slug
    tab.wait_for_timeout(300)
    assert tab.dialogs == [], f"a dialog opened: {tab.dialogs}"


SHOTS = Path(__file__).resolve().parents[1] / "build" / "screenshots"
README_SECTIONS = {"residual": "Logit lens", "attention": "Who looks at whom"}      # the tab a page's README picture shows (else its first)
README_PICTURES = {False: ["home", "attention", "residual", "prediction", LAB.slug], True: ["attention"]}  # docs/screenshots/

# The page's content height once it has kept it for 5 polls in a row (100 ms apart) with every chart drawn: a chart
# drawn only once visible can make the page grow again.
_SETTLED_HEIGHT = """() => {
  const height = Math.max(document.documentElement.scrollHeight,
    ...[...document.querySelectorAll('[data-testid=stMain], [data-testid=stAppViewContainer]')].map(e => e.scrollHeight));
  const drawn = [...document.querySelectorAll('.explorer-plot')].every(p => p.dataset.drawn === 'yes');
  const s = window.__height || {};
  window.__height = {last: height, same: drawn && s.last === height ? (s.same || 0) + 1 : 0};
  return window.__height.same >= 5 ? height : null;
}"""


def settled_height(tab) -> int:
    tab.evaluate("() => { window.__height = null; }")
    return tab.wait_for_function(_SETTLED_HEIGHT, polling=100).json_value()


@pytest.mark.parametrize("presenter", [False, True])
def test_screenshots_of_the_readme_pages(tab, app_url, presenter):
    """Full-page screenshots of the README's pictures into build/screenshots/ (docs/screenshots/ are copied from
    there): the window made as tall as the page's content, so the picture holds all of it."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    tab.set_viewport_size({"width": 1280, "height": 900})
    for slug in README_PICTURES[presenter]:
        query = {"presenter": 1} if presenter else {}
        if slug in README_SECTIONS:
            query["section"] = README_SECTIONS[slug]
        open_view(tab, app_url, slug, **query)
        if "section" in query:                          # a link opens that tab
            expect(tab.get_by_role("tab", name=query["section"])).to_have_attribute("aria-selected", "true")
        if slug not in WITHOUT_CHARTS | {LAB.slug}:
            assert rendered_plots(tab) > 0, slug
        # Streamlit scrolls inside its own container, so a "full page" screenshot stops at the window:
        # make the window as tall as the page's content instead, then shoot it whole.
        for _ in range(4):
            if (height := settled_height(tab)) == tab.viewport_size["height"]:
                break
            tab.set_viewport_size({"width": 1280, "height": min(height, 8000)})
        assert tab.viewport_size["height"] == min(settled_height(tab), 8000), slug      # all of it
        path = SHOTS / f"{slug}{'-presenter' if presenter else ''}.png"
        tab.screenshot(path=str(path))
        tab.set_viewport_size({"width": 1280, "height": 900})
        assert path.stat().st_size > 20_000, f"{path.name} looks empty"
        assert tab.locator("[data-testid='stException']").count() == 0, slug
