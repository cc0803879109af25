"""Presenter mode on a projector, in a real browser (Chromium through Playwright, see test_browser.py):
figures use the content width, no tab or link label is cut off (at 1920 x 1080 here; at 1366 x 768 in the walk
below), the camera button downloads a figure, and at 1366 x 768 every tab, opened as a teacher opens it, shows its
main chart whole on the first screen, every label whole, no chart text on top of another or cut off (browser_support's
MEASURE, as on a phone in the WCAG walk) and no WCAG 2.1 AA violation in dark (the WCAG walk checks every tab in
light; each page's first tab is opened in high contrast and checked in light and dark too), and the knobs of a
live demo in reach."""
import pytest
from playwright.sync_api import expect

from browser_support import (MEASURE, PROJECTOR, PROJECTOR_VIEWS, chart_text_problems,
                             first_screen, labels_clipped, main_element, open_view)
from explorer.view import DEFAULT_SENTENCE
from test_browser import rendered_plots
from test_browser_a11y import SCHEMES, check_all_schemes, open_tab, report

TABBED = ["tokenization", "embedding", "positions", "attention", "feedforward", "residual"]
SCREENS = [(1366, 768), (1920, 1080)]


@pytest.mark.parametrize("width, height", SCREENS)
def test_the_attention_pattern_spans_the_content_width_and_starts_on_the_first_screen(tab, app_url, width, height):
    tab.set_viewport_size({"width": width, "height": height})
    open_view(tab, app_url, "attention", presenter=1, section="Who looks at whom")
    assert rendered_plots(tab) == 2
    pattern = tab.locator(".js-plotly-plot").filter(
        has=tab.locator(".gtitle", has_text="Attention pattern"))
    content = tab.evaluate("""() => { const m = document.querySelector('[data-testid=stMainBlockContainer]');
        const s = getComputedStyle(m);
        return m.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight); }""")
    box = pattern.bounding_box()
    assert box["width"] >= 0.8 * content, (box["width"], content)
    assert box["y"] < height - 150, "the chart should start on the first screen"
    numbers = tab.locator(".js-plotly-plot .textpoint text").first          # the weights printed in the cells
    assert numbers.bounding_box()["height"] >= 14, "cell numbers too small to read on a projector"


def test_every_tab_and_link_label_is_whole_in_presenter_mode_on_a_wide_screen(tab, app_url):
    """At 1920 x 1080 (the projector's walk below checks every view at 1366 x 768, the WCAG walk a desktop's)."""
    tab.set_viewport_size({"width": 1920, "height": 1080})
    for slug in TABBED:
        open_view(tab, app_url, slug, presenter=1)
        expect(tab.locator("[data-testid=stPageLink-NavLink]")).to_have_count(2)      # the page ran to its end
        assert rendered_plots(tab) > 0 and tab.locator("[role=tab]").count() >= 4, slug
        assert tab.locator("[data-testid=stTabsScrollRight]:visible").count() == 0, slug   # no scroll arrow
        assert labels_clipped(tab) == [], slug


def open_sidebar(tab) -> None:
    """Open the sidebar, as a teacher does: presenter mode starts with it closed, but a tab of a browser where an
    earlier tab opened it starts with it open (seen when the camera test ran just before the knobs' test)."""
    expand = tab.get_by_test_id("stExpandSidebarButton")
    if expand.is_visible():
        expand.click()
    expect(tab.get_by_test_id("stSidebar")).to_be_in_viewport()


def test_the_camera_button_downloads_the_figure_at_presentation_size(tab, app_url):
    tab.set_viewport_size({"width": 1366, "height": 768})
    open_view(tab, app_url, "attention", presenter=1, section="Who looks at whom")
    rendered_plots(tab)
    chart = tab.locator(".js-plotly-plot").first
    chart.hover()
    with tab.expect_download() as png:
        chart.locator(".modebar-btn[data-title='Download plot as a PNG']").click()
    last = len(DEFAULT_SENTENCE.split()) - 1                  # the page opens on the last token, layer 0, head 0
    name = f"transformer-explorer-attention-pattern-layer0-head0-token{last}"
    assert png.value.suggested_filename == f"{name}.png"
    data = open(png.value.path(), "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(data[16:20], "big") == 1920   # PNG width
    open_sidebar(tab)
    tab.locator("[data-testid=stSidebar]").get_by_text("SVG", exact=True).click()
    tab.wait_for_selector("[data-test-script-state='notRunning']")
    chart = tab.locator(".js-plotly-plot").first
    expect(chart.locator(".modebar-btn[data-title='Download plot']")).to_have_count(1)   # names only PNG
    chart.hover()
    with tab.expect_download() as svg:
        chart.locator(".modebar-btn[data-title='Download plot']").click()
    assert svg.value.suggested_filename == f"{name}.svg"
    text = open(svg.value.path(), encoding="utf-8").read()
    assert text.startswith("<svg") and 'width="1920"' in text[:600] and "Attention pattern" in text


# --- a projector's first screen: every tab's main chart whole, without scrolling (issue 24) --------------------

SORT = {"model": "sort", "text": "7 3 9 1 5 2"}


PROJECTOR_PAGES = {slug: [label for s, label in PROJECTOR_VIEWS if s == slug] for slug, _ in PROJECTOR_VIEWS}


@pytest.mark.parametrize("slug", PROJECTOR_PAGES)
def test_every_tabs_main_chart_is_whole_on_a_projectors_first_screen(tab, app_url, slug):
    """A teacher's walk through the page's tabs in presenter mode, in a dark room: the first tab opened from its link
    in high contrast, the second from its link without it, and each next tab with a click, as a teacher opens it
    (the WCAG walk checks that every tab's link is the address bar's and names the tab)."""
    tab.set_viewport_size(PROJECTOR)
    tab.emulate_media(color_scheme="dark")                # a dark room's projector (the WCAG walk's tabs are light)
    tab.add_init_script("window.localStorage.clear()")     # a browser keeps a sidebar it opened: start as a new one
    for n, label in enumerate(PROJECTOR_PAGES[slug]):
        if n < 2:                                         # the first tab: with high contrast
            query = {"presenter": 1, **(SORT if slug == "encoder-decoder" else {})} \
                | ({"section": label} if label else {}) | ({"high_contrast": 1} if n == 0 else {})
            open_view(tab, app_url, slug, **query)
        else:
            open_tab(tab, label)
        check_projector_view(tab, slug, label, high_contrast=n == 0)


def check_projector_view(tab, slug: str, label: str | None, high_contrast: bool) -> None:
    """The view's main chart whole on the first screen, every label whole, the chart text readable, and no WCAG
    2.1 AA violation in dark (with `high_contrast`, in light and dark)."""
    if (slug, label) == ("why", "Patching"):                        # the page suggests a second sentence
        assert labels_clipped(tab) == [], (slug, label, "before a second sentence")
        tab.get_by_role("button", name="Try").click()
        tab.wait_for_selector("[data-test-script-state='notRunning']")
    seen = first_screen(tab, *main_element(slug, label))
    assert seen is not None, f"{slug} / {label}: no main element"
    assert tab.locator("[data-testid=stTabsScrollRight]:visible").count() == 0, slug   # every tab's label in the row
    assert labels_clipped(tab) == [], (slug, label)                                     # tabs, page links, buttons
    assert seen["share"] == pytest.approx(1.0, abs=1e-3), (slug, label, seen["share"], seen["top"], seen["bottom"])
    assert seen["scrolled"] == 0
    assert seen["sidebarRight"] <= 1, "presenter mode starts with the sidebar closed"
    if label:
        assert seen["rows"] == 1 and seen["open"] == label, (slug, label, seen["rows"], seen["open"])
        assert label.lower() not in seen["headings"], f"{slug}: the tab's label is repeated as a heading"
    assert all(p["inside"] for p in seen["plots"]), (slug, label, [p["title"] for p in seen["plots"] if not p["inside"]])
    repeated = [h for h in seen["headings"] if h in seen["chartTitles"] or seen["headings"].count(h) > 1]
    assert not repeated, (slug, label, repeated)                         # no heading says a title again
    tab.evaluate("() => document.fonts.ready")
    overlaps, cut = chart_text_problems({(slug, label): tab.evaluate(MEASURE, 2)})
    assert not overlaps and not cut, (overlaps, cut)                     # every chart's text readable
    found: list[str] = []                     # WCAG 2.1 AA in dark; the first tab in high contrast, light and dark
    check_all_schemes(tab, f"{slug}, presenter{', high contrast' if high_contrast else ''}, tab {label!r}", found,
                      SCHEMES if high_contrast else ["dark"])
    assert not found, report(found)


def test_a_projector_keeps_the_knobs_of_a_live_demo_in_reach(tab, app_url):
    """Opened, the sidebar shows the sentence and the presenter switch on its first screen; tables and metrics
    are enlarged for the back row."""
    tab.set_viewport_size(PROJECTOR)
    open_view(tab, app_url, "feedforward", presenter=1, section="Switched off")
    open_sidebar(tab)
    sidebar = tab.get_by_test_id("stSidebar")
    for control in (sidebar.get_by_role("textbox", name="Sentence"), sidebar.get_by_text("Presenter mode")):
        expect(control).to_be_in_viewport(ratio=1)
    value = tab.get_by_test_id("stMetricValue").first.get_by_text("%")
    assert value.evaluate("e => parseFloat(getComputedStyle(e).fontSize)") >= 40          # the back row reads it
    open_view(tab, app_url, "tokenization", presenter=1, section="The vocabulary")
    table = tab.get_by_test_id("stDataFrame").first
    expect(table).to_be_visible()
    # the canvas' text, enlarged: drawn wider on screen than its own layout width
    assert table.evaluate("e => e.getBoundingClientRect().width / e.offsetWidth") >= 1.25
    box, main = table.bounding_box(), tab.get_by_test_id("stMainBlockContainer").bounding_box()
    assert box["x"] + box["width"] <= main["x"] + main["width"] + 1, "the enlarged table stays inside the page"


def test_the_labs_loss_curve_is_whole_on_a_projectors_first_screen_once_a_run_exists(tab, app_url):
    tab.set_viewport_size(PROJECTOR)
    tab.add_init_script("window.localStorage.clear()")
    open_view(tab, app_url, "training", presenter=1)
    tab.get_by_role("button", name="Start").click()
    expect(tab.get_by_test_id("stVegaLiteChart").first).to_be_visible()
    expect(tab.get_by_test_id("stExpander").filter(has_text="1. Set up")).to_be_visible()   # the setup, folded
    seen = first_screen(tab, "[data-testid=stVegaLiteChart]", None)
    tab.get_by_role("button", name="Pause").click()
    assert seen["share"] == pytest.approx(1.0, abs=1e-3), (seen["share"], seen["top"], seen["bottom"])
    assert seen["sidebarRight"] <= 1
    for name in ("Start", "Pause", "Step", "Reset"):                  # the controls beside the curve
        expect(tab.get_by_role("button", name=name)).to_be_in_viewport(ratio=1)
