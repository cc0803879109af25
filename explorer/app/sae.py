"""The dictionaries (sparse autoencoders) a session reads on the Features page and trains in the lab.

GPT-2 small's pretrained dictionary (SAELens' gpt2-small-res-jb) is downloaded once per layer, when asked, into the
hub cache the app uses for GPT-2 (explorer/app/models.py CACHE_DIR), with a progress bar, and loaded once per server,
one layer at a time. The lab's dictionaries live in this session only (st.session_state), at most MAX_KEPT, each with
the key of the model it read, so the Features page lists them for that model alone; one trains at a time, a few
steps per tick of the lab page's fragment.

The page's layer L is the residual stream after block L (where steering adds): GPT-2's dictionary of that stream is
explorer/app/pinned.py's; the lab trains on blocks.L.resid_post.
"""
import functools
import re
import time
from dataclasses import dataclass, replace

import streamlit as st

from model import corpora, hub
from model.dictionary import sae_from_zip, sae_to_zip
from model.neurons import own_text, text_ids, window_prefix
from model.sae import SAE_PRESETS, SAEPreset, SAETrainer, activations, check_fits, gpt2_sae_spec, their_name

from explorer.app import classroom, models
from explorer.app.state import model_name
from explorer.app.pinned import PRETRAINED, PRETRAINED_KEY, gpt2_file_layer, pinned_dictionary, pinned_feature
from explorer.app.layout import chart
from explorer.lessons import step_from_view
from explorer.questions import Question
from explorer.registry import BY_SLUG
from explorer.lab.training import _TRAINER_SLOTS, TICK_SECONDS
from explorer.steps import dictionary
from explorer.steps.dictionary import Dictionary, place_layer, place_words
from explorer.steps.features import DEFAULT_STRENGTH, FeatureDirection
from explorer.view import View, escape, model_key

MAX_KEPT = 4                  # dictionaries kept per session (the oldest is dropped)
MAX_TOKENS = 65_536           # the most tokens of a model's text a dictionary trains on (16 MB at d_model 64)
TICK_EVERY = 0.6              # seconds between live ticks while a dictionary trains
CHUNK = 10                    # steps between two looks at the clock
EXPANSIONS = (4, 8, 16)       # d_sae as a multiple of d_model
SPARSITY = {"topk": "Top-k: the k strongest fire", "l1": "L1: a penalty on every activation"}
UNAVAILABLE = "_sae_unavailable"      # session: {layer: why its dictionary could not be had}
STEER = "_features_steer_feature"     # session: (model key, FeatureDirection) chosen by "Steer with this feature"


# --- GPT-2 small's pretrained dictionary ---------------------------------------------------------------------------

def pretrained(view: View, layer: int, where) -> Dictionary | None:
    """GPT-2 small's dictionary of the stream after block `layer`: loaded when its files are on this server; else a
    button downloads them once, with a progress bar, or says in words why it cannot (offline)."""
    file_layer = gpt2_file_layer(layer)
    spec = replace(gpt2_sae_spec(file_layer), label=f"GPT-2 small's feature dictionary of the stream after block "
                                                    f"{layer} (SAELens' layer {file_layer})")
    problems = st.session_state.setdefault(UNAVAILABLE, {})
    if hub.cached(spec, models.CACHE_DIR) is None:
        if layer in problems:
            where.warning(problems[layer], icon=":material/cloud_off:")
        if not where.button(f"Download layer {layer}'s dictionary (about {spec.download_mb} MB, once for this "
                            "server)", key="sae_download", icon=":material/download:",
                            help=f"{spec.about}. SAELens calls it layer {file_layer}: the stream entering block "
                                 f"{file_layer}, which is the stream after block {layer}."):
            return None
        slot = where.empty()             # the download's box goes when it fails: a warning says why
        with slot.status(f"Downloading {spec.label} once for this server (about {spec.download_mb} MB) ...",
                         expanded=True) as box:
            bar = st.progress(0.0, text="Asking the Hugging Face hub ...")
            try:
                hub.fetch(spec, models.CACHE_DIR, progress=lambda done, total, file: bar.progress(
                    done / total, text=f"{file} ({done + 1} of {total})" if file else "Done."))
            except hub.HubUnavailable as problem:
                problems[layer] = str(problem)
            else:
                box.update(label=f"{spec.label} downloaded", state="complete", expanded=False)
        if layer in problems:
            slot.empty()
            where.warning(problems[layer], icon=":material/cloud_off:")
            return None
    problems.pop(layer, None)
    try:
        return pinned_dictionary(view, layer)
    except ValueError as problem:
        where.warning(f"{str(problem)[:1].upper()}{str(problem)[1:]}.", icon=":material/warning:")
        return None


# --- the session's dictionaries ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Kept:
    """A dictionary of this session, and the key of the model it reads (explorer.view.model_key)."""
    dictionary: Dictionary
    model: str


def kept() -> list[Kept]:
    return st.session_state.get("sae_kept", [])


def keep(dictionary: Dictionary, model: str) -> None:
    """Keep a dictionary in the session (one of the same name is replaced; the oldest goes past MAX_KEPT)."""
    others = [k for k in kept() if k.dictionary.name != dictionary.name]
    st.session_state["sae_kept"] = (others + [Kept(dictionary, model)])[-MAX_KEPT:]


def for_model(view: View) -> list[Kept]:
    """This session's dictionaries of the view's model."""
    return [k for k in kept() if k.model == view.key]


def picker(view: View, layer: int, where, notices=None) -> Dictionary | None:
    """The dictionary the Dictionary features tab reads: GPT-2 small's (for GPT-2 small), or one this session trained
    or uploaded for this model at this layer; None (with what to do, in words) when there is none or it cannot be
    had. The choice stands in `where`; what to do instead, and a download, in `notices` (by default `where`)."""
    notices = where if notices is None else notices
    mine = [k.dictionary for k in for_model(view) if place_layer(k.dictionary.sae) == layer]
    options = ([PRETRAINED_KEY] if view.name in PRETRAINED else []) + [d.key for d in mine]
    if not options:
        others = sorted({place_layer(k.dictionary.sae) for k in for_model(view)} - {None})
        how = ("Upload one in SAELens' format in the training lab (its section “A sparse autoencoder”)"
               if models.spec_of(view.name) is not None else "Train one in the training lab (its section “A sparse "
               "autoencoder”), with this model chosen in the sidebar")
        notices.info(f"No dictionary of **{escape(view.name)}** reads layer {layer} yet. {how}"
                     + (f"; this session has one for layer {', '.join(map(str, others))}." if others else "."),
                     icon=":material/info:")
        notices.page_link("pages/training.py", label="Open the training lab", icon=":material/model_training:")
        return None
    names = {PRETRAINED_KEY: PRETRAINED.get(view.name, ""), **{d.key: d.name for d in mine}}
    if st.session_state.get("features_dictionary") not in options:
        st.session_state.pop("features_dictionary", None)
    choice = where.selectbox("Dictionary", options, key="features_dictionary", format_func=names.get,
                             help="A sparse autoencoder: a dictionary of directions in the stream after this layer, "
                                  "each of which fires rarely.")
    if choice == PRETRAINED_KEY:
        return pretrained(view, layer, notices)
    return next(d for d in mine if d.key == choice)


def feature_picker(chosen: Dictionary, default, where, key: str) -> int:
    """The feature of `chosen` the card shows (session key `key`): at first (and for a newly chosen dictionary)
    `default()`, the one that fires most on the sentence's last token."""
    state, d_sae = st.session_state, chosen.sae.cfg.d_sae
    value, belongs = state.get(key), state.get(f"_{key}_for")
    if belongs not in (None, chosen.key) or not (isinstance(value, int) and 0 <= value < d_sae):
        state.pop(key, None)                           # another dictionary's feature, or a link's out of range
    state[f"_{key}_for"] = chosen.key
    if key not in state:
        state[key] = default()
    return where.number_input("Feature", 0, d_sae - 1, key=key, step=1,
                              help=f"One of the dictionary's {d_sae:,} features, named by its number only. It starts "
                                   "at the one that fires most on your sentence's last token.")


def ask_about_feature(layer: int, feature: int) -> None:
    """The feature card's "Ask the class": a step on the Steering tab, steered by this feature of the pinned
    dictionary after `layer` at the default strength, asking which word the model writes next."""
    state = st.session_state
    view = {key: state[key] for key in ("text",) if key in state} | {"model": model_name(), "layer": layer}
    fields = {"features_steer_by": "feature", "features_feature": feature, "features_dictionary": PRETRAINED_KEY,
              "features_strength": DEFAULT_STRENGTH["feature"]}
    step = step_from_view("features", view, BY_SLUG["features"].tab("steering"), fields)
    classroom.add_step(replace(step, question=Question("steered-word")))


def steer_with(view_key: str, direction: FeatureDirection, layer: int) -> None:
    """"Steer with this feature": the Steering tab, steering by this feature after its layer."""
    state = st.session_state
    state[STEER] = (view_key, direction)
    state["features_steer_by"], state["layer"], state["section_features"] = "feature", layer, "Steering"
    state.setdefault("features_strength", DEFAULT_STRENGTH["feature"])


def steering_feature(view: View, layer: int, fields: dict) -> FeatureDirection | None:
    """The feature the Steering tab steers with: the pinned dictionary's feature its fields name (a step's, a
    link's, the card's), else the one "Steer with this feature" chose for the view's model."""
    pinned = pinned_feature(view, layer, fields)
    if pinned is not None:
        return pinned
    chosen = st.session_state.get(STEER)
    return chosen[1] if chosen and chosen[0] == view.key else None


# --- the lab: training one ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SAESetup:
    """What the lab's knobs choose: the layer whose stream it reads, its width, its sparsity."""
    layer: int
    expansion: int = 8
    sparsity: str = "topk"
    k: int = 8
    l1: float = 1.0

    @property
    def trace_name(self) -> str:
        return f"blocks.{self.layer}.resid_post"

    def preset(self) -> SAEPreset:
        """SAE_PRESETS' recipe for this sparsity, at this width and k or L1 coefficient."""
        base = SAE_PRESETS[self.sparsity]
        if self.sparsity == "topk":
            return replace(base, expansion=self.expansion, k=self.k)
        return replace(base, expansion=self.expansion, train=replace(base.train, l1_coefficient=self.l1))

    def words(self) -> str:
        sparsity = f"top-{self.k}" if self.sparsity == "topk" else f"L1 {self.l1:g}"
        return f"{self.expansion}x, {sparsity}, after block {self.layer}"


@dataclass
class SAERun:
    """A dictionary in training: its label, the model it reads (key and picker name), its setup and its trainer."""
    label: str
    model: str
    model_name: str
    setup: SAESetup
    trainer: SAETrainer
    text: str                           # the text's name: what it read
    seconds: float = 0.0

    @property
    def budget(self) -> int:
        return self.trainer.train.steps

    @property
    def finished(self) -> bool:
        return self.trainer.steps_done >= self.budget or self.trainer.stopped is not None

    def tick(self, seconds: float) -> bool:
        """Train for about `seconds` if a trainer slot is free (the lab's: at most two trainings at once on the
        server); returns False when it had to wait."""
        if self.finished:
            return True
        if not _TRAINER_SLOTS.acquire(blocking=False):
            return False
        try:
            start = time.perf_counter()
            while not self.finished and time.perf_counter() - start < seconds:
                self.trainer.step(min(CHUNK, self.budget - self.trainer.steps_done))
            self.seconds += time.perf_counter() - start
        finally:
            _TRAINER_SLOTS.release()
        return True

    def dictionary(self) -> Dictionary:
        """A frozen copy of the dictionary as trained so far, with its training facts in its metadata."""
        sae = self.trainer.sae()
        sae.cfg.extra = {**self.trainer.facts(), "text": self.text}
        return Dictionary(model_key(self.label, sae), f"{self.label} ({self.setup.words()})", sae,
                          f"trained in this session's lab for {self.trainer.steps_done} steps on {self.model_name} "
                          f"reading {self.text}; it reads {place_words(sae)}")


def active() -> SAERun | None:
    return st.session_state.get("sae_run")


def messages() -> list[str]:
    return st.session_state.get("sae_messages", [])


def is_running() -> bool:
    run = active()
    return bool(st.session_state.get("sae_running")) and (st.session_state.get("sae_build") or
                                                          (run is not None and not run.finished))


def setup_from_knobs(n_layers: int) -> SAESetup:
    state = st.session_state
    return SAESetup(min(int(state.get("lab_sae_layer", (n_layers - 1) // 2)), n_layers - 1),
                    int(state.get("lab_sae_expansion", 8)), state.get("lab_sae_sparsity", "topk"),
                    int(state.get("lab_sae_k", 8)), float(state.get("lab_sae_l1", 1.0)))


def new_run(view: View, setup: SAESetup, user_text=None) -> SAERun:
    """Read the model's own text through it up to the chosen layer, and a trainer of the chosen recipe on those
    activations; ValueError says what does not fit."""
    bundle = view.bundle
    text = own_text(bundle, corpora.user_text(user_text) if user_text else None)
    ids = text_ids(bundle, text)[:MAX_TOKENS]
    prefix = window_prefix(bundle)
    x = activations(bundle.model, ids, setup.trace_name, prefix=prefix)
    recipe = setup.preset()
    cfg = recipe.config(bundle.model.cfg.d_model, their_name(setup.trace_name), view.name, dataset_path=text.name,
                        context_size=bundle.model.cfg.max_len, prepend_bos=bool(prefix))
    count = st.session_state.get("sae_count", 0) + 1
    st.session_state["sae_count"] = count
    return SAERun(f"SAE {count}", view.key, view.name, setup, SAETrainer(cfg, x, recipe.train), text.name)


def start(view_key: str, n_layers: int) -> None:
    """Start (or go on with) training: a new run, built by the next tick, unless the active one reads this model
    with these settings and is not finished."""
    run = active()
    st.session_state["sae_build"] = (run is None or run.finished or run.model != view_key
                                     or run.setup != setup_from_knobs(n_layers))
    st.session_state["sae_running"] = True


def pause() -> None:
    """Stop ticking; keep the dictionary as it is so far."""
    st.session_state["sae_running"] = st.session_state["sae_build"] = False
    run = active()
    if run is not None and run.trainer.steps_done:
        keep(run.dictionary(), run.model)


def tick(view: View, user_text=None) -> None:
    """One slice of training (building the run Start asked for first); a finished run is kept."""
    state = st.session_state
    if state.get("sae_build"):
        state["sae_build"], state["sae_messages"] = False, []
        try:
            state["sae_run"] = new_run(view, setup_from_knobs(view.bundle.model.cfg.n_layers), user_text)
        except ValueError as problem:
            state["sae_messages"], state["sae_running"] = [str(problem)], False
            return
    run = active()
    if run is None:
        return
    if not run.tick(TICK_SECONDS):
        state["sae_messages"] = ["Waiting for a free trainer: two trainings are already running on this server."]
        return
    state["sae_messages"] = []
    if run.finished:
        state["sae_running"] = False
        if run.trainer.stopped is None:
            keep(run.dictionary(), run.model)


def download_bytes(chosen: Dictionary) -> bytes:
    return sae_to_zip(chosen.sae)


def file_name(chosen: Dictionary) -> str:
    return re.sub(r"[^\w.\-]+", "_", chosen.name)[:60] + ".zip"


def upload(view_name: str, view_key: str, cfg) -> None:
    """Read an uploaded dictionary (a zip of SAELens' two files; never pickle) and keep it for the chosen model if
    it fits that model; otherwise say why."""
    file = st.session_state.get("lab_sae_upload")
    if file is None:
        return
    try:
        sae = sae_from_zip(file.getvalue())
        check_fits(sae, cfg, view_name)
    except ValueError as problem:
        st.session_state["sae_messages"] = [f"That dictionary could not be used: {problem}."]
        return
    name = "upload: " + (re.sub(r"[^\w.\- ]", "_", file.name)[:40] or "dictionary")
    keep(Dictionary(model_key(name, sae), name, sae, f"uploaded ({file.name}); it reads {place_words(sae)}"),
         view_key)
    st.session_state["sae_messages"] = []
    st.toast(f"{name} is kept for {view_name}: the Features page's Dictionary features tab lists it.",
             icon=":material/check:")


# --- the lab's section ---------------------------------------------------------------------------------------------

def lab_section(view: View, user_text=None) -> None:
    """The lab's sparse autoencoder, for the model chosen in the sidebar: the knobs, Start and Pause, the live curves
    (a fragment that trains a tick at a time while running), this model's dictionaries to download, and an upload.
    A pretrained model's text takes minutes to read: the lab trains dictionaries for the tiny and lab models only."""
    if models.is_encoder_decoder(view.bundle):
        st.info(f"**{view.name}** is an encoder-decoder; a dictionary reads a decoder-only model's residual stream. "
                "Pick another model in the sidebar.", icon=":material/translate:")
        return
    if models.spec_of(view.name) is not None:
        st.info(f"The lab trains dictionaries for the tiny models and your own (this one is **{view.name}**)"
                + ("; GPT-2 small's published one is on the Features page" if view.name in PRETRAINED else "")
                + ". A dictionary of it in SAELens' format can be uploaded below.", icon=":material/info:")
    else:
        _knobs_and_curves(view, user_text)
    mine = for_model(view)
    if mine:
        st.markdown(f"**Kept for {escape(view.name)}** (the Features page's Dictionary features tab lists them; "
                    "download one as SAELens' two files, cfg.json and sae_weights.safetensors, in a zip):")
    for i, kept_one in enumerate(mine):
        st.download_button(kept_one.dictionary.name, data=functools.partial(download_bytes, kept_one.dictionary),
                           file_name=file_name(kept_one.dictionary), icon=":material/download:",   # zipped on click
                           key=f"lab_sae_download_{i}", on_click="ignore", mime="application/zip")
    st.file_uploader("Upload a dictionary (a zip of cfg.json and sae_weights.safetensors)", type=["zip"],
                     key="lab_sae_upload", on_change=upload, args=(view.name, view.key, view.bundle.model.cfg),
                     max_upload_size=200)


def _knobs_and_curves(view: View, user_text) -> None:
    st.markdown(dictionary.LAB_INTRO.format(model=escape(view.name)))
    n_layers, width = view.bundle.model.cfg.n_layers, view.bundle.model.cfg.d_model
    a, b, c = st.columns(3)
    if st.session_state.get("lab_sae_layer") not in range(n_layers):
        st.session_state["lab_sae_layer"] = (n_layers - 1) // 2
    a.selectbox("Layer: the stream after block", range(n_layers), key="lab_sae_layer")
    b.selectbox("Expansion", EXPANSIONS, index=1, key="lab_sae_expansion",
                format_func=lambda e: f"{e}x ({e * width:,} features)")
    if c.radio("Sparsity", list(SPARSITY), format_func=SPARSITY.get, key="lab_sae_sparsity") == "topk":
        c.number_input("k: features firing per token", 1, 64, 8, key="lab_sae_k")
    else:
        c.number_input("L1 coefficient", 0.0, 1000.0, 1.0, key="lab_sae_l1", format="%.3f")
    left, right = st.columns(2)
    left.button("Start", icon=":material/play_arrow:", type="primary", key="lab_sae_start", width="stretch",
                on_click=start, args=(view.key, n_layers))
    right.button("Pause", icon=":material/pause:", key="lab_sae_pause", width="stretch", on_click=pause)

    @st.fragment(run_every=TICK_EVERY if is_running() else None)
    def live():
        """Trains one tick while running, then draws the run's progress and its four curves."""
        if is_running():
            tick(view, user_text)
            if not is_running():
                st.rerun()                             # finished or stopped: the page stops ticking
        for message in messages():
            st.warning(message, icon=":material/warning:")
        run = active()
        if run is None:
            st.caption("Press Start to train a dictionary with these settings.")
            return
        state = ("training" if is_running() else "stopped" if run.trainer.stopped else
                 "done" if run.finished else "paused")
        st.progress(min(1.0, run.trainer.steps_done / run.budget),
                    text=f"{run.label} of {run.model_name} ({run.setup.words()}): step {run.trainer.steps_done} of "
                         f"{run.budget} · {state} · {run.seconds:.1f} s")
        if run.trainer.stopped:
            st.error(run.trainer.stopped, icon=":material/trending_up:")
        chart(dictionary.training_figure(run.trainer.history, view.presenter, view.phone), key="lab_sae_curves")
        st.markdown(dictionary.training_words(run.trainer.history))

    live()
