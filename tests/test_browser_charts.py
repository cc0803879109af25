"""Charts in a real browser: one focusable figure a screen reader announces by its sentence, a toolbar of two
buttons out of the tab order and nothing that reaches Plotly's servers, a table behind a click, and the page's
theme (light or dark) on every chart."""
import pytest
from playwright.sync_api import expect

from browser_support import open_view, serve
from explorer.plot import MASKED

CHARTS_DRAWN = """() => { const hosts = [...document.querySelectorAll('.stElementContainer[class*="st-key-chart_"]')];
  return hosts.length > 0 && hosts.every(h => { const p = h.querySelector('.explorer-plot');
                                                return p && p.dataset.drawn === 'yes'; }); }"""

CHARTS = """() => [...document.querySelectorAll('.explorer-chart')].map(frame => {
  const plot = frame.querySelector('.explorer-plot');
  return {role: frame.getAttribute('role'), tabindex: frame.getAttribute('tabindex'),
          label: frame.getAttribute('aria-label'), hidden: plot.getAttribute('aria-hidden'),
          title: (plot.querySelector('.gtitle') || {}).textContent || '',
          buttons: [...plot.querySelectorAll('.modebar-btn')].map(b => [b.dataset.title, b.getAttribute('tabindex')]),
          links: plot.querySelectorAll('a[href]').length,
          paper: plot._fullLayout.paper_bgcolor, plotBackground: plot._fullLayout.plot_bgcolor}; })"""


def test_each_chart_is_one_labelled_stop_with_a_two_button_toolbar_and_a_table(tab, app_url):
    open_view(tab, app_url, "prediction")
    tab.wait_for_function(CHARTS_DRAWN)
    charts = tab.evaluate(CHARTS)
    assert len(charts) == 2
    for chart in charts:
        assert chart["role"] == "figure" and chart["tabindex"] == "0" and chart["hidden"] == "true"
        assert chart["label"].startswith(chart["title"].split("“")[0]) and "largest" in chart["label"]
        assert chart["buttons"] == [["Download plot as a PNG", "-1"], ["Reset axes", "-1"]]   # no "Share chart..."
        assert chart["links"] == 0                                                 # no Plotly logo link
    assert "Next-token probabilities" in charts[1]["label"] and "(1.00)" in charts[1]["label"]

    first = tab.locator(".explorer-chart").first
    first.focus()
    tab.keyboard.press("Tab")                     # the next stop is past the chart's toolbar
    assert tab.evaluate("() => !document.activeElement.closest('.modebar') && "
                        "!document.activeElement.closest('.explorer-plot')")
    outline = tab.evaluate("""() => { const f = document.querySelector('.explorer-chart'); f.focus();
                                      return getComputedStyle(f).outlineStyle; }""")
    assert outline == "solid"                    # a visible focus ring (:focus-visible after keyboard use)

    panel = tab.locator("[data-testid='stExpander']", has_text="Show as a table").first
    panel.locator("summary").click()
    tab.wait_for_selector("[data-test-script-state='notRunning']")
    expect(panel.locator("[data-testid='stDataFrame']")).to_be_visible()


@pytest.fixture(scope="module")
def dark_app():
    """The app with Streamlit's dark theme (what a device set to dark gets once the theme follows it)."""
    dark = {"STREAMLIT_THEME_BASE": "dark", "STREAMLIT_THEME_BACKGROUND_COLOR": "#0e1117",
            "STREAMLIT_THEME_TEXT_COLOR": "#fafafa", "STREAMLIT_THEME_SECONDARY_BACKGROUND_COLOR": "#262730"}
    with serve(env=dark) as (base, _server):
        yield base


def _luminance(css: str) -> float:
    """Relative luminance of a CSS colour ("rgb(r, g, b)" or "#rrggbb")."""
    if css.startswith("#"):
        rgb = [int(css[i:i + 2], 16) for i in (1, 3, 5)]
    else:
        rgb = [int(float(c)) for c in css[css.index("(") + 1:css.index(")")].split(",")[:3]]
    channel = [c / 255 for c in rgb]
    channel = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channel]
    return 0.2126 * channel[0] + 0.7152 * channel[1] + 0.0722 * channel[2]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_charts_follow_the_page_theme_and_masked_cells_are_one_grey(theme, chromium, app_url, request):
    base = request.getfixturevalue("dark_app") if theme == "dark" else app_url
    context = chromium.new_context(viewport={"width": 1280, "height": 1000}, color_scheme=theme)
    page = context.new_page()
    try:
        open_view(page, base, "attention", section="Who looks at whom")
        page.wait_for_function(CHARTS_DRAWN)
        app = page.evaluate("() => getComputedStyle(document.querySelector('[data-testid=stApp]')).backgroundColor")
        charts = page.evaluate(CHARTS)
        assert (_luminance(app) < 0.2) == (theme == "dark")
        for chart in charts:                                  # the chart's paper is the page's own background
            assert abs(_luminance(chart["paper"]) - _luminance(app)) < 0.02, (chart["title"], chart["paper"], app)
        pattern = next(c for c in charts if c["title"].startswith("Attention pattern"))
        assert pattern["plotBackground"].lower() == MASKED.lower()
        ink = page.evaluate("() => getComputedStyle(document.querySelector('.explorer-plot .gtitle')).fill")
        assert (_luminance(ink) > 0.5) == (theme == "dark")  # titles light on dark, dark on light
    finally:
        context.close()


def test_charts_follow_the_device_when_it_switches_between_light_and_dark_on_an_open_page(tab, app_url):
    """A phone turns dark at sunset with the page open: Streamlit restyles the page without a run, and the charts
    ask for the run that draws them in the new theme (chart.js, `followTheme`); and back to light."""
    tab.emulate_media(color_scheme="light")
    open_view(tab, app_url, "attention", section="Who looks at whom")
    tab.wait_for_function(CHARTS_DRAWN)
    for scheme in ("dark", "light"):
        tab.emulate_media(color_scheme=scheme)
        tab.wait_for_function("scheme => [...document.querySelectorAll('.explorer-plot')]"
                              ".every(p => p.dataset.theme === scheme && p.dataset.drawn === 'yes')", arg=scheme)
        app = tab.evaluate("() => getComputedStyle(document.querySelector('[data-testid=stApp]')).backgroundColor")
        charts = tab.evaluate(CHARTS)
        assert len(charts) == 2 and (_luminance(app) < 0.2) == (scheme == "dark")
        for chart in charts:                                  # the chart's paper is the page's own background
            assert abs(_luminance(chart["paper"]) - _luminance(app)) < 0.02, (scheme, chart["title"], chart["paper"])
