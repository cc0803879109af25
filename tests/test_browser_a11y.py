"""WCAG 2.1 AA as axe-core measures it, in a real browser (Chromium through Playwright, see test_browser.py).

axe-core runs its WCAG 2.0 and 2.1 level A and AA rules on every page and every tab (each tab is opened with a
click, as a student opens it: its content is drawn only then), on the lab, the discoveries (a card revealed), the
encoder-decoder page and presenter mode (with and without high contrast), at a projector's 1366 x 768 and a
phone (390 x 844, with a phone's User-Agent: the layout the app gives a phone). Every view is checked with the
device set to light, each page's first view on a desktop in dark too; every tab is checked in dark in presenter
mode by the projector's walk (tests/test_browser_presenter.py), since a scheme's colours do not change with the
size. Any violation fails, charts included, with the rule, where it is and what is wrong; so does a page that scrolls
sideways on the phone (reflow, which axe does not check). A live class (the teacher's open class and tally, a
student's phone answered and revealed) is checked as tests/test_browser_lessons.py leads one. axe-core comes with
axe-playwright-python: nothing is downloaded.

The walk over every page and tab also checks what else a visit to each view must show: no exception on any tab,
the page's title and its charts drawn, every request and websocket to the app's own server (one browser profile per
device: its first page is a student's first visit, nothing cached), the page's link is the browser's URL and names
the open tab (tests/test_browser_links.py reopens choices made on a page exactly in another profile); on a
desktop, every tab, page link and button label whole; on a phone, no chart text on another or cut, and every control
a finger's size.
"""
import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

from bench.live import CHARTS_DRAWN, RUN_ENDED
from browser_support import (CHARTLESS_PAGES, MEASURE, PHONE, PROJECTOR, PROJECTOR_FIRST_TABS, chart_text_problems,
                             labels_clipped, logged_tab, only_the_app_was_asked, open_view, small_targets,
                             wait_until_run)
from explorer.registry import BY_SLUG, NAVIGATION
from test_browser_links import Case, visit

WCAG_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
DEVICES = {"desktop": {"viewport": PROJECTOR}, "phone": PHONE}       # a phone's screen, touch and User-Agent: its layout
SCHEMES = ["light", "dark"]
axe = Axe()
ENCODER_DECODER_VIEW = {"model": "translate", "text": "the red cat sleeps"}
QUERY = {"encoder-decoder": ENCODER_DECODER_VIEW,
         "prediction": {"token": 3},                 # an earlier token: its chart marks the word that came next
         "learning": {"model": "pythia-70m",         # Pythia's steps in the live server's cache (conftest)
                      "text": "The cat sat on the mat. The cat sat on the"}}


# Every chart is drawn in the page's colour scheme: after a switch, the charts ask for the run that draws them anew
# (explorer/app/components/chart.js, `followTheme`), and the run has ended (bench/live.py RUN_ENDED, without
# waiting for one to start: a chart drawn in the new scheme comes from it).
IN_SCHEME = """scheme => [...document.querySelectorAll('.explorer-plot')].every(p => p.dataset.drawn === 'yes'
                                                                              && p.dataset.theme === scheme)
                         && (""" + RUN_ENDED.split("=>", 1)[1] + ")"


def in_scheme(page, scheme: str) -> None:
    """Wait until the page shows `scheme` everywhere, its charts included (IN_SCHEME)."""
    page.wait_for_function(IN_SCHEME, arg=scheme, polling=100)


def settle(page, rerun: bool = True) -> None:
    """Wait for the script run (`rerun`: the last action started one), and for every chart on the page to be drawn."""
    if rerun:
        wait_until_run(page)
    if page.locator(".explorer-plot").count():
        page.wait_for_function(CHARTS_DRAWN, polling=100)
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
    page.wait_for_function(TRANSITIONS_ENDED, polling=100)


# No colour is still on its way (a switch to dark fades a button's background: read mid-way, a dark-mode lab button
# once measured 3.93 to 1 between its two colours).
TRANSITIONS_ENDED = """() => document.getAnimations().every(a => !(a instanceof CSSTransition) || a.playState !== 'running')"""


def violations(page) -> list[str]:
    """axe-core's WCAG 2.1 A/AA violations on the page as it is, one line per element."""
    if not page.evaluate("() => typeof window.axe === 'object'"):      # once per document: the script is 570 KB
        page.evaluate(axe.axe_script)
    response = page.evaluate("options => axe.run(options)",
                             {"runOnly": {"type": "tag", "values": WCAG_AA}, "resultTypes": ["violations"]})
    lines = []
    for rule in response["violations"]:
        for node in rule["nodes"]:
            where = " > ".join(str(t) for t in node["target"])
            summary = " ".join((node.get("failureSummary") or "").split())
            lines.append(f"{rule['id']} ({rule['impact']}) at {where}: {rule['help']}. {summary[:300]}")
    return lines


# WCAG 2.1's reflow (1.4.10): nothing scrolls sideways on a narrow screen. The document and Streamlit's main area
# (which scrolls on its own) are no wider than the window; if they are, the elements that stick out the furthest.
TOO_WIDE = """() => {
  const width = document.documentElement.clientWidth;
  const boxes = [document.documentElement, document.querySelector('[data-testid=stMain]')].filter(Boolean);
  const widest = Math.max(...boxes.map(b => b.scrollWidth));
  if (widest <= width) return null;
  const out = [...document.querySelectorAll('[data-testid=stMain] *')]
    .filter(e => e.getBoundingClientRect().right > width + 1 && e.getBoundingClientRect().width > 0)
    .sort((a, b) => b.getBoundingClientRect().right - a.getBoundingClientRect().right).slice(0, 3)
    .map(e => (e.closest('[data-testid]') || e).dataset.testid + ' ' + e.tagName.toLowerCase()
              + ' "' + (e.innerText || '').trim().slice(0, 40) + '"');
  return `${widest} px wide in a ${width} px window, scrolls sideways: ${out.join('; ')}`;
}"""


def check_all_schemes(page, what: str, found: list[str], schemes: list[str] = SCHEMES) -> None:
    """Run axe with the device set to light and to dark (or `schemes`), the one it is in first; add what it finds to
    `found`, saying where. On a phone, also whether the page scrolls sideways."""
    now = scheme_now(page)
    for scheme in sorted(schemes, key=lambda s: s != now):
        if scheme != now:
            page.emulate_media(color_scheme=scheme)
        in_scheme(page, scheme)
        settle(page, rerun=False)
        found += [f"[{what}, {scheme}] {line}" for line in violations(page)]
    if errors := page.locator("[data-testid=stException]").all_inner_texts():
        found.append(f"[{what}] the page shows an exception: {errors[0][:300]}")
    if page.viewport_size["width"] < 500 and (wide := page.evaluate(TOO_WIDE)):
        found.append(f"[{what}] reflow (WCAG 1.4.10): {wide}")


def open_tab(page, label: str) -> None:
    """Click a tab open, as a student does, near the top of its label, and wait for its content (drawn only when
    open). (On a phone a table's toolbar, shown on touch screens, covers the lower part of the tab row below it:
    the encoder-decoder's "What if?" beside "Decoding step by step".)"""
    page.get_by_role("tab", name=label, exact=True).click(position={"x": 12, "y": 6})
    page.wait_for_function("label => [...document.querySelectorAll('[role=tab][aria-selected=true]')]"
                           ".some(t => t.innerText.trim() === label)", arg=label)
    settle(page)


def reveal_a_discovery(page) -> None:
    """Guess on the first card and reveal it (a revealed card shows the verdict, the answer and "Show me")."""
    page.locator("[data-testid=stMain] [data-testid=stRadio] [role=radiogroup] label").first.click()
    settle(page)
    page.get_by_role("button", name="Reveal", disabled=False).first.click()
    page.get_by_role("button", name="Show me").first.wait_for()
    settle(page)


PAGES = [page.slug for page in NAVIGATION]          # every page of the sidebar (explorer/registry.py)


def report(found: list[str]) -> str:
    return f"{len(found)} WCAG 2.1 AA violation(s):\n" + "\n".join(found)


def scheme_now(page) -> str:
    return "dark" if page.evaluate("() => matchMedia('(prefers-color-scheme: dark)').matches") else "light"


@pytest.fixture(scope="module")
def profile_of(chromium):
    """One browser profile per device for the walk over every page, made with the device set to dark on a desktop
    (its first view is checked in dark, then light) and light on a phone: its first page is a student's first visit
    (nothing cached), the next are a student's visits to the other pages."""
    made = {}

    def profile(size: str):
        if size not in made:
            made[size] = chromium.new_context(**DEVICES[size], color_scheme="light" if size == "phone" else "dark")
        return made[size]
    yield profile
    for context in made.values():
        context.close()


@pytest.mark.parametrize("size", DEVICES)
@pytest.mark.parametrize("slug", PAGES)
def test_every_page_and_tab_has_no_wcag_violation(profile_of, app_url, slug, size):
    """Every view of the page (each tab, and a revealed card) in a new tab of the device's profile: WCAG 2.1 AA, no
    exception, the page's own title, its charts drawn, every request to the app's own server, and the page's link is
    the browser's URL and names the open tab (tests/test_browser_links.py, `visit`). On a desktop every tab, page
    link and button label is whole; on a phone, every chart's text is whole and apart and every control fits a
    finger (browser_support's MEASURE and small_targets).
    Every view is checked in light; dark on a desktop's first view of the page, and on every tab in the projector's
    walk (tests/test_browser_presenter.py, presenter mode at 1366 x 768): a scheme's colours are the same at every
    size, so each tab is checked once in each scheme, and each layout in light."""
    phone = size == "phone"
    tab = logged_tab(profile_of(size))
    page = BY_SLUG[slug]
    labels = page.labels or [None]
    found: list[str] = []
    measured, charts = {}, 0
    try:
        open_view(tab, app_url, slug, **QUERY.get(slug, {}))
        expect(tab.locator("[data-testid=stMain] h1").first).to_contain_text(page.title)
        for n, label in enumerate(labels):
            if n:
                open_tab(tab, label)
            what = f"{slug}, {size}" + (f", tab {label!r}" if label else "")
            check_all_schemes(tab, what, found, SCHEMES if n == 0 and not phone else ["light"])
            charts += tab.locator(".js-plotly-plot").count()
            visit(tab, app_url, Case(what, slug, QUERY.get(slug, {}), tab=label), arrive=False)
            if phone:
                measured[(slug, label)] = {**tab.evaluate(MEASURE, 2), "small": small_targets(tab)}
            else:
                assert tab.locator("[data-testid=stTabsScrollRight]:visible").count() == 0, what  # no scroll arrow
                assert labels_clipped(tab) == [], what
        if slug == "discoveries":
            reveal_a_discovery(tab)
            check_all_schemes(tab, f"{slug}, {size}, a card revealed", found, ["light"] if phone else SCHEMES)
        assert not found, report(found)
        only_the_app_was_asked(tab, app_url)
        assert slug in CHARTLESS_PAGES or charts > 0, f"the {slug} page drew no chart"
    finally:
        tab.close()
    if phone:
        overlaps, cut = chart_text_problems(measured)
        small = {view: r["small"] for view, r in measured.items() if r["small"]}
        assert not overlaps and not cut and not small, (overlaps, cut, small)


@pytest.mark.parametrize("slug", [slug for slug in PAGES if slug not in PROJECTOR_FIRST_TABS])
def test_presenter_mode_has_no_wcag_violation_with_or_without_high_contrast(tab, app_url, slug):
    """The pages the projector's walk does not open, in presenter mode with and without high contrast, light and
    dark (tests/test_browser_presenter.py checks every other page's first tab in high contrast, as it opens it, and
    every tab without it)."""
    tab.set_viewport_size({"width": 1366, "height": 768})
    found: list[str] = []
    for high_contrast in (0, 1):
        open_view(tab, app_url, slug, presenter=1, high_contrast=high_contrast)
        check_all_schemes(tab, f"{slug}, presenter" + (", high contrast" if high_contrast else ""), found)
    assert not found, report(found)


# Text axe-core leaves "incomplete" (it cannot find the background behind a tab's label, drawn over a pseudo
# element): each tab label's and primary button's text colour against the first opaque background behind it.
TEXT_CONTRAST = """selector => [...document.querySelectorAll(selector)].map(el => {
  const parts = c => c.match(/[\\d.]+/g).map(Number);
  const lum = c => { const f = v => { v /= 255; return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    const [r, g, b] = parts(c); return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const text = [...el.querySelectorAll('p, span')].find(e => e.innerText.trim()) || el;
  let behind = 'rgb(255, 255, 255)';
  for (let e = text; e; e = e.parentElement) {
    const c = getComputedStyle(e).backgroundColor, p = parts(c);
    if (p.length < 4 || p[3] > 0.5) { behind = c; break; }
  }
  const [a, b] = [lum(getComputedStyle(text).color), lum(behind)];
  return {label: el.innerText.trim(), colour: getComputedStyle(text).color, behind,
          contrast: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)};
})"""


def settled_contrast(tab, selector: str) -> list[dict]:
    """TEXT_CONTRAST once no colour of those elements is still changing (a tab's label fades to its colour: read
    mid-way, under load, a dark-mode label once measured 4.07 on its way to its final colour)."""
    tab.wait_for_function("sel => [...document.querySelectorAll(sel)].every(el => "
                          "el.getAnimations({subtree: true}).length === 0)", arg=selector)
    return tab.evaluate(TEXT_CONTRAST, selector)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_tab_labels_and_primary_buttons_read_at_4_5_to_1_where_axe_cannot_tell(tab, app_url, scheme):
    tab.set_viewport_size({"width": 1366, "height": 768})
    tab.emulate_media(color_scheme=scheme)
    open_view(tab, app_url, "training")
    tab.get_by_role("button", name="Start").wait_for()
    buttons = settled_contrast(tab, "button[kind=primary]")
    open_view(tab, app_url, "attention")
    tabs = settled_contrast(tab, "[data-testid=stTabs] [role=tab]")
    assert any(b["label"].endswith("Start") for b in buttons), buttons
    assert len(tabs) == len(BY_SLUG["attention"].labels)
    weak = [t for t in buttons + tabs if t["contrast"] < 4.5]
    assert not weak, weak
