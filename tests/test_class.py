"""A live class in AppTest: a teacher and several students in one process share the server's class store."""
import pytest
import torch
from streamlit.testing.v1 import AppTest

from bench.apptest import fragment_ids, run_fragment
from conftest import APP, page_text
from explorer import lessons, questions
from explorer.app import classroom
from explorer.app.styles import BODY_TEXT_PX, PRESENTER_CSS, PRESENTER_TEXT_PX
from explorer.classroom.store import WrongKey
from explorer.registry import BY_SLUG
from explorer.numbers import percent
from explorer.view import escape
from model.checkpoint import load_bundled

LESSON = lessons.ready_lessons()["attention-in-ten-minutes"]
QUESTION = next(n for n, s in enumerate(LESSON.steps) if s.question)


def class_page(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    return at.switch_page(BY_SLUG["class"].file).run()


def on_page(at: AppTest) -> str:
    return at.session_state["_page"] or "home"          # the default page has an empty path


def teacher() -> AppTest:
    at = class_page()
    at.selectbox(key="class_lesson").set_value("attention-in-ten-minutes").run()
    at.button(key="class_start").click().run()
    assert not at.exception and at.session_state[classroom.ROLE] == "teacher"
    return at


def student(code: str, name: str = "") -> AppTest:
    at = class_page(join=code)
    assert at.text_input(key="class_join_code").value == code        # the link fills in the code
    at.text_input(key="class_join_name").set_value(name).run()
    at.button(key="class_join").click().run()
    return at


def test_students_join_with_the_code_and_follow_the_teachers_next_and_previous():
    t = teacher()
    code = t.session_state[classroom.CODE]
    assert on_page(t) == "class"                       # the code, its link and QR code stay up while the room joins
    assert any(m.value == f"# {code}" for m in t.markdown) and len(t.get("image")) == 2   # the join link's QR code,
                                                                # and the second screen's (behind its button)
    assert classroom.join_link(code) in [c.value for c in t.code]
    students = [student(code, name) for name in ("Ada", "<b>Bob</b>", "")]
    for s in students:
        assert not s.exception and s.session_state[classroom.ROLE] == "student" and on_page(s) == LESSON.steps[0].page
        assert s.query_params["join"] == code and s.query_params["seat"]          # a reload finds the seat
        assert classroom.KEY not in s.session_state                                          # no teacher key
    assert classroom.store().names(code) == ["<b>Bob</b>", "Ada"] and classroom.store().present(code) == 3
    t.run()
    assert f"**3** students present: {escape('<b>Bob</b>')}, Ada" in page_text(t)       # names as plain text
    t.button(key="class_show_step").click().run()
    assert not t.exception and on_page(t) == LESSON.steps[0].page and classroom.store().state(code).step == 0
    assert "Show the join code and QR code" in [link.proto.label for link in t.get("page_link")]   # for latecomers
    t.button(key="class_next").click().run()
    step = LESSON.steps[1]
    assert on_page(t) == step.page and t.session_state[f"section_{step.page}"] == BY_SLUG[step.page].tab(step.tab)
    for s in students:
        s.run()                                                    # the student's poll
        assert on_page(s) == step.page and s.session_state["text"] == step.view["text"]
        assert s.session_state["layer"] == step.view["layer"] and s.session_state["head"] == step.view["head"]
        assert s.session_state[f"section_{step.page}"] == BY_SLUG[step.page].tab(step.tab)
    t.button(key="class_previous").click().run()
    students[0].run()
    assert classroom.store().state(code).step == 0 and on_page(students[0]) == LESSON.steps[0].page


def test_a_students_poll_follows_the_teacher_with_one_full_run_and_an_idle_poll_runs_none():
    """As on a server: the polling fragment runs alone each second (tests above drive the full run, since AppTest's
    run_every never ticks); when the teacher moved, it asks for exactly one full run, on the step's page."""
    t = teacher()
    code = t.session_state[classroom.CODE]
    s = student(code, "Ada")
    [poll] = fragment_ids(s)
    assert run_fragment(s, poll) == 0 and on_page(s) == LESSON.steps[0].page          # nobody moved
    for index in (1, 2):                       # 0 -> 1 opens another page; 1 -> 2 stays on the attention page
        t.button(key="class_next").click().run()
        step = LESSON.steps[index]
        assert run_fragment(s, poll) == 1, index
        assert not s.exception and s.session_state[classroom.STEP] == index and on_page(s) == step.page
        assert s.session_state["text"] == step.view["text"] and s.session_state["head"] == step.view["head"]
        assert s.session_state[f"section_{step.page}"] == BY_SLUG[step.page].tab(step.tab)
        assert s.query_params["join"] == code and s.query_params["seat"] == s.session_state[classroom.SEAT]
        assert run_fragment(s, poll) == 0                                             # followed: idle again
    s.toggle(key=classroom.FOLLOW_TOGGLE).set_value(False).run()
    t.button(key="class_next").click().run()
    assert run_fragment(s, poll) == 0 and s.session_state[classroom.STEP] == 2                # not following: stays


def test_a_student_explores_alone_and_comes_back_with_one_click():
    t = teacher()
    code = t.session_state[classroom.CODE]
    s = student(code)
    s.toggle(key=classroom.FOLLOW_TOGGLE).set_value(False).run()
    t.button(key="class_next").click().run()
    s.run()
    assert s.session_state[classroom.STEP] == 0 and classroom.store().state(code).step == 1        # not following: stays
    assert s.session_state["text"] == LESSON.steps[0].view["text"]
    s.button(key="class_back").click().run()
    assert on_page(s) == LESSON.steps[1].page and s.toggle(key=classroom.FOLLOW_TOGGLE).value


def test_answers_come_in_live_and_the_reveal_shows_the_models_answer_beside_each_guess():
    t = teacher()
    code = t.session_state[classroom.CODE]
    students = [student(code, f"s{i}") for i in range(3)]
    for _ in range(QUESTION):
        t.button(key="class_next").click().run()
    step = LESSON.steps[QUESTION]
    bundle = load_bundled(step.view["model"])
    ids = bundle.tokenizer.encode(step.view["text"])
    probs = torch.softmax(bundle.model.run(ids)["logits"][0, step.view["token"]].double(), -1)
    answer = bundle.tokenizer.vocab[int(probs.argmax())]
    options = sorted(bundle.tokenizer.vocab[int(i)] for i in probs.topk(questions.OPTIONS).indices)
    guesses = [answer, options[0] if options[0] != answer else options[1], answer]
    for s, guess in zip(students, guesses):
        s.run()
        radio = s.radio(key=f"class_answer_{QUESTION}")
        assert list(radio.options) == options
        radio.set_value(guess).run()
        s.button(key="class_send").click().run()
        assert "You can change it until the teacher reveals" in page_text(s)
    t.run()
    assert any("**3 of 3** answered" in m for m in t.markdown.values), t.markdown.values
    assert classroom.store().tally(code, QUESTION) == {answer: 2, guesses[1]: 1}
    t.button(key="class_reveal").click().run()
    shown = escape(percent(float(probs.max())))                                      # 99.9%, not 100%
    assert f"The model's answer:** “{answer}” ({shown}). **2 of 3 right ({percent(2 / 3)}).**" in page_text(t)
    for s, guess in zip(students, guesses):
        s.run()
        text = page_text(s)
        assert f"The model's answer:** “{answer}” ({shown})" in text
        assert f"Your guess:** “{guess}”" in text and (("right!" in text) == (guess == answer))
        assert not [r for r in s.radio if r.key == f"class_answer_{QUESTION}"]      # answers closed
    assert not classroom.store().answer(code, students[0].session_state[classroom.SEAT], QUESTION, guesses[1])


def test_a_student_cannot_move_the_class_and_a_bad_code_gets_a_clear_message():
    t = teacher()
    code = t.session_state[classroom.CODE]
    s = student(code)
    assert not [b for b in s.button if b.key in ("class_next", "class_previous", "class_reveal")]
    with pytest.raises(WrongKey):
        classroom.store().move(code, s.session_state[classroom.SEAT], 2)
    assert classroom.store().state(code).step == 0
    lost = student("NOPE42")
    assert lost.session_state.get(classroom.ROLE) is None
    assert "There is no class with the code NOPE42" in page_text(lost)


def test_a_reloaded_student_finds_their_seat_and_answer_again():
    t = teacher()
    code = t.session_state[classroom.CODE]
    s = student(code, "Ada")
    seat = s.session_state[classroom.SEAT]
    again = class_page(join=code, seat=seat)                     # the same URL in a new session
    assert again.session_state[classroom.ROLE] == "student" and again.session_state[classroom.SEAT] == seat
    assert classroom.store().names(code) == ["Ada"]


def test_alone_a_student_walks_a_lesson_with_next_and_previous():
    at = class_page()
    at.selectbox(key="class_lesson").set_value("from-words-to-a-forecast").run()
    at.button(key="class_alone").click().run()
    lesson = lessons.ready_lessons()["from-words-to-a-forecast"]
    for n, step in enumerate(lesson.steps):
        assert not at.exception and on_page(at) == step.page, n
        assert f"step {n + 1} of {len(lesson.steps)}" in page_text(at)
        if n + 1 < len(lesson.steps):
            at.button(key="class_next").click().run()
    at.button(key="class_leave").click().run()
    assert at.session_state.get(classroom.ROLE) is None


def test_a_teacher_builds_a_lesson_from_the_views_they_visit_edits_it_and_shares_it_as_a_file_and_a_link():
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"model": "tinytales", "text": "the dog chased the cat because it was hungry",
                            "layer": "1", "head": "1", "token": "6"})
    at.run()
    at.session_state["section_attention"] = BY_SLUG["attention"].tab("who-looks")
    at.switch_page(BY_SLUG["attention"].file).run()
    at.button(key="lesson_add").click().run()
    at.session_state["attention_whatif"] = "scaling"
    at.session_state["section_attention"] = BY_SLUG["attention"].tab("what-if")
    at.run()
    at.button(key="lesson_add").click().run()
    at.switch_page(BY_SLUG["prediction"].file).run()
    at.button(key="lesson_add").click().run()
    assert "Your lesson has 3 steps" in page_text(at)
    at.switch_page(BY_SLUG["class"].file).run()
    assert at.selectbox(key="class_lesson").value == "mine"
    at.text_input(key="lesson_title").set_value("My heads").run()
    at.session_state["lesson_editor"] = {"edited_rows": {0: {"note": "Ask first!", "order": 3}, 2: {"keep": False}},
                                         "added_rows": [], "deleted_rows": []}
    at.run()
    [link] = [c.value for c in at.code if "/class?lesson=" in c.value]          # "Copy a link to this lesson"
    lesson = lessons.from_link(link.split("lesson=", 1)[1])
    assert lesson.title == "My heads" and [s.tab for s in lesson.steps] == ["what-if", "who-looks"]
    what_if, who = lesson.steps
    assert who.note == "Ask first!" and who.view == {"model": "tinytales", "text":
                                                     "the dog chased the cat because it was hungry",
                                                     "layer": 1, "head": 1, "token": 6}
    assert what_if.fields == {"what-if": "scaling"}
    assert lessons.file_name(lesson) == "lesson-my-heads.json"
    link = lessons.as_link(lesson)
    again = class_page(lesson=link)                       # the lesson's link opens it on the class page
    assert again.selectbox(key="class_lesson").value == "mine" and again.text_input(key="lesson_title").value == "My heads"
    bad = class_page(lesson=link[:-8] + "AAAAAAAA")
    assert "does not carry a lesson" in page_text(bad) or "not a lesson" in page_text(bad)


def test_presenter_mode_and_high_contrast_stay_on_when_a_teacher_starts_a_class_and_moves_it():
    at = class_page(presenter="1", high_contrast="1")
    at.selectbox(key="class_lesson").set_value("attention-in-ten-minutes").run()
    at.button(key="class_start").click().run()                  # the code and QR code, on the class page
    at.button(key="class_show_step").click().run()              # the first step opens on another page
    assert not at.exception and on_page(at) == LESSON.steps[0].page
    assert at.toggle(key="presenter").value is True and at.toggle(key="high_contrast").value is True
    at.button(key="class_next").click().run()
    assert on_page(at) == LESSON.steps[1].page and at.toggle(key="presenter").value is True


def test_the_tally_is_a_bar_per_answer_in_the_students_order_on_a_scale_of_those_present_in_the_pages_ink():
    asked_ = questions.Asked("next-word", "Which word?", ("is", "it", "they"), "it")
    frame = classroom.tally_frame(asked_, {"it": 2, "they": 1}, revealed=True)
    assert list(frame["answer"]) == ["is", "it ✓", "they"] and list(frame["students"]) == [0, 2, 1]
    spec = classroom.tally_chart(asked_, {"it": 2, "they": 1}, 5, revealed=True, ink="#f5f5f5").to_dict()
    bars, numbers = spec["layer"]
    assert bars["encoding"]["y"]["sort"] == ["is", "it ✓", "they"]           # as every screen lists the options
    assert bars["encoding"]["x"]["scale"]["domain"] == [0, 5]                 # a full bar: every student present
    axis = bars["encoding"]["y"]["axis"]
    assert numbers["mark"]["color"] == axis["labelColor"] == "#f5f5f5" and axis["labelFlush"] is False   # dark; aligned
    assert axis["labelLimit"] >= PRESENTER_TEXT_PX * 0.6 * len("layer 1: after feed-forward")   # a long answer whole
    before = classroom.tally_chart(asked_, {}, 0).to_dict()["layer"][0]["encoding"]
    assert before["y"]["sort"] == ["is", "it", "they"] and before["x"]["scale"]["domain"] == [0, 1]


def test_the_tallys_words_are_as_large_as_the_text_beside_it_the_presenters_on_a_projector():
    """A projector's back row reads the tally: its answers and counts are the presenter's body size (its words were
    16 px beside 22 px text), one constant for both (explorer/app/styles.py); a teacher's laptop has the body's."""
    asked_ = questions.Asked("lens-layer", "Which stage?", ("token + position", "layer 1: after feed-forward"), None)
    for size in (PRESENTER_TEXT_PX, BODY_TEXT_PX):
        spec = classroom.tally_chart(asked_, {}, 3, text_px=size).to_dict()
        assert spec["config"]["axis"]["labelFontSize"] == spec["layer"][1]["mark"]["fontSize"] == size
        assert spec["height"] >= size * len(asked_.options)                # a row at least a line high per answer
    assert classroom.tally_chart(asked_, {}, 3).to_dict()["config"]["axis"]["labelFontSize"] == PRESENTER_TEXT_PX
    assert f"font-size: {PRESENTER_TEXT_PX}px" in PRESENTER_CSS


def test_at_the_reveal_a_student_reads_every_options_number_in_one_line():
    model = questions.Asked("next-word", "Which word?", ("is", "it"), "it", {"is": 0.01, "it": 0.99},
                            {"is": "1%", "it": "99%"}, "the model's probability")
    assert classroom.numbers_words(model, {}) == "The model's probability: “is” 1% · “it” 99%"
    poll = questions.Asked("poll", "How sure?", ("1", "2"), None)
    assert classroom.numbers_words(poll, {"2": 3}) == "The class: “1” 0 · “2” 3"
