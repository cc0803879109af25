"""What every page shares: the models, the sentence's trace, and the view's state in the URL.

One model object serves every visitor (`st.cache_resource`), and so does each trace: a trace is
computed once per (model, sentence) and only ever read (explorer/app/cache.py). The view (model, sentence, layer, head,
selected token, presenter mode) lives in `st.session_state` under the keys in VIEW_KEYS and is
mirrored into the URL, so a copied link reopens the same view.
"""
from functools import partial
import streamlit as st
import torch

from model import hub
from model.checkpoint import BUNDLED
from model.inputs import prepare_text
from model.scope import strip_final_punctuation

from explorer.app import cache, url
from explorer.app.models import (PRETRAINED, STEP_MARK, UNAVAILABLE, at_step, bundled_model, ensure_files, get_bundle,  # noqa: F401
                                 is_encoder_decoder, is_known, label, model_names, split, steps_of)
from explorer.export import file_name as export_name
from explorer.export import trace_npz
from explorer.lab import link as lab_link
from explorer.registry import BY_SLUG, LAB
from explorer.view import (DEFAULT_SENTENCE, EXAMPLES, MAX_CHARS, NOT_FINITE, OVERFLOW, View, example_sentence,  # noqa: F401
                   forecast_position, is_finite, model_key, quote, trace_is_finite)

VIEW_KEYS = ("model", "step", "text", "layer", "head", "token", "presenter", "high_contrast")
PAGE_KEYS = ("layer", "head", "token")           # widgets that live on pages, not in the sidebar
TOKENS_PER_STEP = 2_097_152      # Pythia's batch: 1,024 sequences of 2,048 tokens a training step
READ_LIMIT = 64        # tokens a page shows at most (GPT-2 could read 1,024; 64 keeps every number on a screen)


def apply_view(model: str | None = None, text: str | None = None, layer: int | None = None,
               head: int | None = None, token: int | None = None, sections: dict[str, str] | None = None) -> None:
    """Set the view as a link would (call it from a widget's callback, before the sidebar is drawn).

    Values are checked against the model on the next run, as a URL's are; `sections` maps a page's slug to
    the label of the tab to open (explorer.app.layout.sections).
    """
    state = st.session_state
    if model is not None:              # a model at a training step, or a model's final step (Pythia's)
        family, step = split(model)
        state["model"] = family
        if steps_of(family):
            state["step"] = steps_of(family)[-1] if step is None else step
    if text is not None:
        state["text"] = text[:MAX_CHARS]
    for key, value in (("layer", layer), ("head", head), ("token", token)):
        if value is not None:
            state[f"_url_{key}"] = value                 # checked against the model in _clamp
    for slug, label in (sections or {}).items():
        state[section_key(slug)] = label


def use_example(text: str) -> None:
    """A widget's callback: make `text` the sentence (a sentence the model can read, offered by a page)."""
    st.session_state["text"] = text


def _link_value(raw) -> int | float | str:
    """A link's value for a page field: a number when it reads as one, else text (the page checks it)."""
    text = str(raw).strip()
    for kind in (int, float):
        try:
            value = kind(text)
        except ValueError:
            continue
        return value if value == value and abs(value) != float("inf") else text
    return text


def _int_or_none(raw) -> int | None:
    try:
        return int(str(raw).strip())
    except ValueError:
        return None


def _load_url_once(notices: list[str]) -> None:
    """On a session's first run, copy the URL's view into session state, refusing nonsense."""
    if st.session_state.get("_url_loaded"):
        return
    st.session_state["_url_loaded"] = True
    query, cut = url.read()
    if "model" in query:
        if is_known(query["model"]):
            st.session_state["model"] = query["model"]
        elif steps_of(str(query["model"]).partition(STEP_MARK)[0]):
            family = str(query["model"]).partition(STEP_MARK)[0]
            st.session_state["model"] = family
            notices.append(f"The link asked for {PRETRAINED[family].label} at a training step it was not saved at "
                           f"({str(query['model'])[len(family):][:20]!r}); showing its final step instead.")
        elif str(query["model"]).startswith(("lab: ", "upload: ")):
            notices.append(f"The link names a model trained or uploaded in another browser tab; showing {BUNDLED[0]} "
                           "instead. A trained model lives only in the tab that trained it, so a link cannot carry "
                           "it: download its file in the training lab and upload it there to share it.")
        else:
            notices.append(f"The link asked for a model that does not exist; showing {BUNDLED[0]} instead.")
    if "text" in query:
        if "text" in cut:
            notices.append(f"The link's sentence was longer than {MAX_CHARS} characters and was shortened.")
        st.session_state["text"] = query["text"]
    for key in PAGE_KEYS:
        if key in query:
            st.session_state[f"_url_{key}"] = query[key]        # checked against the model in _clamp
    for key in ("presenter", "high_contrast"):
        if key in query:
            st.session_state[key] = url.switch(query[key])
    # as text, checked when their page runs (_apply_link_fields); a lesson's step set on this run comes first
    st.session_state["_url_fields"] = {**{name: query[name] for name in url.PAGE_FIELDS if name in query},
                                       **st.session_state.get("_url_fields", {})}
    if "section" in query:            # a tab label of this page; st.tabs ignores a label it does not have
        st.session_state[section_key(st.session_state.get("_page", ""))] = query["section"]


def keep_widget_values() -> None:
    """Keep the sidebar's values and every page's open tab through a page switch and on pages that do not show
    them (a switch from a page's script dropped presenter mode: seen after the lab's Explore, a discovery's Show
    me, and a class's first step). Call before the sidebar is drawn and before any st.switch_page."""
    sections = [key for key in st.session_state if str(key).startswith("section_")]
    for key in [*VIEW_KEYS, *sections]:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def presenter_requested() -> bool:
    """Presenter mode for this run, before the sidebar's toggle is drawn: the session's choice, else the URL's."""
    if "presenter" in st.session_state:
        return bool(st.session_state["presenter"])
    return url.switch(url.read()[0].get("presenter", ""))


def section_key(slug: str) -> str:
    """Session key of page `slug`'s open section (its tab), see explorer.app.layout.sections."""
    return f"section_{slug}"


def _clamp(key: str, upper: int, default: int, what: str, notices: list[str]) -> None:
    """Keep session value `key` within 0..upper-1 (a URL value outside it falls back with a notice)."""
    raw = st.session_state.pop(f"_url_{key}", None)
    if raw is not None:
        value = _int_or_none(raw)
        if value is None or not 0 <= value < upper:
            notices.append(f"The link asked for {what} {str(raw)[:20]!r}, which this model does not have; "
                           f"showing {what} {default} instead.")
            value = default
        st.session_state[key] = value
    elif not isinstance(st.session_state.get(key), int) or not 0 <= st.session_state[key] < upper:
        st.session_state[key] = default


def on_a_phone() -> bool:
    """The visitor's browser says it runs on a phone: its User-Agent has "Mobi" in it, as every phone browser's
    does and no tablet's or desktop's (Mozilla's advice for telling them apart). The server never sees a screen's
    width; a phone asking for the desktop site sends a desktop User-Agent and gets the desktop layout."""
    return "Mobi" in (st.context.headers.get("User-Agent") or "")        # (AppTest sends none)


def _trace_file(view: View, about: dict) -> bytes:
    """The .npz of the view's trace, made when the button is pressed (the session keeps the view, not its trace)."""
    return trace_npz(view.trace, view.tokens, about)


def current_view() -> View:
    """Draw the shared sidebar, read the view's state, and compute (or fetch) the trace."""
    notices: list[str] = []
    _load_url_once(notices)
    keep_widget_values()
    st.session_state.setdefault("text", DEFAULT_SENTENCE)
    st.session_state.setdefault("presenter", False)
    st.session_state.setdefault("high_contrast", False)
    with st.sidebar:
        names = model_names()
        _split_the_step()
        if st.session_state.get("model") not in names:
            st.session_state["model"] = names[0]
        if st.session_state["model"] in PRETRAINED:
            wanted = st.session_state["model"]
            _make_pretrained_ready(wanted, notices)
            if st.session_state["model"] != wanted:            # said in the main area too: a link asked for it
                notices.append(f"{label(wanted)} could not be loaded on this server, so this page shows "
                               f"{label(st.session_state['model'])} instead. {st.session_state[UNAVAILABLE][wanted]}")
        family = st.selectbox("Model", names, key="model", format_func=label,
                              help="tinytales learned simple English stories; roses learned one short poem. "
                                   f"GPT-2 small is the real thing: {hub.GPT2.about}. {hub.SMOLLM2.label} is "
                                   f"today's design (rotary positions, grouped-query attention, SwiGLU): "
                                   f"{hub.SMOLLM2.about}. {hub.PYTHIA_70M.label} was saved as it learned: pick a "
                                   "training step to see it as it was then.")
        name = training_step_picker(family)
        for why in st.session_state.get(UNAVAILABLE, {}).values():
            st.warning(why, icon=":material/cloud_off:")
        text = st.text_input("Sentence", key="text", max_chars=MAX_CHARS,
                             help="Type anything and press Enter. Every page shows this sentence.")
        presenter = st.toggle("Presenter mode", key="presenter",
                              help="Larger text and figures for a projector; explanations start collapsed.")
        st.toggle("High contrast", key="high_contrast",
                  help="No grey text, thicker type and lines, and charts in black and white with strong colours: "
                       "readable on a washed-out projector.")
        theme_note()
    bundle = get_bundle(name)
    view = View(name=name, bundle=bundle, text=text, presenter=presenter, notices=notices, phone=on_a_phone())
    try:
        view.prepared = prepare_text(bundle.tokenizer, model_text(view, notices), min(bundle.model.cfg.max_len,
                                     READ_LIMIT), context=bundle.model.cfg.max_len)
    except ValueError as problem:
        view.problem = str(problem)
    else:
        if not cache.model_is_finite(name, bundle):
            view.problem = NOT_FINITE
        else:
            view.trace, finite = cache.trace_and_finite(view)
            if not finite:
                view.problem, view.trace = OVERFLOW, None
    if view.trace is not None:
        about = {"model": name, "sentence": text, "config": bundle.model.cfg.to_dict(), "typed": view.typed}
        st.sidebar.download_button(
            "Download this sentence's trace", data=partial(_trace_file, view, about),
            file_name=export_name(name, view.tokens), mime="application/octet-stream", on_click="ignore",
            key="download_trace", icon=":material/download:", width="stretch",
            help="Every named tensor of this sentence's forward pass in one .npz file. In a notebook: "
                 "np.load(file)['blocks.0.attn.pattern'].")
    cfg = bundle.model.cfg
    _clamp("layer", cfg.n_layers, 0, "layer", notices)
    _clamp("head", cfg.n_heads, 0, "head", notices)
    n_tokens = len(view.prepared.ids) if view.prepared else 1
    reading = (name, tuple(view.prepared.ids) if view.prepared else ())
    if st.session_state.get("_reading") != reading and "_url_token" not in st.session_state:
        # a new sentence or model: select the last token, whose forecast the home page describes
        st.session_state["token"] = forecast_position(n_tokens)
    st.session_state["_reading"] = reading
    _clamp("token", n_tokens, n_tokens - 1, "token", notices)
    _apply_link_fields(notices)
    return view


def _split_the_step() -> None:
    """A model name with a training step ("pythia-70m@step1000", from a link, a lesson's step or the class) is the
    picker's model and the step picker's step."""
    family, step = split(str(st.session_state.get("model", "")))
    if step is not None:
        st.session_state["model"], st.session_state["step"] = family, step


def training_step_picker(family: str) -> str:
    """For a model saved as it learned (Pythia), the training step picker under the model picker (its step made
    ready before: _make_pretrained_ready); the name of the model at the chosen step. Other models: `family`."""
    spec = PRETRAINED.get(family)
    if spec is None or not spec.steps:
        st.session_state.pop("step", None)
        return family
    step = st.selectbox("Training step", spec.steps, key="step", format_func=lambda s: f"{s:,}" + (
        " (random: before training)" if s == 0 else " (final)" if s == spec.steps[-1] else ""),
        help=f"{spec.label} was saved as it learned, from step 0 (random weights) to step {spec.steps[-1]:,} (about "
             f"{spec.steps[-1] * TOKENS_PER_STEP / 1e9:,.0f} billion tokens, {TOKENS_PER_STEP:,} a step). Every page "
             "shows the model as it was at this step, reading your sentence.")
    return at_step(family, step)


def model_name() -> str:
    """The name of the model the view shows: the picker's, at the chosen training step (see training_step_picker)."""
    state = st.session_state
    return at_step(state.get("model", BUNDLED[0]), state.get("step"))


def _apply_link_fields(notices: list[str]) -> None:
    """A link's (or a lesson step's) values for this page's own fields (what-if, sampling settings, the lab's setup),
    once, before the page draws them. The page checks each against what it offers; the lab's are checked here
    (explorer/lab/link.py): its preset first, then each knob over it, a refused value falling back to the preset's."""
    waiting = st.session_state.get("_url_fields")
    page = BY_SLUG.get(st.session_state.get("_page") or "home")
    if not waiting or page is None:
        return
    mine = {name: waiting.pop(name) for name in page.linked_keys if name in waiting}
    if not mine:
        return
    if page.slug != LAB.slug:
        for name, value in mine.items():
            st.session_state[page.field(name)] = _link_value(value)
        return
    fields, refused = lab_link.opened(mine, st.session_state.get(LAB.field("preset")))
    for name, value in fields.items():
        st.session_state[LAB.field(name)] = value
    if refused:
        notices.append(f"The link set the lab's {', '.join(refused)} to {'a value' if len(refused) == 1 else 'values'} "
                       f"the lab does not offer, so the lab uses the '{fields['preset']}' preset's instead.")


def model_text(view: View, notices: list[str]) -> str:
    """The text the model reads: as typed, but an encoder-decoder's source loses a final full stop, question or
    exclamation mark (its training sentences have none), said in a notice."""
    if not is_encoder_decoder(view.bundle):
        return view.text
    text, mark = strip_final_punctuation(view.text)
    if mark:
        notices.append(f"The final {quote(mark)} was left out: {view.name} learned sentences without punctuation.")
    return text


def _make_pretrained_ready(name: str, notices: list[str]) -> None:
    """Download and load pretrained model `name` if needed (before the picker is drawn); when it cannot be had,
    say why under the picker and go back to the default model, which keeps working. A model saved as it learned is
    made ready at the session's training step: one that cannot be had is said in words and the page keeps the step
    it had (else the final one)."""
    spec, state = PRETRAINED[name], st.session_state
    steps = []
    if spec.steps:
        wanted = state.get("step")
        had = state.get("_step_had", spec.steps[-1])
        if wanted is not None and wanted not in spec.steps:
            notices.append(f"{spec.label} offers the training steps {', '.join(f'{s:,}' for s in spec.steps)}, not "
                           f"{str(wanted)[:12]!r}; this page shows step {had:,}.")
            wanted = had
        steps = list(dict.fromkeys(s for s in (wanted, had, spec.steps[-1]) if s in spec.steps))
    problem = None
    for step in steps or [None]:
        found = _can_load(at_step(name, step))
        if found is None:
            if steps:
                if step != steps[0]:
                    notices.append(f"{spec.label} at step {steps[0]:,} could not be had on this server, so this page "
                                   f"keeps step {step:,}. {problem}")
                state["step"] = state["_step_had"] = step
            break
        problem = problem or found
    else:
        found = problem
    unavailable = state.setdefault(UNAVAILABLE, {})
    if found is None:
        unavailable.pop(name, None)
    else:
        unavailable[name] = found
        state["model"] = BUNDLED[0]
        state.pop("step", None)


def _can_load(name: str) -> str | None:
    """None when model `name`'s files are here (downloaded now if need be) and load; else why not, in words."""
    problem = ensure_files(name)
    if problem is None:
        try:
            get_bundle(name)
        except ValueError as error:           # a broken or incomplete download
            problem = f"{label(name)}'s files could not be read ({error}). The small models work as before."
    return problem


def view_params() -> dict[str, str]:
    """The view's state as URL query parameters."""
    state = st.session_state
    params = {"model": model_name(), "text": state.get("text", DEFAULT_SENTENCE)}
    for key in PAGE_KEYS:
        if isinstance(state.get(key), int):
            params[key] = str(state[key])
    for key in ("presenter", "high_contrast"):
        if state.get(key):
            params[key] = "1"
    page = BY_SLUG.get(state.get("_page") or "home")
    fields = {name: state.get(key) for name, key in (page.linked_keys if page else {}).items()}
    if page is LAB:                         # its preset, and only the knobs changed from it
        fields = lab_link.in_link(fields)
    for name, value in fields.items():
        if isinstance(value, (str, int, float)):
            params[name] = lab_link.as_text(value)
    section = state.get(section_key(state.get("_page", "")))
    if isinstance(section, str):
        params["section"] = section
    return params


def link_to(slug: str) -> str:
    """A full link to page `slug` showing exactly this view."""
    return url.link(slug, view_params())


def view() -> View:
    """The current run's view, made by streamlit_app.py before the page runs."""
    if "view" not in st.session_state:
        # Until some visitor's run reaches st.navigation in streamlit_app.py, Streamlit treats the pages/
        # folder as a legacy multipage app and runs a deep-linked page (say /attention on a server that
        # just woke up) without the entry point. Turn that mode off, as st.navigation itself does, and
        # rerun through streamlit_app.py.
        from streamlit.runtime.pages_manager import PagesManager
        PagesManager.uses_pages_directory = False
        st.rerun()
    return st.session_state["view"]


def theme_note() -> None:
    """Where a visitor chooses light or dark: Streamlit follows the device, and switches its theme only in the
    browser, from its own menu (Python cannot set it), so the sidebar says where that choice is."""
    st.caption("Light or dark follows your device. To choose: the **⋮** menu at the top right, then **System**, "
               "**Light** or **Dark**.")
