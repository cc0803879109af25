"""Why the model predicts what it predicts: direct logit attribution and contribution routes.

In a pre-norm transformer the residual stream at the end is a sum: token embedding + position embedding + what
every attention head and every MLP wrote (plus the attention output biases). The final norm is not linear, but
with this sentence's own scale held fixed (TransformerLens' `apply_ln=True`) it is: centre each part, divide by
the scale the real run used, multiply by the gain. Each part then gives the logit of a token through the
unembedding, and the parts add up to the logit the model computed (the final norm's bias is a part of its own).

    attribute(model, trace, position, targets)   -> Attribution: one row per part, one column per target token
    stream_of(model)                             the embedding, blocks, final norm and trace prefix of the stack
                                                 that writes the logits (the decoder's, in an encoder-decoder)
    head_sources(...)                            a head's contribution split by the source position it read
    routes(model, trace, position, threshold)    the contribution routes of Ferrando & Voita 2024 ("Information
                                                 flow routes"): which earlier tokens, through which heads and MLPs,
                                                 built the stream at `position`
    node_update_logits(...)                      what one layer's update at one position promotes and suppresses

Everything reads the trace by name (model/layers.py), never changes the model, and works for the decoder-only
model and the encoder-decoder's decoder (self-attention heads, cross-attention heads, MLPs).
"""
from dataclasses import dataclass

import torch
import torch.nn as nn

from .layers import Trace, per_query_head
from .seq2seq import EncoderDecoder

POST_NORM = ("This model normalises the stream after every sublayer (post-norm, as the 2017 paper does), so the "
             "parts each layer wrote are rescaled by the layers after them and no longer add up to the logit. "
             "Direct logit attribution needs a pre-norm model (like tinytales, roses and GPT-2).")


@dataclass(frozen=True)
class Stream:
    """The stack whose final stream the unembedding reads."""
    prefix: str                    # trace prefix: "" or "decoder."
    blocks: nn.ModuleList
    final_norm: nn.Module
    unembed: nn.Linear
    attentions: tuple[str, ...]    # "attn", and "cross_attn" in a decoder


def stream_of(model: nn.Module) -> Stream:
    """The decoder-only model's stack, or the encoder-decoder's decoder; a ValueError for a post-norm model."""
    if model.cfg.norm_position != "pre":
        raise ValueError(POST_NORM)
    if isinstance(model, EncoderDecoder):
        return Stream("decoder.", model.decoder_blocks, model.decoder_norm, model.unembed, ("attn", "cross_attn"))
    return Stream("", model.blocks, model.final_norm, model.unembed, ("attn",))


@dataclass(frozen=True)
class Part:
    """One term of the decomposition."""
    kind: str                      # "embed", "head", "mlp", "bias"
    label: str                     # what a student reads: "token embedding", "L1 H3", "MLP 0", ...
    layer: int | None = None
    head: int | None = None
    attention: str | None = None   # "attn" or "cross_attn" for a head


@dataclass(frozen=True)
class Attribution:
    """The logits of `targets` at `position`, split into parts: values[i, j] is part i's share of target j's logit.
    `logits[j]` is what the model computed; values.sum(0) equals it (within float error)."""
    parts: tuple[Part, ...]
    targets: tuple[int, ...]
    position: int
    values: torch.Tensor           # (P, n) float64
    logits: torch.Tensor           # (n,) the model's own logits, float64
    scale: float                   # the final norm's divisor for this position (1 without a norm)

    def column(self, target: int) -> torch.Tensor:
        """The parts' contributions (P,) to one target token's logit."""
        return self.values[:, self.targets.index(target)]

    def difference(self, target: int, other: int) -> torch.Tensor:
        """Why `target` rather than `other`: each part's contribution (P,) to logit(target) - logit(other)."""
        return self.column(target) - self.column(other)


def output_bias(attention: nn.Module) -> torch.Tensor:
    """The bias attention's output projection adds (D,): zeros for a model without biases (Llama)."""
    W_o = attention.W_o
    return W_o.bias if W_o.bias is not None else torch.zeros(W_o.weight.shape[0])


def _head_weights(attention: nn.Module, n_heads: int) -> torch.Tensor:
    """W_O split by head: (H, K, D), so z[h] (T, K) @ W[h] is head h's output (without the bias)."""
    D = attention.W_o.weight.shape[0]
    return attention.W_o.weight.T.reshape(n_heads, D // n_heads, D)                     # (H, K, D)


def head_writes(attention: nn.Module, z: torch.Tensor) -> torch.Tensor:
    """What each head writes into the stream at one position (H, D), from its mixed values there z (H, K): z[h]
    through head h's slice of W_O (without the bias). Any block, pre- or post-norm."""
    return torch.einsum("hk,hkd->hd", z, _head_weights(attention, z.shape[0]))              # (H, D)


@torch.no_grad()
def part_vectors(model: nn.Module, trace: Trace, position: int) -> tuple[tuple[Part, ...], torch.Tensor]:
    """Every part's vector (P, D) in the final stream at `position`; they sum to the stream the final norm reads."""
    s = stream_of(model)
    cfg, p, H = model.cfg, s.prefix, model.cfg.n_heads
    parts: list[Part] = [Part("embed", "token embedding"), Part("embed", "position embedding")]
    vectors = [trace[f"{p}embed.tok"][0, position], trace[f"{p}embed.pos"][0, position]]  # each (D,)
    bias = torch.zeros(cfg.d_model)                                                       # (D,)
    for layer, block in enumerate(s.blocks):
        for attention in s.attentions:
            module = getattr(block, attention)
            z = trace[f"{p}blocks.{layer}.{attention}.z"][0, :, position]                   # (H, K)
            heads = head_writes(module, z)                                                 # (H, D)
            word = "cross " if attention == "cross_attn" else ""
            for h in range(H):
                parts.append(Part("head", f"L{layer} {word}H{h}", layer, h, attention))
                vectors.append(heads[h])
            bias = bias + output_bias(module)
        parts.append(Part("mlp", f"MLP {layer}", layer))
        vectors.append(trace[f"{p}blocks.{layer}.mlp.out"][0, position])
    parts.append(Part("bias", "attention biases"))
    vectors.append(bias)
    return tuple(parts), torch.stack(vectors).double()                                     # (P, D)


@dataclass(frozen=True)
class FinalNorm:
    """The final norm with one position's scale held fixed: a linear map from a stream part to what the
    unembedding reads."""
    centre: bool                   # LayerNorm subtracts the mean; RMSNorm and no norm do not
    scale: float
    gain: torch.Tensor             # (D,) float64
    bias: torch.Tensor             # (D,) float64, zeros without one

    def apply(self, parts: torch.Tensor) -> torch.Tensor:
        """(P, D) stream parts -> (P, D) their share of the normalised stream (without the norm's bias)."""
        if self.centre:
            parts = parts - parts.mean(-1, keepdim=True)
        return parts / self.scale * self.gain


@torch.no_grad()
def final_norm_at(model: nn.Module, trace: Trace, position: int) -> FinalNorm:
    """The final norm at `position` of this run, its scale read from the stream it normalised."""
    s = stream_of(model)
    norm, D = s.final_norm, model.cfg.d_model
    x = trace[f"{s.prefix}blocks.{len(s.blocks) - 1}.resid_post"][0, position].double()   # (D,)
    ones, zeros = torch.ones(D, dtype=torch.float64), torch.zeros(D, dtype=torch.float64)
    if isinstance(norm, nn.LayerNorm):
        scale = float(torch.sqrt(x.var(unbiased=False) + norm.eps))
        gain = norm.weight.double() if norm.weight is not None else ones
        bias = norm.bias.double() if norm.bias is not None else zeros
        return FinalNorm(True, scale, gain, bias)
    if isinstance(norm, nn.RMSNorm):
        eps = norm.eps if norm.eps is not None else torch.finfo(torch.float32).eps
        scale = float(torch.sqrt((x * x).mean() + eps))
        return FinalNorm(False, scale, norm.weight.double() if norm.weight is not None else ones, zeros)
    return FinalNorm(False, 1.0, ones, zeros)


def check_position(trace: Trace, position: int, prefix: str = "") -> int:
    """`position` as an index into the stream (negative counts from the end), or a ValueError."""
    T = trace[f"{prefix}embed.out"].shape[1]
    if not -T <= position < T:
        raise ValueError(f"position {position} is outside the sentence: it has {T} tokens (0 to {T - 1})")
    return position % T


@torch.no_grad()
def attribute(model: nn.Module, trace: Trace, position: int, targets) -> Attribution:
    """Direct logit attribution of `targets` (token ids) at `position`, with this run's final-norm scale."""
    s = stream_of(model)
    position = check_position(trace, position, s.prefix)
    targets = tuple(int(t) for t in targets)
    V = s.unembed.weight.shape[0]
    if not targets or any(not 0 <= t < V for t in targets):
        raise ValueError(f"target tokens must be ids between 0 and {V - 1}; got {list(targets)}")
    parts, vectors = part_vectors(model, trace, position)                                   # (P, D)
    norm = final_norm_at(model, trace, position)
    W_U = s.unembed.weight[list(targets)].double()                                          # (n, D)
    values = norm.apply(vectors) @ W_U.T                                                    # (P, n)
    norm_bias = (norm.bias @ W_U.T)[None]                                                   # (1, n)
    if s.unembed.bias is not None:
        norm_bias = norm_bias + s.unembed.bias[list(targets)].double()[None]
    values = torch.cat([values, norm_bias])
    parts = (*parts, Part("bias", "final norm bias"))
    logits = trace["logits"][0, position, list(targets)].double()                           # (n,)
    return Attribution(parts, targets, position, values, logits, norm.scale)


@torch.no_grad()
def head_sources(model: nn.Module, trace: Trace, position: int, layer: int, head: int, target: int,
                 attention: str = "attn", other: int | None = None) -> torch.Tensor:
    """Head (`layer`, `head`)'s direct contribution to logit(target) [- logit(other)] at `position`, split by the
    source position it read (S,): pattern[position, j] * v[j] through W_O, the final norm and the unembedding.
    The entries add up to the head's bar in `attribute`."""
    s = stream_of(model)
    name = f"{s.prefix}blocks.{layer}.{attention}"
    pattern = trace[f"{name}.pattern"][0, head, position].double()                          # (S,)
    v = per_query_head(trace[f"{name}.v"], model.cfg.n_heads)[0, head].double()              # (S, K), its group's
    W = _head_weights(getattr(s.blocks[layer], attention), model.cfg.n_heads)[head].double()  # (K, D)
    per_source = pattern[:, None] * (v @ W)                                                 # (S, D)
    direction = s.unembed.weight[target].double()                                           # (D,)
    if other is not None:
        direction = direction - s.unembed.weight[other].double()
    return final_norm_at(model, trace, position).apply(per_source) @ direction              # (S,)


@torch.no_grad()
def node_update_logits(model: nn.Module, trace: Trace, position: int, layer: int, sublayer: str) -> torch.Tensor:
    """What block `layer`'s `sublayer` ("attn", "cross_attn" or "mlp") added to the stream at `position`, read
    directly by the unembedding through this position's final norm (V,): above zero it promotes a token, below
    zero it suppresses it (the logit lens on one update, as llm-transparency-tool shows a block's tokens)."""
    s = stream_of(model)
    update = trace[f"{s.prefix}blocks.{layer}.{sublayer}.out"][0, position].double()       # (D,)
    norm = final_norm_at(model, trace, position)
    return norm.apply(update[None])[0] @ s.unembed.weight.double().T                        # (V,)


# --- contribution routes (Ferrando & Voita 2024) -------------------------------------------------------------

@dataclass(frozen=True)
class Edge:
    """A contribution to the stream at (`layer`, `target`) coming from position `source`: through a head, the MLP
    or the residual connection (`kind` "head", "mlp", "residual"). `into` says which state it builds: "mid" (after
    attention: the stream block `layer` hands its MLP) or "post" (leaving block `layer`). `weight` is its share
    (0 to 1) of that state, by the proximity measure of Ferrando & Voita."""
    layer: int
    into: str
    source: int
    target: int
    kind: str
    weight: float
    head: int | None = None


def proximity(total: torch.Tensor, parts: torch.Tensor) -> torch.Tensor:
    """Ferrando & Voita's importance of each part (N, D) of a sum `total` (D,): max(0, |total| - |total - part|),
    normalised to add up to 1 (N,). A part that points where the sum points and is as long counts most."""
    closeness = (total.norm() - (total[None] - parts).norm(dim=-1)).clamp(min=0)           # (N,)
    return closeness / closeness.sum().clamp(min=1e-12)


@torch.no_grad()
def values_out(model: nn.Module, trace: Trace, layer: int) -> torch.Tensor:
    """Each head's value at each source through its slice of W_O (H, T, D): what a head writes per unit of
    attention to that source (shared by every query position of the layer)."""
    s = stream_of(model)
    v = per_query_head(trace[f"{s.prefix}blocks.{layer}.attn.v"], model.cfg.n_heads)[0].double()  # (H, T, K)
    W = _head_weights(s.blocks[layer].attn, model.cfg.n_heads).double()                     # (H, K, D)
    return torch.einsum("htk,hkd->htd", v, W)                                               # (H, T, D)


@torch.no_grad()
def layer_edges(model: nn.Module, trace: Trace, layer: int, position: int,
                written: torch.Tensor | None = None) -> list[Edge]:
    """Every edge into position `position` of block `layer`, weighted; a decoder-only block (self-attention).
    `written` is `values_out` of the layer, when the caller already has it."""
    s = stream_of(model)
    name, H = f"{s.prefix}blocks.{layer}", model.cfg.n_heads
    block = s.blocks[layer]
    T = trace[f"{name}.resid_pre"].shape[1]
    # 1) attention: resid_mid = resid_pre + sum over heads and sources of pattern * v W_O + b_O
    pattern = trace[f"{name}.attn.pattern"][0, :, position].double()                       # (H, T)
    written = values_out(model, trace, layer) if written is None else written                # (H, T, D)
    per_source = pattern[..., None] * written                                               # (H, T, D)
    resid = trace[f"{name}.resid_pre"][0, position].double()                                # (D,)
    parts = torch.cat([resid[None], per_source.reshape(H * T, -1), output_bias(block.attn).double()[None]])
    weights = proximity(trace[f"{name}.resid_mid"][0, position].double(), parts)           # (1 + H*T + 1,)
    edges = [Edge(layer, "mid", position, position, "residual", float(weights[0]))]
    for h in range(H):
        for j in range(position + 1):
            edges.append(Edge(layer, "mid", j, position, "head", float(weights[1 + h * T + j]), h))
    # 2) the MLP: resid_post = resid_mid + mlp.out
    parts = torch.stack([trace[f"{name}.resid_mid"][0, position], trace[f"{name}.mlp.out"][0, position]]).double()
    weights = proximity(trace[f"{name}.resid_post"][0, position].double(), parts)
    edges.append(Edge(layer, "post", position, position, "residual", float(weights[0])))
    edges.append(Edge(layer, "post", position, position, "mlp", float(weights[1])))
    return edges


@torch.no_grad()
def routes(model: nn.Module, trace: Trace, position: int, threshold: float = 0.04) -> list[Edge]:
    """The routes that build the stream at `position` leaving the last block: from there backwards, every edge
    of weight at least `threshold` into a state already on a route (llm-transparency-tool's default is 0.04).
    Edges come from the last layer down; an encoder-decoder is refused (its cross-attention reads the source)."""
    if isinstance(model, EncoderDecoder):
        raise ValueError("contribution routes are drawn for decoder-only models; an encoder-decoder's decoder also "
                         "reads the source, whose routes this graph has no place for")
    s = stream_of(model)
    position = check_position(trace, position, s.prefix)
    reached = {position}                      # positions whose stream leaving the current layer is on a route
    kept: list[Edge] = []
    for layer in reversed(range(len(s.blocks))):
        into_pre = set()
        written = values_out(model, trace, layer)                                           # (H, T, D)
        for p in sorted(reached):
            edges = layer_edges(model, trace, layer, p, written)
            post = [e for e in edges if e.into == "post" and e.weight >= threshold]
            kept.extend(post)
            if post:                       # the stream after attention is on a route (the MLP reads it too)
                mid = [e for e in edges if e.into == "mid" and e.weight >= threshold]
                kept.extend(mid)
                into_pre.update(e.source for e in mid)
        reached = into_pre
    return kept
