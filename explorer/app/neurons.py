"""Where a pretrained model's neuron index is kept on disk: reading GPT-2 small's every neuron over the bundled
English text takes over a minute on one core, so a server does it once and a restarted server reads the file back
(explorer/steps/features.py `neuron_index`). A bundled or lab model's pass takes seconds: kept in memory only.

The file is named by the model, its pinned revision and the text: another revision or text is another file.
"""
import hashlib
import os
from pathlib import Path

from model.neurons import OwnText

from explorer.view import View

from .models import PRETRAINED

NEURON_DIR = Path(os.environ.get("EXPLORER_CACHE", Path.home() / ".cache" / "transformer-explorer")) / "neurons"


def index_file(view: View, text: OwnText) -> Path | None:
    """Where a pretrained model's index over `text` is kept (None: a model whose pass is kept in memory only)."""
    spec = PRETRAINED.get(view.name)
    if spec is None:
        return None
    digest = hashlib.sha256(f"{spec.repo_id}@{spec.revision}\n{text.text}".encode()).hexdigest()[:16]
    return NEURON_DIR / f"{view.name}-{digest}.safetensors"
