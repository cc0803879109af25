"""Turning a model's next-token distribution into text: temperature, top-k, top-p, sampling and beam search.

Generation is written once, for every model, over one function `next_logp`: the ids written so far (N, t) in,
the log-probabilities of the next token (N, V) out. The decoder-only model reads the last max_len ids
(`generate` below); the encoder-decoder's decoder reads them next to the encoded source (model/seq2seq.py).
Greedy decoding is a beam search with one beam.

The KV cache: `next_logp` also takes and returns a cache (model/layers.py `KVCache`: every layer's keys and values
for the positions it read), so each step reads only the new token; the sampler passes it from step to step, and
beam search keeps the rows of the hypotheses it extends. With and without it the same tokens come out with the
same probabilities (a cache of None means "read everything"). `cache_bytes_per_token` says what it costs,
`time_new_token` what it saves.

`next_token_probs` is the one place where logits become a probability distribution; the app's
sliders and sampling both call it, so what a student sees is exactly what sampling draws from.
`exact_match` measures what greedy decoding writes without decoding: one teacher-forced pass.
"""
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch

from .layers import Edit, KVCache, cache_bytes_per_token, check_tokens  # noqa: F401  (cache_bytes_per_token: its size)
from .transformer import TransformerLM

STRATEGIES = ("greedy", "sample", "beam")
# (written ids (N, t), the cache of the first of them or None) -> (next-token log-probabilities (N, V), the cache of
# all t, or None when the reader keeps none)
NextLogProbs = Callable[[torch.Tensor, KVCache | None], tuple[torch.Tensor, KVCache | None]]


def next_token_probs(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                     top_p: float | None = None) -> torch.Tensor:
    """Probabilities (V,) from one position's logits or log-probabilities (V,); tokens cut by top-k or top-p get 0.

    temperature < 1 sharpens the distribution, > 1 flattens it, 0 means "always the top token".
    top_k keeps the k likeliest tokens; top_p keeps the fewest tokens whose probabilities add up to p.
    """
    if temperature < 0:
        raise ValueError(f"temperature must be 0 or more, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be above 0 and at most 1, got {top_p}")
    logits = logits.detach().float()
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(), logits.numel()).float()
    probs = (logits / temperature).softmax(-1)                          # (V,)
    order = logits.argsort(descending=True, stable=True)                # (V,), ranked by logit: ties the softmax
                                                                        # rounds away keep it; exact ties in token order
    keep = torch.ones_like(probs, dtype=torch.bool)                     # (V,)
    if top_k is not None:
        keep[order[top_k:]] = False
    if top_p is not None and top_p < 1:
        before = probs[order].cumsum(0) - probs[order]                  # mass of the tokens ranked above
        keep[order[before >= top_p]] = False
    probs = probs * keep
    return probs / probs.sum()


@dataclass
class Generation:
    """New tokens and, for each, the probability it had where it was chosen."""
    tokens: list[int] = field(default_factory=list)
    probs: list[float] = field(default_factory=list)
    window_slid: bool = False   # the text outgrew the context, so only the last max_len tokens were read


@dataclass(frozen=True)
class Beam:
    """The best hypothesis (the tokens written after the start, up to and without the end token), its total
    log-probability, at every step the beam's hypotheses with their scores, best first (for display), and the
    probability each written token had where it was chosen."""
    tokens: list[int]
    score: float
    steps: list[list[tuple[list[int], float]]]
    probs: list[float] = field(default_factory=list)


@torch.no_grad()
def sample(next_logp: NextLogProbs, start: list[int], n_steps: int, temperature: float = 1.0,
           top_k: int | None = None, top_p: float | None = None, seed: int = 0, end: int | None = None) -> Generation:
    """Write up to `n_steps` tokens after `start`, each drawn from `next_token_probs` (temperature 0: the
    likeliest); drawing `end` stops (it is not written). The same seed gives the same text."""
    rng = torch.Generator().manual_seed(seed)
    ids, out, cache = list(start), Generation(), None
    for _ in range(n_steps):
        logp, cache = next_logp(torch.tensor([ids]), cache)             # (1, V), the keys and values of `ids`
        probs = next_token_probs(logp[0], temperature, top_k, top_p)    # (V,)
        token = int(torch.multinomial(probs, 1, generator=rng))
        if token == end:
            break
        ids.append(token)
        out.tokens.append(token)
        out.probs.append(float(probs[token]))
    return out


@torch.no_grad()
def beam_search(next_logp: NextLogProbs, start: list[int], n_steps: int, beams: int,
                end: int | None = None) -> Beam:
    """Keep the `beams` likeliest continuations of `start` at every step (score: summed log-probabilities); one
    that writes `end` is finished, and the search stops once no unfinished one can beat the best finished one.
    One beam is greedy decoding."""
    if beams < 1:
        raise ValueError(f"beams must be at least 1, got {beams}")
    alive: list[tuple[list[int], float, list[float]]] = [(list(start), 0.0, [])]   # (ids, score, token probs)
    done: list[tuple[list[int], float, list[float]]] = []
    steps, cache = [], None
    for _ in range(n_steps):
        # 1) score every way to extend every hypothesis by one token
        logp, cache = next_logp(torch.tensor([ids for ids, _, _ in alive]), cache)   # (N, V), the keys and values
        scores = torch.tensor([score for _, score, _ in alive])[:, None] + logp      # (N, V)
        # 2) keep the `beams` best extensions, whichever hypotheses they extend
        top = scores.flatten().topk(min(beams, scores.numel()))
        candidates = []
        for score, i in zip(top.values.tolist(), top.indices.tolist()):
            row, token = divmod(i, logp.shape[1])
            ids, _, probs = alive[row]
            candidates.append((ids + [token], score, probs + [math.exp(float(logp[row, token]))], row))
        steps.append([(ids, score) for ids, score, _, _ in candidates])
        # 3) a hypothesis that wrote `end` is finished; stop when no unfinished one can still beat the best
        alive, rows = [], []
        for ids, score, probs, row in candidates:
            if ids[-1] == end:
                done.append((ids, score, probs))
            else:
                alive.append((ids, score, probs))
                rows.append(row)
        if not alive or (done and max(score for _, score, _ in done) >= alive[0][1]):
            break
        if cache is not None:          # each hypothesis kept extends one of `rows`: keep their keys and values
            cache = cache.rows(rows)
    ids, score, probs = max(done + alive, key=lambda h: h[1])
    written = ids[len(start):]
    if written and written[-1] == end:
        written = written[:-1]
    return Beam(written, score, steps, probs[:len(written)])


def model_logp(model: TransformerLM, use_cache: bool = True, edits: Mapping[str, Edit] | None = None) -> NextLogProbs:
    """The decoder-only model as generation sees it: what comes next after each row of `written` (N, t), read
    through the last max_len tokens. With the cache, only the tokens the cache lacks are read; once the text
    outgrows max_len the window slides, every position moves, and each step reads the whole window again.
    `edits` (as for `model.run`) are applied at every step: a steered model (model/steering.py). With the cache an
    edit sees only the positions a step reads, so one that treats every position alike (steering) writes what it
    writes without the cache."""
    max_len = model.cfg.max_len

    def next_logp(written: torch.Tensor, cache: KVCache | None) -> tuple[torch.Tensor, KVCache | None]:
        if not use_cache or written.shape[1] > max_len:
            window = written[:, -max_len:]                                                # (N, t')
            logits = model.predict(window) if not edits else model.run(window, edits, names=["logits"])["logits"]
            return logits[:, -1].log_softmax(-1), None                                    # (N, V)
        start = 0 if cache is None else cache.length
        new = written[:, start:]                                                          # (N, t - start)
        logits, cache = model.read(new, cache) if not edits else model.read(new, cache, edits)   # (N, t - start, V)
        return logits[:, -1].log_softmax(-1), cache                                       # (N, V)
    return next_logp


@torch.no_grad()
def generate(model: TransformerLM, prompt: list[int], n_new: int, strategy: str = "greedy",
             temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
             beams: int = 3, seed: int = 0, use_cache: bool = True,
             edits: Mapping[str, Edit] | None = None) -> Generation:
    """Continue `prompt` by `n_new` tokens; the same seed gives the same text.

    greedy takes the likeliest token; sample draws from `next_token_probs`; beam keeps the `beams`
    likeliest sequences. The model never reads more than its `max_len`: the window slides. With the KV cache
    (`use_cache`) each step reads one new token; without it, the whole text again: the same tokens, slower.
    `edits` are applied at every step (`model_logp`).
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}; got {strategy!r}")
    prompt = check_tokens(prompt, model.cfg)[0].tolist()
    max_len = model.cfg.max_len
    next_logp = model_logp(model, use_cache, edits)

    if strategy == "sample":
        out = sample(next_logp, prompt, n_new, temperature, top_k, top_p, seed)
    else:
        best = beam_search(next_logp, prompt, n_new, 1 if strategy == "greedy" else beams)
        out = Generation(best.tokens, best.probs)
    out.window_slid = len(prompt) + len(out.tokens) - 1 > max_len    # the last step read more than max_len
    return out


@dataclass(frozen=True)
class TokenTimes:
    """Seconds to read one new token after `position` tokens: with the KV cache (one position's work) and without
    it (every position read again)."""
    position: int
    cached: float
    uncached: float


@torch.no_grad()
def time_new_token(model: TransformerLM, ids: list[int], repeats: int = 5) -> TokenTimes:
    """How long the model takes for the last token of `ids`, with the cache of the ones before it and without:
    the fastest of `repeats` tries each (the first try pays for anything a first call pays for)."""
    ids = check_tokens(ids, model.cfg)                                                     # (1, T)
    _, before = model.read(ids[:, :-1]) if ids.shape[1] > 1 else (None, None)

    def fastest(read: Callable[[], object]) -> float:
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            read()
            best = min(best, time.perf_counter() - start)
        return best

    cached = fastest(lambda: model.read(ids[:, -1:], before))
    uncached = fastest(lambda: model.predict(ids))
    return TokenTimes(ids.shape[1] - 1, cached, uncached)


def exact_match(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100) -> float:
    """The share of answers greedy decoding writes exactly, from one teacher-forced pass: logits (N, T, V) for
    labels (N, T). A row counts when the top prediction is the label at every position that counts (labels equal
    to `ignore_index` do not): then every greedy step writes the next token of the answer, and the first wrong
    top prediction would have taken greedy decoding off it."""
    right = (logits.argmax(-1) == labels) | (labels == ignore_index)    # (N, T)
    return float(right.all(-1).float().mean())
