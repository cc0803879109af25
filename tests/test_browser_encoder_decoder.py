"""The encoder-decoder page in a real browser: the translate model's cross-attention drawn, its tabs, hostile text."""
from playwright.sync_api import expect

from browser_support import open_view, type_sentence


def test_translate_draws_cross_attention_and_decodes_step_by_step(tab, app_url):
    open_view(tab, app_url, "encoder-decoder", model="translate", text="the red cat sleeps")
    assert tab.locator("[data-testid='stException']").count() == 0
    expect(tab.get_by_text("“le chat rouge dort”").first).to_be_visible()
    tab.wait_for_selector(".js-plotly-plot .main-svg", state="attached")
    expect(tab.locator(".js-plotly-plot .gtitle").first).to_contain_text("Cross-attention, layer 0")
    rows = tab.locator(".js-plotly-plot .ytick text").all_text_contents()
    assert rows[:4] == ["0 → le", "1 → chat", "2 → rouge", "3 → dort"]
    tab.get_by_role("tab", name="Decoding step by step").click()
    tab.wait_for_selector("[data-test-script-state='notRunning']")
    expect(tab.get_by_text("Beam search (3)")).to_be_visible()
    type_sentence(tab, "<img src=x onerror=alert(1)> the cat sees a green mouse")
    assert tab.locator("[data-testid='stException']").count() == 0
    assert tab.dialogs == [] and tab.locator("img[src='x']").count() == 0


def test_a_walk_through_page_points_to_the_encoder_decoder_page(tab, app_url):
    open_view(tab, app_url, "attention", model="sort", text="3 1 2")
    expect(tab.get_by_text("is an encoder-decoder").first).to_be_visible()
    tab.get_by_role("link", name="Open Encoder-decoder").click()
    tab.wait_for_selector("[data-test-script-state='notRunning']")
    expect(tab.locator("h1").first).to_contain_text("Encoder-decoder")
    expect(tab.get_by_text("“1 2 3”").first).to_be_visible()
