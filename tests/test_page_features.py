"""The Features page in AppTest: neurons, steering and the superposition toy, each tab on the models the picker
offers, its numbers the model's own (recomputed here), and bad input met with a message."""
import math
import re

import pytest
import torch

from conftest import open_page, page_text, plotly_figures, show_section, decode
from explorer.registry import BY_SLUG
from model.checkpoint import load_bundled
from questions_support import steered_logits

PAGE = BY_SLUG["features"]
TEXT = "the cats sat on the mats because"


def tab(at, name: str):
    return show_section(at, "features", PAGE.tab(name))


def figure_titled(at, words: str) -> dict:
    found = [f for f in plotly_figures(at) if words in str((f["layout"].get("title") or {}).get("text", ""))]
    assert found, [f["layout"].get("title") for f in plotly_figures(at)]
    return found[0]


@pytest.mark.parametrize("model", ["tinytales", "roses"])
def test_every_tab_runs_on_the_bundled_models_with_their_own_numbers(model):
    bundle = load_bundled(model)
    at = open_page("features", model=model, layer="1")
    text = at.session_state["text"]
    ids = bundle.tokenizer.encode(text)[-64:]
    post = bundle.model.run(ids)["blocks.1.mlp.post"][0]                                    # (T, F)
    busiest = int(post.amax(0).argmax())
    at = tab(at, "neurons")
    assert not at.exception and at.session_state["features_neuron"] == busiest             # starts at the busiest
    bars = figure_titled(at, "on your sentence")["data"][0]
    torch.testing.assert_close(torch.tensor(decode(bars["y"]), dtype=torch.float32), post[:, busiest])
    i = int(post[:, busiest].argmax())
    assert f"fires most on" in page_text(at) and f"(token {i}), at {float(post[i, busiest]):.2f}" in page_text(at)
    w = bundle.model.blocks[1].mlp.W_out.weight[:, busiest]
    assert "raises the score of" in page_text(at) and "lowers" in page_text(at)
    assert figure_titled(at, "pushes up and down") and figure_titled(at, "fires most in")
    assert w.norm() > 0
    at = tab(at, "steering")
    assert not at.exception
    steered = steered_logits(bundle, ids, 1, {"steer-by": "neuron", "strength": 8.0})
    word = bundle.tokenizer.vocab[int(steered.argmax())]
    heat = figure_titled(at, "without and with steering")["data"][0]
    assert word in str(decode(heat["text"])[1][0]) or word in page_text(at)            # the steered first word
    rose = re.search(r"rose from [\d.]+% to ([\d.]+)%", page_text(at))
    assert rose and float(rose[1]) > 0
    at = tab(at, "superposition")
    assert not at.exception and "pentagon" in page_text(at)                                 # sparsity 0.9


def test_steering_by_two_sentences_adds_their_difference_as_the_hand_made_run_does():
    bundle = load_bundled("tinytales")
    at = tab(open_page("features", model="tinytales", text="the cat sat on the mat because", layer="0"), "steering")
    at.radio(key="features_steer_by").set_value("difference").run()
    at.text_input(key="features_sentence_a").set_value("the dogs ran").run()
    at.text_input(key="features_sentence_b").set_value("the dog ran").run()
    at.number_input(key="features_strength").set_value(2.0).run()
    assert not at.exception
    ids = bundle.tokenizer.encode("the cat sat on the mat because")
    fields = {"steer-by": "difference", "sentence-a": "the dogs ran", "sentence-b": "the dog ran", "strength": 2.0}
    probs = torch.softmax(steered_logits(bundle, ids, 0, fields).double(), -1)
    top = int(probs.argmax())
    shifts = figure_titled(at, "probabilities move")["data"][0]
    risers = [t for t, c in zip(decode(shifts["customdata"])[:, 0], decode(shifts["y"])) if c > 0]
    assert "they" in risers and bundle.tokenizer.vocab[top] == "they"                    # plural steers to "they"
    assert f"“they” rose from" in page_text(at)
    plain = torch.softmax(bundle.model.run(ids)["logits"][0, -1].double(), -1)
    change = 100 * float(probs[top] - plain[top])
    assert any(math.isclose(float(y), change, abs_tol=1e-3) for y in decode(shifts["y"]))


def test_bad_steering_gets_a_message_and_the_page_keeps_working():
    at = tab(open_page("features", model="tinytales", strength="1e9"), "steering")
    assert not at.exception and any("too large to mean anything" in w.value for w in at.warning)
    assert at.number_input(key="features_strength").value == 8.0                            # the default instead
    at.radio(key="features_steer_by").set_value("difference").run()
    at.text_input(key="features_sentence_b").set_value("").run()
    assert not at.exception and any("second sentence of the difference is empty" in i.value for i in at.info)
    at.text_input(key="features_sentence_b").set_value("<script>alert(1)</script>").run()
    assert not at.exception and "&lt;script" not in page_text(at)                        # shown as text, escaped


def test_an_encoder_decoder_is_told_the_page_reads_a_decoder_and_the_toy_still_works():
    at = tab(open_page("features", model="translate"), "neurons")
    assert not at.exception and any("encoder-decoder" in i.value for i in at.info)
    at = tab(at, "superposition")
    assert not at.exception and plotly_figures(at)


# --- GPT-2 and SmolLM2 shapes (random weights, from prepared hub caches) -------------------------------------

@pytest.fixture(scope="module")
def hub_caches(tmp_path_factory):
    from gpt2_support import gpt2_hub_cache
    from llama_support import smollm2_hub_cache
    return {"gpt2": gpt2_hub_cache(tmp_path_factory.mktemp("gpt2"), d_model=48),
            "smollm2": smollm2_hub_cache(tmp_path_factory.mktemp("smollm2"), d_model=36)}


@pytest.mark.parametrize("model", ["gpt2", "smollm2"])
def test_a_pretrained_models_neurons_are_read_over_the_bundled_english_text_once_and_kept_on_disk(
        model, hub_caches, tmp_path, monkeypatch, fresh_cache):
    from explorer.app import models
    from model import neurons
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "CACHE_DIR", hub_caches[model])
    monkeypatch.setattr("explorer.app.neurons.NEURON_DIR", tmp_path)
    text = "Paris is the capital of France, and the quick brown fox jumps over the lazy dog."
    at = tab(open_page("features", model=model, text=text), "neurons")
    assert not at.exception and at.selectbox(key="model").value == model
    assert "Pride and Prejudice" in page_text(at) and "public domain" in page_text(at)      # the text is named
    [file] = tmp_path.iterdir()
    assert file.name.startswith(f"{model}-") and file.stat().st_size > 0
    contexts = figure_titled(at, "fires most in")
    import streamlit as st
    st.cache_resource.clear()                                          # a restarted server: the file, no pass
    monkeypatch.setattr(neurons, "index_neurons", lambda *a, **k: pytest.fail("the text was read again"))
    again = tab(open_page("features", model=model, text=text), "neurons")
    assert not again.exception and figure_titled(again, "fires most in")["data"] == contexts["data"]
    at = tab(again, "steering")
    assert not at.exception and "Steered with neuron" in page_text(at)


def test_a_kept_neuron_index_that_is_broken_or_another_models_is_read_again(tmp_path):
    from explorer import questions
    from explorer.steps import features
    from model import neurons
    view = questions.reading("roses", load_bundled("roses"), "roses are red", 64)
    text = features.own_text(view)
    first = features.neuron_index(view, text, kept=tmp_path / "roses.safetensors")
    assert neurons.load_index(tmp_path / "roses.safetensors").values.shape == first.values.shape
    tiny = questions.reading("tinytales", load_bundled("tinytales"), "the cat sat", 64)
    other = features.neuron_index(tiny, features.own_text(tiny), kept=tmp_path / "tiny.safetensors")
    assert other.values.shape[:2] != first.values.shape[:2]
    for n, stale in enumerate(((tmp_path / "tiny.safetensors").read_bytes(), b"not a safetensors file")):
        kept = tmp_path / f"stale-{n}.safetensors"           # (a new name: the server's memory has not seen it)
        kept.write_bytes(stale)                                # another model's index, then a broken file
        index = features.neuron_index(view, text, kept=kept)
        assert index.values.shape == first.values.shape and torch.equal(index.values, first.values)
        assert neurons.load_index(kept).values.shape == first.values.shape      # replaced by this model's
