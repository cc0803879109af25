"""Activation patching (model/patching.py): the batched patched runs equal a manual re-run with one edit, patching
everything restores everything, patching nothing restores nothing, and bad pairs are refused in words."""
import pytest
import torch

from model import patching
from model.checkpoint import load_bundled
from model.edits import knock_out_head
from test_attribution import gpt2_layout

CLEAN = "the cat sat on the mat because it was tired"
CORRUPTED = "the dog sat on the mat because it was tired"


@pytest.fixture(scope="module")
def tinytales():
    return load_bundled("tinytales")


def pair_of(bundle, clean=CLEAN, corrupted=CORRUPTED, **kw):
    tok = bundle.tokenizer
    return patching.make_pair(bundle.model, tok.encode(clean), tok.encode(corrupted), **kw)


def manual_diff(model, pair, name, index):
    """The corrupted run with one clean value put back, by model.run and an edit: the logit difference."""
    clean = model.run(list(pair.clean))[name]

    def put_back(x):
        x[0][index] = clean[0][index]
        return x
    logits = model.run(list(pair.corrupted), edits={name: put_back})["logits"][0, pair.position]
    return float(logits[pair.answer] - logits[pair.other])


def test_the_pair_compares_the_clean_favourite_with_the_corrupted_one(tinytales):
    pair = pair_of(tinytales, position=1)
    model = tinytales.model
    clean = model.run(list(pair.clean))["logits"][0, 1]
    corrupted = model.run(list(pair.corrupted))["logits"][0, 1]
    assert pair.answer == int(clean.argmax())
    assert pair.other == int(corrupted.argmax()) or pair.other == int(clean.topk(2).indices[1])
    assert pair.clean_diff == pytest.approx(float(clean[pair.answer] - clean[pair.other]), abs=1e-4)
    assert pair.corrupted_diff == pytest.approx(float(corrupted[pair.answer] - corrupted[pair.other]), abs=1e-4)


def test_every_cell_of_the_residual_grid_equals_a_manual_re_run(tinytales):
    model = tinytales.model
    pair = pair_of(tinytales, position=-1)
    grid = patching.resid_pre_grid(model, pair)
    assert grid.shape == (model.cfg.n_layers, len(pair.clean))
    for layer in range(model.cfg.n_layers):
        for t in range(len(pair.clean)):
            expected = pair.restored(torch.tensor(manual_diff(model, pair, f"blocks.{layer}.resid_pre", (t,))))
            assert grid[layer, t].item() == pytest.approx(expected.item(), abs=1e-3), (layer, t)


def test_the_stream_at_the_changed_token_in_layer_0_restores_everything_and_elsewhere_nothing(tinytales):
    pair = pair_of(tinytales, position=-1)
    grid = patching.resid_pre_grid(tinytales.model, pair)
    changed = [t for t, (a, b) in enumerate(zip(pair.clean, pair.corrupted)) if a != b]
    assert changed == [1]
    assert grid[0, 1].item() == pytest.approx(1.0, abs=1e-3)     # layer 0 at the only changed token: all of it
    others = [t for t in range(len(pair.clean)) if t != 1]
    assert grid[0, others].abs().max().item() < 1e-3             # the same values put back: nothing changes


def test_patching_every_position_in_one_run_restores_everything_and_no_patch_nothing(tinytales):
    model = tinytales.model
    pair = pair_of(tinytales, position=-1)
    T = len(pair.clean)
    clean = patching.clean_values(model, pair, ["blocks.1.resid_pre"])
    everything = patching.run_patched(model, list(pair.corrupted), clean, [patching.Patch("blocks.1.resid_pre", (slice(None),))],
                               pair.position, [pair.answer, pair.other])
    assert pair.restored(everything[:, 0] - everything[:, 1]).item() == pytest.approx(1.0, abs=1e-3)
    assert patching.run_patched(model, list(pair.corrupted), clean, [], pair.position, [1, 2]).shape == (0, 2)
    assert T == 10


def test_every_cell_of_the_head_grid_equals_a_manual_re_run(tinytales):
    model = tinytales.model
    pair = pair_of(tinytales, position=-1)
    grid = patching.head_out_grid(model, pair)
    assert grid.shape == (model.cfg.n_layers, model.cfg.n_heads)
    for layer in range(model.cfg.n_layers):
        for h in range(model.cfg.n_heads):
            expected = pair.restored(torch.tensor(manual_diff(model, pair, f"blocks.{layer}.attn.z", (h,))))
            assert grid[layer, h].item() == pytest.approx(expected.item(), abs=1e-3), (layer, h)
    assert grid.abs().max() > 0.01                              # the heads do carry some of the difference


def test_a_llama_like_model_is_patched_from_its_first_patched_block_with_its_rotary_positions():
    """Rotary positions, six heads sharing two key/value heads, a gated MLP, no biases: a batch that starts at a
    later block still turns its queries and keys, and a knockout reads the heads of a group one by one."""
    from test_transformer import make_model
    model = make_model(seed=5, d_model=24, n_heads=6, n_kv_heads=2, pos="rope", norm="rms", activation="swiglu",
                       bias=False, tie_embeddings=True)
    clean = [3, 7, 1, 9, 12, 4, 8]
    corrupted = [3, 7, 2, 9, 12, 4, 8]
    pair = patching.make_pair(model, clean, corrupted)
    grid, heads = patching.resid_pre_grid(model, pair), patching.head_out_grid(model, pair)
    for layer in range(model.cfg.n_layers):
        for t in (1, 2, 5):
            expected = pair.restored(torch.tensor(manual_diff(model, pair, f"blocks.{layer}.resid_pre", (t,))))
            assert grid[layer, t].item() == pytest.approx(expected.item(), abs=1e-3), (layer, t)
        for h in range(6):
            expected = pair.restored(torch.tensor(manual_diff(model, pair, f"blocks.{layer}.attn.z", (h,))))
            assert heads[layer, h].item() == pytest.approx(expected.item(), abs=1e-3), (layer, h)
    trace = model.run(clean)
    knocked = patching.knockout_logits(model, trace, 1, [0, 4], 6)
    for row, head in enumerate((0, 4)):
        expected = model.run(clean, edits=knock_out_head(1, head))["logits"][0, 6]
        torch.testing.assert_close(knocked[row], expected, rtol=0, atol=1e-4)


def test_a_gpt2_layout_model_is_patched_in_batches_with_progress():
    model = gpt2_layout(seed=1)
    clean = torch.randint(0, 50_257, (8,), generator=torch.Generator().manual_seed(2)).tolist()
    corrupted = list(clean)
    corrupted[2] = (corrupted[2] + 1) % 50_257
    pair = patching.make_pair(model, clean, corrupted)
    seen = []
    grid = patching.resid_pre_grid(model, pair, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(8, 16), (16, 16)]                            # one forward pass per layer
    assert grid[0, 2].item() == pytest.approx(1.0, abs=1e-3)
    assert grid[0, [0, 1, 3, 4, 5, 6, 7]].abs().max().item() < 1e-3   # entering layer 0 only token 2 differs
    assert grid[1, 3:].abs().max().item() > 0.01                  # later tokens have read it by layer 1
    one_batch = patching.resid_pre_grid(model, pair, batch=16)
    assert torch.allclose(grid, one_batch, atol=1e-3)
    for layer, t in ((1, 2), (1, 0)):
        expected = pair.restored(torch.tensor(manual_diff(model, pair, f"blocks.{layer}.resid_pre", (t,))))
        assert grid[layer, t].item() == pytest.approx(expected.item(), abs=1e-3)


def test_patching_never_changes_the_shared_model(tinytales):
    before = {k: v.clone() for k, v in tinytales.model.state_dict().items()}
    pair = pair_of(tinytales)
    patching.resid_pre_grid(tinytales.model, pair)
    patching.head_out_grid(tinytales.model, pair)
    assert all(torch.equal(before[k], v) for k, v in tinytales.model.state_dict().items())
    # and the model still runs as before: an edit used once is not left behind
    ids = tinytales.tokenizer.encode(CLEAN)
    assert torch.equal(tinytales.model.run(ids)["logits"], tinytales.model.run(ids, edits={})["logits"])
    assert not torch.equal(tinytales.model.run(ids)["logits"], tinytales.model.run(ids, edits=knock_out_head(0, 0))["logits"])


def test_different_token_counts_are_refused_in_words(tinytales):
    with pytest.raises(ValueError, match="10 tokens and the corrupted one 9"):
        pair_of(tinytales, corrupted="the dog sat on the mat because it was")


def test_identical_sentences_have_nothing_to_restore(tinytales):
    with pytest.raises(patching.NothingToRestore, match="the same"):
        pair_of(tinytales, corrupted=CLEAN)


def test_a_pair_with_no_logit_difference_between_the_runs_is_refused_not_divided_by_zero(tinytales):
    # Position 0 reads only "the" in both sentences: the runs agree there exactly.
    with pytest.raises(patching.NothingToRestore, match="nothing for a patch to restore"):
        pair_of(tinytales, position=0)
    with pytest.raises(patching.NothingToRestore, match="same token"):
        pair_of(tinytales, answer=5, other=5)


def test_other_bad_input_is_refused(tinytales):
    with pytest.raises(ValueError, match="outside the sentences"):
        pair_of(tinytales, position=10)
    with pytest.raises(ValueError, match="between 0 and 132"):
        pair_of(tinytales, answer=500, other=1)
    model = tinytales.model
    pair = pair_of(tinytales)
    with pytest.raises(ValueError, match="not a name"):
        patching.run_patched(model, list(pair.corrupted), patching.clean_values(model, pair, ["blocks.0.resid_pre"]),
                      [patching.Patch("blocks.9.resid_pre", (0,))], 1, [1, 2])
    seq2seq = load_bundled("sort").model
    with pytest.raises(ValueError, match="decoder-only"):
        patching.make_pair(seq2seq, [4, 5], [5, 4])


def test_an_embedding_patch_runs_the_whole_model_and_a_later_block_starts_where_it_is_patched(tinytales):
    model = tinytales.model
    pair = pair_of(tinytales, position=-1)
    clean = patching.clean_values(model, pair, ["embed.tok", "blocks.1.attn.z"])
    logits = patching.run_patched(model, list(pair.corrupted), clean,
                           [patching.Patch("embed.tok", (1,)), patching.Patch("embed.tok", (2,)), patching.Patch("blocks.1.attn.z", (0,))],
                           pair.position, [pair.answer, pair.other])
    restored = pair.restored(logits[:, 0] - logits[:, 1])
    assert restored[0].item() == pytest.approx(1.0, abs=1e-3)       # the changed token's embedding: the clean run
    assert restored[1].item() == pytest.approx(0.0, abs=1e-3)       # an unchanged token's: nothing
    expected = pair.restored(torch.tensor(manual_diff(model, pair, "blocks.1.attn.z", (0,))))
    assert restored[2].item() == pytest.approx(expected.item(), abs=1e-3)
    assert patching.first_block("blocks.11.attn.z") == 11 and patching.first_block("embed.pos") is None


def test_attribution_patching_is_the_directional_derivative_of_the_logit_difference(tinytales):
    import copy
    model = copy.deepcopy(tinytales.model).double()              # float64: a finite difference can be trusted
    tok = tinytales.tokenizer
    pair = patching.make_pair(model, tok.encode(CLEAN), tok.encode(CORRUPTED), position=7)
    estimate = patching.resid_pre_estimate(model, pair)
    heads = patching.head_out_estimate(model, pair)
    assert estimate.shape == (2, 10) and heads.shape == (2, 4)
    eps = 1e-6
    for name, index, value in (("blocks.1.resid_pre", (2,), estimate[1, 2]), ("blocks.0.resid_pre", (1,), estimate[0, 1]),
                               ("blocks.1.attn.z", (3,), heads[1, 3])):
        clean = model.run(list(pair.clean))[name]
        corrupted = model.run(list(pair.corrupted))[name]

        def nudge(x, name=name, index=index, clean=clean, corrupted=corrupted):
            x[0][index] = corrupted[0][index] + eps * (clean[0][index] - corrupted[0][index])
            return x
        logits = model.run(list(pair.corrupted), edits={name: nudge})["logits"][0, 7]
        moved = float(logits[pair.answer] - logits[pair.other]) - pair.corrupted_diff
        assert value.item() == pytest.approx(moved / eps / (pair.clean_diff - pair.corrupted_diff), rel=1e-4, abs=1e-6)


def test_attribution_patching_agrees_with_the_exact_grids_and_leaves_no_gradient_behind(tinytales):
    pair = pair_of(tinytales, position=7)
    exact, estimate = patching.head_out_grid(tinytales.model, pair), patching.head_out_estimate(tinytales.model, pair)
    assert torch.corrcoef(torch.stack([exact.flatten(), estimate.flatten()]))[0, 1] > 0.9
    resid = patching.resid_pre_estimate(tinytales.model, pair)
    assert resid[:, 8:].abs().max() == 0 and resid[0, [0, 2, 3]].abs().max() == 0   # nothing differs there
    assert all(p.grad is None for p in tinytales.model.parameters())
