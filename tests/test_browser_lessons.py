"""Every ready lesson led as a class runs it, in real Chromium on a server started as users start it: a teacher at a
projector (1366 x 768, presenter mode) and two students on phones (390 x 844) who join with the code, follow every
Next to the last step, answer every question and see every reveal.

It fails on any error in a browser's console or any uncaught page error (a white page begins as one), on a blank
page or an exception drawn on it, and on a student who drops out of the class (their page loses its connection, stops following, or stops
being counted as present). Streamlit's own probes of a page's base path (`/<page>/_stcore/health`, answered 404
before it finds the server's root) are the only console lines let through.
"""
import re

import pytest
from playwright.sync_api import expect

from browser_support import open_view, wait_until_run
from explorer import lessons
# The lecture (every kind of question, 27 steps) is led in AppTest (tests/test_class_lecture.py); a question of
# every kind is answered on a phone in tests/test_browser_questions.py.
LESSONS = {key: lesson for key, lesson in lessons.ready_lessons().items() if key != "transformers-in-one-lecture"}
STUDENTS = ("Ada", "<b>Bob</b>")          # a name is plain text on the teacher's screen, never markup
# Streamlit's frontend asks `<page>/_stcore/health` and `host-config` before it finds the server's root: a 404 each,
# logged by the browser, whatever the app does.
BASE_PATH_PROBE = re.compile(r"/_stcore/(health|host-config)$")


class Watched:
    """A browser tab and everything that went wrong in it: console errors, uncaught page errors, a closed socket."""

    def __init__(self, page, who: str):
        self.page, self.who, self.problems = page, who, []
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        page.on("websocket", lambda socket: socket.on(
            "close", lambda _: self.problems.append("the connection to the server closed")))

    def _console(self, message) -> None:
        url = (message.location or {}).get("url", "")
        if message.type == "error" and not BASE_PATH_PROBE.search(url):
            self.problems.append(f"console: {message.text[:300]} ({url})")

    def box(self):
        """The class box at the top of the page."""
        return self.page.locator(".st-key-class_box")

    def check(self, where: str) -> None:
        """Nothing went wrong so far, and the page is drawn (a crashed page has no app left, or an empty main area)."""
        assert not self.problems, f"{self.who} at {where}: {self.problems}"
        assert self.page.get_by_test_id("stApp").count() == 1, f"{self.who} at {where}: a blank page"
        assert self.page.get_by_test_id("stMain").inner_text().strip(), f"{self.who} at {where}: an empty page"
        shown = self.page.get_by_test_id("stException")
        assert shown.count() == 0, f"{self.who} at {where}: an exception on the page: {shown.first.inner_text()[:300]}"


def start_class(teacher: Watched, app_url: str, lesson: lessons.Lesson) -> str:
    """The teacher picks the lesson on the class page and starts a class; returns the join code."""
    page = teacher.page
    open_view(page, app_url, "class", presenter=1)
    page.locator("[data-testid='stSelectbox']:has(input[aria-label='Lesson'])").click()
    page.get_by_role("option", name=lesson.title, exact=True).click()
    wait_until_run(page)
    page.get_by_role("button", name="Start a class").click()
    code = class_code(teacher)
    qr = page.get_by_role("img", name=re.compile(rf"^QR code of the link to class {code}: http"))
    expect(qr).to_be_visible()                       # the code's QR code stays up while the room joins
    return code


def class_code(teacher: Watched) -> str:
    """The join code in the teacher's class box, once the class has started."""
    code_text = teacher.box().get_by_text(re.compile(r"^Class [A-Z0-9]{6}")).first
    expect(code_text).to_be_visible()
    return re.search(r"Class ([A-Z0-9]{6})", code_text.inner_text())[1]


def show_step(teacher: Watched, index: int, count: int) -> None:
    """The teacher opens step `index` (the first from the class page, each next with Next) and sees it."""
    if index == 0:
        teacher.page.get_by_role("button", name="Show the class's step").click()
    else:
        teacher.box().get_by_role("button", name="Next").click()
    expect(teacher.box().get_by_text(f"step {index + 1} of {count}")).to_be_visible()


def join(student: Watched, app_url: str, code: str, name: str) -> None:
    page = student.page
    open_view(page, app_url, "class", join=code)
    expect(page.get_by_role("textbox", name="Class code")).to_have_value(code)
    page.get_by_role("textbox", name="Your name (optional)").fill(name)
    page.get_by_role("textbox", name="Your name (optional)").press("Enter")
    page.get_by_role("button", name="Join").click()
    expect(student.box().get_by_text(f"Class {code}")).to_be_visible()
    expect(page).to_have_url(re.compile(rf"join={code}&seat="))


def answer_and_reveal(teacher: Watched, students: list[Watched]) -> None:
    """Every student answers the step's question (the first option), the teacher sees them all and reveals."""
    for student in students:
        group = student.box().get_by_test_id("stRadioGroup")
        expect(group).to_be_visible()
        group.locator("label").first.click()
        student.box().get_by_role("button", name="Send my answer").click()
        expect(student.box().get_by_text("You can change it until the teacher reveals")).to_be_visible()
    expect(teacher.box().get_by_text(f"{len(students)} of {len(students)}")).to_be_visible()
    teacher.box().get_by_role("button", name="Reveal the answer").click()
    for student in students:
        expect(student.box().get_by_text("The model's answer:")).to_be_visible()
        expect(student.box().get_by_text("Your guess:")).to_be_visible()


@pytest.mark.parametrize("key", list(LESSONS))
def test_a_class_follows_every_step_of_a_ready_lesson_with_no_error_no_blank_page_and_nobody_dropping_out(
        chromium, app_url, key):
    lesson, count = LESSONS[key], len(LESSONS[key].steps)
    projector = chromium.new_context(viewport={"width": 1366, "height": 768})
    phones = chromium.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        teacher = Watched(projector.new_page(), "the teacher")
        code = start_class(teacher, app_url, lesson)
        students = [Watched(phones.new_page(), f"student {name!r}") for name in STUDENTS]   # a session per tab
        for student, name in zip(students, STUDENTS):
            join(student, app_url, code, name)
        joined = teacher.page.get_by_text(re.compile(rf"^{len(students)} students present: "))
        expect(joined).to_be_visible()                  # the join page counts the room as it joins ...
        assert sorted(joined.inner_text().split(": ", 1)[1].split(", ")) == sorted(STUDENTS)   # ... names as text
        for index, step in enumerate(lesson.steps):
            where = f"step {index + 1} of {count} ({step.page})"
            show_step(teacher, index, count)
            expect(teacher.page).to_have_url(re.compile(rf"/{step.page if step.page != 'home' else ''}(\?|$)"))
            wait_until_run(teacher.page)
            for student in students:                    # each follows within a few polls
                try:
                    expect(student.box().get_by_text(f"step {index + 1} of {count}")).to_be_visible()
                    expect(student.page).to_have_url(re.compile(rf"/{step.page if step.page != 'home' else ''}\?"))
                except AssertionError as lost:
                    raise AssertionError(f"{student.who} did not follow to {where}: {student.problems}") from lost
                wait_until_run(student.page)
            if step.question is not None:
                answer_and_reveal(teacher, students)
            else:
                expect(teacher.box().get_by_text(f"{len(students)} students present")).to_be_visible()
            for watched in (teacher, *students):
                watched.check(where)
    finally:
        projector.close()
        phones.close()
