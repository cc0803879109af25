"""The model's configuration: sizes, plus the switches our sources disagree on.

Each switch is a teaching point a student can flip and compare:
  pos            how the model knows word order: "sinusoidal" (fixed waves, Vaswani et al.),
                 "learned" (one trained vector per position, GPT-2), "rope" (rotary positions, Su et al. 2021,
                 Llama: nothing is added to the stream; each head's queries and keys are turned by an angle that
                 grows with the position, so their dot product depends on the distance between two tokens) or "none"
  rope_theta     the base of rotary positions' frequencies: pair i of a head turns by position x theta^(-2i/R)
                 (10,000 in the RoPE paper, Llama 2 and Pythia, 100,000 in SmolLM2)
  rotary_fraction
                 pos "rope": the fraction of each head's K dimensions that turn, R = int(K x fraction) (d_rotary);
                 the other K - R pass through unturned and compare two tokens whatever their distance. 1 in Llama,
                 0.25 in GPT-NeoX and Pythia
  norm           "layer" (LayerNorm: centre and scale), "rms" (RMSNorm: scale only) or "none"
  norm_position  "pre" (normalise what each sublayer reads, GPT-2) or "post" (normalise the sum, 2017 paper)
  activation     "relu", "gelu" (exact, with erf) or "gelu_tanh" (GPT-2's tanh approximation) inside the
                 MLP (the feed-forward network), or "swiglu" (Llama's gated MLP: a gate and an up projection,
                 SiLU on the gate, times the up projection, then the down projection)
  n_kv_heads     grouped-query attention (Llama 2 70B, Mistral, SmolLM2): the number of key/value heads, each
                 shared by n_heads / n_kv_heads query heads; 1 is multi-query attention; None: one per head
  bias           whether the linear layers (attention's and the MLP's) add a bias (GPT-2) or not (Llama)
  embed_scale    multiply token embeddings by sqrt(d_model), as the 2017 paper does
  tie_embeddings the unembedding reuses the token embedding matrix (GPT-2): one matrix reads words in and out
  norm_eps       the small number a norm adds under its square root (1e-5 in PyTorch and GPT-2)
  parallel       attention and the MLP side by side (GPT-J, GPT-NeoX, Pythia): both read the same normalised stream
                 entering the block and both add into it at once, x + attn(norm1(x)) + mlp(norm2(x)), where a
                 sequential block (False: GPT-2, Llama) feeds the MLP the stream attention has already added to.
                 Pre-norm only
"""
from dataclasses import asdict, dataclass, fields

POS_KINDS = ("sinusoidal", "learned", "none", "rope")
NORM_KINDS = ("layer", "rms", "none")
NORM_POSITIONS = ("pre", "post")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "swiglu")

# Bounds that keep a model small enough for a shared 2-core host (GPT-2 small fits: 50,257 tokens, D 768,
# F 3,072, 12 layers, 1,024 positions; so does SmolLM2-135M: 49,152 tokens, D 576, F 1,536, 30 layers, a context
# of 8,192); uploads are checked against them and against the upload size cap. max_len is SmolLM2's 8,192 so that
# its config says its real context: the limit costs nothing, because the pages read at most 64 tokens of any model
# (READ_LIMIT in explorer/app/state.py), a lab model at most 64, and a stored position table stays under the
# upload cap (8,192 x 1,024 floats is 32 MB).
LIMITS = dict(vocab_size=51_200, d_model=1024, n_heads=32, n_layers=32, d_ff=4096, max_len=8192)
# Newer than the first checkpoints: a file may lack them, and takes the defaults, which are what it was trained with.
ADDED_FIELDS = {"tie_embeddings", "norm_eps", "n_kv_heads", "rope_theta", "bias", "parallel", "rotary_fraction"}


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
    n_kv_heads: int | None = None   # G: key/value heads (grouped-query attention); None: G = H, one per head
    rope_theta: float = 10_000.0    # the base of the rotary frequencies (pos "rope" only)
    bias: bool = True               # linear layers with biases (GPT-2) or without (Llama)
    parallel: bool = False          # attention and the MLP read the same input and add at once (GPT-NeoX, Pythia)
    rotary_fraction: float = 1.0    # the fraction of each head's dimensions rotary positions turn (Pythia: 0.25)

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
        for name in ("embed_scale", "tie_embeddings", "bias", "parallel"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if isinstance(self.norm_eps, bool) or not isinstance(self.norm_eps, (int, float)) \
                or not 0.0 < self.norm_eps <= 0.1:
            raise ValueError(f"norm_eps must be a small positive number (at most 0.1), got {self.norm_eps!r}")
        if self.n_kv_heads is not None:
            if not isinstance(self.n_kv_heads, int) or isinstance(self.n_kv_heads, bool) \
                    or not 1 <= self.n_kv_heads <= self.n_heads or self.n_heads % self.n_kv_heads:
                raise ValueError(f"n_kv_heads must be a whole number that divides n_heads {self.n_heads} (each "
                                 f"key/value head serves the same number of query heads), got {self.n_kv_heads!r}")
        if isinstance(self.rope_theta, bool) or not isinstance(self.rope_theta, (int, float)) \
                or not 1.0 < self.rope_theta <= 1e9:
            raise ValueError(f"rope_theta must be a number above 1 (at most 1e9), got {self.rope_theta!r}")
        if self.parallel and self.norm_position != "pre":
            raise ValueError("a parallel block needs norm_position \"pre\": attention and the MLP each normalise the "
                             "stream they read, and nothing normalises their sum")
        if isinstance(self.rotary_fraction, bool) or not isinstance(self.rotary_fraction, (int, float)) \
                or not 0.0 < self.rotary_fraction <= 1.0:
            raise ValueError(f"rotary_fraction must be a number above 0 and at most 1 (the fraction of each head's "
                             f"dimensions that turn), got {self.rotary_fraction!r}")
        if self.pos == "rope" and self.rotary_fraction == 1.0 and self.d_head % 2:
            raise ValueError(f"rotary positions turn pairs of dimensions, so each head needs an even number of them; "
                             f"d_model {self.d_model} / n_heads {self.n_heads} = {self.d_head}")
        if self.pos == "rope" and (self.d_rotary % 2 or self.d_rotary < 2):
            raise ValueError(f"rotary positions turn pairs of dimensions, so the turned part of a head needs an even "
                             f"number of them, at least 2; int({self.d_head} dimensions per head x rotary_fraction "
                             f"{self.rotary_fraction}) = {self.d_rotary}")

    @property
    def d_head(self) -> int:
        """K: dimensions per attention head."""
        return self.d_model // self.n_heads

    @property
    def d_rotary(self) -> int:
        """R: the dimensions of each head that rotary positions turn, int(K x rotary_fraction), as GPT-NeoX counts
        them; the first R of the head turn, the other K - R pass through."""
        return int(self.d_head * self.rotary_fraction)

    @property
    def kv_heads(self) -> int:
        """G: key/value heads; query head h reads key/value head h // (H / G)."""
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

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
