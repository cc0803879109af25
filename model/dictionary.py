"""What a dictionary's features respond to and write, read over a model's own text (model/neurons.py does the same
for feed-forward neurons).

A dictionary is a sparse autoencoder (model/sae.py): feature f's activation at a token is `sae.encode(x)[f]` of the
value x the SAE reads there (a residual stream), and what it writes is its decoder row `W_dec[f]`.

    sae_features(model, sae, tokens)      the features (B, T, d_sae) of windows `tokens`, the model read no further
                                          than the SAE's place
    index_features(model, sae, ids, prefix)   one pass over a text in the windows model/neurons.py reads: every
                                          feature's top activations and contexts (a NeuronIndex of one layer), how
                                          many tokens it fires on, and a histogram of its activations (`FeatureIndex`)
    feature_logits(model, sae, feature)   what its decoder row pushes up and down: through the final norm's scale and
                                          the unembedding, one number per vocabulary token
    sae_to_zip(sae), sae_from_zip(data)   SAELens' two files (cfg.json, sae_weights.safetensors) in one zip: what
                                          the lab downloads and reads back (never pickle)
"""
import io
import re
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from .layers import causal_mask, check_tokens, start_run, stack
from .neurons import SPAN, WINDOW, NeuronIndex, direction_logits, merge_top, plan_windows
from .sae import CFG_FILE, SAE, WEIGHTS_FILE, load_sae, save_sae
from .transformer import TransformerLM

KEPT = 24                             # top activations kept per feature (as per neuron)
# The histogram of a feature's activations: log-spaced bins, 8 a decade from 1e-3 to 1e4 (smaller ones are counted in
# the first bin, larger ones in the last)
HISTOGRAM_EDGES = torch.logspace(-3, 4, 57)
MAX_ZIP_BYTES = 200 * 2**20           # an uploaded zip's files, unpacked, at most (a GPT-2 layer's SAE is 151 MB)


@torch.no_grad()
def sae_features(model: TransformerLM, sae: SAE, tokens) -> torch.Tensor:
    """The SAE's features (B, T, d_sae) for windows `tokens` (B, T): the model's own stack read only as far as the
    value the SAE reads (for blocks.L.*, blocks 0 to L; no final norm or unembedding unless it reads final.norm)."""
    tokens = check_tokens(tokens, model.cfg)                                          # (B, T)
    name = sae.trace_name
    match = re.match(r"blocks\.(\d+)\.", name)
    blocks = model.blocks[:int(match.group(1)) + 1] if match else model.blocks if name == "final.norm" else []
    rec = start_run(model.trace_names[1:], keep={name}, inputs={"tokens": tokens})
    stack(model.embed, blocks, model.final_norm if name == "final.norm" else nn.Identity(), tokens, rec,
          mask=causal_mask(tokens.shape[1], tokens.device))
    return sae.encode(sae.read(rec.values))                                           # (B, T, d_sae)


@dataclass(frozen=True)
class FeatureIndex:
    """Every feature's strongest activations over a text (`top`: a NeuronIndex whose one layer holds d_sae
    features), how many of the text's tokens each fires on, and a histogram of its activations where it fires."""
    top: NeuronIndex
    tokens: int                 # tokens recorded (each once)
    fired: torch.Tensor         # (d_sae,) int64: tokens where the feature is above 0
    counts: torch.Tensor        # (d_sae, bins) int64: those tokens by activation, binned by HISTOGRAM_EDGES
    seconds: float = 0.0        # how long the pass took

    @property
    def density(self) -> torch.Tensor:
        """(d_sae,) the share of the text's tokens each feature fires on."""
        return self.fired.double() / max(self.tokens, 1)

    def contexts(self, feature: int, n: int = 10):
        """The feature's `n` strongest contexts (model/neurons.py `Context`), strongest first."""
        return self.top.contexts(0, feature, n)

    def save(self, path: str | Path) -> None:
        """Keep the index on disk (safetensors: no pickle), its top contexts as `NeuronIndex.save` keeps them."""
        top = self.top
        save_file({"ids": top.ids, "values": top.values, "positions": top.positions, "spans": top.spans,
                   "prefix": torch.tensor(top.prefix, dtype=torch.long), "fired": self.fired, "counts": self.counts},
                  str(path), metadata={"width": str(top.width), "overlap": str(top.overlap),
                                       "tokens": str(self.tokens), "seconds": str(self.seconds)})


def load_feature_index(path: str | Path) -> FeatureIndex:
    """An index kept by `FeatureIndex.save`."""
    with safe_open(str(path), "pt") as f:
        meta = f.metadata()
    t = load_file(str(path))
    top = NeuronIndex(t["ids"], int(meta["width"]), tuple(t["prefix"].tolist()), int(meta["overlap"]), t["values"],
                      t["positions"], t["spans"])
    return FeatureIndex(top, int(meta["tokens"]), t["fired"], t["counts"], float(meta["seconds"]))


@torch.no_grad()
def index_features(model: TransformerLM, sae: SAE, ids: list[int], prefix: tuple[int, ...] = (),
                   width: int | None = None, k: int = KEPT,
                   progress: Callable[[int, int], None] | None = None) -> FeatureIndex:
    """One pass over the text `ids` in windows of `width` tokens (the model's context, at most WINDOW), each starting
    with `prefix` and, after the first, rereading up to BEFORE tokens of the one before without recording them (as
    model/neurons.py `index_neurons` reads them): every feature keeps its k largest activations with the activations
    around each, counts the tokens it fires on, and bins its activations. `progress(windows done, windows)`."""
    began = time.perf_counter()
    text, windows = plan_windows(ids, min(model.cfg.max_len, WINDOW) if width is None else width, prefix,
                                 "features")
    F, bins = sae.cfg.d_sae, len(HISTOGRAM_EDGES) - 1
    # read each batch of windows; merge its top activations into every feature's running top k; count and bin
    top = (torch.zeros(F, 0), torch.zeros(F, 0, dtype=torch.long), torch.zeros(F, 0, SPAN))
    fired, counts, recorded_tokens = torch.zeros(F, dtype=torch.long), torch.zeros(F * bins, dtype=torch.long), 0
    for tokens, first, recorded, done in windows.read(text):                # (B, P + t), (B,), (B, t), windows read
        features = sae_features(model, sae, tokens)[:, len(prefix):].float()           # (B, t, F)
        top = merge_top(*top, features, recorded, first, k)
        kept = features[recorded]                                                      # (N, F)
        recorded_tokens += len(kept)
        fired += (kept > 0).sum(0)
        row, feature = (kept > 0).nonzero(as_tuple=True)                               # (nz,) each
        where = torch.bucketize(kept[row, feature], HISTOGRAM_EDGES[1:-1])             # (nz,) bin of each
        counts.index_add_(0, feature * bins + where, torch.ones_like(where))
        if progress is not None:
            progress(done, windows.count)
    values, positions, spans = (part[None] for part in top)                            # (1, F, k), ...
    index = NeuronIndex(text, windows.width, windows.prefix, windows.overlap, values, positions,
                        spans.clamp(-6e4, 6e4).half())
    return FeatureIndex(index, recorded_tokens, fired, counts.view(F, bins), time.perf_counter() - began)


def feature_logits(model: TransformerLM, sae: SAE, feature: int) -> torch.Tensor:
    """What feature `feature` writes, read straight through: its decoder row through the final norm's scale and the
    unembedding (V,). Later blocks can change what it does; this is its direct path only."""
    if sae.cfg.d_in != model.cfg.d_model:
        raise ValueError(f"this dictionary's features are {sae.cfg.d_in} numbers long, and this model's residual "
                         f"stream holds {model.cfg.d_model}: its features cannot be read through the unembedding")
    return direction_logits(model, sae.W_dec[feature])


# --- files: SAELens' two files in one zip -------------------------------------------------------------------------

def sae_to_zip(sae: SAE) -> bytes:
    """cfg.json and sae_weights.safetensors as SAELens writes them (model/sae.py `save_sae`), in one zip."""
    with tempfile.TemporaryDirectory() as folder:
        save_sae(sae, folder)
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            for name in (CFG_FILE, WEIGHTS_FILE):
                z.write(Path(folder) / name, name)
    return out.getvalue()


def sae_from_zip(data: bytes, max_bytes: int = MAX_ZIP_BYTES) -> SAE:
    """The SAE in a zip holding cfg.json and sae_weights.safetensors (at its top or in one folder), read by
    model/sae.py `load_sae`; a file that is no such zip, too large, or broken raises ValueError saying what is wrong."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            members = {name: [m for m in z.infolist() if not m.is_dir() and Path(m.filename).name == name]
                       for name in (CFG_FILE, WEIGHTS_FILE)}
            missing = [name for name, found in members.items() if not found]
            if missing:
                raise ValueError(f"the zip lacks {' and '.join(missing)}: a dictionary is SAELens' two files, "
                                 f"{CFG_FILE} and {WEIGHTS_FILE}")
            if any(len(found) > 1 for found in members.values()):
                raise ValueError("the zip holds more than one dictionary: upload one (its cfg.json and "
                                 "sae_weights.safetensors)")
            if sum(found[0].file_size for found in members.values()) > max_bytes:
                raise ValueError(f"the dictionary's files are larger than {max_bytes / 2**20:.0f} MB unpacked")
            with tempfile.TemporaryDirectory() as folder:
                for name, (member,) in members.items():
                    (Path(folder) / name).write_bytes(z.read(member))
                return load_sae(folder)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, RuntimeError) as e:
        raise ValueError(f"this is not a zip of a dictionary ({e})") from None
