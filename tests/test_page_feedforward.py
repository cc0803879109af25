"""Step 5, feed-forward: what a student sees, checked against the model's own trace and weights."""
import math
import re

import numpy as np
import pytest
import torch

from conftest import (assert_each_section_draws_only_its_charts, decode, figure_titled, open_page, page_text,
                      plotly_figures, show_section, type_text)
from explorer.steps import feedforward
from explorer.app.state import DEFAULT_SENTENCE, View

T = len(DEFAULT_SENTENCE.split())        # tokens of the sentence the page opens with
LAST = T - 1
from explorer.steps import whatif
from model.checkpoint import Bundle, load_bundled
from model.config import ModelConfig
from model.inputs import prepare_text
from model.transformer import TransformerLM


def make_view(bundle: Bundle, text: str = DEFAULT_SENTENCE, presenter: bool = False) -> View:
    prepared = prepare_text(bundle.tokenizer, text, bundle.model.cfg.max_len)
    return View(name="test", bundle=bundle, text=text, presenter=presenter, prepared=prepared,
                trace=bundle.model.run(prepared.ids))


@pytest.fixture(scope="module")
def tinytales():
    return load_bundled("tinytales")


@pytest.fixture(scope="module")
def roses():
    return load_bundled("roses")


def tiny_relu_bundle(d_ff: int = 64, **changes) -> Bundle:
    """A random model of another configuration, reading the roses tokenizer."""
    torch.manual_seed(0)
    tokenizer = load_bundled("roses").tokenizer
    cfg = ModelConfig(vocab_size=len(tokenizer.vocab), d_model=16, n_heads=2, n_layers=3, d_ff=d_ff, max_len=16,
                      activation="relu", **changes)
    model = TransformerLM(cfg)
    with torch.no_grad():                     # larger weights than the initialisation, so ReLU has work to do
        for p in model.parameters():
            p.normal_(0, 0.5)
    return Bundle(model=model.eval(), tokenizer=tokenizer)


# ---------------------------------------------------------------- the page, through the app

def show(at, section: str):
    return show_section(at, "feedforward", section)


def test_page_shows_expand_activate_contract_with_the_real_shapes_and_the_heatmap():
    at = open_page("feedforward", layer=1)
    assert not at.exception
    text = page_text(at)
    assert "notebook" in text and "privately" in text
    trace = load_bundled("tinytales").model.run(load_bundled("tinytales").tokenizer.encode(DEFAULT_SENTENCE))
    [shapes] = plotly_figures(at)                  # only the open section is drawn: the first
    assert shapes["layout"]["title"]["text"].startswith("Expand, activate, contract: layer 1")
    notes = " ".join(a["text"] for a in shapes["layout"]["annotations"])
    for what, name, shape in [("input", "mlp.in", f"{T} × 64"), ("before GELU", "mlp.pre", f"{T} × 256"),
                              ("after GELU", "mlp.post", f"{T} × 256"), ("output", "mlp.out", f"{T} × 64")]:
        assert f"<b>{what}</b><br>{shape}" in notes and f"trace name: {name}" in notes   # plain words, code aside
    assert "W_in<br>64 → 256" in notes and "GELU" in notes and "W_out<br>256 → 64" in notes

    show(at, "Which neurons fire")
    assert not at.exception and len(plotly_figures(at)) == 1
    text = page_text(at)
    heat = figure_titled(at, "Neuron activations after GELU, layer 1")
    z = decode(heat["data"][0]["z"])
    np.testing.assert_allclose(z, trace["blocks.1.mlp.post"][0].numpy(), rtol=1e-6, atol=1e-6)
    assert "slightly negative" in text


def test_strongest_neurons_for_the_chosen_token_are_the_real_top_ten():
    at = show(open_page("feedforward", layer=0, token=1), "The strongest neurons")
    assert not at.exception and len(plotly_figures(at)) == 2
    bundle = load_bundled("tinytales")
    post = bundle.model.run(bundle.tokenizer.encode(DEFAULT_SENTENCE))["blocks.0.mlp.post"][0]
    top = post[1].topk(10)
    bars = figure_titled(at, "Strongest neurons for token 1 cat")["data"][0]
    assert list(bars["x"]) == [f"n{j}" for j in top.indices.tolist()]
    np.testing.assert_allclose(decode(bars["y"]), top.values.numpy(), rtol=1e-6)
    everywhere = figure_titled(at, "Where else these neurons fire")["data"][0]
    np.testing.assert_allclose(decode(everywhere["z"]), post[:, top.indices].T.numpy(), rtol=1e-6)
    # the hover names the other tokens that fire the top neuron at least half as strongly
    j, value = int(top.indices[0]), float(top.values[0])
    others = [t for t in range(post.shape[0]) if t != 1 and post[t, j] > 0 and post[t, j] >= 0.5 * value]
    for t in others:
        assert f"{t} {DEFAULT_SENTENCE.split()[t]} (" in bars["customdata"][0]
    if not others:
        assert bars["customdata"][0] == "no other token"


def test_the_share_switched_off_and_the_histogram_are_counted_from_the_trace():
    at = show(open_page("feedforward", layer=0), "Switched off")
    bundle = load_bundled("tinytales")
    trace = bundle.model.run(bundle.tokenizer.encode(DEFAULT_SENTENCE))
    pre, post = trace["blocks.0.mlp.pre"][0], trace["blocks.0.mlp.post"][0]
    negative = int((pre < 0).sum())
    assert f"{negative:,} of {T * 256:,}" in page_text(at)
    assert at.metric[0].value == f"{negative / (T * 256):.1%}"
    hist = figure_titled(at, "Neuron values before and after GELU")["data"]
    before, after = decode(hist[0]["y"]), decode(hist[1]["y"])
    assert before.sum() == after.sum() == T * 256
    edges = np.array([c[0] for c in hist[0]["customdata"]] + [hist[0]["customdata"][-1][1]])
    np.testing.assert_array_equal(before, np.histogram(pre.numpy().ravel(), edges)[0])
    np.testing.assert_array_equal(after, np.histogram(post.numpy().ravel(), edges)[0])


def white_at(colorscale, where: float) -> bool:
    """Whether the colour scale is white (RdBu's rgb(247, 247, 247)) at `where`, a position between 0 and 1."""
    return any(abs(float(s) - where) < 1e-9 and c.replace(" ", "") == "rgb(247,247,247)" for s, c in colorscale)


@pytest.mark.parametrize("layer", [0, 1])
def test_the_gelu_colour_scales_span_the_real_range_of_the_activations_with_white_at_zero(layer):
    at = show(open_page("feedforward", layer=layer, token=1), "Which neurons fire")
    bundle = load_bundled("tinytales")
    assert bundle.model.cfg.activation == "gelu"
    post = bundle.model.run(bundle.tokenizer.encode(DEFAULT_SENTENCE))[f"blocks.{layer}.mlp.post"][0].double()
    low, high = float(post.min()), float(post.max())
    assert -0.17 <= low < 0 < high                        # GELU: never below about -0.17
    heat = figure_titled(at, f"Neuron activations after GELU, layer {layer}")["data"][0]
    assert (heat["zmin"], heat["zmax"]) == pytest.approx((low, high), abs=1e-6) and "zmid" not in heat
    assert white_at(heat["colorscale"], -low / (high - low))         # 0 keeps the neutral colour
    assert f"Here the values run from {low:.2f} to {high:.2f}, and so do the colours".replace("-", "−") in page_text(at)
    show(at, "The strongest neurons")
    everywhere = figure_titled(at, "Where else these neurons fire")["data"][0]
    shown = decode(everywhere["z"])
    assert (everywhere["zmin"], everywhere["zmax"]) == pytest.approx((shown.min(), shown.max()), abs=1e-6)
    if shown.min() < 0:
        assert white_at(everywhere["colorscale"], -shown.min() / (shown.max() - shown.min()))


def test_skipping_the_layer_shows_the_real_change_in_the_next_token_guess():
    at = show(open_page("feedforward", layer=1, token=3), "What if?")
    assert not at.exception
    at.radio(key="mlp_whatif").set_value("chosen").run()          # layer 1, chosen above
    bundle = load_bundled("tinytales")
    ids = bundle.tokenizer.encode(DEFAULT_SENTENCE)
    changes = whatif.skip_mlp(1).edits(bundle.model.cfg)
    before = torch.softmax(bundle.model.run(ids)["logits"][0, 3], -1)
    after = torch.softmax(bundle.model.run(ids, edits=changes)["logits"][0, 3], -1)
    bars = figure_titled(at, "Next-token probabilities: before and after")["data"]
    vocab = bundle.tokenizer.vocab
    for token, p_before, p_after in zip(bars[0]["x"], decode(bars[0]["y"]), decode(bars[1]["y"])):
        assert p_before == pytest.approx(float(before[vocab.index(token)]), abs=1e-6)
        assert p_after == pytest.approx(float(after[vocab.index(token)]), abs=1e-6)
    text = page_text(at)
    assert "With the feed-forward of layer 1 skipped, the top guess after “on”" in text
    best_after = vocab[int(after.argmax())]
    assert f"“{best_after}”" in text


def test_show_the_math_writes_out_the_strongest_neuron_with_real_numbers():
    at = show(open_page("feedforward", layer=0, token=LAST), "The strongest neurons")
    bundle = load_bundled("tinytales")
    trace = bundle.model.run(bundle.tokenizer.encode(DEFAULT_SENTENCE))
    j = int(trace["blocks.0.mlp.post"][0, LAST].argmax())
    x, w = trace["blocks.0.mlp.in"][0, LAST], bundle.model.blocks[0].mlp.W_in.weight[j].detach()
    latex = "\n".join(str(e.value) for e in at.latex)
    assert f"\\text{{pre}}_{{{j}}}" in latex
    w0 = f"{float(w[0]):.3f}" if w[0] >= 0 else f"({float(w[0]):.3f})"
    assert f"({float(x[0]):.3f} \\times {w0})" in latex
    assert f"= {float(trace['blocks.0.mlp.pre'][0, LAST, j]):.4f}" in latex
    assert f"= {float(trace['blocks.0.mlp.post'][0, LAST, j]):.4f}" in latex
    assert "GELU" in latex


def test_relu_model_counts_exact_zeros_and_uses_a_non_negative_scale():
    at = show(open_page("feedforward", model="roses", text="roses are red violets are"), "Switched off")
    assert not at.exception
    bundle = load_bundled("roses")
    post = bundle.model.run(bundle.tokenizer.encode("roses are red violets are"))["blocks.0.mlp.post"][0]
    zeros = int((post == 0).sum())
    text = page_text(at)
    assert f"{zeros:,} of {post.numel():,}" in text and "exactly 0 after ReLU" in text
    heat = figure_titled(show(at, "Which neurons fire"), "Neuron activations")["data"][0]
    assert "zmid" not in heat and decode(heat["z"]).min() >= 0 and heat["zmin"] == 0   # ReLU: 0 is the bottom
    assert "max(0," in "\n".join(str(e.value) for e in show(at, "The strongest neurons").latex)


def test_strange_tokens_stay_text_and_the_page_works_at_the_context_limit():
    at = show(open_page("feedforward"), "The strongest neurons")
    type_text(at, "<b>x</b> the cat 🐈")
    assert not at.exception
    ticks = figure_titled(at, "Where else these neurons fire")["layout"]["xaxis"]["ticktext"]
    assert ticks[:3] == ["0 &lt;unk&gt;", "1 &lt;unk&gt;", "2 &lt;unk&gt;"]   # what the model read, escaped
    assert ticks[-1] == "10 &lt;unk&gt;" and ticks[-2] == "9 cat"
    at.selectbox(key="token").set_value(1).run()
    title = figure_titled(at, "Strongest neurons")["layout"]["title"]["text"]
    assert title == "Strongest neurons for token 1 &lt;unk&gt; (layer 0)"
    at.selectbox(key="token").set_value(0).run()
    assert figure_titled(at, "Strongest neurons")["layout"]["title"]["text"].endswith("token 0 &lt;unk&gt; (layer 0)")
    show(type_text(at, ("the dog saw a cat . " * 400)[:2000]), "Which neurons fire")
    assert not at.exception
    heat = figure_titled(at, "Neuron activations")
    assert decode(heat["data"][0]["z"]).shape == (32, 256)
    assert "32 tokens × 256 neurons" in page_text(show(at, "Switched off"))
    type_text(at, "")
    assert "Type a sentence first" in page_text(at) and not at.exception


# ---------------------------------------------------------------- the builders, directly

def test_builders_agree_with_the_trace_for_a_relu_model_of_another_shape():
    view = make_view(tiny_relu_bundle(norm="rms", norm_position="post", pos="learned"), "roses are red and blue")
    for layer in range(3):
        post = view.trace[f"blocks.{layer}.mlp.post"][0]
        off = feedforward.zeroed(view, layer)
        assert off.count == int((post == 0).sum()) and off.total == 5 * 64
        table = feedforward.top_neurons(view, layer, 2, k=10)
        assert table["activation"].tolist() == pytest.approx(post[2].topk(10).values.tolist())
        j = int(table["neuron"][0])
        m = feedforward.neuron_math(view, layer, 2, j)
        assert m.pre == pytest.approx(m.traced_pre, abs=1e-4) and m.post == pytest.approx(m.traced_post, abs=1e-4)
        assert m.total == pytest.approx(sum(a * b for a, b in zip(m.inputs, m.weights)))
        assert [s.cols for s in feedforward.stages(view, layer)] == [16, 64, 64, 16]


def test_gelu_math_matches_torch_and_wide_layers_are_cut_in_the_heatmap():
    view = make_view(_gelu_wide_bundle(), "roses are red")
    m = feedforward.neuron_math(view, 0, 1, 7)
    assert m.post == pytest.approx(float(torch.nn.functional.gelu(torch.tensor(m.pre))), abs=1e-6)
    assert m.post == pytest.approx(m.traced_post, abs=1e-4)
    post = view.trace["blocks.0.mlp.post"][0]                                    # (3, F)
    fig = feedforward.activations_figure(view, 0)                                         # the 64 strongest
    strongest = sorted(post.abs().amax(0).topk(64).indices.tolist())
    assert fig.data[0].z.shape == (3, 64) and "the 64 that fire most" in fig.layout.title.text
    np.testing.assert_allclose(decode(fig.data[0].z) if isinstance(fig.data[0].z, dict) else fig.data[0].z,
                               post[:, strongest].numpy(), rtol=1e-6)
    weakest = post.abs().amax(0).argmin()
    assert int(weakest) not in strongest
    window = feedforward.activations_figure(view, 0, (64, 128))                           # a window, on demand
    np.testing.assert_allclose(window.data[0].z, post[:, 64:128].numpy(), rtol=1e-6)
    assert "neurons 64–127" in window.layout.title.text
    assert feedforward.zeroed(view, 0).count == int((view.trace["blocks.0.mlp.pre"][0] < 0).sum())


def _gelu_wide_bundle() -> Bundle:
    torch.manual_seed(1)
    tokenizer = load_bundled("roses").tokenizer
    cfg = ModelConfig(vocab_size=len(tokenizer.vocab), d_model=8, n_heads=1, n_layers=1, d_ff=1024, max_len=8,
                      activation="gelu", norm="none")
    return Bundle(model=TransformerLM(cfg).eval(), tokenizer=tokenizer)


def test_percentages_show_enough_decimals_to_differ(tinytales):
    assert feedforward.percents(0.99996, 0.99971) == ("99.996%", "99.97%")      # never 100% unless it is
    assert feedforward.percents(0.123456, 0.123459) == ("12.3456%", "12.3459%")
    assert feedforward.percents(0.5, 0.25) == ("50%", "25%")
    # a new favourite of 0.012% after the old one's 0.021% and 0.010%: significant digits, not "0.0%"
    assert feedforward.percents(0.00021, 0.000123, 0.000104) == ("0.021%", "0.012%", "0.010%")
    assert feedforward.percents(0.0002, 0.0000497, 0.0000496) == ("0.0200%", "0.00497%", "0.00496%")
    view = make_view(tinytales)
    same = feedforward.change_in_words(view, view.trace, view.trace, 0)
    assert "hardly matters" in same
    assert math.isfinite(feedforward.neuron_math(view, 1, 0, 0).pre)


def test_each_section_draws_only_its_own_charts_in_both_modes():
    assert_each_section_draws_only_its_charts("feedforward", feedforward.SECTIONS, [1, 1, 2, 1, 1])


# ---------------------------------------------------------------- the first what-if a student sees

WHATIF_SENTENCES = [("tinytales", DEFAULT_SENTENCE), ("tinytales", "the dog chased the cat because it was hungry"),
                    ("tinytales", "the cats sat on the mats because they"),
                    ("roses", "roses are red violets are blue"), ("roses", "roses are red violets are blue sugar is sweet"),
                    ("roses", "sugar is sweet and so are you")]


def unescaped(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def stated_size(text: str) -> str:
    said = re.search(r"The largest change of any word's probability is \*\*([\d.]+)\*\*\.|"
                     r"(That changes little: no word's probability moves by (?:more than|as much as) \*\*[\d.]+\*\*\.)",
                     text)
    assert said, "the what-if states how large its change is"
    return said[1] or said[2]


def expected_size(largest: float) -> str:
    """What the page must say for a change of `largest` (whatif.VISIBLE = 0.05 is the smallest visible change)."""
    if largest >= whatif.VISIBLE:
        return f"{largest:.2f}"
    amount = f"more than **{math.ceil(largest * 1000) / 1000:.3f}**" if largest >= 0.0005 else "as much as **0.001**"
    return f"That changes little: no word's probability moves by {amount}."


@pytest.mark.parametrize("name, text", WHATIF_SENTENCES)
def test_the_first_what_if_skips_a_layer_that_changes_the_forecast_or_says_none_does(name, text):
    at = show(open_page("feedforward", model=name, text=text), "What if?")
    assert not at.exception
    bundle = load_bundled(name)
    model, vocab = bundle.model, bundle.tokenizer.vocab
    ids = bundle.tokenizer.encode(text)
    last = len(ids) - 1
    assert at.session_state["token"] == last
    p0 = torch.softmax(model.run(ids)["logits"][0].double(), -1)                   # (T, V)
    layers = range(model.cfg.n_layers)
    change = [(torch.softmax(model.run(ids, edits=whatif.skip_mlp(l).edits(model.cfg))["logits"][0].double(), -1) - p0)
              .abs().amax(-1) for l in layers]                                      # per layer: (T,)
    best = max(layers, key=lambda l: float(change[l][last]))
    visible = float(change[best][last]) >= whatif.VISIBLE
    shown = best if visible and float(change[0][last]) < whatif.VISIBLE else 0          # the picker's layer, or the best
    assert at.radio(key="mlp_whatif").value == ("chosen" if shown == 0 else "most")
    most = [o for o in at.radio(key="mlp_whatif").options if o.endswith(", the one that matters most here")]
    assert most == ([f"Skip the feed-forward of layer {best}, the one that matters most here"] if visible else [])
    assert len(at.radio(key="mlp_whatif").options) == 1 + (visible and best != 0)
    said = page_text(at)
    assert f"With the feed-forward of layer {shown} skipped, the top guess after" in said
    largest = float(change[shown][last])
    assert stated_size(said) == expected_size(largest)
    assert largest >= whatif.VISIBLE or "That changes little" in said
    if float(change[best][last]) >= whatif.VISIBLE:
        return
    assert (f"No single layer's feed-forward decides the forecast after “{vocab[ids[last]]}” (position {last}): "
            f"skipping any one of the {len(layers)} layers' feed-forward networks moves no word's probability by") \
        in unescaped(said)
    l, t = max(((l, t) for l in layers for t in range(len(ids))), key=lambda x: float(change[x[0]][x[1]]))
    anywhere = float(change[l][t])
    assert anywhere >= whatif.VISIBLE
    assert (f"skipping the feed-forward of layer {l} changes the forecast after “{vocab[ids[t]]}” (position {t}) by "
            f"**{anywhere:.2f}**") in unescaped(said)
    at.button(key="mlp_whatif_look").click().run()
    assert at.session_state["token"] == t
    shown = 0 if float(change[0][t]) >= whatif.VISIBLE else l
    assert f"With the feed-forward of layer {shown} skipped" in page_text(at)
    assert stated_size(page_text(at)) == f"{float(change[shown][t]):.2f}"


def test_the_hidden_layers_width_is_said_as_a_reader_says_it():
    from model.config import ModelConfig
    said = {(64, 256): "four times as many", (64, 128): "twice as many", (576, 1536): "about 2.7 times as many",
            (40, 60): "1.5 times as many"}
    for (d, f), words in said.items():
        cfg = ModelConfig(vocab_size=10, d_model=d, n_heads=4, n_layers=1, d_ff=f, max_len=8,
                          activation="swiglu" if f == 1536 else "gelu")
        assert f"(here {d:,} → {f:,}: {words};" in feedforward.intro(cfg), (d, f)
