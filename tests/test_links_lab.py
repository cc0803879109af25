"""A link to the training lab reopens its setup: the preset, then every knob changed from it (explorer/lab/link.py).
A knob left at its preset's value is not written; nonsense falls back to the preset's value with a notice."""
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st_

from conftest import open_page, page_text
from explorer import lessons
from explorer.app.lab import SETUP_WIDGETS
from explorer.lab import link
from explorer.lab.training import PRESETS, preset_hint
from explorer.registry import LAB

# Every knob changed from the "tales" preset, as a teacher would set them: (field, link text, widget value)
TALES = "tales"
CHANGED = [("task", "reverse", "reverse"), ("tokenizer", "char", "char"), ("probe", "3 1 2 > 2 1 3", "3 1 2 > 2 1 3"),
           ("n-layers", "3", 3), ("n-heads", "2", 2), ("d-model", "48", 48), ("d-ff", "96", 96),
           ("max-len", "24", 24), ("pos", "learned", "learned"), ("norm", "rms", "rms"),
           ("norm-position", "post", "post"), ("activation", "relu", "relu"), ("embed-scale", "1", True),
           ("optimizer", "sgd", "sgd"), ("lr", "0.0005", 0.0005), ("batch-size", "8", 8), ("warmup", "0", 0),
           ("schedule", "constant", "constant"), ("steps", "700", 700), ("grad-clip", "0.5", 0.5),
           ("label-smoothing", "0.1", 0.1), ("weight-decay", "0.05", 0.05)]


def hint(at) -> str:
    [info] = [i.value for i in at.info if i.icon == ":material/lightbulb:"]
    return info


def expected_setup(preset: str, **knobs):
    """The setup a link should open: the preset's, with these knobs (by setup key) over it."""
    base = PRESETS[preset][1]
    model = {k: knobs.pop(k) for k in list(knobs) if k in link.MODEL_KEYS}
    train = {k: knobs.pop(k) for k in list(knobs) if k in link.TRAIN_KEYS}
    return replace(base, model={**base.model, **model}, train=replace(base.train, **train), **knobs)


def test_the_link_names_every_setup_knob_but_the_students_own_text():
    keys = {key for _, key in LAB.fields}
    assert keys == set(SETUP_WIDGETS) - {"lab_text"} and set(LAB.linked) == {name for name, _ in LAB.fields}
    assert {name for name, *_ in CHANGED} == set(link.KNOBS)           # this file changes every one of them


def test_a_link_with_a_preset_and_changed_knobs_reopens_every_knob_and_the_custom_hint():
    at = open_page("training", preset=TALES, **{name: text for name, text, _ in CHANGED})
    assert not at.exception and not [w for w in at.warning if "does not offer" in w.value]
    assert at.selectbox(key="lab_preset").value == TALES
    for name, text, value in CHANGED:
        assert at.session_state[LAB.field(name)] == value, name
        assert at.query_params[name] == text, name                      # and the page's own URL says so again
    assert at.radio(key="lab_task").value == "reverse" and at.text_input(key="lab_probe").value == "3 1 2 > 2 1 3"
    setup = expected_setup(TALES, **{name.replace("-", "_"): value for name, _, value in CHANGED})
    assert hint(at) == preset_hint(setup, TALES)
    assert hint(at).startswith("Custom: trains a model of 3 layers, 2 heads, d_model 48 on reversing lists of digits")
    assert "lr 0.0005" in hint(at) and "steps 700" in hint(at)


def test_one_changed_knob_is_the_only_knob_in_the_url_and_reopens_with_its_hint():
    at = open_page("training", preset="sort (encoder-decoder)", **{"weight-decay": "0.05"})
    assert not at.exception
    assert at.session_state["lab_weight_decay"] == 0.05               # its panel is closed: the knob keeps it
    lab_fields = {name for name in at.query_params if name in dict(LAB.fields)}
    assert lab_fields == {"preset", "weight-decay"}                  # every other knob equals its preset's value
    assert hint(at).endswith("Changed from the 'sort (encoder-decoder)' preset: decay 0.05.")


def test_a_knob_set_back_to_its_presets_value_leaves_the_url():
    at = open_page("training", preset=TALES, **{"n-layers": "3"})
    assert at.query_params["n-layers"] == "3"
    at.session_state["lab_n_layers"] = PRESETS[TALES][1].model["n_layers"]         # as the knob would, set back
    at.run()
    assert "n-layers" not in at.query_params and at.query_params["preset"] == TALES
    assert hint(at) == PRESETS[TALES][0]                             # the preset, as itself
    assert link.in_link({"preset": TALES, **{n: v for n, v in link.preset_fields(TALES).items()}}) == {"preset": TALES}


@pytest.mark.parametrize("name, nonsense", [
    ("n-layers", "99"), ("n-layers", "-1"), ("n-heads", "2.5"), ("d-model", "1e9"), ("steps", "1e400"),
    ("lr", "nan"), ("lr", "inf"), ("lr", "0"), ("lr", "5"), ("warmup", "abc"), ("grad-clip", "-1"),
    ("label-smoothing", "0.95"), ("task", "<script>alert(1)</script>"), ("pos", "rotary"), ("optimizer", "adam"),
    ("embed-scale", "maybe"), ("batch-size", "9" * 60), ("weight-decay", "NaN")])
def test_nonsense_in_a_lab_link_falls_back_to_the_presets_value_with_a_notice(name, nonsense):
    at = open_page("training", preset=TALES, **{name: nonsense, "d-ff": "96"})
    assert not at.exception
    assert at.session_state[LAB.field(name)] == link.preset_fields(TALES)[name]
    assert at.session_state["lab_d_ff"] == 96                              # the link's other knob still applies
    assert name not in at.query_params and at.query_params["d-ff"] == "96"
    assert f"set the lab's {name} to a value the lab does not offer" in page_text(at)
    assert hint(at).endswith("Changed from the 'tales' preset: d_ff 96.")  # the one knob that differs


def test_a_nonsense_preset_opens_the_first_preset_and_its_knobs_still_apply():
    at = open_page("training", preset="<b>nope</b>", **{"n-layers": "3"})
    assert not at.exception and at.selectbox(key="lab_preset").value == next(iter(PRESETS))
    assert at.session_state["lab_n_layers"] == 3
    assert "set the lab's preset to a value the lab does not offer" in page_text(at)


def test_a_link_without_a_preset_opens_the_first_and_a_plain_visit_writes_it():
    at = open_page("training")
    at.run()
    assert {n for n in at.query_params if n in dict(LAB.fields)} == {"preset"}
    assert at.query_params["preset"] == next(iter(PRESETS))


def test_your_own_text_never_goes_into_the_link():
    at = open_page("training", task="text")
    assert not at.exception and at.radio(key="lab_task").value == "text"
    at.text_area(key="lab_text").input("my secret diary " * 50).run()
    assert at.query_params["task"] == "text" and "secret" not in "".join(at.query_params.values())
    assert "a link to this page carries the preset and the knobs, never the text" in page_text(at)


def test_a_lesson_step_on_the_lab_carries_the_preset_and_the_changed_knobs_only():
    fields = {LAB.field(name): value for name, value in {"preset": TALES, **link.preset_fields(TALES)}.items()}
    fields.update(lab_n_layers=3, lab_lr=0.0005, lab_embed_scale=True, lab_text="private")   # as add_this_view reads
    step = lessons.step_from_view("training", {"model": "tinytales"}, None, fields)
    assert step.fields == {"preset": TALES, "n-layers": 3, "lr": 0.0005, "embed-scale": True}
    lesson = lessons.Lesson(title="lab", steps=(step,))
    assert lessons.parse(lesson.to_json()) == lesson and lessons.from_link(lessons.as_link(lesson)) == lesson
    with pytest.raises(lessons.LessonError, match="short text, a number or true/false"):
        lessons.parse('{"title": "t", "steps": [{"page": "training", "fields": {"lr": [1]}}]}')


def test_walking_a_lesson_step_on_the_lab_opens_its_preset_with_its_knobs_over_it():
    from explorer.app import classroom
    lesson = lessons.Lesson(title="lab", steps=(
        lessons.LessonStep(page="attention", fields={"what-if": "mask"}),
        lessons.LessonStep(page="training", fields={"preset": TALES, "n-layers": 3, "lr": 0.0005, "steps": 10 ** 9})))
    at = open_page("class")
    at.session_state["lab_n_heads"] = 1                        # the student's own fiddling, before the step
    at.session_state[classroom.LESSON] = lesson.to_json()
    at.session_state[classroom.ROLE] = "alone"
    at.session_state[classroom.PENDING] = (1, lesson.steps[1])
    at.run()
    assert not at.exception and at.session_state["_page"] == "training"
    state = at.session_state
    assert state["lab_preset"] == TALES and state["lab_n_layers"] == 3 and state["lab_lr"] == 0.0005
    assert state["lab_n_heads"] == PRESETS[TALES][1].model["n_heads"]     # the preset's, not the leftover
    assert state["lab_steps"] == PRESETS[TALES][1].train.steps             # a step count it does not offer: preset's


LAB_VALUES = st_.one_of(st_.text(max_size=40), st_.integers(-10**12, 10**12).map(str),
                        st_.floats(allow_nan=True, allow_infinity=True).map(repr),
                        st_.sampled_from(["NaN", "-inf", "1e999", "", "0x10", "1_000", " 3 ", "True", "None", "2.0"]))


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(fields=st_.dictionaries(st_.sampled_from(["preset", *link.KNOBS]), LAB_VALUES, max_size=6))
def test_any_lab_link_opens_a_setup_the_knobs_offer_and_starts_nothing(fields):
    at = open_page("training", **fields)
    assert not at.exception, at.exception
    state = at.session_state
    assert state["lab_preset"] in PRESETS and not state["lab_runs"]
    assert "lab_running" not in state or not state["lab_running"]     # a link never starts training
    for name in link.KNOBS:                                           # every knob holds a value its widget offers
        assert link.check(name, state[LAB.field(name)]) == state[LAB.field(name)], name
