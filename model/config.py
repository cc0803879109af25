"""The model's configuration: sizes, plus the switches our sources disagree on.

Each switch is a teaching point a student can flip and compare:
  pos            how the model knows word order: "sinusoidal" (fixed waves, Vaswani et al.),
                 "learned" (one trained vector per position, GPT-2) or "none"
  norm           "layer" (LayerNorm: centre and scale), "rms" (RMSNorm: scale only) or "none"
  norm_position  "pre" (normalise what each sublayer reads, GPT-2) or "post" (normalise the sum, 2017 paper)
  activation     "relu", "gelu" (exact, with erf) or "gelu_tanh" (GPT-2's tanh approximation) inside the
                 MLP (the feed-forward network)
  embed_scale    multiply token embeddings by sqrt(d_model), as the 2017 paper does
  tie_embeddings the unembedding reuses the token embedding matrix (GPT-2): one matrix reads words in and out
  norm_eps       the small number a norm adds under its square root (1e-5 in PyTorch and GPT-2)
"""
from dataclasses import asdict, dataclass, fields

POS_KINDS = ("sinusoidal", "learned", "none")
NORM_KINDS = ("layer", "rms", "none")
NORM_POSITIONS = ("pre", "post")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh")

# Bounds that keep a model small enough for a shared 2-core host (GPT-2 small fits: 50,257 tokens, D 768,
# F 3,072, 12 layers, 1,024 positions); uploads are checked against them and against the upload size cap.
LIMITS = dict(vocab_size=51_200, d_model=1024, n_heads=32, n_layers=16, d_ff=4096, max_len=1024)
ADDED_FIELDS = {"tie_embeddings", "norm_eps"}      # newer than the first checkpoints: a file may lack them


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 64
    d_model: int = 32        # D: width of the residual stream
    n_heads: int = 2         # H: attention heads per layer; each reads K = D / H dimensions
    n_layers: int = 2        # number of transformer blocks
    d_ff: int = 64           # F: hidden width of the MLP (the feed-forward network)
    max_len: int = 16        # longest input (context length) the model accepts
    dropout: float = 0.0
    pos: str = "sinusoidal"
    norm: str = "layer"
    norm_position: str = "pre"
    activation: str = "relu"
    embed_scale: bool = False
    tie_embeddings: bool = False
    norm_eps: float = 1e-5

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
        for name in ("embed_scale", "tie_embeddings"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if isinstance(self.norm_eps, bool) or not isinstance(self.norm_eps, (int, float)) \
                or not 0.0 < self.norm_eps <= 0.1:
            raise ValueError(f"norm_eps must be a small positive number (at most 0.1), got {self.norm_eps!r}")

    @property
    def d_head(self) -> int:
        """K: dimensions per attention head."""
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ModelConfig":
        """Build from a JSON dict, refusing unknown or missing fields (uploads come through here).

        Fields added after the first file format (ADDED_FIELDS) may be missing: older files take their defaults."""
        if not isinstance(d, dict):
            raise ValueError("the model config must be a JSON object")
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown config fields: {', '.join(sorted(unknown))}")
        missing = known - set(d) - ADDED_FIELDS
        if missing:
            raise ValueError(f"missing config fields: {', '.join(sorted(missing))}")
        return cls(**d)
