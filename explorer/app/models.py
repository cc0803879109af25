"""The models a visitor can pick: the bundled tiny ones, GPT-2 small and SmolLM2-135M (each downloaded once), and
the session's own.

Each is loaded once per server and shared read-only by every visitor (`st.cache_resource`), except the
session's own models (trained in the lab or uploaded), which live in `st.session_state["trained_models"]`.
A pretrained model is only loaded when someone picks it, so the app starts as fast as before, and only one large
model is in memory at a time.
"""
from pathlib import Path

import streamlit as st

from model import hub
from model.checkpoint import BUNDLED, BUNDLED_SEQ2SEQ, Bundle, load_bundled
from model.seq2seq import EncoderDecoder

from explorer.app.memory import give_back_freed

PRETRAINED = {"gpt2": hub.GPT2, "smollm2": hub.SMOLLM2}          # picker name -> what to download
CACHE_DIR: str | Path | None = None      # the Hugging Face cache (None: its standard place; tests set their own)
UNAVAILABLE = "_pretrained_unavailable"  # session key: {name: why it could not be had}


@st.cache_resource(show_spinner="Loading the model ...")
def bundled_model(name: str) -> Bundle:
    """A bundled model, loaded once per server and shared read-only by every visitor."""
    return load_bundled(name)


@st.cache_resource(max_entries=1, show_spinner="Loading the pretrained model into memory (once per server, a few "
                                                 "seconds) ...")
def pretrained_model(name: str, directory: str) -> Bundle:
    """A pretrained model from its downloaded files; one at a time (max_entries=1) bounds the server's memory."""
    from model.pretrained import load_pretrained           # only when someone picks one
    bundle = load_pretrained(directory)
    give_back_freed()                                        # the loading temporaries
    return bundle


def model_names() -> list[str]:
    """Bundled models, the pretrained ones, the encoder-decoders, then the models this session trained or uploaded."""
    return [*BUNDLED, *PRETRAINED, *BUNDLED_SEQ2SEQ, *st.session_state.get("trained_models", {})]


def label(name: str) -> str:
    """What the picker shows for model `name`."""
    if name in PRETRAINED:
        spec = PRETRAINED[name]
        size = f"{spec.parameters / 1e6:.0f}M"
        return spec.label if size in spec.label else f"{spec.label} ({size})"
    if name in BUNDLED_SEQ2SEQ:
        return f"{name} (encoder-decoder)"
    return name


def is_encoder_decoder(bundle: Bundle) -> bool:
    """Source in, target out (the 2017 transformer): shown on the encoder-decoder page, not the walk-through."""
    return isinstance(bundle.model, EncoderDecoder)


def ensure_files(name: str) -> str | None:
    """Make sure pretrained model `name`'s files are on disk, downloading them once with a progress bar in the
    sidebar; returns None when they are there, else why not (in plain words)."""
    spec = PRETRAINED[name]
    if hub.cached(spec, CACHE_DIR) is not None:
        return None
    slot = st.sidebar.empty()        # the download's box goes when it fails: the sidebar's warning says why
    with slot.status(f"Downloading {spec.label} once for this server (about {spec.download_mb} MB) ...",
                     expanded=True) as box:
        bar = st.progress(0.0, text="Asking the Hugging Face hub ...")
        try:
            hub.fetch(spec, CACHE_DIR, progress=lambda done, total, file: bar.progress(
                done / total, text=f"{file} ({done + 1} of {total})" if file else "Done."))
        except hub.HubUnavailable as problem:
            failed = str(problem)
        else:
            box.update(label=f"{spec.label} downloaded", state="complete", expanded=False)
            return None
    slot.empty()
    return failed


def get_bundle(name: str) -> Bundle:
    """The model named `name` in the picker (a pretrained model must have its files: see ensure_files)."""
    trained = st.session_state.get("trained_models", {})
    if name in trained:
        return trained[name]
    if name in PRETRAINED:
        return pretrained_model(name, str(hub.cached(PRETRAINED[name], CACHE_DIR)))
    return bundled_model(name)


# Then and now (the big picture's panel): the two pretrained models side by side, each read from its files
THEN_AND_NOW = {"gpt2": "GPT-2 small (2019)", "smollm2": "SmolLM2-135M (2024)"}


def then_and_now_sides() -> tuple[list, list[str]]:
    """(the sides of the comparison whose files this server has, in THEN_AND_NOW's order; the labels of the
    models it has not downloaded). Read once per server (config.json and tokenizer.json; no weights)."""
    from explorer.app import cache
    from explorer.steps.then_and_now import read_side
    sides, missing = [], []
    for name, label in THEN_AND_NOW.items():
        directory = hub.cached(PRETRAINED[name], CACHE_DIR)
        if directory is None:
            missing.append(label)
        else:
            sides.append(cache.per_key(read_side, str(directory), label))
    return sides, missing
