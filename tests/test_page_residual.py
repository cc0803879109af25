"""Step 6, residual stream and normalization: what a student sees, checked against the model's own trace."""
import re

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from conftest import (APP, assert_each_section_draws_only_its_charts, decode, figure_titled, open_page,
                      page_text, show_section, type_text)
from explorer.steps import residual
from explorer.app.layout import quote
from explorer.plot import visible
from explorer.app.state import DEFAULT_SENTENCE, View

T = len(DEFAULT_SENTENCE.split())        # tokens of the sentence the page opens with
# a sentence that ends: the lens shows "." among the guesses
ENDED = "the cat sat on the mat because it was tired"
from model.checkpoint import Bundle, load_bundled
from model.config import ModelConfig
from model.inputs import prepare_text
from model.transformer import TransformerLM

STAGES = ["embed.out", "blocks.0.resid_mid", "blocks.0.resid_post", "blocks.1.resid_mid", "blocks.1.resid_post"]


def tinytales_trace(text: str = DEFAULT_SENTENCE):
    bundle = load_bundled("tinytales")
    return bundle, bundle.model.run(bundle.tokenizer.encode(text))


def random_bundle(seed: int = 0, **changes) -> Bundle:
    """A random model of another configuration, reading the roses tokenizer."""
    torch.manual_seed(seed)
    tokenizer = load_bundled("roses").tokenizer
    cfg = ModelConfig(vocab_size=len(tokenizer.vocab), d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=16,
                      **changes)
    model = TransformerLM(cfg)
    with torch.no_grad():                     # give the norms' gains and biases values that are not 1 and 0
        for p in model.parameters():
            p.normal_(0.3, 0.5)
    return Bundle(model=model.eval(), tokenizer=tokenizer)


def make_view(bundle: Bundle, text: str = "roses are red violets are blue") -> View:
    prepared = prepare_text(bundle.tokenizer, text, bundle.model.cfg.max_len)
    return View(name="test", bundle=bundle, text=text, presenter=False, prepared=prepared,
                trace=bundle.model.run(prepared.ids))


def diagram_boxes(at: AppTest) -> dict[str, float]:
    """Label -> height of each box in the block diagram (1: on the stream, 0: on a sublayer's branch)."""
    figure = figure_titled(at, "of this model is wired")
    return {a["text"].replace("<b>", "").replace("</b>", ""): a["y"]
            for a in figure["layout"]["annotations"] if a.get("text") and "<br>" in a["text"] or
            a.get("text") in ("attention", "feed-forward")}


def open_with_model(bundle: Bundle, text: str, **query) -> AppTest:
    """The residual page with a model of our own, as the training lab would add it to the session."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["trained_models"] = {"mine": bundle}
    at.session_state["math_residual"] = True                # "Show the math" open
    at.query_params["model"] = "mine"
    at.query_params["text"] = text
    for key, value in query.items():
        at.query_params[key] = str(value)
    at.run()
    return at.switch_page("pages/residual.py").run()


# ---------------------------------------------------------------- the page, through the app

def show(at, section: str):
    return show_section(at, "residual", section)


def test_stream_size_and_what_each_sublayer_adds_are_the_real_norms():
    at = open_page("residual", layer=1)
    assert not at.exception
    _, trace = tinytales_trace()
    text = page_text(at)
    assert "shared notebook" in text and "standard scale" in text
    sizes = figure_titled(show(at, "Stream size"), "Size of the residual stream at each stage")
    expected = np.stack([trace[name][0].norm(dim=-1).numpy() for name in STAGES], axis=1)     # (T, S)
    np.testing.assert_allclose(decode(sizes["data"][0]["z"]), expected, rtol=1e-6)
    assert list(sizes["layout"]["xaxis"]["ticktext"]) == ["token + position", "layer 0: after attention",
                                                          "layer 0: after feed-forward", "layer 1: after attention",
                                                          "layer 1: after feed-forward"]      # plain words
    hover = np.asarray(sizes["data"][0]["customdata"])
    assert list(hover[0, :, 1]) == STAGES                                   # the trace names on hover
    bars = figure_titled(show(at, "What a layer adds"), "What layer 1 adds to the stream")["data"]
    for bar, name in zip(bars, ["resid_pre", "attn.out", "resid_mid", "mlp.out"]):
        np.testing.assert_allclose(decode(bar["y"]), trace[f"blocks.1.{name}"][0].norm(dim=-1).numpy(), rtol=1e-6)
    assert f"attention adds a vector {trace['blocks.1.attn.out'][0].norm(dim=-1).mean():.2f} long" in page_text(at)


def test_the_diagram_shows_this_models_pre_norm_wiring():
    at = open_page("residual")
    assert "wired: pre-norm, LayerNorm" in figure_titled(at, "of this model is wired")["layout"]["title"]["text"]
    # pre-norm: the norms sit on the sublayers' branches, the stream itself is never normalized
    assert diagram_boxes(at) == {f"stream in<br>{T} × 64": 1, "LayerNorm<br>norm1": 0, "attention": 0,
                                 f"after attention<br>{T} × 64": 1, "LayerNorm<br>norm2": 0, "feed-forward": 0,
                                 f"stream out<br>{T} × 64": 1}
    assert "This model is **pre-norm**" in page_text(at)


def test_before_and_after_the_norm_for_the_chosen_token_and_layer():
    at = show(open_page("residual", layer=1, token=2), "Normalization")
    at.radio(key="residual_norm").set_value("norm2").run()
    assert not at.exception
    bundle, trace = tinytales_trace()
    x, y = trace["blocks.1.resid_mid"][0, 2].double(), trace["blocks.1.mlp.in"][0, 2].double()
    scatter = figure_titled(at, "Before and after LayerNorm: token 2 sat, norm2")["data"]
    np.testing.assert_allclose(decode(scatter[1]["x"]), x.numpy(), rtol=1e-6)
    np.testing.assert_allclose(decode(scatter[1]["y"]), y.numpy(), rtol=1e-6)
    z = (x - x.mean()) / torch.sqrt(x.var(unbiased=False) + 1e-5)
    np.testing.assert_allclose(decode(scatter[0]["y"]), z.numpy(), rtol=1e-6, atol=1e-9)
    stats = at.dataframe[0].value.set_index("vector")
    assert stats.loc["input", "mean"] == pytest.approx(float(x.mean()))
    assert stats.loc["input", "variance"] == pytest.approx(float(x.var(unbiased=False)))
    assert stats.loc["normalized, before gain and bias", "mean"] == pytest.approx(0, abs=1e-12)
    assert stats.loc["normalized, before gain and bias", "variance"] == pytest.approx(1, abs=1e-4)
    assert stats.loc["output, after gain and bias", "mean"] == pytest.approx(float(y.mean()))
    # show the math: the same token and norm, with the learned gain and bias of norm2
    latex = "\n".join(str(e.value) for e in at.latex)
    assert f"= {float(x.mean()):.4f}" in latex and f"= {float(x.var(unbiased=False)):.4f}" in latex
    gain, bias = bundle.model.blocks[1].norm2.weight.detach(), bundle.model.blocks[1].norm2.bias.detach()
    assert f"{float(z[0]):.4f} \\times" in latex and f"= {float(z[0] * gain[0] + bias[0]):.4f}" in latex
    worked = at.dataframe[1].value
    np.testing.assert_allclose(worked["trace"], y[:6].numpy(), rtol=1e-6)
    np.testing.assert_allclose(worked["z_d × gain_d + bias_d"], y[:6].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(worked["gain_d"], gain[:6].numpy(), rtol=1e-6)
    # said in plain words, as the panel's first line and the caption under the chart: no trace names
    text = page_text(at)
    assert ("norm2, before the feed-forward network in layer 1: its input is the stream after layer 1's attention, "
            "its output what the feed-forward network reads.") in text
    assert "LayerNorm takes the stream after layer 1's attention and centres and rescales it" in text
    assert not re.search(r"blocks\.\d|resid_(pre|mid|post)|mlp\.in|attn\.in", text)


def test_logit_lens_reads_every_stage_and_its_last_row_is_the_real_prediction():
    at = show(open_page("residual", text=ENDED), "Logit lens")
    bundle, trace = tinytales_trace(ENDED)
    lens = figure_titled(at, "Logit lens")
    data = lens["data"][0]
    probs = decode(data["z"]).T                                                   # (stages, positions)
    assert probs.shape == (5, len(ENDED.split()))
    real = torch.softmax(trace["logits"][0], -1)                                  # (T, V)
    np.testing.assert_allclose(probs[-1], real.max(-1).values.numpy(), rtol=1e-5)
    vocab = bundle.tokenizer.vocab
    assert [row[-1][2] for row in data["customdata"]] == [vocab[i] for i in real.argmax(-1).tolist()]
    guesses = [vocab[i] for i in real.argmax(-1).tolist()]
    assert [row[-1] for row in data["text"]] == [visible(w) for w in guesses]   # "." shown as ⟨.⟩
    assert "." in guesses and "⟨.⟩" in [row[-1] for row in data["text"]]
    assert data["customdata"][0][-1][1] == "layer 1: after feed-forward (trace name: blocks.1.resid_post)"
    # an early stage, through the model's own final norm and unembedding
    m = bundle.model
    with torch.no_grad():
        early = torch.softmax(m.unembed(m.final_norm(trace["blocks.0.resid_post"][0])), -1)
    np.testing.assert_allclose(probs[2], early.max(-1).values.numpy(), rtol=1e-5)
    final = vocab[int(real[-1].argmax())]
    assert f"After “tired”, the model's final guess is {quote(final)}" in page_text(at)
    at.toggle(key="residual_lens_mid").set_value(False).run()
    assert decode(figure_titled(at, "Logit lens")["data"][0]["z"]).shape == (len(ENDED.split()), 3)


def test_a_presenters_picker_beside_the_title_is_as_wide_as_its_longest_value():
    """In presenter mode the Layer picker, squeezed beside this page's long title, read "Laye": a picker that says
    its name inside its box is as wide as its longest value (Chromium measures every one in a class's walk,
    tests/test_browser_lessons.py), and the title row's columns keep that width (explorer/app/styles.py)."""
    from explorer.app import layout
    from explorer.app.styles import PRESENTER_CSS, PRESENTER_TEXT_PX
    place = object()
    layout._page.named_inside = [place]
    try:
        inside = layout.picker_label("Layer", place, values=range(12))
    finally:
        layout._page.named_inside = []
    assert inside["label_visibility"] == "collapsed" and inside["format_func"](11) == "Layer 11"
    # measured in Chromium: "Layer 0" is 0.45 em of the box's type (0.875 of 22 px), the box's padding and arrow 68 px
    assert inside["width"] >= 0.5 * 0.875 * PRESENTER_TEXT_PX * len("Layer 11") + 68
    assert "width" not in layout.picker_label("Layer", object(), values=range(12))   # above its box: its column's
    assert "min-width: min-content" in PRESENTER_CSS              # a title row wraps before its pickers narrow


def test_presenter_mode_hides_the_lens_option_and_keeps_every_figure():
    at = show(open_page("residual", presenter=1), "Logit lens")
    assert not at.exception
    assert not [t for t in at.toggle if t.key == "residual_lens_mid"]
    assert decode(figure_titled(at, "Logit lens")["data"][0]["z"]).shape == (T, 5)


def test_a_post_norm_rms_model_shows_its_own_wiring_and_norms():
    bundle = random_bundle(norm="rms", norm_position="post", pos="learned", activation="gelu")
    at = open_with_model(bundle, "roses are red violets", layer=0, token=1)
    assert not at.exception, at.exception
    boxes = diagram_boxes(at)
    assert boxes["RMSNorm<br>norm1"] == boxes["RMSNorm<br>norm2"] == 1      # post-norm: on the stream itself
    assert boxes["attention"] == boxes["feed-forward"] == 0 and "after attention<br>4 × 16" in boxes
    assert "post-norm" in page_text(at)
    show(at, "Normalization")
    assert [o for o in at.radio(key="residual_norm").options] == ["norm1, after attention is added",
                                                                  "norm2, after the feed-forward network is added"]
    trace = bundle.model.run(bundle.tokenizer.encode("roses are red violets"))
    x = (trace["blocks.0.resid_pre"] + trace["blocks.0.attn.out"])[0, 1]
    scatter = figure_titled(at, "Before and after RMSNorm")["data"]
    np.testing.assert_allclose(decode(scatter[1]["x"]), x.numpy(), rtol=1e-5)
    np.testing.assert_allclose(decode(scatter[1]["y"]), trace["blocks.0.resid_mid"][0, 1].numpy(), rtol=1e-5)
    stats = at.dataframe[0].value.set_index("vector")
    assert stats.loc["normalized, before gain and bias", "RMS"] == pytest.approx(1, abs=1e-3)
    lens = decode(figure_titled(show(at, "Logit lens"), "Logit lens")["data"][0]["z"])
    np.testing.assert_allclose(lens[:, -1], torch.softmax(trace["logits"][0], -1).max(-1).values.numpy(), rtol=1e-5)


def test_a_model_without_normalization_says_so():
    at = open_with_model(random_bundle(norm="none"), "roses are red")
    assert not at.exception, at.exception
    boxes = set(diagram_boxes(at))
    text = page_text(show(at, "Normalization"))
    assert "no normalization layers" in text and "nothing to work out" in text
    assert boxes == {"stream in<br>3 × 16", "attention", "after attention<br>3 × 16", "feed-forward",
                     "stream out<br>3 × 16"}


def test_strange_tokens_stay_text_and_the_lens_covers_the_whole_context():
    at = show(open_page("residual"), "Logit lens")
    type_text(at, "<b>x</b> the cat")
    assert not at.exception
    lens = figure_titled(at, "Logit lens")
    assert list(lens["layout"]["yaxis"]["ticktext"][:3]) == ["0 &lt;unk&gt;", "1 &lt;unk&gt;", "2 &lt;unk&gt;"]
    assert lens["data"][0]["customdata"][0][0][0] == "0 &lt;unk&gt;"
    type_text(at, ("the dog saw a cat . " * 400)[:2000])
    assert not at.exception
    assert decode(figure_titled(at, "Logit lens")["data"][0]["z"]).shape == (32, 5)
    type_text(at, "")
    assert "Type a sentence first" in page_text(at) and not at.exception


# ---------------------------------------------------------------- the builders, directly

@pytest.mark.parametrize("norm", ["layer", "rms", "none"])
@pytest.mark.parametrize("position", ["pre", "post"])
def test_norm_math_and_the_logit_lens_match_the_trace_for_every_switch(norm, position):
    view = make_view(random_bundle(norm=norm, norm_position=position))
    trace = view.trace
    lens = residual.logit_lens(view)
    assert [name for name, _ in lens.stages] == STAGES
    np.testing.assert_array_equal(lens.top_ids[-1], trace["logits"][0].argmax(-1).numpy())
    steps = residual.norm_steps(view, 1)
    assert len(steps) == {"none": 0, "pre": 3, "post": 2}["none" if norm == "none" else position]
    for step in steps:
        for token in range(len(view.tokens)):
            m = residual.norm_math(view, step, token)
            np.testing.assert_allclose(m.y, m.traced, rtol=1e-4, atol=1e-4)
            if norm == "layer":
                assert m.z.mean() == pytest.approx(0, abs=1e-9) and m.z.var() == pytest.approx(1, abs=1e-3)
            else:
                assert np.sqrt((m.z ** 2).mean()) == pytest.approx(1, abs=1e-3)
    layout = {b.key: b for b in residual.block_layout(view)}
    assert ("n1" in layout) == (norm != "none")
    if norm != "none":
        assert layout["n1"].y == layout["n2"].y == (0 if position == "pre" else 1)
        assert layout["add1"].x < layout["n1"].x if position == "post" else layout["n1"].x < layout["attn"].x
    residual.block_figure(view, 0)


def test_latex_numbers_and_brackets():
    assert residual.latex_number(1e-5) == "10^{-5}"
    assert residual.latex_number(1.5e-6) == "1.5 \\times 10^{-6}"
    view = make_view(random_bundle(norm="layer"))
    m = residual.norm_math(view, residual.norm_steps(view, 0)[0], 0)
    assert all("- -" not in line and "+ -" not in line for line in residual.math_latex(m))


def test_each_section_draws_only_its_own_chart_in_both_modes():
    assert_each_section_draws_only_its_charts("residual", residual.SECTIONS, [1, 1, 1, 1, 1])
