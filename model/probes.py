"""Minimal-pair probes: does the model prefer the right next word over a wrong one?

A probe is (prefix, good, bad), for example ("the cat near the dogs", "is", "are"). The model passes
when its logit for `good` after `prefix` is higher than its logit for `bad`.
"""
from collections.abc import Sequence

import torch

from .tokenizers import Tokenizer
from .transformer import TransformerLM


@torch.no_grad()
def probe_accuracy(model: TransformerLM, tokenizer: Tokenizer, probes: Sequence) -> float:
    """The fraction of probes where the model ranks `good` above `bad` as the next token."""
    by_length: dict[int, list] = {}          # batch prefixes of equal length together
    for probe in probes:
        ids = tokenizer.encode(probe.prefix)[-model.cfg.max_len:]
        good, bad = tokenizer.encode(probe.good), tokenizer.encode(probe.bad)
        if len(good) != 1 or len(bad) != 1:
            raise ValueError(f"probe words must be single tokens: {probe.good!r}, {probe.bad!r}")
        by_length.setdefault(len(ids), []).append((ids, good[0], bad[0]))
    correct = 0
    for items in by_length.values():
        logits = model.predict([ids for ids, _, _ in items])[:, -1]      # (N, V)
        rows = torch.arange(len(items))
        good = torch.tensor([g for _, g, _ in items])
        bad = torch.tensor([b for _, _, b in items])
        correct += int((logits[rows, good] > logits[rows, bad]).sum())
    return correct / len(probes)
