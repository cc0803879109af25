"""What a neuron responds to and writes (model/neurons.py), and the features page's figures and sentences
(explorer/steps/features.py): every number recomputed from the model's own forward pass, on the bundled models, a lab
model and random GPT-2- and Llama-shaped ones."""
import functools
import re
from dataclasses import replace

import numpy as np
import pytest
import torch

from claims_support import lab_bundle, view_of
from explorer.numbers import percent, percents
from explorer.plot import token_label
from explorer.steps import features
from model import neurons
from model.checkpoint import Bundle
from model.presets import corpus_texts
from model.steering import steered_continuation, steering_edit
from model.tokenizers import START, load_tokenizer_json
from test_steering import PROMPTS, bundle_of


@functools.cache
def view(name: str):
    return view_of(bundle_of(name), PROMPTS[name], name)


@functools.cache
def index_of(name: str, tokens: int | None = None) -> neurons.NeuronIndex:
    """The index over the model's own text (its first `tokens` tokens, to keep a test quick)."""
    bundle = bundle_of(name)
    ids = neurons.text_ids(bundle, neurons.own_text(bundle))[:tokens]
    return neurons.index_neurons(bundle.model, ids, neurons.window_prefix(bundle))


def brute_force(bundle, index: neurons.NeuronIndex) -> dict[int, torch.Tensor]:
    """Each layer's activations (n, F) at every position of the text, each read by the window that records it, with
    plain model.run (one window at a time)."""
    out = {layer: torch.full((len(index.ids), bundle.model.cfg.d_ff), float("nan")) for layer in
           range(bundle.model.cfg.n_layers)}
    position = 0
    while position < len(index.ids):
        start, stop = index.window_of(position)
        trace = bundle.model.run(list(index.prefix) + index.ids[start:stop].tolist())
        for layer, acts in out.items():
            acts[position:stop] = trace[f"blocks.{layer}.mlp.post"][0, len(index.prefix) + position - start:]
        position = stop
    return out


# --- the text each model's neurons are read over ----------------------------------------------------------------

def test_each_model_reads_its_own_text_and_a_model_trained_elsewhere_the_bundled_english_text():
    assert neurons.own_text(bundle_of("tinytales")).text == corpus_texts("tinytales")[0]
    assert neurons.own_text(bundle_of("roses")).text == corpus_texts("roses")[0]
    lab = lab_bundle()
    assert neurons.own_text(Bundle(lab.model, lab.tokenizer, {"corpus": "roses"})).name == "the roses poem"
    mine = Bundle(lab.model, lab.tokenizer, {"corpus": "text"})
    assert neurons.own_text(mine, "roses are red").text == "roses are red"
    with pytest.raises(ValueError, match="your own text in the training lab"):
        neurons.own_text(mine)
    with pytest.raises(ValueError, match="does not say which text it learned from"):
        neurons.own_text(lab)                            # a word tokenizer, no corpus: nothing it could read
    for name in ("gpt2-shaped", "llama-shaped"):
        text = neurons.own_text(bundle_of(name))
        assert text.name == "Pride and Prejudice" and "public domain" in text.source
        assert text.text.startswith("PRIDE AND PREJUDICE\n\nBy Jane Austen\n\nChapter 1\n\nIt is a truth")


def test_the_bundled_english_text_is_over_20000_gpt2_tokens_and_names_its_source_and_licence(tmp_path):
    from gpt2_support import real_gpt2_tokenizer_json
    whole = (neurons.TEXTS_DIR / "pride_and_prejudice.txt").read_text(encoding="utf-8")
    header = whole.split(neurons.HEADER_END)[0]
    assert all(words in header for words in ("Jane Austen", "public domain", "r-cran-janeaustenr", "MIT",
                                             "Project Gutenberg"))
    text = neurons.bundled_text("pride_and_prejudice.txt")
    assert neurons.HEADER_END not in text and text.isascii()
    assert [int(n) for n in re.findall(r"^Chapter (\d+)$", text, re.M)] == list(range(1, 13))
    gpt2 = load_tokenizer_json(real_gpt2_tokenizer_json(tmp_path / "tokenizer.json"))
    assert len(gpt2.encode(text)) == 23_342 >= 20_000
    assert neurons.window_prefix(bundle_of("gpt2-shaped")) == (gpt2.vocab.index(START),) == (50_256,)
    assert neurons.window_prefix(bundle_of("llama-shaped")) == (0,)
    assert neurons.window_prefix(bundle_of("tinytales")) == ()


# --- the one pass: every neuron's strongest activations ---------------------------------------------------------------

@pytest.mark.parametrize("name, tokens", [("roses", None), ("tinytales", 2_000), ("gpt2-shaped", 700),
                                          ("llama-shaped", 700)])
def test_every_neurons_strongest_activations_are_what_the_model_computes_window_by_window(name, tokens):
    bundle, index = bundle_of(name), index_of(name, tokens)
    for layer, acts in brute_force(bundle, index).items():
        assert not acts.isnan().any()                                        # every position recorded once
        top = acts.topk(index.values.shape[-1], dim=0).values.T              # (F, k)
        assert torch.allclose(index.values[layer], top, atol=1e-5, rtol=1e-5)
        found = acts.gather(0, index.positions[layer].T).T                   # (F, k): the value at each position kept
        assert torch.allclose(found, index.values[layer], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name, tokens", [("tinytales", 2_000), ("gpt2-shaped", 700)])
def test_a_contexts_tokens_and_shading_are_the_window_the_model_read_and_its_activations_in_that_reading(name, tokens):
    bundle, index = bundle_of(name), index_of(name, tokens)
    P = len(index.prefix)
    for layer in range(bundle.model.cfg.n_layers):
        for neuron in range(0, bundle.model.cfg.d_ff, 9):
            for c in index.contexts(layer, neuron, 4):
                start, stop = index.window_of(c.position)
                first = c.position - c.peak
                assert start <= first and first + len(c.ids) <= stop            # never text the model did not read
                assert c.ids == index.ids[first:first + len(c.ids)].tolist()
                assert c.peak == min(neurons.BEFORE, c.position - start) and len(c.ids) - c.peak - 1 <= neurons.AFTER
                window = bundle.model.run(list(index.prefix) + index.ids[start:stop].tolist())
                truth = window[f"blocks.{layer}.mlp.post"][0, P + first - start:P + first - start + len(c.ids), neuron]
                assert c.value == pytest.approx(float(truth[c.peak]), abs=1e-5)
                assert torch.allclose(torch.tensor(c.activations), truth, rtol=2e-3, atol=2e-3)   # float16 kept


def test_tinytales_whole_text_in_one_pass_and_the_index_kept_on_disk_gives_the_same_contexts(tmp_path):
    index = index_of("tinytales")
    assert len(index.ids) == 151_430 and index.values.shape == (2, 256, neurons.KEPT)
    assert index.overlap == neurons.BEFORE and index.width == 32
    index.save(tmp_path / "index.safetensors")
    again = neurons.load_index(tmp_path / "index.safetensors")
    assert again.contexts(1, 4) == index.contexts(1, 4) and again.window_of(100_000) == index.window_of(100_000)


def test_an_exactly_repeated_context_is_shown_once_with_its_count():
    table = features.contexts_table(view("roses"), index_of("roses"), 1, 62)
    assert len(table) == len(set(map(tuple, table.tokens)))                  # the poem repeats: each context once
    assert int(table.repeats.sum()) == neurons.KEPT


def test_mlp_activations_read_no_further_than_needed_and_equal_the_trace():
    model, ids = bundle_of("llama-shaped").model, bundle_of("llama-shaped").tokenizer.encode("the quick brown fox")
    trace = model.run(ids)
    acts = neurons.mlp_activations(model, [ids], [0])
    assert list(acts) == [0] and torch.allclose(acts[0], trace["blocks.0.mlp.post"], atol=1e-6)


# --- what a neuron writes -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["tinytales", "gpt2-shaped", "llama-shaped"])
def test_what_a_neuron_writes_is_its_output_column_through_the_final_norms_scale_and_the_unembedding(name):
    model = bundle_of(name).model
    state = model.state_dict()
    w = state["blocks.1.mlp.W_out.weight"][:, 3]
    if name == "llama-shaped":                                              # RMSNorm: only scales
        through = w * state["final_norm.weight"]
    else:                                                                   # LayerNorm: centres, then scales
        through = (w - w.mean()) * state["final_norm.weight"]
    assert torch.allclose(neurons.neuron_logits(model, 1, 3), state["unembed.weight"] @ through, atol=1e-5)
    table = features.output_tokens(view(name), 1, 3, k=5)
    logits = neurons.neuron_logits(model, 1, 3)
    assert table[table.pushes == "up"].id.tolist() == logits.topk(5).indices.tolist()
    assert table[table.pushes == "down"]["logit change"].tolist() == pytest.approx((-logits).topk(5).values.neg().tolist())


def test_a_post_norm_models_neuron_writes_straight_through_the_unembedding():
    lab = lab_bundle(norm="layer", norm_position="post")
    w = lab.model.blocks[0].mlp.W_out.weight[:, 2]
    assert torch.allclose(neurons.neuron_logits(lab.model, 0, 2), lab.model.unembed.weight @ w)
    with pytest.raises(ValueError, match="no layer 2"):
        neurons.neuron_logits(lab.model, 2, 0)


# --- the page's tables, figures and sentences ----------------------------------------------------------------------

def test_the_contexts_figure_shades_each_token_by_its_activation_with_the_peak_in_one_column():
    v, index = view("tinytales"), index_of("tinytales", 2_000)
    text = features.own_text(v)
    table = features.contexts_table(v, index, 1, 4)
    fig = features.contexts_figure(v, table, text, 1, 4)
    z, words = np.array(fig.data[0].z, dtype=float), np.array(fig.data[0].text)
    peak = list(fig.data[0].x).index(0)
    assert z[:, peak].tolist() == pytest.approx(table.activation.tolist())
    for r, row in enumerate(table.itertuples()):
        cells = [c for c in range(z.shape[1]) if np.isfinite(z[r, c])]
        assert z[r, cells].tolist() == pytest.approx(row.activations, abs=1e-6)
        assert [str(w) for w in words[r, cells]] == [token_label(features._short(t)) for t in row.tokens]
    assert "%{z:.4f}" in fig.data[0].hovertemplate
    assert fig.data[0].zmin < 0 < fig.data[0].zmax                          # GELU: white at 0, signed colours
    phone = features.contexts_figure(replace(v, phone=True), table, text, 1, 4)
    before, after = features.AROUND["phone"]
    assert list(phone.data[0].x) == list(range(-before, after + 1)) and phone.layout.meta["phone"]
    projector = features.contexts_figure(replace(v, presenter=True), table, text, 1, 4)
    assert projector.layout.font.size == 20 and len(projector.data[0].x) < len(fig.data[0].x)


def test_a_relu_models_contexts_are_coloured_from_0():
    lab = lab_bundle(activation="relu")
    bundle = Bundle(lab.model, lab.tokenizer, {"corpus": "roses"})
    v = view_of(bundle, "roses are red")
    index = neurons.index_neurons(bundle.model, neurons.text_ids(bundle, neurons.own_text(bundle)))
    fig = features.contexts_figure(v, features.contexts_table(v, index, 0, 0), neurons.own_text(bundle), 0, 0)
    assert fig.data[0].zmin == 0 and fig.data[0].colorscale[0][1] == "#440154"          # Viridis, from 0


def test_the_contexts_sentence_says_what_the_whole_text_makes_the_neuron_do():
    for name, neuron in (("tinytales", 4), ("tinytales", 100), ("roses", 62)):
        v, index = view(name), index_of(name, 2_000 if name == "tinytales" else None)
        text = features.own_text(v)
        table = features.contexts_table(v, index, 1, neuron)
        said = features.contexts_sentence(v, index, table, text, 1, neuron)
        every = brute_force(bundle_of(name), index)[1][:, neuron]
        strongest = int(every.argmax())
        token = bundle_of(name).tokenizer.vocab[int(index.ids[strongest])]
        assert said.startswith(f"Over *{text.name}* ({len(index.ids):,} tokens), neuron {neuron} of layer 1 fires "
                               f"most on “{token}”, at {float(every.max()):.2f}, in “")
        peaks = [bundle_of(name).tokenizer.vocab[int(index.ids[p])] for p in table.position]
        assert peaks == table.token.tolist() and table.activation.is_monotonic_decreasing
        if len(set(peaks)) == 1:
            assert said.endswith(f"All of its {int(table.repeats.sum())} strongest places peak on “{token}”.")
        else:
            assert f"strongest places peak on {len(set(peaks))} different tokens: “{peaks[0]}” (" in said


@pytest.mark.parametrize("name", ["tinytales", "gpt2-shaped", "llama-shaped"])
def test_where_it_fires_on_the_sentence_is_read_from_the_trace_and_compared_with_the_text(name):
    v = view(name)
    index = index_of(name, 2_000 if name == "tinytales" else 700)
    text = features.own_text(v)
    neuron = features.busiest_neuron(v, 1)
    post = v.bundle.model.run(list(v.ids))["blocks.1.mlp.post"][0]
    assert neuron == int(post.max(0).values.argmax())
    acts = post[:, neuron]
    assert features.sentence_activations(v, 1, neuron) == pytest.approx(acts.tolist(), abs=1e-6)
    fig = features.sentence_figure(v, index, text, 1, neuron)
    assert list(fig.data[0].y) == pytest.approx(acts.tolist(), abs=1e-6)
    i, top = int(acts.argmax()), float(index.values[1, neuron, 0])
    said = features.fires_sentence(v, index, text, 1, neuron)
    assert said.startswith(f"In your sentence neuron {neuron} of layer 1 fires most on “")
    assert f"(token {i}), at {float(acts[i]):.2f}" in said
    if 0 < float(acts[i]) < top:
        assert said.endswith(f": {percent(float(acts[i]) / top)} of its strongest in *{text.name}* ({top:.2f}).")


def test_a_neuron_that_does_not_fire_on_the_sentence_is_said_so():
    v = view("tinytales")
    post = v.trace["blocks.0.mlp.post"][0]
    quiet = int(post.max(0).values.argmin())
    said = features.fires_sentence(v, None, None, 0, quiet)
    assert said.startswith(f"In your sentence neuron {quiet} of layer 0 does not fire: its largest activation is "
                           f"{float(post[:, quiet].max()):.2f}".replace("-", "−"))


def test_the_output_sentence_and_figure_give_the_neurons_largest_push_each_way():
    v = view("tinytales")
    table = features.output_tokens(v, 1, 4)
    logits = neurons.neuron_logits(v.bundle.model, 1, 4)
    vocab = v.bundle.tokenizer.vocab
    said = features.output_sentence(v, table, 1, 4)
    assert (f"raises the score of “{vocab[int(logits.argmax())]}” most (+{float(logits.max()):.2f}) and lowers "
            f"“{vocab[int(logits.argmin())]}” most (−{-float(logits.min()):.2f})") in said
    fig = features.output_figure(v, table, 1, 4)
    assert [list(bar.x) for bar in fig.data] == [pytest.approx(logits.topk(10).values.tolist()),
                                                 pytest.approx((-logits).topk(10).values.neg().tolist())]
    assert [bar.marker.color for bar in fig.data] == [features.UP, features.DOWN]


def test_the_index_is_built_through_the_memo_once_per_model_in_the_app():
    v = view("roses")
    index = features.neuron_index(v, features.own_text(v))
    assert torch.equal(index.values, index_of("roses").values)


def test_a_neuron_the_model_lacks_is_refused_in_words():
    v, index = view("roses"), index_of("roses")
    with pytest.raises(ValueError, match="no neuron 64"):
        features.contexts_table(v, index, 1, 64)
    with pytest.raises(ValueError, match="no layer 7"):
        features.output_tokens(v, 7, 0)


# --- the steering view ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["tinytales", "roses", "gpt2-shaped", "llama-shaped"])
def test_the_steering_sentence_table_and_figures_are_the_two_runs_numbers(name):
    v = view(name)
    source = features.neuron_source(v, 1, features.busiest_neuron(v, 1))
    result = features.steer(v, source, 1, 8.0, n_tokens=12)
    assert result.problem is None
    edits = steering_edit(1, source.direction, 8.0)
    again = steered_continuation(v.bundle.model, list(v.ids), edits, 12)
    tok = v.bundle.tokenizer
    table = features.continuation_table(v, result)
    assert table["with steering"].tolist() == [tok.vocab[t] for t in again.steered.tokens]
    assert table["probability with"].tolist() == pytest.approx(again.steered.probs, abs=1e-6)
    assert table["without"].tolist() == [tok.vocab[t] for t in again.plain.tokens]
    fig = features.continuation_figure(v, result)
    np.testing.assert_allclose(np.array(fig.data[0].z, dtype=float), [again.plain.probs, again.steered.probs],
                               atol=1e-6)
    before = v.bundle.model.run(list(v.ids))["logits"][0, -1].softmax(-1)
    after = v.bundle.model.run(list(v.ids), edits=edits)["logits"][0, -1].softmax(-1)
    riser = int((after - before).argmax())
    said = features.steering_sentence(v, result)
    start = f"Steered with neuron {source.label.split()[1]} of layer 1 at strength 8 after layer 1, the model "
    assert said.startswith(start)
    old, new = percents(float(before[riser]), float(after[riser]))
    assert f"“{tok.vocab[riser]}” rose from {old} to {new}" in said.replace("\\", "")
    if again.steered.tokens != again.plain.tokens:
        assert f"instead of “{tok.decode(again.plain.tokens).strip()[:20]}".replace("\\", "") in said.replace("\\", "")
    shift = features.shift_figure(v, result)
    assert list(shift.data[0].y)[0] == pytest.approx(100 * float((after - before).max()), abs=1e-4)


def test_the_steering_view_turns_bad_input_into_a_message_and_keeps_working():
    v = view("tinytales")
    source = features.neuron_source(v, 1, 4)
    for strength in (1e9, float("nan")):
        assert "too large to mean anything" in features.steer(v, source, 1, strength).problem
    assert features.steering_sentence(v, features.steer(v, source, 1, 1e9)).startswith("a strength of 1e+09")
    assert "no layer 3" in features.steer(v, source, 3, 2.0).problem
    huge = features.Source("feature", "a huge vector", torch.full((64,), 1e30))
    assert "overflow" in features.steer(v, huge, 0, 1.0).problem
    wrong = features.Source("feature", "a GPT-2 feature", torch.ones(768))
    assert "768" in features.steer(v, wrong, 0, 1.0).problem
    with pytest.raises(ValueError, match="the first sentence of the difference is empty"):
        features.difference_source(v, "  ", "the cat", 0)
    with pytest.raises(ValueError, match="must be 64 numbers"):
        features.feature_source(v, torch.ones(10), "feature 3")
    assert features.steer(v, source, 1, 3.0).problem is None                 # and it still works


def test_strength_0_says_the_text_did_not_change():
    v = view("tinytales")
    result = features.steer(v, features.difference_source(v, "the cats", "the cat", 0), 0, 0.0)
    said = features.steering_sentence(v, result)
    assert "at strength 0 after layer 0, the model still writes “" in said and said.endswith(
        "at this strength it changes no word. No next-token probability moves.")
