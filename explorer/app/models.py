"""The models a visitor can pick: the bundled tiny ones, GPT-2 small, SmolLM2-135M and Pythia (each downloaded
once), and the session's own.

Pythia was saved as it learned: "pythia-70m" is its final model, and "pythia-70m@step1000" the same model after
1,000 training steps (a checkpoint: at_step, split), downloaded once per step when first picked. Such a name is a
model name everywhere (links, lessons, the class), so a link or a lesson's step keeps the training step.

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

PRETRAINED = {"gpt2": hub.GPT2, "smollm2": hub.SMOLLM2,           # picker name -> what to download
              "pythia-70m": hub.PYTHIA_70M, "pythia-160m": hub.PYTHIA_160M}
STEP_MARK = "@step"                      # "pythia-70m@step1000": Pythia-70M after 1,000 training steps
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
    return load_files(directory)


@st.cache_resource(max_entries=2, show_spinner="Loading this training step's model into memory (once per server, a "
                                                 "second or two) ...")
def checkpoint_model(name: str, directory: str) -> Bundle:
    """A model at one training step (Pythia's), from its downloaded files; two at a time, so a student switching
    between two steps waits for neither, and a server holds at most two (beside GPT-2 or SmolLM2). Its facts say
    the step, so the pages can say how far it was trained."""
    bundle = load_files(directory)
    family, step = split(name)
    final = PRETRAINED[family].steps[-1]
    bundle.facts.update(training_step=final if step is None else step, final_step=final)
    return bundle


def load_files(directory: str) -> Bundle:
    """A pretrained model from its downloaded files (model.pretrained.load_pretrained), its loading temporaries given
    back to the system."""
    from model.pretrained import load_pretrained           # only when someone picks one
    bundle = load_pretrained(directory)
    give_back_freed()
    return bundle


def split(name: str) -> tuple[str, int | None]:
    """A model name's picker name and training step: "pythia-70m@step1000" -> ("pythia-70m", 1000); a name without
    a step (or with one that is not a number) -> (name, None)."""
    family, mark, step = name.partition(STEP_MARK)
    if mark and step.isdigit() and len(step) <= 6:
        return family, int(step)
    return name, None


def steps_of(family: str) -> tuple[int, ...]:
    """The training steps the picker offers for picker model `family` (none for a model not saved as it learned)."""
    spec = PRETRAINED.get(family)
    return spec.steps if spec is not None else ()


def at_step(family: str, step: int | None) -> str:
    """The model name of picker model `family` at training step `step` (its final step, or None: `family` itself)."""
    spec = PRETRAINED.get(family)
    if spec is None or not spec.steps or step is None or step == spec.steps[-1]:
        return family
    return f"{family}{STEP_MARK}{step}"


def spec_of(name: str) -> hub.Pretrained | None:
    """What to download for model `name` (a pretrained one, or one of its checkpoints); None: not a pretrained
    model, or a step its model did not save (ValueError from hub.at_step is turned into None)."""
    family, step = split(name)
    spec = PRETRAINED.get(family)
    if spec is None or step is None:
        return None if name != family else spec
    try:
        return hub.at_step(spec, step)
    except ValueError:
        return None


def is_known(name: str) -> bool:
    """Whether `name` is a model this session can pick: one of model_names(), or a checkpoint of one."""
    return name in model_names() or spec_of(name) is not None


def model_names() -> list[str]:
    """Bundled models, the pretrained ones, the encoder-decoders, then the models this session trained or uploaded."""
    return [*BUNDLED, *PRETRAINED, *BUNDLED_SEQ2SEQ, *st.session_state.get("trained_models", {})]


def label(name: str) -> str:
    """What the picker shows for model `name` (a checkpoint: its model and step)."""
    family, step = split(name)
    if step is not None and spec_of(name) is not None:
        return f"{PRETRAINED[family].label} at step {step:,}"
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
    spec = spec_of(name)
    if spec is None:
        return f"{label(split(name)[0])} was not saved at step {split(name)[1]}."
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
    spec = spec_of(name)
    if spec is not None:
        directory = hub.cached(spec, CACHE_DIR)
        if directory is None:
            raise ValueError(f"{spec.label}'s files are not on this server")
        return (checkpoint_model if spec.steps else pretrained_model)(name, str(directory))
    return bundled_model(name)


# Then and now (the big picture's panel): the pretrained models side by side, in the order they were made, each read
# from its files
THEN_AND_NOW = {"gpt2": "GPT-2 small (2019)", "pythia-70m": "Pythia-70M (2023)", "smollm2": "SmolLM2-135M (2024)"}


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
