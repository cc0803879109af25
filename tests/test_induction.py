"""Induction scores (model/induction.py), checked against a model whose induction head is set by hand.

What a student is told: a head's induction score is its mean attention, over the second copy of a repeated random
sequence, on the token after the previous occurrence of the current one; a real induction head scores near 1, any
other head and an untrained model near 0 (about 1 / position, attention spread evenly).
"""
import pytest
import torch

from model.checkpoint import load_bundled
from model.config import ModelConfig
from model.induction import FIRST_ID, induction_scores, repeated_random_tokens
from model.transformer import TransformerLM
from induction_support import induction_model


def test_the_sequence_is_random_tokens_then_the_same_again():
    tokens = repeated_random_tokens(100, 12, seed=3, batch=5)
    assert tokens.shape == (5, 24) and tokens.dtype == torch.long
    assert torch.equal(tokens[:, :12], tokens[:, 12:])
    assert tokens.min() >= FIRST_ID and tokens.max() < 100
    assert all(len(set(row[:12].tolist())) == 12 for row in tokens)          # no repeats within a copy
    assert len({tuple(row.tolist()) for row in tokens}) == 5                  # five different sequences
    assert torch.equal(tokens, repeated_random_tokens(100, 12, seed=3, batch=5))
    assert not torch.equal(tokens, repeated_random_tokens(100, 12, seed=4, batch=5))


def test_a_small_vocabulary_draws_with_repeats():
    tokens = repeated_random_tokens(6, 10, batch=2)                           # 4 ids for 10 places
    assert tokens.shape == (2, 20) and torch.equal(tokens[:, :10], tokens[:, 10:])
    assert set(tokens.unique().tolist()) <= {2, 3, 4, 5}


def test_a_too_long_request_is_shortened_to_the_context():
    assert repeated_random_tokens(100, 50, max_len=32).shape == (4, 32)
    assert repeated_random_tokens(100, 50, max_len=33).shape == (4, 32)
    assert repeated_random_tokens(100, 5, max_len=32).shape == (4, 10)
    with pytest.raises(ValueError, match="ids to draw from"):
        repeated_random_tokens(2, 5)


def test_the_hand_made_induction_head_scores_near_1_and_every_other_head_near_0():
    model = induction_model()
    scores = induction_scores(model, repeated_random_tokens(32, 16, max_len=model.cfg.max_len))
    assert scores.shape == (2, 2)
    assert scores[1, 0] > 0.99, scores                       # layer 1, head 0: the induction head
    assert scores[0, 0] < 0.01, scores                       # the previous-token head looks at i - 1, not i - n + 1
    assert scores[0, 1] < 0.1 and scores[1, 1] < 0.1, scores  # zero heads spread their attention evenly
    # ... which is 1 / (i + 1) on average over the second copy, i = 16 .. 31
    even = sum(1 / (i + 1) for i in range(16, 32)) / 16
    assert scores[1, 1] == pytest.approx(even, rel=1e-5)


def test_the_score_is_the_mean_attention_on_the_token_after_the_previous_occurrence():
    """Recomputed here from the full trace, position by position."""
    model = induction_model()
    tokens = repeated_random_tokens(32, 10, seed=1, batch=3)                 # (3, 20)
    trace = model.run(tokens)
    for layer in range(2):
        pattern = trace["pattern", layer]                                    # (B, H, T, T)
        expected = torch.stack([pattern[:, :, i, i - 10 + 1] for i in range(10, 20)]).mean(dim=(0, 1))
        assert torch.allclose(induction_scores(model, tokens)[layer], expected)


def test_the_induction_head_copies_the_next_token_of_the_second_copy():
    model = induction_model()
    tokens = repeated_random_tokens(32, 16, batch=2)
    guesses = model.predict(tokens).argmax(dim=-1)                           # (B, T)
    assert torch.equal(guesses[:, 16:-1], tokens[:, 17:])


def test_an_untrained_model_and_a_model_trained_on_tiny_tales_have_no_induction_head():
    torch.manual_seed(0)
    random = TransformerLM(ModelConfig(vocab_size=50, max_len=40)).eval()
    scores = induction_scores(random, repeated_random_tokens(50, 20, max_len=40))
    assert scores.shape == (2, 2) and (scores < 0.1).all(), scores
    tiny = load_bundled("tinytales").model
    scores = induction_scores(tiny, repeated_random_tokens(tiny.cfg.vocab_size, 50, max_len=tiny.cfg.max_len))
    assert scores.shape == (2, 4) and (scores < 0.1).all(), scores


def test_sequences_longer_than_the_context_are_cut_to_a_shorter_repeat():
    model = induction_model(max_len=32)
    long = repeated_random_tokens(32, 20, max_len=None)                      # 40 tokens, context 32
    short = torch.cat([long[:, :16], long[:, :16]], dim=1)
    assert torch.equal(induction_scores(model, long), induction_scores(model, short))
    assert induction_scores(model, long)[1, 0] > 0.99


def test_a_sequence_that_does_not_repeat_is_refused():
    model = induction_model()
    tokens = repeated_random_tokens(32, 8)
    tokens[:, -1] = (tokens[:, -1] + 1) % 32
    with pytest.raises(ValueError, match="repeat"):
        induction_scores(model, tokens)
    with pytest.raises(ValueError, match="repeat"):
        induction_scores(model, repeated_random_tokens(32, 8)[:, :-1])


def test_the_scores_are_a_full_runs_patterns_read_without_the_final_norm_or_the_unembedding(monkeypatch):
    model = induction_model()
    tokens = repeated_random_tokens(32, 8)
    n = tokens.shape[1] // 2
    full = model.run(tokens)                                                   # every value, the logits too
    expected = torch.stack([full["pattern", layer][:, :, torch.arange(n, 2 * n), torch.arange(1, n + 1)].mean((0, 2))
                            for layer in range(model.cfg.n_layers)])           # (L, H)

    class Unused(torch.nn.Module):
        def forward(self, x):
            raise AssertionError("the induction scores need no logits")
    monkeypatch.setattr(model, "unembed", Unused())
    monkeypatch.setattr(model, "final_norm", Unused())
    torch.testing.assert_close(induction_scores(model, tokens), expected)
