"""A server restart mid-class, in real Chromium: the server is killed (a crash; a Community Cloud wake-up or redeploy
starts a new process alike) and started again on the same port. Streamlit's page shows "Connecting" while its server
is down, reconnects by itself once it is back, and runs the app again with the URL it has: that URL names the class.

- In-process classes die with the process: the teacher and a student on a phone are told so in plain words, the
  teacher starts the same lesson again in one click, and the student joins its new code in the class box and follows.
- With CLASS_STORE_URL (two replicas sharing a redis-server), the class lives on when the students' replica restarts:
  their pages reconnect, find their seats and keep following the teacher, who stayed on the other replica.

While a server is down its pages log what any Streamlit page logs then (OUTAGE); anything else fails the test, and
after the restart the pages must be as clean as in tests/test_browser_lessons.py (whose helpers these are).
"""
import re

from playwright.sync_api import expect

from bench.live import free_port
from bench.replica import redis_server
from browser_support import serve, wait_until_run
from explorer import lessons
from explorer.classroom import open_store
from test_browser_lessons import Watched, join, start_class

LESSON = lessons.ready_lessons()["attention-in-ten-minutes"]
COUNT = len(LESSON.steps)
# (a file the page was downloading when its server died, such as plotly.js, ends cut: it loads again when drawn)
OUTAGE = re.compile(r"the connection to the server closed|Cannot send rerun backMessage when disconnected|"
                    r"net::ERR_(CONNECTION_REFUSED|CONNECTION_RESET|INCOMPLETE_CHUNKED_ENCODING|EMPTY_RESPONSE)|"
                    r"Client Error in reaching server endpoint|"
                    r"Streamlit server is not responding|status of 404 \(Not Found\) \(http://[^ ]*/media/")


STILL = "() => [...document.querySelectorAll('.js-plotly-plot')].every(plot => plot.querySelector('.svg-container'))"


def forgive_the_outage(*tabs: Watched) -> None:
    """What the pages logged while their server was down is expected; anything else is a problem."""
    for tab in tabs:
        unexpected = [problem for problem in tab.problems if not OUTAGE.search(problem)]
        assert not unexpected, f"{tab.who} during the restart: {unexpected}"
        tab.problems.clear()


def crash(server, *tabs: Watched) -> None:
    """Kill the server once the tabs are still (a page that is fetching one of Streamlit's scripts when its server
    dies cannot import it again until it is reloaded: a moment this test leaves out)."""
    for tab in tabs:
        wait_until_run(tab.page)
        tab.page.wait_for_function(STILL)              # every chart drawn
    server.kill()
    server.wait(10)


def class_code(tab: Watched) -> str:
    shown = tab.box().get_by_text(re.compile(r"^Class [A-Z0-9]{6} ·")).first
    expect(shown).to_be_visible()
    return re.search(r"Class ([A-Z0-9]{6})", shown.inner_text())[1]


def at_step(tab: Watched, index: int) -> None:
    expect(tab.box().get_by_text(f"step {index + 1} of {COUNT}")).to_be_visible()


def test_after_a_restart_teacher_and_student_are_told_and_the_class_starts_again_in_one_click(chromium):
    port = free_port()
    projector = chromium.new_context(viewport={"width": 1366, "height": 768})
    phone = chromium.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        with serve(port=port) as (base, first):
            teacher, student = Watched(projector.new_page(), "the teacher"), Watched(phone.new_page(), "the student")
            code = start_class(teacher, base, LESSON)
            join(student, base, code, "Ada")
            teacher.page.get_by_role("button", name="Show the class's step").click()
            expect(teacher.page).to_have_url(re.compile(rf"^{base}/\?"))      # the lesson's first step, home
            crash(first, teacher, student)
            with serve(port=port):
                for tab in (teacher, student):               # each page reconnects and runs with its URL
                    expect(tab.box().get_by_text(f"Class {code} ended because the server restarted.")).to_be_visible()
                expect(teacher.box().get_by_text("Start the lesson again: your students join with the new code.")
                       ).to_be_visible()
                expect(student.box().get_by_text("type it here to join")).to_be_visible()
                forgive_the_outage(teacher, student)
                teacher.box().get_by_role("button", name=f"Start “{LESSON.title}” again").click()
                new = class_code(teacher)
                assert new != code
                expect(teacher.page.get_by_role("img", name=re.compile(rf"^QR code of the link to class {new}"))
                       ).to_be_visible()                     # the class page, with the new code for the room
                code_box = student.box().get_by_role("textbox", name="Class code")
                code_box.fill(new)
                code_box.press("Enter")
                student.box().get_by_role("button", name="Join").click()
                expect(student.box().get_by_text(f"Class {new} ·")).to_be_visible()
                teacher.page.get_by_role("button", name="Show the class's step").click()
                teacher.box().get_by_role("button", name="Next").click()
                at_step(student, 1)                          # following again
                for tab in (teacher, student):
                    tab.check("after the restart")
    finally:
        projector.close()
        phone.close()


def test_with_redis_the_students_replica_restarts_and_they_keep_following_the_teacher_on_the_other(chromium):
    port = free_port()
    projector = chromium.new_context(viewport={"width": 1366, "height": 768})
    phones = chromium.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        with redis_server() as url, serve(env={"CLASS_STORE_URL": url}) as (teachers, _), \
                serve(env={"CLASS_STORE_URL": url}, port=port) as (students_replica, replica):
            teacher = Watched(projector.new_page(), "the teacher")
            code = start_class(teacher, teachers, LESSON)
            students = [Watched(phones.new_page(), f"student {name}") for name in ("Ada", "Bob")]
            for tab, name in zip(students, ("Ada", "Bob")):
                join(tab, students_replica, code, name)     # each is shown the class's first step
            crash(replica, *students)
            teacher.box().get_by_role("button", name="Next").click()        # the class moves on meanwhile
            at_step(teacher, 1)
            with serve(env={"CLASS_STORE_URL": url}, port=port):
                for tab in students:                         # reconnected, back in their seats, at the class's step
                    at_step(tab, 1)
                forgive_the_outage(*students)
                teacher.box().get_by_role("button", name="Next").click()
                for tab in students:
                    at_step(tab, 2)
                expect(teacher.box().get_by_text("2 students present")).to_be_visible()
                assert open_store(url).names(code) == ["Ada", "Bob"]        # the same two seats, names kept
                for tab in (teacher, *students):
                    tab.check("after the students' replica restarted")
    finally:
        projector.close()
        phones.close()
