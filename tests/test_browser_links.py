"""A view is a URL (issue 24): in real Chromium, a few choices made through the page (a layer, head and token, the
what-ifs, the temperature, a lab preset with a changed knob, one discovery card) reopen exactly from the page's own
link in another browser profile: the same URL parameters after the run, the same open tab, the same widget values
and notices, the same chart titles. The WCAG walk (tests/test_browser_a11y.py) checks with `visit` that every tab's
own link is the address bar's and names the tab; the projector's walk (tests/test_browser_presenter.py) opens each
page's first two tabs from their links."""
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from conftest import BROWSER_TIMEOUT_MS
from explorer.registry import BY_SLUG, LAB

# What a visitor sees of the view, read from the page: every widget's value (main area and sidebar), the open tabs,
# which panels are open, the notices and hints, and the Plotly charts' titles in the main area.
_SNAPSHOT = """() => {
  const app = document.querySelector('[data-testid=stApp]');
  const inApp = el => !el.closest('[data-testid=stPopoverBody]');
  const all = css => [...app.querySelectorAll(css)].filter(inApp);
  const label = el => el.getAttribute('aria-label') || el.closest('label')?.innerText.trim() || '';
  const widgets = [];
  all('[data-testid=stSelectbox] input').forEach(i => widgets.push(['select', label(i), i.value]));
  all('[data-testid=stSlider] input[type=range]').forEach(i => widgets.push(['slider', label(i), i.value]));
  all('[data-testid=stRadio]').forEach(r => widgets.push(['radio',
      r.querySelector('[data-testid=stWidgetLabel]')?.innerText.trim() || '',
      r.querySelector('input:checked')?.closest('label').innerText.trim() ?? null]));
  all('[data-testid=stNumberInput] input, [data-testid=stTextInput] input, [data-testid=stTextArea] textarea')
      .forEach(i => widgets.push(['text', label(i), i.value]));
  all('[data-testid=stCheckbox] input').forEach(i => widgets.push(['switch', label(i), i.checked]));
  return {
    widgets,
    tabs: all('[role=tab][aria-selected=true]').map(t => t.innerText.trim()),
    panels: all('[data-testid=stExpander] details').map(d => [d.querySelector('summary [data-testid=stMarkdownContainer]').innerText.trim(), d.open]),
    notices: all('[data-testid=stAlert]').map(a => a.innerText.trim()),
    titles: all('[data-testid=stMain] .js-plotly-plot .gtitle').map(t => t.textContent),
  };
}"""

# The page's run has ended (its title is there: not the moment before a first run starts), every widget is drawn (a
# fresh browser loads each kind's code on first use, showing a skeleton meanwhile) and so is every chart it sent (the
# app's Plotly component marks a drawn chart).
_SETTLED = """() => document.querySelector('[data-testid=stMain] h1')
  && document.querySelector('[data-testid=stApp]').getAttribute('data-test-script-state') === 'notRunning'
  && !document.querySelector('[data-testid=stSkeleton]')
  && [...document.querySelectorAll('[data-testid=stMain] .stBidiComponent')]
       .every(c => c.querySelector('.explorer-plot[data-drawn=yes]'))"""


def settle(page, **params) -> None:
    """Wait until the URL carries `params` (a change reached the server), the run has ended and every chart is drawn."""
    if params:
        reached(page, lambda url: all(query(url).get(k) == str(v) for k, v in params.items()), params)
    page.wait_for_function(_SETTLED, polling=100)


def reached(page, test: Callable[[str], bool], what) -> None:
    """Wait until the page's URL passes `test`: a choice made on the page is in its URL (else the link drops it)."""
    try:
        page.wait_for_url(test)
    except PlaywrightTimeout:
        raise AssertionError(f"the URL never carried {what}: {query(page.url)}") from None


def query(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(url).query))


def own_link(page) -> str | None:
    """The link the page offers to copy ("Copy a link to this view"), or None on a page without one."""
    button = page.get_by_role("button", name="Copy a link to this view")
    if button.count() == 0:
        return None
    button.click()
    code = page.locator("[data-testid=stPopoverBody] [data-testid=stCode] code")
    code.wait_for()
    link = code.inner_text().strip()
    page.keyboard.press("Escape")
    code.wait_for(state="hidden")
    return link


def choose(page, label: str, option: str, **params) -> None:
    """Pick `option` in the main area's select box `label`, as a visitor does."""
    page.locator(f"[data-testid=stMain] [data-testid=stSelectbox]:has(input[aria-label='{label}'])").click()
    page.get_by_role("option", name=option, exact=True).click()
    settle(page, **params)


def layer_head_token(page) -> None:
    choose(page, "Layer", "1", layer=1)
    choose(page, "Head", "2", head=2)
    choose(page, "Query token", "3: on", token=3)


def another_what_if(page) -> None:
    """Click another choice of the open what-if tab."""
    radio = page.locator("[data-testid=stMain] [data-testid=stRadio]").filter(has_text="Change the model")
    before = query(page.url).get("what-if")
    radio.locator("label:not(:has(input:checked))").last.click()         # a choice it did not open on
    reached(page, lambda url: query(url).get("what-if") not in (None, before), "another what-if")
    settle(page)


def layer_one_and_another_what_if(page) -> None:
    """The feed-forward what-if offers a second layer to skip once the picked layer is not the one that matters most."""
    choose(page, "Layer", "1", layer=1)
    another_what_if(page)


def warmer(page) -> None:
    """Temperature 1 -> 1.2: four presses of the right arrow on the slider (steps of 0.05)."""
    slider = page.locator("[data-testid=stMain] [data-testid=stSlider] input[aria-label=Temperature]")
    slider.focus()
    for _ in range(4):
        page.keyboard.press("ArrowRight")
    settle(page, temperature="1.2")


def open_architecture(page) -> None:
    """Open the lab's Architecture panel (a visitor's own choice, not part of a link), if it is closed."""
    panel = page.locator("[data-testid=stExpander] details").filter(has_text="Architecture")
    if not panel.evaluate("d => d.open"):
        panel.locator("summary").click()
    page.locator("input[aria-label=Layers]").wait_for()
    settle(page)


def tales_with_three_layers(page) -> None:
    """The lab: the 'tales' preset, then one knob changed from it (3 layers instead of 2)."""
    choose(page, "Preset", "tales", preset="tales")
    open_architecture(page)
    layers = page.locator("input[aria-label=Layers]")
    layers.fill("3")
    layers.press("Enter")
    settle(page, preset="tales", **{"n-layers": "3"})


@dataclass(frozen=True)
class Case:
    name: str
    slug: str
    query: dict = field(default_factory=dict)      # the URL it is first opened with
    tab: str | None = None                         # the tab a visitor then clicks (its label)
    act: Callable | None = None                    # what the visitor then changes through the page
    look: Callable | None = None                   # what a visitor opens to see it (both views), not in a link


ATTENTION, FEEDFORWARD, RESIDUAL = BY_SLUG["attention"], BY_SLUG["feedforward"], BY_SLUG["residual"]
CHOICES = [                                           # choices made through the page, not its defaults
    Case("attention/layer-head-token", "attention", tab=ATTENTION.tab("who-looks"), act=layer_head_token),
    Case("attention/what-if-choice", "attention", tab=ATTENTION.tab("what-if"), act=another_what_if),
    Case("feedforward/what-if-choice", "feedforward", tab=FEEDFORWARD.tab("what-if"),
         act=layer_one_and_another_what_if),
    Case("prediction/temperature", "prediction", act=warmer),
    Case("residual/presenter-token", "residual", {"presenter": 1, "token": 2}, tab=RESIDUAL.tab("lens")),
    Case("training/preset-and-knob", LAB.slug, act=tales_with_three_layers, look=open_architecture),
    Case("discoveries/one-card", "discoveries", {"card": "scaling"}),
]


def seen(page) -> dict:
    """The view as a visitor sees it, and its URL's parameters after the run."""
    return {**page.evaluate(_SNAPSHOT), "url": query(page.url)}


def visit(page, app_url: str, case: Case, arrive: bool = True) -> tuple[Case, str, dict]:
    """Open `case` in `page` as a visitor does (`arrive`: from its URL; else already on its page), then
    (case, the page's own link, what the visitor sees)."""
    if arrive:
        page.goto(f"{app_url}/{'' if case.slug == 'home' else case.slug}?{urlencode(case.query)}")
        settle(page)
    if case.tab:
        label = page.get_by_role("tab", name=case.tab, exact=True)
        if label.get_attribute("aria-selected") != "true":
            label.click()
        settle(page, section=case.tab)
    if case.act:
        case.act(page)
    if case.look:
        case.look(page)
    first = seen(page)
    link = own_link(page) or page.url             # the class page offers none: its URL is its link
    assert query(link) == first["url"], f"{case.name}: the page's link and the browser's URL differ"
    assert case.tab is None or first["tabs"][:1] == [case.tab], case.name
    assert page.locator("[data-testid=stException]").count() == 0, case.name
    return case, link, first


def reopen(profile, case: Case, link: str, first: dict) -> None:
    """Open `link` in `profile`, a browser profile where no first view was made (no cookies, storage or session from
    it: tests/conftest.py `second_profile`), and check it shows what the first view showed."""
    page = profile.new_page()
    page.set_default_timeout(BROWSER_TIMEOUT_MS)
    try:
        page.goto(link)
        settle(page)
        if case.look:
            case.look(page)
        assert seen(page) == first, case.name
    finally:
        page.close()


@pytest.mark.parametrize("case", CHOICES, ids=lambda c: c.name)
def test_a_choice_made_on_the_page_reopens_exactly_from_its_link(tab, second_profile, app_url, case):
    reopen(second_profile, *visit(tab, app_url, case))
