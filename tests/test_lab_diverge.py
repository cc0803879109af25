"""A learning rate far too high: the lab stops the run, shows where the loss blew up, says why, and never
publishes the broken model (AppTest on the lab page, and the lab's own logic)."""
import math

from streamlit.testing.v1 import AppTest

from conftest import decode, figure_titled, open_page, page_text
from explorer.lab.figures import loss_figure
from explorer.lab.training import PRESETS, divergence_explanation, new_run


def diverged_lab():
    """The lab with the "diverging" preset trained until it stopped."""
    at = open_page("training")
    at.selectbox(key="lab_preset").set_value("diverging").run()
    at.button(key="lab_start").click().run()
    run = at.session_state["lab_runs"][-1]
    for _ in range(50):                     # what the live fragment does every 0.6 s
        if run.finished:
            break
        run.tick()
    at.run()                                # the next live tick notices the run stopped
    return at, run


def test_the_diverging_preset_stops_the_run_and_says_why_in_this_runs_own_settings():
    at, run = diverged_lab()
    where = run.divergence
    assert not at.exception and where is not None and run.status == "diverged"
    assert run.steps_done < where.step <= 60 < run.setup.train.steps       # stopped long before the budget
    assert not at.session_state["lab_running"]
    assert f"diverged at step {where.step}" in at.get("progress")[0].proto.text
    assert " done " not in at.get("progress")[0].proto.text
    text = page_text(at)
    for words in (f"Training diverged at step {where.step}", "learning rate 1.0 is very high for SGD",
                  "no warmup", "no gradient clipping", "Try a learning rate of 0.1"):
        assert words in text, words


def test_the_loss_chart_keeps_the_finite_points_and_marks_where_it_blew_up():
    at, run = diverged_lab()
    where = run.divergence
    loss = figure_titled(at, "Loss")
    train = list(decode(loss["data"][0]["y"]))
    assert train == [loss for _, loss in run.losses] and len(train) >= 2
    assert all(math.isfinite(y) for y in train)
    [marker] = [t for t in loss["data"] if t["name"] == f"diverged at step {where.step}"]
    assert list(decode(marker["x"])) == [where.step]
    assert decode(marker["y"])[0] > max(train)                               # the blow-up, above every loss


def test_the_explanation_states_the_runs_real_numbers():
    run = new_run(PRESETS["diverging"][1], "run 1")
    while not run.finished:
        run.tick()
    where, vocab = run.divergence, run.model.cfg.vocab_size
    text = divergence_explanation(run)
    assert f"step {where.step}" in text
    if where.cause == "loss exploded":
        assert f"the loss jumped to {where.loss:,.1f}" in text
        assert f"the {math.log(vocab):.2f} a model scores by guessing evenly among its {vocab} tokens" in text
        assert where.loss > 5 * math.log(vocab) == where.limit


def test_a_diverged_model_is_never_published_nor_downloadable_and_reset_and_start_work():
    at, run = diverged_lab()
    assert "lab: run 1" not in at.selectbox(key="model").options
    assert "trained_models" not in at.session_state or not at.session_state["trained_models"]
    assert not [b for b in at.get("download_button") if b.key == "lab_download"]
    assert not [b for b in at.button if b.key == "lab_publish"]
    assert "cannot be explored or downloaded" in page_text(at)
    at.button(key="lab_reset").click().run()
    fresh = at.session_state["lab_runs"][-1]
    assert not at.exception and fresh is not run and fresh.steps_done == 0 and fresh.divergence is None
    assert "Training diverged" not in page_text(at)
    at.session_state["lab_lr"] = 0.01            # a sensible learning rate this time
    at.run()
    at.button(key="lab_start").click().run()
    again = at.session_state["lab_runs"][-1]
    while not again.finished:
        again.tick()
    at.run()
    assert again.status == "done" and again.divergence is None
    at.button(key="lab_publish").click().run()
    assert not at.exception and f"lab: {again.label}" in at.selectbox(key="model").options


def _discoveries_page():
    """What another page (Discoveries) does to open the diverging preset in one click."""
    import streamlit as st

    from explorer.app import lab
    from explorer.lab.training import PRESETS
    lab.init_setup_widgets()
    st.session_state["lab_preset"] = "diverging"
    lab.apply_preset()
    st.write("same" if lab.setup_from_widgets() == PRESETS["diverging"][1] else "different")


def test_another_page_can_open_the_diverging_preset_by_name():
    about, setup = PRESETS["diverging"]
    assert "Too high a learning rate" in about
    assert (setup.train.optimizer, setup.train.lr, setup.train.warmup, setup.train.grad_clip) == ("sgd", 1.0, 0, 0)
    at = AppTest.from_function(_discoveries_page, default_timeout=30).run()
    assert not at.exception and at.markdown[0].value == "same"


def test_the_loss_chart_shows_every_step_so_the_climb_before_the_blow_up_is_visible():
    run = new_run(PRESETS["diverging"][1], "run 1")
    while not run.finished:
        run.tick()
    train = loss_figure(run).data[0]
    assert list(train.x) == list(range(1, run.divergence.step))            # one point per step taken
    assert list(train.y) == [loss for _, loss in run.losses]
    assert sum(len(m.losses) for m in run.trainer.history) == run.steps_done == len(run.losses)
    assert max(train.y) > 2 * min(train.y)                                 # the loss climbs before it blows up
