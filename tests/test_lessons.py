"""Lessons: ready ones open and every step renders; a teacher's file is checked field by field; a question's answer
is computed from the model."""
import json

import pytest
import torch
from streamlit.testing.v1 import AppTest

from conftest import APP, page_text
from explorer import lessons
from explorer.registry import BY_SLUG
from model.checkpoint import load_bundled


def open_step(step: lessons.LessonStep) -> AppTest:
    """Run the app on a lesson step as its link would open it, with the page's own fields set (AppTest opens the
    home page first, so the tab is set as a click on it would)."""
    at = AppTest.from_file(APP, default_timeout=60)
    query = step.query()
    if "section" in query:
        at.session_state[f"section_{step.page}"] = query.pop("section")
    for key, value in query.items():
        at.query_params[key] = value
    for key, value in step.state().items():
        at.session_state[key] = value
    at.run()
    if step.page != "home":
        at.switch_page(BY_SLUG[step.page].file).run()
    return at


def test_three_ready_lessons_ship_and_read_back_as_themselves():
    ready = lessons.ready_lessons()
    assert len(ready) >= 3
    assert {lesson.title for lesson in ready.values()} >= {"Attention in ten minutes", "How a transformer learns"}
    for lesson in ready.values():
        assert lessons.parse(lesson.to_json()) == lesson
        assert any(step.question for step in lesson.steps) and all(step.note for step in lesson.steps)


@pytest.mark.parametrize("name, n", [(name, n) for name, lesson in lessons.ready_lessons().items()
                                     for n in range(len(lesson.steps))])
def test_every_step_of_a_ready_lesson_renders_the_view_it_names(name, n):
    step = lessons.ready_lessons()[name].steps[n]
    at = open_step(step)
    assert not at.exception, at.exception
    state = at.session_state
    if "text" in step.view:
        assert state["text"] == step.view["text"] and state["model"] == step.view["model"]
    for key in ("layer", "head", "token"):
        if key in step.view:
            assert state[key] == step.view[key], key
    if step.tab:
        assert state[f"section_{step.page}"] == BY_SLUG[step.page].tab(step.tab)
    for key, value in step.state().items():
        assert state[key] == value
    assert BY_SLUG[step.page].title in page_text(at) or step.page == "home"


@pytest.mark.parametrize("text, position", [("the cat sat on the mat because", 6), ("the dog chased the", 3)])
def test_a_next_word_question_offers_the_models_likeliest_words_and_its_top_guess_is_the_answer(text, position):
    bundle = load_bundled("tinytales")
    ids = bundle.tokenizer.encode(text)
    asked = lessons.next_word_question(bundle, ids, position, "Which word?")
    probs = torch.softmax(bundle.model.run(ids)["logits"][0, position].double(), -1)
    top = probs.topk(lessons.OPTIONS)
    vocab = bundle.tokenizer.vocab
    assert asked.answer == vocab[int(probs.argmax())]
    assert list(asked.options) == sorted(vocab[int(i)] for i in top.indices)            # order gives nothing away
    assert asked.probabilities[asked.answer] == pytest.approx(float(top.values[0]), rel=1e-9)


def good() -> dict:
    return {"title": "t", "steps": [{"page": "attention", "tab": "who-looks", "view": {"layer": 1}}]}


def changed(**steps) -> bytes:
    lesson = good()
    lesson["steps"][0].update(steps)
    return json.dumps(lesson).encode()


@pytest.mark.parametrize("data, said", [
    (b"\x80\x81 not json", "not JSON"),
    (b"[1, 2]", "needs a title and a list of steps"),
    (json.dumps({"title": "t", "steps": []}).encode(), "1 to 60 steps"),
    (json.dumps({"title": "t", "steps": [good()["steps"][0]] * 61}).encode(), "1 to 60 steps"),
    (b" " * (lessons.MAX_BYTES + 1), "larger than a lesson"),
    (json.dumps({"title": 5, "steps": good()["steps"]}).encode(), "The title should be text"),
    (changed(page="nowhere"), "names no page"),
    (changed(page=["attention"]), "names no page"),
    (changed(tab="what-is"), "has no tab 'what-is'"),
    (changed(view={"layer": "1; drop"}), "layer should be a whole number"),
    (changed(view={"layer": -1}), "layer should be a whole number"),
    (changed(view={"layer": True}), "layer should be a whole number"),
    (changed(view={"secret": 1}), "has no field 'secret'"),
    (changed(view={"text": "x" * 5000}), "longer than"),
    (changed(fields={"colour": "red"}), "fields are what-if"),
    (changed(question={"kind": "essay"}), "a question needs a kind"),
    (changed(note=["<script>"]), "note should be text"),
    (changed(extra=1), "fields a lesson does not use: extra"),
])
def test_a_file_that_is_not_a_lesson_gets_a_clear_message(data, said):
    with pytest.raises(lessons.LessonError) as error:
        lessons.parse(data)
    assert said in str(error.value)


def test_html_in_a_lesson_stays_text_and_a_missing_title_gets_a_name():
    lesson = lessons.parse(changed(note="<script>alert(1)</script>", view={"text": "<b>the</b> cat"}))
    assert lesson.steps[0].note == "<script>alert(1)</script>" and lesson.steps[0].view["text"] == "<b>the</b> cat"
    assert lessons.parse(json.dumps({"steps": good()["steps"]})).title == "Untitled lesson"
