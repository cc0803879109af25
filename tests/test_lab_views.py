"""The lab's smaller promises: Explore opens the walk-through on the new model, the time estimate follows the
wall clock, every legend entry has its own colour, runs are compared within a task, the hint says what
Start will train, and the page says how to share a trained model."""
import pytest

from conftest import figure_titled, open_page, page_text
from explorer.lab import training
from explorer.lab.figures import COMPARE_WINDOW, compare_figure, log_ticks, loss_figure, metrics_chart, metrics_data
from explorer.lab.training import (LabSetup, PRESETS, TrainConfig, WALKTHROUGH, describe_difference, new_run,
                               setting_words)


def test_explore_publishes_the_model_selects_it_with_its_probe_sentence_and_opens_the_walk_through():
    at = open_page("training")
    at.button(key="lab_start").click().run()
    run = at.session_state["lab_runs"][-1]
    run.tick()
    at.button(key="lab_pause").click().run()
    at.button(key="lab_publish").click().run()
    assert not at.exception
    assert at.session_state["model"] == "lab: run 1"
    assert at.selectbox(key="model").value == "lab: run 1"
    assert at.session_state["text"] == "roses are red violets are blue"       # the run's probe sentence
    assert at.session_state["trained_models"]["lab: run 1"].facts["example"] == "roses are red violets are blue"
    assert "The big picture" in page_text(at) and not at.get("progress")       # the home page, not the lab
    assert any("Now exploring lab: run 1" in str(t.proto.body) for t in at.get("toast"))


def test_a_probe_with_unknown_words_offers_the_start_of_the_training_text_instead():
    run = new_run(LabSetup(probe="roses are purple"), "run 1")
    assert run.example == run.tokenizer.decode(run.trainer.train_ids[:16].tolist())
    assert "<unk>" not in run.example


def test_the_time_left_follows_the_wall_clock_pace_of_ticks_not_the_compute_time(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(training, "clock", lambda: now[0])
    run = new_run(LabSetup(train=TrainConfig(steps=5000, batch_size=16, lr=1e-2, warmup=10)), "run 1")
    for _ in range(4):                      # a tick trains, then the page waits: a tick takes 3x its compute time
        before = run.seconds
        run.tick()
        now[0] += 3 * (run.seconds - before)   # relative to this machine's speed, so a busy machine changes nothing
    (t0, s0), (t1, s1) = run.ticks[0], run.ticks[-1]
    pace = (s1 - s0) / (t1 - t0)                                             # steps per wall-clock second
    expected = (5000 - run.steps_done) / pace
    assert run.seconds_left() == pytest.approx(expected)
    compute_estimate = (5000 - run.steps_done) / (run.steps_done / run.seconds)
    assert run.seconds_left() > 2 * compute_estimate                      # the old, far too low estimate
    now[0] += 60                                                           # a pause is not the pace
    run.tick()
    assert run.seconds_left() == pytest.approx((5000 - run.steps_done) * (t1 - t0) / (s1 - s0), rel=0.5)
    from explorer.app.lab import progress_text
    assert f"about {run.seconds_left():.0f} s left" in progress_text(run)


def trained(setup: LabSetup, label: str = "run 1", ticks: int = 1):
    run = new_run(setup, label)
    for _ in range(ticks):
        run.tick(seconds=0)
    return run


def colours(fig) -> list[str]:
    return [trace.line.color or trace.marker.color for trace in fig.data]


def test_every_legend_entry_of_a_lab_figure_has_its_own_colour():
    deep = trained(LabSetup(model={**WALKTHROUGH.model, "n_layers": 4}))
    data = metrics_data(deep)
    grads = data[data.panel == "gradient norm per layer"]
    assert set(grads.series) == {"embed", "blocks.0", "blocks.1", "blocks.2", "blocks.3", "unembed"}
    spec = metrics_chart(deep).to_dict()
    assert spec["resolve"]["scale"]["color"] == "independent"          # each panel its own colours (at most 6)
    assert spec["hconcat"][2]["encoding"]["y"]["scale"]["type"] == "log"
    last = deep.history[-1]
    assert grads[grads.step == last["step"]].set_index("series").value.to_dict() == \
        {k[5:]: v for k, v in last.items() if k.startswith("grad ")}
    diverged = new_run(PRESETS["diverging"][1], "run 2")
    while not diverged.finished:
        diverged.tick()
    loss = loss_figure(diverged)
    assert len(loss.data) == 3 and len(set(colours(loss))) == 3
    runs = [trained(LabSetup(train=TrainConfig(steps=300, lr=lr)), f"run {i}") for i, lr in enumerate((1e-2, 3e-3, 1e-3, 3e-4))]
    compare = compare_figure(runs, describe_difference, setting_words)
    assert len(set(colours(compare))) == 4


def test_log_axes_read_one_two_five():
    ticks = log_ticks([0.08, 0.3, 2.6])
    assert ticks["ticktext"] == ["0.05", "0.1", "0.2", "0.5", "1", "2", "5"]
    assert ticks["tickvals"] == pytest.approx([0.05, 0.1, 0.2, 0.5, 1, 2, 5])


def test_runs_are_compared_within_the_active_runs_task_with_short_labels():
    at = open_page("training")
    for task, lr in (("roses", 0.01), ("digits", 0.01), ("roses", 0.1)):
        at.session_state["lab_task"] = task
        at.session_state["lab_lr"] = lr
        at.run()
        at.button(key="lab_start").click().run()
    assert len(at.session_state["lab_runs"]) == 3
    figure = figure_titled(at, "Compare runs")
    assert [trace["name"] for trace in figure["data"]] == ["run 1: reference", "run 3: lr 0.1"]
    assert "roses poem, word tokens" in figure["data"][1]["hovertemplate"]        # every setting on hover
    assert "1 run on other tasks not shown" in page_text(at)
    ticks = figure["layout"]["yaxis"]["ticktext"]
    assert ticks and all(t.strip("0.")[0] in "125" and len(t.strip("0.")) == 1 for t in ticks), ticks


def test_the_hint_describes_what_start_will_train_when_the_knobs_differ_from_the_preset():
    at = open_page("training")
    assert at.info[0].value == PRESETS["walkthrough"][0]
    at.radio(key="lab_task").set_value("text").run()
    hint = at.info[0].value
    assert "roses poem in seconds" not in hint
    assert hint.startswith("Custom:") and "your own text" in hint
    at.selectbox(key="lab_preset").set_value("no positions").run()
    assert at.info[0].value == PRESETS["no positions"][0]
    at.session_state["lab_pos"] = "learned"
    at.run()
    assert "learned positions" in at.info[0].value and at.info[0].value.startswith("Custom:")


def test_every_preset_once_chosen_is_shown_as_that_preset_and_one_changed_knob_shows_the_change():
    """The hint reads the setup back from the knobs (explorer.lab.training.preset_hint); a setting a preset makes (the
    encoder-decoders' weight decay 0) must come back from the knobs as the preset made it, panels closed or open."""
    at = open_page("training")
    for panels_open in (False, True):
        at.session_state["lab_architecture"] = at.session_state["lab_optimizer_panel"] = panels_open
        for name, (about, _) in PRESETS.items():
            at.selectbox(key="lab_preset").set_value(name).run()
            assert not at.exception
            assert at.info[0].value == about, (name, at.info[0].value)      # the hint says so only when the
            assert "Changed from the" not in page_text(at), name           # knobs give back the preset's setup
    at.selectbox(key="lab_preset").set_value("sort (encoder-decoder)").run()
    assert at.number_input(key="lab_weight_decay").value == 0.0            # the knob shows the preset's value
    at.number_input(key="lab_weight_decay").set_value(0.05).run()
    hint = at.info[0].value
    assert hint.startswith("Custom:") and hint.endswith("Changed from the 'sort (encoder-decoder)' preset: decay 0.05.")
    at.selectbox(key="lab_preset").set_value("diverging").run()            # choosing a preset again resets the knob
    assert at.info[0].value == PRESETS["diverging"][0] and at.number_input(key="lab_weight_decay").value == 0.01


def test_compared_runs_are_averaged_over_the_same_steps_however_their_ticks_were_cut():
    """One run ticked 2 steps at a time, the same setup ticked 5 at a time: their history rows differ (one per
    tick), but the compare chart draws both from every step's loss, averaged over the same steps."""
    by_two, by_five = new_run(LabSetup(), "run 1"), new_run(LabSetup(), "run 2")
    for _ in range(23):
        by_two.tick(seconds=0, chunk=2)                          # 46 steps in 23 ticks
    for _ in range(10):
        by_five.tick(seconds=0, chunk=5)                         # 50 steps in 10 ticks
    assert [h["step"] for h in by_two.history][:3] == [2, 4, 6]                 # one history row per tick
    assert [h["step"] for h in by_five.history][:3] == [5, 10, 15]
    figure = compare_figure([by_two, by_five], describe_difference, setting_words)
    assert figure.layout.title.text == f"Compare runs: training loss, mean of every {COMPARE_WINDOW} steps"
    for run, curve in zip((by_two, by_five), figure.data):
        losses = [loss for _, loss in run.losses]
        blocks = [losses[i:i + COMPARE_WINDOW] for i in range(0, len(losses), COMPARE_WINDOW)]
        assert list(curve.x) == [min(len(losses), i + COMPARE_WINDOW) for i in range(0, len(losses), COMPARE_WINDOW)]
        assert list(curve.y) == pytest.approx([sum(b) / len(b) for b in blocks])
    two, five = figure.data
    assert list(two.x) == [10, 20, 30, 40, 46] and list(five.x) == [10, 20, 30, 40, 50]
    assert list(two.y[:4]) == pytest.approx(list(five.y[:4]))   # the same training, the same curve
    assert list(two.customdata[-1]) == [41] and "steps %{customdata[0]}-%{x}: mean loss" in two.hovertemplate


def test_the_compare_chart_says_what_it_plots():
    at = open_page("training")
    for lr in (0.01, 0.02):
        at.session_state["lab_lr"] = lr
        at.run()
        at.button(key="lab_start").click().run()
    figure = figure_titled(at, "Compare runs")
    assert figure["layout"]["title"]["text"] == "Compare runs: training loss, mean of every 10 steps"
    assert figure["layout"]["yaxis"]["title"]["text"] == "training loss (mean over 10 steps)"
    assert "each point is a run's mean training loss over 10 steps (1-10, 11-20, ...)" in page_text(at)


def test_the_lab_says_how_to_share_a_trained_model():
    text = page_text(open_page("training"))
    assert "download its file" in text and "upload the .safetensors file here" in text
