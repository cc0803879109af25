"""A class that is gone is never lost silently: after a server restart, the teacher's end of it, its expiry or a
teacher's reload, the class box says which in plain words and offers the way back (AppTest; a restart is a new
class store, as a new server process has). tests/test_browser_restart.py restarts a real server."""
import json

from streamlit.testing.v1 import AppTest

from conftest import APP, page_text
from explorer import lessons
from explorer.app import classroom
from test_class import LESSON, class_page, on_page, student, teacher


def reopened(query: dict) -> AppTest:
    """A new session on the URL a tab had: a reload, or a page that reconnected to a restarted server."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(query)
    return at.run()


def url(at: AppTest) -> dict:
    return {name: at.query_params[name] for name in at.query_params}


def test_after_a_restart_the_teacher_starts_the_same_lesson_in_one_click_and_a_student_joins_its_new_code():
    t = teacher()
    code = t.session_state[classroom.CODE]
    s = student(code, "Ada")
    t.button(key="class_show_step").click().run()
    teachers_url, students_url = url(t), url(s)
    assert teachers_url["teaching"] == code and teachers_url["lesson"] == "attention-in-ten-minutes"
    assert students_url["join"] == code and teachers_url["server"] == students_url["server"] == classroom.store().server_id()
    assert t.session_state[classroom.KEY] not in teachers_url.values()                 # never the teacher key
    classroom.store.clear()                                                           # the server restarts: a new store

    s = reopened(students_url)
    assert not s.exception and s.session_state.get(classroom.ROLE) is None
    assert f"**Class {code} ended because the server restarted.**" in page_text(s)
    assert "type it here to join" in page_text(s) and s.text_input(key="class_join_code").value == ""
    assert url(s)["join"] == code and url(s)["seat"] == students_url["seat"]    # a reload says it again

    t = reopened(teachers_url)
    assert not t.exception and t.session_state.get(classroom.ROLE) is None
    assert f"**Class {code} ended because the server restarted.**" in page_text(t)
    assert "Start the lesson again: your students join with the new code." in page_text(t)
    t.button(key="class_start_again").click().run()
    new = t.session_state[classroom.CODE]
    assert not t.exception and t.session_state[classroom.ROLE] == "teacher" and new != code and on_page(t) == "class"
    assert lessons.parse(t.session_state[classroom.LESSON]).title == LESSON.title
    assert any(m.value == f"# {new}" for m in t.markdown)                      # the new code, on the class page
    assert "ended because the server restarted" not in page_text(t)

    s.text_input(key="class_join_code").set_value(new).run()
    s.button(key="class_join").click().run()
    assert not s.exception and s.session_state[classroom.ROLE] == "student" and s.session_state[classroom.CODE] == new
    assert classroom.store().names(new) == [] and classroom.store().present(new) == 1 and "ended because" not in page_text(s)
    t.button(key="class_show_step").click().run()
    t.button(key="class_next").click().run()
    s.run()
    assert on_page(s) == LESSON.steps[1].page and s.session_state[classroom.STEP] == 1         # following again


def test_a_student_is_told_when_the_teacher_ended_the_class_and_when_a_code_is_unknown_or_expired():
    t = teacher()
    code = t.session_state[classroom.CODE]
    s = student(code, "Ada")
    students_url = url(s)
    t.button(key="class_end").click().run()
    s.run()                                                   # the student's poll finds the class gone
    assert not s.exception and s.session_state.get(classroom.ROLE) is None
    assert f"**Your teacher ended class {code}.** To join another class, type its code here." in page_text(s)
    assert s.text_input(key="class_join_code").value == ""
    assert f"**Your teacher ended class {code}.**" in page_text(reopened(students_url))       # and after a reload
    lost = reopened({**students_url, "join": "NOPE42"})
    assert "**There is no class NOPE42 any more.** A class ends after 4 idle hours." in page_text(lost)
    lost.button(key="class_gone_close").click().run()
    assert "NOPE42" not in page_text(lost) and "join" not in url(lost)       # closed: gone from the page and URL


def test_a_reloaded_teachers_tab_is_told_it_no_longer_leads_the_class_and_starts_its_own_lesson_again():
    own = lessons.parse(json.dumps({**json.loads(LESSON.to_json()), "title": "My <b>own</b> lesson"}))
    t = class_page(lesson=lessons.as_link(own))
    t.button(key="class_start").click().run()
    code, teachers_url = t.session_state[classroom.CODE], url(t)
    s = student(code, "Ada")
    assert teachers_url["lesson"] == lessons.as_link(own)                  # not a ready lesson: the lesson itself
    again = reopened(teachers_url)                                   # the same server: the class is still there
    assert not again.exception and again.session_state.get(classroom.ROLE) is None
    assert f"**This tab no longer leads class {code}.** It was reloaded" in page_text(again)
    [start] = [b for b in again.button if b.key == "class_start_again"]
    assert start.label == r"Start “My \<b\>own\</b\> lesson” again"               # plain text, never markup
    start.click().run()
    new = again.session_state[classroom.CODE]
    assert again.session_state[classroom.ROLE] == "teacher" and new != code
    assert lessons.parse(again.session_state[classroom.LESSON]).title == own.title
    s.switch_page("pages/class.py").run()                 # the old class still runs: its student joins the new one
    assert s.text_input(key="class_join_code").value == ""
    s.text_input(key="class_join_code").set_value(new).run()
    s.button(key="class_join").click().run()
    assert not s.exception and s.session_state[classroom.CODE] == new and classroom.store().present(new) == 1
