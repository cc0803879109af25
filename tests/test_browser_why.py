"""The why page in a real browser (Chromium through Playwright, see test_browser.py): on a projector its first
screen reaches the chart and no label is cut off; on a phone the patching grids draw; nothing raises."""
import re

import pytest
from playwright.sync_api import expect

from browser_support import labels_clipped, open_view, wait_until_run
from test_browser import rendered_plots
from claims_support import view_of
from explorer.steps import why
from explorer.view import DEFAULT_SENTENCE
from model.checkpoint import load_bundled


@pytest.mark.parametrize("section", ["Attribution", "Contribution routes"])
def test_on_a_projector_the_first_screen_shows_the_chart_and_every_label_whole(tab, app_url, section):
    tab.set_viewport_size({"width": 1366, "height": 768})
    open_view(tab, app_url, "why", presenter=1, section=section)
    assert rendered_plots(tab) == 1
    assert tab.locator("[data-testid=stException]").count() == 0
    assert tab.locator(".js-plotly-plot").first.bounding_box()["y"] < 768 - 150
    assert labels_clipped(tab) == []


def test_on_a_phone_a_second_sentence_draws_both_patching_grids(tab, app_url):
    tab.set_viewport_size({"width": 390, "height": 844})
    open_view(tab, app_url, "why", section="Patching")
    box = tab.get_by_role("textbox", name="A second sentence, with the same number of tokens")
    box.fill(DEFAULT_SENTENCE.replace("cat", "dog"))          # the sentence the app opens with, one word swapped
    box.press("Enter")
    wait_until_run(tab)
    expect(tab.locator(".js-plotly-plot")).to_have_count(2)
    assert rendered_plots(tab) == 2
    assert tab.locator("[data-testid=stException]").count() == 0
    assert tab.get_by_text("“cat” → “dog” (position 1)", exact=False).count() == 1
    assert labels_clipped(tab) == []


def test_a_click_on_a_heads_bar_opens_that_head_on_the_attention_page(tab, app_url):
    view = view_of(load_bundled("tinytales"), DEFAULT_SENTENCE, "tinytales")
    last = len(view.tokens) - 1
    figure = why.attribution_figure(view, view.trace, last, why.favourites(view.trace, last, 1)[0])
    bar, (layer, head) = next((n, tuple(d)) for n, d in enumerate(figure.data[0].customdata) if d[0] >= 0)
    open_view(tab, app_url, "why")
    assert rendered_plots(tab) == 1
    point = tab.locator(".js-plotly-plot .barlayer .point").nth(bar)
    point.scroll_into_view_if_needed()
    box = point.bounding_box()
    tab.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)     # plotly's own layer takes clicks
    expect(tab).to_have_url(re.compile(rf"/attention\?.*layer={layer}&head={head}&token={last}"))
    wait_until_run(tab)
    expect(tab.get_by_text(f"Who attends to whom: layer {layer}, head {head}")).to_be_visible()
