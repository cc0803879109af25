"""Step 8, why this prediction: each sentence the page writes is recomputed here from the model, and each figure
and table carries the numbers of model/attribution.py and model/patching.py."""
import io

import numpy as np
import pandas as pd
import pytest
import torch

from claims_support import LAB, bundled_view, lab_view, view_of, bundled
from explorer.steps import why
from explorer.view import quote
from model import attribution
from model import patching
from explorer.view import View
from model.inputs import prepare_text
from model.seq2seq import greedy
from model.tokenizers import CharTokenizer, WordTokenizer

VIEWS = ["tinytales", "roses", "word, rms, pre-norm, gelu, 1 head",
         "word, no norm, relu, sinusoidal, 3 heads, embed_scale"]


# The sentence these tests study: "it" at position 7, and its ending "tired" at 9.
PRONOUN = "the cat sat on the mat because it was tired"


def pronoun_view() -> View:
    return view_of(bundled("tinytales"), PRONOUN)


def a_view(name):
    return bundled_view(name) if name in ("tinytales", "roses") else lab_view(name)


def signed(x):
    return f"{x:+.2f}".replace("-", "−")


@pytest.mark.parametrize("name", VIEWS)
@pytest.mark.parametrize("where", [-1, 2])
def test_the_attribution_story_states_the_models_own_numbers(name, where):
    view = a_view(name)
    trace, model = view.trace, view.bundle.model
    position = where % len(view.ids)
    for target in why.favourites(trace, position, 2):
        result = why.attribution(view, trace, position, target)
        story = why.attribution_story(view, trace, result, target)
        logit = float(trace["logits"][0, position, target])
        assert f"a score (logit) of **{logit:.2f}**" in story
        values = result.column(target)
        up = int(values.argmax())
        if values[up] > 0:
            assert f"{why.part_words(result.parts[up])}** ({signed(float(values[up]))})" in story
        kinds = {k: sum(float(v) for p, v in zip(result.parts, values) if p.kind == k) for k in why.KIND_WORDS}
        assert f"the attention heads {signed(kinds['head'])}" in story
        assert sum(kinds.values()) == pytest.approx(logit, abs=1e-4)
        # the strongest head and the source token it read most
        heads = [i for i, p in enumerate(result.parts) if p.kind == "head"]
        best = max(heads, key=lambda i: abs(float(values[i])))
        part = result.parts[best]
        sources = attribution.head_sources(model, trace, position, part.layer, part.head, target)
        j = int(sources.argmax()) if sources.sum() >= 0 else int(sources.argmin())
        assert (f"Layer {part.layer} head {part.head} adds {signed(float(values[best]))} to "
                f"{quote(view.bundle.tokenizer.vocab[target])}; most of it ({signed(float(sources[j]))}) comes from "
                f"{quote(view.tokens[j])} at position {j}.") in story


def test_one_heads_story_names_its_rank_and_source():
    view = pronoun_view()
    trace = view.trace
    target = why.favourites(trace, 7, 1)[0]
    result = why.attribution(view, trace, 7, target)
    values = result.column(target)
    heads = sorted([i for i, p in enumerate(result.parts) if p.kind == "head"], key=lambda i: -abs(float(values[i])))
    for rank, index in enumerate(heads, 1):
        part = result.parts[index]
        story = why.head_story(view, trace, result, part.layer, part.head, target)
        assert story.startswith(f"Layer {part.layer} head {part.head} adds {signed(float(values[index]))} to ")
        assert f"(number {rank} of {len(heads)} heads by size)" in story


def test_why_x_rather_than_y_names_the_gap_and_the_part_that_makes_most_of_it():
    view = pronoun_view()
    trace = view.trace
    vocab = view.bundle.tokenizer.vocab
    first, second = why.favourites(trace, 9, 2)
    for target, other in ((first, second), (second, first)):
        result = why.attribution(view, trace, 9, target, other)
        story = why.rather_story(view, result, target, other)
        logits = trace["logits"][0, 9]
        gap = float(logits[target] - logits[other])
        assert f"a difference of **{signed(gap)}**" in story
        difference = result.difference(target, other).numpy()
        best = int(difference.argmax()) if gap >= 0 else int(difference.argmin())
        assert f"**{why.part_words(result.parts[best])}** ({signed(float(difference[best]))})" in story
        ahead = first
        assert f"puts {quote(vocab[ahead])} furthest ahead" in story


def test_the_bar_chart_adds_up_to_the_logit_with_the_rest_in_one_bar():
    view = pronoun_view()
    trace = view.trace
    target = why.favourites(trace, 9, 1)[0]
    result = why.attribution(view, trace, 9, target)
    assert len(result.parts) == 14                   # tinytales: 2 embeddings, 8 heads, 2 MLPs, 2 biases
    everything = why.contribution_figure(result, result.column(target), "title", "total").data[0]
    assert len(everything.y) == 15                   # every part fits, and the total
    fig = why.contribution_figure(result, result.column(target), "title", "total", bars=6)
    bar = fig.data[0]
    x, y = np.asarray(bar.x, dtype=float), list(bar.y)
    assert len(y) == 6 + 2 and y[-1] == "total" and y[-2] == "the other 8 parts"
    assert x[:-1].sum() == pytest.approx(x[-1], abs=1e-9)
    assert x[-1] == pytest.approx(float(trace["logits"][0, 9, target]), abs=1e-4)
    assert list(np.abs(x[:6])) == sorted(np.abs(x[:6]), reverse=True)


def test_the_attribution_table_and_its_csv_hold_every_part():
    view = bundled_view("roses")
    trace = view.trace
    a, b = why.favourites(trace, 2, 2)
    result = why.attribution(view, trace, 2, a, b)
    table = why.attribution_table(view, result, a, b)
    assert len(table) == len(result.parts) == 2 + 2 * (2 + 1) + 2
    assert table.iloc[:, 4].sum() == pytest.approx(float(trace["logits"][0, 2, a]), abs=1e-4)
    assert np.allclose(table["difference"], table.iloc[:, 4] - table.iloc[:, 5])
    back = pd.read_csv(io.StringIO(table.to_csv(index=False)))
    assert list(back.part[:3]) == ["token embedding", "position embedding", "L0 H0"]


def test_a_typed_word_must_be_one_token_the_model_knows():
    words = WordTokenizer(["<unk>", "the", "cat", "sat"])
    assert why.target_token(words, " cat ") == 2
    with pytest.raises(ValueError, match="not in this model's vocabulary"):
        why.target_token(words, "zebra")
    with pytest.raises(ValueError, match="Type a word"):
        why.target_token(words, "  ")
    chars = CharTokenizer(["<unk>", "a", "b"])
    assert why.target_token(chars, "b") == 2
    with pytest.raises(ValueError, match="2 tokens for this model"):
        why.target_token(chars, "ab")


def test_the_routes_story_and_figure_follow_the_kept_edges():
    view = pronoun_view()
    edges = attribution.routes(view.bundle.model, view.trace, 9, 0.01)
    fig = why.routes_figure(view, edges, 9, 0.01)
    lines = [t for t in fig.data if t.mode == "lines"]
    assert len(lines) == len(edges)
    story = why.routes_story(view, edges, 9)
    assert story.startswith(f"{len(edges)} contributions pass the threshold")
    into = {}
    for e in edges:
        if e.kind == "head" and e.source != e.target:
            into[e.source] = into.get(e.source, 0) + e.weight
    best = max(into, key=into.get)
    assert (f"{len(into)} earlier tokens reach" if len(into) > 1 else "1 earlier token reaches") in story
    assert f"{quote(view.tokens[best])} (position {best}, weights adding up to {into[best]:.2f})" in story
    one = attribution.routes(view.bundle.model, view.trace, 7, 0.02)           # "it" reads one earlier token at 0.02
    assert len({e.source for e in one if e.kind == "head" and e.source != e.target}) == 1
    assert "Through attention heads, 1 earlier token reaches “it”" in why.routes_story(view, one, 7)
    strict = attribution.routes(view.bundle.model, view.trace, 9, 0.5)
    if not any(e.kind == "head" and e.source != e.target for e in strict):
        assert "none of them brings another token in" in why.routes_story(view, strict, 9)


def test_a_nodes_story_names_its_top_promoted_and_suppressed_tokens():
    view = pronoun_view()
    edges = attribution.routes(view.bundle.model, view.trace, 9, 0.01)
    nodes = why.route_nodes(edges)
    assert nodes and all(n.layer >= 0 for n in nodes)
    for node in nodes[:3]:
        table = why.node_table(view, view.trace, node, 9)
        scores = attribution.node_update_logits(view.bundle.model, view.trace, node.position, node.layer, node.sublayer)
        vocab = view.bundle.tokenizer.vocab
        up, down = int(scores.argmax()), int(scores.argmin())
        assert table["up by"][0] == pytest.approx(float(scores[up]))
        assert table["down by"][0] == pytest.approx(float(scores[down]))
        story = why.node_story(view, node, table)
        assert f"pushes {quote(why.visible(vocab[up]))} up most ({signed(float(scores[up]))})" in story
        assert f"{quote(why.visible(vocab[down]))} down most ({signed(float(scores[down]))})" in story


def test_the_suggested_second_sentence_swaps_one_known_word():
    view = pronoun_view()
    assert why.suggested_corruption(view) == "the dog sat on the mat because it was tired"
    assert why.suggested_corruption(view_of(bundled("roses"), "roses are red")) == "roses are blue"
    assert why.suggested_corruption(view_of(bundled("roses"), "sugar is sweet")) is None


def test_the_patching_stories_state_the_grids_numbers():
    view = pronoun_view()
    model, tok = view.bundle.model, view.bundle.tokenizer
    corrupted = tok.encode("the dog sat on the mat because it was tired")
    seen = []
    result = why.patching(model, view.ids, tuple(corrupted), 7, progress=lambda d, t: seen.append((d, t)))
    chosen = why.patching(model, view.ids, tuple(corrupted), 7, answer=5, other=9)
    assert (chosen.pair.answer, chosen.pair.other) == (5, 9)
    L, T, H = model.cfg.n_layers, len(view.ids), model.cfg.n_heads
    assert seen[-1] == (L * T + L * H, L * T + L * H) and len(seen) == 2 * L
    pair = patching.make_pair(model, list(view.ids), corrupted, 7)
    assert result.pair == pair
    assert torch.allclose(result.resid, patching.resid_pre_grid(model, pair)) and result.heads.shape == (L, H)
    vocab = tok.vocab
    story = why.pair_story(view, result, [vocab[i] for i in corrupted])
    assert "“cat” → “dog” (position 1)" in story
    assert f"compare {quote(vocab[pair.answer])} with {quote(vocab[pair.other])}" in story
    assert f"score difference {signed(pair.clean_diff)} in your sentence, {signed(pair.corrupted_diff)}" in story
    assert ("The gap is small" in story) == (abs(pair.clean_diff - pair.corrupted_diff) < why.SMALL_GAP)
    grid = result.resid
    layer, t = divmod(int(grid.argmax()), T)
    assert (f"the stream of {quote(view.tokens[t])} (position {t}) entering layer {layer} restores "
            f"**{float(grid[layer, t]):.0%}**") in why.resid_story(view, result)
    last = int(grid[-1].argmax())
    assert f"(position {last}, {float(grid[-1, last]):.0%})" in why.resid_story(view, result)
    layer, h = divmod(int(result.heads.abs().argmax()), H)
    share = float(result.heads[layer, h])
    story = why.heads_story(result)
    assert f"**layer {layer} head {h}**" in story
    assert (f"restores {share:.0%}" if share >= 0 else f"{-share:.0%} of the gap further away") in story


def test_the_grids_download_as_csv_with_one_row_per_layer():
    grid = torch.tensor([[0.5, 1.0], [0.25, -0.5]], dtype=torch.float64)
    back = pd.read_csv(io.StringIO(why.grid_csv(grid, ["0 the", "1 cat"])))
    assert list(back.columns) == ["layer", "0 the", "1 cat"]
    assert back.values.tolist() == [[0, 0.5, 1.0], [1, 0.25, -0.5]]


def test_a_post_norm_model_is_explained_in_words_not_split():
    view = lab_view("char, rms, post-norm, relu, learned")
    with pytest.raises(ValueError, match="post-norm"):
        why.attribution(view, view.trace, 1, 0)
    assert "char, rms, post-norm, relu, learned" in LAB


def test_the_encoder_decoders_decoder_is_explained_after_the_tokens_it_read_and_cross_heads_name_the_source():
    bundle = bundled("translate")
    text = "the small red cat sees the big dog"
    prepared = prepare_text(bundle.tokenizer, text, bundle.model.cfg.max_len)
    model = bundle.model
    written = greedy(model, prepared.ids)
    view = View("translate", bundle, text, False, prepared, model.run(prepared.ids, [model.bos_id, *written]))
    vocab = bundle.tokenizer.vocab
    reading = why.stream_tokens(view, view.trace)
    assert reading == [vocab[model.bos_id], *[vocab[i] for i in written]]
    assert f"which wrote {quote(' '.join(vocab[i] for i in written))}" in why.decoder_note(view, view.trace)
    for position in range(len(reading)):
        target = why.favourites(view.trace, position, 1)[0]
        result = why.attribution(view, view.trace, position, target)
        story = why.attribution_story(view, view.trace, result, target)
        assert f"after {quote(reading[position])} (position {position})" in story
        values = result.column(target)
        heads = [i for i, p in enumerate(result.parts) if p.kind == "head"]
        best = max(heads, key=lambda i: abs(float(values[i])))
        part = result.parts[best]
        sources = attribution.head_sources(model, view.trace, position, part.layer, part.head, target, part.attention)
        j = int(sources.argmax()) if sources.sum() >= 0 else int(sources.argmin())
        if part.attention == "cross_attn":                 # it read the source sentence
            assert f"comes from {quote(view.tokens[j])} at source position {j}." in story
        else:
            assert f"comes from {quote(reading[j])} at position {j}." in story


def test_the_estimate_story_states_how_well_it_agrees_with_the_exact_grids():
    view = pronoun_view()
    model, tok = view.bundle.model, view.bundle.tokenizer
    corrupted = tuple(tok.encode("the dog sat on the mat because it was tired"))
    exact = why.patching(model, view.ids, corrupted, 7)
    guess = why.estimate(model, view.ids, corrupted, 7)
    pair = exact.pair
    assert torch.allclose(guess.resid, patching.resid_pre_estimate(model, pair))
    assert torch.allclose(guess.heads, patching.head_out_estimate(model, pair))
    story = why.agreement_story(view, exact, guess)
    for grid, estimated in ((exact.resid, guess.resid), (exact.heads, guess.heads)):
        r = float(np.corrcoef(grid.flatten().numpy(), estimated.flatten().numpy())[0, 1])
        gap = (grid - estimated).abs()
        layer, col = divmod(int(gap.argmax()), grid.shape[1])
        assert f"correlation {r:.2f}, largest gap {float(gap.max()):.2f}" in story
        assert f"exact {float(grid[layer, col]):.2f}, estimate {float(estimated[layer, col]):.2f})" in story
    assert why.agreement(torch.ones(2, 2), torch.zeros(2, 2))[0] is None         # a constant grid: no correlation


def test_a_click_on_a_heads_bar_or_a_route_node_names_what_it_chose():
    view = pronoun_view()
    trace, position = view.trace, 7
    target = why.favourites(trace, position, 1)[0]
    fig = why.attribution_figure(view, trace, position, target)
    bar = fig.data[0]
    for label, data in zip(bar.y, bar.customdata):
        head = why.clicked_head({"customdata": list(data)})
        if label.startswith("L") and " H" in label:                     # a head's bar: "L1 H2"
            assert head == (int(label[1:label.index(" ")]), int(label.split(" H")[1]))
        else:                                                          # embeddings, MLPs, the rest, the total
            assert head is None
    assert why.clicked_head(None) is None and why.clicked_head({"customdata": ["<b>", 1]}) is None
    edges = attribution.routes(view.bundle.model, trace, 9, 0.01)
    nodes = why.route_nodes(edges)
    figure = why.routes_figure(view, edges, 9, 0.01)
    points = figure.data[-1].customdata
    chosen = [why.clicked_node({"customdata": list(p)}, nodes) for p in points]
    assert sorted(i for i in chosen if i is not None) == list(range(len(nodes)))   # every update node, once
    assert all(nodes[i].row == p[0] and nodes[i].position == p[1] for i, p in zip(chosen, points) if i is not None)
