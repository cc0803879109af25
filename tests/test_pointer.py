"""At the reveal, the page's own chart points at the model's answer: on the figures the pages build for tinytales (and
the translate model's cross-attention), the arrow stands on the answer's bar or cell, found by the labels the
chart shows, and the figure holds the answer's number there. Each answer and label is recomputed here from the
model's own forward pass; a chart of another layer, head, word or stage gets no pointer, and the page's figure
itself is never changed."""
import html
import json

import numpy as np
import pytest
import torch

from explorer import questions
from explorer.plot import visible
from explorer.pointer import NAME, Target, point_at
from explorer.questions import Question
from explorer.steps import attention, embedding, encoder_decoder, prediction, residual, why
from model.checkpoint import Bundle, load_bundled
from model.config import ModelConfig
from model.seq2seq import greedy
from model.transformer import TransformerLM
from questions_support import cosines, lens_first, lens_stages, lens_tops, pushes, special

TEXT = "the cats sat on the mats because"
SOURCE = "the small red cat sees the big dog"


def on(name: str, text: str, question: Question, **place):
    """(the question asked on model `name` reading `text` at `place`, the view, its place)."""
    bundle = load_bundled(name) if isinstance(name, str) else name
    view = questions.reading(name if isinstance(name, str) else "deep", bundle, text, 64)
    cfg = bundle.model.cfg
    where = questions.place(place, cfg.n_layers, cfg.n_heads, len(view.ids))
    return questions.ask(question, view, where), view, where


def as_data(fig) -> dict:
    """The figure as the browser receives it (JSON, read back: a copy's template keys may come in another order)."""
    return json.loads(fig.to_json())


def pointers(fig) -> list:
    return [a for a in fig.layout.annotations if a.name == NAME]


def pointed(fig, target) -> tuple:
    """The one arrow point_at draws on `fig`, and the figure it returned; `fig` itself is left as it was."""
    before = as_data(fig)
    out = point_at(fig, target)
    assert as_data(fig) == before                                        # a cached figure stays as it was
    found = pointers(out)
    assert len(found) == 1 and [s.name for s in out.layout.shapes].count(NAME) == 2    # an arrow and an outline
    return found[0], out


def nothing_pointed(fig, target) -> None:
    out = point_at(fig, target)
    assert out is not fig and not pointers(out) and as_data(out) == as_data(fig)


def axis_label(fig, trace, value, letter: str) -> str:
    """The tick label the heatmap trace's axis shows at `value`."""
    axis = fig.layout[f"{letter}axis{(getattr(trace, letter + 'axis') or letter)[1:]}"]
    return dict(zip(axis.tickvals, axis.ticktext))[value]


def cell(fig, arrow, trace=None):
    """(row label, column label, value) of the heatmap cell the arrow stands on."""
    trace = trace or fig.data[0]
    z = np.asarray(trace.z, dtype=float)                                  # (rows, columns)
    xs = list(range(z.shape[1])) if trace.x is None else np.asarray(trace.x).tolist()   # no x: 0, 1, 2, ...
    ys = list(range(z.shape[0])) if trace.y is None else np.asarray(trace.y).tolist()
    value = float(z[ys.index(arrow.y), xs.index(arrow.x)])
    return axis_label(fig, trace, arrow.y, "y"), axis_label(fig, trace, arrow.x, "x"), value


def named(tokens: list[str], position: int) -> str:
    """A token's place as the token axes label it, escaped as the chart shows it: "6 because"."""
    return html.escape(f"{position} {visible(tokens[position])}", quote=False)


# --- next word: the prediction page's probability bars -------------------------------------------------------------


@pytest.mark.parametrize("token", [6, 2])
def test_next_word_points_at_the_answer_tokens_bar_of_the_probability_chart(token):
    asked, view, where = on("tinytales", TEXT, Question("next-word"), token=token)
    bundle = view.bundle
    probs = torch.softmax(bundle.model.run(list(view.ids))["logits"][0, token].double(), -1)
    top = int(probs.argmax())
    settings = prediction.Settings()
    table = prediction.ranking(view.trace["logits"][0, token], bundle.tokenizer.vocab, settings)
    actual = view.ids[token + 1] if token + 1 < len(view.ids) else None       # as the page draws it
    title = f"Next-token probabilities after “{html.escape(view.tokens[token], quote=False)}” (position {token})"
    fig = prediction.probability_figure(table, settings, title, actual, prediction.TOP_BARS)
    arrow, out = pointed(fig, asked.target)
    assert arrow.x == html.escape(visible(bundle.tokenizer.vocab[top]), quote=False)
    bars = next(t for t in out.data if t.name.startswith("probability at temperature"))
    value = float(np.asarray(bars.y)[list(bars.x).index(arrow.x)])
    assert value == pytest.approx(float(probs[top]), rel=1e-5) == asked.values[asked.answer]
    assert arrow.y == pytest.approx(value, rel=1e-6)                             # at the bar's top
    other = title.replace(f"(position {token})", f"(position {token + 1})")
    nothing_pointed(prediction.probability_figure(table, settings, other, actual), asked.target)   # another token


# --- looks at: the attention page's pattern heatmap ----------------------------------------------------------------


@pytest.mark.parametrize("place", [dict(layer=1, head=2, token=6), dict(layer=0, head=1, token=4)])
def test_looks_at_points_at_the_query_rows_key_column_cell_of_the_heads_pattern(place):
    asked, view, where = on("tinytales", TEXT, Question("looks-at"), **place)
    layer, head, token = place["layer"], place["head"], place["token"]
    row = view.bundle.model.run(list(view.ids))[f"blocks.{layer}.attn.pattern"][0, head, token, : token + 1]
    key = int(row.argmax())
    fig = attention.head_figure(view, layer, head, "pattern")
    arrow, out = pointed(fig, asked.target)
    assert (arrow.x, arrow.y) == (key, token)
    query, looked_at, weight = cell(out, arrow)
    assert (query, looked_at) == (named(view.tokens, token), named(view.tokens, key))
    assert weight == pytest.approx(float(row[key]), abs=1e-6) and weight == pytest.approx(asked.values[asked.answer])
    nothing_pointed(attention.head_figure(view, 1 - layer, head, "pattern"), asked.target)          # another layer
    nothing_pointed(attention.head_figure(view, layer, (head + 1) % 4, "pattern"), asked.target)    # another head


def test_the_lectures_looks_at_question_points_at_cats_with_its_weight():
    asked, view, _ = on("tinytales", TEXT, Question("looks-at"), layer=1, head=2, token=6)
    arrow, out = pointed(attention.head_figure(view, 1, 2, "pattern"), asked.target)
    assert cell(out, arrow)[:2] == ("6 because", "1 cats") and f"{cell(out, arrow)[2]:.2f}" == asked.shown["cats"]


# --- lens layer: the residual page's logit lens --------------------------------------------------------------------


@pytest.mark.parametrize("token", [6, 2, 4])
def test_lens_layer_points_at_the_answer_stage_of_the_tokens_row_of_the_lens(token):
    asked, view, where = on("tinytales", TEXT, Question("lens-layer"), token=token)
    bundle = view.bundle
    stages = lens_stages(bundle.model.cfg.n_layers)
    tops = lens_tops(bundle, list(view.ids), token)
    first = lens_first(tops)
    fig = residual.lens_chart(view, residual.lens_reads_mid(view))                # the page's default chart
    arrow, out = pointed(fig, asked.target)
    position, stage, probability = cell(out, arrow)
    assert (position, stage) == (named(view.tokens, token), stages[first][1])
    with torch.no_grad():
        stream = bundle.model.run(list(view.ids))[stages[first][0]][0, token]
        read = torch.softmax(bundle.model.unembed(bundle.model.final_norm(stream)).double(), -1)
    assert int(read.argmax()) == tops[-1] and probability == pytest.approx(float(read.max()), abs=1e-5)
    assert probability == pytest.approx(asked.values[asked.answer], abs=1e-6)
    if stages[first][1].endswith("after attention"):                    # the student turned those stages off
        nothing_pointed(residual.lens_chart(view, False), asked.target)


def test_a_deep_models_lens_goes_stages_down_and_the_pointer_follows():
    torch.manual_seed(0)
    tokenizer = load_bundled("roses").tokenizer
    cfg = ModelConfig(vocab_size=len(tokenizer.vocab), d_model=16, n_heads=2, n_layers=12, d_ff=32, max_len=16)
    bundle = Bundle(model=TransformerLM(cfg).eval(), tokenizer=tokenizer)
    asked, view, where = on(bundle, "roses are red violets are blue", Question("lens-layer"))
    stages = lens_stages(12)                                         # 13: the chart puts them down the rows
    first = lens_first(lens_tops(bundle, list(view.ids), where.token))
    fig = residual.lens_chart(view, residual.lens_reads_mid(view))
    arrow, out = pointed(fig, asked.target)
    assert cell(out, arrow)[:2] == (stages[first][1], named(view.tokens, where.token))
    assert cell(out, arrow)[2] == pytest.approx(asked.values[asked.answer], abs=1e-6)


# --- nearest word: the embedding page's neighbours ------------------------------------------------------------------


@pytest.mark.parametrize("token", [6, 1])
def test_nearest_word_points_at_the_answer_words_bar_among_the_selected_tokens_neighbours(token):
    asked, view, where = on("tinytales", TEXT, Question("nearest-word"), token=token)
    vocab, given = view.bundle.tokenizer.vocab, view.ids[token]
    sims = cosines(view.bundle.model.embed.tok.weight, given)
    sims[[given, *(i for i, t in enumerate(vocab) if special(t))]] = -np.inf
    nearest = int(sims.argmax())
    fig = embedding.neighbours_figure(view, given, embedding.neighbours_table(view, given))   # the tab's token
    arrow, out = pointed(fig, asked.target)
    assert arrow.y == f"{html.escape(visible(vocab[nearest]), quote=False)} (id {nearest})"
    bars = out.data[0]
    value = float(np.asarray(bars.x)[list(bars.y).index(arrow.y)])
    assert value == pytest.approx(float(sims[nearest]), abs=1e-9) and arrow.x == pytest.approx(value)
    assert value == pytest.approx(asked.values[asked.answer], abs=1e-6)
    other = view.ids[0]                                                       # the neighbours of another token
    nothing_pointed(embedding.neighbours_figure(view, other, embedding.neighbours_table(view, other)), asked.target)


# --- biggest push: the why page's attribution bars -----------------------------------------------------------------


@pytest.mark.parametrize("token", [6, 3])
def test_biggest_push_points_at_the_answer_parts_bar_of_the_attribution(token):
    asked, view, where = on("tinytales", TEXT, Question("biggest-push"), token=token)
    found = pushes(view.bundle, list(view.ids), token)
    best = max(found, key=found.get)                                  # "layer 1 head 2" or "MLP of layer 1"
    words = best.split()
    chart_label = f"MLP {words[-1]}" if best.startswith("MLP") else f"L{words[1]} H{words[3]}"   # the chart's words
    target = int(view.bundle.model.run(list(view.ids))["logits"][0, token].argmax())   # the page opens on it
    fig = why.attribution_figure(view, view.trace, token, target)
    arrow, out = pointed(fig, asked.target)
    assert arrow.y == chart_label
    bars = out.data[0]
    value = float(np.asarray(bars.x)[list(bars.y).index(arrow.y)])
    assert value == pytest.approx(found[best], abs=1e-4) and value == pytest.approx(asked.values[asked.answer])
    runner_up = why.favourites(view.trace, token)[1]                 # the page explaining another word
    nothing_pointed(why.attribution_figure(view, view.trace, token, runner_up), asked.target)


# --- reads source: the encoder-decoder page's cross-attention -------------------------------------------------------


@pytest.mark.parametrize("word, layer, head", [(None, 1, 0), ("chat", 0, 3)])
def test_reads_source_points_at_the_written_words_source_cell_in_the_heads_panel(word, layer, head):
    asked, view, where = on("translate", SOURCE, Question("reads-source", word=word), layer=layer, head=head)
    model, vocab = view.bundle.model, view.bundle.tokenizer.vocab
    written = greedy(model, list(view.ids))
    out_words = [vocab[i] for i in written] + ["<eos>"]
    row = out_words.index(word or "petit")
    weights = model.run(list(view.ids), [model.bos_id, *written])[f"decoder.blocks.{layer}.cross_attn.pattern"][0, head, row]
    source = int(weights.argmax())
    fig = encoder_decoder.figure("cross", view, layer, head)
    arrow, out = pointed(fig, asked.target)
    panel = next(t for t in out.data if t.name == f"head {head}")
    assert arrow.xref == (panel.xaxis or "x") and arrow.yref == (panel.yaxis or "y")   # in the head's own panel
    written_label, read, weight = cell(out, arrow, panel)
    assert (written_label, read) == (f"{row} → {html.escape(out_words[row], quote=False)}",
                                     named(view.tokens, source))
    assert weight == pytest.approx(float(weights[source]), abs=1e-6) == asked.values[asked.answer]
    nothing_pointed(encoder_decoder.figure("cross", view, 1 - layer, head), asked.target)          # another layer


# --- the function itself --------------------------------------------------------------------------------------------


def test_no_target_or_a_question_without_a_chart_leaves_an_unchanged_copy():
    asked, view, _ = on("tinytales", TEXT, Question("token-count"))
    fig = attention.head_figure(view, 1, 2, "pattern")
    assert asked.target is None
    nothing_pointed(fig, None)
    nothing_pointed(fig, Target("layer 1 head 2", row="6 because", col="no such word"))


def test_a_title_names_its_head_whole_and_a_row_alone_outlines_the_whole_row():
    _, view, _ = on("tinytales", TEXT, Question("looks-at"), layer=1, head=2, token=6)
    fig = attention.head_figure(view, 1, 2, "pattern")
    nothing_pointed(fig, Target("layer 1 head 2", row="6 because", col="1 cat"))    # "1 cats" is the column
    other = point_at(fig, None).update_layout(title="Attention pattern of layer 1 head 21")       # a copy, retitled
    nothing_pointed(other, Target("layer 1 head 2", row="6 because", col="1 cats"))   # head 21 is not head 2
    arrow, out = pointed(fig, Target("layer 1 head 2", row="3 on"))
    outline = next(s for s in out.layout.shapes if s.name == NAME)
    assert arrow.y == 3 and (outline.y0, outline.y1) == (2.5, 3.5)
    assert (outline.x0, outline.x1) == (-0.5, len(view.tokens) - 0.5)
