"""GPT-2 and Pythia in a real browser: a server whose Hugging Face cache holds a GPT-2-shaped model (12 layers, 12
heads, 50,257 tokens, 1,024 positions, random weights, d_model 48) where GPT-2's files go, and Pythia-70M's layout at
two training steps where its checkpoints go, and no network at all."""
import pytest
from playwright.sync_api import expect

from browser_support import open_view, serve, type_sentence, wait_until_run
from explorer.registry import BY_SLUG, STEPS
from gpt2_support import copy_into_hub_cache, gpt2_shaped_dir
from model.hub import GPT2
from neox_support import pythia_hub_cache

SENTENCE = "Paris is the capital of France, and my name is Sara"


@pytest.fixture(scope="module")
def gpt2_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpt2_browser")
    cache = root / "hub"
    copy_into_hub_cache(gpt2_shaped_dir(root / "files", d_model=48), cache, GPT2)
    pythia_hub_cache(root, steps=(0, 143_000))                     # into root / "hub" too
    with serve(env={"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}) as (base, _):
        yield base


@pytest.fixture
def page(browser_context, gpt2_server):
    page = browser_context.new_page()
    page.set_default_timeout(60_000)
    page.dialogs = []
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    yield page
    page.close()


def no_errors(page) -> None:
    errors = page.locator("[data-testid='stException']")
    assert errors.count() == 0, errors.first.inner_text()


@pytest.mark.parametrize("slug", [step.slug for step in STEPS])
def test_every_page_draws_gpt2(page, gpt2_server, slug):
    open_view(page, gpt2_server, slug, model="gpt2", text=SENTENCE)
    no_errors(page)
    assert page.locator("[data-testid='stSidebar'] input[aria-label='Model']").input_value() == "GPT-2 small (124M)"
    if slug != "home":
        page.wait_for_selector(".js-plotly-plot .main-svg", state="attached")
    else:
        expect(page.get_by_text("50,257 scores", exact=True)).to_be_visible()


def test_every_head_of_gpt2_and_hostile_text(page, gpt2_server):
    open_view(page, gpt2_server, "attention", model="gpt2", text=SENTENCE, layer=11, head=11,
              section="Every head")
    no_errors(page)
    overview = page.locator(".js-plotly-plot").filter(has=page.locator(".gtitle", has_text="Every head in every layer"))
    expect(overview).to_have_count(1)
    ticks = overview.locator(".xtick text").all_text_contents()
    assert ticks[:3] == ["head 0", "head 1", "head 2"] and len(ticks) == 12
    type_sentence(page, "<img src=x onerror=alert(1)> 東京 🐈")
    no_errors(page)
    assert page.dialogs == [] and page.locator("img[src='x']").count() == 0
    expect(page.locator(".js-plotly-plot .gtitle").filter(has_text="Every head in every layer")).to_have_count(1)


PYTHIA_PAGES = [*STEPS, BY_SLUG["discoveries"], BY_SLUG["features"], BY_SLUG["learning"]]


def step_shown(page) -> str:
    return page.locator("[data-testid='stSidebar'] input[aria-label='Training step']").input_value()


def test_every_page_draws_pythia_at_two_training_steps_and_keeps_the_step_from_page_to_page(page, gpt2_server):
    open_view(page, gpt2_server, "home", model="pythia-70m@step0", text=SENTENCE)
    no_errors(page)
    assert step_shown(page) == "0 (random: before training)"
    for shown in PYTHIA_PAGES:                   # at step 0, each page by the sidebar's link: the step goes along
        page.locator("[data-testid='stSidebarNav']").get_by_role("link", name=shown.title, exact=True).click()
        wait_until_run(page)
        no_errors(page)
        if shown.slug not in ("home", "discoveries"):    # (their first screens are text and the guesses' cards)
            page.wait_for_selector(".js-plotly-plot .main-svg", state="attached")
        assert step_shown(page) == "0 (random: before training)", shown.slug
        assert "model=pythia-70m%40step0" in page.url, (shown.slug, page.url)        # the link keeps the step
    page.locator("[data-testid='stSelectbox']:has(input[aria-label='Training step'])").click()
    page.get_by_role("option", name="143,000 (final)", exact=True).click()
    wait_until_run(page)
    no_errors(page)
    for shown in PYTHIA_PAGES:                   # the final model, each page again
        page.locator("[data-testid='stSidebarNav']").get_by_role("link", name=shown.title, exact=True).click()
        wait_until_run(page)
        no_errors(page)
        if shown.slug not in ("home", "discoveries"):
            page.wait_for_selector(".js-plotly-plot .main-svg", state="attached")
        assert step_shown(page) == "143,000 (final)", shown.slug
    expect(page.get_by_text("The model's next word after your sentence, at each step")).to_be_visible()
