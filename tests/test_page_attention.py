"""Step 4, attention: what a student sees when every token asks a question and earlier tokens answer."""
import math
import re
from functools import lru_cache

import numpy as np
import pytest
import torch

from conftest import decode, figure_titled, open_page, page_text, plotly_figures, show_section, type_text
from explorer.steps import attention
from explorer.plot import MASKED, token_label
from explorer.app.state import DEFAULT_SENTENCE, View
from explorer.steps import whatif
from model.checkpoint import Bundle, load_bundled
from model.config import ModelConfig
from model.inputs import prepare_text
from model.tokenizers import WordTokenizer
from model.transformer import TransformerLM


@lru_cache
def tinytales():
    return load_bundled("tinytales")


# The sentence these tests study: "it" at position 7 looks back for what it refers to.
PRONOUN = "the cat sat on the mat because it was tired"
T = len(PRONOUN.split())


@lru_cache
def default_trace():
    return tinytales().model.run(tinytales().tokenizer.encode(PRONOUN))


def tiny_view(text: str = "a b c a b", **overrides) -> View:
    """A small untrained model of another configuration, to call the builders directly."""
    torch.manual_seed(0)
    tokenizer = WordTokenizer.from_texts(["a b c d e"])
    settings = dict(vocab_size=tokenizer.vocab_size, d_model=12, n_heads=3, n_layers=1, d_ff=16, max_len=8)
    model = TransformerLM(ModelConfig(**(settings | overrides))).eval()
    prepared = prepare_text(tokenizer, text, model.cfg.max_len)
    return View(name="tiny", bundle=Bundle(model, tokenizer), text=text, presenter=False, prepared=prepared,
                trace=model.run(prepared.ids))


def z_of(figure, index=0):
    return decode(figure["data"][index]["z"])


def show(at, section: str):
    return show_section(at, "attention", section)


# --- the page, as a student sees it ------------------------------------------------------------


def test_queries_keys_values_and_the_four_steps_are_the_traced_numbers():
    at = open_page("attention", text=PRONOUN, layer=1, head=2)
    assert not at.exception
    tr = default_trace()
    name = "blocks.1.attn"
    [qkv] = plotly_figures(at)                            # only the open section is drawn: the first
    assert [t["name"] for t in qkv["data"]] == ["Q: the questions", "K: the labels", "V: the answers"]
    assert [a["text"] for a in qkv["layout"]["annotations"]] == ["Q: the questions", "K: the labels", "V: the answers"]
    for index, key in enumerate("qkv"):
        z = z_of(qkv, index)
        assert z.shape == (T, 16)
        np.testing.assert_allclose(z, tr[f"{name}.{key}"][0, 2].numpy(), rtol=1e-6)
    largest = max(float(tr[f"{name}.{key}"][0, 2].abs().max()) for key in "qkv")
    scale = qkv["layout"]["coloraxis"]                    # one scale, centred at 0, for all three panels
    assert scale["cmin"] == pytest.approx(-largest) and scale["cmax"] == pytest.approx(largest)
    assert list(decode(qkv["layout"]["yaxis"]["ticktext"])) == [f"{i} {w}" for i, w in enumerate(PRONOUN.split())]
    text = page_text(at)
    assert "classroom" in text and "Questions, labels and answers: layer 1, head 2" in text
    show(at, "The four steps")
    assert len(plotly_figures(at)) == 4
    scores = tr[f"{name}.scores"][0, 2].double().numpy()
    raw = z_of(figure_titled(at, "1. Raw scores q·k"))
    np.testing.assert_allclose(raw, tr[f"{name}.q"][0, 2].double().numpy() @ tr[f"{name}.k"][0, 2].double().numpy().T,
                               rtol=1e-4, atol=1e-4)                               # q·k, before any scaling
    np.testing.assert_allclose(raw, scores * 4, rtol=1e-6)
    np.testing.assert_allclose(z_of(figure_titled(at, "2. Divided by √16")), scores, rtol=1e-6)
    masked_fig = figure_titled(at, "3. Causal mask applied")
    masked = z_of(masked_fig)
    future = np.triu(np.ones((T, T), dtype=bool), 1)
    assert np.isnan(masked[future]).all()
    np.testing.assert_allclose(masked[~future], scores[~future], rtol=1e-6)
    assert masked_fig["data"][0]["text"][0][1] == "−∞" and masked_fig["data"][0]["text"][1][0] != "−∞"
    weights = z_of(figure_titled(at, "4. Softmax: the weights"))
    np.testing.assert_allclose(weights, tr[f"{name}.pattern"][0, 2].numpy(), rtol=1e-6)
    np.testing.assert_allclose(weights.sum(1), np.ones(T), rtol=1e-5)
    assert "√K = √16 = 4" in page_text(at)


def test_the_pattern_the_grid_of_every_head_and_the_lines_are_the_real_weights():
    at = show(open_page("attention", text=PRONOUN, layer=0, head=3, token=7), "Who looks at whom")
    tr = default_trace()
    pattern = tr["blocks.0.attn.pattern"][0, 3].numpy()
    big = figure_titled(at, "Attention pattern of layer 0 head 3")
    future = np.triu(np.ones((T, T), dtype=bool), 1)
    np.testing.assert_allclose(z_of(big)[~future], pattern[~future], rtol=1e-6)
    assert np.isnan(z_of(big)[future]).all()                                 # masked: no colour, no value
    assert big["data"][0]["colorscale"][0][1] == "#440154"                   # Viridis, 0..1
    assert (big["data"][0]["zmin"], big["data"][0]["zmax"]) == (0, 1)

    lines = figure_titled(at, "Who looks at whom")
    show(at, "Every head")
    grid = figure_titled(at, "Every head in every layer")
    assert [t["name"] for t in grid["data"]] == [f"layer {l} head {h}" for l in range(2) for h in range(4)]
    for t in grid["data"]:
        l, h = int(t["name"].split()[1]), int(t["name"].split()[3])
        z = np.asarray(decode(t["z"]), dtype=float)
        np.testing.assert_allclose(z[~future], tr[f"blocks.{l}.attn.pattern"][0, h].numpy()[~future], rtol=1e-6)
        assert np.isnan(z[future]).all()                                     # masked: the same grey as above
    assert grid["layout"]["plot_bgcolor"] == big["layout"]["plot_bgcolor"] == MASKED
    assert [a["text"] for a in grid["layout"]["annotations"]][:2] == ["layer 0 head 0", "layer 0 head 1"]

    segments = 0
    for t in lines["data"][:-2]:                                             # the last two: token markers
        ys = list(t["y"])
        for n in range(0, len(ys), 4):
            i, j = int(ys[n]), int(ys[n + 2])
            assert j <= i                                                    # never into the future
            w = float(pattern[i, j])
            assert w >= 0.01
            level = round(w * attention.LEVELS) / attention.LEVELS                           # in steps of 0.01
            assert t["opacity"] == attention.line_opacity(level, i == 7) and t["line"]["width"] == attention.line_width(level, i == 7)
            assert f"weight {w:.4f}" in t["hovertext"][n]                    # the exact weight on hover
            assert (t["line"]["color"] == "#EE7733") == (i == 7)             # the query's lines in orange
            segments += 1
    assert segments == int((np.tril(pattern) >= 0.01).sum())
    np.testing.assert_allclose(decode(lines["data"][-1]["customdata"]), pattern[7], rtol=1e-6)


def test_masked_cells_of_the_pattern_show_no_number_and_say_masked_on_hover():
    at = show(open_page("attention", text=PRONOUN, layer=1, head=0, token=7), "Who looks at whom")
    pattern = default_trace()["blocks.1.attn.pattern"][0, 0].numpy()
    big = figure_titled(at, "Attention pattern of layer 1 head 0")
    text, hover = np.asarray(big["data"][0]["text"]), np.asarray(big["data"][0]["customdata"])
    for i in range(T):
        for j in range(T):
            if j > i:       # a later token
                assert text[i, j] == "" and hover[i, j, 2] == "masked: a later token"
            else:
                assert text[i, j] == f"{pattern[i, j]:.2f}" and hover[i, j, 2] == f"{pattern[i, j]:.4f}"
    assert big["layout"]["plot_bgcolor"] == MASKED                         # blank cells show grey


def line_weights(figure) -> list[tuple[dict, list[float]]]:
    """Each line trace of the "Who looks at whom" figure with the exact weights of its lines (from the hover)."""
    return [(t, [float(h.rsplit("weight ", 1)[1]) for h in t["hovertext"][::4]]) for t in figure["data"][:-2]]


@pytest.mark.parametrize("layer, head, query", [(0, 1, 6), (1, 2, 9), (0, 0, 3)])
def test_line_width_and_opacity_are_proportional_to_the_weight(layer, head, query):
    at = show(open_page("attention", text=PRONOUN, layer=layer, head=head, token=query), "Who looks at whom")
    pattern = default_trace()["pattern", layer][0, head].double().numpy()
    lines = line_weights(figure_titled(at, "Who looks at whom"))
    drawn = sorted(w for _, weights in lines for w in weights)
    assert drawn == pytest.approx(sorted(float(w) for w in np.tril(pattern)[np.tril(pattern) >= 0.01]), abs=1e-4)
    for chosen in (True, False):
        group = [(t, w) for t, weights in lines for w in weights if (t["line"]["color"] == attention.SELECTED) == chosen]
        assert group
        # the same ratio for every line (up to half the 0.01 step lines are grouped by, and the hover's rounding)
        for t, w in group:
            assert t["line"]["width"] == pytest.approx(attention.LINE_WIDTH[chosen] * w, abs=attention.LINE_WIDTH[chosen] * 0.0051)
            assert t["opacity"] == pytest.approx(attention.LINE_OPACITY[chosen] * w, abs=attention.LINE_OPACITY[chosen] * 0.0051)
            assert t["opacity"] <= 1
        small, large = min(group, key=lambda g: g[1]), max(group, key=lambda g: g[1])
        if large[1] >= 5 * small[1]:            # a weight 5 times another is drawn at least 3 times as wide
            assert large[0]["line"]["width"] >= 3 * small[0]["line"]["width"]
    text = page_text(at)
    assert "width and opacity are proportional to its weight" in text


def test_the_chosen_querys_lines_are_orange_drawn_on_top_and_bolder_for_the_same_weight():
    at = show(open_page("attention", text=PRONOUN, layer=0, head=1, token=6), "Who looks at whom")
    lines = figure_titled(at, "Who looks at whom")["data"][:-2]
    assert {t["line"]["color"] for t in lines} == {attention.SELECTED, "#4477AA"}
    assert lines[-1]["line"]["color"] == attention.SELECTED                          # drawn on top
    for w in (0.05, 0.5, 1.0):
        assert attention.line_width(w, True) > attention.line_width(w, False) and attention.line_opacity(w, True) > attention.line_opacity(w, False)


def test_the_grid_labels_its_tokens_on_the_outer_panels_and_outlines_the_chosen_head():
    at = show(open_page("attention", text=PRONOUN, layer=1, head=2), "Every head")
    grid = figure_titled(at, "Every head in every layer")
    layout = grid["layout"]
    names = [f"{i} {t}" for i, t in enumerate(PRONOUN.split())]
    for n in range(8):                                                       # 2 rows x 4 columns
        axis = "" if n == 0 else str(n + 1)
        x, y = layout[f"xaxis{axis}"], layout[f"yaxis{axis}"]
        assert x.get("showticklabels") == (n >= 4) and y.get("showticklabels") == (n % 4 == 0)
        assert list(x["ticktext"]) == names and list(y["ticktext"]) == names
    (outline,) = layout["shapes"]
    chosen = 1 * 4 + 2                                                       # layer 1 head 2: panel 7
    assert [outline["x0"], outline["x1"]] == list(layout[f"xaxis{chosen + 1}"]["domain"])
    assert [outline["y0"], outline["y1"]] == list(layout[f"yaxis{chosen + 1}"]["domain"])
    assert layout["annotations"][chosen]["text"] == "<b>layer 1 head 2 (chosen)</b>"
    at.selectbox(key="head").set_value(0).run()                             # another head: the outline moves
    layout = figure_titled(at, "Every head in every layer")["layout"]
    assert [layout["shapes"][0]["x0"], layout["shapes"][0]["y0"]] == [layout["xaxis5"]["domain"][0],
                                                                      layout["yaxis5"]["domain"][0]]


def test_on_a_phone_the_chosen_panels_title_is_its_name_alone():
    """A phone's panels are about 55 px wide: "L1 H2 (chosen)" ran into the next panel's title (measured in Chromium's
    headless shell; 2 px apart in the full browser). The orange outline and bold orange title mark the chosen one."""
    prepared = prepare_text(tinytales().tokenizer, PRONOUN, 32)
    for phone, title in ((True, "<b>L1 H2</b>"), (False, "<b>layer 1 head 2 (chosen)</b>")):
        v = View(name="tinytales", bundle=tinytales(), text=PRONOUN, presenter=False, prepared=prepared,
                 trace=default_trace(), phone=phone)
        layout = attention.all_heads_figure(v, v.trace, layer=1, head=2).to_dict()["layout"]
        texts = [a["text"] for a in layout["annotations"]]
        assert texts[1 * 4 + 2] == title and sum("<b>" in t for t in texts) == 1
        assert texts[0] == ("L0 H0" if phone else "layer 0 head 0")
        assert layout["shapes"][0]["line"]["color"] == layout["annotations"][1 * 4 + 2]["font"]["color"]


def test_a_query_row_read_in_words_and_the_math_behind_one_weight():
    at = show(open_page("attention", text=PRONOUN, layer=1, head=2, token=7), "Who looks at whom")
    tr = default_trace()
    row = tr["blocks.1.attn.pattern"][0, 2, 7]
    top = row[:8].topk(3)
    tokens = PRONOUN.split()
    first = tokens[int(top.indices[0])]
    text = page_text(at)
    assert f"“it” puts **{float(top.values[0]):.2f}** of its attention on “{first}”" in text
    assert f"**{float(top.values[1]):.2f}** on" in text and f"**{float(top.values[2]):.2f}** on" in text
    # the math panel starts at the most attended key and matches the heatmaps
    q, k = tr["blocks.1.attn.q"][0, 2, 7].double(), tr["blocks.1.attn.k"][0, 2, int(top.indices[0])].double()
    dot = float(q @ k)
    assert f"= **{dot:.4f}** (the raw score heatmap shows {dot:.4f})" in text
    assert f"({float(q[0]):.3f})·({float(k[0]):.3f})" in text and "(12 more terms)" in text
    assert f"{dot:.4f} / √16 = {dot:.4f} / 4 = **{dot / 4:.4f}**" in text
    assert f"the pattern holds **{float(row[int(top.indices[0])]):.4f}**" in text
    at.selectbox(key="attention_math_key").set_value(9).run()                 # a key after the query
    assert "comes after “it”, so its score becomes −∞ and its weight is exactly 0" in page_text(at)


def test_what_if_shows_the_real_change_in_the_next_token_probabilities():
    at = show(open_page("attention", text=PRONOUN, layer=1, head=2, token=6), "What if?")   # the word after "because"
    model, tr = tinytales().model, default_trace()
    ids = tinytales().tokenizer.encode(PRONOUN)
    vocab = tinytales().tokenizer.vocab
    for choice, experiment in [("chosen", whatif.knock_out_head(1, 2)), ("scaling", whatif.REMOVE_SCALING),
                               ("mask", whatif.LIFT_MASK)]:
        at.radio(key="attention_whatif").set_value(choice).run()
        assert not at.exception
        changes, causal = experiment.edits(model.cfg), experiment.causal
        after = torch.softmax(model.run(ids, edits=changes, causal=causal)["logits"][0, 6], -1)
        before = torch.softmax(tr["logits"][0, 6], -1)
        figure = figure_titled(at, "Next-token probabilities: before and after")
        shown = {token_label(t): i for i, t in enumerate(vocab)}              # bar labels: "." shows as ⟨.⟩
        tokens = [shown[t] for t in figure["data"][0]["x"]]
        np.testing.assert_allclose(decode(figure["data"][1]["y"]), [float(after[i]) for i in tokens], rtol=1e-5)
        np.testing.assert_allclose(decode(figure["data"][0]["y"]), [float(before[i]) for i in tokens], rtol=1e-5)
        best = vocab[int(after.argmax())]
        text = page_text(at)
        assert f"top guess for the word after “because” is “{vocab[int(before.argmax())]}”" in text
        said = f"“{best}”, now at **{float(after.max()):.2f}**" if best == vocab[int(before.argmax())] \
            else f"it becomes “{best}” at **{float(after.max()):.2f}**"
        assert said in text
    assert "including the very word it is meant to predict" in page_text(at)
    assert "Lift the causal mask" == at.radio(key="attention_whatif").options[-1]


def test_changing_layer_and_head_redraws_from_the_trace():
    at = show(open_page("attention", text=PRONOUN), "Who looks at whom")
    at.selectbox(key="layer").set_value(1).run()
    at.selectbox(key="head").set_value(3).run()
    assert not at.exception
    masked_as_zero = np.nan_to_num(z_of(figure_titled(at, "Attention pattern of layer 1 head 3")))
    np.testing.assert_allclose(masked_as_zero,
                               default_trace()["blocks.1.attn.pattern"][0, 3].numpy(), rtol=1e-6)
    show(at, "What if?")
    assert at.radio(key="attention_whatif").options[0].startswith("Knock out head 3 of layer 1")


def test_presenter_mode_hides_the_key_picker_and_keeps_the_figures():
    at = open_page("attention", text=PRONOUN, presenter=1, token=9)
    assert not at.exception
    for section, charts in zip(attention.SECTIONS, (1, 4, 2, 1, 1)):
        show(at, section)
        assert not at.exception and len(plotly_figures(at)) == charts
        assert at.session_state["section_attention"] == section
        if section == attention.SECTIONS[0]:        # large panel titles go on two lines so they do not overlap
            titles = [a["text"] for a in plotly_figures(at)[0]["layout"]["annotations"]]
            assert titles == ["Q:<br>the questions", "K:<br>the labels", "V:<br>the answers"]
        if section == "Who looks at whom":
            assert "attention_math_key" not in {s.key for s in at.selectbox}
            assert "“tired” puts" in page_text(at)


def test_strange_sentences_one_token_full_context_and_html_tokens():
    at = show(open_page("attention", text=PRONOUN), "Who looks at whom")
    type_text(at, "the")
    assert not at.exception
    assert "It is the first token, so it can only look at itself." in page_text(at)
    assert z_of(figure_titled(at, "Attention pattern of layer 0 head 0")).tolist() == [[1.0]]
    show(type_text(at, "the cat sat " * 12), "The four steps")     # 36 words: the last 32 are kept
    assert not at.exception
    masked = figure_titled(at, "3. Causal mask applied")
    assert z_of(masked).shape == (32, 32)
    assert masked["data"][0]["text"][0][1] == "−∞" and masked["data"][0]["text"][1][0] == ""   # no crowded numbers
    show(type_text(at, "<b>bold</b> the cat"), "Who looks at whom")
    assert not at.exception
    lines = figure_titled(at, "Who looks at whom")
    queries = list(lines["data"][-2]["text"])
    assert "0 &lt;unk&gt;" in queries and not any("<b>" in t for t in queries)   # the model read <unk>
    assert "<b>" not in page_text(at)


# --- the builders, on models of other configurations --------------------------------------------


def test_builders_work_for_other_shapes_and_post_norm():
    v = tiny_view(norm_position="post", norm="rms", pos="learned")
    figs = attention.step_figures(v, v.trace, 0, 2)
    assert figs[1].layout.title.text == "2. Divided by √4"
    np.testing.assert_allclose(figs[0].data[0].z, v.trace["blocks.0.attn.scores"][0, 2].numpy() * 2, rtol=1e-6)
    grid = attention.all_heads_figure(v, v.trace)
    assert [t.name for t in grid.data] == ["layer 0 head 0", "layer 0 head 1", "layer 0 head 2"]
    lines = attention.math_lines(v, v.trace, 0, 1, 3, 1)
    weight = float(v.trace["blocks.0.attn.pattern"][0, 1, 3, 1])
    assert f"the pattern holds **{weight:.4f}**" in lines[-1]
    assert lines[-1].count(f"**{weight:.4f}**") == 2                      # our softmax = the model's
    assert "more terms" not in lines[2]                                    # K = 4: every term is shown


def test_too_many_heads_shows_only_the_chosen_layer():
    v = tiny_view(d_model=32, n_heads=32, n_layers=2)
    grid = attention.all_heads_figure(v, v.trace, layer=1)
    assert grid.layout.title.text == "Every head in layer 1"
    assert len(grid.data) == 32 and grid.data[0].name == "layer 1 head 0"


def test_lines_leave_out_tiny_weights_and_read_row_names_repeated_words():
    v = tiny_view(text="a b a b")
    pattern = v.trace["blocks.0.attn.pattern"][0, 0].numpy()
    fig = attention.lines_figure(v, v.trace, 0, 0, 3, min_weight=0.3)
    segments = sum(len(t.y) // 4 for t in fig.data[:-2])
    assert segments == int((np.tril(pattern) >= 0.3).sum())
    text = attention.read_row(v, v.trace, 0, 0, 3)
    assert "“b” (position 3) puts" in text
    assert math.isclose(sum(w for _, w in attention.top_keys(v.trace, 0, 0, 3, k=4)), 1.0, rel_tol=1e-5)


def test_read_row_never_names_a_key_with_a_weight_written_0_00():
    """read_row names the three keys a query attends to most, but leaves out any whose weight rounds to 0.00 (it
    once said "0.00 on “it”") and then says that every other key gets less than 0.005: on every head and query of
    tinytales reading the default sentence, some of whose rows are that sharp."""
    prepared = prepare_text(tinytales().tokenizer, PRONOUN, 32)
    v = View(name="tinytales", bundle=tinytales(), text=PRONOUN, presenter=False, prepared=prepared,
             trace=default_trace())
    cfg, cut = tinytales().model.cfg, 0
    for layer in range(cfg.n_layers):
        for head in range(cfg.n_heads):
            for query in range(len(prepared.ids)):
                row = default_trace()[f"blocks.{layer}.attn.pattern"][0, head, query, : query + 1]
                text = attention.read_row(v, v.trace, layer, head, query)
                weights = re.findall(r"\*\*([\d.]+)\*\*", text)
                top = row.topk(min(3, query + 1)).values.tolist()
                listed = [top[0]] + [w for w in top[1:] if w >= 0.005]
                assert [float(w) for w in weights] == pytest.approx(listed, abs=0.005) and "0.00 on" not in text
                said = "; every other key gets less than 0.005." in text
                assert said == (len(listed) < len(top))
                if said:
                    assert sorted(row.tolist())[-len(listed) - 1] < 0.005
                cut += said
    assert cut > 0


def test_a_new_sentence_builds_only_the_open_sections_head_figure(monkeypatch):
    built = []

    def counting(which):
        original = attention.HEAD_FIGURES[which]

        def build(*args):
            built.append(which)
            return original(*args)
        return build

    for which in list(attention.HEAD_FIGURES):
        monkeypatch.setitem(attention.HEAD_FIGURES, which, counting(which))
    at = open_page("attention", text=PRONOUN)
    assert not at.exception and built == ["qkv"]          # the default section: Q, K and V only
    type_text(at, "the dog ran to the old tree")
    assert built == ["qkv", "qkv"]
    show(at, "The four steps")
    assert built == ["qkv", "qkv", "steps"] and len(plotly_figures(at)) == 4


# --- the first what-if a student sees -------------------------------------------------------------


WHATIF_SENTENCES = [("tinytales", DEFAULT_SENTENCE), ("tinytales", "the dog chased the cat because it was hungry"),
                    ("tinytales", "the cats sat on the mats because they"),
                    ("roses", "roses are red violets are blue"), ("roses", "roses are red violets are blue sugar is sweet"),
                    ("roses", "sugar is sweet and so are you")]


def test_the_default_sentences_first_what_if_makes_a_visible_change():
    """The first what-if a student sees, on the sentence the app opens with, moves a word's probability visibly."""
    at = show(open_page("attention"), "What if?")
    ids = tinytales().tokenizer.encode(DEFAULT_SENTENCE)
    model, last = tinytales().model, len(ids) - 1
    p0 = torch.softmax(model.run(ids)["logits"][0, last].double(), -1)
    largest = max(float((torch.softmax(model.run(ids, edits=whatif.knock_out_head(l, h).edits(model.cfg))["logits"][0, last]
                                       .double(), -1) - p0).abs().max())
                  for l in range(model.cfg.n_layers) for h in range(model.cfg.n_heads))
    assert largest >= whatif.VISIBLE
    assert stated_size(page_text(at)) == f"{largest:.2f}"


def unescaped(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def stated_size(text: str) -> str:
    """The largest change as the page states it: '0.39', or the small change's sentence."""
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
def test_the_first_what_if_knocks_out_a_head_that_changes_the_forecast_or_says_none_does(name, text):
    at = show(open_page("attention", model=name, text=text), "What if?")
    assert not at.exception
    bundle = load_bundled(name)
    model, vocab = bundle.model, bundle.tokenizer.vocab
    ids = bundle.tokenizer.encode(text)
    last = len(ids) - 1
    assert at.session_state["token"] == last                       # the page opens on the last token
    p0 = torch.softmax(model.run(ids)["logits"][0].double(), -1)    # (T, V)
    heads = [(l, h) for l in range(model.cfg.n_layers) for h in range(model.cfg.n_heads)]
    change = {}                                                     # (layer, head) -> largest change after each position
    for l, h in heads:
        p1 = torch.softmax(model.run(ids, edits=whatif.knock_out_head(l, h).edits(model.cfg))["logits"][0].double(), -1)
        change[l, h] = (p1 - p0).abs().amax(-1)
    best = max(heads, key=lambda lh: float(change[lh][last]))
    visible = float(change[best][last]) >= whatif.VISIBLE
    shown = best if visible and float(change[0, 0][last]) < whatif.VISIBLE else (0, 0)  # the pickers' head, or the best
    radio = at.radio(key="attention_whatif")
    assert radio.value == ("chosen" if shown == (0, 0) else "most")
    most = [o for o in radio.options if o.endswith(", the head that matters most here")]
    assert most == ([f"Knock out head {best[1]} of layer {best[0]}, the head that matters most here"] if visible else [])
    assert len(radio.options) == 3 + (visible and best != (0, 0))           # the best is offered when it shows
    text_ = page_text(at)
    assert f"With head {shown[1]} of layer {shown[0]} knocked out, it " in text_
    largest = float(change[shown][last])
    assert stated_size(text_) == expected_size(largest)
    assert largest >= whatif.VISIBLE or "That changes little" in text_
    if float(change[best][last]) >= whatif.VISIBLE:
        return
    # even the best head changes this forecast little: the page says so, and offers the forecast where one does
    assert (f"No single head decides the forecast after “{vocab[ids[last]]}” (position {last}): knocking out any one "
            f"of all {len(heads)} heads moves no word's probability by") in unescaped(text_)
    where = max(((lh, t) for lh in heads for t in range(len(ids))), key=lambda x: float(change[x[0]][x[1]]))
    (l, h), t = where
    anywhere = float(change[l, h][t])
    assert anywhere >= whatif.VISIBLE                                     # true of both models on every sentence here
    assert (f"knocking out head {h} of layer {l} changes the forecast after “{vocab[ids[t]]}” (position {t}) by "
            f"**{anywhere:.2f}**") in unescaped(text_)
    at.button(key="attention_whatif_look").click().run()
    assert at.session_state["token"] == t
    shown = (0, 0) if float(change[0, 0][t]) >= whatif.VISIBLE else (l, h)          # (l, h) is the best here
    assert f"With head {shown[1]} of layer {shown[0]} knocked out, it " in page_text(at)
    assert stated_size(page_text(at)) == f"{float(change[shown][t]):.2f}"      # now the change is there to see


@pytest.mark.parametrize("largest", [0.0, 0.0004, 0.0005, 0.0012, 0.0031, 0.0499, 0.05, 0.387])
def test_a_small_change_is_stated_as_a_true_bound_and_a_visible_one_as_its_value(largest):
    said = whatif.size_words(largest)
    number = float(re.search(r"\*\*([\d.]+)\*\*", said)[1])
    if largest >= whatif.VISIBLE:
        assert said == f"The largest change of any word's probability is **{largest:.2f}**."
    else:
        assert said.startswith("That changes little: no word's probability moves by")
        assert number >= largest and number - largest <= 0.001 and number > 0      # a bound, never a bare 0.00
