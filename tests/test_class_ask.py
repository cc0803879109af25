""""Ask the class": beside every page's link and on every Discoveries card, the view on screen and a question about
it go into the lesson being built; the lesson's table offers the kinds of question that fit each step's page."""
from conftest import open_page, page_text, show_section
from explorer import discoveries, lessons, questions
from explorer.app import classroom
from explorer.registry import BY_SLUG
from explorer.view import escape
from model.checkpoint import load_bundled


def test_ask_the_class_adds_the_view_with_the_question_its_page_and_tab_fit():
    at = open_page("attention", model="tinytales", text="the dog chased the cat because it was hungry", layer=1,
                   head=1, token=6)
    show_section(at, "attention", BY_SLUG["attention"].tab("who-looks"))
    at.button(key="lesson_ask").click().run()
    show_section(at, "attention", BY_SLUG["attention"].tab("what-if"))
    at.button(key="lesson_ask").click().run()
    at.switch_page(BY_SLUG["residual"].file).run()
    at.button(key="lesson_ask").click().run()
    at.switch_page(BY_SLUG["training"].file).run()
    at.button(key="lesson_ask").click().run()
    at.switch_page(BY_SLUG["prediction"].file).run()
    at.button(key="lesson_add").click().run()                     # a view without a question, as before
    assert not at.exception and "Your lesson has 5 steps" in page_text(at)
    steps = at.session_state[classroom.DRAFT]
    assert [(s.page, s.tab, s.question.kind if s.question else None) for s in steps] == [
        ("attention", "who-looks", "looks-at"), ("attention", "what-if", "knockout"), ("residual", "wiring", "lens-layer"),
        ("training", None, "poll"), ("prediction", None, None)]
    assert steps[0].view == {"model": "tinytales", "text": "the dog chased the cat because it was hungry", "layer": 1,
                             "head": 1, "token": 6}
    for slug, kind in questions.SUGGESTED.items():                 # each page's suggestion fits it
        assert slug in questions.KINDS[kind].pages


def test_ask_the_class_on_a_discovery_card_asks_what_the_card_asks_and_the_model_gives_the_cards_answer():
    at = open_page("discoveries")
    at.button(key="discovery_ask_pronoun").click().run()
    at.button(key="discovery_ask_diverging").click().run()
    assert not at.exception
    pronoun, diverging = at.session_state[classroom.DRAFT]
    card = next(c for c in discoveries.discoveries(load_bundled("tinytales"), "tinytales") if c.key == "pronoun")
    assert (pronoun.page, pronoun.tab, pronoun.question.kind, pronoun.question.prompt) == (
        "attention", "who-looks", "looks-at", card.question)
    assert pronoun.view == {"model": "tinytales", "text": card.target.text, "layer": card.target.layer,
                            "head": card.target.head, "token": card.target.token}
    asked = classroom.asked(pronoun, "tinytales", "")
    assert asked.answer == card.answer == "dog"                   # the class is asked what the card found
    assert (diverging.page, diverging.fields, diverging.question.kind) == ("training", {"preset": "diverging"}, "poll")
    assert diverging.question.options == discoveries.LAB_OPTIONS
    lesson = lessons.Lesson("cards", tuple(at.session_state[classroom.DRAFT]))
    assert lessons.parse(lesson.to_json()) == lesson               # a lesson file like any other


def test_the_lesson_table_offers_the_kinds_that_fit_each_page_and_says_when_one_does_not():
    at = open_page("attention", model="tinytales", text="the cats sat on the mats because", layer=1, head=2, token=6)
    at.button(key="lesson_ask").click().run()
    at.switch_page(BY_SLUG["why"].file).run()
    at.button(key="lesson_add").click().run()
    at.switch_page(BY_SLUG["class"].file).run()
    assert at.selectbox(key="class_lesson").value == "mine"
    at.session_state["lesson_editor"] = {"edited_rows": {0: {"question": "knockout"}, 1: {"question": "reads-source"}},
                                         "added_rows": [], "deleted_rows": []}
    at.run()
    problem = "Step 2: a reads-source question does not fit the 8. Why this prediction? page (questions for it: " \
              "next-word, biggest-push, choice, poll)."
    assert escape(problem) in [w.value for w in at.warning]
    [link] = [c.value for c in at.code if "/class?lesson=" in c.value]
    lesson = lessons.from_link(link.split("lesson=", 1)[1])
    assert [s.question.kind if s.question else None for s in lesson.steps] == ["knockout", None]
    at.session_state["lesson_editor"] = {"edited_rows": {0: {"question": ""}, 1: {"question": "biggest-push"}},
                                         "added_rows": [], "deleted_rows": []}
    at.run()
    [link] = [c.value for c in at.code if "/class?lesson=" in c.value]
    lesson = lessons.from_link(link.split("lesson=", 1)[1])
    assert [s.question.kind if s.question else None for s in lesson.steps] == [None, "biggest-push"]
    assert not at.warning


def test_a_question_the_steps_model_cannot_answer_is_not_asked_and_the_teacher_is_told_why():
    from streamlit.testing.v1 import AppTest
    from conftest import APP
    lesson = lessons.parse('{"title": "t", "steps": [{"page": "home", "view": {"model": "translate", "text": '
                           '"the red cat sleeps"}, "question": {"kind": "next-word"}}]}')
    teacher = AppTest.from_file(APP, default_timeout=60)
    teacher.query_params["lesson"] = lessons.as_link(lesson)
    teacher.run()
    teacher.switch_page(BY_SLUG["class"].file).run()
    teacher.button(key="class_start").click().run()
    teacher.button(key="class_show_step").click().run()
    assert not teacher.exception
    assert any(m.endswith(" · step 1 of 1 · 0 students present") for m in teacher.markdown.values)   # the class line
    assert ("This step's question is not asked: A next-word question needs a decoder-only model; "
            "translate is an encoder-decoder.") in [c.value.replace("\\", "") for c in teacher.caption]
    assert not teacher.get("arrow_vega_lite_chart") and not [b for b in teacher.button if b.key == "class_reveal"]


def test_a_steps_question_is_answered_once_for_the_teacher_and_every_student(monkeypatch):
    from streamlit.testing.v1 import AppTest
    from conftest import APP
    calls = []
    monkeypatch.setattr(questions, "ask", lambda *args, real=questions.ask: calls.append(args) or real(*args))
    lesson = lessons.parse('{"title": "t", "steps": [{"page": "attention", "tab": "who-looks", "view": {"model": '
                           '"tinytales", "text": "the fox hid under the rug because", "layer": 1, "head": 2}, '
                           '"question": {"kind": "looks-at"}}]}')

    def session(**query) -> AppTest:
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params.update(query)
        at.run()
        return at.switch_page(BY_SLUG["class"].file).run()
    teacher = session(lesson=lessons.as_link(lesson))
    teacher.button(key="class_start").click().run()
    code = teacher.session_state[classroom.CODE]
    students = []
    for _ in range(3):
        student = session(join=code)
        student.button(key="class_join").click().run()
        students.append(student)
    teacher.button(key="class_show_step").click().run()
    for student in students:
        student.run()
        assert student.radio(key="class_answer_0").options            # each is asked ...
    teacher.run()
    assert len(calls) == 1                                              # ... what the model answered once
