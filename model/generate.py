"""Turning logits into text: temperature, top-k, top-p, greedy, sampling and beam search.

`next_token_probs` is the one place where logits become a probability distribution; the app's
sliders and `generate` both call it, so what a student sees is exactly what sampling draws from.
"""
import math
from dataclasses import dataclass, field

import torch

from .transformer import TransformerLM

STRATEGIES = ("greedy", "sample", "beam")


def next_token_probs(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                     top_p: float | None = None) -> torch.Tensor:
    """Probabilities (V,) from one position's logits (V,); tokens cut by top-k or top-p get 0.

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
    order = probs.argsort(descending=True)                              # (V,)
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


@torch.no_grad()
def generate(model: TransformerLM, prompt: list[int], n_new: int, strategy: str = "greedy",
             temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
             beams: int = 3, seed: int = 0) -> Generation:
    """Continue `prompt` by `n_new` tokens; the same seed gives the same text.

    greedy takes the likeliest token; sample draws from `next_token_probs`; beam keeps the `beams`
    likeliest sequences. The model never reads more than its `max_len`: the window slides.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}; got {strategy!r}")
    prompt = model.check_tokens(prompt)[0].tolist()
    if strategy == "beam":
        return _beam_search(model, prompt, n_new, beams)
    rng = torch.Generator().manual_seed(seed)
    ids, out = list(prompt), Generation()
    for _ in range(n_new):
        window = ids[-model.cfg.max_len:]
        out.window_slid |= len(window) < len(ids)
        logits = model.predict(window)[0, -1]                           # (V,)
        if strategy == "greedy":
            probs = logits.softmax(-1)
            token = int(probs.argmax())
        else:
            probs = next_token_probs(logits, temperature, top_k, top_p)
            token = int(torch.multinomial(probs, 1, generator=rng))
        ids.append(token)
        out.tokens.append(token)
        out.probs.append(float(probs[token]))
    return out


def _beam_search(model: TransformerLM, prompt: list[int], n_new: int, beams: int) -> Generation:
    """Keep the `beams` sequences with the highest total log-probability, extend all, keep the best."""
    if beams < 1:
        raise ValueError(f"beams must be at least 1, got {beams}")
    # each beam: (total log-prob, token ids, per-token probabilities)
    alive = [(0.0, list(prompt), [])]
    slid = False
    for _ in range(n_new):
        windows = torch.tensor([ids[-model.cfg.max_len:] for _, ids, _ in alive])   # (beams, T)
        slid |= windows.shape[1] < len(alive[0][1])
        logp = model.predict(windows)[:, -1].log_softmax(-1)                        # (beams, V)
        candidates = []
        for (score, ids, probs), row in zip(alive, logp):
            top = row.topk(min(beams, row.numel()))
            for lp, token in zip(top.values.tolist(), top.indices.tolist()):
                candidates.append((score + lp, ids + [token], probs + [math.exp(lp)]))
        candidates.sort(key=lambda c: c[0], reverse=True)
        alive = candidates[:beams]
    _, ids, probs = alive[0]
    return Generation(tokens=ids[len(prompt):], probs=probs, window_slid=slid)
