"""The why page in a real browser (Chromium through Playwright, see test_browser.py): on a projector its first
screen reaches the chart and no label is cut off; on a phone the patching grids draw; nothing raises."""

import pytest
from playwright.sync_api import expect

from browser_support import open_view, wait_until_run
from test_browser import rendered_plots
from test_browser_presenter import labels_clipped

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
    open_view(tab, app_url, "why", section="Patching", token=7)
    box = tab.get_by_role("textbox", name="A second sentence, with the same number of tokens")
    box.fill("the dog sat on the mat because it was tired")
    box.press("Enter")
    wait_until_run(tab)
    expect(tab.locator(".js-plotly-plot")).to_have_count(2)
    assert rendered_plots(tab) == 2
    assert tab.locator("[data-testid=stException]").count() == 0
    assert tab.get_by_text("“cat” → “dog” (position 1)", exact=False).count() == 1
    assert labels_clipped(tab) == []
