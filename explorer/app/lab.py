"""The training lab's session state: which runs this visitor has, and what the buttons do.

The page's widgets use keys starting with "lab_"; the setup is read from them. Runs live in this
session only (st.session_state), at most MAX_RUNS of them.
"""
import re
from dataclasses import asdict, replace

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from model.checkpoint import from_bytes, to_bytes

from explorer.app import sae as app_sae
from explorer.app.state import apply_view
from explorer.lab.link import MODEL_KEYS, TRAIN_KEYS
from explorer.lab.training import MAX_RUNS, MAX_TRAINING, PRESETS, TICK_SECONDS, LabSetup, Run, new_run, preset_hint

TICK_EVERY = 0.6                 # seconds between live ticks of a short run (each computes about TICK_SECONDS)
DETAILS_EVERY = 3.0              # seconds between redraws of the slower live views, at the least
TICK_DUTY = TICK_SECONDS / TICK_EVERY     # the share of the time a tick trains, whatever its interval
# Redraws cost the student's browser (measured: docs/figures.md, the training tab), so a long run redraws
# less often and trains longer per tick: the same training speed, fewer redraws.
TICK_STEPS = ((500, TICK_EVERY), (2000, 1.2))     # (step budget up to, seconds between ticks); longer: 2 s
LONG_TICK = 2.0


def tick_every(run: Run | None = None) -> float:
    """Seconds between the live ticks of `run` (the active run by default): short runs often, long runs seldom."""
    run = run or active_run()
    steps = run.setup.train.steps if run else 0
    return next((every for budget, every in TICK_STEPS if steps <= budget), LONG_TICK)


def details_every(run: Run | None = None) -> float:
    """Seconds between redraws of the slower live views: five ticks, at least DETAILS_EVERY."""
    return max(DETAILS_EVERY, 5 * tick_every(run))
MAX_TEXT_CHARS = 1_000_000

EXPLANATION = """\
Training is how a model's numbers get their values. It starts with random weights, so its guesses
are random. Then, step after step, it reads a batch of text windows, guesses every next token,
measures how wrong it was (the **loss**), and nudges every weight a little in the direction that
would have made it less wrong (**gradient descent**, here with the AdamW or SGD optimizer).

Like learning to throw darts: throw, see how far off you were, adjust your aim a little, throw again.
The **learning rate** is how big each adjustment is: too small and you learn slowly, too big and you
overshoot. Watch the loss fall, the samples turn from gibberish into text, and the attention
patterns form. Then explore your model on the walk-through pages.
"""

SHARING = ("**To share a trained model** with a class, download its file: a link cannot carry it (a trained model "
           "lives only in the browser tab that trained it). Students upload the .safetensors file here, and the "
           "model appears in their model picker in the sidebar.")

SETUP_WIDGETS = [f"lab_{k}" for k in ("preset", "task", "tokenizer", "text", "probe", *MODEL_KEYS, *TRAIN_KEYS)]


def _setup_to_widgets(setup: LabSetup) -> None:
    state = st.session_state
    state["lab_task"], state["lab_tokenizer"], state["lab_probe"] = setup.task, setup.tokenizer, setup.probe
    for key in MODEL_KEYS:
        state[f"lab_{key}"] = setup.model[key]
    train = asdict(setup.train)
    for key in TRAIN_KEYS:
        state[f"lab_{key}"] = train[key]


def init_setup_widgets() -> None:
    """Give every setup widget its starting value (the first preset) once per session. A link's (or a lesson's)
    preset and knobs are already set (explorer.app.state._apply_link_fields)."""
    if st.session_state.get("lab_preset") not in PRESETS:
        st.session_state.pop("lab_preset", None)                            # not one of ours: the first
    st.session_state.setdefault("lab_preset", next(iter(PRESETS)))
    if any(f"lab_{key}" not in st.session_state for key in (*MODEL_KEYS, *TRAIN_KEYS)):   # a preset without its knobs
        _setup_to_widgets(PRESETS[st.session_state["lab_preset"]][1])
    st.session_state.setdefault("lab_runs", [])
    st.session_state.setdefault("lab_messages", [])
    for key in SETUP_WIDGETS:                                # keep values while the lab page is not shown
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]


def apply_preset() -> None:
    """Set every knob to the preset named in st.session_state["lab_preset"] (other pages may call it too; as the
    preset picker's callback it may run after a page switch took the picker away: then there is nothing to set)."""
    preset = PRESETS.get(st.session_state.get("lab_preset"))
    if preset is not None:
        _setup_to_widgets(preset[1])


def setup_from_widgets() -> LabSetup:
    """The setup the knobs say. A training setting without a knob (SGD's momentum, the seed) is the chosen
    preset's, so a preset read back from the knobs is that preset, whatever it sets."""
    state = st.session_state
    preset = PRESETS.get(state.get("lab_preset"), PRESETS[next(iter(PRESETS))])[1]
    model = {**{key: value for key, value in preset.model.items() if key not in MODEL_KEYS},   # no knob: the preset's
             **{key: state[f"lab_{key}"] for key in MODEL_KEYS}}
    train = {key: state[f"lab_{key}"] for key in TRAIN_KEYS}
    for key in ("d_model", "n_heads", "n_layers", "d_ff", "max_len", "batch_size", "warmup", "steps"):
        if key in model:
            model[key] = int(model[key])
        if key in train:
            train[key] = int(train[key])
    return LabSetup(task=state["lab_task"], tokenizer=state["lab_tokenizer"], probe=state.get("lab_probe", ""),
                    model=model, train=replace(preset.train, **train))


def setup_hint() -> str:
    """The preset's description, or what the changed knobs will train ("Custom: ...")."""
    try:
        setup = setup_from_widgets()
    except ValueError as problem:
        return f"Custom settings that cannot be trained yet: {problem}"
    return preset_hint(setup, st.session_state["lab_preset"])


def user_text() -> str | bytes | None:
    """The uploaded file's bytes, else the pasted text."""
    upload = st.session_state.get("lab_upload")
    if upload is not None:
        return upload.getvalue()
    return st.session_state.get("lab_text") or None


def runs() -> list[Run]:
    return st.session_state.get("lab_runs", [])


def active_run() -> Run | None:
    return runs()[-1] if runs() else None


def messages() -> list[str]:
    return st.session_state.get("lab_messages", [])


def is_running() -> bool:
    """Training, or about to: Start was pressed and the run is not finished (or is still being built)."""
    if not st.session_state.get("lab_running"):
        return False
    run = active_run()
    return is_building() or (run is not None and not run.finished)


def is_building() -> bool:
    """Start asked for a new run that the trainer has not built yet (see `tick`)."""
    return bool(st.session_state.get("lab_build"))


def _make_run(replace_active: bool = False) -> Run | None:
    """A new run from the widgets' setup, or None (with a message saying why) if it does not fit."""
    st.session_state["lab_messages"] = []
    try:
        setup = setup_from_widgets()
        label = active_run().label if replace_active and active_run() else f"run {st.session_state.get('lab_count', 0) + 1}"
        run = new_run(setup, label, user_text())
    except ValueError as problem:
        st.session_state["lab_messages"] = [str(problem)]
        return None
    kept = runs()[:-1] if replace_active else runs()
    if not replace_active:
        st.session_state["lab_count"] = st.session_state.get("lab_count", 0) + 1
    st.session_state["lab_runs"] = (kept + [run])[-MAX_RUNS:]
    return run


def _wants_new_run() -> bool:
    run = active_run()
    if run is None or run.finished:
        return True
    try:
        return setup_from_widgets() != run.setup
    except ValueError:
        return True


def start() -> None:
    """Start a new run (or resume the current one if its settings are unchanged).

    A new run's model and data take a second or more to build, so the button only asks for it and the next
    tick builds it: a callback's work keeps every element of the page marked stale (greyed) until it returns,
    while a tick runs after the page is drawn."""
    st.session_state["lab_build"] = _wants_new_run()
    st.session_state["lab_running"] = True


def pause() -> None:
    st.session_state["lab_running"] = st.session_state["lab_build"] = False
    run = active_run()
    if run is not None and not run.finished:
        run.status = "paused"


def step_once() -> None:
    """Train one tick, then stay paused."""
    st.session_state["lab_running"] = st.session_state["lab_build"] = False
    if _wants_new_run() and _make_run() is None:
        return
    tick()


def reset() -> None:
    st.session_state["lab_running"] = st.session_state["lab_build"] = False
    _make_run(replace_active=active_run() is not None)


def tick() -> None:
    """One bounded slice of training for the active run (the page's trainer calls this); first builds the run
    Start asked for, if any."""
    if st.session_state.get("lab_build"):
        st.session_state["lab_build"] = False
        if _make_run() is None:                     # its message says why; the page shows it
            st.session_state["lab_running"] = False
            return
    run = active_run()
    if run is None:
        return
    slow = st.session_state.get("lab_slow")
    trained = run.tick(seconds=0, chunk=2) if slow else run.tick(seconds=TICK_DUTY * tick_every(run))
    if not st.session_state.get("lab_running") and run.status == "running":
        # Pause was pressed while this tick trained (the browser test saw the Pause callback land during
        # a live tick), and the tick's end wrote "running" over "paused".
        run.status = "paused"
    if not trained:
        st.session_state["lab_messages"] = [f"Waiting for a free trainer: {MAX_TRAINING} trainings are already "
                                            "running on this server. Yours starts as soon as one finishes."]
        return
    st.session_state["lab_messages"] = []
    if run.finished:
        st.session_state["lab_running"] = False
        if run.publishable:          # a diverged run is explained on the page, never published
            publish()


def may_train_now() -> bool:
    """Whether the page's trainer may tick in this script run. Streamlit runs fragment reruns that queued up
    while a run was busy together, first asked first run: live views queued after the trainer would stay stale
    (greyed) while it trains. So the trainer lets such a run pass once, and ticks on its next turn.
    (`fragment_ids_this_run` is Streamlit's script-run context: None or empty in a full run.)"""
    ctx = get_script_run_ctx(suppress_warning=True)
    together = len((ctx.fragment_ids_this_run or []) if ctx else []) > 1
    passed = st.session_state.get("lab_passed_turn", False)
    st.session_state["lab_passed_turn"] = together and not passed
    return not st.session_state["lab_passed_turn"]


def pause_all() -> None:
    """Leaving the lab pauses training (called by the entry point on every other page).

    After an Explore click it also says which model the walk-through now shows (a toast sent before the
    page switch would be lost with the lab page)."""
    if st.session_state.get("lab_running"):
        pause()
    if st.session_state.get("sae_running"):                 # a dictionary in training too (its panel)
        app_sae.pause()
    explored = st.session_state.pop("lab_explored", None)
    if explored:
        st.toast(f"Now exploring {explored} on the walk-through pages, with a sentence it knows.",
                 icon=":material/travel_explore:")


def progress_text(run: Run) -> str:
    last = run.history[-1] if run.history else {}
    speed = last.get("tokens_per_s", 0)
    budget = run.setup.train.steps
    status = {"waiting": "waiting for a free trainer"}.get(run.status, run.status)
    if status == "running" and not st.session_state.get("lab_running"):
        status = "paused"           # the flag is the truth: a tick that ended after Pause may have said "running"
    if run.divergence:
        status = f"diverged at step {run.divergence.step}"
    loss = f" · loss {run.losses[-1][1]:.3f}" if run.losses and not run.divergence else ""
    text = f"{run.label}: step {run.steps_done} of {budget} · {status}{loss} · {speed:,.0f} tokens/s"
    left = run.seconds_left()
    if not run.finished and left is not None:
        text += f" · about {left:.0f} s left"
    return text


def published_name(run: Run) -> str:
    return f"lab: {run.label}"


def publish() -> str | None:
    """Put a frozen copy of the active run's model into the sidebar's model picker; returns its name.

    A diverged run (NaN or exploded weights) is refused with a message: its numbers would mean nothing.
    """
    run = active_run()
    if run is None:
        return None
    if not run.publishable:
        st.session_state["lab_messages"] = [f"{run.label} diverged, so its model is not added to the model picker. "
                                            "Lower the learning rate and press Start."]
        return None
    name = published_name(run)
    _add_to_model_picker(name, run.bundle())
    return name


def explore() -> None:
    """The "Explore it" button: publish the model, select it with a sentence it knows, go to the walk-through.

    A callback cannot switch pages, so it leaves a flag (lab_explore) the page script acts on.
    """
    name = publish()
    if name is None:
        return
    apply_view(model=name, text=active_run().example)
    state = st.session_state
    state["lab_explore"] = state["lab_explored"] = name


def take_explore_request() -> str | None:
    """The model name the Explore button asked to open (once), or None."""
    return st.session_state.pop("lab_explore", None)


def _add_to_model_picker(name: str, bundle) -> None:
    """This session's own models, shown in the sidebar after the bundled ones (the oldest drops out)."""
    trained = st.session_state.setdefault("trained_models", {})
    trained[name] = bundle
    if len(trained) > MAX_RUNS:                 # bound the session's memory
        trained.pop(next(iter(trained)))


def download_bytes(run: Run) -> bytes:
    return to_bytes(run.bundle())


def upload() -> None:
    """Validate an uploaded model file and add it to the model picker (nothing is unpickled)."""
    file = st.session_state.get("lab_model_upload")
    if file is None:
        return
    try:
        bundle = from_bytes(file.getvalue())
    except ValueError as problem:
        st.session_state["lab_messages"] = [f"That file could not be loaded: {problem}"]
        return
    name = "upload: " + (re.sub(r"[^\w.\- ]", "_", file.name)[:40] or "model")
    _add_to_model_picker(name, bundle)
    st.session_state["lab_messages"] = []
    st.toast(f"Added {name} to the model picker in the sidebar.", icon=":material/check:")
