"""Step 3, positional encoding: what a student sees when each token gets its seat number added."""
import math
from functools import lru_cache

import numpy as np
import pytest
import torch

from conftest import decode, figure_titled, open_page, page_text, plotly_figures, show_section, type_text
from explorer import discoveries
from explorer.steps import positions
from explorer.app.state import DEFAULT_SENTENCE, View

T = len(DEFAULT_SENTENCE.split())        # tokens of the sentence the page opens with
from model import edits
from model.checkpoint import Bundle, load_bundled
from model.config import ModelConfig
from model.inputs import prepare_text
from model.tokenizers import WordTokenizer
from model.transformer import TransformerLM


@lru_cache
def tinytales():
    return load_bundled("tinytales")


def run(text, bundle=None):
    bundle = bundle or tinytales()
    ids = bundle.tokenizer.encode(text)
    return ids, bundle.model.run(ids)


def cosine(x: torch.Tensor) -> np.ndarray:
    x = x.double()
    unit = x / x.norm(dim=-1, keepdim=True)
    return (unit @ unit.T).numpy()


def tiny_view(pos: str, text: str = "a b c a b", **overrides) -> View:
    """A small untrained model of another configuration, to call the builders directly."""
    torch.manual_seed(0)
    tokenizer = WordTokenizer.from_texts(["a b c d e"])
    cfg = ModelConfig(vocab_size=tokenizer.vocab_size, d_model=12, n_heads=3, n_layers=2, d_ff=16, max_len=8,
                      pos=pos, **overrides)
    model = TransformerLM(cfg).eval()
    prepared = prepare_text(tokenizer, text, cfg.max_len)
    return View(name="tiny", bundle=Bundle(model, tokenizer), text=text, presenter=False, prepared=prepared,
                trace=model.run(prepared.ids))


def three_traces(model, ids):
    return [model.run(ids), model.run(ids, edits=edits.remove_positions()),
            model.run(ids, edits=edits.remove_positions(), causal=False)]


# --- the page, as a student sees it ------------------------------------------------------------


def show(at, section: str):
    return show_section(at, "positions", section)


def test_the_page_shows_the_real_position_signal_of_the_sentence():
    at = open_page("positions")
    assert not at.exception
    text = page_text(at)
    assert "sinusoidal" in text and "cinema ticket" in text and "64 numbers" in text
    _, trace = run(DEFAULT_SENTENCE)
    table = tinytales().model.embed.pos_table

    added = decode(figure_titled(at, "Position vectors added to your sentence")["data"][0]["z"])
    assert added.shape == (T, 64)
    np.testing.assert_allclose(added, trace["embed.pos"][0].numpy(), rtol=1e-6)

    assert len(plotly_figures(at)) == 1                      # the whole table waits behind its tab
    at.session_state["positions_rows"] = "The whole table (32 positions)"
    whole = figure_titled(at.run(), "The whole position table")
    assert len(plotly_figures(at)) == 1
    np.testing.assert_allclose(decode(whole["data"][0]["z"]), table.numpy(), rtol=1e-6)
    box = whole["layout"]["shapes"][0]                       # the sentence's rows are boxed
    assert (box["y0"], box["y1"]) == (-0.5, T - 0.5)

    curves = figure_titled(show(at, "Dimension by dimension"), "Chosen dimensions over every position")
    lines, seats, yours = curves["data"][0::3], curves["data"][1::3], curves["data"][2::3]
    assert all(t["mode"] == "lines" for t in lines) and all(t["mode"] == "markers" for t in seats + yours)
    assert [t["name"].split(" (")[0] for t in lines] == ["dim 0", "dim 1", "dim 16", "dim 17"]
    assert "one wave = 6.3 positions" in lines[0]["name"] and "62.8" in lines[2]["name"]
    for line, seat, dot, d in zip(lines, seats, yours, (0, 1, 16, 17)):
        x, y = decode(line["x"]), decode(line["y"])
        assert x[0] == 0 and x[-1] == 31 and len(x) == 31 * 20 + 1      # smooth: 20 samples between seats
        wave = np.sin if d % 2 == 0 else np.cos
        np.testing.assert_allclose(y, wave(x / 10000 ** ((d // 2 * 2) / 64)), atol=1e-6)
        np.testing.assert_allclose(y[::20], table[:, d].numpy(), atol=1e-5)   # through every real seat
        np.testing.assert_allclose(decode(seat["x"]), np.arange(32))
        np.testing.assert_allclose(decode(seat["y"]), table[:, d].numpy(), rtol=1e-6)   # the dots: the real table
        np.testing.assert_allclose(decode(dot["y"]), table[:T, d].numpy(), rtol=1e-6)
        assert list(dot["customdata"])[:2] == ["the", "cat"]


def test_token_plus_position_is_the_input_with_the_math_written_out():
    at = show(open_page("positions", token=1), "Token + position")
    _, trace = run(DEFAULT_SENTENCE)
    figure = figure_titled(at, "Token + position = input, for “cat” at position 1")
    rows = decode(figure["data"][0]["z"])
    np.testing.assert_allclose(rows[0], trace["embed.tok"][0, 1].numpy(), rtol=1e-6)
    np.testing.assert_allclose(rows[1], trace["embed.pos"][0, 1].numpy(), rtol=1e-6)
    np.testing.assert_allclose(rows[2], trace["embed.out"][0, 1].numpy(), rtol=1e-6)
    np.testing.assert_allclose(rows[0] + rows[1], rows[2], atol=1e-6)
    text = page_text(at)
    norm = float(trace["embed.pos"][0, 1].norm())
    assert f"position vector {norm:.2f}" in text
    # the math: dimension 0 of position 1 is sin(1 / 1) = 0.8415, then added to the token's value
    assert "sin(1.0000) = **0.8415**; the model's table holds **0.8415**" in text
    tok, out = float(trace["embed.tok"][0, 1, 0]), float(trace["embed.out"][0, 1, 0])
    assert f"{tok:.4f} + (0.8415) = **{out:.4f}**" in text
    at.selectbox(key="positions_math_dim").set_value(17).run()
    rate = 10000 ** (16 / 64)
    assert f"cos({1 / rate:.4f}) = **{math.cos(1 / rate):.4f}**" in page_text(at)


def test_similarity_between_positions_is_their_cosine():
    at = show(open_page("positions"), "Which seats look alike")
    _, trace = run(DEFAULT_SENTENCE)
    figure = figure_titled(at, "Similarity between the position vectors of your sentence")
    np.testing.assert_allclose(decode(figure["data"][0]["z"]), cosine(trace["embed.pos"][0]), atol=1e-9)
    at.toggle(key="positions_whole").set_value(True).run()
    figure = figure_titled(at, "Similarity between position vectors (the whole table)")
    sims = decode(figure["data"][0]["z"])
    np.testing.assert_allclose(sims, cosine(tinytales().model.embed.pos_table), atol=1e-9)
    # sinusoidal: the similarity depends only on the distance between two seats
    np.testing.assert_allclose(np.diag(sims, 3)[:10], np.full(10, sims[0, 3]), atol=1e-6)


def test_without_positions_the_two_orders_are_measured_honestly():
    at = show(open_page("positions"), "What if?")
    table = at.dataframe[0].value
    assert list(table["model"]) == list(positions.CONDITIONS)
    model, tok = tinytales().model, tinytales().tokenizer
    a, b = tok.encode("the dog chased the cat"), tok.encode("the cat chased the dog")
    ta, tb = three_traces(model, a), three_traces(model, b)
    # "cat" stands at 4 in A and at 1 in B
    expected_input = float((ta[0]["embed.out"][0, 4] - tb[0]["embed.out"][0, 1]).abs().max())
    inputs = table[positions.INPUT_COLUMN].tolist()
    dog = float((ta[0]["embed.out"][0, 1] - tb[0]["embed.out"][0, 4]).abs().max())     # "dog": 1 in A, 4 in B
    assert inputs[0] == pytest.approx(max(expected_input, dog), rel=1e-5)
    assert inputs[1] == 0.0 and inputs[2] == 0.0                    # no seat numbers: the same vectors
    preds = table[positions.PREDICTION_COLUMN].tolist()
    p = [(torch.softmax(x["logits"][0].double(), -1), torch.softmax(y["logits"][0].double(), -1))
         for x, y in zip(ta, tb)]
    cat = [float((pa[4] - pb[1]).abs().max()) for pa, pb in p]
    assert preds[1] >= cat[1] > 0.5        # the causal mask still tells "cat" at the end from "cat" near the start
    assert preds[2] < 1e-5                 # no positions and no mask: every word's prediction identical
    assert list(table["same prediction"]) == ["1 of 5 words", "1 of 5 words", "5 of 5 words"]
    text = page_text(at)
    assert "“cat” sees “the dog chased the cat” in A but “the cat” in B" in text
    assert "can no longer tell the two orders apart" in text
    bars = figure_titled(at, "Same word, two orders")
    by_name = {t["name"]: t for t in bars["data"]}
    assert list(by_name) == list(positions.CONDITIONS)
    np.testing.assert_allclose(decode(by_name["positions removed"]["y"])[4], cat[1], rtol=1e-6)
    assert list(by_name["as trained"]["x"]) == ["the (0↔0)", "dog (1↔4)", "chased (2↔2)", "the (3↔3)", "cat (4↔1)"]


def test_a_student_can_type_their_own_pair_and_strange_pairs_do_no_harm():
    at = show(open_page("positions"), "What if?")
    at.text_input(key="positions_sentence_a").set_value("the cats sat on the mat because").run()
    at.text_input(key="positions_sentence_b").set_value("the mat sat on the cats because").run()
    assert not at.exception
    table = at.dataframe[0].value
    assert table["next after A"][0].startswith("they (")
    assert list(table["same prediction"])[-1] == "7 of 7 words"
    at.text_input(key="positions_sentence_b").set_value("").run()
    assert not at.exception and "Type both sentences to compare them" in page_text(at)
    at.text_input(key="positions_sentence_b").set_value("<script>alert(1)</script> 😺 **x**").run()
    assert not at.exception
    text = page_text(at)
    assert "do not use exactly the same words" in text and "not in the model's vocabulary" in text
    at.text_input(key="positions_sentence_b").set_value("the cats sat on the mat because").run()
    assert "the same, token for token" in page_text(at)


def test_presenter_mode_hides_the_controls_but_keeps_every_figure():
    at = open_page("positions", presenter=1)
    for section, charts in zip(positions.SECTIONS, (1, 1, 1, 1, 1)):     # the seat numbers: yours or the whole table
        show(at, section)
        assert not at.exception and len(plotly_figures(at)) == charts, section
        keys = {w.key for w in at.text_input} | {w.key for w in at.multiselect} | {w.key for w in at.toggle}
        assert not {"positions_sentence_a", "positions_dims", "positions_whole"} & keys
    assert list(at.dataframe[0].proto.column_order) == list(positions.PRESENTER_COLUMNS)     # what is shown


def test_one_token_a_full_context_and_the_roses_model():
    at = show(open_page("positions"), "Which seats look alike")
    type_text(at, "the")
    assert not at.exception
    assert decode(figure_titled(at, "Similarity between the position")["data"][0]["z"]).shape == (1, 1)
    show(type_text(at, "a " * 40), "The seat numbers")                 # more than the context of 32
    assert not at.exception
    assert decode(figure_titled(at, "Position vectors added")["data"][0]["z"]).shape == (32, 64)
    show(at, "What if?")
    type_text(at, "roses are red violets are blue")
    at.selectbox(key="model").set_value("roses").run()
    assert not at.exception
    # roses knows no dogs or cats: the pair is the sentence and its words reversed
    assert at.text_input(key="positions_sentence_a").value == "roses are red violets are blue"
    assert at.text_input(key="positions_sentence_b").value == "blue are violets red are roses"
    assert "d_model" not in page_text(at) and "32 numbers" in page_text(at)


# --- the builders, on models of other configurations --------------------------------------------


def test_learned_positions_show_the_learned_table():
    v = tiny_view("learned")
    weight = v.bundle.model.embed.pos.weight.detach()
    assert "learned" in positions.intro(v.bundle.model.cfg) and "GPT-2" in positions.intro(v.bundle.model.cfg)
    table = positions.table_figure(v, v.trace)
    np.testing.assert_allclose(table.data[0].z, weight.numpy(), rtol=1e-6)
    curves = positions.curves_figure(v, v.trace, [0, 5])
    np.testing.assert_allclose(curves.data[3].y, weight[:, 5].numpy(), rtol=1e-6)   # learned: no wave between seats
    np.testing.assert_allclose(curves.data[3].x, np.arange(len(weight)))
    assert "learned values" in curves.layout.title.text and curves.data[0].name == "dim 0"
    np.testing.assert_allclose(positions.similarity_figure(v, v.trace).data[0].z, cosine(weight[:5]), atol=1e-9)
    lines = positions.math_lines(v, v.trace, 2, 3)
    assert f"**{float(weight[2, 3]):.4f}** (a number it learned in training" in "\n".join(lines)


def test_a_model_without_positions_says_so():
    v = tiny_view("none")
    cfg = v.bundle.model.cfg
    assert "no position signal" in positions.intro(cfg) and "no position signal" in positions.kind_caption(cfg)
    assert positions.table_figure(v, v.trace) is None and positions.curves_figure(v, v.trace, [0]) is None
    assert positions.similarity_figure(v, v.trace) is None
    assert not positions.added_figure(v, v.trace).data[0].z.any()              # the zeros that are added
    assert "position value is **0.0000**" in "\n".join(positions.math_lines(v, v.trace, 1, 0))
    model, ids_a, ids_b = v.bundle.model, [1, 2, 3, 1], [3, 1, 2, 1]
    c = positions.compare_orders(v.bundle.tokenizer.vocab, ids_a, ids_b, three_traces(model, ids_a), three_traces(model, ids_b))
    assert c.pred_diff[0] == c.pred_diff[1]           # removing nothing changes nothing
    assert c.input_diff == [0.0, 0.0, 0.0]
    assert "removing it changes nothing" in positions.order_verdict(c, False, "a b c a", "c a b a")


def test_post_norm_and_rms_models_compare_orders_exactly_without_mask_and_positions():
    v = tiny_view("sinusoidal", norm="rms", norm_position="post")
    model, vocab = v.bundle.model, v.bundle.tokenizer.vocab
    a, b = [1, 2, 3, 4, 2], [4, 2, 1, 2, 3]
    c = positions.compare_orders(vocab, a, b, three_traces(model, a), three_traces(model, b))
    assert c.same_bag and not c.identical
    assert c.input_diff[0] > 0 and c.input_diff[1] == 0.0
    assert c.pred_diff[2] < positions.SAME and c.n_same[2] == 5
    assert positions.match_words(a, b) == [(0, 2), (1, 1), (2, 4), (3, 0), (4, 3)]
    assert positions.match_words([1, 2], [3, 4]) == []
    empty = positions.compare_orders(vocab, [1, 2], [3, 4], three_traces(model, [1, 2]), three_traces(model, [3, 4]))
    assert positions.order_figure(empty) is None and "no word in common" in positions.order_verdict(empty, True, "a b", "c d")


def test_builders_escape_tokens_in_plotly_labels():
    v = tiny_view("sinusoidal", text="<b> a")
    assert v.tokens[0] == "<unk>" and v.typed[0] == "<"          # labels show what the model read
    fig = positions.sum_figure(v, v.trace, 0)
    assert "&lt;" in fig.layout.title.text and "<b>" not in fig.layout.title.text
    curves = positions.curves_figure(v, v.trace, [0])
    assert "&lt;unk&gt;" in list(curves.data[2].customdata)


@pytest.mark.parametrize("card", [card.key for card in discoveries.discoveries(tinytales(), "tinytales")])
def test_every_page_a_discovery_opens_offers_the_way_back_to_your_sentence(card):
    """Each discovery's "Show me" (the word-order card lands on this page) opens its page with a "Back to your
    sentence" button whenever it replaced the student's model or sentence, and the button brings them back."""
    text = "the dog ran to the old tree"                      # no card's sentence
    target = {c.key: c for c in discoveries.discoveries(tinytales(), "tinytales")}[card].target
    at = open_page("discoveries", text=text)
    radio = at.radio(key=f"discovery_radio_{card}")
    radio.set_value(radio.options[0]).run()
    at.button(key=f"discovery_reveal_{card}").click().run()
    at.button(key=f"discovery_show_{card}").click().run()
    assert not at.exception and at.session_state["_page"] == target.slug
    replaced = (target.model or "tinytales", target.text or text) != ("tinytales", text)
    backs = [b for b in at.button if b.key == "discovery_back"]
    if not replaced:                                           # the lab's preset: your sentence is still there
        assert not backs
        return
    assert [b.label for b in backs] == [f"Back to your sentence: “{text}”"]
    backs[0].click().run()
    assert not at.exception and at.session_state["_page"] == "discoveries"
    assert at.session_state["view"].text == text
