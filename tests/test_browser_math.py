"""Formulas in a real browser (Chromium through Playwright, see test_browser.py): every formula of a "Show the math"
panel is drawn whole, none of it cut off by the box it sits in (the LayerNorm fraction's numerator was)."""
from browser_support import open_view, wait_until_run

# Each formula's box (.katex-display scrolls sideways, so it clips what sticks out above or below), and how far
# the formula's drawn parts stick out of it, in pixels.
CLIPPED = """() => [...document.querySelectorAll('.katex-display')].map(box => {
  const outer = box.getBoundingClientRect();
  const parts = [...box.querySelectorAll('.katex-html *')].map(e => e.getBoundingClientRect())
    .filter(r => r.width > 0 && r.height > 0);
  return {formula: box.querySelector('annotation')?.textContent.slice(0, 60),
          above: Math.max(0, outer.top - Math.min(...parts.map(r => r.top))),
          below: Math.max(0, Math.max(...parts.map(r => r.bottom)) - outer.bottom)};
})"""


def test_the_layernorm_formulas_are_drawn_whole(tab, app_url):
    open_view(tab, app_url, "residual", section="Normalization")
    tab.get_by_text("Show the math", exact=True).click()
    wait_until_run(tab)
    tab.wait_for_selector(".katex-display")
    formulas = tab.evaluate(CLIPPED)
    assert any("\\frac" in (f["formula"] or "") for f in formulas), formulas        # the fraction is there
    cut = [f for f in formulas if f["above"] > 0.5 or f["below"] > 0.5]
    assert not cut, cut
