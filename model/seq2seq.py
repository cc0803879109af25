"""The original encoder-decoder transformer ("Attention Is All You Need", 2017), read top to bottom.

The encoder reads the whole source at once (self-attention without a causal mask; padding is masked). The
decoder writes the target one token at a time: masked self-attention over what it has written, then
cross-attention over the encoder's output (its queries come from the target, its keys and values from the
source), then the feed-forward network. The pieces are model/layers.py's, shared with the decoder-only model.

Every intermediate has a name (S source positions, T target positions, K = D / H):

    source, target                          [B, S], [B, T]  token ids (target: what the decoder reads, <bos> first)
    encoder.embed.tok / .pos / .out         [B, S, D]
    encoder.blocks.i.*                      as a decoder-only block's, attn.pattern [B, H, S, S] (no causal mask)
    encoder.final.norm                      [B, S, D]       the memory every decoder layer reads
    decoder.embed.tok / .pos / .out         [B, T, D]
    decoder.blocks.i.resid_pre, attn.*      masked self-attention, attn.pattern [B, H, T, T]
    decoder.blocks.i.resid_mid              the stream after self-attention
    decoder.blocks.i.cross_attn.in          [B, T, D]       what cross-attention's queries read
    decoder.blocks.i.cross_attn.q           [B, H, T, K]
    decoder.blocks.i.cross_attn.k / .v      [B, H, S, K]    from the encoder's memory
    decoder.blocks.i.cross_attn.scores      [B, H, T, S]    before the padding mask
    decoder.blocks.i.cross_attn.pattern     [B, H, T, S]    which source positions each target position reads
    decoder.blocks.i.cross_attn.z / .out    [B, H, T, K], [B, T, D]
    decoder.blocks.i.resid_cross            the stream after cross-attention
    decoder.blocks.i.mlp.*, resid_post      as a decoder-only block's
    decoder.final.norm                      [B, T, D]
    logits                                  [B, T, V]       a score per vocabulary word for the next target token
"""
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import ModelConfig
from .layers import (BLOCK_NAMES, EMBED_NAMES, Attention, Block, Edit, Embedding, FeedForward, Recorder, Trace,
                     causal_mask, make_norm)

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"     # tokens 1, 2 and 3 of an encoder-decoder's vocabulary (0 is <unk>)
CROSS_NAMES = ("cross_attn.in", "cross_attn.q", "cross_attn.k", "cross_attn.v", "cross_attn.scores",
               "cross_attn.pattern", "cross_attn.z", "cross_attn.out", "resid_cross")
DECODER_BLOCK_NAMES = BLOCK_NAMES[:BLOCK_NAMES.index("resid_mid") + 1] + CROSS_NAMES + \
    BLOCK_NAMES[BLOCK_NAMES.index("resid_mid") + 1:]


class DecoderBlock(nn.Module):
    """Masked self-attention, cross-attention over the source, feed-forward: each added to the stream."""

    def __init__(self, cfg: ModelConfig, index: int):
        super().__init__()
        self.cfg, self.name = cfg, f"blocks.{index}"
        self.norm1, self.norm_cross, self.norm2 = make_norm(cfg), make_norm(cfg), make_norm(cfg)
        self.attn = Attention(cfg, f"{self.name}.attn")
        self.cross_attn = Attention(cfg, f"{self.name}.cross_attn")
        self.mlp = FeedForward(cfg, f"{self.name}.mlp")

    def _sublayer(self, x, norm, sublayer, rec: Recorder, reads: str, leaves: str):
        """x + sublayer(norm(x)) for pre-norm, norm(x + sublayer(x)) for post-norm; names what it reads and leaves."""
        pre_norm = self.cfg.norm_position == "pre"
        read = rec(f"{self.name}.{reads}", norm(x) if pre_norm else x)                 # (B, T, D)
        out = F.dropout(sublayer(read), self.cfg.dropout, rec.train)                    # (B, T, D)
        return rec(f"{self.name}.{leaves}", x + out if pre_norm else norm(x + out))    # (B, T, D)

    def forward(self, x: torch.Tensor, rec: Recorder, self_mask: torch.Tensor, memory: torch.Tensor,
                cross_mask: torch.Tensor) -> torch.Tensor:
        x = rec(f"{self.name}.resid_pre", x)                                            # (B, T, D)
        x = self._sublayer(x, self.norm1, lambda h: self.attn(h, rec, self_mask), rec, "attn.in", "resid_mid")
        x = self._sublayer(x, self.norm_cross, lambda h: self.cross_attn(h, rec, cross_mask, source=memory), rec,
                           "cross_attn.in", "resid_cross")
        return self._sublayer(x, self.norm2, lambda h: self.mlp(h, rec), rec, "mlp.in", "resid_post")


class EncoderDecoder(nn.Module):
    """Source in, target out: an encoder of n_layers blocks, a decoder of n_layers blocks, one vocabulary
    for both (token 0 is <unk>, 1 is padding, 2 begins and 3 ends a target)."""

    pad_id, bos_id, eos_id = 1, 2, 3

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if cfg.tie_embeddings:
            raise ValueError("an encoder-decoder here keeps its unembedding untied (tie_embeddings must be false)")
        self.cfg = cfg
        self.encoder_embed = Embedding(cfg)
        self.encoder_blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layers))
        self.encoder_norm = make_norm(cfg) if cfg.norm_position == "pre" else nn.Identity()
        self.decoder_embed = Embedding(cfg)
        self.decoder_blocks = nn.ModuleList(DecoderBlock(cfg, i) for i in range(cfg.n_layers))
        self.decoder_norm = make_norm(cfg) if cfg.norm_position == "pre" else nn.Identity()
        self.unembed = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        for p in self.parameters():             # the Annotated Transformer's initialisation
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    @property
    def trace_names(self) -> list[str]:
        """Every name a trace holds, in the order the forward pass produces them."""
        enc = [f"encoder.blocks.{i}.{b}" for i in range(self.cfg.n_layers) for b in BLOCK_NAMES]
        dec = [f"decoder.blocks.{i}.{b}" for i in range(self.cfg.n_layers) for b in DECODER_BLOCK_NAMES]
        return ["source", "target", *(f"encoder.{e}" for e in EMBED_NAMES), *enc, "encoder.final.norm",
                *(f"decoder.{e}" for e in EMBED_NAMES), *dec, "decoder.final.norm", "logits"]

    def source_mask(self, source: torch.Tensor) -> torch.Tensor:
        """[B, 1, 1, S]: True on real source tokens, False on padding (no query may look at padding)."""
        return (source != self.pad_id)[:, None, None, :]

    def encode(self, source: torch.Tensor, rec: Recorder) -> torch.Tensor:
        """The memory [B, S, D]: the source read with unmasked self-attention."""
        enc = rec.scoped("encoder.")
        x = self.encoder_embed(source, enc)                                  # (B, S, D)
        mask = self.source_mask(source)                                      # (B, 1, 1, S)
        for block in self.encoder_blocks:
            x = block(x, enc, mask)                                          # (B, S, D)
        return enc("final.norm", self.encoder_norm(x))                       # (B, S, D)

    def decode(self, target: torch.Tensor, memory: torch.Tensor, source: torch.Tensor, rec: Recorder) -> torch.Tensor:
        """Logits [B, T, V] for the next target token at every target position."""
        dec = rec.scoped("decoder.")
        x = self.decoder_embed(target, dec)                                  # (B, T, D)
        self_mask = causal_mask(target.shape[1], target.device)              # (T, T)
        cross_mask = self.source_mask(source)                                # (B, 1, 1, S)
        for block in self.decoder_blocks:
            x = block(x, dec, self_mask, memory, cross_mask)                 # (B, T, D)
        x = dec("final.norm", self.decoder_norm(x))                          # (B, T, D)
        return rec("logits", self.unembed(x))                                # (B, T, V)

    def forward(self, source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: logits [B, T, V] for a batch of sources [B, S] and decoder inputs [B, T]."""
        rec = Recorder(train=self.training)
        return self.decode(target, self.encode(source, rec), source, rec)

    @torch.no_grad()
    def run(self, source, target, edits: Mapping[str, Edit] | None = None) -> Trace:
        """One forward pass returning every intermediate by name; `edits` as for TransformerLM.run."""
        source, target = self.check_tokens(source, "source"), self.check_tokens(target, "target")
        unknown = set(edits or {}) - set(self.trace_names[2:])
        if unknown:
            raise ValueError(f"cannot edit {', '.join(sorted(unknown))}: not a name in this model's trace")
        rec = Recorder(edits, keep=True)
        rec.values["source"], rec.values["target"] = source, target
        self.decode(target, self.encode(source, rec), source, rec)
        return Trace(rec.values)

    def check_tokens(self, tokens, what: str) -> torch.Tensor:
        """Token ids as a (B, T) long tensor, or a ValueError a student can act on."""
        tokens = torch.as_tensor(tokens, dtype=torch.long).clone()
        if tokens.dim() == 1:
            tokens = tokens[None]                                            # (1, T)
        if tokens.dim() != 2 or tokens.shape[1] == 0:
            raise ValueError(f"the {what} must be a non-empty list of token ids")
        if tokens.shape[1] > self.cfg.max_len:
            raise ValueError(f"the {what} has {tokens.shape[1]} tokens; this model reads at most {self.cfg.max_len}")
        if tokens.min() < 0 or tokens.max() >= self.cfg.vocab_size:
            raise ValueError(f"the {what} holds token ids outside 0..{self.cfg.vocab_size - 1}")
        return tokens


# --- decoding -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Beam:
    """The best hypothesis (target ids after <bos>, up to and without <eos>), its total log-probability, and at
    every step the beam's hypotheses with their scores, best first (for display)."""
    tokens: list[int]
    score: float
    steps: list[list[tuple[list[int], float]]]


@torch.no_grad()
def beam_search(model: EncoderDecoder, source: list[int], beam_size: int = 1, max_len: int | None = None,
                edits: Mapping[str, Edit] | None = None) -> Beam:
    """Keep the `beam_size` likeliest partial targets at every step (scores: summed log-probabilities); a
    hypothesis that writes <eos> is finished. Beam size 1 is greedy decoding. `edits` (by trace name, as for
    run) apply at every step: what the model would write with, say, a cross-attention head knocked out."""
    max_len = min(max_len or model.cfg.max_len, model.cfg.max_len)
    src = model.check_tokens(source, "source")                                     # (1, S)
    memory = model.encode(src, Recorder(edits))                                    # (1, S, D)
    alive: list[tuple[list[int], float]] = [([model.bos_id], 0.0)]
    done: list[tuple[list[int], float]] = []
    steps = []
    for _ in range(max_len - 1):
        target = torch.tensor([ids for ids, _ in alive])                          # (N, t)
        logits = model.decode(target, memory.expand(len(alive), -1, -1), src.expand(len(alive), -1), Recorder(edits))
        logp = logits[:, -1].log_softmax(-1)                                       # (N, V)
        scores = torch.tensor([s for _, s in alive])[:, None] + logp              # (N, V)
        top = scores.flatten().topk(beam_size)
        V = logp.shape[1]
        candidates = [(alive[int(i) // V][0] + [int(i) % V], float(s)) for s, i in zip(top.values, top.indices)]
        steps.append(candidates)
        alive = []
        for ids, score in candidates:
            (done if ids[-1] == model.eos_id else alive).append((ids, score))
        if not alive or (done and max(s for _, s in done) >= alive[0][1]):
            break
    best_ids, best = max(done + alive, key=lambda h: h[1])
    tokens = [t for t in best_ids[1:] if t != model.eos_id]
    return Beam(tokens, best, steps)


def greedy(model: EncoderDecoder, source: list[int], max_len: int | None = None,
           edits: Mapping[str, Edit] | None = None) -> list[int]:
    """The target written by always taking the likeliest next token."""
    return beam_search(model, source, 1, max_len, edits).tokens


@torch.no_grad()
def sample(model: EncoderDecoder, source: list[int], temperature: float = 1.0, seed: int = 0,
           max_len: int | None = None) -> list[int]:
    """A target drawn token by token at `temperature`, reproducible with `seed`."""
    generator = torch.Generator().manual_seed(seed)
    max_len = min(max_len or model.cfg.max_len, model.cfg.max_len)
    src = model.check_tokens(source, "source")
    memory = model.encode(src, Recorder())
    ids = [model.bos_id]
    while len(ids) < max_len:
        logits = model.decode(torch.tensor([ids]), memory, src, Recorder())[0, -1]    # (V,)
        nxt = int(torch.multinomial((logits / max(temperature, 1e-6)).softmax(-1), 1, generator=generator))
        if nxt == model.eos_id:
            break
        ids.append(nxt)
    return ids[1:]


def transduce(bundle, text: str, beam_size: int = 1) -> str:
    """A source text turned into the decoded target text: for the bundled `sort`, "3 1 2" gives "1 2 3"."""
    ids = bundle.tokenizer.encode(text)
    out = beam_search(bundle.model, ids, beam_size).tokens
    return bundle.tokenizer.decode(out)


def exact_match(bundle, data: list[tuple[str, str]], beam_size: int = 1) -> float:
    """The share of (source, target) pairs whose decoded target is exactly the expected one."""
    hits = sum(transduce(bundle, source, beam_size) == target for source, target in data)
    return hits / max(1, len(data))
