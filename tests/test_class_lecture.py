"""The ready lecture led as a class in AppTest: a teacher and ten students, every question answered by every student,
on tinytales (the lecture as written), and with three students on roses and a model trained in the lab (the lecture's tinytales steps moved to
that model, where its questions can be asked). At every reveal the model's answer each screen shows is the one this
test recomputes from the model's own forward pass (tests/questions_support.py), each student's guess is marked
right or not, the teacher sees the share right; the teacher's summary table and the CSV the app serves are
checked against the answers the students sent; each student sees their own summary at the end."""
import csv
import io
import json
import re
from collections import Counter
from functools import lru_cache

import pytest
from streamlit.testing.v1 import AppTest

from conftest import APP, page_text, plotly_figures
from explorer import lessons, questions
from explorer.app import classroom
from explorer.classroom import summary
from explorer.numbers import percent
from explorer.registry import BY_SLUG
from explorer.view import escape
from model.checkpoint import load_bundled
from questions_support import expected_answer
from veil_support import gives_away, plain, pointed_at, ranks_first

LECTURE = lessons.ready_lessons()["transformers-in-one-lecture"]
NAMES = ("Ada", "Bob", "", "Chen", "", "Dara", "Eli", "", "Femi", "Gus")        # three stay anonymous
LAB = "lab: run 1"
SENTENCE = "roses are red violets are blue"
CHARTED = {"next-word", "looks-at", "nearest-word", "reads-source"}     # kinds whose answer a chart ranks first


@lru_cache
def lab_model():
    from explorer.lab.training import WALKTHROUGH, new_run
    run = new_run(WALKTHROUGH, "run 1")
    run.trainer.step(60)
    return run.bundle()


def lecture_on(model: str) -> lessons.Lesson:
    """The lecture with its tinytales steps on `model`, reading roses' line (every other step as written)."""
    if model == "tinytales":
        return LECTURE
    raw = json.loads(LECTURE.to_json())
    for step in raw["steps"]:
        if step.get("view", {}).get("model") == "tinytales":
            step["view"].update(model=model, text=SENTENCE)
    return lessons.parse(json.dumps(raw))


def bundle_of(name: str):
    return lab_model() if name == LAB else load_bundled(name)


def app(model: str, **query) -> AppTest:
    """A new session on the class page (a model trained in the lab is in it: the file every student uploads)."""
    at = AppTest.from_file(APP, default_timeout=90)
    if model == LAB:
        at.session_state["trained_models"] = {LAB: lab_model()}
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    return at.switch_page(BY_SLUG["class"].file).run()


def reveal_sentence(lecture: lessons.Lesson, index: int, bundle, ids: list[int], view: dict) -> str:
    """What the reveal says the model did (its computed sentence), asked as the class box asks it."""
    step = lecture.steps[index]
    if not questions.KINDS[step.question.kind].needs_model:
        return ""
    reading = questions.reading(view["model"], bundle, view["text"], 64)
    cfg = bundle.model.cfg
    return questions.ask(step.question, reading, questions.place(step.view, cfg.n_layers, cfg.n_heads,
                                                                  len(reading.ids), step.fields)).said


def reveal_text(kind: str, answer: str | None) -> str:
    return {"poll": "**A poll:** there is no right answer.", "choice": f"**The answer:** “{escape(answer or '')}”."
            }.get(kind, f"**The model's answer:** “{escape(answer or '')}”" + ("." if kind == "token-count" else " ("))


def test_ten_students_answer_every_question_of_the_lecture_and_the_summary_is_what_they_sent(monkeypatch):
    lead_the_lecture("tinytales", monkeypatch)


@pytest.mark.parametrize("model", ["roses", LAB])
def test_the_lecture_moved_onto_roses_and_a_lab_model_is_answered_by_that_model(model, monkeypatch):
    lead_the_lecture(model, monkeypatch, names=NAMES[:3])           # the model answers: three students tell it


def lead_the_lecture(model: str, monkeypatch, names: tuple[str, ...] = NAMES) -> None:
    """The class on the lecture (on `model`), every question answered by a student of each of `names` ("" stays
    anonymous), every reveal and summary checked."""
    served = []
    monkeypatch.setattr(summary, "csv_of", lambda table, real=summary.csv_of: served.append(real(table)) or served[-1])
    lecture = lecture_on(model)
    teacher = app(model)
    teacher.session_state[classroom.DRAFT] = list(lecture.steps)
    teacher.session_state["lesson_title"] = lecture.title
    teacher.run()
    teacher.selectbox(key="class_lesson").set_value("mine").run()
    teacher.button(key="class_start").click().run()
    code = teacher.session_state[classroom.CODE]
    students = []
    for name in names:
        at = app(model, join=code)
        at.text_input(key="class_join_name").set_value(name).run()
        at.button(key="class_join").click().run()
        assert not at.exception and at.session_state[classroom.ROLE] == "student"
        students.append(at)
    teacher.button(key="class_show_step").click().run()
    sent: dict[int, dict[str, str]] = {}               # step -> seat -> answer
    right: dict[int, str | None] = {}
    for index, step in enumerate(lecture.steps):
        if index:
            teacher.button(key="class_next").click().run()
        assert not teacher.exception, (index, teacher.exception)
        if step.question is None:
            continue
        view = {"model": model if step.view.get("model") != "translate" else "translate", **step.view,
                "fields": step.fields}
        bundle = bundle_of(view["model"])
        ids = bundle.tokenizer.encode(view["text"])[-min(bundle.model.cfg.max_len, 64):]
        answer = expected_answer(bundle, ids, view, step.question)
        sent[index], right[index] = {}, answer
        for n, student in enumerate(students):
            student.run()                                               # follows the teacher to the step
            assert not student.exception and student.session_state[classroom.STEP] == index, (index, n)
            radio = student.radio(key=f"class_answer_{index}")
            options = [re.sub(r"\\(.)", r"\1", label) for label in radio.options]     # shown escaped
            guess = options[(n + index) % len(options)]
            radio.set_value(guess).run()
            student.button(key="class_send").click().run()
            sent[index][student.session_state[classroom.SEAT]] = guess
        teacher.run()
        counts = Counter(sent[index].values())
        assert classroom.store().tally(code, index) == counts
        assert any(f"**{len(students)} of {len(students)}** answered" in m
                   for m in teacher.markdown.values)
        said = reveal_sentence(lecture, index, bundle, ids, view)
        count = int(answer) if step.question.kind == "token-count" else None
        veiled = {}
        page = BY_SLUG[step.page].file
        for who, at in (("the teacher", teacher), ("a student", students[0])):    # guess first: nothing gives it away
            veiled[who] = plotly_figures(at.switch_page(page).run())
            away = gives_away(veiled[who], [page_text(at)], answer, said, count)
            assert not away, (index, step.question.kind, who, away)
        teacher.button(key="class_reveal").click().run()
        if questions.KINDS[step.question.kind].needs_model:       # then see: the veiled charts are back, on each screen
            for who, at in (("the teacher", teacher), ("a student", students[0])):
                figures = plotly_figures(at.switch_page(page).run())
                assert len(figures) > len(veiled[who]), (index, step.question.kind, who)
                if step.question.kind in CHARTED:         # the chart points at the answer (and, on tinytales, ranks it first)
                    assert any(plain(spot) == plain(answer) for spot in pointed_at(figures)), \
                        (index, step.question.kind, who, pointed_at(figures))
                    assert model != "tinytales" or any(ranks_first(f, answer) for f in figures), (index, who)
        shown = page_text(teacher)
        assert reveal_text(step.question.kind, answer) in shown, (index, step.question.kind)
        if answer is not None:
            share = f"{counts[answer]} of {len(students)} right ({percent(counts[answer] / len(students))})"
            assert share in shown, (index, share)
        for student in students:
            student.run()
            text = page_text(student)
            guess = sent[index][student.session_state[classroom.SEAT]]
            assert reveal_text(step.question.kind, answer) in text, (index, step.question.kind)
            assert f"**Your guess:** “{escape(guess)}”" + (" — right!" if guess == answer else ".") in text
    assert len(sent) >= 8
    for student, name in zip(students, names):                           # the last step: each student's own summary
        text = page_text(student)
        right_count = sum(sent[i][student.session_state[classroom.SEAT]] == right[i] for i in sent if right[i])
        assert f"**Your answers in this class:** {right_count} of {sum(1 for i in sent if right[i])} revealed right." \
            in text
    teacher.switch_page(BY_SLUG["class"].file).run()                   # the teacher's summary, on the class page
    assert not teacher.exception
    table = next(frame.value for frame in teacher.dataframe if "most common wrong answer" in frame.value.columns)
    assert list(table["step"]) == [i + 1 for i in sorted(sent)]
    assert list(table["answered"]) == [len(sent[i]) for i in sorted(sent)]
    for i, row in zip(sorted(sent), table.itertuples()):
        counts = Counter(sent[i].values())
        if right[i] is None:
            assert row.right == "(poll)"
            continue
        assert row.right == str(counts[right[i]])
        wrong = {a: c for a, c in counts.items() if a != right[i]}
        assert (wrong.get(row._6, 0) == max(wrong.values())) if wrong else row._6 == ""
    rows = list(csv.DictReader(io.StringIO(served[-1])))
    seats = sorted(classroom.store().roster(code))
    who = {at.session_state[classroom.SEAT]: name or f"student {seats.index(at.session_state[classroom.SEAT]) + 1}"
           for at, name in zip(students, names)}
    expected = sorted((str(i + 1), who[seat], answer, right[i] or "(poll)",
                       "" if right[i] is None else "yes" if answer == right[i] else "no")
                      for i in sent for seat, answer in sent[i].items())
    assert sorted((r["step"], r["student"], r["answer"], r["right answer"], r["right"]) for r in rows) == expected
    assert len(rows) == len(students) * len(sent) and not any(r["student"] == "" for r in rows)
