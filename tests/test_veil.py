"""Guess first, then see: while a question is open, no screen shows what answers it (explorer/veil.py).

The lecture's every question is checked on the teacher's and a student's screen in tests/test_class_lecture.py, and
in Chromium on the projector and two phones in tests/test_browser_lessons.py. Here: the table of parts agrees with
the pages, a student who joins while a question is open sees it veiled, and a student alone guesses before seeing.
"""
import re
from pathlib import Path

from conftest import ROOT, page_text, plotly_figures
from explorer import lessons, questions
from explorer.app import classroom
from explorer.registry import BY_SLUG
from explorer.veil import PARTS, VEILS, veil_for
from model.checkpoint import load_bundled
from questions_support import expected_answer
from test_class import class_page, on_page, student
from veil_support import gives_away, ranks_first


def test_every_kind_the_model_answers_hides_parts_that_pages_draw():
    pages = "\n".join(path.read_text() for path in (ROOT / "pages").glob("*.py"))
    drawn = set(re.findall(r'part="([a-z-]+)"', pages)) | set(re.findall(r'(?:veiled|veil_box|say)\([^)]*?"([a-z-]+)"\)?',
                                                                        pages))
    for name, kind in questions.KINDS.items():
        veil = veil_for(name)
        assert (veil is not None) == kind.needs_model, name          # a choice or a poll: the teacher's own answer
        if veil is not None:
            assert veil.parts <= set(PARTS) and veil.parts <= drawn, (name, veil.parts - drawn)
    assert set(PARTS) == set().union(*VEILS.values())
    assert "at the reveal" in veil_for("next-word").words("forecast")
    assert "when you check your guess" in veil_for("next-word", alone=True).words("forecast")


def reading(step, lesson, index):
    model, text = lesson.reading_at(index, "tinytales", "")
    bundle = load_bundled(model)
    ids = bundle.tokenizer.encode(text)[-min(bundle.model.cfg.max_len, 64):]
    return bundle, ids, {"model": model, "text": text, **step.view, "fields": step.fields}


def test_alone_a_student_guesses_before_the_page_shows_the_models_next_word():
    lesson = lessons.ready_lessons()["from-words-to-a-forecast"]
    index = next(n for n, s in enumerate(lesson.steps) if s.question)
    step = lesson.steps[index]
    bundle, ids, view = reading(step, lesson, index)
    answer = expected_answer(bundle, ids, view, step.question)
    at = class_page()
    at.selectbox(key="class_lesson").set_value("from-words-to-a-forecast").run()
    at.button(key="class_alone").click().run()
    for _ in range(index):
        at.button(key="class_next").click().run()
    assert not at.exception and on_page(at) == step.page == "prediction"
    hidden = plotly_figures(at)
    assert not gives_away(hidden, [page_text(at)], answer)
    assert "when you check your guess" in page_text(at) and not at.metric          # the favourite is not named
    radio = at.radio(key=f"alone_answer_{index}")
    assert answer in [re.sub(r"\\(.)", r"\1", o) for o in radio.options]
    assert at.button(key="alone_check").disabled                                    # a guess first
    wrong = next(o for o in radio.options if re.sub(r"\\(.)", r"\1", o) != answer)
    radio.set_value(wrong).run()
    at.button(key="alone_check").click().run()
    text = page_text(at)
    assert f"**The model's answer:** “{answer}”" in text and "**Your guess:**" in text and " — right!" not in text
    shown = plotly_figures(at.switch_page(BY_SLUG[step.page].file).run())   # (AppTest: back on the step's page)
    assert len(shown) > len(hidden) and any(ranks_first(f, answer) for f in shown)
    assert at.metric and f"“{answer}”" in at.metric[2].value                         # the favourite, at last
    at.button(key="class_previous").click().run()                                   # a checked guess stays checked
    at.button(key="class_next").click().run()
    assert any(ranks_first(f, answer) for f in plotly_figures(at.switch_page(BY_SLUG[step.page].file).run()))


def test_a_student_who_joins_while_a_question_is_open_sees_it_veiled_until_the_reveal():
    lesson = lessons.ready_lessons()["attention-in-ten-minutes"]
    index = next(n for n, s in enumerate(lesson.steps) if s.question)           # what-if tab: which word next?
    step = lesson.steps[index]
    teacher = class_page()
    teacher.selectbox(key="class_lesson").set_value("attention-in-ten-minutes").run()
    teacher.button(key="class_start").click().run()
    code = teacher.session_state[classroom.CODE]
    teacher.button(key="class_show_step").click().run()
    for _ in range(index):
        teacher.button(key="class_next").click().run()
    bundle, ids, view = reading(step, lesson, index)
    answer = expected_answer(bundle, ids, view, step.question)
    late = student(code, "Late")                                   # joins with the question open: on its step
    page = BY_SLUG[step.page].file
    for at in (teacher.switch_page(page).run(), late.switch_page(page).run()):
        assert not at.exception and at.session_state[classroom.VEILED] == index
        assert not gives_away(plotly_figures(at), [page_text(at)], answer)
        assert "Guess first, then see" in page_text(at)
    teacher.button(key="class_reveal").click().run()
    for at in (teacher.switch_page(page).run(), late.switch_page(page).run()):
        assert "Guess first, then see" not in page_text(at)
        assert any(ranks_first(f, answer) for f in plotly_figures(at))                # the what-if's bars are back
