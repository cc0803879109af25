"""The pieces every model here is built from, in dependency order: the recorder that names (and may edit)
every intermediate, the trace it returns, the key/value cache generation carries from one token to the next,
norm, embedding (with rotary positions' angles), attention (self- or cross-, with a mask, grouped key/value heads),
the MLP (the feed-forward network, plain or gated), the block of residual sublayers that adds them to the stream
(one after the other, or side by side in a parallel block), and the stack (embedding -> blocks -> final norm).
Last, the checks a forward pass makes on what it is given.

The decoder-only model (model/transformer.py) is one stack; the encoder-decoder (model/seq2seq.py) is two, its
decoder's blocks with cross-attention. So a block's values have the same names in both (blocks.i.attn.pattern,
...), under a scope in the encoder-decoder (encoder.blocks.i...., decoder.blocks.i....).
"""
import copy
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import ModelConfig

Edit = Callable[[torch.Tensor], torch.Tensor]


# The trace's names, in the order the forward pass produces them (one source: trace_names, run and the
# ("pattern", layer) lookup read these). Some switches add or replace names: see embed_names and block_names.
EMBED_NAMES = ("embed.tok", "embed.pos", "embed.out")
ROPE_NAMES = ("embed.rope",)                                  # pos "rope": each turned pair's angle, at each position
BLOCK_NAMES = ("resid_pre", "attn.in", "attn.q", "attn.k", "attn.v", "attn.scores", "attn.pattern", "attn.z",
               "attn.out", "resid_mid", "mlp.in", "mlp.pre", "mlp.post", "mlp.out", "resid_post")
UNROTATED_NAMES = ("attn.q_unrotated", "attn.k_unrotated")    # pos "rope": before the turn (attn.q, attn.k after it)
GATED_NAMES = ("mlp.gate", "mlp.up")                          # activation "swiglu": in place of mlp.pre
FINAL_NAMES = ("final.norm", "logits")
EVERY_BLOCK_NAME = BLOCK_NAMES + UNROTATED_NAMES + GATED_NAMES


def embed_names(cfg: ModelConfig) -> tuple[str, ...]:
    """The embedding's values for this config, in the order the forward pass produces them."""
    return EMBED_NAMES + (ROPE_NAMES if cfg.pos == "rope" else ())


def block_names(cfg: ModelConfig) -> tuple[str, ...]:
    """A block's values for this config, in the order the forward pass produces them: rotary positions add the
    queries and keys before their turn, a gated MLP has a gate and an up projection where a plain one has mlp.pre."""
    names = list(BLOCK_NAMES)
    if cfg.pos == "rope":
        names[names.index("attn.q"):names.index("attn.q")] = UNROTATED_NAMES
    if cfg.activation == "swiglu":
        names[names.index("mlp.pre"):names.index("mlp.pre") + 1] = GATED_NAMES
    return tuple(names)


def block_name(name: str, layer: int) -> str:
    """The full name of a per-block value: ("pattern", 1) or ("attn.pattern", 1) -> "blocks.1.attn.pattern".

    A short name must be unambiguous: "q", "scores", "pre", "gate", "resid_mid" are; "in" and "out" are not (say
    "attn.in" or "mlp.out")."""
    matches = [b for b in EVERY_BLOCK_NAME if b == name or b.endswith("." + name)]
    if len(matches) != 1:
        options = ", ".join(matches) if matches else ", ".join(EVERY_BLOCK_NAME)
        raise KeyError(f"{name!r} does not name one value of a block; say one of: {options}")
    return f"blocks.{int(layer)}.{matches[0]}"


class Recorder:
    """Travels through one forward pass: applies edits by name and, when tracing, keeps the values named in
    `keep` (True: every value). When generating, it also carries the key/value cache: `past` holds the keys and
    values of the positions read before (None: none), and `cache=True` collects every self-attention's keys and
    values, past and new, in `kept` (attention name -> (keys, values)) for the next token's pass."""

    def __init__(self, edits: Mapping[str, Edit] | None = None, keep: bool | set[str] = False, train: bool = False,
                 past: "KVCache | None" = None, cache: bool = False):
        self.edits = dict(edits or {})
        self.values: dict[str, torch.Tensor] | None = {} if keep else None
        self.only = keep if isinstance(keep, set) else None
        self.train = train  # dropout is only ever active when training
        self.prefix = ""
        self.past = past
        self.kept: dict[str, tuple[torch.Tensor, torch.Tensor]] | None = {} if cache else None

    @property
    def start(self) -> int:
        """The position of the first token this pass reads: how many the cache already holds."""
        return 0 if self.past is None else self.past.length

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


@dataclass(frozen=True)
class KVCache:
    """Every self-attention's keys and values for the positions read so far: what a new token's queries read.
    With it, a new token costs the work of one position instead of the whole text's (model.read, and generation
    in model/generate.py). Keys are kept after their rotary turn, one per key/value head (grouped-query attention
    keeps fewer); it is a value: reading more returns a new cache, and the model object is never changed."""
    layers: Mapping[str, tuple[torch.Tensor, torch.Tensor]]   # "blocks.i.attn" -> keys, values, each (N, G, t, K)
    length: int                                                # t: the positions it holds

    def rows(self, index: list[int]) -> "KVCache":
        """The cache of batch rows `index`, in that order (beam search keeps the hypotheses it extends)."""
        at = torch.as_tensor(index, dtype=torch.long)
        return KVCache({n: (k[at], v[at]) for n, (k, v) in self.layers.items()}, self.length)

    @property
    def nbytes(self) -> int:
        """The memory its keys and values take."""
        return sum(k.nbytes + v.nbytes for k, v in self.layers.values())


def cache_bytes_per_token(cfg: ModelConfig, bytes_per_number: int = 4) -> int:
    """What the KV cache keeps for each token read: a key and a value vector of K numbers for each key/value head
    of each layer, 2 x layers x G x K x bytes (float32: 4 bytes). Grouped-query attention keeps G of H heads' worth."""
    return 2 * cfg.n_layers * cfg.kv_heads * cfg.d_head * bytes_per_number


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


def rope_frequencies(dims: int, theta: float) -> torch.Tensor:
    """Rotary positions' frequencies (R/2,) for the R = `dims` dimensions of a head that turn (R = K unless
    rotary_fraction < 1): pair i turns by theta^(-2i/R) radians per position, from 1 (pair 0, the fastest) down to
    nearly theta^-1 (the slowest). Computed as transformers' Llama and GPT-NeoX do, in float32."""
    return 1.0 / (theta ** (torch.arange(0, dims, 2, dtype=torch.float) / dims))


def rope_angles(positions: torch.Tensor, dims: int, theta: float) -> torch.Tensor:
    """The angle (radians) by which each pair of a head's R = `dims` turned dimensions turns at each of `positions`
    (T,): (T, R/2), position x frequency, so it grows with the position, one frequency per pair."""
    return positions.float()[:, None] * rope_frequencies(dims, theta)[None]            # (T, R/2)


def rotate(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Queries or keys (B, heads, T, K) turned by `angles` (B, T, R/2): the first R dimensions of each head turn,
    dimensions i and i + R/2 forming pair i (the "rotate-half" layout of Llama's and GPT-NeoX's checkpoints in
    transformers), each pair turned as a point in the plane: (a, b) -> (a cos - b sin, b cos + a sin). The other
    K - R dimensions (none when R = K; three quarters of a Pythia head) pass through unchanged. A dot product of a
    query turned for position m with a key turned for position n depends on m - n only."""
    R = 2 * angles.shape[-1]
    turning, passing = x[..., :R], x[..., R:]                                          # (B, heads, T, R), (.., K - R)
    cos = torch.cat([angles.cos(), angles.cos()], dim=-1)[:, None]                     # (B, 1, T, R)
    sin = torch.cat([angles.sin(), angles.sin()], dim=-1)[:, None]                     # (B, 1, T, R)
    turned_half = torch.cat([-turning[..., R // 2:], turning[..., :R // 2]], dim=-1)   # (B, heads, T, R)
    return torch.cat([turning * cos + turned_half * sin, passing], dim=-1)             # (B, heads, T, K)


class Embedding(nn.Module):
    """Token ids to vectors, plus where each token stands: a vector added to each token's (sinusoidal, learned),
    or, for rotary positions, the angles attention turns queries and keys by (`angles`)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        if cfg.pos == "learned":
            self.pos = nn.Embedding(cfg.max_len, cfg.d_model)
        elif cfg.pos == "sinusoidal":
            self.register_buffer("pos_table", sinusoidal_table(cfg.max_len, cfg.d_model), persistent=False)

    def forward(self, tokens: torch.Tensor, rec: Recorder) -> torch.Tensor:
        """The stream (B, T, D) the first block reads, for tokens at positions rec.start, rec.start + 1, ..."""
        B, T = tokens.shape
        D, start = self.cfg.d_model, rec.start
        tok = self.tok(tokens)                                            # (B, T, D)
        if self.cfg.embed_scale:
            tok = tok * math.sqrt(D)
        tok = rec("embed.tok", tok)
        if self.cfg.pos == "learned":
            pos = self.pos.weight[start:start + T].repeat(B, 1, 1)        # (B, T, D), a copy
        elif self.cfg.pos == "sinusoidal":
            pos = self.pos_table[start:start + T].repeat(B, 1, 1)         # (B, T, D), a copy
        else:                                                             # "rope" adds nothing to the stream
            pos = tok.new_zeros(B, T, D)                                  # (B, T, D)
        pos = rec("embed.pos", pos)
        out = rec("embed.out", tok + pos)                                 # (B, T, D)
        return F.dropout(out, self.cfg.dropout, rec.train)

    def angles(self, B: int, T: int, rec: Recorder, device=None) -> torch.Tensor | None:
        """Rotary positions: the angle (B, T, R/2) each pair of a head's turned query and key dimensions turns by at
        each of T positions from rec.start (None for the other kinds of position); R = K unless rotary_fraction < 1."""
        if self.cfg.pos != "rope":
            return None
        positions = torch.arange(rec.start, rec.start + T, device=device)               # (T,)
        angles = rope_angles(positions, self.cfg.d_rotary, self.cfg.rope_theta)          # (T, R/2)
        return rec("embed.rope", angles.repeat(B, 1, 1))                                 # (B, T, R/2), a copy


def per_query_head(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Keys or values of G key/value heads (B, G, S, K) as each of the H query heads reads them (B, H, S, K): query
    head h reads key/value head h // (H / G). With one key/value head per query head (G = H) they are x itself."""
    G = x.shape[1]
    return x if G == n_heads else x.repeat_interleave(n_heads // G, dim=1)


class Attention(nn.Module):
    """Multi-head attention: each position mixes in the values of the positions its mask lets it see.

    Self-attention reads keys and values from the same sequence; cross-attention (the encoder-decoder's)
    reads them from a `source` sequence. `mask` [T, S] or [B, 1, T, S] is True where a query may look.
    With grouped-query attention there are fewer key/value heads (G) than query heads (H): each key/value head
    serves H / G query heads. With rotary positions, self-attention turns queries and keys by `angles` (all of
    each head's dimensions, or the first R of them: rotary_fraction).
    """

    def __init__(self, cfg: ModelConfig, name: str):
        super().__init__()
        self.cfg, self.name = cfg, name
        kv_width = cfg.kv_heads * cfg.d_head                                # G x K: D when G = H
        self.W_q = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.W_k = nn.Linear(cfg.d_model, kv_width, bias=cfg.bias)
        self.W_v = nn.Linear(cfg.d_model, kv_width, bias=cfg.bias)
        self.W_o = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)

    def forward(self, x: torch.Tensor, rec: Recorder, mask: torch.Tensor | None = None,
                source: torch.Tensor | None = None, angles: torch.Tensor | None = None) -> torch.Tensor:
        B, T, D = x.shape
        src = x if source is None else source                               # (B, S, D)
        S = src.shape[1]
        H, G, K, n = self.cfg.n_heads, self.cfg.kv_heads, self.cfg.d_head, self.name
        # 1) project into queries (from x), keys and values (from the source), split into heads: H query heads,
        #    G key/value heads
        q = self.W_q(x).view(B, T, H, K).transpose(1, 2)                    # (B, H, T, K)
        k = self.W_k(src).view(B, S, G, K).transpose(1, 2)                  # (B, G, S, K)
        if angles is not None:      # rotary positions: turn each pair of (turned) dimensions by its position's angle
            q = rotate(rec(f"{n}.q_unrotated", q), angles)                  # (B, H, T, K)
            k = rotate(rec(f"{n}.k_unrotated", k), angles)                  # (B, G, S, K)
        q = rec(f"{n}.q", q)                                                # (B, H, T, K)
        k = rec(f"{n}.k", k)                                                # (B, G, S, K)
        v = rec(f"{n}.v", self.W_v(src).view(B, S, G, K).transpose(1, 2))   # (B, G, S, K)
        if rec.kept is not None and source is None:   # generating: the keys and values before join the new ones
            if rec.past is not None:
                past_k, past_v = rec.past.layers[rec.prefix + n]
                k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)   # (B, G, S, K), S = start + T
            rec.kept[rec.prefix + n] = (k, v)
        # 2) score every query against every key of its key/value head, scaled by 1/sqrt(K)
        scores = rec(f"{n}.scores", q @ per_query_head(k, H).transpose(-2, -1) / math.sqrt(K))   # (B, H, T, S)
        # 3) the mask: the causal mask hides later positions, a padding mask hides padding
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        # 4) softmax turns each row of scores into weights that sum to 1
        pattern = rec(f"{n}.pattern", scores.softmax(dim=-1))               # (B, H, T, S)
        pattern = F.dropout(pattern, self.cfg.dropout, rec.train)
        # 5) mix the values with those weights, then merge the heads back into one vector
        z = rec(f"{n}.z", pattern @ per_query_head(v, H))                   # (B, H, T, K)
        merged = z.transpose(1, 2).reshape(B, T, D)                         # (B, T, D)
        return rec(f"{n}.out", self.W_o(merged))                            # (B, T, D)


def causal_mask(T: int, device=None, start: int = 0) -> torch.Tensor:
    """[T, start + T], True where a query may look: at itself and earlier positions. The T queries stand at
    positions start, start + 1, ... (after `start` positions a key/value cache holds); the keys at 0, 1, ..."""
    return torch.ones(T, start + T, dtype=torch.bool, device=device).tril(start)


class MLP(nn.Module):
    """The feed-forward network: expand, activate, contract, the same small network applied to every position
    on its own (nanoGPT's name for it; the trace calls it mlp).

    Gated (activation "swiglu", Llama's): two expanding projections, a gate and an up projection; SiLU on the
    gate, times the up projection, is what the contracting projection (Llama's down projection) reads."""

    def __init__(self, cfg: ModelConfig, name: str):
        super().__init__()
        self.cfg, self.name = cfg, name
        if cfg.activation == "swiglu":
            self.W_gate = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)
            self.W_up = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)
            self.act = nn.SiLU()
        else:
            self.W_in = nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias)
            self.act = {"relu": nn.ReLU(), "gelu": nn.GELU(), "gelu_tanh": nn.GELU(approximate="tanh")}[cfg.activation]
        self.W_out = nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.bias)

    def forward(self, x: torch.Tensor, rec: Recorder) -> torch.Tensor:
        n = self.name
        if self.cfg.activation == "swiglu":
            gate = rec(f"{n}.gate", self.W_gate(x))          # (B, T, F)
            up = rec(f"{n}.up", self.W_up(x))                # (B, T, F)
            post = rec(f"{n}.post", self.act(gate) * up)     # (B, T, F): SiLU(gate) x up
        else:
            pre = rec(f"{n}.pre", self.W_in(x))              # (B, T, F)
            post = rec(f"{n}.post", self.act(pre))           # (B, T, F)
        return rec(f"{n}.out", self.W_out(post))             # (B, T, D)


class Block(nn.Module):
    """Self-attention, then (in an encoder-decoder's decoder) cross-attention over the source, then the MLP:
    residual sublayers, each adding what it computes to the residual stream.

    A decoder-only block and an encoder block have no cross-attention; `cross=True` makes an encoder-decoder's
    decoder block. The attribute names are the checkpoints' state_dict names (norm1, norm_cross, norm2, ...).

    A parallel block (cfg.parallel: GPT-J, GPT-NeoX, Pythia) runs attention and the MLP side by side: both read the
    stream entering the block, each through its own norm, and both add into it, so
    resid_post = resid_pre + attn.out + mlp.out. Its trace has the sequential block's names: resid_mid is
    resid_pre + attn.out (the stream with attention's share added, which the lens and patching read as in any
    block), and mlp.in is norm2(resid_pre), not norm2(resid_mid).
    """

    def __init__(self, cfg: ModelConfig, index: int, cross: bool = False):
        super().__init__()
        if cross and cfg.parallel:
            raise ValueError("a parallel block has no cross-attention: an encoder-decoder's decoder is sequential")
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
                memory: torch.Tensor | None = None, memory_mask: torch.Tensor | None = None,
                angles: torch.Tensor | None = None) -> torch.Tensor:
        """The stream (B, T, D) through the block; `memory` (B, S, D) is what cross-attention reads; `angles`
        (B, T, R/2) turn self-attention's queries and keys (rotary positions)."""
        resid_pre = rec(f"{self.name}.resid_pre", x)                                    # (B, T, D)
        x = self.sublayer(resid_pre, self.norm1, lambda h: self.attn(h, rec, mask, angles=angles), rec, "attn.in",
                          "resid_mid")                                                  # (B, T, D)
        if self.cross_attn is not None:
            x = self.sublayer(x, self.norm_cross, lambda h: self.cross_attn(h, rec, memory_mask, source=memory),
                              rec, "cross_attn.in", "resid_cross")
        if self.cfg.parallel:   # the MLP reads the stream entering the block, and adds to the one attention added to
            read = rec(f"{self.name}.mlp.in", self.norm2(resid_pre))                    # (B, T, D)
            out = F.dropout(self.mlp(read, rec), self.cfg.dropout, rec.train)           # (B, T, D)
            return rec(f"{self.name}.resid_post", x + out)                              # (B, T, D)
        return self.sublayer(x, self.norm2, lambda h: self.mlp(h, rec), rec, "mlp.in", "resid_post")


def stack(embed: Embedding, blocks: nn.ModuleList, final_norm: nn.Module, tokens: torch.Tensor, rec: Recorder,
          **block_inputs) -> torch.Tensor:
    """Embedding -> blocks -> final norm: the path of the decoder-only model and of both halves of the
    encoder-decoder. `block_inputs` go to every block (its mask; a decoder's memory and memory mask), and so do
    rotary positions' angles."""
    x = embed(tokens, rec)                                              # (B, T, D)
    angles = embed.angles(*tokens.shape, rec, tokens.device)            # (B, T, R/2), or None
    for block in blocks:
        x = block(x, rec, angles=angles, **block_inputs)                # (B, T, D)
    return rec("final.norm", final_norm(x))                             # (B, T, D)


def check_tokens(tokens, cfg: ModelConfig, what: str = "input", start: int = 0) -> torch.Tensor:
    """Token ids as a (B, T) long tensor, or a ValueError a student can act on; `what` names the input
    ("input", or an encoder-decoder's "source" and "target"); `start` tokens were read before (a cache holds them)."""
    tokens = torch.as_tensor(tokens, dtype=torch.long).clone()          # never share the caller's memory
    if tokens.dim() == 1:
        tokens = tokens[None]                                           # (1, T)
    if tokens.dim() != 2:
        raise ValueError(f"tokens must be a list or a (batch, positions) tensor of ids; the {what} has shape "
                         f"{tuple(tokens.shape)}")
    T = tokens.shape[1]
    if T == 0:
        raise ValueError(f"the {what} must be a non-empty list of token ids: there are no tokens to run")
    if start + T > cfg.max_len:
        raise ValueError(f"the {what} is too long: {start + T} tokens is more than this model's context of "
                         f"{cfg.max_len} (it reads at most {cfg.max_len})")
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
