"""Every chart on a phone (390 x 844): no two pieces of chart text on top of each other, none cut off, no chart
scrolling sideways; every control a finger taps at least 44 px high. (The same measure on a projector in presenter
mode runs in the projector's walk over every tab, tests/test_browser_presenter.py.)
Opens every page and every tab the registry lists, waits for its charts to be drawn, and reads the bounding box
of each text element plotly.js drew (titles, tick labels, cell labels, legend entries, annotations, colour bars)
from the rendered SVG, and the height of every button, radio choice, toggle, select box and panel header.
"""

from browser_support import PHONE, open_view, small_targets
from explorer.registry import BY_SLUG


# Every page and tab; the encoder-decoder page with a model it explains, the lab with one finished run would need
# training (its Plotly charts are checked through the same component elsewhere).
VIEWS = [(slug, label) for slug, page in BY_SLUG.items() for label in (page.labels or [None])]
QUERY = {"encoder-decoder": {"model": "translate", "text": "the red cat sleeps"},
         "prediction": {"token": 3}}                 # an earlier token: its chart marks the word that came next

# Every chart on the page drawn: each chart's component (a keyed element "chart_...") holds a plot that has finished
# drawing (data-drawn, set by explorer/app/plotly_component.py after any relayout for the width).
CHARTS_DRAWN = """() => [...document.querySelectorAll('.stElementContainer[class*="st-key-chart_"]')]
  .every(host => { const plot = host.querySelector('.explorer-plot');
                   return plot && (plot.dataset.drawn ? plot.dataset.drawn === 'yes' : !!plot.querySelector('.main-svg')); })"""

# For every chart: the visible text elements' boxes (hover labels excluded: they appear under the finger) and the
# chart's own box. Two texts overlap when their boxes share more than `slack` pixels both ways; a text is cut when
# it reaches more than `slack` pixels outside the chart's box or the window. A chart whose frame scrolls sideways is
# cut too: a student sees part of it and does not know there is more.
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


def measure_view(page, app_url, slug, section, **extra) -> dict:
    """Open one view and measure its charts' text and its controls."""
    query = dict(QUERY.get(slug, {}), **extra, **({"section": section} if section else {}))
    open_view(page, app_url, slug, **query)
    page.wait_for_function(CHARTS_DRAWN)
    page.evaluate("() => document.fonts.ready")
    page.evaluate("() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
    return {**page.evaluate(MEASURE, 2), "small": small_targets(page)}


def chart_text_problems(found: dict) -> tuple[dict, dict]:
    """Of the views measured ({(slug, section): MEASURE's result}): the overlapping texts and the cut ones, by view."""
    for (slug, section), r in found.items():
        if r["overlaps"] or r["cut"]:
            print(f"{slug} / {section}: {len(r['overlaps'])} overlapping, e.g. {r['overlaps'][:3]}; "
                  f"{len(r['cut'])} cut, e.g. {r['cut'][:3]}")
    return ({view: r["overlaps"] for view, r in found.items() if r["overlaps"]},
            {view: r["cut"] for view, r in found.items() if r["cut"]})


def test_no_chart_text_overlaps_or_is_cut_and_a_phones_controls_fit_a_finger(chromium, app_url):
    context = chromium.new_context(**PHONE)
    page = context.new_page()
    page.set_default_timeout(60_000)
    found = {}
    try:
        for slug, section in VIEWS:
            result = measure_view(page, app_url, slug, section)
            assert page.locator("[data-testid='stException']").count() == 0, (slug, section)
            found[(slug, section)] = result
    finally:
        context.close()
    charts = sum(r["charts"] for r in found.values())
    overlaps, cut = chart_text_problems(found)
    small = {view: r["small"] for view, r in found.items() if r["small"]}
    print(f"phone: {len(VIEWS)} views, {charts} charts: {sum(map(len, overlaps.values()))} overlapping pairs in "
          f"{len(overlaps)} views, {sum(map(len, cut.values()))} cut labels in {len(cut)} views; "
          f"{sum(map(len, small.values()))} controls under 44 px in {len(small)} views: "
          f"{sorted({(t['what'], t['height']) for r in small.values() for t in r})[:20]}")
    assert charts >= 30
    assert not overlaps, overlaps
    assert not cut, cut
    assert not small, small
