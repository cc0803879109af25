"""The keyboard alone, in a real browser (Chromium through Playwright, see test_browser.py): Tab reaches every main
control of a page in a sensible order, each shows a focus ring of at least 3:1 against its background (WCAG 2.1
1.4.11, computed from the browser's computed styles), and tabs, pickers and toggles work from the keyboard."""
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from browser_support import open_view, wait_until_run

# What has focus, and its ring: the outline of the focused element or of the nearest of its four ancestors that
# draws one (a picker's box rings around its text field), and the colour behind that ring (the first ancestor
# with a background). Contrast is WCAG's: (L1 + 0.05) / (L2 + 0.05) of the relative luminances.
FOCUSED = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const parts = c => c.match(/[\\d.]+/g).map(Number);
  const alpha = c => { const p = parts(c); return p.length > 3 ? p[3] : 1; };
  const lum = c => { const f = v => { v /= 255; return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    const [r, g, b] = parts(c); return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  let ring = null;
  for (let e = el, i = 0; e && i < 5 && !ring; e = e.parentElement, i++) {
    const s = getComputedStyle(e);
    if (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0 && alpha(s.outlineColor) > 0)
      ring = {el: e, colour: s.outlineColor, width: parseFloat(s.outlineWidth)};
  }
  let behind = 'rgb(255, 255, 255)';
  for (let e = (ring ? ring.el : el).parentElement; e; e = e.parentElement) {
    const c = getComputedStyle(e).backgroundColor;
    if (alpha(c) > 0.5) { behind = c; break; }
  }
  const [a, b] = ring ? [lum(ring.colour), lum(behind)] : [0, 0];
  const box = el.getBoundingClientRect();
  return {name: (el.getAttribute('aria-label') || el.innerText || '').replace(/\\s+/g, ' ').trim().slice(0, 60),
          role: el.getAttribute('role') || el.tagName.toLowerCase(), shown: box.width > 0 && box.height > 0,
          ring: ring && ring.colour, width: ring ? ring.width : 0, behind,
          contrast: ring ? (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05) : 0};
}"""


NEXT_FRAME = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"


def tab_through(page, most: int = 120) -> list[dict]:
    """Press Tab from the top of the page until the focus comes back round; what had focus, in order."""
    seen = []
    for _ in range(most):
        page.keyboard.press("Tab")
        page.evaluate(NEXT_FRAME)                 # the focus styles are drawn (a busy machine may lag a frame)
        try:                                      # ... or several: wait for a ring, and measure what is there
            page.wait_for_function(f"() => {{ const f = ({FOCUSED})(); return !f || !f.shown || f.ring; }}",
                                   timeout=2000)
        except PlaywrightTimeout:
            pass
        focused = page.evaluate(FOCUSED)
        if focused is None:
            continue
        if seen and focused["name"] == seen[0]["name"] and focused["role"] == seen[0]["role"]:
            break
        seen.append(focused)
    return seen


def position(stops: list[dict], name: str) -> int:
    """Where the first control whose name contains `name` is in the tab order."""
    for i, stop in enumerate(stops):
        if name in stop["name"]:
            return i
    raise AssertionError(f"Tab never reaches {name!r}; it reaches: {[s['name'] for s in stops]}")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_tab_reaches_every_main_control_in_order_and_each_shows_a_3_to_1_ring(tab, app_url, scheme):
    tab.set_viewport_size({"width": 1366, "height": 768})
    tab.emulate_media(color_scheme=scheme)
    open_view(tab, app_url, "attention")
    stops = tab_through(tab)
    order = [position(stops, name) for name in (
        "The big picture", "4. Attention", "Training lab",                 # the sidebar's navigation
        "Model", "Sentence", "Presenter mode", "High contrast",            # the view
        "What is happening here", "Layer", "Head", "Queries, keys, values",  # the page: explanation, pickers, tabs
        "Next: 5. Feed-forward", "Copy a link to this view")]              # then on to the next step
    assert order == sorted(order), [stops[i]["name"] for i in order]
    weak = [f"{s['name']!r} ({s['role']}): ring {s['ring']} {s['width']}px on {s['behind']}, "
            f"{s['contrast']:.2f}:1" for s in stops if s["shown"] and (s["contrast"] < 3 or s["width"] < 2)]
    assert not weak, "focus rings below 3:1 or thinner than 2 px:\n" + "\n".join(weak)


def test_the_keyboard_alone_opens_a_tab_picks_a_head_and_turns_presenter_mode_on(tab, app_url):
    tab.set_viewport_size({"width": 1366, "height": 768})
    open_view(tab, app_url, "attention", text="the cat sat on the mat")
    tab.get_by_role("tab", name="Queries, keys, values").focus()
    tab.keyboard.press("ArrowRight")                                   # tabs: the arrow keys move between them
    tab.keyboard.press("Enter")
    expect(tab.get_by_role("tab", name="The four steps")).to_have_attribute("aria-selected", "true")
    tab.wait_for_url(lambda url: "section=The+four+steps" in url)
    wait_until_run(tab)
    tab.get_by_role("combobox", name="Head").focus()
    tab.keyboard.press("ArrowDown")                                    # opens the list on the next head
    tab.keyboard.press("Enter")
    tab.wait_for_url(lambda url: "head=1" in url)
    wait_until_run(tab)
    tab.get_by_role("switch", name="Presenter mode").focus()
    tab.keyboard.press("Space")
    tab.wait_for_url(lambda url: "presenter=1" in url)
