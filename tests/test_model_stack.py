"""One model stack: the decoder-only model and both halves of the encoder-decoder are built from the same block,
the same stack and the same checks, and every model generates text through the same beam search and sampler.

As in The Annotated Transformer: the encoder is the decoder-only model without its causal mask, and the
decoder-only model is the decoder without cross-attention.
"""
import itertools
import math

import pytest
import torch

from model import generate
from model.checkpoint import load_bundled
from model.config import ModelConfig
from model.layers import MLP, Block
from model.seq2seq import EncoderDecoder, beam_search, exact_match, greedy, sample
from model.transformer import TransformerLM

SMALL = dict(vocab_size=17, d_model=12, n_heads=3, n_layers=2, d_ff=20, max_len=10)


def noisy(model, seed=0, noise=0.3):
    """Weights (and norms) noisy enough that every part of the model matters."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(noise * torch.randn_like(p))
    return model.eval()


def make_pair(seed=0, **switches) -> EncoderDecoder:
    return noisy(EncoderDecoder(ModelConfig(**(SMALL | switches))), seed)


def as_decoder_only(pair: EncoderDecoder, half: str) -> TransformerLM:
    """The decoder-only model made of one half of `pair` ("encoder" or "decoder"; a decoder's cross-attention
    weights are left out) and its unembedding."""
    renamed = {"embed": f"{half}_embed", "blocks": f"{half}_blocks", "final_norm": f"{half}_norm", "unembed": "unembed"}
    theirs = pair.state_dict()
    model = TransformerLM(pair.cfg).eval()
    mine = {}
    for name in model.state_dict():
        head, _, rest = name.partition(".")
        mine[name] = theirs[f"{renamed[head]}.{rest}"]
    model.load_state_dict(mine)
    return model


# --- one block, one stack ---------------------------------------------------------------------------------

def test_every_block_is_one_class_and_the_mlp_is_called_mlp_everywhere():
    pair = make_pair()
    lm = TransformerLM(pair.cfg)
    blocks = [*lm.blocks, *pair.encoder_blocks, *pair.decoder_blocks]
    assert all(type(b) is Block and type(b.mlp) is MLP for b in blocks)
    assert all(b.cross_attn is None for b in [*lm.blocks, *pair.encoder_blocks])
    assert all(b.cross_attn is not None for b in pair.decoder_blocks)


@pytest.mark.parametrize("norm_position", ["pre", "post"])
def test_the_encoder_is_the_decoder_only_stack_without_its_causal_mask(norm_position):
    pair = make_pair(norm_position=norm_position)
    lm = as_decoder_only(pair, "encoder")
    source = torch.tensor([[4, 9, 5, 16, 7, 6]])                     # no padding: the encoder hides nothing
    trace = pair.run(source, [[2]])
    alone = lm.run(source, causal=False)
    for name in [n for n in alone if n not in ("tokens", "logits")]:
        torch.testing.assert_close(trace[f"encoder.{name}"], alone[name], rtol=0, atol=0, msg=name)


@pytest.mark.parametrize("pos, norm", list(itertools.product(["sinusoidal", "learned"], ["layer", "rms"])))
def test_the_decoder_only_model_is_the_decoder_without_cross_attention(pos, norm):
    """Pre-norm: with cross-attention's output knocked out, a decoder block adds nothing there, and the decoder
    computes exactly what a decoder-only model with its weights computes."""
    pair = make_pair(pos=pos, norm=norm)
    lm = as_decoder_only(pair, "decoder")
    source, target = torch.tensor([[4, 9, 5, 1]]), torch.tensor([[2, 8, 11, 3, 12]])
    no_cross = {f"decoder.blocks.{i}.cross_attn.out": torch.zeros_like for i in range(pair.cfg.n_layers)}
    trace = pair.run(source, target, edits=no_cross)
    alone = lm.run(target)
    assert not torch.allclose(pair.run(source, target)["logits"], alone["logits"])    # cross-attention matters
    for name in alone:
        if name != "tokens":
            ours = trace["logits"] if name == "logits" else trace[f"decoder.{name}"]
            torch.testing.assert_close(ours, alone[name], rtol=0, atol=0, msg=name)


def test_both_models_refuse_what_they_cannot_read_with_one_check():
    pair = make_pair()
    lm = TransformerLM(pair.cfg)
    runs = {"input": lm.run, "source": lambda t: pair.run(t, [2]), "target": lambda t: pair.run([4], t)}
    for what, run in runs.items():
        for tokens, message in (([], f"the {what} must be a non-empty list of token ids"),
                                (list(range(4, 15)), f"the {what} is too long: 11 tokens is more than this "
                                                     "model's context of 10"),
                                ([4, 17], f"token ids must be between 0 and 16: the {what} holds ids outside"),
                                ([[[4]]], f"tokens must be a list or a .* the {what} has shape")):
            with pytest.raises(ValueError, match=message):
                run(tokens)


# --- one beam search, one sampler --------------------------------------------------------------------------

V = 4
TABLE = torch.tensor([[0.1, 0.5, 0.4, 0.0],     # after 0: 1 is likelier than 2 ...
                      [0.2, 0.0, 0.2, 0.6],     # ... but after 1 nothing is sure,
                      [0.0, 0.0, 0.0, 1.0],     # while after 2 comes 3 for certain
                      [0.7, 0.1, 0.1, 0.1]])


def markov(written: torch.Tensor, cache=None) -> tuple[torch.Tensor, None]:
    """A toy model: the next token's log-probabilities depend only on the last token (rows of TABLE); it keeps
    no cache."""
    return TABLE[written[:, -1]].clamp(min=1e-12).log(), None                       # (N, V)


def likeliest(start: int, n: int) -> tuple[list[int], float]:
    """Every continuation of n tokens, by hand: the likeliest and its log-probability."""
    def logp(seq):
        return sum(math.log(max(float(TABLE[a, b]), 1e-12)) for a, b in zip([start, *seq], seq))
    best = max(itertools.product(range(V), repeat=n), key=logp)
    return list(best), logp(best)


def test_a_beam_as_wide_as_every_choice_finds_the_likeliest_text_and_one_beam_is_greedy():
    best, score = likeliest(0, 3)
    found = generate.beam_search(markov, [0], 3, beams=V ** 2)
    assert found.tokens == best == [2, 3, 0] and found.score == pytest.approx(score, abs=1e-5)
    assert found.probs == pytest.approx([0.4, 1.0, 0.7], abs=1e-6)
    greedy_text = generate.beam_search(markov, [0], 3, beams=1)
    assert greedy_text.tokens == [1, 3, 0]                                      # 0.5 x 0.6 x 0.7 = 0.21 < 0.28
    assert greedy_text.score == pytest.approx(math.log(0.5 * 0.6 * 0.7), abs=1e-5)


def test_the_end_token_finishes_a_hypothesis_and_is_not_written():
    found = generate.beam_search(markov, [0], 5, beams=2, end=3)          # both beams end at step 2: 0.4, 0.3
    assert found.tokens == [2] and found.score == pytest.approx(math.log(0.4), abs=1e-5)
    assert len(found.steps) == 2
    assert all(ids[0] == 0 for step in found.steps for ids, _ in step)
    drawn = generate.sample(markov, [1], 5, temperature=0, end=3)
    assert drawn.tokens == [] and drawn.probs == []                              # 1 -> end at once


def test_the_sampler_draws_from_the_sliders_distribution_and_temperature_zero_is_greedy():
    drawn = generate.sample(markov, [0], 6, temperature=0)
    assert drawn.tokens == generate.beam_search(markov, [0], 6, beams=1).tokens and drawn.probs == [1.0] * 6
    again = [generate.sample(markov, [0], 6, seed=s).tokens for s in range(5)]
    assert again == [generate.sample(markov, [0], 6, seed=s).tokens for s in range(5)]
    for tokens in again:                                             # never a token the table gives 0
        assert all(TABLE[a, b] > 0 for a, b in zip([0, *tokens], tokens))


def test_both_models_generate_through_the_same_search(monkeypatch):
    """The decoder-only model's `generate` and the encoder-decoder's `beam_search`, `greedy` and `sample` all
    call model/generate.py's beam search and sampler."""
    calls = []
    for name in ("beam_search", "sample"):
        real = getattr(generate, name)
        monkeypatch.setattr(generate, name, lambda *a, real=real, name=name, **k: calls.append(name) or real(*a, **k))
    pair = make_pair()
    lm = noisy(TransformerLM(pair.cfg))
    generate.generate(lm, [4, 5], 3, "greedy")
    generate.generate(lm, [4, 5], 3, "beam")
    generate.generate(lm, [4, 5], 3, "sample")
    beam_search(pair, [4, 5], 2)
    greedy(pair, [4, 5])
    sample(pair, [4, 5])
    assert calls == ["beam_search", "beam_search", "sample", "beam_search", "beam_search", "sample"]


# --- one exact match -------------------------------------------------------------------------------------

def test_exact_match_counts_a_row_only_when_every_counted_label_is_the_top_guess():
    logits = torch.eye(V)[torch.tensor([[1, 2, 3], [1, 2, 0], [1, 0, 0]])]           # top guesses (3, 3, V)
    labels = torch.tensor([[1, 2, 3], [1, 2, 3], [1, -100, -100]])
    assert generate.exact_match(logits, labels) == pytest.approx(2 / 3)             # row 2 misses its last token


def test_teacher_forced_exact_match_is_what_greedy_decoding_writes():
    bundle = load_bundled("sort")
    data = [("3 1 2", "1 2 3"), ("9 0 5 5 1", "0 1 5 5 9"), ("4 4 1 8", "1 4 4 8"), ("3 1 2", "3 2 1"),
            ("8 6", "6 8 8"), ("5 3 9", "3 5")]                        # the last three: not what sorting writes
    tok = bundle.tokenizer
    decoded = [greedy(bundle.model, tok.encode(s)) == tok.encode(t) for s, t in data]
    assert decoded == [True, True, True, False, False, False]
    assert exact_match(bundle, data) == exact_match(bundle, data, beam_size=3) == 0.5
