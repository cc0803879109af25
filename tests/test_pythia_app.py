"""Pythia in the app: the picker offers it with a training-step picker, every page and tab reads a Pythia-shaped
model (random weights in Pythia's layout: parallel blocks, a quarter of each head turned by rotary positions, untied
embeddings, a padded vocabulary) at two steps from a prepared cache holding several revisions of one repository, a
link keeps the step, a step missing offline is said in words and the page keeps the step it had, and Watch it learn
reads every step this server has."""
import math

import numpy as np
import pytest
import torch

from conftest import figure_titled, open_page, page_text, plotly_figures, show_section
from explorer.app import models
from explorer.registry import BY_SLUG, STEPS
from explorer.steps import learning
from model import hub
from model.hub import PYTHIA_70M
from model.pretrained import load_pretrained
from neox_support import pythia_hub_cache

TEXT = "Paris is the capital of France, and the quick brown fox jumps over the lazy dog."
HERE = (0, 512, 143_000)                       # the steps the prepared cache holds (not 1,000: "missing offline")


@pytest.fixture(scope="module")
def pythia_cache(tmp_path_factory):
    cache, _ = pythia_hub_cache(tmp_path_factory.mktemp("pythia"), steps=HERE)
    return cache


@pytest.fixture
def pythia(pythia_cache, monkeypatch):
    """The prepared cache, offline; {step: the model at that step, loaded by our loader}."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "CACHE_DIR", pythia_cache)
    return {step: load_pretrained(hub.cached(hub.at_step(PYTHIA_70M, step), pythia_cache)) for step in HERE}


def test_the_picker_offers_pythia_and_its_training_steps(pythia):
    at = open_page("home", model="pythia-70m", text=TEXT)
    assert not at.exception and at.selectbox(key="model").value == "pythia-70m"
    steps = at.selectbox(key="step")
    assert steps.options == [f"{s:,}" + (" (random: before training)" if s == 0 else " (final)" if s == 143_000
                                         else "") for s in hub.SHOWN_STEPS]
    assert steps.value == 143_000 and at.session_state["view"].name == "pythia-70m"
    assert "Pythia-70M" in at.selectbox(key="model").help
    assert models.label("pythia-70m@step512") == "Pythia-70M at step 512"
    at = open_page("home", model="gpt2")                                # another model: no step picker
    assert not [s for s in at.sidebar.selectbox if s.key == "step"]


def test_every_page_and_tab_runs_on_pythia_at_two_steps_on_its_own_numbers(pythia):
    for step in (0, 143_000):
        name = models.at_step("pythia-70m", step)
        at = open_page("home", model=name, text=TEXT)
        assert not at.exception and at.session_state["step"] == step and at.session_state["view"].name == name
        v = at.session_state["view"]
        bundle = pythia[step]
        ids = bundle.tokenizer.encode(TEXT)
        assert list(v.ids) == ids
        torch.testing.assert_close(v.trace["logits"], bundle.model.run(ids)["logits"])   # that step's own numbers
        for page in [*STEPS, BY_SLUG["discoveries"], BY_SLUG["features"], BY_SLUG["learning"]]:
            at.switch_page(page.file).run()
            assert not at.exception, (step, page.slug, at.exception)
            for label in page.labels or [None]:
                if label is not None:
                    show_section(at, page.slug, label)
                assert not at.exception, (step, page.slug, label, at.exception)
                assert "Traceback" not in page_text(at)
            assert at.session_state["step"] == step                      # every page keeps the step
        cfg = bundle.model.cfg
        at.switch_page(BY_SLUG["positions"].file).run()
        said = page_text(at)
        assert f"dimensions 0 to {cfg.d_rotary - 1} ({cfg.d_rotary / cfg.d_head:.0%} of the {cfg.d_head}" in said
        assert f"{cfg.d_rotary // 2} pairs per head, {cfg.d_rotary} of its {cfg.d_head} dimensions" in said
        at.switch_page(BY_SLUG["residual"].file).run()
        show_section(at, "residual", BY_SLUG["residual"].labels[0])             # how one block is wired
        assert "Its blocks are **parallel**" in " ".join(m.value for m in at.markdown)
        wiring = figure_titled(at, "How block")
        assert min(a["y"] for a in wiring["layout"]["annotations"] if a.get("text") == "feed-forward") < 0   # own lane


def test_a_link_keeps_the_step_and_a_step_missing_offline_keeps_the_step_the_page_had(pythia):
    at = open_page("attention", model="pythia-70m@step512", text=TEXT)
    assert not at.exception and at.session_state["step"] == 512 and at.session_state["model"] == "pythia-70m"
    assert any("model=pythia-70m%40step512" in c.value for c in at.code)      # "Copy a link to this view" keeps it
    at.selectbox(key="step").set_value(1000).run()                     # not in this server's cache, and offline
    assert not at.exception and at.session_state["step"] == 512
    said = page_text(at)
    assert "Pythia-70M at step 1,000 could not be had on this server, so this page keeps step 512" in said
    assert "offline" in said and at.session_state["view"].name == "pythia-70m@step512"
    torch.testing.assert_close(at.session_state["view"].trace["logits"],
                               pythia[512].model.run(pythia[512].tokenizer.encode(TEXT))["logits"])
    at.selectbox(key="step").set_value(0).run()                         # a step it has
    assert not at.exception and at.session_state["view"].name == "pythia-70m@step0"


@pytest.mark.parametrize("model", ["pythia-70m@step999", "pythia-70m@step", "pythia-70m@step<script>"])
def test_a_link_to_a_step_pythia_was_not_saved_at_says_so_and_shows_the_final_step(pythia, model):
    at = open_page("home", model=model, text=TEXT)
    assert not at.exception and at.session_state["model"] == "pythia-70m"
    assert at.session_state["step"] == 143_000
    assert "not saved at" in page_text(at) or "does not exist" in page_text(at)
    assert "<script>" not in " ".join(m.value for m in at.markdown)


def recomputed(bundle, ids: list[int]) -> tuple[float, int, float]:
    """(loss on the sentence, top guess among the tokenizer's ids, its probability), from the logits by hand."""
    logits = bundle.model.run(ids)["logits"][0].double()                                   # (T, V)
    loss = -logits[:-1].log_softmax(-1)[torch.arange(len(ids) - 1), torch.tensor(ids[1:])].mean()
    probs = logits[-1].softmax(-1)
    guess = int(probs[:len(bundle.tokenizer.vocab)].argmax())
    return float(loss), guess, float(probs[guess])


def test_watch_it_learn_reads_every_step_this_server_has(pythia):
    at = open_page("learning", model="pythia-70m", text=TEXT)
    assert not at.exception
    v = at.session_state["view"]
    guesses = figure_titled(at, "The model's next word after your sentence")["data"][0]
    assert guesses["x"] == [f"step {s:,}" for s in HERE]
    losses = figure_titled(at, "Loss on your sentence")["data"][0]
    for i, step in enumerate(HERE):
        loss, guess, p = recomputed(pythia[step], list(v.ids))
        assert math.isclose(losses["y"][i], loss, rel_tol=1e-4)
        assert math.isclose(guesses["y"][i], p, rel_tol=1e-4)
        assert guesses["customdata"][i] == learning.safe(learning.visible(pythia[step].tokenizer.vocab[guess]))
    heads = figure_titled(at, "induction score")["data"]
    cfg = pythia[0].model.cfg
    assert len(heads) == cfg.n_layers * cfg.n_heads
    said = page_text(at)
    assert f"from {losses['y'][0]:.2f} nats at step 0" in said or f"{losses['y'][0]:.2f}" in said
    assert "induction" in said and "step" in said
    assert "This server has 3 of the 8 training steps" in said
    at.button(key="learning_download").click().run()                  # offline: said in words, the page keeps going
    assert not at.exception and any("offline" in w.value for w in at.warning)
    assert figure_titled(at, "The model's next word after your sentence")["data"][0]["x"] == guesses["x"]


def test_watch_it_learn_on_a_model_without_checkpoints_offers_pythia():
    at = open_page("learning", model="tinytales", text="the cat sat")
    assert not at.exception and any("Pythia-70M" in i.value for i in at.info)
    assert at.button(key="learning_pythia")


def test_the_class_question_first_right_is_the_first_step_that_writes_the_last_steps_word(pythia):
    from explorer.app import classroom
    from explorer.lessons import LessonStep
    from explorer.questions import Question, label
    step = LessonStep(page="learning", view={"model": "pythia-70m", "text": TEXT}, question=Question("first-right"))
    asked = classroom.asked(step, "tinytales", "")
    ids = pythia[0].tokenizer.encode(TEXT)
    guesses = [recomputed(pythia[s], ids)[1] for s in HERE]
    first = next(s for s, g in zip(HERE, guesses) if g == guesses[-1])
    assert asked.options == tuple(f"step {s:,}" for s in HERE) and asked.answer == f"step {first:,}"
    word = label(pythia[143_000].tokenizer.vocab[guesses[-1]])
    assert f"first write “{word}”" in asked.prompt and f"it first does at **step {first:,}**" in asked.said


def test_a_dictionary_of_pythia_at_a_step_is_uploaded_not_trained_in_the_lab(pythia):
    at = open_page("features", model="pythia-70m@step512", text=TEXT)
    at = show_section(at, "features", BY_SLUG["features"].tab("dictionary"))
    assert not at.exception
    assert any("Upload one in SAELens' format in the training lab" in i.value for i in at.info)


@pytest.mark.parametrize("step, said", [(0, "is the model before any training: its random weights at step 0, before "
                                            "it read the Pile"),
                                        (512, "is the model after 512 of its 143,000 training steps on the Pile"),
                                        (143_000, "was trained on the Pile")])
def test_the_big_picture_says_how_far_the_model_at_this_step_was_trained(pythia, step, said):
    at = open_page("home", model=models.at_step("pythia-70m", step), text=TEXT)
    assert not at.exception and said in page_text(at)


@pytest.mark.parametrize("text", ["", "<script>alert(1)</script> 🐈 東京", "x", "the " * 500])
def test_watch_it_learn_takes_any_sentence_and_says_what_it_needs(pythia, text):
    at = open_page("learning", model="pythia-70m", text=text)
    assert not at.exception and "Traceback" not in page_text(at)
    assert not any("<script>" in str(m.value) and m.proto.allow_html for m in at.markdown)
    v = at.session_state["view"]
    if v.trace is None or len(v.ids) < 2:                      # nothing, or one token: said, no chart
        assert at.info and not plotly_figures(at)
    else:
        assert figure_titled(at, "The model's next word after your sentence")["data"][0]["x"] == \
            [f"step {s:,}" for s in HERE]
