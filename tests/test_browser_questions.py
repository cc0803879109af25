"""A question of every kind asked in a live class, in real Chromium: a teacher at a projector (presenter mode) leads a
lesson of one step per kind, a student on a phone answers each, sees it counted, and after the teacher's Reveal sees
the answer beside their guess; at the end the teacher's class page holds the summary of every question.

One lesson, one phone, every kind: the walk of every ready lesson is tests/test_browser_lessons.py.
"""
import re

from playwright.sync_api import expect

from browser_support import open_view, wait_until_run
from explorer import lessons, questions
from test_browser_lessons import Watched, class_code, join, show_step

EVERY_KIND = lessons.parse("""{"title": "A question of every kind", "steps": [
 {"page": "home", "view": {"model": "tinytales", "text": "the cats sat on the mats because"},
  "question": {"kind": "poll"}},
 {"page": "home", "question": {"kind": "choice", "prompt": "Which year?", "options": ["2012", "2017"], "answer": "2017"}},
 {"page": "tokenization", "question": {"kind": "token-count"}},
 {"page": "embedding", "tab": "neighbours", "view": {"token": 1}, "question": {"kind": "nearest-word"}},
 {"page": "attention", "tab": "who-looks", "view": {"layer": 1, "head": 2, "token": 6}, "question": {"kind": "looks-at"}},
 {"page": "attention", "tab": "what-if", "view": {"layer": 1, "head": 2, "token": 6}, "fields": {"what-if": "chosen"},
  "question": {"kind": "knockout"}},
 {"page": "residual", "tab": "lens", "question": {"kind": "lens-layer"}},
 {"page": "prediction", "question": {"kind": "next-word"}},
 {"page": "why", "tab": "attribution", "question": {"kind": "biggest-push"}},
 {"page": "encoder-decoder", "tab": "cross", "view": {"model": "translate", "text": "the girls see a green horse",
  "layer": 1, "head": 2}, "question": {"kind": "reads-source", "word": "vert"}}]}""")
REVEALED = {"poll": "A poll:", "choice": "The answer:"}          # the model's kinds: "The model's answer:"


def test_a_phone_answers_a_question_of_every_kind_and_sees_each_reveal(chromium, app_url):
    assert {step.question.kind for step in EVERY_KIND.steps} == set(questions.KINDS)
    projector = chromium.new_context(viewport={"width": 1366, "height": 768})
    phone = chromium.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        teacher, student = Watched(projector.new_page(), "the teacher"), Watched(phone.new_page(), "the phone")
        open_view(teacher.page, app_url, "class", presenter=1, lesson=lessons.as_link(EVERY_KIND))
        teacher.page.get_by_role("button", name="Start a class").click()
        join(student, app_url, class_code(teacher), "Ada")
        count = len(EVERY_KIND.steps)
        for index, step in enumerate(EVERY_KIND.steps):
            where = f"step {index + 1} ({step.question.kind})"
            show_step(teacher, index, count)
            expect(student.box().get_by_text(f"step {index + 1} of {count}")).to_be_visible()
            wait_until_run(student.page)
            group = student.box().get_by_test_id("stRadioGroup")
            expect(group).to_be_visible()
            group.locator("label").first.click()
            student.box().get_by_role("button", name="Send", exact=True).click()
            expect(student.box().get_by_text("You can change it until the teacher reveals")).to_be_visible()
            expect(teacher.box().get_by_text("1 of 1", exact=True)).to_be_visible()   # the tally: one of one answered
            teacher.box().get_by_role("button", name="Reveal", exact=True).click()
            expect(teacher.box().get_by_text(REVEALED.get(step.question.kind, "The model's answer:"))).to_be_visible()
            expect(student.box().get_by_text(REVEALED.get(step.question.kind, "The model's answer:"))).to_be_visible()
            expect(student.box().get_by_text("Your guess:")).to_be_visible()
            for watched in (teacher, student):
                watched.check(where)
        student.box().get_by_text("Your answers in this class", exact=True).click()     # the last step: their own
        expect(student.box().get_by_text(re.compile(r"^Your answers in this class: \d+ of 9 revealed right"))
               ).to_be_visible()
        teacher.box().get_by_role("button", name="Note").click()          # the step's note and the way back
        teacher.page.get_by_role("link", name="Show the join code and QR code").click()
        wait_until_run(teacher.page)
        expect(teacher.page.get_by_text("What the class got right")).to_be_visible()
        expect(teacher.page.get_by_role("button", name="Download every answer (CSV)")).to_be_visible()
        teacher.check("the class page")
    finally:
        projector.close()
        phone.close()
