"""A live class in real Chromium: a teacher's page and three students' pages on one server."""
import re

from playwright.sync_api import expect

from browser_support import open_view
from explorer import lessons as L

LESSON = L.ready_lessons()["attention-in-ten-minutes"]
QUESTION = next(n for n, s in enumerate(LESSON.steps) if s.question)


def sidebar(page):
    """The class box at the top of the page."""
    return page.locator(".st-key-class_box")


def test_a_teacher_leads_three_students_who_follow_answer_and_see_the_reveal(chromium, app_url):
    teacher_context = chromium.new_context(viewport={"width": 1366, "height": 768})
    student_context = chromium.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    try:
        teacher = teacher_context.new_page()
        open_view(teacher, app_url, "class")
        teacher.get_by_role("button", name="Start a class").click()
        code_text = sidebar(teacher).get_by_text(re.compile(r"^Class [A-Z0-9]{6}")).first
        expect(code_text).to_be_visible()
        code = re.search(r"Class ([A-Z0-9]{6})", code_text.inner_text())[1]
        qr = teacher.get_by_role("img", name=re.compile(rf"^QR code of the link to class {code}: http"))
        expect(qr).to_be_visible()                       # the code's QR code stays up while the room joins
        students = []
        for name in ("Ada", "<b>Bob</b>", ""):
            page = student_context.new_page()          # one profile, a session per tab
            open_view(page, app_url, "class", join=code)
            expect(page.get_by_role("textbox", name="Class code")).to_have_value(code)
            page.get_by_role("textbox", name="Your name (optional)").fill(name)
            page.get_by_role("textbox", name="Your name (optional)").press("Enter")
            page.get_by_role("button", name="Join").click()
            expect(sidebar(page).get_by_text(f"Class {code}")).to_be_visible()
            expect(page).to_have_url(re.compile(rf"join={code}&seat="))
            students.append(page)
        for n in range(QUESTION):
            sidebar(teacher).get_by_role("button", name="Next").click()
            expect(sidebar(teacher).get_by_text(f"step {n + 2} of {len(LESSON.steps)}")).to_be_visible()
            step = LESSON.steps[n + 1]
            for page in students:                       # each follows within a few polls
                expect(sidebar(page).get_by_text(f"step {n + 2} of {len(LESSON.steps)}")).to_be_visible()
                expect(page).to_have_url(re.compile(rf"/{step.page}\?"))
        for page in students:
            group = sidebar(page).get_by_test_id("stRadioGroup")
            expect(group).to_be_visible()
            group.locator("label").first.click()
            sidebar(page).get_by_role("button", name="Send my answer").click()
            expect(sidebar(page).get_by_text("You can change it until the teacher reveals")).to_be_visible()
        expect(sidebar(teacher).get_by_text("3 of 3")).to_be_visible()
        sidebar(teacher).get_by_role("button", name="Reveal the answer").click()
        for page in students:
            expect(sidebar(page).get_by_text("The model's answer:")).to_be_visible()
            expect(sidebar(page).get_by_text("Your guess:")).to_be_visible()
    finally:
        teacher_context.close()
        student_context.close()
