"""A sparse autoencoder (SAE): a dictionary of directions in a model's activations, each of which fires rarely.

It follows SAELens (https://github.com/jbloomAus/SAELens/tree/main/sae_lens/saes: standard_sae.py, topk_sae.py)
in its parameters, its file format and its arithmetic, so a dictionary trained in the lab and one SAELens
publishes are read, used and saved the same way:

    encode(x) = ReLU((x - b_dec) @ W_enc + b_enc)     "standard": every feature above zero fires
                TopK(...)                             "topk": only the k largest fire
    decode(f) = f @ W_dec + b_dec                     the reconstruction: a sum of the firing features' directions

    W_enc [d_in, d_sae]   b_enc [d_sae]   W_dec [d_sae, d_in]   b_dec [d_in]

d_in is the model's width (d_model), d_sae the number of features; row i of W_dec is feature i's direction.
On disk an SAE is a directory of two files, SAELens' format: `cfg.json` and `sae_weights.safetensors`.

    sae = load_sae(directory)                          # SAELens 6's cfg.json, or the older one the hub's GPT-2 SAEs use
    trace = model.run(ids)
    features = sae.encode(sae.read(trace))             # (B, T, d_sae): which features fire at each token
    save_sae(sae, directory)                           # SAELens 6's format, which SAELens loads

`SAETrainer` trains one on a model's activations a few steps at a time (the lab calls `step(n)` each tick), and
`load_gpt2_sae(layer)` fetches one layer of SAELens' `gpt2-small-res-jb` from the Hugging Face hub.
"""
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from .config import ModelConfig
from .hub import PROBE_TIMEOUT_S, Pretrained, fetch
from .transformer import TransformerLM

CFG_FILE, WEIGHTS_FILE = "cfg.json", "sae_weights.safetensors"
WEIGHTS = ("W_enc", "b_enc", "W_dec", "b_dec")
ARCHITECTURES = ("standard", "topk")
# "expected_average_only_in" scaled the activations while training; SAELens' disk loader, like ours, then uses
# the weights as they are (its from_pretrained folds a published factor in; the releases read here have none).
NORMALIZATIONS = ("none", "expected_average_only_in")
DTYPES = ("float32", "float16", "bfloat16", "float64")    # cfg.json's dtype (earlier SAELens: "torch.float32"); the
                                                          # weights are read as float32 whatever it says
FORMAT_VERSION = "6.0.0"   # the SAELens file format save_sae writes, as its sae_lens_version (SAELens reads a file
                           # without one, or older, as the format before 6)
RENAMED = {"hook_point": "hook_name", "hook_point_head_index": "hook_head_index",   # before SAELens 6 -> SAELens 6
           "activation_fn_str": "activation_fn"}
METADATA = ("model_name", "hook_name", "hook_head_index", "prepend_bos", "context_size", "dataset_path",
            "model_from_pretrained_kwargs", "neuronpedia_id")                        # what SAELens 6 keeps in metadata


# --- the config -----------------------------------------------------------------------------------------------

@dataclass
class SAEConfig:
    """What cfg.json says: the sizes, the activation and where in which model the SAE reads."""
    d_in: int                              # the width it reads: the model's d_model for the residual stream
    d_sae: int                             # how many features
    architecture: str = "standard"         # "standard" (ReLU) or "topk"
    k: int | None = None                   # "topk": how many features fire per token
    apply_b_dec_to_input: bool = True      # subtract b_dec before encoding (SAELens' default)
    normalize_activations: str = "none"    # one of NORMALIZATIONS: both read the activations as they are
    rescale_acts_by_decoder_norm: bool = False   # "topk": rank features by activation x decoder row norm
    hook_name: str = ""                    # TransformerLens' name of what it reads: "blocks.8.hook_resid_pre"
    model_name: str = ""                   # the model it was trained on: "gpt2-small", "tinytales"
    hook_head_index: int | None = None
    prepend_bos: bool = True               # its training windows began with the tokenizer's BOS token
    context_size: int | None = None        # its training windows' length
    dataset_path: str = ""                 # the text it was trained on
    model_from_pretrained_kwargs: dict = field(default_factory=dict)  # how TransformerLens loaded the model:
                                           # {"center_writing_weights": True} means a centred residual stream
    neuronpedia_id: str | None = None
    extra: dict = field(default_factory=dict)   # any other metadata, kept as it was (the lab's training facts)

    def __post_init__(self):
        for name in ("d_in", "d_sae"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}")
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"this app reads SAEs of architecture {' or '.join(ARCHITECTURES)}, not "
                             f"{self.architecture!r}")
        if self.architecture == "topk" and (not isinstance(self.k, int) or not 1 <= self.k <= self.d_sae):
            raise ValueError(f"a top-k SAE needs k, a whole number from 1 to d_sae ({self.d_sae}), got {self.k!r}")
        if self.normalize_activations not in NORMALIZATIONS:
            raise ValueError(f"this app reads SAEs whose normalize_activations is {' or '.join(NORMALIZATIONS)}, "
                             f"not {self.normalize_activations!r}")
        for name in ("hook_name", "model_name", "dataset_path"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"{name} must be text, got {getattr(self, name)!r}")

    @property
    def centred(self) -> bool:
        """Whether it reads a centred residual stream (each position minus its mean over d_model), as
        TransformerLens' GPT-2 with center_writing_weights writes it."""
        return bool(self.model_from_pretrained_kwargs.get("center_writing_weights"))

    @classmethod
    def from_json(cls, spec: dict) -> "SAEConfig":
        """A config from cfg.json's fields: SAELens 6's (sizes at the top, the rest under "metadata") or those of
        earlier SAELens (all at the top: hook_point, activation_fn_str, activation_fn_kwargs, as the hub's GPT-2
        SAEs have them). Raises ValueError saying what is wrong."""
        if not isinstance(spec, dict):
            raise ValueError("cfg.json must hold a JSON object")
        metadata = spec.get("metadata") if isinstance(spec.get("metadata"), dict) else {}
        flat = {RENAMED.get(key, key): value for key, value in {**spec, **metadata}.items() if key != "metadata"}
        missing = [name for name in ("d_in", "d_sae") if name not in flat]
        if missing:
            raise ValueError(f"cfg.json lacks {' and '.join(missing)}")
        if str(flat.get("dtype", "float32")).removeprefix("torch.") not in DTYPES:
            raise ValueError(f"cfg.json's dtype {flat.get('dtype')!r} is not one of {', '.join(DTYPES)}")
        if not isinstance(flat.get("model_from_pretrained_kwargs") or {}, dict):
            raise ValueError("cfg.json's model_from_pretrained_kwargs must be a JSON object")
        architecture = flat.get("architecture") or "standard"
        kwargs = flat.get("activation_fn_kwargs") or {}
        if flat.get("activation_fn") == "topk" and isinstance(kwargs, dict) and kwargs.get("k") is not None:
            architecture, flat["k"] = "topk", kwargs["k"]          # earlier SAELens said top-k this way
        normalize = flat.get("normalize_activations")
        if isinstance(normalize, bool) or normalize is None:       # earlier SAELens: a flag, or nothing
            normalize = "expected_average_only_in" if normalize else "none"
        known = {f.name for f in fields(cls)} - {"extra"}
        chosen = {name: flat[name] for name in known if flat.get(name) is not None}
        versions = ("sae_lens_version", "sae_lens_training_version")              # written anew by to_json
        extra = {key: value for key, value in metadata.items() if key not in {*known, *RENAMED, *versions}}
        return cls(**{**chosen, "architecture": architecture, "normalize_activations": normalize,
                      "model_from_pretrained_kwargs": dict(flat.get("model_from_pretrained_kwargs") or {}),
                      "extra": extra})

    def to_json(self) -> dict:
        """cfg.json's fields in SAELens 6's format: the sizes and switches at the top, the rest under "metadata"."""
        metadata = {**self.extra, "sae_lens_version": FORMAT_VERSION, "sae_lens_training_version": None,
                    **{name: getattr(self, name) for name in METADATA}}
        spec = {"d_in": self.d_in, "d_sae": self.d_sae, "dtype": "float32", "device": "cpu",
                "apply_b_dec_to_input": self.apply_b_dec_to_input,
                "normalize_activations": self.normalize_activations, "reshape_activations": "none",
                "metadata": metadata}
        if self.architecture == "topk":
            spec |= {"k": self.k, "rescale_acts_by_decoder_norm": self.rescale_acts_by_decoder_norm}
        return {**spec, "architecture": self.architecture}


# --- the SAE ------------------------------------------------------------------------------------------------------

class SAE(nn.Module):
    """W_enc, b_enc, W_dec, b_dec under SAELens' names and shapes; `encode`, `decode`, and `forward` = both."""

    def __init__(self, cfg: SAEConfig):
        super().__init__()
        self.cfg = cfg
        self.W_enc = nn.Parameter(torch.empty(cfg.d_in, cfg.d_sae))       # (d_in, d_sae)
        self.b_enc = nn.Parameter(torch.zeros(cfg.d_sae))                  # (d_sae,)
        self.W_dec = nn.Parameter(torch.empty(cfg.d_sae, cfg.d_in))       # (d_sae, d_in): a direction per row
        self.b_dec = nn.Parameter(torch.zeros(cfg.d_in))                   # (d_in,)
        if not self.W_dec.is_meta:                                         # SAELens' start: W_enc = W_dec^T
            with torch.no_grad():
                nn.init.kaiming_uniform_(self.W_dec)
                self.W_enc.copy_(self.W_dec.T)

    def pre_activations(self, x: torch.Tensor) -> torch.Tensor:
        """(..., d_in) -> (..., d_sae): each feature's score before the activation."""
        if self.cfg.apply_b_dec_to_input:
            x = x - self.b_dec                                             # (..., d_in)
        pre = x @ self.W_enc + self.b_enc                                  # (..., d_sae)
        if self.cfg.architecture == "topk" and self.cfg.rescale_acts_by_decoder_norm:
            pre = pre * self.W_dec.norm(dim=-1)                            # (..., d_sae)
        return pre

    def activate(self, pre: torch.Tensor) -> torch.Tensor:
        """(..., d_sae) -> (..., d_sae): ReLU ("standard"), or ReLU of the k largest and zero elsewhere ("topk")."""
        if self.cfg.architecture == "standard":
            return F.relu(pre)
        top = pre.topk(self.cfg.k, dim=-1, sorted=False)                   # (..., k) values and indices
        return torch.zeros_like(pre).scatter(-1, top.indices, F.relu(top.values))   # (..., d_sae)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """(..., d_in) -> (..., d_sae): how strongly each feature fires (0: not at all)."""
        return self.activate(self.pre_activations(x.to(self.W_enc.dtype)))

    def decode(self, features: torch.Tensor) -> torch.Tensor:
        """(..., d_sae) -> (..., d_in): the reconstruction, the firing features' directions summed, plus b_dec."""
        if self.cfg.architecture == "topk" and self.cfg.rescale_acts_by_decoder_norm:
            features = features / self.W_dec.norm(dim=-1)                  # (..., d_sae)
        return features @ self.W_dec + self.b_dec                          # (..., d_in)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., d_in) -> (..., d_in): the reconstruction of x."""
        return self.decode(self.encode(x))

    @property
    def trace_name(self) -> str:
        """The trace value this SAE reads (our name for cfg.hook_name)."""
        return our_name(self.cfg.hook_name)

    def read(self, trace: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """What this SAE encodes, from a trace (B, T, d_in): the value at its hook, centred over d_model when it
        was trained on TransformerLens' centred GPT-2 (the same stream once a LayerNorm has read it)."""
        x = trace[self.trace_name]                                         # (B, T, D)
        return x - x.mean(dim=-1, keepdim=True) if self.cfg.centred else x


# --- names: TransformerLens' hooks and our trace ----------------------------------------------------------------

# TransformerLens' hook (after "blocks.L.") -> our trace name (after "blocks.L."). Its attention hooks (hook_z,
# hook_pattern) are laid out differently from ours and are not read.
BLOCK_HOOKS = {"hook_resid_pre": "resid_pre", "hook_resid_mid": "resid_mid", "hook_resid_post": "resid_post",
               "hook_attn_out": "attn.out", "hook_mlp_out": "mlp.out", "mlp.hook_pre": "mlp.pre",
               "mlp.hook_post": "mlp.post"}
MODEL_HOOKS = {"hook_embed": "embed.tok", "hook_pos_embed": "embed.pos", "ln_final.hook_normalized": "final.norm"}


def our_name(hook_name: str) -> str:
    """Our trace name for a SAELens (TransformerLens) hook name: "blocks.8.hook_resid_pre" -> "blocks.8.resid_pre"
    (the stream entering block 8, which is block 7's resid_post), "blocks.11.hook_resid_post" ->
    "blocks.11.resid_post". A name that is already ours comes back as it is."""
    if hook_name in MODEL_HOOKS:
        return MODEL_HOOKS[hook_name]
    if hook_name in MODEL_HOOKS.values():
        return hook_name
    match = re.fullmatch(r"blocks\.(\d+)\.(.+)", hook_name or "")
    if match:
        layer, rest = match.groups()
        if rest in BLOCK_HOOKS:
            return f"blocks.{int(layer)}.{BLOCK_HOOKS[rest]}"
        if rest in BLOCK_HOOKS.values():
            return hook_name
    raise ValueError(f"this SAE reads {hook_name!r}; this app can read the residual stream (hook_resid_pre, "
                     "hook_resid_mid, hook_resid_post), attention's and the MLP's outputs, the MLP's hidden layer "
                     "and the embeddings")


def their_name(trace_name: str) -> str:
    """TransformerLens' hook name for one of our trace names ("blocks.1.resid_post" -> "blocks.1.hook_resid_post"):
    what a lab SAE's cfg.json says it reads."""
    for hook, ours in MODEL_HOOKS.items():
        if trace_name == ours:
            return hook
    match = re.fullmatch(r"blocks\.(\d+)\.(.+)", trace_name)
    for hook, ours in BLOCK_HOOKS.items():
        if match and match.group(2) == ours:
            return f"blocks.{match.group(1)}.{hook}"
    raise ValueError(f"an SAE cannot read {trace_name!r}; it reads the residual stream, attention's or the MLP's "
                     "output, the MLP's hidden layer or the embeddings")


def check_fits(sae: SAE, cfg: ModelConfig, model_name: str) -> str:
    """The trace name `sae` reads in a model of config `cfg` called `model_name`, or a ValueError in plain words
    when it does not fit that model (another width, or a layer the model does not have)."""
    name = sae.trace_name
    width = cfg.d_ff if name.endswith(("mlp.pre", "mlp.post")) else cfg.d_model
    trained_on = sae.cfg.model_name or "another model"
    if sae.cfg.d_in != width:
        raise ValueError(f"this dictionary was trained on {trained_on}, not on {model_name}: it reads "
                         f"{sae.cfg.d_in} numbers per token at {name}, and {model_name} has {width} there")
    match = re.match(r"blocks\.(\d+)\.", name)
    if match and int(match.group(1)) >= cfg.n_layers:
        raise ValueError(f"this dictionary was trained on {trained_on}, not on {model_name}: it reads layer "
                         f"{match.group(1)}, and {model_name} has {cfg.n_layers} layers")
    return name


# --- files --------------------------------------------------------------------------------------------------------

def load_sae(directory: str | Path, overrides: dict | None = None) -> SAE:
    """The SAE in `directory` (cfg.json and sae_weights.safetensors, SAELens' format), float32, in eval mode.
    `overrides` replaces cfg.json's fields as SAELens' pretrained list does for a release. A missing or broken file,
    weights that do not match cfg.json, or weights that are not finite raise ValueError saying which."""
    directory = Path(directory)
    missing = [name for name in (CFG_FILE, WEIGHTS_FILE) if not (directory / name).is_file()]
    if missing:
        raise ValueError(f"{directory} lacks {' and '.join(missing)}: an SAE is a folder holding {CFG_FILE} and "
                         f"{WEIGHTS_FILE}")
    try:
        spec = json.loads((directory / CFG_FILE).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{CFG_FILE} is not valid JSON ({e})") from None
    except OSError as e:
        raise ValueError(f"{CFG_FILE} could not be read ({e})") from None
    if isinstance(spec, dict) and overrides:
        spec = {**spec, **overrides}
    cfg = SAEConfig.from_json(spec)
    try:
        tensors = load_file(directory / WEIGHTS_FILE)
    except (SafetensorError, OSError, ValueError) as e:
        raise ValueError(f"{WEIGHTS_FILE} could not be read ({e})") from None
    scale = tensors.pop("scaling_factor", None)            # an early SAELens extra: only all ones can be ignored
    if scale is not None and not torch.all(scale == 1):
        raise ValueError(f"{WEIGHTS_FILE} has a finetuning scaling factor, which this app does not apply")
    return from_weights(cfg, tensors)


def from_weights(cfg: SAEConfig, tensors: Mapping[str, torch.Tensor]) -> SAE:
    """An SAE of config `cfg` holding `tensors` (W_enc, b_enc, W_dec, b_dec), checked: names, shapes, finite."""
    absent, unexpected = [n for n in WEIGHTS if n not in tensors], sorted(set(tensors) - set(WEIGHTS))
    if absent or unexpected:
        raise ValueError(f"{WEIGHTS_FILE} should hold {', '.join(WEIGHTS)}"
                         + (f"; it lacks {', '.join(absent)}" if absent else "")
                         + (f"; it also holds {', '.join(unexpected[:5])}" if unexpected else ""))
    with torch.device("meta"):                             # shapes only: the file's tensors become the weights
        sae = SAE(cfg)
    expected = {name: tuple(p.shape) for name, p in sae.named_parameters()}
    weights = {}
    for name in WEIGHTS:
        value = tensors[name]
        if tuple(value.shape) != expected[name]:
            raise ValueError(f"{name} has shape {tuple(value.shape)}, but cfg.json's d_in {cfg.d_in} and d_sae "
                             f"{cfg.d_sae} make it {expected[name]}")
        if not value.is_floating_point():
            raise ValueError(f"{name} holds {value.dtype} numbers; an SAE's weights are floating point")
        value = value.to(torch.float32).contiguous()
        if not torch.isfinite(value).all():
            raise ValueError(f"{name} contains NaN or infinite values")
        weights[name] = value
    sae.load_state_dict(weights, strict=True, assign=True)
    return sae.eval()


def save_sae(sae: SAE, directory: str | Path) -> Path:
    """Write `sae` into `directory` as SAELens 6 does: cfg.json and sae_weights.safetensors (float32)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {name: getattr(sae, name).detach().to(torch.float32).contiguous().clone() for name in WEIGHTS}
    save_file(tensors, directory / WEIGHTS_FILE)
    (directory / CFG_FILE).write_text(json.dumps(sae.cfg.to_json(), indent=1) + "\n", encoding="utf-8")
    return directory


# --- the pretrained dictionary: SAELens' gpt2-small-res-jb --------------------------------------------------------

# Joseph Bloom's residual-stream SAEs of GPT-2 small, SAELens' release "gpt2-small-res-jb" (its pretrained_saes.yaml
# names this repository). The revision was read from public projects that pin these files, never fetched from here
# (our build machines cannot reach the hub); check it where the hub is reachable:
#   huggingface_hub.model_info("jbloom/GPT2-Small-SAEs-Reformatted").sha
GPT2_SAES = Pretrained("jbloom/GPT2-Small-SAEs-Reformatted", "57d08a4fd333fbf18caf3fbea63ceeb88e2f50d9",
                       "GPT-2 small's feature dictionary",
                       "24,576 features a layer, Joseph Bloom 2024 (SAELens' gpt2-small-res-jb); "
                       "downloads about 151 MB once per layer", download_mb=151)
GPT2_SAE_LAYERS = 13            # 0-11: the stream entering block L; 12: the stream leaving the last block
# What SAELens' pretrained list adds to this release's cfg.json: trained on TransformerLens' GPT-2 with its
# writing weights centred, so these SAEs read each position's residual stream minus its mean.
GPT2_SAE_OVERRIDES = {"model_from_pretrained_kwargs": {"center_writing_weights": True}}


def gpt2_sae_spec(layer: int) -> Pretrained:
    """The hub files of gpt2-small-res-jb's SAE for `layer` (0-12): one folder, cfg.json and sae_weights.safetensors."""
    if not isinstance(layer, int) or not 0 <= layer < GPT2_SAE_LAYERS:
        raise ValueError(f"GPT-2 small's dictionaries read layers 0 to {GPT2_SAE_LAYERS - 1}, not {layer!r}")
    hook = "blocks.11.hook_resid_post" if layer == GPT2_SAE_LAYERS - 1 else f"blocks.{layer}.hook_resid_pre"
    return replace(GPT2_SAES, label=f"{GPT2_SAES.label} for layer {layer}",
                   files=(f"{hook}/{CFG_FILE}", f"{hook}/{WEIGHTS_FILE}"))


def load_gpt2_sae(layer: int, cache_dir: str | Path | None = None,
                  progress: Callable[[int, int, str], None] | None = None, timeout: float = PROBE_TIMEOUT_S) -> SAE:
    """gpt2-small-res-jb's SAE for `layer`, from the hub cache or downloaded once into it (model/hub.py `fetch`: the
    same progress calls and HubUnavailable messages as the pretrained models)."""
    return load_sae(fetch(gpt2_sae_spec(layer), cache_dir, progress, timeout), overrides=GPT2_SAE_OVERRIDES)


# --- activations ----------------------------------------------------------------------------------------------------

@torch.no_grad()
def activations(model: TransformerLM, ids, name: str, window: int | None = None, prefix: tuple[int, ...] = (),
                batch: int = 64) -> torch.Tensor:
    """The trace value `name` at every token of the id stream `ids`, read in windows of `window` tokens (the model's
    context unless given), each starting with `prefix` (GPT-2's <|endoftext|>), whose values are left out: (N, D)."""
    ids = torch.as_tensor(ids, dtype=torch.long).flatten()
    width = (window or model.cfg.max_len) - len(prefix)
    if width < 1 or len(ids) < width:
        raise ValueError(f"the text is too short: {len(ids)} tokens, and one window reads {max(width, 1)}")
    rows = ids[: len(ids) // width * width].view(-1, width)                          # (n, W)
    if prefix:
        rows = torch.cat([torch.tensor(prefix).expand(len(rows), -1), rows], dim=1)  # (n, P + W)
    out = [model.run(rows[i:i + batch], names=[name])[name][:, len(prefix):]         # (b, W, D)
           for i in range(0, len(rows), batch)]
    return torch.cat(out).flatten(0, 1)                                              # (N, D)


# --- training -------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SAETrainConfig:
    """How an SAE is trained. The activations are scaled so that their mean norm is sqrt(d_in) (SAELens'
    "expected_average_only_in"), so one recipe fits models of any scale; the scale is folded out of the saved SAE."""
    steps: int = 1500                  # a run's budget (the lab stops there; `step` itself never refuses more)
    lr: float = 1e-3                   # Adam's learning rate, after a linear warmup
    lr_warmup: int = 50                # steps
    batch_size: int = 1024             # activations (tokens) per step
    l1_coefficient: float = 1.0        # "standard" only: the sparsity penalty's weight, on |features| summed per token
    l1_warmup: int = 200               # steps over which the penalty grows from 0 (SAELens' l1_warm_up_steps)
    dead_window: int = 200             # a feature that has not fired for this many steps counts as dead
    aux_coefficient: float = 1.0       # "topk" only: the AuxK loss, dead features learning what the live ones miss
    seed: int = 0

    def __post_init__(self):
        if not (isinstance(self.lr, (int, float)) and 0 < self.lr <= 1):
            raise ValueError(f"the learning rate must be above 0 and at most 1, got {self.lr!r}")
        for name in ("steps", "batch_size", "dead_window"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a whole number of at least 1, got {getattr(self, name)!r}")
        if min(self.lr_warmup, self.l1_warmup) < 0 or self.l1_coefficient < 0 or self.aux_coefficient < 0:
            raise ValueError("the warmups and coefficients cannot be negative")


@dataclass(frozen=True)
class SAEPreset:
    """A named, ready recipe (minGPT style): the architecture, the width as a multiple of d_in, and the training."""
    about: str
    architecture: str
    expansion: int                     # d_sae = expansion x d_in
    train: SAETrainConfig
    k: int | None = None               # "topk" only

    def config(self, d_in: int, hook_name: str = "", model_name: str = "", **metadata) -> SAEConfig:
        """The SAEConfig of this recipe for activations of width `d_in` read at `hook_name` of `model_name`."""
        return SAEConfig(d_in=d_in, d_sae=self.expansion * d_in, architecture=self.architecture, k=self.k,
                         hook_name=hook_name, model_name=model_name, **metadata)


# Both reach explained variance 0.9 with at most 16 features firing per token on tinytales' residual stream within
# a few hundred steps on one core (the benchmark measures it).
SAE_PRESETS = {
    "topk": SAEPreset("Top-k: the 8 strongest of 8x the width's features fire at each token; no penalty to tune.",
                      "topk", 8, SAETrainConfig(lr=2e-3), k=8),
    "l1": SAEPreset("L1: a ReLU dictionary of 8x the width, pushed towards few firing features by a penalty on "
                    "their sizes (SAELens' standard SAE).",
                    "standard", 8, SAETrainConfig(lr=4e-3, l1_coefficient=1.0)),
}


@dataclass(frozen=True)
class SAEMetrics:
    """One training step, measured on its batch before the update."""
    step: int
    loss: float                        # what was minimised: reconstruction + sparsity (+ AuxK), on scaled activations
    mse: float                         # reconstruction error: mean over tokens and dimensions of (x - x_hat)^2
    l0: float                          # features firing per token, on average
    explained_variance: float          # 1 - sum |x - x_hat|^2 / sum |x - mean x|^2
    dead: float                        # the share of features that did not fire over the last dead_window steps


def measure(x: torch.Tensor, x_hat: torch.Tensor, features: torch.Tensor) -> tuple[float, float, float]:
    """(mse, l0, explained variance) of a reconstruction x_hat (N, D) of x (N, D) from features (N, d_sae)."""
    residual = (x - x_hat).pow(2).sum()
    total = (x - x.mean(dim=0)).pow(2).sum().clamp(min=1e-12)
    return float(residual / x.numel()), float((features > 0).sum(-1).float().mean()), float(1 - residual / total)


class SAETrainer:
    """Trains an SAE of config `cfg` on `activations` (N, d_in), a few steps per `step(n)` call.

    SAELens' choices where they are simple: b_dec starts at the activations' mean, W_enc at W_dec^T, and the decoder's
    rows are kept at unit length (so a feature's activation is its size along its direction); Adam; the loss is the
    squared error summed over d_in (mean over tokens) plus, for "standard", the L1 penalty (warmed up), or, for "topk",
    the AuxK loss on dead features. A step whose loss is not finite stops training (`stopped` says why)."""

    def __init__(self, cfg: SAEConfig, activations: torch.Tensor, train: SAETrainConfig = SAETrainConfig()):
        x = torch.as_tensor(activations, dtype=torch.float32)
        if x.dim() != 2 or x.shape[1] != cfg.d_in:
            raise ValueError(f"the activations must be (tokens, {cfg.d_in}); got shape {tuple(x.shape)}")
        if len(x) < 2 or not torch.isfinite(x).all():
            raise ValueError("the activations must be at least 2 tokens of finite numbers")
        self.cfg, self.train = cfg, train
        self.scale = math.sqrt(cfg.d_in) / float(x.norm(dim=-1).mean().clamp(min=1e-12))   # mean norm -> sqrt(d_in)
        self.x = x * self.scale                                                           # (N, d_in), scaled
        self.rng = torch.Generator().manual_seed(train.seed)          # never torch's global one (model/seeding.py)
        w = torch.randn(cfg.d_sae, cfg.d_in, generator=self.rng)                          # (d_sae, d_in)
        w = w / w.norm(dim=-1, keepdim=True)                                              # unit directions
        self._sae = from_weights(replace(cfg, normalize_activations="none"), {
            "W_enc": w.T.clone(), "b_enc": torch.zeros(cfg.d_sae), "W_dec": w, "b_dec": self.x.mean(dim=0)})
        self.optimizer = torch.optim.Adam(self._sae.parameters(), lr=train.lr)
        self.steps_done = 0
        self.since_fired = torch.zeros(cfg.d_sae, dtype=torch.long)                       # (d_sae,) steps
        self.history: list[SAEMetrics] = []
        self.stopped: str | None = None

    def sae(self) -> SAE:
        """A copy of the SAE as trained so far, reading the activations as they are (the scale folded out)."""
        cfg = replace(self.cfg, normalize_activations="none")
        tensors = {name: getattr(self._sae, name).detach().clone() for name in WEIGHTS}
        tensors["b_enc"] /= self.scale                     # ReLU and top-k commute with a positive scale, so
        tensors["b_dec"] /= self.scale                     # dividing the biases gives features in the raw units
        return from_weights(cfg, tensors)

    def _batch(self) -> torch.Tensor:
        n = len(self.x)
        if self.train.batch_size >= n:
            return self.x
        return self.x[torch.randint(0, n, (self.train.batch_size,), generator=self.rng)]   # (B, d_in)

    def _aux_loss(self, x: torch.Tensor, x_hat: torch.Tensor, pre: torch.Tensor) -> torch.Tensor:
        """AuxK (SAELens' topk_sae.py, from "Scaling and evaluating sparse autoencoders"): the top dead features'
        reconstruction of what the live ones missed."""
        dead = self.since_fired >= self.train.dead_window                                # (d_sae,)
        n_dead = int(dead.sum())
        if n_dead == 0 or self.train.aux_coefficient == 0:
            return x.new_zeros(())
        k_aux = min(self.cfg.d_in // 2, n_dead)
        scores = torch.where(dead, pre, -torch.inf)                                      # (B, d_sae)
        top = scores.topk(k_aux, dim=-1)
        acts = torch.zeros_like(pre).scatter(-1, top.indices, F.relu(top.values))        # (B, d_sae)
        missed = (x - x_hat).detach()                                                    # (B, d_in)
        scale = min(n_dead / (self.cfg.d_in // 2), 1.0)
        return self.train.aux_coefficient * scale * (acts @ self._sae.W_dec - missed).pow(2).sum(-1).mean()

    def step(self, n: int = 1) -> list[SAEMetrics]:
        """Take up to n steps; returns the metrics of those taken (also kept in `history`). Stops early, setting
        `stopped`, if a step's loss or the weights stop being finite numbers."""
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        taken: list[SAEMetrics] = []
        sae, train = self._sae, self.train
        for _ in range(n if self.stopped is None else 0):
            step = self.steps_done + 1
            for group in self.optimizer.param_groups:
                group["lr"] = train.lr * min(1.0, step / train.lr_warmup) if train.lr_warmup else train.lr
            x = self._batch()                                                            # (B, d_in)
            pre = sae.pre_activations(x)                                                 # (B, d_sae)
            features = sae.activate(pre)                                                 # (B, d_sae)
            x_hat = sae.decode(features)                                                 # (B, d_in)
            loss = (x_hat - x).pow(2).sum(-1).mean()
            if self.cfg.architecture == "standard":
                warm = min(1.0, step / train.l1_warmup) if train.l1_warmup else 1.0
                loss = loss + warm * train.l1_coefficient * features.abs().sum(-1).mean()
            else:
                loss = loss + self._aux_loss(x, x_hat, pre)
            value = loss.item()
            if not math.isfinite(value):
                self._stop(step, "the loss became NaN or infinite")
                break
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            with torch.no_grad():
                W, grad = sae.W_dec, sae.W_dec.grad                                      # (d_sae, d_in) each
                grad -= (grad * W).sum(-1, keepdim=True) * W          # only turn the unit rows, never stretch them
            self.optimizer.step()
            with torch.no_grad():
                sae.W_dec /= sae.W_dec.norm(dim=-1, keepdim=True).clamp(min=1e-12)
            if not all(torch.isfinite(p).all() for p in sae.parameters()):
                self._stop(step, "the weights became NaN or infinite")
                break
            fired = (features > 0).any(dim=0)                                            # (d_sae,)
            self.since_fired = torch.where(fired, 0, self.since_fired + 1)
            self.steps_done = step
            mse, l0, ev = measure(x.detach(), x_hat.detach(), features.detach())
            metrics = SAEMetrics(step, value, mse / self.scale ** 2, l0, ev,
                                 float((self.since_fired >= train.dead_window).float().mean()))
            taken.append(metrics)
        self.history += taken
        return taken

    def _stop(self, step: int, what: str) -> None:
        knob = "learning rate" if self.cfg.architecture == "topk" else "learning rate or L1 coefficient"
        self.stopped = (f"Training stopped at step {step}: {what}. The {knob} is too large for these activations; "
                        "start again with a smaller one.")

    @torch.no_grad()
    def evaluate(self, activations: torch.Tensor) -> SAEMetrics:
        """The SAE as trained so far on other activations (N, d_in), as they are: mse, L0, explained variance, and
        the share of features that fire on none of them (as `dead`); `loss` is the reconstruction's squared error."""
        sae = self.sae()
        x = torch.as_tensor(activations, dtype=torch.float32)
        features = sae.encode(x)                                                         # (N, d_sae)
        x_hat = sae.decode(features)                                                     # (N, d_in)
        mse, l0, ev = measure(x, x_hat, features)
        return SAEMetrics(self.steps_done, float((x - x_hat).pow(2).sum(-1).mean()), mse, l0, ev,
                          float((~(features > 0).any(dim=0)).float().mean()))

    def facts(self) -> dict:
        """What a saved SAE's metadata records of its training (SAEConfig.extra)."""
        last = self.history[-1] if self.history else None
        return {"trained_by": "Transformer Explorer's training lab", "steps": self.steps_done,
                "training": asdict(self.train), "activation_scale": self.scale,
                **({"explained_variance": last.explained_variance, "l0": last.l0, "dead": last.dead} if last else {})}
