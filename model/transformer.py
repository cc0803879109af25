"""A small decoder-only transformer, written to be read top to bottom.

Its pieces (recorder, trace, norm, embedding, attention, MLP, block, the stack) are in model/layers.py,
shared with the encoder-decoder. Attention is computed explicitly (no fused kernel) so its pattern
exists and can be shown.

Every intermediate has a stable name (the project's vocabulary, used by pages, figures and tests):

    tokens                    [B, T]        the input token ids
    embed.tok                 [B, T, D]     token embeddings (after embed_scale)
    embed.pos                 [B, T, D]     positional encodings (zeros when pos is "none" or "rope")
    embed.out                 [B, T, D]     tok + pos
    embed.rope                [B, T, R/2]   pos "rope" only: the angle each turned q/k pair turns by (R = cfg.d_rotary)
    blocks.i.resid_pre        [B, T, D]     the residual stream entering block i
    blocks.i.attn.in          [B, T, D]     what attention reads
    blocks.i.attn.q_unrotated [B, H, T, K]  pos "rope" only: the queries before their turn
    blocks.i.attn.k_unrotated [B, G, T, K]  pos "rope" only: the keys before their turn
    blocks.i.attn.q           [B, H, T, K]  queries per head (turned by embed.rope with rotary positions)
    blocks.i.attn.k/.v        [B, G, T, K]  keys (turned, with rotary positions) and values per key/value head
    blocks.i.attn.scores      [B, H, T, T]  q.k / sqrt(K), before the causal mask; query head h reads key head
                                            h // (H / G)
    blocks.i.attn.pattern     [B, H, T, T]  softmax after the mask: who attends to whom
    blocks.i.attn.z           [B, H, T, K]  pattern @ v, per head
    blocks.i.attn.out         [B, T, D]     after the output projection
    blocks.i.resid_mid        [B, T, D]     the stream between attention and the MLP
    blocks.i.mlp.in           [B, T, D]     what the MLP (the feed-forward network) reads
    blocks.i.mlp.pre          [B, T, F]     hidden layer before the activation (not in a gated MLP)
    blocks.i.mlp.gate/.up     [B, T, F]     activation "swiglu" only: the gate and the up projection
    blocks.i.mlp.post         [B, T, F]     hidden layer after the activation (gated: SiLU(gate) x up)
    blocks.i.mlp.out          [B, T, D]     after the contracting projection
    blocks.i.resid_post       [B, T, D]     the stream leaving block i
    final.norm                [B, T, D]     the final normalisation (identity for post-norm and norm "none")
    logits                    [B, T, V]     a score per vocabulary word, per position

B batch, T positions, D d_model, H heads, G key/value heads (H unless grouped), K = D / H, F d_ff, V vocab size.

`model(tokens)` returns logits for training. `model.run(tokens)` returns a read-only `Trace` of every
name above from one forward pass. `model.read(tokens, cache)` is generation's pass: it reads new tokens after
the ones a `KVCache` holds and returns their logits with the cache grown by their keys and values.
Nothing is stored on the modules: one model object serves many visitors at once, so the trace and the cache
are return values and "what if" edits are arguments.
"""
from collections.abc import Iterable, Mapping

import torch
import torch.nn as nn

from .config import ModelConfig
from .layers import (FINAL_NAMES, Block, Edit, Embedding, KVCache, Recorder, Trace, block_name,  # noqa: F401
                     block_names, causal_mask, check_tokens, embed_names, make_final_norm, sinusoidal_table, stack,
                     start_run)


class TransformerLM(nn.Module):
    """Embedding, n_layers blocks, a final norm and an unembedding to one score per vocabulary word."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = Embedding(cfg)
        self.blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layers))
        self.final_norm = make_final_norm(cfg)
        self.unembed = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.apply(self._init_weights)
        if cfg.tie_embeddings:                 # GPT-2: the same matrix reads tokens in and scores them out
            self.unembed.weight = self.embed.tok.weight

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        """GPT-2's initialisation: small normal weights, zero biases."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    @property
    def trace_names(self) -> list[str]:
        """Every name a trace holds, in the order the forward pass produces them."""
        blocks = [f"blocks.{i}.{b}" for i in range(self.cfg.n_layers) for b in block_names(self.cfg)]
        return ["tokens", *embed_names(self.cfg), *blocks, *FINAL_NAMES]

    def _forward(self, tokens: torch.Tensor, rec: Recorder, causal: bool = True) -> torch.Tensor:
        mask = causal_mask(tokens.shape[1], tokens.device, rec.start) if causal else None  # (T, start + T)
        x = stack(self.embed, self.blocks, self.final_norm, tokens, rec, mask=mask)       # (B, T, D)
        return rec("logits", self.unembed(x))                                              # (B, T, V)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, V) for a batch of token ids (B, T); the fast path used for training."""
        return self._forward(tokens, Recorder(train=self.training))

    @torch.no_grad()
    def predict(self, tokens) -> torch.Tensor:
        """Logits (B, T, V) without gradients or dropout, whatever mode the module is in."""
        return self._forward(check_tokens(tokens, self.cfg), Recorder())

    @torch.no_grad()
    def read(self, tokens, cache: KVCache | None = None,
             edits: Mapping[str, Edit] | None = None) -> tuple[torch.Tensor, KVCache]:
        """Generation's pass: logits (B, T, V) for `tokens` (B, T) read after the positions `cache` holds (None: from
        the start), and the cache grown by their keys and values. Reading a text in pieces gives the logits of
        reading it at once (within float error), while each new token costs one position's work. `edits` are
        applied as in `run` (to the new tokens' values; the cache holds the earlier ones' as edited then)."""
        start = 0 if cache is None else cache.length
        tokens = check_tokens(tokens, self.cfg, start=start)
        unknown = set(edits) - set(self.trace_names[1:]) if edits else set()
        if unknown:
            raise ValueError(f"cannot edit {', '.join(sorted(unknown))}: not a name in this model's trace")
        rec = Recorder(edits, past=cache, cache=True)
        logits = self._forward(tokens, rec)                                                # (B, T, V)
        return logits, KVCache(rec.kept, start + tokens.shape[1])

    @torch.no_grad()
    def run(self, tokens, edits: Mapping[str, Edit] | None = None, causal: bool = True,
            names: Iterable[str] | None = None) -> Trace:
        """One forward pass that returns every intermediate by name (see the module docstring).

        `edits` maps a name to a function that receives that value and returns its replacement; the
        replacement is used downstream and reported in the trace. `causal=False` lifts the mask.
        `names` keeps only those values (and "tokens"): a full trace of GPT-2 at 1,024 tokens is about
        300 MB, its attention patterns alone 50 MB. Dropout is always off here, whatever mode the module is in.
        """
        tokens = check_tokens(tokens, self.cfg)
        rec = start_run(self.trace_names[1:], edits, names, inputs={"tokens": tokens})
        self._forward(tokens, rec, causal)
        return Trace(rec.values)
