"""Discoveries in a real browser: guess, Reveal, Show me, and the page that opens shows the named head and token.

The head, token and weight checked here come from the model's own search (explorer.discoveries), which
tests/test_discoveries.py recomputes independently.
"""
import pytest
from playwright.sync_api import expect

from browser_support import open_view, wait_until_run
from explorer.steps import attention
from explorer import discoveries
from model.checkpoint import load_bundled


@pytest.fixture(scope="module")
def cards():
    return {card.key: card for card in discoveries.discoveries(load_bundled("tinytales"), "tinytales")}


def selectbox_value(page, label: str) -> str:
    return page.locator(f"[data-testid='stSelectbox'] input[aria-label='{label}']").input_value()


def card_of(page, card):
    """The bordered container of one discovery: the innermost block holding its title and question."""
    question = page.get_by_role("radiogroup", name=card.question)
    return page.locator("[data-testid='stVerticalBlock']").filter(
        has=page.get_by_role("heading", name=card.title)).filter(has=question).last


def test_guess_reveal_and_show_me_open_the_named_head_and_token(tab, app_url, cards):
    card = cards["pronoun"]
    open_view(tab, app_url, "discoveries", model="roses", text="roses are red")
    box = card_of(tab, card)
    reveal = box.get_by_role("button", name="Reveal")
    expect(reveal).to_be_disabled()                                       # a guess first
    wrong = next(option for option in card.options if option != card.answer)
    box.get_by_role("radiogroup").get_by_text(wrong, exact=True).click()
    expect(reveal).to_be_enabled()
    reveal.click()
    wait_until_run(tab)
    expect(box).to_contain_text(f"You guessed “{wrong}”. The model: “{card.answer}”.")
    weight = card.facts["weight"]
    expect(box).to_contain_text(f"puts {weight:.2f} of “it”'s attention on “{card.answer}”")
    box.get_by_role("button", name="Show me").click()
    tab.wait_for_url(lambda url: "/attention" in url)
    wait_until_run(tab)
    layer, head, query = card.facts["layer"], card.facts["head"], card.facts["query"]
    sidebar = tab.locator("[data-testid='stSidebar']")
    expect(sidebar.locator("input[aria-label='Model']")).to_have_value("tinytales")
    expect(sidebar.get_by_role("textbox", name="Sentence")).to_have_value(discoveries.PRONOUN_SENTENCE)
    expect(tab.get_by_role("tab", name=attention.SECTIONS[2])).to_have_attribute("aria-selected", "true")
    assert selectbox_value(tab, "Layer") == str(layer)
    assert selectbox_value(tab, "Head") == str(head)
    assert selectbox_value(tab, "Query token") == f"{query}: it"
    expect(tab.locator(".gtitle").filter(has_text=f"Attention pattern of layer {layer} head {head}")).to_be_visible()
    expect(tab.get_by_text(f"“it” puts {weight:.2f} of its attention on “{card.answer}”")).to_be_visible()
    assert f"layer={layer}" in tab.url and f"head={head}" in tab.url and f"token={query}" in tab.url
    assert tab.locator("[data-testid='stException']").count() == 0


def test_the_knockout_card_opens_the_what_if_with_that_head_knocked_out(tab, app_url, cards):
    card = cards["knockout"]
    open_view(tab, app_url, "discoveries")
    box = card_of(tab, card)
    box.get_by_role("radiogroup").get_by_text(card.answer, exact=True).click()
    box.get_by_role("button", name="Reveal").click()
    wait_until_run(tab)
    expect(box).to_contain_text("Your guess was right.")
    box.get_by_role("button", name="Show me").click()
    tab.wait_for_url(lambda url: "/attention" in url)
    wait_until_run(tab)
    layer, head = card.facts["layer"], card.facts["head"]
    expect(tab.get_by_role("tab", name=attention.SECTIONS[4])).to_have_attribute("aria-selected", "true")
    expect(tab.get_by_role("radio", name=f"Knock out head {head} of layer {layer}")).to_be_checked()
    expect(tab.get_by_text(f"it becomes “{card.facts['after']}” at {card.facts['p_after']:.2f}")).to_be_visible()
    assert tab.locator("[data-testid='stException']").count() == 0


def test_back_to_your_sentence_restores_the_model_sentence_and_page_after_show_me(tab, app_url, cards):
    card = cards["pronoun"]
    open_view(tab, app_url, "discoveries", model="roses", text="roses are red")
    box = card_of(tab, card)
    box.get_by_role("radiogroup").get_by_text(card.answer, exact=True).click()
    box.get_by_role("button", name="Reveal").click()
    wait_until_run(tab)
    box.get_by_role("button", name="Show me").click()
    tab.wait_for_url(lambda url: "/attention" in url)
    wait_until_run(tab)
    sidebar = tab.locator("[data-testid='stSidebar']")
    expect(sidebar.get_by_role("textbox", name="Sentence")).to_have_value(discoveries.PRONOUN_SENTENCE)
    back = tab.get_by_role("button", name="Back to your sentence: “roses are red”")
    expect(back).to_be_visible()
    back.click()
    tab.wait_for_url(lambda url: "/discoveries" in url and "model=roses" in url)
    wait_until_run(tab)
    expect(sidebar.locator("input[aria-label='Model']")).to_have_value("roses")
    expect(sidebar.get_by_role("textbox", name="Sentence")).to_have_value("roses are red")
    expect(tab.get_by_role("heading", name="Discoveries")).to_be_visible()
    expect(tab.get_by_role("button", name="Back to your sentence: “roses are red”")).to_have_count(0)
    assert tab.locator("[data-testid='stException']").count() == 0
