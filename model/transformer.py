"""A small decoder-only transformer, written to be read top to bottom.

Its pieces (recorder, trace, norm, embedding, attention, feed-forward, block) are in model/layers.py,
shared with the encoder-decoder. Attention is computed explicitly (no fused kernel) so its pattern
exists and can be shown.

Every intermediate has a stable name (the project's vocabulary, used by pages, figures and tests):

    tokens                    [B, T]        the input token ids
    embed.tok                 [B, T, D]     token embeddings (after embed_scale)
    embed.pos                 [B, T, D]     positional encodings (zeros when pos is "none")
    embed.out                 [B, T, D]     tok + pos
    blocks.i.resid_pre        [B, T, D]     the residual stream entering block i
    blocks.i.attn.in          [B, T, D]     what attention reads
    blocks.i.attn.q/.k/.v     [B, H, T, K]  queries, keys, values per head
    blocks.i.attn.scores      [B, H, T, T]  q.k / sqrt(K), before the causal mask
    blocks.i.attn.pattern     [B, H, T, T]  softmax after the mask: who attends to whom
    blocks.i.attn.z           [B, H, T, K]  pattern @ v, per head
    blocks.i.attn.out         [B, T, D]     after the output projection
    blocks.i.resid_mid        [B, T, D]     the stream between attention and feed-forward
    blocks.i.mlp.in           [B, T, D]     what the feed-forward network reads
    blocks.i.mlp.pre          [B, T, F]     hidden layer before the activation
    blocks.i.mlp.post         [B, T, F]     hidden layer after the activation
    blocks.i.mlp.out          [B, T, D]     after the contracting projection
    blocks.i.resid_post       [B, T, D]     the stream leaving block i
    final.norm                [B, T, D]     the final normalisation (identity for post-norm and norm "none")
    logits                    [B, T, V]     a score per vocabulary word, per position

B batch, T positions, D d_model, H heads, K = D / H, F d_ff, V vocab size.

`model(tokens)` returns logits for training. `model.run(tokens)` returns a read-only `Trace` of every
name above from one forward pass. Nothing is stored on the modules: one model object serves many
visitors at once, so the trace is a return value and "what if" edits are arguments.
"""
from collections.abc import Iterable, Mapping

import torch
import torch.nn as nn

from .config import ModelConfig
from .layers import (BLOCK_NAMES, EMBED_NAMES, FINAL_NAMES, Block, Edit, Embedding, Recorder, Trace,  # noqa: F401
                     block_name, causal_mask, make_norm, sinusoidal_table)


class TransformerLM(nn.Module):
    """Embedding, n_layers blocks, a final norm and an unembedding to one score per vocabulary word."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = Embedding(cfg)
        self.blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layers))
        # Post-norm blocks already end in a norm (as in the 2017 paper), so only pre-norm needs a final one.
        self.final_norm = make_norm(cfg) if cfg.norm_position == "pre" else nn.Identity()
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
        blocks = [f"blocks.{i}.{b}" for i in range(self.cfg.n_layers) for b in BLOCK_NAMES]
        return ["tokens", *EMBED_NAMES, *blocks, *FINAL_NAMES]

    def _forward(self, tokens: torch.Tensor, rec: Recorder, causal: bool = True) -> torch.Tensor:
        x = self.embed(tokens, rec)                                       # (B, T, D)
        mask = causal_mask(tokens.shape[1], tokens.device) if causal else None   # (T, T)
        for block in self.blocks:
            x = block(x, rec, mask)                                       # (B, T, D)
        x = rec("final.norm", self.final_norm(x))                         # (B, T, D)
        return rec("logits", self.unembed(x))                             # (B, T, V)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, V) for a batch of token ids (B, T); the fast path used for training."""
        return self._forward(tokens, Recorder(train=self.training))

    @torch.no_grad()
    def predict(self, tokens) -> torch.Tensor:
        """Logits (B, T, V) without gradients or dropout, whatever mode the module is in."""
        return self._forward(self.check_tokens(tokens), Recorder())

    @torch.no_grad()
    def run(self, tokens, edits: Mapping[str, Edit] | None = None, causal: bool = True,
            names: Iterable[str] | None = None) -> Trace:
        """One forward pass that returns every intermediate by name (see the module docstring).

        `edits` maps a name to a function that receives that value and returns its replacement; the
        replacement is used downstream and reported in the trace. `causal=False` lifts the mask.
        `names` keeps only those values (and "tokens"): a full trace of GPT-2 at 1,024 tokens is about
        300 MB, its attention patterns alone 50 MB. Dropout is always off here, whatever mode the module is in.
        """
        tokens = self.check_tokens(tokens)
        known = set(self.trace_names[1:])
        unknown = set(edits or {}) - known
        if unknown:
            raise ValueError(f"cannot edit {', '.join(sorted(unknown))}: not a name in this model's trace")
        kept = None if names is None else set(names) - {"tokens"}
        if kept is not None and kept - known:
            raise ValueError(f"cannot keep {', '.join(sorted(kept - known))}: not a name in this model's trace")
        rec = Recorder(edits, keep=True if kept is None else kept | {"tokens"})
        rec.values["tokens"] = tokens
        self._forward(tokens, rec, causal)
        return Trace(rec.values)

    def check_tokens(self, tokens) -> torch.Tensor:
        """Token ids as a (B, T) long tensor, or a ValueError a student can act on."""
        tokens = torch.as_tensor(tokens, dtype=torch.long).clone()      # never share the caller's memory
        if tokens.dim() == 1:
            tokens = tokens[None]                                         # (1, T)
        if tokens.dim() != 2:
            raise ValueError(f"tokens must be a list or a (batch, positions) tensor, got shape {tuple(tokens.shape)}")
        T = tokens.shape[1]
        if T == 0:
            raise ValueError("there are no tokens to run: the input is empty")
        if T > self.cfg.max_len:
            raise ValueError(f"{T} tokens is more than this model's context of {self.cfg.max_len}")
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= self.cfg.vocab_size):
            raise ValueError(f"token ids must be between 0 and {self.cfg.vocab_size - 1}")
        return tokens
