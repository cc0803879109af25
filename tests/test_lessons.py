"""Lessons: ready ones open and every step renders; a teacher's file is checked field by field; a question's answer
is computed from the model."""
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from conftest import APP, page_text
from explorer import lessons, questions
from explorer.questions import Question
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
def test_every_step_of_a_ready_lesson_renders_the_view_it_names(name, n, lesson_hub_cache, monkeypatch):
    from explorer.app import models
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "CACHE_DIR", lesson_hub_cache)         # Pythia's steps, as a server downloaded them
    step = lessons.ready_lessons()[name].steps[n]
    at = open_step(step)
    assert not at.exception, at.exception
    state = at.session_state
    if "text" in step.view:
        assert state["text"] == step.view["text"] and state["view"].name == step.view["model"]
    for key in ("layer", "head", "token"):
        if key in step.view:
            assert state[key] == step.view[key], key
    if step.tab:
        assert state[f"section_{step.page}"] == BY_SLUG[step.page].tab(step.tab)
    for key, value in step.state().items():
        assert state[key] == value
    assert BY_SLUG[step.page].title in page_text(at) or step.page == "home"


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
    (changed(question={"kind": "next-word", "answer": "cat"}), "takes no answer: the model gives it"),
    (changed(question={"kind": "looks-at", "options": ["dog", "cat"]}), "takes no options: the model gives it"),
    (changed(question={"kind": "reads-source"}), "a reads-source question does not fit the attention page"),
    (changed(question={"kind": "biggest-push"}), "questions for that page: next-word, looks-at, knockout"),
    (changed(question={"kind": "choice", "prompt": "Which?", "options": ["a", "b"]}), "needs its right answer"),
    (changed(question={"kind": "choice", "prompt": "Which?", "options": ["a", "b"], "answer": "c"}),
     "needs its right answer, one of its options"),
    (changed(question={"kind": "choice", "options": ["a", "b"], "answer": "a"}), "needs a prompt"),
    (changed(question={"kind": "choice", "prompt": "?", "options": [str(n) for n in range(7)], "answer": "1"}),
     "2 to 6 texts"),
    (changed(question={"kind": "poll", "options": ["only one"]}), "2 to 6 texts"),
    (changed(question={"kind": "poll", "options": ["yes", " yes "]}), "two options are the same"),
    (changed(question={"kind": "poll", "options": ["yes", "x" * 500]}), "longer than 80"),
    (changed(question={"kind": "poll", "options": ["yes", 3]}), "an option should be text"),
    (changed(question={"kind": "poll", "options": ["a", "b"], "answer": "a"}), "a poll has no right answer"),
    (changed(question={"kind": "looks-at", "prompt": "x" * 5000}), "longer than 300"),
    (changed(question={"kind": "looks-at", "word": "cat"}), "only nearest-word, reads-source questions have one"),
    (changed(note=["<script>"]), "note should be text"),
    (changed(extra=1), "fields a lesson does not use: extra"),
])
def test_a_file_that_is_not_a_lesson_gets_a_clear_message(data, said):
    with pytest.raises(lessons.LessonError) as error:
        lessons.parse(data)
    assert said in str(error.value)


def test_an_old_lesson_file_still_loads_and_every_kind_reads_back_as_itself():
    old = {"title": "Before question kinds", "steps": [
        {"page": "prediction", "view": {"model": "tinytales", "text": "the cat sat"},
         "question": {"kind": "next-word", "prompt": "Which word next?", "colour": "ignored, as it always was"}},
        {"page": "attention", "question": {"kind": "next-word"}}]}
    lesson = lessons.parse(json.dumps(old))
    assert [s.question for s in lesson.steps] == [Question("next-word", "Which word next?"), Question("next-word")]
    every = {"title": "every kind", "steps": [
        {"page": "tokenization", "question": {"kind": "token-count", "text": "unbelievably"}},
        {"page": "embedding", "question": {"kind": "nearest-word", "word": "cat"}},
        {"page": "attention", "question": {"kind": "looks-at"}},
        {"page": "residual", "question": {"kind": "lens-layer", "prompt": "When?"}},
        {"page": "attention", "question": {"kind": "knockout"}},
        {"page": "why", "question": {"kind": "biggest-push"}},
        {"page": "encoder-decoder", "question": {"kind": "reads-source", "word": "chat"}},
        {"page": "features", "tab": "steering", "fields": {"steer-by": "neuron", "strength": -2.5},
         "question": {"kind": "steered-word"}},
        {"page": "learning", "view": {"model": "pythia-70m@step512"}, "question": {"kind": "first-right"}},
        {"page": "training", "question": {"kind": "choice", "prompt": "Who?", "options": ["a", "b  c"], "answer": "a"}},
        {"page": "discoveries", "question": {"kind": "poll", "options": ["yes", "no"]}},
        {"page": "class", "question": {"kind": "poll"}}]}
    lesson = lessons.parse(json.dumps(every))
    assert lessons.parse(lesson.to_json()) == lesson
    assert lesson.steps[9].question.options == ("a", "b c")               # kept as the class store keeps an answer
    assert json.loads(lesson.to_json())["steps"][2]["question"] == {"kind": "looks-at"}     # only what it uses
    assert {s.question.kind for s in lesson.steps} | {"next-word"} == set(questions.KINDS)


def test_a_step_that_names_no_sentence_is_asked_about_the_one_the_class_has_on_screen():
    lesson = lessons.parse(json.dumps({"steps": [
        {"page": "tokenization"}, {"page": "home", "view": {"model": "roses", "text": "roses are red"}},
        {"page": "attention", "view": {"text": "violets are blue"}}, {"page": "prediction"}]}))
    assert lesson.reading_at(0, "tinytales", "the cat") == ("tinytales", "the cat")        # what the session shows
    assert lesson.reading_at(1, "tinytales", "the cat") == ("roses", "roses are red")
    assert [lesson.reading_at(n, "tinytales", "the cat") for n in (2, 3)] == [("roses", "violets are blue")] * 2


def test_html_in_a_lesson_stays_text_and_a_missing_title_gets_a_name():
    lesson = lessons.parse(changed(note="<script>alert(1)</script>", view={"text": "<b>the</b> cat"}))
    assert lesson.steps[0].note == "<script>alert(1)</script>" and lesson.steps[0].view["text"] == "<b>the</b> cat"
    assert lessons.parse(json.dumps({"steps": good()["steps"]})).title == "Untitled lesson"


def test_the_ready_lecture_lasts_a_lecture_visits_every_page_and_asks_every_kind_its_models_can_answer():
    lecture = lessons.ready_lessons()["transformers-in-one-lecture"]
    assert lecture.title == "Transformers in one lecture"
    assert len(lecture.steps) >= 20 and all(len(step.note) >= 60 for step in lecture.steps)       # notes read aloud
    # every page but the class's and Watch it learn's: the lecture's models (bundled, downloaded nowhere) were not
    # saved as they learned; the lesson "How a real model learned" walks that page on Pythia
    assert {step.page for step in lecture.steps} == set(BY_SLUG) - {"class", "learning"}
    asked = [step for step in lecture.steps if step.question]
    assert len(asked) >= 8 and len({step.question.kind for step in asked}) >= 5
    for step in asked:
        question = step.question
        if not questions.KINDS[question.kind].needs_model:
            assert questions.ask(question, None, None).options
            continue
        bundle = load_bundled(step.view["model"])
        reading = questions.reading(step.view["model"], bundle, step.view["text"], 64)
        cfg = bundle.model.cfg
        answered = questions.ask(question, reading, questions.place(step.view, cfg.n_layers, cfg.n_heads,
                                                                     len(reading.ids), step.fields))
        assert answered.answer in answered.options and answered.said, step
    guide = " ".join((Path(__file__).resolve().parents[1] / "docs/teaching.md").read_text().split())
    assert f"{len(lecture.steps)} steps through every page" in guide and f"{len(asked)} questions of every kind" in guide


def test_how_a_real_model_learned_walks_pythias_training_steps_and_asks_from_its_checkpoints(lesson_hub_cache,
                                                                                              monkeypatch):
    from explorer.app import classroom, models
    from questions_support import bundle_of, expected_answer
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "CACHE_DIR", lesson_hub_cache)
    lesson = lessons.ready_lessons()["how-a-real-model-learned"]
    assert lesson.title == "How a real model learned" and len(lesson.steps) >= 8
    assert {models.split(step.view["model"])[1] for step in lesson.steps} >= {0, 1000, None}   # None: the final step
    assert "learning" in {step.page for step in lesson.steps}
    asked = [step for step in lesson.steps if step.question and questions.KINDS[step.question.kind].needs_model]
    assert len(asked) >= 2 and {"first-right", "next-word"} <= {step.question.kind for step in asked}
    for step in asked:
        bundle = bundle_of(step.view["model"])
        ids = bundle.tokenizer.encode(step.view["text"])
        answered = classroom.asked(step, "tinytales", "")
        assert answered is not None and answered.said, step
        assert answered.answer == expected_answer(bundle, ids, {**step.view, "fields": step.fields}, step.question)
