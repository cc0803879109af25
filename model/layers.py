"""The pieces every model here is built from, in dependency order: the recorder that names (and may edit)
every intermediate, the trace it returns, norm, embedding, attention (self- or cross-, with a mask), the MLP
(the feed-forward network), the block of residual sublayers that adds them to the stream, and the stack
(embedding -> blocks -> final norm). Last, the checks a forward pass makes on what it is given.

The decoder-only model (model/transformer.py) is one stack; the encoder-decoder (model/seq2seq.py) is two, its
decoder's blocks with cross-attention. So a block's values have the same names in both (blocks.i.attn.pattern,
...), under a scope in the encoder-decoder (encoder.blocks.i...., decoder.blocks.i....).
"""
import copy
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
        self.prefix = ""

    def scoped(self, prefix: str) -> "Recorder":
        """The same recorder (same edits, same values) naming everything `prefix` + name: "encoder.", ..."""
        scoped = copy.copy(self)
        scoped.prefix = self.prefix + prefix
        return scoped

    def __call__(self, name: str, x: torch.Tensor) -> torch.Tensor:
        name = self.prefix + name
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


def make_final_norm(cfg: ModelConfig) -> nn.Module:
    """The norm after the last block. Post-norm blocks already end in a norm (as in the 2017 paper), so only
    pre-norm needs one."""
    return make_norm(cfg) if cfg.norm_position == "pre" else nn.Identity()


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
    """Multi-head attention: each position mixes in the values of the positions its mask lets it see.

    Self-attention reads keys and values from the same sequence; cross-attention (the encoder-decoder's)
    reads them from a `source` sequence. `mask` [T, S] or [B, 1, T, S] is True where a query may look.
    """

    def __init__(self, cfg: ModelConfig, name: str):
        super().__init__()
        self.cfg, self.name = cfg, name
        self.W_q = nn.Linear(cfg.d_model, cfg.d_model)
        self.W_k = nn.Linear(cfg.d_model, cfg.d_model)
        self.W_v = nn.Linear(cfg.d_model, cfg.d_model)
        self.W_o = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x: torch.Tensor, rec: Recorder, mask: torch.Tensor | None = None,
                source: torch.Tensor | None = None) -> torch.Tensor:
        B, T, D = x.shape
        src = x if source is None else source                               # (B, S, D)
        S = src.shape[1]
        H, K, n = self.cfg.n_heads, self.cfg.d_head, self.name
        # 1) project into queries (from x), keys and values (from the source), split into heads
        q = rec(f"{n}.q", self.W_q(x).view(B, T, H, K).transpose(1, 2))     # (B, H, T, K)
        k = rec(f"{n}.k", self.W_k(src).view(B, S, H, K).transpose(1, 2))   # (B, H, S, K)
        v = rec(f"{n}.v", self.W_v(src).view(B, S, H, K).transpose(1, 2))   # (B, H, S, K)
        # 2) score every query against every key, scaled by 1/sqrt(K)
        scores = rec(f"{n}.scores", q @ k.transpose(-2, -1) / math.sqrt(K))  # (B, H, T, S)
        # 3) the mask: the causal mask hides later positions, a padding mask hides padding
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        # 4) softmax turns each row of scores into weights that sum to 1
        pattern = rec(f"{n}.pattern", scores.softmax(dim=-1))               # (B, H, T, S)
        pattern = F.dropout(pattern, self.cfg.dropout, rec.train)
        # 5) mix the values with those weights, then merge the heads back into one vector
        z = rec(f"{n}.z", pattern @ v)                                      # (B, H, T, K)
        merged = z.transpose(1, 2).reshape(B, T, D)                         # (B, T, D)
        return rec(f"{n}.out", self.W_o(merged))                            # (B, T, D)


def causal_mask(T: int, device=None) -> torch.Tensor:
    """[T, T], True on and below the diagonal: a position may look at itself and earlier positions."""
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


class MLP(nn.Module):
    """The feed-forward network: expand, activate, contract, the same small network applied to every position
    on its own (nanoGPT's name for it; the trace calls it mlp)."""

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
    """Self-attention, then (in an encoder-decoder's decoder) cross-attention over the source, then the MLP:
    residual sublayers, each adding what it computes to the residual stream.

    A decoder-only block and an encoder block have no cross-attention; `cross=True` makes an encoder-decoder's
    decoder block. The attribute names are the checkpoints' state_dict names (norm1, norm_cross, norm2, ...).
    """

    def __init__(self, cfg: ModelConfig, index: int, cross: bool = False):
        super().__init__()
        self.cfg, self.name = cfg, f"blocks.{index}"
        self.norm1 = make_norm(cfg)
        if cross:
            self.norm_cross = make_norm(cfg)
        self.norm2 = make_norm(cfg)
        self.attn = Attention(cfg, f"{self.name}.attn")
        self.cross_attn = Attention(cfg, f"{self.name}.cross_attn") if cross else None
        self.mlp = MLP(cfg, f"{self.name}.mlp")

    def sublayer(self, x: torch.Tensor, norm: nn.Module, layer: Callable[[torch.Tensor], torch.Tensor],
                 rec: Recorder, reads: str, leaves: str) -> torch.Tensor:
        """One residual sublayer: x + layer(norm(x)) for pre-norm (GPT-2), norm(x + layer(x)) for post-norm (the
        2017 paper). `reads` names what the layer reads, `leaves` the stream it leaves behind."""
        pre_norm = self.cfg.norm_position == "pre"
        read = rec(f"{self.name}.{reads}", norm(x) if pre_norm else x)                 # (B, T, D)
        out = F.dropout(layer(read), self.cfg.dropout, rec.train)                       # (B, T, D)
        return rec(f"{self.name}.{leaves}", x + out if pre_norm else norm(x + out))    # (B, T, D)

    def forward(self, x: torch.Tensor, rec: Recorder, mask: torch.Tensor | None = None,
                memory: torch.Tensor | None = None, memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The stream (B, T, D) through the block; `memory` (B, S, D) is what cross-attention reads."""
        x = rec(f"{self.name}.resid_pre", x)                                            # (B, T, D)
        x = self.sublayer(x, self.norm1, lambda h: self.attn(h, rec, mask), rec, "attn.in", "resid_mid")
        if self.cross_attn is not None:
            x = self.sublayer(x, self.norm_cross, lambda h: self.cross_attn(h, rec, memory_mask, source=memory),
                              rec, "cross_attn.in", "resid_cross")
        return self.sublayer(x, self.norm2, lambda h: self.mlp(h, rec), rec, "mlp.in", "resid_post")


def stack(embed: Embedding, blocks: nn.ModuleList, final_norm: nn.Module, tokens: torch.Tensor, rec: Recorder,
          **block_inputs) -> torch.Tensor:
    """Embedding -> blocks -> final norm: the path of the decoder-only model and of both halves of the
    encoder-decoder. `block_inputs` go to every block (its mask; a decoder's memory and memory mask)."""
    x = embed(tokens, rec)                                              # (B, T, D)
    for block in blocks:
        x = block(x, rec, **block_inputs)                               # (B, T, D)
    return rec("final.norm", final_norm(x))                             # (B, T, D)


def check_tokens(tokens, cfg: ModelConfig, what: str = "input") -> torch.Tensor:
    """Token ids as a (B, T) long tensor, or a ValueError a student can act on; `what` names the input
    ("input", or an encoder-decoder's "source" and "target")."""
    tokens = torch.as_tensor(tokens, dtype=torch.long).clone()          # never share the caller's memory
    if tokens.dim() == 1:
        tokens = tokens[None]                                           # (1, T)
    if tokens.dim() != 2:
        raise ValueError(f"tokens must be a list or a (batch, positions) tensor of ids; the {what} has shape "
                         f"{tuple(tokens.shape)}")
    T = tokens.shape[1]
    if T == 0:
        raise ValueError(f"the {what} must be a non-empty list of token ids: there are no tokens to run")
    if T > cfg.max_len:
        raise ValueError(f"the {what} is too long: {T} tokens is more than this model's context of {cfg.max_len} "
                         f"(it reads at most {cfg.max_len})")
    if tokens.numel() and (tokens.min() < 0 or tokens.max() >= cfg.vocab_size):
        raise ValueError(f"token ids must be between 0 and {cfg.vocab_size - 1}: the {what} holds ids outside that "
                         "range")
    return tokens


def start_run(names: list[str], edits: Mapping[str, Edit] | None = None, keep: Iterable[str] | None = None,
              inputs: Mapping[str, torch.Tensor] | None = None) -> Recorder:
    """The recorder of a `run`: it refuses edits and kept names that are not in the trace `names`, and starts
    the trace with the `inputs` (token ids) it was given."""
    unknown = set(edits or {}) - set(names)
    if unknown:
        raise ValueError(f"cannot edit {', '.join(sorted(unknown))}: not a name in this model's trace")
    kept = None if keep is None else set(keep) - set(inputs or {})
    if kept is not None and kept - set(names):
        raise ValueError(f"cannot keep {', '.join(sorted(kept - set(names)))}: not a name in this model's trace")
    rec = Recorder(edits, keep=True if kept is None else kept | set(inputs or {}))
    rec.values.update(inputs or {})
    return rec
