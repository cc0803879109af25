"""Every ready lesson led as a class runs it, in real Chromium on a server started as users start it: a teacher at a
projector (1366 x 768, presenter mode) and students on phones (390 x 844: two in "Attention in ten minutes", one in
each other lesson) who join with the code, follow every Next to the last step, answer every question and see every
reveal. In "Attention in ten minutes" axe-core also checks WCAG 2.1 AA (tests/test_browser_a11y.py) in light and dark
on the teacher's open class (code, link, QR code), on a phone that has answered, on the teacher's tally and on the
phone after the reveal.

At every step it measures what each first screen shows (issue 29): the teacher's shows the step's main chart whole
with the class box on screen, and at a question the question, the live tally and Reveal; each phone's shows the
main chart starting on it, at least 60% of it, all of it when it is no taller than half the screen. The figures
of every step are printed (run with -s) and the steps that miss are listed at the end of the lesson.

It fails on any error in a browser's console or any uncaught page error (a white page begins as one), on a blank
page or an exception drawn on it, and on a student who drops out of the class (their page loses its connection, stops following, or stops
being counted as present). Streamlit's own probes of a page's base path (`/<page>/_stcore/health`, answered 404
before it finds the server's root) are the only console lines let through.
"""
import re

import pytest
from playwright.sync_api import expect

from browser_support import PHONE, PROJECTOR, first_screen, main_element, on_screen, open_view, wait_until_run
from explorer import lessons
from explorer.registry import BY_SLUG
from test_browser_a11y import check_all_schemes, report as wcag_report
# The lecture (every kind of question, 27 steps) is led in AppTest (tests/test_class_lecture.py); a question of
# every kind is answered on a phone in tests/test_browser_questions.py.
LESSONS = {key: lesson for key, lesson in lessons.ready_lessons().items() if key != "transformers-in-one-lecture"}
STUDENTS = ("Ada", "<b>Bob</b>")          # a name is plain text on the teacher's screen, never markup
WCAG_LESSON = "attention-in-ten-minutes"  # led with both students, and checked for WCAG 2.1 AA as it goes
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


def answer_and_reveal(teacher: Watched, students: list[Watched], prompt: str,
                      wcag: list[str] | None = None) -> dict[str, float]:
    """Every student answers the step's question (the first option), the teacher sees them all and reveals.
    Returns what the teacher's window showed of the question, the tally and Reveal once every answer was in.
    With a `wcag` list, axe-core's violations on the first phone once it has answered, on the teacher's tally and on
    the first phone after the reveal are added to it (light and dark)."""
    for student in students:
        group = student.box().get_by_test_id("stRadioGroup")
        expect(group).to_be_visible()
        group.locator("label").first.click()
        student.box().get_by_role("button", name="Send", exact=True).click()
        expect(student.box().get_by_text("You can change it until the teacher reveals")).to_be_visible()
    expect(teacher.box().get_by_text(f"{len(students)} of {len(students)}", exact=True)).to_be_visible()
    reveal = teacher.box().get_by_role("button", name="Reveal", exact=True)
    shown = {"question": on_screen(teacher.box().get_by_text(prompt)),
             "tally": on_screen(teacher.box().get_by_test_id("stVegaLiteChart")), "Reveal": on_screen(reveal)}
    if wcag is not None:
        check_all_schemes(students[0].page, "class, student, phone, answered", wcag)
        check_all_schemes(teacher.page, "class, teacher, presenter, tally", wcag)
    reveal.click()
    for student in students:
        expect(student.box().get_by_text("The model's answer:")).to_be_visible()
        expect(student.box().get_by_text("Your guess:")).to_be_visible()
    if wcag is not None:
        check_all_schemes(students[0].page, "class, student, phone, revealed", wcag)
    return shown


# --- what each first screen shows at a step -----------------------------------------------------------------

def teachers_screen(teacher: Watched, main) -> dict:
    """The share of the step's main chart and of the class box on the teacher's window, and the open tab."""
    seen = first_screen(teacher.page, *main) if main else None
    return {"chart": None if main is None else (seen or {"share": 0.0})["share"], "box": on_screen(teacher.box()),
            "tab": (seen or {}).get("open")}


def phones_screen(student: Watched, main) -> dict | None:
    """Where the step's main chart starts on a phone's window (px from its top), its height and share shown."""
    if main is None:
        return None
    seen = first_screen(student.page, *main, whole=False)
    if seen is None:                    # what the phone shows instead
        return {"missing": student.page.evaluate("""() => ({url: location.href.slice(-80),
            state: document.querySelector('[data-test-script-state]').dataset.testScriptState,
            titles: [...document.querySelectorAll('.explorer-chart .gtitle')].map(t => t.textContent),
            headings: [...document.querySelectorAll('[data-testid=stMain] h1')].map(h => h.textContent)})""")}
    return {"top": seen["top"], "height": seen["height"], "share": seen["share"], "tab": seen["open"]}


def phone_misses(seen: dict | None, screen: int) -> bool:
    """The chart does not start on the first screen, or shows less than 60% (less than all of a chart no
    taller than half the screen)."""
    if seen is None or "missing" in seen:
        return True
    least = 0.999 if seen["height"] <= screen / 2 else 0.6
    return not 0 <= seen["top"] < screen or seen["share"] < least


def misses(row: dict) -> list[str]:
    """What a step's first screens miss of the targets (a screen on another tab than the step's misses them all)."""
    screens = [("the teacher", row["teacher"]), *((f"phone {n + 1}", seen) for n, seen in enumerate(row["phones"]))]
    out = [f"{who} shows the tab {seen.get('tab')!r}" for who, seen in screens
           if row["tab"] and seen and "missing" not in seen and seen.get("tab") != row["tab"]]
    if row["teacher"]["chart"] is not None and row["teacher"]["chart"] < 0.999:
        out.append(f"the teacher sees {row['teacher']['chart']:.0%} of the chart")
    if row["teacher"]["box"] < 0.999:
        out.append(f"the teacher sees {row['teacher']['box']:.0%} of the class box")
    for what, share in row.get("question", {}).items():
        if share < 0.999:
            out.append(f"the teacher sees {share:.0%} of the {what}")
    for n, seen in enumerate(row["phones"]):
        if row["chart"] and phone_misses(seen, PHONE["viewport"]["height"]):
            out.append(f"phone {n + 1}: {seen}")
    return out


def report(key: str, rows: list[dict]) -> None:
    print(f"\n{key}: share of the main chart on each first screen (teacher 1366 x 768 presenter; phones 390 x 844)")
    for row in rows:
        phones = "; ".join("-" if seen is None else str(seen) if "missing" in seen else
                           f"top {seen['top']} px, {seen['share']:.2f} of {seen['height']} px" for seen in row["phones"])
        teacher = "-" if row["teacher"]["chart"] is None else f"{row['teacher']['chart']:.2f}"
        question = " ".join(f"{what} {share:.2f}" for what, share in row.get("question", {}).items())
        print(f"  {row['where']}: teacher {teacher} (class box {row['teacher']['box']:.2f}"
              f"{'; ' + question if question else ''}); phones {phones}")


@pytest.mark.parametrize("key", list(LESSONS))
def test_a_class_follows_every_step_of_a_ready_lesson_each_first_screen_showing_its_chart_with_no_error_or_dropout(
        chromium, app_url, key):
    lesson, count = LESSONS[key], len(LESSONS[key].steps)
    names = STUDENTS if key == WCAG_LESSON else STUDENTS[1:]
    found_wcag: list[str] = []
    wcag = found_wcag if key == WCAG_LESSON else None
    projector = chromium.new_context(viewport=PROJECTOR)
    phones = chromium.new_context(**PHONE)
    rows = []
    try:
        teacher = Watched(projector.new_page(), "the teacher")
        code = start_class(teacher, app_url, lesson)
        if wcag is not None:
            check_all_schemes(teacher.page, "class, teacher, presenter", wcag)
        students = [Watched(phones.new_page(), f"student {name!r}") for name in names]   # a session per tab
        for student, name in zip(students, names):
            join(student, app_url, code, name)
        joined = teacher.page.get_by_text(re.compile(rf"^{len(students)} students? present: "))
        expect(joined).to_be_visible()                  # the join page counts the room as it joins ...
        assert sorted(joined.inner_text().split(": ", 1)[1].split(", ")) == sorted(names)   # ... names as text
        for index, step in enumerate(lesson.steps):
            label = BY_SLUG[step.page].tab(step.tab) if step.tab else None
            where = f"step {index + 1} of {count} ({step.page}{' / ' + label if label else ''})"
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
            main = main_element(step.page, label)
            rows.append({"where": where, "chart": main is not None, "tab": label, "teacher": teachers_screen(teacher, main),
                         "phones": [phones_screen(student, main) for student in students]})
            if step.question is not None:
                rows[-1]["question"] = answer_and_reveal(teacher, students, step.question.prompt, wcag)
                wcag = None                             # (the first question's screens are checked)
            else:
                present = f"{len(students)} student{'s' * (len(students) != 1)} present"
                expect(teacher.box().get_by_text(present)).to_be_visible()
            for watched in (teacher, *students):
                watched.check(where)
    finally:
        projector.close()
        phones.close()
        report(key, rows)
    missed = {row["where"]: misses(row) for row in rows if misses(row)}
    assert not missed, missed
    assert not found_wcag, wcag_report(found_wcag)
