"""GPT-2 small's pinned dictionary (SAELens' gpt2-small-res-jb), once its files are on this server: loaded once per
server, one layer at a time, and the feature a step or a link names by its fields. The Features page
(explorer/app/sae.py) downloads it; the class (explorer/app/classroom.py) answers a steered-word question with it.

The page's layer L is the residual stream after block L (where steering adds): GPT-2's dictionary of that stream is
SAELens' file of the stream entering block L + 1 (blocks.{L+1}.hook_resid_pre; after the last block,
blocks.11.hook_resid_post).
"""
import streamlit as st

from model import hub
from model.sae import GPT2_SAE_LAYERS, SAE, check_fits, gpt2_sae_spec, load_gpt2_sae

from explorer.app import models
from explorer.steps import dictionary
from explorer.steps.dictionary import Dictionary, place_words
from explorer.steps.features import FeatureDirection
from explorer.view import View, model_key

PRETRAINED = {"gpt2": "GPT-2 small's dictionary (SAELens' gpt2-small-res-jb, 24,576 features)"}
PRETRAINED_KEY = "pretrained"


def gpt2_file_layer(layer: int) -> int:
    """SAELens' layer (0-12) of the dictionary of the stream after block `layer` of GPT-2 small."""
    return min(layer + 1, GPT2_SAE_LAYERS - 1)


@st.cache_resource(max_entries=1, show_spinner="Loading the dictionary into memory (once per server) ...")
def gpt2_dictionary(file_layer: int, cache_dir: str | None) -> SAE:
    """One layer's pretrained dictionary from the hub cache (its files downloaded first: `pretrained`); one at a
    time, shared read-only by every visitor."""
    return load_gpt2_sae(file_layer, cache_dir)


def pinned_dictionary(view: View, layer: int) -> Dictionary:
    """GPT-2 small's dictionary of the stream after block `layer`, its files on this server; ValueError when it
    cannot read this model (another width)."""
    file_layer = gpt2_file_layer(layer)
    spec = gpt2_sae_spec(file_layer)
    sae = gpt2_dictionary(file_layer, None if models.CACHE_DIR is None else str(models.CACHE_DIR))
    check_fits(sae, view.bundle.model.cfg, view.name)
    label = (f"GPT-2 small's feature dictionary of the stream after block {layer} (SAELens' layer {file_layer})")
    return Dictionary(model_key(label, sae), f"GPT-2 small's dictionary after block {layer}", sae,
                      f"{spec.about.split(';')[0]}; it reads {place_words(sae)}, centred (SAELens' layer "
                      f"{file_layer}), pinned at revision {spec.revision[:7]}",
                      f"{spec.repo_id}@{spec.revision}:{','.join(spec.files)}")


def pinned_feature(view: View, layer: int, fields: dict) -> FeatureDirection | None:
    """The feature a step or a link names by its fields (steer by "feature", the pinned dictionary, its number), when
    that dictionary's files are on this server: what a student following the teacher steers with, and what the
    class's steered-word question is answered with (None: the fields name no such feature)."""
    feature = fields.get("feature")
    if fields.get("steer-by") != "feature" or fields.get("dictionary") != PRETRAINED_KEY \
            or view.name not in PRETRAINED or not isinstance(feature, int) or isinstance(feature, bool) \
            or hub.cached(gpt2_sae_spec(gpt2_file_layer(layer)), models.CACHE_DIR) is None:
        return None
    try:
        return dictionary.steering_direction(view, pinned_dictionary(view, layer), feature)
    except ValueError:                          # another width, or no such feature: the page says pick one
        return None
