"""From logits to text: the distribution a student sees, the tokens each strategy picks from it, and the KV cache
that lets each step read one new token."""
import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from model.config import ModelConfig
from model.generate import generate, next_token_probs, time_new_token
from model.layers import cache_bytes_per_token
from model.transformer import TransformerLM

SMALL = dict(vocab_size=23, d_model=12, n_heads=3, n_layers=2, d_ff=20, max_len=9)
PROMPT = [4, 15, 8, 1]


def make_model(seed=0) -> TransformerLM:
    """A small model with weights large enough to have opinions about the next token."""
    torch.manual_seed(seed)
    model = TransformerLM(ModelConfig(**SMALL)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model


@pytest.fixture
def model():
    return make_model()


def last_logits(model, ids) -> torch.Tensor:
    """Logits (V,) for the token after `ids`, reading at most max_len tokens like generate does."""
    return model.predict(ids[-model.cfg.max_len:])[0, -1]


def greedy_by_hand(model, prompt, n_new) -> list[int]:
    ids = list(prompt)
    for _ in range(n_new):
        ids.append(int(last_logits(model, ids).argmax()))
    return ids[len(prompt):]


def log_prob(model, prompt, new_tokens) -> float:
    """Total log-probability of `new_tokens` following `prompt`."""
    ids, total = list(prompt), 0.0
    for token in new_tokens:
        total += float(last_logits(model, ids).log_softmax(-1)[token])
        ids.append(token)
    return total


def peaked_logits(seed=0, size=11) -> torch.Tensor:
    return 3 * torch.randn(size, generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------------------------------------------
# next_token_probs: the distribution behind the sliders.

@settings(max_examples=60, deadline=None)
@given(logits=st.lists(st.floats(-20, 20), min_size=1, max_size=30),
       temperature=st.one_of(st.just(0.0), st.floats(0.05, 5.0)),
       top_k=st.one_of(st.none(), st.integers(1, 40)),
       top_p=st.one_of(st.none(), st.floats(0.01, 1.0)))
def test_next_token_probabilities_are_a_distribution(logits, temperature, top_k, top_p):
    probs = next_token_probs(torch.tensor(logits), temperature, top_k, top_p)
    assert probs.shape == (len(logits),)
    assert (probs >= 0).all()
    assert math.isclose(float(probs.sum()), 1.0, abs_tol=1e-5)
    assert probs[torch.tensor(logits).argmax()] == probs.max()   # the likeliest token always survives


def test_temperature_one_without_cuts_is_the_softmax():
    logits = peaked_logits()
    torch.testing.assert_close(next_token_probs(logits), logits.softmax(-1))


def test_temperature_zero_is_all_on_the_top_token():
    logits = peaked_logits()
    expected = torch.zeros(11)
    expected[logits.argmax()] = 1
    assert torch.equal(next_token_probs(logits, temperature=0), expected)


def test_lower_temperature_sharpens_and_higher_flattens():
    logits = peaked_logits()
    top = [float(next_token_probs(logits, temperature=t).max()) for t in (0.25, 0.5, 1.0, 2.0, 8.0)]
    assert top == sorted(top, reverse=True) and len(set(top)) == len(top)
    torch.testing.assert_close(next_token_probs(logits, temperature=0.5), (logits / 0.5).softmax(-1))


@pytest.mark.parametrize("k", [1, 3, 10, 11, 50])
def test_top_k_keeps_exactly_the_k_likeliest_tokens(k):
    logits = peaked_logits()
    probs = next_token_probs(logits, top_k=k)
    kept = min(k, 11)
    largest = set(logits.topk(kept).indices.tolist())
    assert set(probs.nonzero().flatten().tolist()) == largest
    ids = sorted(largest)
    torch.testing.assert_close(probs[ids], logits[ids].softmax(-1))   # renormalised among the survivors


@pytest.mark.parametrize("p, expected", [
    (0.4, [0, 1, 0, 0]),                                  # 0.5 alone already reaches 0.4
    (0.7, [0, 0.5 / 0.75, 0, 0.25 / 0.75]),               # 0.5 + 0.25 = 0.75 reaches 0.7
    (0.8, [0, 0.5 / 0.9, 0.15 / 0.9, 0.25 / 0.9]),        # needs 0.15 as well: 0.9
    (0.95, [0.1, 0.5, 0.15, 0.25]),                       # needs everything
    (1.0, [0.1, 0.5, 0.15, 0.25]),
])
def test_top_p_keeps_the_fewest_likeliest_tokens_whose_mass_reaches_p(p, expected):
    logits = torch.tensor([0.1, 0.5, 0.15, 0.25]).log()
    torch.testing.assert_close(next_token_probs(logits, top_p=p), torch.tensor(expected, dtype=torch.float32))


def test_top_p_stops_as_soon_as_the_mass_equals_p():
    probs = next_token_probs(torch.zeros(4), top_p=0.5)     # four tokens of exactly 0.25 each
    assert sorted(probs.tolist()) == [0, 0, 0.5, 0.5]


def test_top_p_and_top_k_together_keep_what_both_allow():
    logits = torch.tensor([0.1, 0.5, 0.15, 0.25]).log()
    torch.testing.assert_close(next_token_probs(logits, top_k=2, top_p=0.95), torch.tensor([0, 2 / 3, 0, 1 / 3]))
    torch.testing.assert_close(next_token_probs(logits, top_k=3, top_p=0.4), torch.tensor([0.0, 1, 0, 0]))


def test_top_p_of_one_cuts_nothing_even_when_one_token_dominates():
    """p = 1 is the slider's "off": every token keeps its probability, however small."""
    logits = torch.cat([torch.tensor([20.0]), torch.zeros(999)])
    probs = next_token_probs(logits, top_p=1.0)
    assert int((probs > 0).sum()) == 1000
    torch.testing.assert_close(probs, logits.softmax(-1))


@pytest.mark.parametrize("kwargs, message", [
    (dict(temperature=-0.1), "temperature must be 0 or more"),
    (dict(top_k=0), "top_k must be at least 1"),
    (dict(top_k=-3), "top_k must be at least 1"),
    (dict(top_p=0.0), "top_p must be above 0 and at most 1"),
    (dict(top_p=-0.5), "top_p must be above 0 and at most 1"),
    (dict(top_p=1.01), "top_p must be above 0 and at most 1"),
])
def test_impossible_sampling_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        next_token_probs(peaked_logits(), **kwargs)


# ---------------------------------------------------------------------------------------------------
# generate: greedy, sampling, beam search and the sliding window.

def test_greedy_takes_the_likeliest_token_each_step(model):
    out = generate(model, PROMPT, n_new=4, strategy="greedy")
    assert out.tokens == greedy_by_hand(model, PROMPT, 4)
    assert not out.window_slid


def test_greedy_reports_the_probability_of_each_chosen_token(model):
    out = generate(model, PROMPT, n_new=4, strategy="greedy")
    ids = PROMPT + out.tokens
    for i, (token, prob) in enumerate(zip(out.tokens, out.probs)):
        expected = last_logits(model, ids[:len(PROMPT) + i]).softmax(-1)
        assert prob == pytest.approx(float(expected[token]), abs=1e-6)
        assert prob == pytest.approx(float(expected.max()), abs=1e-6)


def test_the_same_seed_gives_the_same_sample_and_different_seeds_differ(model):
    sample = lambda seed: generate(model, PROMPT, n_new=5, strategy="sample", temperature=3.0, seed=seed)  # noqa: E731
    assert sample(7).tokens == sample(7).tokens
    assert sample(7).probs == sample(7).probs
    assert len({tuple(sample(seed).tokens) for seed in range(4)}) > 1


def test_sampling_reports_the_probability_each_token_had_under_the_sliders(model):
    out = generate(model, PROMPT, n_new=5, strategy="sample", temperature=0.8, top_k=5, seed=3)
    ids = PROMPT + out.tokens
    for i, (token, prob) in enumerate(zip(out.tokens, out.probs)):
        probs = next_token_probs(last_logits(model, ids[:len(PROMPT) + i]), 0.8, 5)
        assert probs[token] > 0                        # a token cut by top-k is never drawn
        assert prob == pytest.approx(float(probs[token]), abs=1e-6)


def test_sampling_at_temperature_zero_is_greedy(model):
    out = generate(model, PROMPT, n_new=5, strategy="sample", temperature=0, seed=11)
    assert out.tokens == greedy_by_hand(model, PROMPT, 5)
    assert out.probs == [1.0] * 5


def test_beam_search_with_one_beam_is_greedy(model):
    beam = generate(model, PROMPT, n_new=6, strategy="beam", beams=1)
    greedy = generate(model, PROMPT, n_new=6, strategy="greedy")
    assert beam.tokens == greedy.tokens
    assert beam.probs == pytest.approx(greedy.probs, abs=1e-6)


@pytest.mark.parametrize("seed, prompt", [(0, PROMPT), (1, [7]), (2, [0, 22, 3]), (3, [9, 9, 9, 9, 9])])
def test_beam_search_finds_a_continuation_at_least_as_likely_as_greedy(seed, prompt):
    model = make_model(seed)
    beam = generate(model, prompt, n_new=5, strategy="beam", beams=4)
    greedy = generate(model, prompt, n_new=5, strategy="greedy")
    assert len(beam.tokens) == 5
    assert log_prob(model, prompt, beam.tokens) >= log_prob(model, prompt, greedy.tokens) - 1e-5
    # the probabilities it reports are those of the tokens it chose
    assert sum(map(math.log, beam.probs)) == pytest.approx(log_prob(model, prompt, beam.tokens), abs=1e-4)


@pytest.mark.parametrize("seed, prompt", [(0, [0, 22, 3]), (3, [7])])   # cases where greedy is not the best
def test_beam_search_as_wide_as_the_vocabulary_finds_the_likeliest_pair_of_tokens(seed, prompt):
    model, V = make_model(seed), SMALL["vocab_size"]
    first = last_logits(model, prompt).log_softmax(-1)                                   # (V,)
    second = model.predict([prompt + [a] for a in range(V)])[:, -1].log_softmax(-1)      # (V, V)
    best = int((first[:, None] + second).argmax())
    best_pair = [best // V, best % V]
    assert generate(model, prompt, n_new=2, strategy="beam", beams=V).tokens == best_pair
    assert generate(model, prompt, n_new=2, strategy="greedy").tokens != best_pair


@pytest.mark.parametrize("use_cache", [False, True], ids=["without-cache", "with-cache"])
@pytest.mark.parametrize("strategy", ["greedy", "sample", "beam"])
def test_generating_past_the_context_slides_the_window_and_never_feeds_more_than_max_len(
        model, monkeypatch, strategy, use_cache):
    reads, predict, read = [], model.predict, model.read

    def spy_predict(tokens):
        reads.append(("all", torch.as_tensor(tokens).shape[-1]))
        return predict(tokens)

    def spy_read(tokens, cache=None):
        reads.append(("new", torch.as_tensor(tokens).shape[-1]))
        return read(tokens, cache)

    monkeypatch.setattr(model, "predict", spy_predict)
    monkeypatch.setattr(model, "read", spy_read)
    out = generate(model, PROMPT, n_new=15, strategy=strategy, beams=2, use_cache=use_cache)
    assert len(out.tokens) == len(out.probs) == 15
    assert out.window_slid
    assert max(n for _, n in reads) == SMALL["max_len"]
    written = [len(PROMPT) + i for i in range(15)]
    if use_cache:       # the prompt once, then one new token a step, until the window slides: all of it each step
        fits = [t for t in written if t <= SMALL["max_len"]]
        assert reads == [("new", len(PROMPT))] + [("new", 1)] * (len(fits) - 1) + \
            [("all", SMALL["max_len"])] * (15 - len(fits))
    else:
        assert reads == [("all", min(t, SMALL["max_len"])) for t in written]
    if strategy == "greedy":
        monkeypatch.undo()
        assert out.tokens == greedy_by_hand(model, PROMPT, 15)


@pytest.mark.parametrize("strategy", ["greedy", "sample", "beam"])
def test_the_window_slides_only_once_the_text_outgrows_the_context(model, strategy):
    fits = SMALL["max_len"] - len(PROMPT) + 1          # the last step reads exactly max_len tokens
    assert not generate(model, PROMPT, n_new=fits, strategy=strategy).window_slid
    assert generate(model, PROMPT, n_new=fits + 1, strategy=strategy).window_slid


@pytest.mark.parametrize("kwargs, message", [
    (dict(prompt=PROMPT, strategy="nucleus"), "strategy must be one of greedy, sample, beam"),
    (dict(prompt=[], strategy="greedy"), "empty"),
    (dict(prompt=[], strategy="beam"), "empty"),
    (dict(prompt=[1, 99], strategy="sample"), "between 0 and 22"),
    (dict(prompt=PROMPT, strategy="beam", beams=0), "beams must be at least 1"),
    (dict(prompt=PROMPT, strategy="sample", temperature=-1), "temperature must be 0 or more"),
])
def test_generate_refuses_what_it_cannot_do(model, kwargs, message):
    with pytest.raises(ValueError, match=message):
        generate(model, n_new=3, **kwargs)


# ---------------------------------------------------------------------------------------------------
# The KV cache: each step reads one new token next to the keys and values of the ones before it.

CACHED = {                                            # every kind of position, grouped heads, a gated MLP, post-norm
    "gpt2-like": dict(pos="learned", activation="gelu_tanh", tie_embeddings=True),
    "2017-post-norm": dict(pos="sinusoidal", norm_position="post", embed_scale=True),
    "no-positions-rms": dict(pos="none", norm="rms"),
    "rope-multi-query": dict(pos="rope", n_kv_heads=1, activation="swiglu", norm="rms", bias=False),
    "llama-like-grouped": dict(d_model=24, n_heads=6, n_kv_heads=2, pos="rope", rope_theta=100_000.0,
                               activation="swiglu", norm="rms", bias=False, tie_embeddings=True, max_len=24),
}


def cached_model(name: str, seed: int = 0) -> TransformerLM:
    torch.manual_seed(seed)
    model = TransformerLM(ModelConfig(**(SMALL | CACHED[name]))).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model


@pytest.mark.parametrize("name", CACHED)
def test_reading_a_text_in_pieces_with_the_cache_gives_the_logits_of_reading_it_at_once(name):
    model = cached_model(name)
    ids = torch.randint(0, SMALL["vocab_size"], (2, model.cfg.max_len), generator=torch.Generator().manual_seed(1))
    whole = model.run(ids)["logits"]                                                # (2, T, V)
    for pieces in ([4, 1, 1, 1, 2], [1] * 9, [9]):
        cache, logits = None, []
        for start, n in zip(itertools.accumulate([0, *pieces]), pieces):
            out, cache = model.read(ids[:, start:start + n], cache)
            logits.append(out)
        assert cache.length == 9
        torch.testing.assert_close(torch.cat(logits, 1), whole[:, :9], rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", CACHED)
@pytest.mark.parametrize("strategy, options", [("greedy", {}), ("sample", dict(temperature=1.0, seed=5)),
                                               ("sample", dict(temperature=0.7, top_k=5, seed=2)),
                                               ("beam", dict(beams=3))], ids=["greedy", "sample", "top-k", "beam"])
def test_with_and_without_the_cache_the_same_tokens_come_out_with_the_same_probabilities(name, strategy, options):
    """Past the context too: once the window slides, every position moves and each step reads it all again."""
    model = cached_model(name)
    n_new = model.cfg.max_len + 3 - len(PROMPT)
    cached = generate(model, PROMPT, n_new, strategy, use_cache=True, **options)
    plain = generate(model, PROMPT, n_new, strategy, use_cache=False, **options)
    assert cached.tokens == plain.tokens and len(cached.tokens) == n_new
    assert cached.probs == pytest.approx(plain.probs, abs=1e-5)
    assert cached.window_slid and plain.window_slid


@pytest.mark.parametrize("name", ["gpt2-like", "llama-like-grouped"])
def test_the_cache_keeps_each_layers_keys_and_values_per_key_value_head_and_says_its_size(name):
    model = cached_model(name)
    cfg = model.cfg
    logits, cache = model.read([PROMPT])
    assert sorted(cache.layers) == [f"blocks.{i}.attn" for i in range(cfg.n_layers)] and cache.length == len(PROMPT)
    trace = model.run([PROMPT])
    for i in range(cfg.n_layers):
        keys, values = cache.layers[f"blocks.{i}.attn"]
        assert keys.shape == values.shape == (1, cfg.kv_heads, len(PROMPT), cfg.d_head)
        assert torch.equal(keys, trace[f"blocks.{i}.attn.k"]) and torch.equal(values, trace[f"blocks.{i}.attn.v"])
    assert cache.nbytes == cache_bytes_per_token(cfg) * len(PROMPT)
    assert cache_bytes_per_token(cfg) == 2 * cfg.n_layers * cfg.kv_heads * cfg.d_head * 4


def test_grouped_query_attention_keeps_a_smaller_cache():
    full, grouped = cached_model("gpt2-like").cfg, cached_model("rope-multi-query").cfg
    assert cache_bytes_per_token(grouped) * full.n_heads == cache_bytes_per_token(full) * grouped.kv_heads
    gpt2 = ModelConfig(vocab_size=50_257, d_model=768, n_heads=12, n_layers=12, d_ff=3072, max_len=1024)
    assert cache_bytes_per_token(gpt2) == 73_728                                        # 72 KB a token


def test_the_cache_is_a_value_reading_more_never_changes_the_one_read_from():
    model = cached_model("llama-like-grouped")
    _, cache = model.read([PROMPT])
    kept = {name: (k.clone(), v.clone()) for name, (k, v) in cache.layers.items()}
    one, grown = model.read([[3]], cache)
    other, _ = model.read([[3]], cache)                       # the same cache, read from again: the same answer
    assert torch.equal(one, other) and grown.length == cache.length + 1 == len(PROMPT) + 1
    assert all(torch.equal(cache.layers[n][0], k) and torch.equal(cache.layers[n][1], v) for n, (k, v) in kept.items())
    assert cache.rows([0, 0]).layers["blocks.0.attn"][0].shape[0] == 2


def test_a_cache_and_new_tokens_beyond_the_context_are_refused():
    model = cached_model("gpt2-like")
    _, cache = model.read([list(range(8))])
    with pytest.raises(ValueError, match="10 tokens is more than this model's context of 9"):
        model.read([[1, 2]], cache)


def test_timing_a_new_token_with_and_without_the_cache():
    model = cached_model("llama-like-grouped")
    times = time_new_token(model, list(range(20)), repeats=2)
    assert times.position == 19 and 0 < times.cached and 0 < times.uncached
