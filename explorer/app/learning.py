"""Watch it learn, the app's side: which of a model's training steps this server has, the others downloaded once when
asked (with a progress bar), and the model read at each step, once per server and sentence, one checkpoint in memory
at a time (explorer/steps/learning.py builds the view from those readings).
"""
import streamlit as st

from model import hub

from explorer.app import cache, models
from explorer.steps import learning
from explorer.view import View


def family_of(view: View) -> str | None:
    """The picker's model the view shows, when it was saved as it learned (Pythia); else None."""
    family = models.split(view.name)[0]
    return family if models.steps_of(family) else None


def steps_here(family: str) -> list[int]:
    """The training steps the picker offers whose files this server has."""
    spec = models.PRETRAINED[family]
    return [s for s in spec.steps if hub.cached(hub.at_step(spec, s), models.CACHE_DIR) is not None]


def download(family: str, steps: list[int], where) -> str | None:
    """Download the checkpoints of `steps`, one progress bar for all; None when done, else why not (in words)."""
    spec = models.PRETRAINED[family]
    bar = where.progress(0.0, text="Asking the Hugging Face hub ...")
    for i, step in enumerate(steps):
        checkpoint = hub.at_step(spec, step)
        try:
            hub.fetch(checkpoint, models.CACHE_DIR, progress=lambda done, total, file: bar.progress(
                (i + done / total) / len(steps), text=f"Step {step:,} ({i + 1} of {len(steps)}): {file}"
                if file else f"Step {step:,} downloaded"))
        except hub.HubUnavailable as problem:
            bar.empty()
            return str(problem)
    bar.empty()
    return None


def _read(family: str, step: int, tokens: tuple[int, ...]) -> learning.Reading:
    """The model at `step` read on `tokens`: loaded from its files for this reading alone (the two steps the pages
    keep in memory stay there)."""
    spec = models.spec_of(models.at_step(family, step))
    bundle = models.load_files(str(hub.cached(spec, models.CACHE_DIR)))
    return learning.read_checkpoint(bundle, list(tokens))


def learned(family: str, tokens: list[int], steps: list[int], progress=None) -> learning.Learning:
    """The model read at each of `steps` on `tokens`, each step once per server and sentence;
    `progress(done, total, step)` before each step."""
    readings = []
    for i, step in enumerate(steps):
        if progress is not None:
            progress(i, len(steps), step)
        readings.append((step, cache.per_key(_read, family, step, tuple(tokens))))
    return learning.from_readings(readings, list(tokens))


def learning_for(view: View) -> learning.Learning | None:
    """What a first-right question reads: the view's model at every step this server has (None: fewer than two, or
    a model not saved as it learned)."""
    family = family_of(view)
    if family is None or view.prepared is None or len(view.ids) < 2:
        return None
    here = steps_here(family)
    return learned(family, list(view.ids), here) if len(here) >= 2 else None


def keep_going(problem: str | None) -> None:
    """Say a download's problem in words beside the page (the page keeps the steps it has)."""
    if problem:
        st.warning(problem, icon=":material/cloud_off:")
