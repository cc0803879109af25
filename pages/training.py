"""Training lab: train a small transformer live, watch it learn, then explore it in the walk-through."""
import streamlit as st

from explorer.app import lab
from explorer.app import sae as app_sae
from explorer.lab.figures import (COMPARE_WINDOW, compare_figure, flow_figure, length_figure, loss_chart, loss_figure,
                                  metrics_chart, same_task_runs, snapshot_caption, snapshot_chart)
from explorer.app.layout import beside_the_chart, chart, explanation, page_header, step_nav
from explorer.app.models import is_encoder_decoder
from explorer.app.state import view
from explorer.lab.training import (BOUNDS, CHOICES, PRESETS, RANGES, TASK_ABOUT, TASKS, describe_difference,
                               divergence_explanation, length_caption, length_sentence, setting_words)

explored = lab.take_explore_request()
if explored:                          # "Explore it in the walk-through" was pressed: go there with the new model
    trained = st.session_state.get("trained_models", {}).get(explored)
    st.switch_page("pages/encoder-decoder.py" if trained and is_encoder_decoder(trained) else "pages/home.py")

v = view()
page_header("training", v)
explanation(v, lab.EXPLANATION, title="What happens when a model trains")
# The trainer's place (see `trainer` below): near the top, where every run of the page has drawn it before anything
# changes the number of elements. Last on the page, a trainer's tick that began before a run had drawn the page's
# end wrote into a place the browser did not have yet ("Bad delta path index 14 (should be between [0, 13])"), and
# the page went white (tests/test_load.py, two trainers and ten visitors on a busy machine: 2 runs in 3).
trainer_place = st.container(key="lab_trainer")

# 1) the setup: a preset, then every knob (advanced knobs hidden in presenter mode). On a projector, once a run
# exists, the setup folds into a panel so the controls and the loss curve are on the first screen.
run = lab.active_run()
folded = v.presenter and run is not None
with st.expander("1. Set up", icon=":material/tune:") if folded else st.container():
    if not folded:
        st.subheader("1. Set up")
    lab.init_setup_widgets()
    left, right = st.columns([1, 2])
    left.selectbox("Preset", list(PRESETS), key="lab_preset", on_change=lab.apply_preset)
    hint = right.empty()                  # filled below, once the widgets hold this run's settings
    task = st.radio("Task", list(TASKS), format_func=TASKS.get, key="lab_task", horizontal=True)
    if task == "text":
        st.text_area("Your text", key="lab_text", height=120, max_chars=lab.MAX_TEXT_CHARS,
                     placeholder="Paste a few paragraphs, a poem, song lyrics ...")
        st.file_uploader("... or upload a .txt file (up to 1 MB)", type=["txt"], key="lab_upload", max_upload_size=1)
        st.caption("Your text stays in this browser tab: a link to this page carries the preset and the knobs, "
                   "never the text.")
    st.text_input("Probe sentence", key="lab_probe", max_chars=300,
                  placeholder="empty: a sentence from the task (e.g. 'roses are red violets are blue')",
                  help="Its attention pattern is watched while the model learns; its first words start the samples.")
    # The advanced knobs sit in panels drawn only while open (their values stay: see lab.init_setup_widgets), so
    # a training tick has fewer elements on the page to go through; hidden in presenter mode.
    architecture = None if v.presenter else st.expander("Architecture", icon=":material/account_tree:",
                                                       key="lab_architecture", on_change="rerun")
    optimizer = None if v.presenter else st.expander("Optimizer and schedule", icon=":material/tune:",
                                                    key="lab_optimizer_panel", on_change="rerun")
    if architecture is not None and architecture.open:
        with architecture:
            a, b, c = st.columns(3)
            a.number_input("Layers", *BOUNDS["n_layers"], key="lab_n_layers")
            a.number_input("Heads", *BOUNDS["n_heads"], key="lab_n_heads")
            a.selectbox("Tokens", CHOICES["tokenizer"], key="lab_tokenizer")
            b.number_input("d_model", *BOUNDS["d_model"], step=8, key="lab_d_model")
            b.number_input("d_ff", *BOUNDS["d_ff"], step=8, key="lab_d_ff")
            b.number_input("Context length", *BOUNDS["max_len"], key="lab_max_len")
            c.selectbox("Positions", CHOICES["pos"], key="lab_pos")
            c.selectbox("Norm", CHOICES["norm"], key="lab_norm")
            c.selectbox("Norm position", CHOICES["norm_position"], key="lab_norm_position")
            c.selectbox("Activation", CHOICES["activation"], key="lab_activation")
            a.checkbox("Scale embeddings by √d_model", key="lab_embed_scale",
                       help="The 2017 paper multiplies token embeddings by √d_model so the positional signal added "
                            "next does not drown them out. Forget it with sinusoidal positions and watch the loss.")
    if optimizer is not None and optimizer.open:
        with optimizer:
            a, b, c = st.columns(3)
            a.selectbox("Optimizer", CHOICES["optimizer"], key="lab_optimizer", help="SGD uses momentum 0.9.")
            a.number_input("Learning rate", *RANGES["lr"], format="%.4f", key="lab_lr")
            a.number_input("Batch size", *BOUNDS["batch_size"], key="lab_batch_size")
            b.number_input("Warmup steps", *RANGES["warmup"], key="lab_warmup")
            b.selectbox("Schedule", CHOICES["schedule"], key="lab_schedule")
            b.number_input("Step budget", *BOUNDS["steps"], key="lab_steps")
            c.number_input("Gradient clipping (0 = off)", *RANGES["grad_clip"], key="lab_grad_clip")
            c.number_input("Label smoothing", *RANGES["label_smoothing"], key="lab_label_smoothing")
            c.number_input("Weight decay", *RANGES["weight_decay"], format="%.4f", key="lab_weight_decay",
                           help="Shrinks every weight a little towards zero at each step. The encoder-decoder presets "
                                "train without it (0).")

    hint.info(lab.setup_hint(), icon=":material/lightbulb:")

# 2) the controls, like TensorFlow Playground's (on a projector with a run: beside the loss curve)
controls, curve = beside_the_chart(v, spec=(1, 3)) if folded else (st.container(), st.container())
controls.subheader("2. Train")
buttons = [controls] * 4 if folded else controls.columns(4 if v.presenter else [1, 1, 1, 1, 2])
buttons[0].button("Start", icon=":material/play_arrow:", on_click=lab.start, type="primary", key="lab_start",
                  width="stretch")
buttons[1].button("Pause", icon=":material/pause:", on_click=lab.pause, key="lab_pause", width="stretch")
buttons[2].button("Step", icon=":material/skip_next:", on_click=lab.step_once, key="lab_step", width="stretch",
                  help="Train for one tick (a fraction of a second), then stop.")
buttons[3].button("Reset", icon=":material/restart_alt:", on_click=lab.reset, key="lab_reset", width="stretch",
                  help="Start this run again from random weights with the settings above.")
controls.toggle("Slow motion", key="lab_slow", help="Two steps per tick, to watch a quick model learn step by step.")
for message in lab.messages():
    controls.warning(message, icon=":material/warning:")

run = lab.active_run()
if run is not None and run.divergence:
    controls.error(divergence_explanation(run), icon=":material/trending_up:")


# While a run trains, three fragments rerun on their own timers: `trainer` (at the page's end) trains and
# draws nothing, and the live views only redraw. Streamlit marks a fragment's elements stale (greyed, after
# half a second) from the start of its rerun until each is drawn again, so a fragment that trained before
# drawing greyed its charts at every tick; these redraw at once and are never grey.
@st.fragment(run_every=lab.tick_every() if lab.is_running() else None)
def live_progress():
    """The progress and the loss curve, as the last tick left them."""
    current = lab.active_run()
    if lab.is_building():
        st.progress(0.0, text="Building the model and its training data ...")
        return
    if current is None:
        st.caption("Press Start to train a model with these settings.")
        return
    st.progress(min(1.0, current.steps_done / current.setup.train.steps), text=lab.progress_text(current))
    log_scale = st.toggle("Log scale", key="lab_log_scale")
    if current.divergence:          # drawn once: the run has stopped, with its blow-up marked
        chart(loss_figure(current, log_scale, v.presenter), key="lab_loss")
    else:                           # updated in place at every tick (see loss_chart)
        st.altair_chart(loss_chart(current, log_scale, v.presenter), width="stretch")


# The other live views redraw less often: on a shared server every redraw of every trainer's charts
# costs all visitors (the benchmark showed the redraws, not the training, slowing other pages).
@st.fragment(run_every=lab.details_every() if lab.is_running() else None)
def live_details():
    """Accuracy, learning rate, gradient flow, samples and the probe's attention."""
    current = lab.active_run()
    if current is None:
        return
    st.altair_chart(metrics_chart(current, v.presenter), width="stretch")          # updated in place
    flow = st.expander("Gradient flow, parameter by parameter", key="lab_flow", on_change="rerun",
                       icon=":material/bar_chart:")
    if flow.open and current.flow:                          # drawn only while open: one chart less per tick
        chart(flow_figure(current, v.presenter), flow, key="lab_flow")
    left, right = st.columns(2)
    with left:
        st.markdown("**Samples** (greedy, from the probe's first words)")
        st.dataframe({"step": [s for s, _ in current.samples][::-1], "text": [t for _, t in current.samples][::-1]},
                     hide_index=True, height=260)
    with right:
        cfg = current.model.cfg
        a, b = st.columns(2)
        layer = a.selectbox("Layer", range(cfg.n_layers), key="lab_layer")
        head = b.selectbox("Head", range(cfg.n_heads), key="lab_head")
        n = len(current.snapshots)
        index = st.slider("Snapshot", 0, n - 1, n - 1, key="lab_snapshot") if n > 1 else 0
        layer, head = min(layer, cfg.n_layers - 1), min(head, cfg.n_heads - 1)
        st.altair_chart(snapshot_chart(current, index, layer, head, v.presenter), width="stretch")   # in place
        st.caption(snapshot_caption(current, index, layer, head))


with curve:
    live_progress()
live_details()

# a finished digit run of the encoder-decoder, tested on every list length it can read
if run is not None and run.by_length:
    st.subheader("Does it generalise to other lengths?")
    chart(length_figure(run.by_length, run.lengths, "sorted" if run.pair_task == "sort" else "reversed",
                        v.presenter), key="lab_lengths")
    st.markdown(f"**{length_sentence(run.by_length, run.lengths)}**")
    st.caption(length_caption(run))

# 3) compare and keep
runs = lab.runs()
comparable = same_task_runs(runs, run) if run is not None else []
if len(comparable) > 1:
    st.subheader("3. Compare runs")
    chart(compare_figure(comparable, describe_difference, setting_words, v.presenter), key="lab_compare")
    hidden = len(runs) - len(comparable)
    st.caption(f"Runs on {TASK_ABOUT[run.setup.task]} only: losses of different tasks cannot be compared"
               + (f" ({hidden} run{'s' * (hidden > 1)} on other tasks not shown)." if hidden else ".")
               + f" Every curve is computed the same way: each point is a run's mean training loss over "
                 f"{COMPARE_WINDOW} steps (1-{COMPARE_WINDOW}, {COMPARE_WINDOW + 1}-{2 * COMPARE_WINDOW}, ...). "
                 "Each label says what differs from the first run; hover a curve for all its settings.")
st.subheader("Explore, download or upload a model")
left, right = st.columns(2)
if run is not None and run.steps_done and run.publishable:
    left.button("Explore it in the walk-through", icon=":material/travel_explore:", on_click=lab.explore,
                key="lab_publish", width="stretch",
                help="Adds a frozen copy of this model to the sidebar's model picker and opens the walk-through.")
    left.download_button("Download (.safetensors)", data=lab.download_bytes(run), icon=":material/download:",
                         file_name=f"{run.label.replace(' ', '_')}.safetensors", key="lab_download",
                         on_click="ignore", width="stretch")
elif run is not None and run.divergence:
    left.caption("A diverged model cannot be explored or downloaded: its numbers are NaN or exploded.")
right.file_uploader("Upload a model file", type=["safetensors"], key="lab_model_upload", on_change=lab.upload,
                    max_upload_size=50)
st.caption(lab.SHARING)

# 4) a sparse autoencoder of the model chosen in the sidebar (explorer/app/sae.py): drawn only while open
sae_panel = st.expander("A sparse autoencoder: a dictionary of the model's features", icon=":material/dictionary:",
                        key="lab_sae_panel", on_change="rerun")
if sae_panel.open:
    with sae_panel:
        app_sae.lab_section(v, lab.user_text())
step_nav("training")


@st.fragment(run_every=lab.tick_every() if lab.is_running() else None)
def trainer():
    """Trains one tick while running (building the run Start asked for first). It draws nothing, so no element
    is marked stale while it trains; called last, so a full run has drawn everything before it trains."""
    if not lab.is_running() or not lab.may_train_now():
        return
    building = lab.is_building()
    lab.tick()
    if building or not lab.is_running():
        st.rerun()                 # a new run (the whole page shows it), or finished or stopped: stop ticking


with trainer_place:
    trainer()
