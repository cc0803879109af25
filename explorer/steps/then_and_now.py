"""Then and now: GPT-2 small (2019), Pythia-70M (2023) and SmolLM2-135M (2024), switch by switch, on the student's
sentence.

Each side is read from its model's downloaded files: config.json (through the same reader that loads the model)
and tokenizer.json. No weights are loaded, so the two models are never in memory together; the parameter count is
the model's own, built from the config on PyTorch's meta device (shapes only, no numbers).
"""
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from model.config import ModelConfig
from model.layers import cache_bytes_per_token
from model.pretrained import model_config
from model.tokenizers import Tokenizer, load_tokenizer_json
from model.transformer import TransformerLM

from explorer.plot import visible
from explorer.steps.home import NORM_NAMES
from explorer.steps.prediction import byte_size

SHOWN_PIECES = 24          # a sentence's tokens listed in the table, at most (the count is always whole)


@dataclass(frozen=True)
class Side:
    """One model as the comparison reads it."""
    label: str             # "GPT-2 small (2019)"
    cfg: ModelConfig
    tokenizer: Tokenizer
    parameters: int        # its learned numbers, each shared matrix once (a tied unembedding is the embedding)


def read_side(directory: str | Path, label: str) -> Side:
    """A model's side of the comparison from its hub directory (config.json and tokenizer.json)."""
    directory = Path(directory)
    cfg = model_config(directory)
    with torch.device("meta"):                  # shapes only
        model = TransformerLM(cfg)
    if cfg.tie_embeddings:
        model.unembed.weight = model.embed.tok.weight
    parameters = sum(p.numel() for p in model.parameters())    # parameters() lists a shared matrix once
    return Side(label, cfg, load_tokenizer_json(directory / "tokenizer.json"), parameters)


def positions_words(cfg: ModelConfig) -> str:
    if cfg.pos == "rope":
        turned = ("each pair of a query's and a key's dimensions" if cfg.d_rotary == cfg.d_head else
                  f"{cfg.d_rotary} of each head's {cfg.d_head} query and key dimensions ({cfg.d_rotary / cfg.d_head:.0%}),"
                  " in pairs,")
        return (f"rotary (RoPE): {turned} turned by an angle that grows with the position, base θ = "
                f"{cfg.rope_theta:,.0f}; nothing added to the token's vector")
    if cfg.pos == "learned":
        return f"learned: one vector for each of {cfg.max_len:,} seats, added to the token's vector"
    if cfg.pos == "sinusoidal":
        return "sinusoidal: a fixed wave pattern per seat, added to the token's vector"
    return "none"


def mlp_words(cfg: ModelConfig) -> str:
    d, f = cfg.d_model, cfg.d_ff
    if cfg.activation == "swiglu":
        return f"gated (SwiGLU): gate and up {d:,} → {f:,} each, SiLU(gate) × up, down {f:,} → {d:,}"
    name = {"gelu_tanh": "GELU", "gelu": "GELU", "relu": "ReLU"}.get(cfg.activation, cfg.activation)
    return f"{name}: {d:,} → {f:,} → {d:,}"


def heads_words(cfg: ModelConfig) -> str:
    H, G = cfg.n_heads, cfg.kv_heads
    if G == H:
        return f"{H} heads, each with its own keys and values (size {cfg.d_head})"
    return f"{H} query heads sharing {G} key/value heads, {H // G} each (size {cfg.d_head})"


def sentence_words(side: Side, text: str) -> tuple[int, str]:
    """(how many tokens, the first SHOWN_PIECES of them as text) of `text` under this side's tokenizer."""
    pieces = [p.text for p in side.tokenizer.pieces(text)]
    shown = " · ".join(visible(p).replace(" ", "␣") for p in pieces[:SHOWN_PIECES])        # a space seen
    return len(pieces), shown + (f" · … ({len(pieces) - SHOWN_PIECES} more)" if len(pieces) > SHOWN_PIECES else "")


def comparison_table(sides: list[Side], text: str) -> pd.DataFrame:
    """Switch by switch, one column per model; the last rows on `text`."""
    rows = {"Positions": [positions_words(s.cfg) for s in sides],
            "Norm": [f"{NORM_NAMES.get(s.cfg.norm, s.cfg.norm)}, {s.cfg.norm_position}-norm" for s in sides],
            "Feed-forward": [mlp_words(s.cfg) for s in sides],
            "Attention heads": [heads_words(s.cfg) for s in sides],
            "Attention and feed-forward": ["side by side: both read the block's input, both added at once"
                                           if s.cfg.parallel else "one after the other: the feed-forward network "
                                           "reads what attention added" for s in sides],
            "Words in and out": ["one matrix (tied)" if s.cfg.tie_embeddings else "two matrices (untied)"
                                 for s in sides],
            "Biases": ["yes" if s.cfg.bias else "none" for s in sides],
            "Layers × width": [f"{s.cfg.n_layers} × {s.cfg.d_model:,}" for s in sides],
            "Vocabulary": [f"{s.cfg.vocab_size:,} tokens" for s in sides],
            "Parameters": [f"{s.parameters:,} ({s.parameters / 1e6:.1f} million)" for s in sides],
            "KV cache per token": [byte_size(cache_bytes_per_token(s.cfg)) for s in sides]}
    counted = [sentence_words(s, text) for s in sides]
    rows["Your sentence"] = [f"{n} tokens: {shown}" for n, shown in counted]
    rows["Its KV cache"] = [byte_size(cache_bytes_per_token(s.cfg) * n) for s, (n, _) in zip(sides, counted)]
    return pd.DataFrame(rows, index=[s.label for s in sides]).T


def cache_claim(then: Side, now: Side) -> str:
    """Why the newer model keeps less per token though it is deeper: its heads share keys and values."""
    a, b = cache_bytes_per_token(then.cfg), cache_bytes_per_token(now.cfg)
    unshared = b * now.cfg.n_heads // now.cfg.kv_heads
    deeper = now.cfg.n_layers / then.cfg.n_layers
    compared = (f"{a / b:.1f} times less than {then.label.split(' (')[0]}'s {byte_size(a)}" if b < a
                else f"{b / a:.1f} times {then.label.split(' (')[0]}'s {byte_size(a)}")
    return (f"{now.label.split(' (')[0]} has {deeper:.1f} times as many layers ({now.cfg.n_layers} against "
            f"{then.cfg.n_layers}), yet keeps {byte_size(b)} per token in its cache, {compared}: its "
            f"{now.cfg.n_heads} query heads share {now.cfg.kv_heads} key/value heads. With a key and a value for "
            f"every head it would keep {byte_size(unshared)}.")
