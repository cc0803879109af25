"""The training lab, as a student drives it (AppTest; live ticks are driven by calling tick directly)."""
import re

import pytest
import torch

from conftest import decode, figure_titled, open_page, page_text, vega_chart_titled
from explorer.app import lab as app_lab
from explorer.lab import training
from explorer.plot import MASKED
from explorer.lab.training import LabSetup, MAX_RUNS, PRESETS, _TRAINER_SLOTS, check_setup, new_run
from model.checkpoint import from_bytes, load_bundled, to_bytes


def lab():
    at = open_page("training")
    assert not at.exception
    return at


def active(at):
    return at.session_state["lab_runs"][-1]


def test_start_step_pause_reset_drive_a_real_run_whose_loss_falls():
    at = lab()
    at.session_state["lab_steps"] = 5000        # a budget no few ticks can finish
    at.run()
    at.button(key="lab_start").click().run()
    assert not at.exception and at.session_state["lab_running"]
    run = active(at)
    first_loss = run.history[0]["loss"]
    for _ in range(4):                      # what the page's trainer does every half second
        run.tick()
    losses, evals = list(run.losses), list(run.evals)
    at.run()                                # draws the run as those ticks left it, then its trainer ticks once
    assert len(run.history) > 10 and run.history[-1]["loss"] < 0.5 * first_loss
    assert len(run.losses) > len(losses)
    spec, data = vega_chart_titled(at, "Loss")                   # updated in place at every tick (Vega-Lite)
    train, validation = data[data.series == "train"], data[data.series == "validation"]
    assert list(train.step) == [s for s, _ in losses]                                            # every step
    assert list(train.loss) == pytest.approx([loss for _, loss in losses])
    assert list(validation.loss) == pytest.approx([e["val_loss"] for e in evals])
    assert f"loss {losses[-1][1]:.3f}" in at.get("progress")[0].proto.text
    steps = run.steps_done
    at.toggle(key="lab_log_scale").set_value(True).run()
    spec, _ = vega_chart_titled(at, "Loss")
    assert spec["layer"][0]["encoding"]["y"]["scale"]["type"] == "log"
    assert f"step {steps} of 5000" in at.get("progress")[0].proto.text
    at.button(key="lab_pause").click().run()
    assert not at.session_state["lab_running"] and run.status == "paused"
    steps = run.steps_done
    at.button(key="lab_step").click().run()
    assert run.steps_done > steps and not at.session_state["lab_running"]
    at.button(key="lab_reset").click().run()
    assert active(at).steps_done == 0 and active(at).label == run.label


def test_pause_pressed_while_a_tick_trains_leaves_the_run_paused():
    """In a real browser the Pause click's rerun can run while the live fragment's tick still trains
    (the lab's browser test caught it); the tick must not write "running" over "paused"."""
    at = lab()
    at.session_state["lab_steps"] = 5000
    at.run()
    at.button(key="lab_start").click().run()
    run = active(at)
    step = run.trainer.step

    def step_then_pause(n):
        metrics = step(n)
        app_lab.pause()                   # what the Pause button's callback does, here mid-tick
        return metrics

    run.trainer.step = step_then_pause
    at.run()                                # the page's run ticks once, as the live fragment does
    assert not at.exception and not at.session_state["lab_running"] and run.status == "paused"
    assert " · paused · " in at.get("progress")[0].proto.text


def test_a_finished_run_appears_in_the_model_picker_and_the_walk_through_reads_it():
    at = lab()
    at.button(key="lab_start").click().run()
    run = active(at)
    while not run.finished:
        run.tick()
    at.run()                                   # the next live tick notices the run is done
    at.button(key="lab_publish").click().run()
    assert "lab: run 1" in at.selectbox(key="model").options
    at.selectbox(key="model").set_value("lab: run 1").run()
    at.switch_page("pages/home.py").run()
    assert not at.exception
    assert "12 scores" in page_text(at)        # the roses vocabulary: 11 words and <unk>


def test_training_in_one_session_leaves_the_bundled_model_bit_for_bit_unchanged():
    ids = load_bundled("tinytales").tokenizer.encode("the cat sat on the mat because it was tired")
    before = {k: v.clone() for k, v in load_bundled("tinytales").model.run(ids).items()}
    at = lab()
    at.selectbox(key="lab_preset").set_value("tales").run()
    at.button(key="lab_start").click().run()
    active(at).tick()
    other = open_page("home")                  # another visitor, on the shared cached model
    from explorer.app.state import bundled_model
    after = bundled_model("tinytales").model.run(ids)
    for name, value in before.items():
        assert torch.equal(value, after[name]), name
    assert not other.exception


def test_download_then_upload_gives_identical_logits():
    at = lab()
    at.button(key="lab_start").click().run()
    run = active(at)
    run.tick()
    at.button(key="lab_pause").click().run()
    data = to_bytes(run.bundle())               # what the download button serves
    at.file_uploader(key="lab_model_upload").upload("my model.safetensors", data).run()
    assert not at.exception
    name = "upload: my model.safetensors"
    assert name in at.selectbox(key="model").options
    uploaded = at.session_state["trained_models"][name]
    probe = [[1, 2, 3, 4]]
    assert torch.equal(uploaded.model.predict(probe), run.model.predict(probe))


@pytest.mark.parametrize("data, message", [
    (b"\x00garbage" * 100, "not a Transformer Explorer model file"),
    (b"", "not a Transformer Explorer model file"),
])
def test_a_corrupted_upload_is_refused_with_a_message_and_nothing_is_lost(data, message):
    at = lab()
    at.button(key="lab_start").click().run()
    steps = active(at).steps_done
    at.file_uploader(key="lab_model_upload").upload("broken.safetensors", data).run()
    assert not at.exception
    assert "That file could not be loaded" in page_text(at) and message in page_text(at)
    assert active(at).steps_done >= steps and at.selectbox(key="model").options[:2] == ["tinytales", "roses"]


def test_tampered_or_oversized_model_files_are_refused():
    run = new_run(LabSetup(), "run 1")
    data = bytearray(to_bytes(run.bundle()))
    data[-50:] = b"\xff" * 50
    with pytest.raises(ValueError):
        from_bytes(bytes(data))
    with pytest.raises(ValueError, match="the limit is"):
        from_bytes(to_bytes(run.bundle()), max_bytes=1000)


@pytest.mark.parametrize("text, message", [
    ("", "Paste some text"),
    ("   \n ", "empty"),
    (b"\x00\x01\x02binary", "binary"),
    (b"caf\xe9 latin-1", "not UTF-8"),
    ("too short", "too short"),
])
def test_bad_own_text_gets_a_clear_message(text, message):
    setup = LabSetup(task="text", tokenizer="char")
    with pytest.raises(ValueError, match=message):
        new_run(setup, "run 1", text)


def test_hyperparameters_that_do_not_fit_are_refused_in_words():
    setup = LabSetup(model={**LabSetup().model, "d_model": 30, "n_heads": 4})
    assert any("d_model 30 is not divisible by n_heads 4" in p for p in check_setup(setup))
    setup = LabSetup(model={**LabSetup().model, "n_layers": 40})
    assert any("n_layers must be between 1 and 4" in p for p in check_setup(setup))
    at = lab()
    at.session_state["lab_d_model"] = 30
    at.session_state["lab_n_heads"] = 4
    at.run()
    at.button(key="lab_start").click().run()
    assert not at.exception
    assert "not divisible" in page_text(at)
    assert not at.session_state["lab_runs"]


def test_own_text_trains_with_a_character_tokenizer():
    text = "the quick brown fox jumps over the lazy dog. " * 40
    run = new_run(LabSetup(task="text", tokenizer="char"), "mine", text)
    run.tick()
    assert run.steps_done > 0 and run.tokenizer.kind == "char"


def test_a_session_keeps_at_most_four_runs():
    at = lab()
    for i in range(MAX_RUNS + 2):
        at.button(key="lab_reset" if i == 0 else "lab_start").click().run()
        at.session_state["lab_lr"] = 0.01 + i / 1000          # a changed setting makes a new run
        at.run()
    assert len(at.session_state["lab_runs"]) <= MAX_RUNS


def test_when_every_trainer_is_busy_a_run_waits_and_says_so():
    run = new_run(LabSetup(), "run 1")
    held = [_TRAINER_SLOTS.acquire(blocking=False) for _ in range(2)]
    try:
        assert all(held)
        assert run.tick() is False and run.status == "waiting" and run.steps_done == 0
    finally:
        for _ in held:
            _TRAINER_SLOTS.release()
    assert run.tick() is True and run.steps_done > 0


def test_every_preset_fits_the_bounds():
    for about, setup in PRESETS.values():
        assert about and not check_setup(setup)


def test_the_probe_sentence_is_the_one_whose_attention_is_watched_and_whose_words_start_the_samples():
    at = lab()
    at.text_input(key="lab_probe").set_value("sugar is sweet and so are you").run()
    at.button(key="lab_start").click().run()
    run = active(at)
    assert [run.tokenizer.vocab[i] for i in run.probe_ids] == "sugar is sweet and so are you".split()
    assert run.snapshots[-1][1].shape[-1] == 7                   # (layers, heads, 7, 7)
    assert run.samples[-1][1].startswith("sugar is sweet")
    spec, attention = vega_chart_titled(at, "Attention snapshot")        # updated in place (Vega-Lite)
    assert list(attention.masked) == [c > r for r in range(7) for c in range(7)]   # later tokens: masked,
    assert spec["encoding"]["color"]["condition"]["value"] == MASKED                # the grey of every chart
    assert len(attention) == 7 * 7 and list(attention.column[:7]) == [f"{i} {w}" for i, w in
                                                                       enumerate("sugar is sweet and so are you".split())]
    # the page shows the run as its last tick left it (its trainer ticks once more after drawing)
    shown = int(re.search(r"layer 0, head 0, at step (\d+)", page_text(at)).group(1))
    assert shown == run.snapshots[-2][0] < run.snapshots[-1][0]
    pattern = run.snapshots[-2][1][0, 0]
    assert list(attention.weight) == pytest.approx(pattern.flatten().tolist())


def test_the_labs_setups_are_recipes_and_its_bounds_and_choices_come_from_the_models_own_constants():
    from model import presets
    from model.config import LIMITS, NORM_KINDS, POS_KINDS
    from model.trainer import OPTIMIZERS, SCHEDULES
    assert isinstance(training.WALKTHROUGH, presets.Recipe) and isinstance(presets.PRESETS["roses"], presets.Recipe)
    roses = presets.PRESETS["roses"]                       # the lab's first setup is the bundled roses recipe
    from model.config import ModelConfig
    assert (training.WALKTHROUGH.task, training.WALKTHROUGH.train) == (roses.task, roses.train)
    assert ModelConfig(vocab_size=12, **training.WALKTHROUGH.model) == ModelConfig(vocab_size=12, **roses.model)
    assert all(high <= LIMITS[name] for name, (_, high) in training.BOUNDS.items() if name in LIMITS)
    assert training.CHOICES["pos"] == POS_KINDS and training.CHOICES["norm"] == NORM_KINDS
    assert training.CHOICES["optimizer"] == OPTIMIZERS and training.CHOICES["schedule"] == SCHEDULES


def test_the_setup_panels_draw_their_knobs_only_while_open_and_keep_their_values():
    at = lab()
    knobs = lambda: {w.key for w in at.number_input} | {w.key for w in at.selectbox}   # noqa: E731
    assert "lab_n_layers" not in knobs() and "lab_lr" not in knobs()        # closed: not on the page
    at.session_state["lab_architecture"] = True                              # the student opens Architecture
    at.run()
    assert "lab_n_layers" in knobs() and "lab_lr" not in knobs()
    at.number_input(key="lab_n_layers").set_value(3).run()
    at.session_state["lab_architecture"] = False                             # ... and closes it again
    at.run()
    assert "lab_n_layers" not in knobs()
    at.button(key="lab_start").click().run()
    assert not at.exception and active(at).model.cfg.n_layers == 3          # the hidden value still counts
    at.button(key="lab_pause").click().run()
    at.session_state["lab_optimizer_panel"] = True
    at.run()
    assert at.number_input(key="lab_lr").value == pytest.approx(active(at).setup.train.lr)


def test_the_lab_offers_embed_scale_and_trains_with_it():
    at = lab()
    at.session_state["lab_architecture"] = True                  # the student opens the Architecture panel
    at.run()
    at.checkbox(key="lab_embed_scale").check().run()
    at.button(key="lab_start").click().run()
    assert not at.exception
    run = active(at)
    assert run.model.cfg.embed_scale and run.setup.model["embed_scale"] is True
    assert "embeddings scaled by √d_model" in training.setting_words(run.setup, training.WALKTHROUGH)
    at.button(key="lab_pause").click().run()
    at.button(key="lab_start").click().run()                     # same settings: the run resumes
    assert active(at) is run


def test_long_runs_tick_less_often_and_train_longer_per_tick():
    short = new_run(PRESETS["walkthrough"][1], "short")                       # 300 steps
    middle = new_run(PRESETS["tales"][1], "middle")                           # 1,500 steps
    long = new_run(PRESETS["sort (encoder-decoder)"][1], "long")              # 3,000 steps
    assert [app_lab.tick_every(r) for r in (short, middle, long)] == [0.6, 1.2, 2.0]
    assert app_lab.details_every(short) == 3.0 and app_lab.details_every(long) == 10.0
    for preset, interval in (("walkthrough", 0.6), ("sort (encoder-decoder)", 2.0)):
        at = lab()
        at.selectbox(key="lab_preset").set_value(preset).run()
        at.button(key="lab_start").click().run()
        asked = []
        active(at).tick = lambda seconds, **_: asked.append(seconds) or True   # what the live tick asks for
        at.run()
        assert asked and asked[-1] == pytest.approx(app_lab.TICK_DUTY * interval)   # a third of each interval


def test_the_trainer_lets_a_script_run_with_queued_live_views_pass_once(monkeypatch):
    """Fragment reruns that queued up run together, first asked first run: the trainer does not tick while
    live views wait in the same run (they would stay greyed), but never passes twice in a row."""
    from types import SimpleNamespace
    monkeypatch.setattr(app_lab.st, "session_state", {})
    runs = {"full run": None, "the trainer alone": ["trainer"], "queued together": ["trainer", "progress"]}
    turns = []
    for name in ["full run", "the trainer alone", "queued together", "queued together", "queued together",
                 "the trainer alone"]:
        context = SimpleNamespace(fragment_ids_this_run=runs[name])
        monkeypatch.setattr(app_lab, "get_script_run_ctx", lambda **_: context)
        turns.append(app_lab.may_train_now())
    assert turns == [True, True, False, True, False, True]
