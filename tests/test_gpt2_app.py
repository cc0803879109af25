"""GPT-2 small in the app: the picker offers it, an offline server says why it cannot have it and keeps working."""
import importlib
import time

import numpy as np
import pytest
import torch

from conftest import decode, figure_titled, open_page, page_text, plotly_figures, show_section
from explorer.steps import embedding as steps_embedding
from explorer.app import models
from explorer.steps import whatif
from explorer.plot import token_label
from explorer.registry import STEPS
from model.transformer import sinusoidal_table
from gpt2_support import gpt2_hub_cache
from model import hub
from model.hub import GPT2
from model.pretrained import load_pretrained

SECTIONS = {slug: importlib.import_module(f"explorer.steps.{slug}").SECTIONS for slug in
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
    if slug == "home":                   # the page the link opened (AppTest's first run) says so in the main area
        assert any("could not be loaded on this server, so this page shows tinytales instead" in w.value
                   for w in at.main.warning)
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
    assert not at.sidebar.get("progress") and not at.sidebar.expander    # no leftover download box or empty bar


# --- a GPT-2-shaped model (12 layers, 12 heads, 50,257 tokens, 1,024 positions, d_model 96, d_ff 384) -------

LONG = ("Paris is the capital of France, and my name is Sara. I love pizza and cats, and every morning I walk "
        "to the old bakery near the river.")


@pytest.fixture(scope="module")
def gpt2_cache(tmp_path_factory):
    return gpt2_hub_cache(tmp_path_factory.mktemp("gpt2"), d_model=96)


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
    overview = shapes.pop(("attention", "Every head", "Every head in every layer"))
    assert overview == (12 * 33 - 1, 12 * 33 - 1)                   # 12 x 12 thumbnails of 32 x 32, blank lines between
    widths = {key: shape[-1] for key, shape in shapes.items() if len(shape) == 2}
    assert max(widths.values()) <= 64, widths                        # nothing 96 or 384 wide, nor 50,257 long
    embedding = next(s for k, s in shapes.items() if k[0] == "embedding" and "embeddings" in k[2])
    assert embedding == (32, 64)                                                     # 64 of 96 dimensions
    ffn = next(s for k, s in shapes.items() if k[0] == "feedforward" and "Neuron activations" in k[2])
    assert ffn == (32, 64)


def test_the_every_head_map_holds_each_heads_real_pattern_at_its_place(gpt2):
    at = open_page("attention", model="gpt2", text=LONG, layer=7, head=5)
    show_section(at, "attention", "Every head")
    assert not at.exception
    figure = next(f for f in plotly_figures(at) if _title(f) == "Every head in every layer")
    z = np.asarray(decode(figure["data"][0]["z"]), dtype=float)
    patterns = gpt2.model.run(gpt2.tokenizer.encode(LONG))
    for layer, head in [(0, 0), (7, 5), (11, 11), (3, 9)]:
        block = z[layer * 33: layer * 33 + 32, head * 33: head * 33 + 32]
        future = np.triu(np.ones((32, 32), dtype=bool), 1)                 # masked cells: no value, grey
        np.testing.assert_allclose(block[~future], patterns[f"blocks.{layer}.attn.pattern"][0, head].numpy()[~future],
                                   atol=1e-6)
        assert np.isnan(block[future]).all()
        grey = np.asarray(decode(figure["data"][1]["z"]), dtype=float)[layer * 33: layer * 33 + 32,
                                                                       head * 33: head * 33 + 32]
        assert (grey[future] == 1).all() and np.isnan(grey[~future]).all()
    assert np.isnan(z[32]).all() and np.isnan(z[:, 32]).all()          # the blank line between thumbnails
    (box,) = figure["layout"]["shapes"]
    assert (box["x0"], box["y0"]) == (5 * 33 - 0.5, 7 * 33 - 0.5)      # the chosen head is outlined
    assert figure["layout"]["xaxis"]["ticktext"] == [f"head {h}" for h in range(12)]
    detail = next(f for f in plotly_figures(at) if _title(f) == "Every head in layer 7")
    assert [a["text"] for a in detail["layout"]["annotations"]][5] == "<b>head 5 (chosen)</b>"


def test_the_vocabulary_map_draws_gpt2s_first_5000_tokens_and_the_sentence_on_the_whole_pca(gpt2):
    at = show_section(open_page("embedding", model="gpt2", text=LONG), "embedding", "The vocabulary map")
    assert not at.exception
    figure = figure_titled(at, "The vocabulary on a map")
    assert "first 5,000 of 50,257 tokens" in _title(figure)
    grey = next(t for t in figure["data"] if t["name"] == "vocabulary")
    red = next(t for t in figure["data"] if t["name"] == "your sentence")
    pca = steps_embedding.pca_2d(gpt2.model.embed.tok.weight)
    np.testing.assert_allclose(decode(grey["x"]), pca.coords[:5000, 0], rtol=1e-6)
    seen = list(dict.fromkeys(gpt2.tokenizer.encode(LONG)))
    assert list(decode(red["customdata"])) == seen and max(seen) > 5000     # the sentence's own, even past 5,000
    np.testing.assert_allclose(decode(red["y"]), pca.coords[seen, 1], rtol=1e-6)
    labels = [t for t in grey["text"] if t]
    assert 15 <= len(labels) < 1000 and not any("&lt;" in t for t in labels)   # WebGL text: shown as written


def test_top_k_offers_steps_across_gpt2s_vocabulary(gpt2):
    at = open_page("prediction", model="gpt2", text=LONG)
    steps = at.select_slider(key="prediction_top_k_steps")
    assert steps.value == 50_257 and "All 50,257 tokens take part" in page_text(at)
    assert at.metric[0].value == "50,257 of 50,257"
    steps.set_value(5).run()
    assert not at.exception and "5 of 50,257 tokens take part" in page_text(at)


def test_gpt2s_logit_lens_reads_13_stages_down_and_its_last_row_is_the_forecast(gpt2):
    at = show_section(open_page("residual", model="gpt2", text=LONG), "residual", "Logit lens")
    assert not at.exception and at.toggle(key="residual_lens_mid").value is False      # 12 layers: one reading each
    data = figure_titled(at, "Logit lens")["data"][0]
    probs = np.asarray(decode(data["z"]), dtype=float)
    assert probs.shape == (13, 32)                                        # stages down, positions across
    ids = gpt2.tokenizer.encode(LONG)
    real = torch.softmax(gpt2.model.run(ids)["logits"][0], -1)            # (T, V)
    np.testing.assert_allclose(probs[-1], real.max(-1).values.numpy(), rtol=1e-4)
    assert [c[2] for c in data["customdata"][-1]] == [gpt2.tokenizer.vocab[i] for i in real.argmax(-1).tolist()]
    assert all(len(t) <= 6 for row in data["text"] for t in row)          # 32 columns: words cut to fit a cell
    at.toggle(key="residual_lens_mid").set_value(True).run()
    assert np.asarray(decode(figure_titled(at, "Logit lens")["data"][0]["z"])).shape == (25, 32)


def test_the_bpe_page_replays_gpt2s_own_merges(gpt2):
    from explorer.steps import tokenization
    tok = gpt2.tokenizer
    assert tokenization.merges_note(tok, tok) == ("These are the model's own BPE merges (50,257 tokens: 256 single bytes + "
                                        "50,000 learned merges + 1 special token).")
    at = show_section(open_page("tokenization", model="gpt2", text="Paris is the capital of France"),
                      "tokenization", "BPE merges")
    assert not at.exception
    assert tok.encode(" capital") == [3139]              # the word the page picks, built by GPT-2's merge #2883 last
    assert "merge “␣cap” + “ital” → “␣capital”. It is merge **#2883**" in page_text(at)


def test_gpt2s_learned_positions_are_drawn_beside_the_sinusoidal_formula(gpt2):
    at = show_section(open_page("positions", model="gpt2", text=LONG), "positions", "Dimension by dimension")
    assert not at.exception
    learned = figure_titled(at, "learned values")
    formula = figure_titled(at, "the sinusoidal formula, not used by this model")
    dims = at.multiselect(key="positions_dims").value
    table, waves = gpt2.model.embed.pos.weight.detach(), sinusoidal_table(1024, 96)
    seats = [t for t in learned["data"] if t["name"].endswith("every seat")]
    assert len(seats) == len(dims) == 4
    for d, trace in zip(dims, seats):
        np.testing.assert_allclose(decode(trace["y"]), table[:, d].numpy(), rtol=1e-6)
    for d, trace in zip(dims, [t for t in formula["data"] if t["name"].endswith("every seat")]):
        np.testing.assert_allclose(decode(trace["y"]), waves[:, d].numpy(), rtol=1e-6, atol=1e-7)


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
    knocked = gpt2.model.run(ids, edits=whatif.knock_out_head(11, 7).edits(gpt2.model.cfg))
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
