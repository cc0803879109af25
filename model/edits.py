"""Ready-made "what if" edits for `model.run(tokens, edits=...)`.

Each helper returns a dict {trace name: function}; combine several with `combine`.

    knock_out_head(layer=0, head=1)   zero one head's output (its slice of attn.z)
    remove_positions(cfg)             positional encodings (and rotary positions' angles) to zeros: a bag of words
    skip_mlp(layer=1)                 zero an MLP's contribution to the stream
    remove_scaling(cfg)               undo the 1/sqrt(K) in the attention scores
    scoped("decoder.", edits)         the same edits inside an encoder-decoder's encoder or decoder

An encoder-decoder's cross-attention head: scoped("decoder.", knock_out_head(0, 1, "cross_attn")).
"""
import math
from collections.abc import Mapping

import torch

from .config import ModelConfig
from .layers import Edit


def knock_out_head(layer: int, head: int, attention: str = "attn") -> dict[str, Edit]:
    """Zero head `head` of block `layer`: its mixed values z never reach the output projection. `attention` is
    "attn" (self-attention) or, in an encoder-decoder's decoder, "cross_attn". With grouped-query attention only
    this query head goes: the other heads of its group still read their shared keys and values."""
    def zero_head(z: torch.Tensor) -> torch.Tensor:               # z: (B, H, T, K)
        z = z.clone()
        z[:, head] = 0.0
        return z
    return {f"blocks.{layer}.{attention}.z": zero_head}


def remove_positions(cfg: ModelConfig | None = None) -> dict[str, Edit]:
    """Replace the positional encodings by zeros, so word order is invisible to the model. Rotary positions add
    nothing to the stream: give the model's `cfg`, and their angles become zeros too, so no query or key turns."""
    edits = {"embed.pos": torch.zeros_like}
    if cfg is not None and cfg.pos == "rope":
        edits["embed.rope"] = torch.zeros_like
    return edits


def skip_mlp(layer: int) -> dict[str, Edit]:
    """Zero the MLP's output in block `layer`, as if the layer had no MLP."""
    return {f"blocks.{layer}.mlp.out": torch.zeros_like}


def remove_scaling(cfg: ModelConfig, layers: list[int] | None = None) -> dict[str, Edit]:
    """Multiply the scores back by sqrt(K): attention as it would be without the 1/sqrt(K) scaling."""
    factor = math.sqrt(cfg.d_head)
    layers = range(cfg.n_layers) if layers is None else layers
    return {f"blocks.{i}.attn.scores": (lambda s: s * factor) for i in layers}


def scoped(prefix: str, edits: Mapping[str, Edit]) -> dict[str, Edit]:
    """`edits` for the part of an encoder-decoder named by `prefix` ("encoder." or "decoder.")."""
    return {prefix + name: fn for name, fn in edits.items()}


def combine(*edit_sets: Mapping[str, Edit]) -> dict[str, Edit]:
    """Merge edit dicts; two edits on the same name are applied one after the other."""
    merged: dict[str, Edit] = {}
    for edits in edit_sets:
        for name, fn in edits.items():
            if name in merged:
                first = merged[name]
                merged[name] = lambda x, first=first, second=fn: second(first(x))
            else:
                merged[name] = fn
    return merged
