"""The model's configuration: sizes, plus the switches our sources disagree on.

Each switch is a teaching point a student can flip and compare:
  pos            how the model knows word order: "sinusoidal" (fixed waves, Vaswani et al.),
                 "learned" (one trained vector per position, GPT-2) or "none"
  norm           "layer" (LayerNorm: centre and scale), "rms" (RMSNorm: scale only) or "none"
  norm_position  "pre" (normalise what each sublayer reads, GPT-2) or "post" (normalise the sum, 2017 paper)
  activation     "relu" or "gelu" inside the feed-forward network
  embed_scale    multiply token embeddings by sqrt(d_model), as the 2017 paper does
"""
from dataclasses import asdict, dataclass, fields

POS_KINDS = ("sinusoidal", "learned", "none")
NORM_KINDS = ("layer", "rms", "none")
NORM_POSITIONS = ("pre", "post")
ACTIVATIONS = ("relu", "gelu")

# Bounds that keep a model small enough for a shared 2-core host; uploads are checked against them.
LIMITS = dict(vocab_size=50_000, d_model=1024, n_heads=32, n_layers=16, d_ff=4096, max_len=1024)


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 64
    d_model: int = 32        # D: width of the residual stream
    n_heads: int = 2         # H: attention heads per layer; each reads K = D / H dimensions
    n_layers: int = 2        # number of transformer blocks
    d_ff: int = 64           # F: hidden width of the feed-forward network
    max_len: int = 16        # longest input (context length) the model accepts
    dropout: float = 0.0
    pos: str = "sinusoidal"
    norm: str = "layer"
    norm_position: str = "pre"
    activation: str = "relu"
    embed_scale: bool = False

    def __post_init__(self):
        for name, upper in LIMITS.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{name} must be a whole number, got {value!r}")
            if not 1 <= value <= upper:
                raise ValueError(f"{name} must be between 1 and {upper}, got {value}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}: "
                             "each head must get the same number of dimensions")
        if not isinstance(self.dropout, (int, float)) or not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be at least 0 and below 1, got {self.dropout!r}")
        for name, allowed in (("pos", POS_KINDS), ("norm", NORM_KINDS),
                              ("norm_position", NORM_POSITIONS), ("activation", ACTIVATIONS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {getattr(self, name)!r}")
        if not isinstance(self.embed_scale, bool):
            raise ValueError(f"embed_scale must be true or false, got {self.embed_scale!r}")

    @property
    def d_head(self) -> int:
        """K: dimensions per attention head."""
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ModelConfig":
        """Build from a JSON dict, refusing unknown or missing fields (uploads come through here)."""
        if not isinstance(d, dict):
            raise ValueError("the model config must be a JSON object")
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown config fields: {', '.join(sorted(unknown))}")
        missing = known - set(d)
        if missing:
            raise ValueError(f"missing config fields: {', '.join(sorted(missing))}")
        return cls(**d)
