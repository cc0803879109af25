"""Steering (model/steering.py): a direction added to the residual stream after a block while the model writes. The
continuation and its probabilities are recomputed by hand (the stream after the block, plus strength x direction,
through the remaining blocks), on the bundled models and random GPT-2- and Llama-shaped ones; bad input gets a
message a student can act on."""
import functools
import math
import tempfile
from pathlib import Path

import pytest
import torch

from model.checkpoint import load_bundled
from model.generate import generate
from model.layers import Recorder, causal_mask
from model.pretrained import load_pretrained
from model.steering import (MAX_STRENGTH, OVERFLOW, check_direction, difference_direction, neuron_direction,
                            next_token_shift, steered_continuation, steering_edit)

MODELS = ("tinytales", "roses", "gpt2-shaped", "llama-shaped")
PROMPTS = {"tinytales": "the cat sat on the mat because", "roses": "roses are red violets",
           "gpt2-shaped": "Paris is the capital of", "llama-shaped": "the quick brown fox"}


@functools.cache
def bundle_of(name: str):
    """A bundled model, or a small random GPT-2- or Llama-shaped one loaded from the hub's files (as
    tests/test_pretrained.py and tests/test_pretrained_llama.py build them)."""
    if name in ("tinytales", "roses"):
        return load_bundled(name)
    folder = Path(tempfile.mkdtemp())
    if name == "gpt2-shaped":
        from gpt2_support import reference_gpt2, write_gpt2_dir
        return load_pretrained(write_gpt2_dir(folder, reference_gpt2(n_layers=2, n_heads=3, d_model=24)))
    from llama_support import reference_llama, write_llama_dir
    return load_pretrained(write_llama_dir(folder, reference_llama(n_layers=2)))


def prompt_of(name: str) -> list[int]:
    return bundle_of(name).tokenizer.encode(PROMPTS[name])


def steered_by_hand(model, ids: list[int], layer: int, added: torch.Tensor, n: int) -> tuple[list[int], list[float]]:
    """Greedy decoding written out: at each step run the model on the text, take the stream after block `layer`, add
    `added`, run the remaining blocks, the final norm and the unembedding by hand; no edit, no cache."""
    written, probs = list(ids), []
    for _ in range(n):
        window = written[-model.cfg.max_len:]
        trace = model.run(window)
        x = trace[f"blocks.{layer}.resid_post"] + added                         # (1, T, D)
        angles = trace["embed.rope"] if model.cfg.pos == "rope" else None
        mask = causal_mask(len(window))
        with torch.no_grad():
            for block in model.blocks[layer + 1:]:
                x = block(x, Recorder(), mask=mask, angles=angles)
            p = model.unembed(model.final_norm(x))[0, -1].softmax(-1)          # (V,)
        token = int(p.argmax())
        written.append(token)
        probs.append(float(p[token]))
    return written[len(ids):], probs


@pytest.mark.parametrize("name", MODELS)
def test_a_steered_continuation_is_the_stream_plus_strength_times_direction_run_through_the_rest(name):
    bundle = bundle_of(name)
    model, ids = bundle.model, prompt_of(name)
    for layer, strength in ((0, 6.0), (model.cfg.n_layers - 1, -3.0)):
        direction = neuron_direction(model, layer, 1)
        out = steered_continuation(model, ids, steering_edit(layer, direction, strength), 12)
        tokens, probs = steered_by_hand(model, ids, layer, strength * direction, 12)
        assert out.steered.tokens == tokens
        assert out.steered.probs == pytest.approx(probs, abs=1e-5)
        plain = generate(model, ids, 12)                                       # and the plain text beside it
        assert (out.plain.tokens, out.plain.probs) == (plain.tokens, plain.probs)


def test_steering_changes_what_tinytales_writes_and_each_step_keeps_its_probability():
    model, ids = bundle_of("tinytales").model, prompt_of("tinytales")
    out = steered_continuation(model, ids, steering_edit(1, neuron_direction(model, 1, 4), 8.0), 20)
    assert len(out.plain.tokens) == len(out.steered.tokens) == 20 == len(out.steered.probs)
    assert out.first_difference is not None and out.plain.tokens != out.steered.tokens
    assert out.plain.tokens[:out.first_difference] == out.steered.tokens[:out.first_difference]
    assert all(0 < p <= 1 for p in out.plain.probs + out.steered.probs)


@pytest.mark.parametrize("name", MODELS)
def test_strength_0_is_the_plain_model(name):
    model, ids = bundle_of(name).model, prompt_of(name)
    edits = steering_edit(0, neuron_direction(model, 0, 2), 0.0)
    out = steered_continuation(model, ids, edits, 10)
    assert (out.steered.tokens, out.steered.probs) == (out.plain.tokens, out.plain.probs)
    assert out.first_difference is None
    shift = next_token_shift(model, ids, edits, 5)
    assert torch.equal(shift.before, shift.after) and shift.risers == shift.fallers == []


@pytest.mark.parametrize("name", ["tinytales", "llama-shaped"])
def test_the_kv_cache_steers_as_reading_the_whole_text_each_step_does(name):
    model, ids = bundle_of(name).model, prompt_of(name)
    edits = steering_edit(1, neuron_direction(model, 1, 0), 5.0)
    n = model.cfg.max_len - len(ids) + 4 if model.cfg.max_len < 64 else 12     # tinytales: past its context too
    cached, whole = generate(model, ids, n, edits=edits), generate(model, ids, n, edits=edits, use_cache=False)
    assert cached.tokens == whole.tokens
    assert cached.probs == pytest.approx(whole.probs, abs=1e-5)


def test_the_direction_is_added_at_every_position_and_nowhere_else():
    model, ids = bundle_of("tinytales").model, prompt_of("tinytales")
    direction = torch.randn(model.cfg.d_model)
    plain, steered = model.run(ids), model.run(ids, edits=steering_edit(1, direction, 2.5))
    assert torch.allclose(steered["blocks.1.resid_post"] - plain["blocks.1.resid_post"],
                          (2.5 * direction).expand(1, len(ids), -1), atol=1e-5)
    assert torch.equal(steered["blocks.1.resid_mid"], plain["blocks.1.resid_mid"])      # before it: untouched
    assert not torch.allclose(steered["logits"], plain["logits"])


def test_a_neurons_direction_is_its_output_weights_at_length_1():
    model = bundle_of("tinytales").model
    d = neuron_direction(model, 1, 17)
    column = model.blocks[1].mlp.W_out.weight[:, 17]
    assert float(d.norm()) == pytest.approx(1.0, abs=1e-6)
    assert torch.allclose(d * column.norm(), column, atol=1e-6)


def test_a_difference_of_sentences_is_their_mean_or_last_residual_after_the_block_subtracted():
    bundle = bundle_of("tinytales")
    model, tok = bundle.model, bundle.tokenizer
    a, b = tok.encode("the cats were happy"), tok.encode("the cat was sad")
    ra, rb = model.run(a)["blocks.0.resid_post"][0], model.run(b)["blocks.0.resid_post"][0]
    assert torch.allclose(difference_direction(model, a, b, 0), ra.mean(0) - rb.mean(0), atol=1e-6)
    assert torch.allclose(difference_direction(model, a, b, 0, how="last"), ra[-1] - rb[-1], atol=1e-6)
    # "the cats" minus "the cat": steering with it makes the model write about many
    plural = difference_direction(model, tok.encode("the cats"), tok.encode("the cat"), 0)
    shift = next_token_shift(model, tok.encode("the cat sat on the mat because"), steering_edit(0, plural, 2.0), 5)
    they, it = tok.vocab.index("they"), tok.vocab.index("it")
    assert shift.after[they] > shift.before[they] and shift.after[it] < shift.before[it]


def test_the_shift_ranks_every_tokens_change_in_probability():
    model, ids = bundle_of("roses").model, prompt_of("roses")
    edits = steering_edit(1, neuron_direction(model, 1, 5), 6.0)
    shift = next_token_shift(model, ids, edits, 4)
    before = model.run(ids)["logits"][0, -1].softmax(-1)
    after = model.run(ids, edits=edits)["logits"][0, -1].softmax(-1)
    assert torch.allclose(shift.before, before) and torch.allclose(shift.after, after)
    change = after - before
    assert shift.risers == change.topk(4).indices.tolist()[:len(shift.risers)]
    assert shift.fallers == (-change).topk(4).indices.tolist()[:len(shift.fallers)]
    assert all(shift.change(i) > 0 for i in shift.risers) and all(shift.change(i) < 0 for i in shift.fallers)
    assert shift.change(shift.risers[0]) == pytest.approx(float(change.max()))


# --- bad input: a message, never a crash ---------------------------------------------------------------------------

@pytest.mark.parametrize("strength", [1e9, -1e9, float("nan"), float("inf"), MAX_STRENGTH * 1.01])
def test_a_strength_far_too_large_or_not_a_number_is_refused_in_words(strength):
    with pytest.raises(ValueError, match="too large to mean anything"):
        steering_edit(0, torch.ones(64), strength)
    with pytest.raises(ValueError, match="must be a number"):
        steering_edit(0, torch.ones(64), "strong")


def test_numbers_that_overflow_while_writing_get_a_message_not_nonsense():
    model, ids = bundle_of("tinytales").model, prompt_of("tinytales")
    edits = steering_edit(0, torch.full((model.cfg.d_model,), 1e30), 1.0)     # finite, but its square is not
    with pytest.raises(ValueError, match="overflow") as caught:
        steered_continuation(model, ids, edits, 5)
    assert str(caught.value) == OVERFLOW
    with pytest.raises(ValueError, match="overflow"):
        next_token_shift(model, ids, edits)


def test_an_empty_difference_sentence_is_refused_in_words():
    model, tok = bundle_of("tinytales").model, bundle_of("tinytales").tokenizer
    with pytest.raises(ValueError, match="the first sentence of the difference is empty"):
        difference_direction(model, [], tok.encode("the cat"), 0)
    with pytest.raises(ValueError, match="the second sentence of the difference is empty"):
        difference_direction(model, tok.encode("the cat"), tok.encode(""), 0)
    with pytest.raises(ValueError, match="no layer 2"):
        difference_direction(model, tok.encode("the cats"), tok.encode("the cat"), 2)
    with pytest.raises(ValueError, match="how must be"):
        difference_direction(model, tok.encode("the cats"), tok.encode("the cat"), 0, how="max")


def test_a_direction_of_the_wrong_size_is_refused_in_words():
    model, ids = bundle_of("tinytales").model, prompt_of("tinytales")
    with pytest.raises(ValueError, match="this model's residual stream holds 64 numbers per token: a direction must"):
        check_direction(model, torch.ones(768))
    with pytest.raises(ValueError, match="has 768 numbers but this model's residual stream holds 64"):
        model.run(ids, edits=steering_edit(0, torch.ones(768), 1.0))
    with pytest.raises(ValueError, match="has 768 numbers"):
        steered_continuation(model, ids, steering_edit(0, torch.ones(768), 1.0), 3)
    with pytest.raises(ValueError, match="NaN or infinite"):
        check_direction(model, torch.full((64,), math.nan))
    with pytest.raises(ValueError, match="one finite vector"):
        steering_edit(0, torch.ones(4, 16), 1.0)


def test_steering_after_a_layer_the_model_lacks_is_refused_by_name():
    model, ids = bundle_of("roses").model, prompt_of("roses")
    with pytest.raises(ValueError, match="cannot edit blocks.5.resid_post"):
        steered_continuation(model, ids, steering_edit(5, torch.ones(model.cfg.d_model), 1.0), 3)
    with pytest.raises(ValueError, match="no neuron 9999"):
        neuron_direction(model, 0, 9999)
    with pytest.raises(ValueError, match="at least one token"):
        steered_continuation(model, ids, {}, 0)
