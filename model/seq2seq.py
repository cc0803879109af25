"""The original encoder-decoder transformer ("Attention Is All You Need", 2017), read top to bottom.

The encoder reads the whole source at once (self-attention without a causal mask; padding is masked). The
decoder writes the target one token at a time: masked self-attention over what it has written, then
cross-attention over the encoder's output (its queries come from the target, its keys and values from the
source), then the MLP. The pieces are model/layers.py's, shared with the decoder-only model: the encoder and the
decoder are each a stack (embedding -> blocks -> final norm), the decoder's blocks with cross-attention.

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

import torch
import torch.nn as nn

from . import generate
from .config import ModelConfig
from .generate import Beam, NextLogProbs
from .tasks import encode_pairs
from .tokenizers import BOS, EOS, PAD  # noqa: F401  (tokens 1, 2 and 3 of its vocabulary; 0 is <unk>)
from .layers import (Block, Edit, Embedding, KVCache, Recorder, Trace, block_names, causal_mask, check_tokens,
                     embed_names, make_final_norm, stack, start_run)

# Cross-attention is never turned by rotary positions: its queries and keys stand in different sentences.
CROSS_NAMES = ("cross_attn.in", "cross_attn.q", "cross_attn.k", "cross_attn.v", "cross_attn.scores",
               "cross_attn.pattern", "cross_attn.z", "cross_attn.out", "resid_cross")


def decoder_block_names(cfg: ModelConfig) -> tuple[str, ...]:
    """A decoder block's values: a decoder-only block's, with cross-attention's after self-attention's."""
    names = block_names(cfg)
    after = names.index("resid_mid") + 1
    return names[:after] + CROSS_NAMES + names[after:]


class EncoderDecoder(nn.Module):
    """Source in, target out: an encoder of n_layers blocks, a decoder of n_layers blocks with cross-attention,
    one vocabulary for both (token 0 is <unk>, 1 is padding, 2 begins and 3 ends a target)."""

    pad_id, bos_id, eos_id = 1, 2, 3

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if cfg.tie_embeddings:
            raise ValueError("an encoder-decoder here keeps its unembedding untied (tie_embeddings must be false)")
        self.cfg = cfg
        self.encoder_embed = Embedding(cfg)
        self.encoder_blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layers))
        self.encoder_norm = make_final_norm(cfg)
        self.decoder_embed = Embedding(cfg)
        self.decoder_blocks = nn.ModuleList(Block(cfg, i, cross=True) for i in range(cfg.n_layers))
        self.decoder_norm = make_final_norm(cfg)
        self.unembed = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        for p in self.parameters():             # the Annotated Transformer's initialisation
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    @property
    def trace_names(self) -> list[str]:
        """Every name a trace holds, in the order the forward pass produces them."""
        enc = [f"encoder.blocks.{i}.{b}" for i in range(self.cfg.n_layers) for b in block_names(self.cfg)]
        dec = [f"decoder.blocks.{i}.{b}" for i in range(self.cfg.n_layers) for b in decoder_block_names(self.cfg)]
        return ["source", "target", *(f"encoder.{e}" for e in embed_names(self.cfg)), *enc, "encoder.final.norm",
                *(f"decoder.{e}" for e in embed_names(self.cfg)), *dec, "decoder.final.norm", "logits"]

    def source_mask(self, source: torch.Tensor) -> torch.Tensor:
        """[B, 1, 1, S]: True on real source tokens, False on padding (no query may look at padding)."""
        return (source != self.pad_id)[:, None, None, :]

    def encode(self, source: torch.Tensor, rec: Recorder) -> torch.Tensor:
        """The memory [B, S, D]: the source read with unmasked self-attention (padding hidden)."""
        return stack(self.encoder_embed, self.encoder_blocks, self.encoder_norm, source, rec.scoped("encoder."),
                     mask=self.source_mask(source))                                          # (B, S, D)

    def decode(self, target: torch.Tensor, memory: torch.Tensor, source: torch.Tensor, rec: Recorder) -> torch.Tensor:
        """Logits [B, T, V] for the next target token at every target position (after the rec.start positions a
        key/value cache holds, when generating)."""
        x = stack(self.decoder_embed, self.decoder_blocks, self.decoder_norm, target, rec.scoped("decoder."),
                  mask=causal_mask(target.shape[1], target.device, rec.start),              # (T, start + T)
                  memory=memory, memory_mask=self.source_mask(source))                       # (B, T, D)
        return rec("logits", self.unembed(x))                                                # (B, T, V)

    def forward(self, source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: logits [B, T, V] for a batch of sources [B, S] and decoder inputs [B, T]."""
        rec = Recorder(train=self.training)
        return self.decode(target, self.encode(source, rec), source, rec)

    @torch.no_grad()
    def run(self, source, target, edits: Mapping[str, Edit] | None = None) -> Trace:
        """One forward pass returning every intermediate by name; `edits` as for TransformerLM.run."""
        source, target = check_tokens(source, self.cfg, "source"), check_tokens(target, self.cfg, "target")
        rec = start_run(self.trace_names[2:], edits, inputs={"source": source, "target": target})
        self.decode(target, self.encode(source, rec), source, rec)
        return Trace(rec.values)


# --- decoding: model/generate.py's beam search and sampler, reading the decoder next to the encoded source -----

def decoder_logp(model: EncoderDecoder, source: torch.Tensor, edits: Mapping[str, Edit] | None = None,
                 use_cache: bool = True) -> NextLogProbs:
    """The decoder as generation sees it: targets written so far (N, t) and the key/value cache of the first ones
    -> next-token log-probabilities (N, V) and the cache of all t (`use_cache=False`: none; every step reads every
    target token again). The source (1, S) is encoded once; `edits` (by trace name) apply to the encoder and at
    every decoder step (with the cache, to the new position only: every ready-made edit acts position by position)."""
    memory = model.encode(source, Recorder(edits))                                           # (1, S, D)

    def next_logp(written: torch.Tensor, cache: KVCache | None) -> tuple[torch.Tensor, KVCache | None]:
        N = written.shape[0]
        rec = Recorder(edits, past=cache, cache=use_cache)
        new = written[:, rec.start:]                                                         # (N, t - start)
        logits = model.decode(new, memory.expand(N, -1, -1), source.expand(N, -1), rec)     # (N, t - start, V)
        return logits[:, -1].log_softmax(-1), KVCache(rec.kept, written.shape[1]) if use_cache else None
    return next_logp


@torch.no_grad()
def beam_search(model: EncoderDecoder, source: list[int], beam_size: int = 1, max_len: int | None = None,
                edits: Mapping[str, Edit] | None = None, use_cache: bool = True) -> Beam:
    """Keep the `beam_size` likeliest partial targets at every step (scores: summed log-probabilities); a
    hypothesis that writes <eos> is finished. Beam size 1 is greedy decoding. `edits` (by trace name, as for
    run) apply at every step: what the model would write with, say, a cross-attention head knocked out.
    `use_cache=False` reads every target token again at each step (the same result, slower)."""
    max_len = min(max_len or model.cfg.max_len, model.cfg.max_len)
    src = check_tokens(source, model.cfg, "source")                                          # (1, S)
    return generate.beam_search(decoder_logp(model, src, edits, use_cache), [model.bos_id], max_len - 1, beam_size,
                                end=model.eos_id)


def greedy(model: EncoderDecoder, source: list[int], max_len: int | None = None,
           edits: Mapping[str, Edit] | None = None) -> list[int]:
    """The target written by always taking the likeliest next token."""
    return beam_search(model, source, 1, max_len, edits).tokens


@torch.no_grad()
def sample(model: EncoderDecoder, source: list[int], temperature: float = 1.0, seed: int = 0,
           max_len: int | None = None, use_cache: bool = True) -> list[int]:
    """A target drawn token by token at `temperature`, reproducible with `seed`."""
    max_len = min(max_len or model.cfg.max_len, model.cfg.max_len)
    src = check_tokens(source, model.cfg, "source")                                          # (1, S)
    return generate.sample(decoder_logp(model, src, use_cache=use_cache), [model.bos_id], max_len - 1, temperature,
                           seed=seed, end=model.eos_id).tokens


def transduce(bundle, text: str, beam_size: int = 1) -> str:
    """A source text turned into the decoded target text: for the bundled `sort`, "3 1 2" gives "1 2 3"."""
    ids = bundle.tokenizer.encode(text)
    out = beam_search(bundle.model, ids, beam_size).tokens
    return bundle.tokenizer.decode(out)


@torch.no_grad()
def exact_match(bundle, data: list[tuple[str, str]], beam_size: int = 1) -> float:
    """The share of (source, target) pairs whose decoded target is exactly the expected one, token for token.

    Greedy decoding (beam 1) is read from one teacher-forced pass (model/generate.py `exact_match`), so every
    pair must fit the model, <bos> and <eos> included (model/tasks.py `encode_pairs` refuses one that does not);
    a wider beam has no such shortcut, so every source is decoded."""
    model, tok = bundle.model, bundle.tokenizer
    if beam_size > 1:
        right = sum(beam_search(model, tok.encode(s), beam_size).tokens == tok.encode(t) for s, t in data)
        return right / max(1, len(data))
    if not data:
        return 0.0
    sources, targets = encode_pairs(tok, data, model.cfg.max_len)                            # (N, S), (N, T)
    labels = targets[:, 1:].masked_fill(targets[:, 1:] == model.pad_id, -100)               # (N, T-1)
    rec = Recorder()                                                                         # no dropout
    logits = model.decode(targets[:, :-1], model.encode(sources, rec), sources, rec)        # (N, T-1, V)
    return generate.exact_match(logits, labels)
