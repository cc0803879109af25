"""Every chart in words and as a table (explorer/chart_text.py): the sentence a screen reader hears and the numbers
"Show as a table" lists are recomputed here from the model's own trace."""
import json

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest
import torch

from claims_support import bundled, bundled_view
from conftest import decode, figure_titled, open_page, plotly_charts, show_section
from explorer import chart_text
from explorer.view import DEFAULT_SENTENCE
from model.inputs import prepare_text
from explorer.chart_text import describe, number, plain, tables
from explorer.plot import heatmap, labels, visible
from explorer.registry import BY_SLUG
from explorer.steps import attention
from explorer.steps import residual
@pytest.mark.parametrize("name", ["tinytales", "roses"])
def test_an_attention_pattern_says_who_the_last_tokens_attend_to_most(name):
    v = bundled_view(name)
    cfg = v.bundle.model.cfg
    for layer in range(cfg.n_layers):
        for head in range(cfg.n_heads):
            fig = attention.pattern_figure(v, v.trace, layer, head)
            sentence = describe(fig)
            pattern = v.trace["pattern", layer][0, head].double().numpy()              # (T, T)
            rows = labels(v.tokens)
            assert sentence.startswith(f"Attention pattern of layer {layer} head {head}.")
            for query in range(len(rows))[-2:]:
                key = int(pattern[query].argmax())
                said = f"{plain(rows[query])} attends most to {plain(rows[key])} ({number(pattern[query, key])})"
                assert said in sentence, (said, sentence)


@pytest.mark.parametrize("name", ["tinytales", "roses"])
def test_the_pattern_table_has_every_weight_and_leaves_masked_cells_empty(name):
    v = bundled_view(name)
    fig = attention.pattern_figure(v, v.trace, 0, 0)
    [table] = tables(fig)
    pattern = v.trace["pattern", 0][0, 0].double().numpy()
    T = len(v.tokens)
    assert table.columns == ["query (who is looking) \\ key (looked at)", *[plain(r) for r in labels(v.tokens)]]
    assert [row[0] for row in table.rows] == [plain(r) for r in labels(v.tokens)]
    values = np.array([row[1:] for row in table.rows], dtype=float)                    # (T, T)
    future = np.triu(np.ones((T, T), dtype=bool), 1)
    assert np.isnan(values[future]).all()                                              # masked: no number
    np.testing.assert_allclose(values[~future], pattern[~future], atol=1e-4)


def test_every_head_small_multiples_name_each_panel():
    v = bundled_view("tinytales")
    fig = attention.all_heads_figure(v, v.trace, 0, 0)
    cfg = v.bundle.model.cfg
    found = tables(fig)
    assert [t.title for t in found] == [f"layer {l} head {h}" for l in range(cfg.n_layers) for h in range(cfg.n_heads)]
    for t, (l, h) in zip(found, [(l, h) for l in range(cfg.n_layers) for h in range(cfg.n_heads)]):
        values = np.array([row[1:] for row in t.rows], dtype=float)
        T = len(v.tokens)
        future = np.triu(np.ones((T, T), dtype=bool), 1)
        np.testing.assert_allclose(np.nan_to_num(values[~future]),
                                   v.trace["pattern", l][0, h].double().numpy()[~future], atol=1e-4)
    assert "layer 0 head 0: " in describe(fig) and "and " in describe(fig)       # more than MAX_PARTS: "and N more"


def test_a_heatmap_of_signed_values_says_its_largest_and_smallest_cell():
    z = np.array([[0.5, -2.25], [3.0, 0.0]])
    fig = heatmap(z, ["a", "<b>"], ["x", "y"], title="Some <i>values</i>", row_title="token", col_title="dim")
    assert describe(fig) == "Some values. 2 rows × 2 columns; highest 3 at <b> × x, lowest -2.25 at a × y."
    [table] = tables(fig)
    assert table.columns == ["token \\ dim", "x", "y"] and table.rows == [["a", 0.5, -2.25], ["<b>", 3.0, 0.0]]


@pytest.mark.parametrize("name", ["tinytales", "roses"])
def test_bars_name_their_largest_values(name):
    v = bundled_view(name)
    fig = residual.contributions_figure(v, 0)
    sentence = describe(fig)
    found = tables(fig)
    assert len(found) == 1                                  # four bar traces over the same tokens: one table
    [table] = found
    assert [row[0] for row in table.rows] == [plain(r) for r in labels(v.tokens)]
    for n, trace in enumerate(fig.data):
        values = np.asarray(trace.y, dtype=float)
        np.testing.assert_allclose([row[1 + n] for row in table.rows], values, atol=1e-4)
        best = int(values.argmax())
        assert f"{trace.name}: {len(values)} bars, largest {plain(labels(v.tokens)[best])} ({number(values[best])})" \
            in sentence


def test_lines_say_where_they_peak():
    fig = go.Figure([go.Scatter(x=[1, 2, 3], y=[0.2, 0.9, 0.4], name="loss", mode="lines"),
                     go.Scatter(x=[1, 2, 3], y=[1.0, 0.5, 0.1], name="accuracy", mode="lines")],
                    layout=dict(title="Training", xaxis_title="step"))
    assert describe(fig) == ("Training. loss: 3 points from 1 to 3, highest 0.90 at 2, lowest 0.20 at 1; accuracy: "
                             "3 points from 1 to 3, highest 1 at 1, lowest 0.10 at 3.")
    [table] = tables(fig)
    assert table.columns == ["step", "loss", "accuracy"]
    assert table.rows == [["1", 0.2, 1.0], ["2", 0.9, 0.5], ["3", 0.4, 0.1]]


def test_a_page_can_lead_with_its_own_sentence_and_labels_stay_text():
    fig = go.Figure(go.Bar(x=["&lt;b&gt;", "b"], y=[1, 2]), layout=dict(title="T"))
    assert describe(fig, "What matters") == "T. What matters. 2 bars, largest b (2), <b> (1)."
    assert plain("a<br>b &amp; <b>c</b>") == "a b & c" and visible(".") == "⟨.⟩"


def test_figure_json_with_packed_arrays_reads_the_same_as_the_figure():
    v = bundled_view("tinytales")
    fig = attention.pattern_figure(v, v.trace, 0, 1)
    from_json = pio.from_json(fig.to_json(), skip_invalid=True)
    packed = json.loads(fig.to_json())["data"][0]["z"]
    assert isinstance(packed, dict) and "bdata" in packed                  # Plotly 7 packs arrays in JSON
    assert chart_text._floats(packed).shape == (len(v.tokens), len(v.tokens))
    assert describe(from_json) == describe(fig)


# --- the app: every chart is announced by its sentence, and its table opens with the same numbers ------------

def _announced(at) -> list[tuple[dict, str]]:
    return [(json.loads(c["figure"]), c["label"]) for c in plotly_charts(at)]


@pytest.mark.parametrize("slug", ["tokenization", "embedding", "positions", "attention", "feedforward", "residual",
                                  "prediction"])
def test_every_chart_on_every_tab_is_announced_by_a_sentence_from_its_data(slug):
    at = open_page(slug, open_math=False)
    for label in BY_SLUG[slug].labels or [None]:
        if label:
            show_section(at, slug, label)
        assert not at.exception
        for figure, sentence in _announced(at):
            fig = go.Figure(figure)
            title = plain(fig.layout.title.text) if fig.layout.title.text else ""
            generic = describe(fig)                                 # recomputed from the figure the browser draws
            assert sentence == generic or (sentence.startswith(f"{title}. Layer ")   # attention: the chosen row first
                                           and sentence.endswith(generic.removeprefix(f"{title}."))), (slug, label)
            assert sentence.startswith(title) and len(sentence) > len(title) + 2, (slug, label, sentence)


def test_the_prediction_chart_opens_as_a_table_with_the_same_probabilities():
    at = open_page("prediction", open_math=False)
    assert not at.dataframe or all("probability" not in str(d.value.columns) for d in at.dataframe)
    panels = [e for e in at.expander if e.label == "Show as a table"]
    assert len(panels) == len(plotly_charts(at)) == 2                   # one per chart (the cumulative one is in the math)
    at.session_state["table_probabilities"] = True                       # a click on the panel
    at.run()
    figure = figure_titled(at, "Next-token probabilities")
    [frame] = [d.value for d in at.dataframe if "probability at temperature 1" in d.value.columns]
    tokens = [plain(t) for t in figure["data"][0]["x"]]
    assert list(frame.iloc[:, 0]) == tokens
    np.testing.assert_allclose(frame["probability at temperature 1"], decode(figure["data"][0]["y"]), atol=1e-4)
    bundle = bundled("tinytales")                        # the model's own forecast after the sentence's last token
    ids = prepare_text(bundle.tokenizer, DEFAULT_SENTENCE, bundle.model.cfg.max_len).ids
    probs = torch.softmax(bundle.model.run(ids)["logits"][0, -1].double(), -1)
    top = probs.topk(len(tokens))
    np.testing.assert_allclose(frame["probability at temperature 1"], top.values.numpy(), atol=1e-4)
    assert tokens == [visible(bundle.tokenizer.vocab[i]) for i in top.indices.tolist()]


def test_the_attention_page_leads_its_charts_with_the_chosen_querys_row():
    pronoun = "the cat sat on the mat because it was tired"
    at = show_section(open_page("attention", text=pronoun, layer=1, head=2, token=7, open_math=False), "attention",
                      "Who looks at whom")
    bundle = bundled("tinytales")
    ids = prepare_text(bundle.tokenizer, pronoun, bundle.model.cfg.max_len).ids
    row = bundle.model.run(ids)["pattern", 1][0, 2, 7, :8].double()                 # query 7 ("it") reads 0..7
    key = int(row.argmax())
    tokens = pronoun.split()
    lead = f"Layer 1, head 2: “it” (7) attends most to “{tokens[key]}” ({key}) ({float(row[key]):.2f})"
    sentences = [label for _, label in _announced(at)]
    assert len(sentences) == 2 and all(lead in s for s in sentences)
    assert sentences[0].startswith("Attention pattern of layer 1 head 2. " + lead)
