"""Saving and loading models without pickle: weights in safetensors, everything else in JSON.

On disk a checkpoint is two files, `NAME.safetensors` (the weights) and `NAME.json` (the config, the
tokenizer and the training facts), so a student can open the JSON and read it. For downloads and
uploads the same JSON travels inside the safetensors file's metadata, making one file.
Everything loaded is validated: config bounds, tokenizer, tensor names, shapes and dtypes.
"""
import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

from .config import ModelConfig
from .seq2seq import EncoderDecoder
from .tokenizers import Tokenizer, tokenizer_from_dict
from .transformer import TransformerLM

FORMAT = "transformer-explorer/1"
BUNDLED_DIR = Path(__file__).parent / "checkpoints"
BUNDLED = ("tinytales", "roses")           # decoder-only language models; the first is the app's default
BUNDLED_SEQ2SEQ = ("sort", "translate")    # encoder-decoders (source in, target out)
ARCHITECTURES = {"decoder": TransformerLM, "encoder-decoder": EncoderDecoder}   # files before this say nothing: decoder
MAX_UPLOAD_BYTES = 50_000_000


@dataclass
class Bundle:
    """A model with the tokenizer it reads and the facts of how it was trained."""
    model: TransformerLM
    tokenizer: Tokenizer
    facts: dict = field(default_factory=dict)

    def document(self) -> dict:
        architecture = next(name for name, cls in ARCHITECTURES.items() if isinstance(self.model, cls))
        return {"format": FORMAT, "architecture": architecture, "config": self.model.cfg.to_dict(),
                "tokenizer": self.tokenizer.to_dict(), "facts": self.facts}


TIED = "unembed.weight"          # with tie_embeddings it is embed.tok.weight: stored once (safetensors
                                 # refuses two names for one tensor) and tied again on loading


def _tensors(model: TransformerLM) -> dict[str, torch.Tensor]:
    tensors = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    if model.cfg.tie_embeddings:
        del tensors[TIED]
    return tensors


def save(bundle: Bundle, stem: str | Path) -> None:
    """Write STEM.safetensors and STEM.json."""
    stem = Path(stem)
    stem.with_suffix(".safetensors").write_bytes(save_tensors(_tensors(bundle.model)))
    stem.with_suffix(".json").write_text(json.dumps(bundle.document(), indent=1, ensure_ascii=False) + "\n")


def load(stem: str | Path) -> Bundle:
    """Read STEM.safetensors and STEM.json; the model comes back in eval mode."""
    stem = Path(stem)
    document = json.loads(stem.with_suffix(".json").read_text())
    return from_parts(document, load_tensors(stem.with_suffix(".safetensors").read_bytes()))


def load_bundled(name: str) -> Bundle:
    """One of the models shipped with the app, by name (see BUNDLED)."""
    if name not in BUNDLED + BUNDLED_SEQ2SEQ:
        raise ValueError(f"there is no bundled model called {name!r}; choose one of "
                         f"{', '.join(BUNDLED + BUNDLED_SEQ2SEQ)}")
    return load(BUNDLED_DIR / name)


def to_bytes(bundle: Bundle) -> bytes:
    """One safetensors file with the JSON document in its metadata: what a user downloads."""
    return save_tensors(_tensors(bundle.model), metadata={"explorer": json.dumps(bundle.document())})


def from_bytes(data: bytes, max_bytes: int = MAX_UPLOAD_BYTES) -> Bundle:
    """Load an uploaded file made by `to_bytes`, or raise ValueError saying what is wrong with it."""
    if len(data) > max_bytes:
        raise ValueError(f"the file is {len(data) / 1e6:.1f} MB; the limit is {max_bytes / 1e6:.0f} MB")
    try:
        tensors = load_tensors(data)
        header_len = int.from_bytes(data[:8], "little")
        metadata = json.loads(data[8:8 + header_len]).get("__metadata__") or {}
        document = json.loads(metadata["explorer"])
    except Exception:
        raise ValueError("this is not a Transformer Explorer model file (a .safetensors file saved by this app)") from None
    return from_parts(document, tensors)


def from_parts(document: dict, tensors: dict[str, torch.Tensor]) -> Bundle:
    """Validate a JSON document and its tensors, then build the model (in eval mode)."""
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"unknown model file format; expected {FORMAT!r}")
    cfg = ModelConfig.from_dict(document.get("config"))
    tokenizer = tokenizer_from_dict(document.get("tokenizer"))
    if tokenizer.vocab_size != cfg.vocab_size:
        raise ValueError(f"the tokenizer has {tokenizer.vocab_size} tokens but the model expects {cfg.vocab_size}")
    architecture = document.get("architecture", "decoder")
    if architecture not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {architecture!r}; expected one of {', '.join(ARCHITECTURES)}")
    model = ARCHITECTURES[architecture](cfg)
    expected = model.state_dict()
    if cfg.tie_embeddings:
        del expected[TIED]
    if set(tensors) != set(expected):
        missing, extra = set(expected) - set(tensors), set(tensors) - set(expected)
        raise ValueError(f"the weights do not fit this config (missing: {sorted(missing)[:5]}, unexpected: {sorted(extra)[:5]})")
    for name, tensor in tensors.items():
        if tensor.shape != expected[name].shape or tensor.dtype != torch.float32:
            raise ValueError(f"weight {name} has shape {tuple(tensor.shape)} and dtype {tensor.dtype}; "
                             f"expected {tuple(expected[name].shape)} float32")
        if not torch.isfinite(tensor).all():
            raise ValueError(f"weight {name} contains NaN or infinite values")
    if cfg.tie_embeddings:
        tensors = {**tensors, TIED: tensors["embed.tok.weight"]}
    model.load_state_dict(tensors, strict=True)
    facts = document.get("facts") or {}
    if not isinstance(facts, dict):
        raise ValueError("the training facts must be a JSON object")
    return Bundle(model.eval(), tokenizer, facts)
