"""A real server and a real browser for the browser tests: the benchmark's own (bench/live.py), so tests and
benchmark start the app and wait for it the same way, plus what only tests do: a phone's browser, and what a
first screen shows (which element is a view's main one, and how much of it is on screen).
The tests drive Chromium's headless shell (bench/live.py, HEADLESS_SHELL: the same engine, 12% less CPU)."""
from urllib.parse import quote_plus, urlsplit

from playwright.sync_api import TimeoutError as PlaywrightTimeout

from bench import live
from bench.live import HEADLESS_SHELL as CHROMIUM, ROOT, open_view, rss_mb, serve, wait_until_run  # noqa: F401
from conftest import BROWSER_TIMEOUT_MS
from explorer.registry import ENCODER_DECODER, FEATURES, STEPS


def launch(playwright):
    """The tests' browser: Chromium's headless shell."""
    return live.launch(playwright, CHROMIUM)


def type_sentence(page, text: str) -> None:
    """Type into the sidebar's Sentence box and press Enter; wait for the rerun to finish."""
    box = page.get_by_role("textbox", name="Sentence")
    box.fill(text)
    box.press("Enter")
    page.wait_for_url(lambda url: quote_plus(text) in url)      # the view reached the URL: the run started
    page.wait_for_selector("[data-test-script-state='notRunning']")


# A student's phone: its screen, touch, and the User-Agent its browser sends (a phone's says "Mobile"; the server
# lays a page out for a small screen by it, explorer/app/layout.py). A browser context's arguments.
PHONE_UA = ("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
            "Chrome/131.0.0.0 Mobile Safari/537.36")
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True, "user_agent": PHONE_UA}
PROJECTOR = {"width": 1366, "height": 768}


# --- a view's main element, and how much of it the first screen shows ----------------------------------------

# The main chart of a tab that has several (by its title's first words); other tabs: their first chart. A tab
# without a chart: its first table, or its choices. Pages and tabs as the registry names them.
MAIN_CHART = {("attention", "Who looks at whom"): "Attention pattern",
              ("feedforward", "The strongest neurons"): "Strongest neurons",
              ("prediction", None): "Next-token probabilities"}
NO_CHART = {("tokenization", "The vocabulary"): "[data-testid=stDataFrame]",
            ("encoder-decoder", "Decoding step by step"): "[data-testid=stDataFrame]",
            ("encoder-decoder", "What if?"): "[data-testid=stRadio]",
            # a dictionary's card (its first chart) or, for a model without one, the notice that says how to get one
            ("features", "Dictionary features"): ".explorer-chart, [data-testid=stAlert]"}
CHARTLESS_PAGES = {"home", "class", "discoveries", "training"}     # no Plotly chart until a student acts

# A projector's views: every tab of every page that explains a model, and the prediction page (which has none). The
# projector walk (tests/test_browser_presenter.py) opens each in presenter mode, and checks the first tab of each
# page for WCAG too (tests/test_browser_a11y.py checks the other pages, and every page in high contrast).
PROJECTOR_VIEWS = [(page.slug, label) for page in [*STEPS, ENCODER_DECODER, FEATURES] for label in page.labels] \
    + [("prediction", None)]
PROJECTOR_FIRST_TABS = {slug: label for slug, label in reversed(PROJECTOR_VIEWS)}     # page -> its first tab (or None)


def main_element(slug: str, label: str | None) -> tuple[str, str | None] | None:
    """(CSS selector, chart title's first words or None) of view (page `slug`, tab `label`)'s main element; None
    for a page without a chart."""
    if slug in CHARTLESS_PAGES:
        return None
    return NO_CHART.get((slug, label), ".explorer-chart"), MAIN_CHART.get((slug, label))


# Where a view's main element is and what its page shows around it, as the window shows it now.
FIRST_SCREEN = """([selector, title]) => {
  const main = document.querySelector('[data-testid=stMain]');
  const shown = e => e.offsetParent !== null && e.getBoundingClientRect().height > 0;
  const candidates = [...main.querySelectorAll(selector)].filter(shown);
  const target = title ? candidates.find(c => ((c.querySelector('.gtitle') || {}).textContent || '').startsWith(title))
                       : candidates[0];
  if (!target) return null;
  const r = target.getBoundingClientRect(), H = window.innerHeight, W = document.documentElement.clientWidth;
  const seen = Math.max(0, Math.min(r.bottom, H) - Math.max(r.top, 0)) * Math.max(0, Math.min(r.right, W) - Math.max(r.left, 0));
  const plots = [...main.querySelectorAll('.explorer-chart')].filter(shown).map(frame => {
    const box = frame.getBoundingClientRect(), svg = frame.querySelector('.main-svg');
    const s = svg ? svg.getBoundingClientRect() : box;
    return {inside: s.left >= box.left - 1 && s.right <= box.right + 1 && s.top >= box.top - 1 && s.bottom <= box.bottom + 1,
            title: (frame.querySelector('.gtitle') || {}).textContent || ''};
  });
  const tablist = main.querySelector('[role=tablist]');
  const rows = tablist ? new Set([...tablist.querySelectorAll('[role=tab]')].map(t => Math.round(t.getBoundingClientRect().top))).size : 1;
  const open = tablist ? (tablist.querySelector('[role=tab][aria-selected=true]') || {}).innerText : null;
  const words = list => list.map(h => h.textContent.trim().toLowerCase()).filter(Boolean);
  const headings = words([...main.querySelectorAll('h1, h2, h3, h4')].filter(shown));
  const chartTitles = words([...main.querySelectorAll('.explorer-chart .gtitle')]);
  const sidebar = document.querySelector('[data-testid=stSidebar]').getBoundingClientRect();
  return {share: seen / (r.width * r.height), top: Math.round(r.top), bottom: Math.round(r.bottom),
          height: Math.round(r.height), screen: H, plots, rows, open, headings, chartTitles,
          sidebarRight: sidebar.right, scrolled: main.scrollTop || document.scrollingElement.scrollTop};
}"""

# True once every chart on the page is drawn and the main element is whole on screen, or (with `polls`) has kept its
# place and size for that many polls in a row: a chart is drawn again to fit when what is above it settles, and a
# phone's chart may be taller than the room it has.
_SETTLED = f"""([selector, title, polls]) => {{
  if (![...document.querySelectorAll('.explorer-plot')].every(p => p.dataset.drawn === 'yes')) return false;
  const m = ({FIRST_SCREEN})([selector, title]);
  if (m && m.share > 0.999) return true;
  const now = m ? [m.top, m.bottom, m.share].join() : 'none', s = window.__firstScreen || {{}};
  window.__firstScreen = {{last: now, same: s.last === now ? (s.same || 0) + 1 : 0}};
  return polls > 0 && m !== null && window.__firstScreen.same >= polls;
}}"""


def first_screen(page, selector: str, title: str | None, whole: bool = True, timeout: float = 20_000) -> dict | None:
    """What the window shows of a view's main element (`selector`, a chart's `title`) once every chart is drawn
    and the element has settled: whole on screen, or (unless `whole` is expected) unmoved for half a second
    (polled every 100 ms: a tab in the background gets no animation frames). None when the view has none."""
    page.evaluate("() => { window.__firstScreen = null; }")            # (a page switch keeps the window)
    try:
        page.wait_for_function(_SETTLED, arg=[selector, title, 0 if whole else 5], timeout=timeout, polling=100)
    except PlaywrightTimeout:
        pass                                                     # measured below, and the test says by how much
    return page.evaluate(FIRST_SCREEN, [selector, title])


def on_screen(locator) -> float:
    """The share of the element's box inside the window (0 when it is not shown)."""
    box = locator.bounding_box()
    if not box or not box["width"] or not box["height"]:
        return 0.0
    width, height = locator.page.evaluate("() => [document.documentElement.clientWidth, window.innerHeight]")
    seen_x = max(0.0, min(box["x"] + box["width"], width) - max(box["x"], 0.0))
    seen_y = max(0.0, min(box["y"] + box["height"], height) - max(box["y"], 0.0))
    return seen_x * seen_y / (box["width"] * box["height"])


# --- touch targets --------------------------------------------------------------------------------------------

FINGERTIP = 44           # px: the least height of a control a phone's user taps (WCAG 2.5.5, Apple's and Google's guides)

# The controls a finger taps, shown and lower than `least` px, inside `within` (a CSS selector): buttons (a help
# mark's, a select box's, a popover's, a tab), a radio's choices, a toggle or checkbox, a panel's header, a page link.
# Left out: the buttons of a chart's toolbar (plotly.js shows it on hover, over the chart).
SMALL_TARGETS = """([within, least]) => {
  const controls = 'button, [data-testid=stRadio] label, [data-testid=stCheckbox] label, summary, '
                 + '[data-testid=stPageLink-NavLink]';
  return [...document.querySelectorAll(within)].flatMap(place => [...place.querySelectorAll(controls)])
    .filter(e => e.offsetParent !== null && !e.closest('.js-plotly-plot'))
    .map(e => ({what: (e.innerText || e.getAttribute('aria-label') || e.getAttribute('title') || e.tagName).trim().slice(0, 40),
                height: Math.round(e.getBoundingClientRect().height)}))
    .filter(t => t.height > 0 && t.height < least);
}"""


def small_targets(page, within: str = "[data-testid=stMain], [data-testid=stHeader]") -> list[dict]:
    """Every control a finger taps in `within` that is less than FINGERTIP px high: {what, height}."""
    return page.evaluate(SMALL_TARGETS, [within, FINGERTIP])


# --- nothing leaves the classroom: every request goes to the app's own server --------------------------------

LOCAL_SCHEMES = {"data", "blob", "about"}          # made inside the page, never fetched from a host


def elsewhere(urls: list[str], app_url: str) -> list[str]:
    """The URLs that do not go to the app's own host and port."""
    own = urlsplit(app_url).netloc
    return [url for url in urls if urlsplit(url).scheme not in LOCAL_SCHEMES and urlsplit(url).netloc != own]


def logged_tab(context):
    """A new tab in browser profile `context` that logs every request and websocket it makes in `page.requests`
    (those answered from the profile's cache too: the browser still asks for them)."""
    page = context.new_page()
    page.set_default_timeout(BROWSER_TIMEOUT_MS)
    page.requests = []
    page.on("request", lambda request: page.requests.append(request.url))
    page.on("websocket", lambda socket: page.requests.append(socket.url))
    return page


def only_the_app_was_asked(page, app_url: str) -> None:
    """Every request the page made (scripts, styles, fonts, images, its websocket, charts) went to the app's own
    server, and the log saw them: the websocket, Streamlit's own fonts, and plotly.js for a page with charts."""
    from explorer.app.plotly_component import PLOTLY_JS

    page.evaluate("() => document.fonts.ready")             # every font the page uses has loaded
    assert any(url.startswith("ws") for url in page.requests), page.requests
    assert any(url.endswith(".woff2") for url in page.requests), page.requests
    if page.locator(".explorer-plot").count():
        assert any(url.endswith(f"/app/static/{PLOTLY_JS.name}") for url in page.requests), page.requests
    assert elsewhere(page.requests, app_url) == []


# Labels a visitor must read whole: tabs, page links (the step buttons and the sidebar's pages), buttons.
# A label is clipped when its text is wider than its box, or its box sticks out of the tab row or the window.
_CLIPPED = """() => {
  const out = [];
  const width = document.documentElement.clientWidth;
  const check = (el, within) => {
    const text = el.innerText.trim();
    if (!text || el.offsetParent === null) return;          // not shown
    const r = el.getBoundingClientRect(), w = within ? within.getBoundingClientRect() : null;
    const inner = [el, ...el.querySelectorAll('*')].some(e => e.scrollWidth > e.clientWidth + 1
        && getComputedStyle(e).overflowX !== 'visible');
    const ellipsis = [el, ...el.querySelectorAll('*')].some(e => getComputedStyle(e).textOverflow === 'ellipsis'
        && e.scrollWidth > e.clientWidth + 1);
    const outside = r.right > width + 1 || (w && (r.left < w.left - 1 || r.right > w.right + 1
        || r.top < w.top - 1 || r.bottom > w.bottom + 1));
    if (inner || ellipsis || outside) out.push(text);
  };
  document.querySelectorAll('[role=tablist]').forEach(list =>
      list.querySelectorAll('[role=tab]').forEach(t => check(t, list)));
  document.querySelectorAll('[data-testid=stPageLink-NavLink], [data-testid=stSidebarNavLink], '
      + '[data-testid=stMain] button, [data-testid=stPopoverButton]').forEach(e => check(e, null));
  return out;
}"""


def labels_clipped(page) -> list[str]:
    return page.evaluate(_CLIPPED)


# --- chart text on a phone and a projector: none on top of another, none cut ------------------------------------

# For every chart (the WCAG walk on a phone and the projector's first-screen walk measure every view with it): the
# visible text elements' boxes (hover labels excluded: they appear under the finger) and the chart's own box. Two
# texts overlap when their boxes share more than `slack` pixels both ways; a text is cut when it reaches more than
# `slack` pixels outside the chart's box or the window. A chart whose frame scrolls sideways is cut too: a student
# sees part of it and does not know there is more.
MEASURE = """slack => {
  const overlaps = [], cut = [];
  const visible = el => {
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
      const s = getComputedStyle(e);
      if (s.display === 'none' || s.visibility === 'hidden' || +s.opacity === 0) return false;
    }
    return true;
  };
  for (const plot of document.querySelectorAll('.js-plotly-plot')) {
    const box = plot.querySelector('.main-svg').getBoundingClientRect();
    const frame = plot.closest('.explorer-chart');
    const name = (plot.querySelector('.gtitle') || {}).textContent || '(untitled)';
    if (frame && (frame.getBoundingClientRect().right > window.innerWidth + slack
                  || frame.scrollWidth > frame.clientWidth + slack))
      cut.push([name, '(the chart is wider than the window: its frame scrolls sideways)']);
    const texts = [...plot.querySelectorAll('svg text')]
      .filter(t => !t.closest('.hoverlayer') && t.textContent.trim() && visible(t))
      .map(t => ({text: t.textContent.trim(), r: t.getBoundingClientRect()}))
      .filter(t => t.r.width > 0 && t.r.height > 0);
    for (const t of texts) {
      if (t.r.left < box.left - slack || t.r.right > box.right + slack || t.r.top < box.top - slack ||
          t.r.bottom > box.bottom + slack || t.r.left < -slack || t.r.right > window.innerWidth + slack)
        cut.push([name, t.text]);
    }
    for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
      const a = texts[i].r, b = texts[j].r;
      const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > slack && h > slack) overlaps.push([name, texts[i].text, texts[j].text]);
    }
  }
  return {charts: document.querySelectorAll('.js-plotly-plot').length, overlaps, cut};
}"""


def chart_text_problems(found: dict) -> tuple[dict, dict]:
    """Of the views measured ({(slug, section): MEASURE's result}): the overlapping texts and the cut ones, by view."""
    for (slug, section), r in found.items():
        if r["overlaps"] or r["cut"]:
            print(f"{slug} / {section}: {len(r['overlaps'])} overlapping, e.g. {r['overlaps'][:3]}; "
                  f"{len(r['cut'])} cut, e.g. {r['cut'][:3]}")
    return ({view: r["overlaps"] for view, r in found.items() if r["overlaps"]},
            {view: r["cut"] for view, r in found.items() if r["cut"]})


# --- a class's screens at a question: whole tick labels, pickers as wide as their value, a readable tally -----------

# Every tick label of the main area's charts whose box reaches more than 1 px outside its chart's drawing, the chart's
# frame or the window's width ([chart title, label, where]): a label cut at its start ("they" shown as "ey") or end.
TICKS_CUT = """() => {
  const out = [], W = document.documentElement.clientWidth;
  for (const plot of document.querySelectorAll('[data-testid=stMain] .js-plotly-plot')) {
    if (plot.offsetParent === null) continue;
    const svg = plot.querySelector('.main-svg').getBoundingClientRect();
    const frame = (plot.closest('.explorer-chart') || plot).getBoundingClientRect();
    const name = (plot.querySelector('.gtitle') || {}).textContent || '(untitled)';
    for (const t of plot.querySelectorAll('.xaxislayer-above text, .yaxislayer-above text')) {
      const r = t.getBoundingClientRect();
      if (!t.textContent.trim() || !r.width || getComputedStyle(t).display === 'none') continue;
      const edges = [['left', r.left < svg.left - 1, r.left < frame.left - 1, r.left < -1],
                     ['right', r.right > svg.right + 1, r.right > frame.right + 1, r.right > W + 1],
                     ['top', r.top < svg.top - 1, r.top < frame.top - 1, false],
                     ['bottom', r.bottom > svg.bottom + 1, r.bottom > frame.bottom + 1, false]];
      const where = edges.flatMap(([side, ...past]) => ['drawing', 'frame', 'window']
        .filter((_, n) => past[n]).map(what => `past the ${what}'s ${side}`));
      if (where.length) out.push([name, t.textContent.trim(), where.join(', ') +
        ` (drawn ${Math.round(svg.width)} px wide in a frame ${Math.round(frame.width)} px wide)`]);
    }
  }
  return out;
}"""


def ticks_cut(page, tries: int = 4) -> list[list[str]]:
    """The tick labels of the page's charts that are cut ([chart title, label, where]), still cut half a second later
    (`tries` times): a chart drawn again to fit its room is measured once it has been."""
    cut = page.evaluate(TICKS_CUT)
    for _ in range(tries - 1):
        if not cut:
            break
        page.wait_for_timeout(500)
        cut = page.evaluate(TICKS_CUT)
    return cut


# The pickers beside a presenter's title (explorer/app/layout.py, `picker_row`) whose box is narrower than the value it
# shows: [value, its text's width, the room the box gives it] (px), measured in the box's own font.
PICKERS_TOO_NARROW = """() => {
  const ink = document.createElement('canvas').getContext('2d');
  return [...document.querySelectorAll('.st-key-title_row input[role=combobox]')].filter(i => i.offsetParent !== null)
    .map(i => {
      const s = getComputedStyle(i);
      ink.font = `${s.fontWeight} ${s.fontSize} ${s.fontFamily}`;
      return [i.value, Math.ceil(ink.measureText(i.value).width),
              Math.floor(i.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight))];
    }).filter(([, text, room]) => text > room + 1);
}"""


def pickers_too_narrow(page) -> list[list]:
    """The header's pickers narrower than their value: [value, text px, room px]."""
    return page.evaluate(PICKERS_TOO_NARROW)
