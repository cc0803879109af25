"""The web app's side of the discoveries (explorer/discoveries.py): each model's cards searched once per server,
which model they are about, the guesses, "Show me" and the way back to the student's own sentence."""
import streamlit as st

from explorer.discoveries import (DIVERGING, FALLBACK, Discovery, LabOutcome, Target, discoveries,  # noqa: F401
                                  lab_outcome, reads_tiny_tales)
from explorer.registry import BY_SLUG
from explorer.view import quote

from . import cache
from .state import apply_view, get_bundle, model_name


def start_lab_outcome(preset: str) -> None:
    """Train preset `preset`'s short run in the background, once per server, as soon as its card is shown: the
    student reads and guesses meanwhile, and the reveal finds it done. (Measured on the reveal: 3.5 s, most of it
    the first optimizer of a process importing torch's compiler, then 0.7 s of training.)"""
    cache.in_background(lab_outcome, preset)


def cached_lab_outcome(preset: str) -> LabOutcome:
    """The outcome of preset `preset`'s short run (waits for the background run if it is not done yet)."""
    return cache.from_background(lab_outcome, preset, waiting=f"Training the {preset} preset for a moment ...")


def subject_model(name: str) -> tuple[str, str | None]:
    """(the model whose discoveries to show, a notice why it is not `name`, or None)."""
    bundle = get_bundle(name)
    if not cache.model_is_finite(name, bundle):
        return FALLBACK, (f"{name}'s weights are not finite numbers (its training diverged), so it has no skills "
                          f"to discover; these are {FALLBACK}'s.")
    if not reads_tiny_tales(bundle):
        return FALLBACK, (f"These discoveries are about tiny tales, and {name} does not read tiny-tales words one "
                          f"by one; these are {FALLBACK}'s. “Show me” switches the model to {FALLBACK}.")
    return name, None


def cached_discoveries(name: str) -> list[Discovery]:
    """The discoveries of model `name`, searched once per model."""
    return cache.per_model(lambda bundle: discoveries(bundle, name), name, get_bundle(name))


GO = "_discovery_go"           # the page to switch to on the next run, set by "Show me"


def show_me(target: Target) -> None:
    """Set the view to `target` (a button's callback, before the sidebar is drawn); the page then switches."""
    keep_way_back(target)
    apply_view(model=target.model, text=target.text, layer=target.layer, head=target.head, token=target.token,
               sections={target.slug: target.section} if target.section else None)
    for key, value in target.state.items():
        st.session_state[key] = value
    if target.preset:
        from explorer.app import lab                  # the lab's session helpers
        st.session_state["lab_preset"] = target.preset
        lab.apply_preset()
    st.session_state[GO] = BY_SLUG[target.slug].file


def switch_if_asked() -> None:
    """Open the page "Show me" (or "Back to your sentence") asked for (st.switch_page cannot run in a callback)."""
    file = st.session_state.pop(GO, None)
    if file:
        st.switch_page(file)


# --- the way back: "Show me" replaces the student's sentence, and one click brings it back ---------------------

BACK = "_discovery_back"       # the student's own view before "Show me", and the view that "Show me" opened
PAGE_VIEW = ("layer", "head", "token")


def _reading() -> tuple:
    """The model and sentence of the current view."""
    return model_name(), st.session_state.get("text")


def keep_way_back(target: Target) -> None:
    """Before "Show me" changes the view: keep the student's own (model, sentence, page, open tabs and the
    layer, head and token), unless the view is still one a discovery opened (then the student's is kept already)."""
    state = st.session_state
    jump = (target.model or _reading()[0], target.text if target.text is not None else _reading()[1])
    saved = state.get(BACK)
    if saved is None or _reading() != saved["jump"]:
        if jump == _reading():
            state.pop(BACK, None)                # nothing of the student's is replaced: no way back to offer
            return
        saved = {"reading": _reading(), "page": state.get("_page") or "home", "set": set(),
                 "view": {key: state[key] for key in PAGE_VIEW if isinstance(state.get(key), int)},
                 "state": {key: state[key] for key in state
                           if str(key).startswith("section_") or key in target.state}}
    state[BACK] = saved | {"jump": jump, "set": saved["set"] | set(target.state)}


def go_back() -> None:
    """The "Back to your sentence" button's callback: restore the view kept by `keep_way_back` and its page."""
    state = st.session_state
    saved = state.pop(BACK, None)
    if saved is None:
        return
    for key in [key for key in state if str(key).startswith("section_") or key in saved["set"]]:
        del state[key]                            # what "Show me" set; the student's own values come back below
    for key, value in saved["state"].items():
        state[key] = value
    model, text = saved["reading"]
    apply_view(model=model, text=text, **saved["view"])
    if saved["page"] != (state.get("_page") or "home"):
        state[GO] = BY_SLUG[saved["page"]].file


def way_back() -> None:
    """Open a page a click asked for, then offer the way back to the student's own sentence (a button under the
    page's title), while the view is still the one a discovery's "Show me" opened."""
    switch_if_asked()
    saved = st.session_state.get(BACK)
    if saved is None:
        return
    if _reading() != saved["jump"]:                 # the student has moved on: another sentence or model
        del st.session_state[BACK]
        return
    model, text = saved["reading"]
    short = text if len(text) <= 40 else text[:40] + "…"
    st.button(f"Back to your sentence: {quote(short)}", key="discovery_back", on_click=go_back,
              icon=":material/undo:",
              help=f"Reopens the {BY_SLUG[saved['page']].title} page with model {quote(model)}, your sentence and your "
                   "choices, as they were before “Show me”.")


def guesses() -> dict:
    """This session's guesses and reveals, per discovery: {key: {"guess": option, "revealed": bool}}."""
    return st.session_state.setdefault("discovery_guesses", {})


def reveal(key: str) -> None:
    """The Reveal button's callback: keep the guess (the radio's value) and mark the card revealed."""
    guess = st.session_state.get(f"discovery_radio_{key}")
    if guess is not None:
        guesses()[key] = {"guess": guess, "revealed": True}


