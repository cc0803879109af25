"""Steering: add a direction to the residual stream while the model writes, and see what it writes instead.

The direction is added after block `layer` (to `blocks.{layer}.resid_post`) at every position, strength times over, as
an edit passed to `model.run` or `generate` (never a hook on the shared model): every later block, and every later
token, reads the steered stream.

    steering_edit(layer, direction, strength)        the edit: {"blocks.L.resid_post": x + strength x direction}
    neuron_direction(model, layer, neuron)           what a feed-forward neuron writes: its W_out column, unit length
    difference_direction(model, ids_a, ids_b, layer) sentence A's residual stream after the block minus B's ("I love"
                                                     minus "I hate"), averaged over their tokens or at the last one
    check_direction(model, direction)                any vector (a dictionary feature's decoder row) checked against
                                                     the model's width
    steered_continuation(model, ids, edits, n)       greedy text with and without the edits, each token's probability
    next_token_shift(model, ids, edits, k)           how every next-token probability moved: the top risers and fallers

    from model.steering import difference_direction, steered_continuation, steering_edit
    v = difference_direction(model, tok.encode("I love"), tok.encode("I hate"), layer=1)
    out = steered_continuation(model, tok.encode("I think you are"), steering_edit(1, v, 8.0), 20)
    tok.decode(out.plain.tokens), tok.decode(out.steered.tokens)
"""
import math
from dataclasses import dataclass

import torch

from .generate import Generation, generate
from .layers import Edit
from .neurons import check_neuron
from .transformer import TransformerLM

MAX_STRENGTH = 1_000.0      # far beyond any strength that means something: the added vector would swamp the stream
HOW = ("mean", "last")      # a difference of sentences: their residuals averaged over tokens, or at the last token
OVERFLOW = ("Steered this hard, the model's numbers overflow (its scores become infinite or NaN), so there is no text "
            "to show. Try a smaller strength.")


def check_strength(strength: float) -> float:
    """The strength as a float, or a ValueError a student can act on."""
    try:
        strength = float(strength)
    except (TypeError, ValueError):
        raise ValueError(f"the strength must be a number, got {strength!r}") from None
    if not math.isfinite(strength) or abs(strength) > MAX_STRENGTH:
        raise ValueError(f"a strength of {strength:g} is too large to mean anything: the residual stream's own vectors "
                         f"are far smaller. Choose a strength between −{MAX_STRENGTH:,.0f} and {MAX_STRENGTH:,.0f}.")
    return strength


def check_direction(model: TransformerLM, direction) -> torch.Tensor:
    """`direction` as a float vector (D,) of this model's width, finite; otherwise a ValueError saying what is wrong."""
    direction = torch.as_tensor(direction, dtype=torch.float32).detach()
    D = model.cfg.d_model
    if direction.dim() != 1 or direction.numel() != D:
        raise ValueError(f"the direction has shape {tuple(direction.shape)}, but this model's residual stream holds "
                         f"{D:,} numbers per token: a direction must be {D:,} numbers (is it from another model?)")
    if not torch.isfinite(direction).all():
        raise ValueError("the direction contains NaN or infinite values")
    return direction


def steering_edit(layer: int, direction, strength: float) -> dict[str, Edit]:
    """Add `strength` x `direction` (D,) to the residual stream after block `layer`, at every position: an edit for
    `model.run(ids, edits=...)` and `generate(..., edits=...)`."""
    strength = check_strength(strength)
    direction = torch.as_tensor(direction, dtype=torch.float32).detach()
    if direction.dim() != 1 or not torch.isfinite(direction).all():
        raise ValueError(f"a direction must be one finite vector, got shape {tuple(direction.shape)}")
    added = strength * direction                                                      # (D,)

    def steer(x: torch.Tensor) -> torch.Tensor:                                       # x: (B, T, D)
        if x.shape[-1] != added.numel():
            raise ValueError(f"the direction has {added.numel():,} numbers but this model's residual stream holds "
                             f"{x.shape[-1]:,} per token")
        return x + added
    return {f"blocks.{int(layer)}.resid_post": steer}


def neuron_direction(model: TransformerLM, layer: int, neuron: int) -> torch.Tensor:
    """What neuron `neuron` of layer `layer` writes into the stream per unit of its activation (its column of W_out,
    (D,)), scaled to length 1."""
    check_neuron(model, layer, neuron)
    w = model.blocks[layer].mlp.W_out.weight[:, neuron].detach().float()              # (D,)
    norm = float(w.norm())
    if norm == 0:
        raise ValueError(f"neuron {neuron} of layer {layer} writes nothing: its output weights are all 0")
    return w / norm


def difference_direction(model: TransformerLM, ids_a: list[int], ids_b: list[int], layer: int,
                         how: str = "mean") -> torch.Tensor:
    """Sentence A's residual stream after block `layer` minus sentence B's (D,): averaged over each sentence's tokens
    ("mean"), or at each one's last token ("last"). Its length is kept: strength 1 adds exactly the difference."""
    if how not in HOW:
        raise ValueError(f"how must be one of {', '.join(HOW)}, got {how!r}")
    if not 0 <= int(layer) < model.cfg.n_layers:
        raise ValueError(f"there is no layer {layer}: this model's layers are 0 to {model.cfg.n_layers - 1}")
    for which, ids in (("first", ids_a), ("second", ids_b)):
        if ids is None or len(ids) == 0:
            raise ValueError(f"the {which} sentence of the difference is empty: type a few words in it")
    name = f"blocks.{int(layer)}.resid_post"
    a, b = (model.run(list(ids), names=[name])[name][0] for ids in (ids_a, ids_b))    # (T_a, D), (T_b, D)
    return (a.mean(0) - b.mean(0)) if how == "mean" else (a[-1] - b[-1])             # (D,)


@dataclass(frozen=True)
class Steered:
    """Greedy text after the same prompt without and with the edits; each token with the probability it had where it
    was written (Generation.probs)."""
    prompt: list[int]
    plain: Generation
    steered: Generation

    @property
    def first_difference(self) -> int | None:
        """The first step (0-based) at which the two texts differ, or None when they never do."""
        for i, (a, b) in enumerate(zip(self.plain.tokens, self.steered.tokens)):
            if a != b:
                return i
        return None if len(self.plain.tokens) == len(self.steered.tokens) else min(len(self.plain.tokens),
                                                                                   len(self.steered.tokens))


def steered_continuation(model: TransformerLM, ids: list[int], edits: dict[str, Edit], n_tokens: int) -> Steered:
    """`n_tokens` greedy tokens after `ids`, without and with `edits` (model/generate.py's greedy decoding with the KV
    cache, the edits applied at every step). A ValueError says when the steered numbers overflow."""
    if n_tokens < 1:
        raise ValueError(f"write at least one token, not {n_tokens}")
    plain = generate(model, ids, n_tokens)
    steered = generate(model, ids, n_tokens, edits=edits)
    if not all(math.isfinite(p) for p in steered.probs):
        raise ValueError(OVERFLOW)
    return Steered(list(ids), plain, steered)


@dataclass(frozen=True)
class Shift:
    """The next token's probabilities after the prompt, without (`before`) and with (`after`) the edits, (V,) each,
    and the k tokens whose probability rose most and fell most (ids, largest change first)."""
    before: torch.Tensor
    after: torch.Tensor
    risers: list[int]
    fallers: list[int]

    def change(self, token: int) -> float:
        return float(self.after[token] - self.before[token])


def next_token_shift(model: TransformerLM, ids: list[int], edits: dict[str, Edit], k: int = 10) -> Shift:
    """How far each next-token probability after `ids` moves with `edits`: the k largest rises and falls. A ValueError
    says when the steered numbers overflow."""
    plain = model.run(list(ids), names=["logits"])["logits"][0, -1]                   # (V,)
    steered = model.run(list(ids), edits=edits, names=["logits"])["logits"][0, -1]    # (V,)
    if not torch.isfinite(steered).all():
        raise ValueError(OVERFLOW)
    before, after = plain.softmax(-1), steered.softmax(-1)                             # (V,) each
    delta = after - before
    k = min(k, delta.numel())
    rise, fall = delta.topk(k), (-delta).topk(k)
    return Shift(before, after, [i for i, d in zip(rise.indices.tolist(), rise.values.tolist()) if d > 0],
                 [i for i, d in zip(fall.indices.tolist(), fall.values.tolist()) if d > 0])
