"""A small decoder-only transformer, written to be read top to bottom.

Classes come in dependency order: recorder, norm, embedding, attention, feed-forward, block, model.
Attention is computed explicitly (no fused kernel) so its pattern exists and can be shown.

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
import math
from collections.abc import Callable, Iterable, Mapping

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import ModelConfig

Edit = Callable[[torch.Tensor], torch.Tensor]


# The trace's names, in the order the forward pass produces them (one source: trace_names, run and the
# ("pattern", layer) lookup read these).
EMBED_NAMES = ("embed.tok", "embed.pos", "embed.out")
BLOCK_NAMES = ("resid_pre", "attn.in", "attn.q", "attn.k", "attn.v", "attn.scores", "attn.pattern", "attn.z",
               "attn.out", "resid_mid", "mlp.in", "mlp.pre", "mlp.post", "mlp.out", "resid_post")
FINAL_NAMES = ("final.norm", "logits")


def block_name(name: str, layer: int) -> str:
    """The full name of a per-block value: ("pattern", 1) or ("attn.pattern", 1) -> "blocks.1.attn.pattern".

    A short name must be unambiguous: "q", "scores", "pre", "resid_mid" are; "in" and "out" are not (say
    "attn.in" or "mlp.out")."""
    matches = [b for b in BLOCK_NAMES if b == name or b.endswith("." + name)]
    if len(matches) != 1:
        options = ", ".join(matches) if matches else ", ".join(BLOCK_NAMES)
        raise KeyError(f"{name!r} does not name one value of a block; say one of: {options}")
    return f"blocks.{int(layer)}.{matches[0]}"


class Recorder:
    """Travels through one forward pass: applies edits by name and, when tracing, keeps the values named in
    `keep` (True: every value)."""

    def __init__(self, edits: Mapping[str, Edit] | None = None, keep: bool | set[str] = False, train: bool = False):
        self.edits = dict(edits or {})
        self.values: dict[str, torch.Tensor] | None = {} if keep else None
        self.only = keep if isinstance(keep, set) else None
        self.train = train  # dropout is only ever active when training

    def __call__(self, name: str, x: torch.Tensor) -> torch.Tensor:
        edit = self.edits.get(name)
        if edit is not None:
            new = edit(x.clone())  # a copy, so an in-place edit cannot reach upstream values or weights
            if not isinstance(new, torch.Tensor) or new.shape != x.shape:
                got = tuple(new.shape) if isinstance(new, torch.Tensor) else type(new).__name__
                raise ValueError(f"the edit for {name} must return a tensor of shape {tuple(x.shape)}, got {got}")
            x = new
        if self.values is not None and (self.only is None or name in self.only):
            self.values[name] = x.detach()
        return x


class Trace(Mapping):
    """A read-only mapping from name to detached tensor, all from the same forward pass.

    A block's values can also be looked up by (name, layer): trace["pattern", 1] is
    trace["blocks.1.attn.pattern"]."""

    def __init__(self, values: dict[str, torch.Tensor]):
        self._values = values

    def __getitem__(self, name: str | tuple[str, int]) -> torch.Tensor:
        if isinstance(name, tuple):
            name = block_name(*name)
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(f"no value named {name!r} in the trace; names are: {', '.join(self._values)}") from None

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return "Trace(" + ", ".join(f"{k}={list(v.shape)}" for k, v in self._values.items()) + ")"


def make_norm(cfg: ModelConfig) -> nn.Module:
    """LayerNorm centres and scales each vector; RMSNorm only scales; "none" leaves it alone."""
    if cfg.norm == "layer":
        return nn.LayerNorm(cfg.d_model, eps=cfg.norm_eps)
    if cfg.norm == "rms":
        return nn.RMSNorm(cfg.d_model, eps=cfg.norm_eps)
    return nn.Identity()


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """The 2017 paper's fixed waves: PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(same)."""
    position = torch.arange(max_len, dtype=torch.float32)[:, None]                  # (max_len, 1)
    freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model)                                             # (max_len, D)
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq[: d_model // 2])
    return table


class Embedding(nn.Module):
    """Token ids to vectors, plus where each token stands."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        if cfg.pos == "learned":
            self.pos = nn.Embedding(cfg.max_len, cfg.d_model)
        elif cfg.pos == "sinusoidal":
            self.register_buffer("pos_table", sinusoidal_table(cfg.max_len, cfg.d_model), persistent=False)

    def forward(self, tokens: torch.Tensor, rec: Recorder) -> torch.Tensor:
        B, T = tokens.shape
        D = self.cfg.d_model
        tok = self.tok(tokens)                                            # (B, T, D)
        if self.cfg.embed_scale:
            tok = tok * math.sqrt(D)
        tok = rec("embed.tok", tok)
        if self.cfg.pos == "learned":
            pos = self.pos.weight[:T].repeat(B, 1, 1)                     # (B, T, D), a copy
        elif self.cfg.pos == "sinusoidal":
            pos = self.pos_table[:T].repeat(B, 1, 1)                      # (B, T, D), a copy
        else:
            pos = tok.new_zeros(B, T, D)                                  # (B, T, D)
        pos = rec("embed.pos", pos)
        out = rec("embed.out", tok + pos)                                 # (B, T, D)
        return F.dropout(out, self.cfg.dropout, rec.train)


class Attention(nn.Module):
    """Multi-head causal self-attention: each position mixes in the values of earlier positions."""

    def __init__(self, cfg: ModelConfig, name: str):
        super().__init__()
        self.cfg, self.name = cfg, name
        self.W_q = nn.Linear(cfg.d_model, cfg.d_model)
        self.W_k = nn.Linear(cfg.d_model, cfg.d_model)
        self.W_v = nn.Linear(cfg.d_model, cfg.d_model)
        self.W_o = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x: torch.Tensor, rec: Recorder, causal: bool) -> torch.Tensor:
        B, T, D = x.shape
        H, K, n = self.cfg.n_heads, self.cfg.d_head, self.name
        # 1) project into queries, keys and values, split into heads
        q = rec(f"{n}.q", self.W_q(x).view(B, T, H, K).transpose(1, 2))   # (B, H, T, K)
        k = rec(f"{n}.k", self.W_k(x).view(B, T, H, K).transpose(1, 2))   # (B, H, T, K)
        v = rec(f"{n}.v", self.W_v(x).view(B, T, H, K).transpose(1, 2))   # (B, H, T, K)
        # 2) score every query against every key, scaled by 1/sqrt(K)
        scores = rec(f"{n}.scores", q @ k.transpose(-2, -1) / math.sqrt(K))  # (B, H, T, T)
        # 3) causal mask: a position may not look at later positions
        if causal:
            future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)  # (T, T)
            scores = scores.masked_fill(future, float("-inf"))
        # 4) softmax turns each row of scores into weights that sum to 1
        pattern = rec(f"{n}.pattern", scores.softmax(dim=-1))               # (B, H, T, T)
        pattern = F.dropout(pattern, self.cfg.dropout, rec.train)
        # 5) mix the values with those weights, then merge the heads back into one vector
        z = rec(f"{n}.z", pattern @ v)                                      # (B, H, T, K)
        merged = z.transpose(1, 2).reshape(B, T, D)                         # (B, T, D)
        return rec(f"{n}.out", self.W_o(merged))                            # (B, T, D)


class FeedForward(nn.Module):
    """Expand, activate, contract: the same small network applied to every position on its own."""

    def __init__(self, cfg: ModelConfig, name: str):
        super().__init__()
        self.cfg, self.name = cfg, name
        self.W_in = nn.Linear(cfg.d_model, cfg.d_ff)
        self.W_out = nn.Linear(cfg.d_ff, cfg.d_model)
        self.act = {"relu": nn.ReLU(), "gelu": nn.GELU(), "gelu_tanh": nn.GELU(approximate="tanh")}[cfg.activation]

    def forward(self, x: torch.Tensor, rec: Recorder) -> torch.Tensor:
        n = self.name
        pre = rec(f"{n}.pre", self.W_in(x))              # (B, T, F)
        post = rec(f"{n}.post", self.act(pre))           # (B, T, F)
        return rec(f"{n}.out", self.W_out(post))         # (B, T, D)


class Block(nn.Module):
    """Attention then feed-forward, each added to the residual stream, normalised pre or post."""

    def __init__(self, cfg: ModelConfig, index: int):
        super().__init__()
        self.cfg, self.name = cfg, f"blocks.{index}"
        self.norm1, self.norm2 = make_norm(cfg), make_norm(cfg)
        self.attn = Attention(cfg, f"{self.name}.attn")
        self.mlp = FeedForward(cfg, f"{self.name}.mlp")

    def forward(self, x: torch.Tensor, rec: Recorder, causal: bool) -> torch.Tensor:
        n, p, pre_norm = self.name, self.cfg.dropout, self.cfg.norm_position == "pre"
        resid_pre = rec(f"{n}.resid_pre", x)                                      # (B, T, D)
        attn_in = rec(f"{n}.attn.in", self.norm1(resid_pre) if pre_norm else resid_pre)
        attn_out = F.dropout(self.attn(attn_in, rec, causal), p, rec.train)       # (B, T, D)
        mid = resid_pre + attn_out if pre_norm else self.norm1(resid_pre + attn_out)
        resid_mid = rec(f"{n}.resid_mid", mid)                                    # (B, T, D)
        mlp_in = rec(f"{n}.mlp.in", self.norm2(resid_mid) if pre_norm else resid_mid)
        mlp_out = F.dropout(self.mlp(mlp_in, rec), p, rec.train)                  # (B, T, D)
        post = resid_mid + mlp_out if pre_norm else self.norm2(resid_mid + mlp_out)
        return rec(f"{n}.resid_post", post)                                       # (B, T, D)


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
        for block in self.blocks:
            x = block(x, rec, causal)                                     # (B, T, D)
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
