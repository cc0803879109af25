"""GPT-2 small in the app: the picker offers it, an offline server says why it cannot have it and keeps working."""
import importlib
import time

import numpy as np
import pytest
import torch

from conftest import decode, figure_titled, open_page, page_text, plotly_figures, show_section
from explorer import models
from explorer import whatif as W
from explorer.plot import token_label
from explorer.steps import STEPS
from gpt2_support import copy_into_hub_cache, gpt2_shaped_dir
from model import hub
from model.hub import GPT2
from model.pretrained import load_pretrained

SECTIONS = {slug: importlib.import_module(f"explorer.{slug}").SECTIONS for slug in
            ("tokenization", "embedding", "positions", "attention", "feedforward", "residual")}


@pytest.fixture
def offline_empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "CACHE_DIR", tmp_path)


def test_the_picker_offers_gpt2_small_with_its_size():
    at = open_page("home")
    picker = at.selectbox(key="model")
    assert "gpt2" in picker.options or any("GPT-2 small" in o for o in picker.options)
    assert picker.value == "tinytales"                              # the default stays the tiny model
    assert "124M parameters" in picker.help and "550 MB" in picker.help and "MIT" in picker.help


@pytest.mark.parametrize("slug", ["home", "attention", "prediction"])
def test_offline_the_picker_says_gpt2_needs_a_download_and_the_tiny_model_keeps_working(offline_empty_cache, slug):
    start = time.perf_counter()
    at = open_page(slug, model="gpt2")
    took = time.perf_counter() - start
    assert not at.exception
    warnings = [w.value for w in at.sidebar.warning]
    assert any("one-time download" in w and "offline" in w and "small models work as before" in w for w in warnings)
    assert at.selectbox(key="model").value == "tinytales"
    assert at.session_state["view"].name == "tinytales" and at.session_state["view"].trace is not None
    if slug != "home":
        assert plotly_figures(at)
    assert "Traceback" not in page_text(at)
    assert took < 60                                                 # no 23 s retries per attempt (AppTest is slow)


def test_picking_gpt2_offline_from_the_sidebar_goes_back_to_the_tiny_model(offline_empty_cache):
    at = open_page("home")
    at.selectbox(key="model").set_value("gpt2").run()
    assert not at.exception
    assert at.selectbox(key="model").value == "tinytales"
    assert any("one-time download" in w.value for w in at.sidebar.warning)


# --- a GPT-2-shaped model (12 layers, 12 heads, 50,257 tokens, 1,024 positions, d_model 96, d_ff 384) -------

LONG = ("Paris is the capital of France, and my name is Sara. I love pizza and cats, and every morning I walk "
        "to the old bakery near the river.")


@pytest.fixture(scope="module")
def gpt2_cache(tmp_path_factory):
    """A Hugging Face cache holding a GPT-2-shaped model with random weights where GPT-2's files would be."""
    root = tmp_path_factory.mktemp("gpt2")
    cache = root / "hub"
    copy_into_hub_cache(gpt2_shaped_dir(root / "files", d_model=96), cache, GPT2)
    return cache


@pytest.fixture
def gpt2(gpt2_cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")                  # a prepared cache needs no network
    monkeypatch.setattr(models, "CACHE_DIR", gpt2_cache)
    return load_pretrained(hub.cached(GPT2, gpt2_cache))


def test_every_page_and_tab_runs_with_gpt2_and_its_figures_have_its_shapes(gpt2):
    at = open_page("home", model="gpt2", text=LONG)
    assert not at.exception and at.selectbox(key="model").value == "gpt2"
    v = at.session_state["view"]
    ids = gpt2.tokenizer.encode(LONG)
    assert list(v.prepared.ids) == ids and len(ids) == 32
    torch.testing.assert_close(v.trace["logits"], gpt2.model.run(ids)["logits"])          # GPT-2's own numbers
    assert "50,257" in page_text(at) and "GELU, tanh approximation" in page_text(at)
    shapes = {}
    for step in STEPS:
        at.switch_page(step.file).run()
        assert not at.exception, step.slug
        for section in SECTIONS.get(step.slug, [None]):
            if section is not None:
                show_section(at, step.slug, section)
            assert not at.exception, (step.slug, section)
            assert "Traceback" not in page_text(at)
            for figure in plotly_figures(at):
                for trace in figure["data"]:
                    z = trace.get("z")
                    if z is not None:
                        shapes[(step.slug, section, _title(figure))] = np.asarray(decode(z), dtype=object).shape
    widths = {key: shape[-1] for key, shape in shapes.items() if len(shape) == 2}
    assert max(widths.values()) <= 64, widths                        # nothing 96 or 384 wide, nor 50,257 long
    embedding = next(s for k, s in shapes.items() if k[0] == "embedding" and "embeddings" in k[2])
    assert embedding == (32, 64)                                                     # 64 of 96 dimensions
    ffn = next(s for k, s in shapes.items() if k[0] == "feedforward" and "Neuron activations" in k[2])
    assert ffn == (32, 64)


def _title(figure) -> str:
    title = figure.get("layout", {}).get("title", {})
    return title.get("text", "") if isinstance(title, dict) else str(title)


def test_the_embedding_window_shows_the_dimensions_it_names(gpt2):
    at = show_section(open_page("embedding", model="gpt2", text=LONG), "embedding", SECTIONS["embedding"][0])
    at.selectbox(key="embedding_dims").set_value(64).run()
    figure = figure_titled(at, "This sentence's embeddings")
    assert "dimensions 64–95" in _title(figure)
    ids = gpt2.tokenizer.encode(LONG)
    np.testing.assert_allclose(decode(figure["data"][0]["z"]), gpt2.model.embed.tok.weight[ids, 64:96].detach().numpy(),
                               rtol=1e-6)
    at.selectbox(key="embedding_dims").set_value(-1).run()                            # all of them, on demand
    assert decode(figure_titled(at, "This sentence's embeddings")["data"][0]["z"]).shape == (32, 96)


def test_knocking_out_a_gpt2_head_changes_the_forecast_by_the_real_amount(gpt2):
    at = show_section(open_page("attention", model="gpt2", text=LONG, layer=11, head=7), "attention", "What if?")
    assert not at.exception
    figure = figure_titled(at, "Next-token probabilities: before and after")
    query = at.session_state["token"]
    ids = gpt2.tokenizer.encode(LONG)
    knocked = gpt2.model.run(ids, edits=W.knock_out_head(11, 7).edits(gpt2.model.cfg))
    after = torch.softmax(knocked["logits"][0, query], -1)
    shown = {token_label(t): i for i, t in enumerate(gpt2.tokenizer.vocab)}
    tokens = [shown[t] for t in figure["data"][1]["x"]]
    np.testing.assert_allclose(decode(figure["data"][1]["y"]), after[tokens].numpy(), rtol=1e-5)


@pytest.mark.parametrize("text", ["<script>alert('hi')</script> **bold** $x$", "🐈‍⬛ 東京 naïve e\u0301 \x00",
                                  "word " * 400])
def test_hostile_text_is_read_by_gpt2_without_harm(gpt2, text):
    at = open_page("attention", model="gpt2", text=text)
    assert not at.exception
    v = at.session_state["view"]
    assert v.prepared.ids == gpt2.tokenizer.encode(text)[-64:] and not v.prepared.unknown
    if len(gpt2.tokenizer.encode(text)) > 64:
        assert "1,024" in page_text(at) and "last 64" in page_text(at)
    assert not any("<script>" in str(m.value) and m.proto.allow_html for m in at.markdown)
