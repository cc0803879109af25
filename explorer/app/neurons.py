"""Where a pretrained model's neuron index, and a pinned dictionary's feature index, are kept on disk: reading GPT-2
small's every neuron (or every feature of its dictionary) over the bundled English text takes over a minute on one
core, so a server does it once and a restarted server reads the file back (explorer/steps/features.py
`neuron_index`, explorer/steps/dictionary.py `feature_index`). A bundled or lab model's pass, or a session
dictionary's, takes seconds: kept in memory only.

A file is named by the model, its pinned revision, the dictionary's and the text: another of any is another file.
"""
import hashlib
import os
from pathlib import Path

from model.neurons import OwnText

from explorer.steps.dictionary import Dictionary
from explorer.view import View

from .models import spec_of

KEPT_DIR = Path(os.environ.get("EXPLORER_CACHE", Path.home() / ".cache" / "transformer-explorer"))
NEURON_DIR = KEPT_DIR / "neurons"
FEATURE_DIR = KEPT_DIR / "features"


def index_file(view: View, text: OwnText) -> Path | None:
    """Where a pretrained model's index over `text` is kept (None: a model whose pass is kept in memory only)."""
    spec = spec_of(view.name)
    if spec is None:
        return None
    digest = hashlib.sha256(f"{spec.repo_id}@{spec.revision}\n{text.text}".encode()).hexdigest()[:16]
    return NEURON_DIR / f"{view.name}-{digest}.safetensors"


def feature_index_file(view: View, chosen: Dictionary, text: OwnText) -> Path | None:
    """Where the feature index of a pinned dictionary (GPT-2's) over `text` is kept (None: a session's dictionary,
    whose pass is kept in memory only)."""
    spec = spec_of(view.name)
    if spec is None or not chosen.pinned:
        return None
    digest = hashlib.sha256(f"{spec.repo_id}@{spec.revision}\n{chosen.pinned}\n{text.text}".encode()).hexdigest()[:16]
    return FEATURE_DIR / f"{view.name}-{digest}.safetensors"
