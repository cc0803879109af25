"""Step 7, next-token prediction: the bars, the sliders, the math and writing with the model."""
import html
import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from conftest import decode, figure_titled, open_page, page_text, plotly_figures, type_text
from explorer.steps import prediction
from explorer.plot import token_label

from model.checkpoint import load_bundled
from model.config import ModelConfig
from model.generate import generate, next_token_probs
from model.tokenizers import CharTokenizer, WordTokenizer
from model.transformer import TransformerLM

TINY = load_bundled("tinytales")
# The sentence these tests read: it ends, so the forecast after its last word is "." (the sentence ends).
ENDED = "the cat sat on the mat because it was tired"
IDS = TINY.tokenizer.encode(ENDED)
LOGITS = TINY.model.run(IDS)["logits"][0]                     # (10, 133)
VOCAB = TINY.tokenizer.vocab


BARS = ("probability at temperature", "what sampling draws from", "at temperature 1 (before the change)")


def bars(at, which=0) -> tuple[list[str], np.ndarray]:
    """The probability chart's bars: 0 at the chosen temperature, 1 after the cut, 2 the T=1 outline."""
    figure = figure_titled(at, "Next-token probabilities after")
    (trace,) = [t for t in figure["data"] if t["name"].startswith(BARS[which])]
    return list(decode(trace["x"])), decode(trace["y"]).astype(float)


def expected_top(logits, n=prediction.TOP_BARS, **settings):
    """The likeliest tokens as the bars label them ("." made visible as ⟨.⟩) and their probabilities."""
    probs = next_token_probs(logits, **settings)
    order = logits.argsort(descending=True, stable=True)[:n].tolist()
    return [token_label(VOCAB[i]) for i in order], probs[order].numpy()


@pytest.fixture
def model_calls(monkeypatch):
    """Counts every forward pass of any model from now on."""
    calls = {"run": 0, "predict": 0}
    for name in calls:
        original = getattr(TransformerLM, name)

        def counting(self, *args, _name=name, _original=original, **kwargs):
            calls[_name] += 1
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(TransformerLM, name, counting)
    return calls


# ---------------------------------------------------------------------------------------------------
# What the page shows.

def test_bars_show_the_models_real_next_token_probabilities_and_scores():
    at = open_page("prediction", text=ENDED, token=9)
    assert not at.exception
    assert "“tired” (position 9)" in figure_titled(at, "Next-token probabilities")["layout"]["title"]["text"]
    tokens, probs = bars(at)
    want_tokens, want_probs = expected_top(LOGITS[-1])
    assert tokens == want_tokens and tokens[0] == "⟨.⟩"                     # "." made visible
    assert not [t for t in figure_titled(at, "Next-token probabilities")["data"] if t["name"].startswith(BARS[2])]
    np.testing.assert_allclose(probs, want_probs, rtol=1e-5, atol=1e-7)
    _, drawn = bars(at, which=1)                               # nothing cut: sampling draws from the same
    np.testing.assert_allclose(drawn, want_probs, rtol=1e-5, atol=1e-7)
    scores = figure_titled(at, "Scores (logits) after")
    np.testing.assert_allclose(decode(scores["data"][0]["y"]).astype(float),
                               LOGITS[-1].sort(descending=True).values[:prediction.TOP_BARS].numpy(), rtol=1e-5)
    text = page_text(at)
    assert "gives a chance to every" in text and "weather forecast" in text and "adventurous" in text
    assert "the sentence ends" in text
    assert [m.value for m in at.metric][:1] == ["133 of 133"]


def test_sliders_reshape_the_cached_logits_without_running_the_model(model_calls):
    at = open_page("prediction", text=ENDED, token=9)
    before = dict(model_calls)
    at.slider(key="prediction_temperature").set_value(2.5).run()
    tokens, probs = bars(at)
    want_tokens, want = expected_top(LOGITS[-1], temperature=2.5)
    assert tokens == want_tokens
    np.testing.assert_allclose(probs, want, rtol=1e-5, atol=1e-7)
    assert "temperature 2.5" in json.dumps(figure_titled(at, "Next-token probabilities"))
    outline_tokens, outline = bars(at, which=2)                       # T=1 beside it, as an outline
    assert outline_tokens == want_tokens
    np.testing.assert_allclose(outline, torch.softmax(LOGITS[-1].double(), -1)[
        LOGITS[-1].argsort(descending=True, stable=True)[:prediction.TOP_BARS]].numpy(), rtol=1e-5, atol=1e-7)
    assert outline.max() > want.max()                                  # T=2.5 flattens: the favourite drops
    at.slider(key="prediction_top_k").set_value(5).run()
    at.slider(key="prediction_top_p").set_value(0.5).run()
    at.selectbox(key="token").set_value(3).run()
    assert not at.exception
    assert model_calls == before, "moving a slider or picking a token must not run the model again"


def test_top_k_cuts_tokens_greys_them_and_tells_how_much_chance_was_kept():
    at = open_page("prediction", text=ENDED, token=4)                     # after "the": many likely nouns
    at.slider(key="prediction_top_k").set_value(3).run()
    figure = figure_titled(at, "Next-token probabilities after")
    drawn = decode(figure["data"][1]["y"]).astype(float)
    np.testing.assert_allclose(drawn, next_token_probs(LOGITS[4], 1.0, 3)[
        LOGITS[4].argsort(descending=True, stable=True)[:len(drawn)]].numpy(), rtol=1e-5, atol=1e-8)
    assert (drawn[:3] > 0).all() and (drawn[3:] == 0).all()
    assert list(figure["data"][1]["text"][3:6]) == ["cut"] * 3
    assert figure["data"][0]["marker"]["color"][3] == prediction.CUT
    kept = float(LOGITS[4].softmax(-1).sort(descending=True).values[:3].sum())
    assert [m.value for m in at.metric][:2] == ["3 of 133", f"{kept:.2%}"]
    assert f"3 of 133 tokens take part in the draw. Together they had {kept:.1%}" in page_text(at)


def test_top_p_keeps_the_fewest_tokens_that_reach_p_and_the_math_says_where_it_stopped():
    at = open_page("prediction", text=ENDED, token=4)
    at.slider(key="prediction_top_p").set_value(0.3).run()
    p = LOGITS[4].softmax(-1).sort(descending=True).values
    before = (p.cumsum(0) - p).numpy()
    n_kept = int((before < 0.3).sum())
    assert 1 < n_kept < 10
    assert [m.value for m in at.metric][0] == f"{n_kept} of 133"
    text = page_text(at)
    assert f"the total was {before[n_kept - 1]:.4f}, still below 0.3" in text
    assert f"so the {133 - n_kept} tokens after it are cut" in text
    cumulative = figure_titled(at, "Top-p: the probabilities added up")
    np.testing.assert_allclose(decode(cumulative["data"][0]["y"]).astype(float)[:5], p.cumsum(0)[:5].numpy(),
                               rtol=1e-5)


def test_an_earlier_token_shows_what_the_model_expected_and_the_word_that_came_next():
    at = open_page("prediction", text=ENDED)
    at.selectbox(key="token").set_value(1).run()              # after "cat" the sentence goes on with "sat"
    assert "after “cat” (position 1)" in figure_titled(at, "Next-token probabilities")["layout"]["title"]["text"]
    tokens, probs = bars(at)
    assert tokens == expected_top(LOGITS[1])[0] or tokens[:-1] == expected_top(LOGITS[1])[0]
    p_sat = float(LOGITS[1].softmax(-1)[VOCAB.index("sat")])
    rank = int((LOGITS[1] > LOGITS[1][VOCAB.index("sat")]).sum()) + 1
    assert f"In your sentence the next token is “sat”: the model gave it **{p_sat:.1%}** (rank {rank} of 133)" \
        in page_text(at)
    annotations = figure_titled(at, "Next-token probabilities")["layout"]["annotations"]
    assert any(a["text"] == "next in your sentence" for a in annotations)


def test_the_math_works_softmax_out_with_the_real_sum_over_the_vocabulary():
    at = open_page("prediction", text=ENDED, token=9)
    at.slider(key="prediction_temperature").set_value(0.5).run()
    z = LOGITS[-1].double()
    total = float(torch.exp(z / 0.5).sum())
    text = page_text(at)
    assert f"add up to **{total:.6g}**" in text and "divided by the temperature 0.5" in text
    rows = at.dataframe[0].value
    assert list(rows.columns) == ["token", "logit", "logit / T", "exp(logit / T)", "probability"]
    assert rows.token.iloc[0] == "." and len(rows) == prediction.MATH_ROWS
    np.testing.assert_allclose(rows["logit"], z.sort(descending=True).values[:prediction.MATH_ROWS].numpy(), rtol=1e-6)
    np.testing.assert_allclose(rows["probability"],
                               next_token_probs(LOGITS[-1], 0.5).sort(descending=True).values[:6].numpy(),
                               rtol=1e-4, atol=1e-9)
    at.slider(key="prediction_temperature").set_value(0.0).run()
    assert "always take the token with the highest logit" in page_text(at)
    assert [m.value for m in at.metric][0] == "1 of 133"


# ---------------------------------------------------------------------------------------------------
# Writing with the model.

def test_next_token_appends_the_likeliest_token_and_generate_10_continues_like_model_generate():
    at = open_page("prediction", text=ENDED)
    at.button(key="prediction_next").click().run()
    first = int(TINY.model.predict(IDS)[0, -1].argmax())
    assert at.session_state["prediction_generated"].tokens == [first]
    at.button(key="prediction_ten").click().run()
    want = generate(TINY.model, IDS, 11, "greedy")
    state = at.session_state["prediction_generated"]
    assert state.tokens == want.tokens
    table = at.dataframe[-1].value
    assert list(table.token) == [VOCAB[t] for t in want.tokens]
    np.testing.assert_allclose(table.probability, want.probs, rtol=1e-5)
    assert f"“{ENDED}” + **“" in page_text(at)


def test_sampling_with_a_seed_draws_what_model_generate_draws_with_the_sliders_settings():
    at = open_page("prediction", text=ENDED)
    at.radio(key="prediction_strategy").set_value("sample").run()
    at.number_input(key="prediction_seed").set_value(7).run()
    at.slider(key="prediction_temperature").set_value(1.5).run()
    at.slider(key="prediction_top_k").set_value(20).run()
    at.button(key="prediction_ten").click().run()
    want = generate(TINY.model, IDS, 10, "sample", temperature=1.5, top_k=20, seed=7)
    assert at.session_state["prediction_generated"].tokens == want.tokens
    assert at.dataframe[-1].value["how it was chosen"].iloc[0] == "drawn at temperature 1.5, top-k 20 (seed 7)"


def test_beam_search_plans_the_whole_continuation():
    at = open_page("prediction", text=ENDED)
    at.radio(key="prediction_strategy").set_value("beam").run()
    at.button(key="prediction_ten").click().run()
    at.button(key="prediction_next").click().run()
    want = generate(TINY.model, IDS, 11, "beam", beams=3)
    assert at.session_state["prediction_generated"].tokens == want.tokens
    np.testing.assert_allclose(at.dataframe[-1].value.probability, want.probs, rtol=1e-5)


def test_a_new_sentence_model_or_strategy_starts_the_continuation_over():
    at = open_page("prediction", text=ENDED)
    at.button(key="prediction_ten").click().run()
    type_text(at, "the dog sat")
    assert not at.session_state["prediction_generated"].tokens
    at.button(key="prediction_next").click().run()
    at.radio(key="prediction_strategy").set_value("sample").run()
    assert not at.session_state["prediction_generated"].tokens
    at.button(key="prediction_next").click().run()
    at.selectbox(key="model").set_value("roses").run()
    assert not at.exception
    assert not at.session_state["prediction_generated"].tokens
    assert at.slider(key="prediction_top_k").value == 12        # the new vocabulary's size: nothing cut


def test_the_window_slides_when_the_text_outgrows_the_context_and_the_text_can_go_to_the_sidebar():
    poem = "roses are red violets are blue sugar is sweet and so are you"      # 13 of roses' 16
    at = open_page("prediction", model="roses", text=poem)
    at.button(key="prediction_ten").click().run()
    assert "more than the model's context of 16" in page_text(at)
    roses = load_bundled("roses")
    new = at.session_state["prediction_generated"].tokens
    assert new[:3] == roses.tokenizer.encode("roses are red")
    at.button(key="prediction_use").click().run()
    assert at.text_input(key="text").value == poem + " " + roses.tokenizer.decode(new)
    assert not at.exception and "only the last 16 tokens are used" in page_text(at)


def test_presenter_mode_keeps_the_sliders_hides_the_seed_and_shows_fewer_larger_bars():
    at = open_page("prediction", text=ENDED, presenter=1, token=9)
    at.radio(key="prediction_strategy").set_value("sample").run()
    assert not [n for n in at.number_input if n.key == "prediction_seed"]
    assert at.slider(key="prediction_temperature").value == 1.0
    tokens, _ = bars(at)
    assert len(tokens) == 8
    assert figure_titled(at, "Next-token probabilities")["layout"]["font"]["size"] == 20
    assert at.selectbox(key="token").label == "After token"            # one compact row above the charts
    assert not [h for h in at.subheader if h.value == "The forecast for the next token"]


@pytest.mark.parametrize("text", [
    "<script>alert(1)</script> <img src=x onerror=alert(1)>",
    "the 🐈 sat on the <b>mat</b>",
    "quantum zebras juggle marmalade",
    ("the cat sat on the mat because it was tired . " * 45)[:2000],
])
def test_strange_sentences_show_as_text_and_can_still_be_continued(text):
    at = open_page("prediction", text=ENDED)
    type_text(at, text)
    at.button(key="prediction_next").click().run()
    assert not at.exception
    pieces = TINY.tokenizer.pieces(text)[-32:]
    i = at.selectbox(key="token").value                       # the shared selected token, kept if it still exists
    title = figure_titled(at, "Next-token probabilities")["layout"]["title"]["text"]
    read = TINY.tokenizer.vocab[pieces[i].id] if pieces[i].unknown else pieces[i].text   # what the model read
    assert f"after “{html.escape(read, quote=False)}” (position {i})" in title
    for figure in plotly_figures(at):
        spec = json.dumps(figure)
        assert "<script" not in spec and "<img" not in spec and "<b>mat" not in spec
    assert len(at.session_state["prediction_generated"].tokens) == 1


def test_an_empty_sentence_asks_for_one():
    at = open_page("prediction", text=ENDED)
    type_text(at, "   ")
    assert not at.exception and "Type a sentence first" in page_text(at)
    assert not plotly_figures(at)


# ---------------------------------------------------------------------------------------------------
# The builders, called directly.

def odd_model(**changes) -> TransformerLM:
    """A tiny model unlike the bundled ones: learned positions, RMS norm, post-norm, context 5."""
    torch.manual_seed(3)
    cfg = ModelConfig(**{**dict(vocab_size=9, d_model=8, n_heads=2, n_layers=1, d_ff=16, max_len=5,
                                pos="learned", norm="rms", norm_position="post"), **changes})
    model = TransformerLM(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p))
    return model


@pytest.mark.parametrize("settings", [prediction.Settings(), prediction.Settings(0.0), prediction.Settings(0.7, top_k=2),
                                      prediction.Settings(1.8, top_p=0.6), prediction.Settings(0.3, 4, 0.95)])
def test_ranking_agrees_with_next_token_probs_on_what_is_kept(settings):
    logits = 3 * torch.randn(9, generator=torch.Generator().manual_seed(1))
    vocab = [f"t{i}" for i in range(9)]
    table = prediction.ranking(logits, vocab, settings)
    final = next_token_probs(logits, settings.temperature, settings.top_k, settings.top_p)
    assert list(table["rank"]) == list(range(1, 10)) and (np.diff(table.logit) <= 0).all()
    np.testing.assert_allclose(table.final, final.numpy()[table.id.to_numpy()])
    assert ((table.final > 0) == table.kept).all()
    assert math.isclose(table.final.sum(), 1.0, rel_tol=1e-6)
    if settings.temperature == 0:
        assert list(table.cut_by[1:]) == ["temperature 0"] * 8
    assert prediction.mass_kept(table) <= 1 + 1e-6
    figure = prediction.probability_figure(table, settings, "t", actual=int(table.id.iloc[-1]), n=4)
    assert len(figure.data[0].x) == 5 and figure.data[0].x[-1].startswith("… #9 ")


def test_softmax_worked_out_survives_scores_that_would_overflow():
    logits = torch.tensor([900.0, 899.0, 10.0, -5.0])
    worked = prediction.softmax_worked(logits, ["a", "b", "c", "d"], 1.0, n=3)
    assert worked.shift == 900.0 and math.isfinite(worked.total)
    np.testing.assert_allclose(worked.rows.probability, next_token_probs(logits)[:3].numpy(), rtol=1e-6)
    assert "exp(logit / T − largest)" in prediction.softmax_story(worked, 1.0, 4)


def test_writing_with_a_small_context_slides_the_window_for_any_model_config():
    model = odd_model()
    cont = prediction.Continuation(("odd", "x", "greedy"))
    cont = prediction.extend(model, [1, 2, 3], cont, 2, "greedy", prediction.Settings())
    assert len(cont.tokens) == 2 and not cont.window_slid            # 3 + 1 tokens read: fits in 5
    cont = prediction.extend(model, [1, 2, 3], cont, 3, "greedy", prediction.Settings())
    assert cont.window_slid and cont.tokens == generate(model, [1, 2, 3], 5, "greedy").tokens
    beam = prediction.extend(odd_model(pos="none", norm="none"), [4, 5], prediction.Continuation(), 6, "beam",
                       prediction.Settings(), beams=2)
    assert len(beam.tokens) == 6 and beam.window_slid and beam.how[0] == "best of 2 beams"
    full = prediction.Continuation(tokens=[0] * prediction.MAX_GENERATED)
    assert prediction.extend(model, [1], full, 10, "greedy", prediction.Settings()) is full and full.full
    assert prediction.window_story(cont, 3, 5).startswith("The text is now 8 tokens long")


def test_continued_text_follows_each_tokenizers_spacing():
    words = WordTokenizer(["<unk>", "the", "cat", "sat"])
    assert prediction.continued_text(words, "the cat ", [3]) == "the cat sat"
    chars = CharTokenizer(["<unk>", "a", "b"])
    assert prediction.continued_text(chars, "ab", [1, 2]) == "abab"
    assert prediction.continued_text(words, "the", []) == "the"
    table = prediction.continuation_table(prediction.Continuation(tokens=[1, 2], probs=[0.5, 0.25], how=["x", "y"]),
                                    words.vocab)
    assert isinstance(table, pd.DataFrame) and list(table.token) == ["the", "cat"]


def test_the_math_panel_draws_nothing_until_it_is_opened():
    at = open_page("prediction", text=ENDED, open_math=False)
    assert not at.exception and len(plotly_figures(at)) == 2          # the scores and the probabilities
    assert not at.latex
    at.session_state["math_prediction"] = True                       # a click on "Show the math"
    at.run()
    assert len(plotly_figures(at)) == 3 and at.latex                  # + the cumulative chance, the softmax
