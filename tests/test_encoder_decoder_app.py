"""The encoder-decoder page (AppTest) with the bundled translate and sort models: real numbers, every tab, and the
walk-through pages pointing to it."""
import numpy as np
import pytest
import torch

from conftest import decode, figure_titled, open_page, page_text, plotly_figures, show_section
from explorer.steps import encoder_decoder
from explorer.registry import STEPS
from model.checkpoint import load_bundled
from model.seq2seq import beam_search, greedy


def trace_of(name: str, text: str):
    bundle = load_bundled(name)
    ids = bundle.tokenizer.encode(text)
    return bundle, ids, bundle.model.run(ids, [bundle.model.bos_id, *greedy(bundle.model, ids)])


def test_translate_shows_the_source_the_target_and_every_cross_attention_head():
    at = open_page("encoder-decoder", model="translate", text="the red cat sleeps", layer=1, head=2)
    assert not at.exception
    assert "“the red cat sleeps”" in page_text(at) and "“le chat rouge dort”" in page_text(at)
    bundle, ids, trace = trace_of("translate", "the red cat sleeps")
    figure = figure_titled(at, "Cross-attention, layer 1")
    assert [t["name"] for t in figure["data"]] == [f"head {h}" for h in range(4)]
    for h, panel in enumerate(figure["data"]):
        np.testing.assert_allclose(decode(panel["z"]), trace["decoder.blocks.1.cross_attn.pattern"][0, h].numpy(),
                                   rtol=1e-6)
    assert figure["layout"]["yaxis"]["ticktext"] == ["0 → le", "1 → chat", "2 → rouge", "3 → dort", "4 → &lt;eos&gt;"]
    pattern = trace["decoder.blocks.1.cross_attn.pattern"][0, 2]
    top = [bundle.tokenizer.vocab[ids[int(i)]] for i in pattern.argmax(-1)]
    assert f"“rouge” ← “{top[2]}” ({float(pattern[2].max()):.2f})" in page_text(at)


def test_every_tab_runs_on_real_numbers():
    at = open_page("encoder-decoder", model="translate", text="the black dogs see a white mouse")
    bundle, ids, trace = trace_of("translate", "the black dogs see a white mouse")
    show_section(at, "encoder-decoder", "Encoder self-attention")
    enc = figure_titled(at, "Encoder self-attention, layer 0")
    np.testing.assert_allclose(decode(enc["data"][1]["z"]), trace["encoder.blocks.0.attn.pattern"][0, 1].numpy(),
                               rtol=1e-6)
    assert (decode(enc["data"][0]["z"]) > 0).all()                              # no causal mask in the encoder
    show_section(at, "encoder-decoder", "Decoder self-attention")
    dec = np.asarray(decode(figure_titled(at, "Decoder self-attention")["data"][0]["z"]))
    future = np.triu(np.ones(dec.shape, dtype=bool), 1)
    assert np.isnan(dec[future].astype(float)).all()                             # the decoder's causal mask: grey,
    assert np.allclose(dec[~future].astype(float).reshape(-1).sum(), dec.shape[0])  # rows of weights adding to 1
    show_section(at, "encoder-decoder", "Decoding step by step")
    assert not at.exception
    steps = at.dataframe[-2].value                          # after the "what this model knows" lexicon
    probs = trace["logits"][0].softmax(-1)
    assert list(steps["chooses"])[-1] == "<eos>"
    np.testing.assert_allclose(steps["probability"], [float(probs[t].max()) for t in range(len(steps))], rtol=1e-5)
    at.select_slider(key="s2s_beam").set_value(4).run()
    best = beam_search(bundle.model, ids, 4)
    assert f"total log-probability **{best.score:.4f}**" in page_text(at)
    assert len(at.dataframe[-1].value) == sum(len(s) for s in best.steps)
    show_section(at, "encoder-decoder", "What if?")
    at.radio(key="s2s_whatif").set_value(at.radio(key="s2s_whatif").options[2]).run()
    edited = greedy(bundle.model, ids, edits={"decoder.blocks.0.cross_attn.z": torch.zeros_like})
    assert f"With it: “{bundle.tokenizer.decode(edited)}”" in page_text(at)


def test_show_the_math_works_one_cross_attention_weight_out():
    at = open_page("encoder-decoder", model="sort", text="3 1 2", layer=1, head=0)        # the math panel open
    assert not at.exception and "“1 2 3”" in page_text(at) and "smallest" in page_text(at)   # its own example
    at.selectbox(key="s2s_col").set_value(2).run()
    bundle, ids, trace = trace_of("sort", "3 1 2")
    n = "decoder.blocks.1.cross_attn"
    q, k = trace[f"{n}.q"][0, 0, 0].double(), trace[f"{n}.k"][0, 0, 2].double()
    dot = float(q @ k)
    weight = float(trace[f"{n}.pattern"][0, 0, 0, 2])
    text = page_text(at)
    K = q.shape[0]                                                              # 64 / 4 heads = 16
    assert f"= **{dot:.4f}**" in text and f"{dot:.4f} / √{K} = **{dot / K ** 0.5:.4f}**" in text
    assert f"= **{weight:.4f}** (the pattern shows {weight:.4f})" in text


@pytest.mark.parametrize("slug", [s.slug for s in STEPS if s.slug != "why"])    # why explains the decoder
def test_walk_through_pages_point_an_encoder_decoder_to_its_page(slug):          # (tests/test_page_why.py)
    at = open_page(slug, model="sort", text="3 1 2")
    assert not at.exception
    assert "is an encoder-decoder" in page_text(at) and not plotly_figures(at)


def test_the_page_asks_for_an_encoder_decoder_and_hostile_sources_stay_text():
    at = open_page("encoder-decoder")                                          # tinytales
    assert not at.exception and "Pick **sort** or **translate**" in page_text(at)
    at.button(key="open_sort").click().run()          # the main area offers both (a projector's sidebar is closed)
    assert not at.exception and at.session_state["model"] == "sort" and at.session_state["text"] == "7 3 9 1 5 2"
    assert plotly_figures(at) and "Pick **sort**" not in page_text(at)
    at = open_page("encoder-decoder")
    at = open_page("encoder-decoder", model="translate", text="<script>alert(1)</script> the cat 東京")
    assert not at.exception
    assert not any("<script>" in str(m.value) and m.proto.allow_html for m in at.markdown)
    assert at.selectbox(key="model").options[:8] == ["tinytales", "roses", "GPT-2 small (124M)", "SmolLM2-135M",
                                                      "Pythia-70M", "Pythia-160M (162M)", "sort (encoder-decoder)",
                                                      "translate (encoder-decoder)"]


@pytest.mark.parametrize("text", ["", "the red cat sleeps " * 110, "🐈‍⬛ 東京 naïve", "zebra quantum"])
def test_empty_long_emoji_and_unknown_sources_get_a_friendly_page(text):
    at = open_page("encoder-decoder", model="translate", text=text)
    assert not at.exception and "Traceback" not in page_text(at)
    if not text:
        assert at.info                                                          # a prompt for a sentence
    elif len(text) > 100:
        assert any("only the last 12 tokens are used" in w.value for w in at.warning)
