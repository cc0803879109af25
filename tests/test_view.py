"""What every page shares: a model whose numbers are not finite, what the model read, the default token,
and a view set by code (explorer.app.state)."""
import copy
import importlib
import io
import json
import math
import re

import numpy as np

import pytest
import torch

from conftest import open_page, page_text, plotly_figures, show_section, type_text
from explorer.app import state
from explorer.steps.attention import experiments, whatif_text
from explorer.steps.whatif import REMOVE_SCALING
from explorer.export import file_name, trace_npz
from explorer.registry import LAB, STEPS
from model.checkpoint import load_bundled
from model.edits import remove_scaling

TINY = load_bundled("tinytales")

# Each tabbed page's section labels, read from the page's own module.
SECTIONS = {slug: importlib.import_module(f"explorer.steps.{module}").SECTIONS for slug, module in (
    ("tokenization", "tokenization"), ("embedding", "embedding"), ("positions", "positions"),
    ("attention", "attention"), ("feedforward", "feedforward"), ("residual", "residual"), ("why", "why"))}


def broken_copy(value: float, name: str = "blocks.0.attn.W_q.weight"):
    """tinytales with one weight set to `value` everywhere (NaN or inf, as a diverged run or a bad file has)."""
    bundle = copy.deepcopy(TINY)
    with torch.no_grad():
        dict(bundle.model.named_parameters())[name].fill_(value)
    return bundle


def with_session_model(slug: str, bundle, name: str = "lab: broken") -> "AppTest":
    at = open_page("home")
    at.session_state["trained_models"] = {name: bundle}        # as the lab or an upload adds one
    at.run()
    at.selectbox(key="model").set_value(name).run()
    if slug != "home":
        at.switch_page(f"pages/{slug}.py").run()
    return at


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_every_page_and_tab_says_a_non_finite_model_cannot_be_shown(value):
    at = with_session_model("home", broken_copy(value))
    for step in [*STEPS, LAB]:
        at.switch_page(step.file).run()
        assert not at.exception, step.slug
        if step is LAB:
            continue                                  # the lab trains new models; it shows no trace
        assert "NaN or infinite values" in page_text(at) and not plotly_figures(at), step.slug
        for section in SECTIONS.get(step.slug, []):
            show_section(at, step.slug, section)
            assert not at.exception and not plotly_figures(at), (step.slug, section)
    assert state.is_finite(TINY.model)                # the shared bundled model was never touched


def test_finite_weights_whose_numbers_overflow_get_a_message_too():
    huge = copy.deepcopy(TINY)
    with torch.no_grad():
        huge.model.embed.tok.weight.mul_(1e37)         # finite, but the norm's variance overflows to inf
    trace = huge.model.run(TINY.tokenizer.encode(state.DEFAULT_SENTENCE))
    assert state.is_finite(huge.model) and not all(bool(torch.isfinite(v).all()) for v in trace.values())
    at = with_session_model("attention", huge)
    assert not at.exception and "overflow" in page_text(at) and not plotly_figures(at)


def test_labels_show_what_the_model_read_and_a_known_sentence_is_offered():
    at = open_page("attention", model="roses")           # the cat sentence: every word unknown to roses
    v = at.session_state["view"]
    assert v.tokens == ["<unk>"] * len(v.typed) and v.typed == state.DEFAULT_SENTENCE.split()
    show_section(at, "attention", SECTIONS["attention"][2])
    ticks = [t for f in plotly_figures(at) for t in f["layout"].get("yaxis", {}).get("ticktext", [])]
    assert ticks and all(t.endswith("&lt;unk&gt;") for t in ticks)
    offer = at.button(key="use_example")
    assert "roses are red violets are blue" in offer.label
    offer.click().run()
    v = at.session_state["view"]
    assert at.text_input(key="text").value == state.EXAMPLES["roses"] and v.prepared.unknown == 0
    assert not [b for b in at.button if b.key == "use_example"]        # nothing more to offer


def test_the_offered_sentence_is_shown_whole_on_its_button():
    at = open_page("attention", text="the cat sat on the xylophone")       # one word tinytales does not know
    offer = at.button(key="use_example")
    assert offer.label == f"Use a sentence tinytales knows: {state.quote(state.DEFAULT_SENTENCE)}"   # not cut


def test_a_long_sentence_is_shortened_after_a_whole_word():
    from explorer.view import shorten
    text = "the cat sat on the mat because it was tired and then the dog barked at the cat until it ran away home"
    short = shorten(text)
    assert len(short) <= 82 and short.endswith(" …") and text.startswith(short[:-2])
    assert text[len(short) - 2] == " "                                   # cut between words, never inside one
    assert shorten(state.DEFAULT_SENTENCE) == state.DEFAULT_SENTENCE


PICKER_PAGES = ("tokenization", "embedding", "positions", "attention", "feedforward", "residual", "prediction")


@pytest.mark.parametrize("text", [state.DEFAULT_SENTENCE, "the dog chased the cat because it was hungry",
                                  "the cats sat on the mats because they"])
def test_every_step_page_opens_on_the_token_whose_forecast_the_home_page_describes(text):
    at = open_page("home", text=text)
    v = at.session_state["view"]
    said = re.search(r"the top guess is “(.+?)” at (\d+)%", re.sub(r"\\(.)", r"\1", page_text(at)))  # unescaped
    assert said, "the home page names the model's top guess"
    probs = torch.softmax(v.trace["logits"][0].double(), -1)                       # (T, V), every position
    described = [t for t in range(len(v.tokens)) if (v.bundle.tokenizer.vocab[int(probs[t].argmax())],
                                                     f"{float(probs[t].max()):.0%}") == (said[1], said[2] + "%")]
    last = len(v.tokens) - 1
    assert last in described                         # the home page describes the last position's forecast
    for slug in PICKER_PAGES:
        at.switch_page(f"pages/{slug}.py").run()
        assert not at.exception and at.session_state["token"] == last, slug
    favourite = next(m for m in at.metric if m.label == "Favourite")              # the prediction page
    assert favourite.value == state.quote(said[1])
    type_text(at, "the dog ran to the old tree")                                  # a new sentence: its last token
    assert at.session_state["token"] == len(at.session_state["view"].tokens) - 1 == 6


def test_the_scaling_what_if_states_the_factor_it_applies():
    cfg = TINY.model.cfg
    ids = TINY.tokenizer.encode(state.DEFAULT_SENTENCE)
    plain, edited = TINY.model.run(ids), TINY.model.run(ids, edits=remove_scaling(cfg))
    ratio = edited["blocks.0.attn.scores"] / plain["blocks.0.attn.scores"]
    factor = float(ratio.median())
    assert factor == pytest.approx(math.sqrt(cfg.d_head), rel=1e-5)        # 4 for K = 16, not 16
    text = whatif_text(REMOVE_SCALING, cfg.d_head)
    assert f"{factor:g} times larger" in text and f"√{cfg.d_head}" in text
    at = show_section(open_page("attention"), "attention", SECTIONS["attention"][4])
    at.radio(key="attention_whatif").set_value("scaling").run()
    assert at.radio(key="attention_whatif").value == "scaling" and experiments(0, 0)["scaling"] == REMOVE_SCALING
    assert "4 times larger" in page_text(at)


def test_apply_view_opens_a_view_as_a_link_would(monkeypatch):
    at = open_page("home")
    chosen = {}
    with monkeypatch.context() as m:                 # what a discovery's button callback does
        m.setattr(state.st, "session_state", chosen)
        state.apply_view(text="the dog chased the cat because it was hungry", layer=1, head=2, token=6,
                         sections={"attention": SECTIONS["attention"][2]})
    for key, value in chosen.items():
        at.session_state[key] = value
    at.switch_page("pages/attention.py").run()
    assert not at.exception and at.session_state["section_attention"] == SECTIONS["attention"][2]
    assert (at.session_state["layer"], at.session_state["head"], at.session_state["token"]) == (1, 2, 6)
    assert "layer 1, head 2" in page_text(at) and "“it”" in page_text(at)
    chosen.clear()
    with monkeypatch.context() as m:                 # a token the sentence does not have falls back, with a notice
        m.setattr(state.st, "session_state", chosen)
        state.apply_view(token=99)
    at.session_state["_url_token"] = chosen["_url_token"]
    at.run()
    assert at.session_state["token"] == len(at.session_state["view"].tokens) - 1
    assert "which this model does not have" in page_text(at)


def test_the_sentences_trace_downloads_as_one_file_a_notebook_opens():
    at = open_page("home")
    v = at.session_state["view"]
    button = at.get("download_button")
    assert len(button) == 1 and button[0].proto.label == "Download this sentence's trace"
    about = {"model": v.name, "sentence": v.text, "config": v.bundle.model.cfg.to_dict(), "typed": v.typed}
    loaded = np.load(io.BytesIO(trace_npz(v.trace, v.tokens, about)))        # allow_pickle=False by default
    assert set(loaded.files) == set(TINY.model.trace_names) | {"_tokens", "_about"}
    for name in TINY.model.trace_names:
        np.testing.assert_array_equal(loaded[name], v.trace[name].numpy())
    T = len(state.DEFAULT_SENTENCE.split())
    assert loaded["blocks.1.attn.pattern"].shape == (1, 4, T, T)
    assert list(loaded["_tokens"]) == v.tokens and json.loads(str(loaded["_about"]))["sentence"] == v.text
    assert file_name("lab: run 1", ["<b>", "the", "cat"]) == "trace_lab__run_1_b_the_cat.npz"
    type_text(at, "")
    assert not at.get("download_button")                      # no sentence, nothing to download


def test_a_link_to_a_trained_model_says_how_to_share_one():
    at = open_page("home", model="lab: run 1")
    assert not at.exception and at.session_state["model"] == "tinytales"
    assert "download its file in the training lab and upload it" in page_text(at)
    at = open_page("home", model="nonsense")
    assert "does not exist" in page_text(at) and "upload it" not in page_text(at)


def test_presenter_mode_survives_a_page_switched_to_by_code():
    at = open_page("discoveries", presenter=1)
    card = at.radio[0]
    card.set_value(card.options[1]).run()
    at.button(key="discovery_reveal_pronoun").click().run()
    [show] = [b for b in at.button if b.key and b.key.startswith("discovery_show_pronoun")]
    show.click().run()
    assert at.session_state["_page"] == "attention" and not at.exception
    assert at.session_state["presenter"] is True and at.toggle(key="presenter").value is True
    at = open_page("training", presenter=1)                     # the lab's Explore switches page too
    at.button(key="lab_start").click().run()
    at.session_state["lab_runs"][-1].tick()
    at.button(key="lab_pause").click().run()
    at.button(key="lab_publish").click().run()
    assert at.session_state["_page"] == "" and at.session_state["model"] == "lab: run 1"     # the home page
    assert at.session_state["presenter"] is True and at.toggle(key="presenter").value is True
