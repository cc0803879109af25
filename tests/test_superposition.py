"""Superposition, the toy (issue 41, item 6): five features in two dimensions, checked from the weights.

What a student sees: with sparse features the five arrows spread into a pentagon, about 72° apart; with dense ones
the model keeps the two most important at right angles and drops the rest; the sentence under the picture says so,
with numbers recomputed here from W; the picture draws W's columns; a seed always trains the same toy.
"""
from dataclasses import replace
from functools import cache

import numpy as np
import pytest

from model.superposition import ToyConfig, train_toy
from explorer.steps.superposition import INTRO, directions_figure, kept_sentence, overlap_figure

PENTAGONS = ((0.9, 0), (0.95, 0), (0.95, 1))      # (sparsity, seed): two sparsities, two seeds
TOLERANCE = 10.0         # degrees, around 72° for the pentagon and 90° for the right angle


@cache
def trained(sparsity: float, seed: int = 0):
    return train_toy(ToyConfig(sparsity=sparsity, seed=seed))


def lengths(W: np.ndarray) -> np.ndarray:
    return np.sqrt((W ** 2).sum(axis=0))


def gaps_around(W: np.ndarray, columns) -> np.ndarray:
    """Degrees between neighbouring directions of W's `columns`, sorted by angle, going once round the circle."""
    angles = np.sort([np.degrees(np.arctan2(W[1, i], W[0, i])) % 360 for i in columns])
    return np.diff(np.append(angles, angles[0] + 360))


@pytest.mark.parametrize("sparsity, seed", PENTAGONS)
def test_sparse_features_spread_into_a_pentagon(sparsity, seed):
    W = trained(sparsity, seed).W
    assert W.shape == (2, 5)
    assert (lengths(W) > 0.5).all(), lengths(W)                         # all five kept
    gaps = gaps_around(W, range(5))
    assert np.allclose(gaps, 72, atol=TOLERANCE), gaps


def test_dense_features_keep_the_two_most_important_at_right_angles():
    W = trained(0.0).W
    kept = np.flatnonzero(lengths(W) > 0.5)
    assert list(kept) == [0, 1], lengths(W)
    cosine = W[:, 0] @ W[:, 1] / (lengths(W)[0] * lengths(W)[1])
    assert abs(np.degrees(np.arccos(cosine)) - 90) < TOLERANCE
    assert (lengths(W)[2:] < 0.5).all()


def test_the_sentence_says_what_the_weights_show_at_high_sparsity():
    result = trained(0.95)
    W, sentence = result.W, kept_sentence(result)
    n_kept = int((lengths(W) > 0.5).sum())
    mean_gap = gaps_around(W, range(5)).mean()                          # 360 / 5 when all five are kept
    leaks = [W[:, i] @ W[:, j] for i in range(5) for j in range(5) if i != j]
    assert n_kept == 5
    for claim in ("sparsity 0.95", f"**all {n_kept}** features in its 2 dimensions", f"about {mean_gap:.0f}° apart",
                  "a pentagon", f"All {n_kept} kept features share the space", "**superposition**",
                  f"as much as {max(leaks):.2f} times", f"from {result.b.min():.2f} to {result.b.max():.2f}",
                  f"present together in {100 * (1 - 0.95) ** 2:.2f}% of examples"):
        assert claim in sentence, (claim, sentence)


def test_the_sentence_says_what_the_weights_show_without_sparsity():
    result = trained(0.0)
    W, sentence = result.W, kept_sentence(result)
    kept = np.flatnonzero(lengths(W) > 0.5)
    for claim in ("sparsity 0 (every feature is present in every example)",
                  f"keeps the **{len(kept)}** most important features", "at right angles",
                  f"drops the other **{5 - len(kept)}**", "no superposition"):
        assert claim in sentence, (claim, sentence)
    assert "pentagon" not in sentence and "share the space" not in sentence


def test_the_sentence_names_opposite_pairs_in_between():
    """Half way (the paper's antipodal pairs): four features kept, each pair pointing in opposite directions."""
    result = trained(0.7)
    W, sentence = result.W, kept_sentence(result)
    kept = [int(i) for i in np.flatnonzero(lengths(W) > 0.5)]
    unit = W[:, kept] / lengths(W)[kept]
    opposite = [(kept[a], kept[b]) for a in range(len(kept)) for b in range(a + 1, len(kept))
                if unit[:, a] @ unit[:, b] < -0.95]
    assert len(kept) == 4 and len(opposite) == 2, (lengths(W), opposite)
    dropped = next(i for i in range(5) if i not in kept)
    assert f"drops feature {dropped}." in sentence
    assert f"Features {opposite[0][0]} and {opposite[0][1]} point in opposite directions" in sentence
    assert f"so do features {opposite[1][0]} and {opposite[1][1]}" in sentence
    assert "about 90° apart: a square" in sentence


def test_the_sentence_changes_with_the_weights():
    """Computed, not canned: the same toy with its last two features removed reads differently."""
    result = trained(0.95)
    W = result.W.copy()
    W[:, 3:] = 0
    fewer = kept_sentence(replace(result, W=W))
    assert "keeps the **3** most important features" in fewer and "drops the other **2**" in fewer
    assert "all 5" not in fewer


def test_the_picture_draws_each_column_of_W_from_the_origin():
    result = trained(0.95)
    for presenter, phone in ((False, False), (True, False), (False, True)):
        fig = directions_figure(result, presenter=presenter, phone=phone)
        arrows = {t.name: t for t in fig.data if t.name.startswith("feature")}
        assert sorted(arrows) == [f"feature {i}" for i in range(5)]
        for i in range(5):
            arrow = arrows[f"feature {i}"]
            assert list(arrow.x) == [0.0, pytest.approx(result.W[0, i])]
            assert list(arrow.y) == [0.0, pytest.approx(result.W[1, i])]
            assert arrow.text[-1] == f"feature {i}"
        assert fig.layout.yaxis.scaleanchor == "x" and fig.layout.yaxis.scaleratio == 1
        assert tuple(fig.layout.xaxis.range) == tuple(fig.layout.yaxis.range)
    colours = [t.line.color for t in directions_figure(result).data if t.name.startswith("feature")]
    assert len(set(colours)) == 5                                       # one colour per importance


def test_a_dropped_feature_is_drawn_dashed_and_named_so():
    fig = directions_figure(trained(0.0))
    names = [t.name for t in fig.data if t.name.startswith("feature")]
    assert names == ["feature 0", "feature 1", "feature 2 (dropped)", "feature 3 (dropped)", "feature 4 (dropped)"]
    assert [t.line.dash for t in fig.data if t.name.startswith("feature")][2:] == ["dash"] * 3


def test_the_overlap_view_is_W_transpose_W():
    result = trained(0.95)
    z = np.asarray(overlap_figure(result).data[0].z)
    assert np.allclose(z, result.W.T @ result.W)


def test_a_seed_always_trains_the_same_toy_and_another_seed_another():
    again = train_toy(ToyConfig(sparsity=0.95, seed=0))
    first = trained(0.95, 0)
    assert np.array_equal(again.W, first.W) and np.array_equal(again.b, first.b) and again.loss == first.loss
    assert not np.allclose(trained(0.95, 1).W, first.W)


def test_a_sparsity_of_one_is_refused_with_a_reason():
    with pytest.raises(ValueError, match="below 1"):
        ToyConfig(sparsity=1.0)


def test_the_introduction_explains_superposition_in_plain_words():
    assert "superposition" in INTRO and "sparsity" in INTRO and "5 features" in INTRO and "2 numbers" in INTRO
