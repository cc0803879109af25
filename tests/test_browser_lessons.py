"""Every ready lesson led as a class runs it, in real Chromium on a server started as users start it: a teacher at a
projector (1366 x 768, presenter mode) and students on phones (390 x 844: two in "Attention in ten minutes" and in
the lecture, one in each other lesson) who join with the code, follow every Next to the last step, answer every
question and see every reveal. The lecture asks a question of every kind (explorer/questions.py); at its end each
phone shows the student's own answers and the teacher's class page the class's summary. In "Attention in ten
minutes" axe-core also checks WCAG 2.1 AA (tests/test_browser_a11y.py) in light and dark on the teacher's open class
(code, link, QR code), on a phone that has answered, on the teacher's tally and on the phone after the reveal.

At every step it measures what each first screen shows (issues 29 and 40): the teacher's shows the step's main chart
whole with the class box on screen, every picker beside the title at least as wide as its value, and at a question
the question, the live tally (its words no smaller than the presenter's body text) and Reveal; each phone's shows
the main chart starting on it, at least 60% of it, all of it when it is no taller than half the screen, and no tick
label of a chart cut. The figures of every step are printed (run with -s) and the steps that miss are listed at the
end of the lesson.

It fails on any error in a browser's console or any uncaught page error (a white page begins as one), on a blank
page or an exception drawn on it, and on a student who drops out of the class (their page loses its connection, stops following, or stops
being counted as present). Streamlit's own probes of a page's base path (`/<page>/_stcore/health`, answered 404
before it finds the server's root) are the only console lines let through.
"""
import re

import pytest
from playwright.sync_api import expect

from browser_support import (PHONE, PROJECTOR, first_screen, main_element, on_screen, open_view, pickers_too_narrow,
                             ticks_cut, wait_until_run)
from explorer import lessons, questions
from explorer.registry import BY_SLUG
from veil_support import charted, facts as facts_of, gives_away, plain, plain_words, pointed_at, screen
from test_browser_a11y import check_all_schemes, report as wcag_report

LESSONS = lessons.ready_lessons()
STUDENTS = ("Ada", "<b>Bob</b>")          # a name is plain text on the teacher's screen, never markup
WCAG_LESSON = "attention-in-ten-minutes"  # led with both students, and checked for WCAG 2.1 AA as it goes
LECTURE = "transformers-in-one-lecture"   # every kind of question (27 steps; in AppTest: tests/test_class_lecture.py)
TWO_PHONES = {WCAG_LESSON, LECTURE}
REVEALED = {"poll": "A poll:", "choice": "The answer:"}           # the model's kinds: "The model's answer:"
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
                      wcag: list[str] | None = None, revealed: str = "The model's answer:",
                      facts: tuple | None = None) -> dict[str, float]:
    """Every student answers the step's question (the first option), the teacher sees them all and reveals, and each
    student then sees `revealed` (the words before the answer) beside their guess. Returns what the teacher's window
    showed of the question (`prompt`; empty: the kind's own words), the tally and Reveal once every answer was in.
    With a `wcag` list, axe-core's violations on the first phone once it has answered, on the teacher's tally and on
    the first phone after the reveal are added to it (light and dark). With `facts` (the answer, the reveal's sentence
    and a token count, computed by the test from the model: tests/veil_support.py), no screen gives the answer away
    before the reveal, and every screen shows it after."""
    for student in students:
        group = student.box().get_by_test_id("stRadioGroup")
        expect(group).to_be_visible()
        group.locator("label").first.click()
        student.box().get_by_role("button", name="Send", exact=True).click()
        expect(student.box().get_by_text("You can change it until the teacher reveals")).to_be_visible()
    expect(teacher.box().get_by_text(f"{len(students)} of {len(students)}", exact=True)).to_be_visible()
    reveal = teacher.box().get_by_role("button", name="Reveal", exact=True)
    question = teacher.box().get_by_text(prompt) if prompt else teacher.box().get_by_test_id("stColumn").first
    shown = {"question": on_screen(question),
             "tally": on_screen(teacher.box().get_by_test_id("stVegaLiteChart")), "Reveal": on_screen(reveal)}
    if facts is not None:
        guess_first(teacher, students, *facts)
    if wcag is not None:
        check_all_schemes(students[0].page, "class, student, phone, answered", wcag)
        check_all_schemes(teacher.page, "class, teacher, presenter, tally", wcag)
    reveal.click()
    for student in students:
        expect(student.box().get_by_text(revealed)).to_be_visible()
        expect(student.box().get_by_text("Your guess:")).to_be_visible()
    if facts is not None:
        then_see(teacher, students, *facts)
    if wcag is not None:
        check_all_schemes(students[0].page, "class, student, phone, revealed", wcag)
    return shown


def guess_first(teacher: Watched, students: list[Watched], answer, said: str, count, charted: str | None) -> None:
    """Before the reveal no screen gives the answer away (outside the question's own options): no chart ranks it
    first, no text says the reveal's sentence or the token count."""
    for watched in (teacher, *students):
        wait_until_run(watched.page)
        figures, text = screen(watched.page)
        away = gives_away(figures, [text], answer, plain_words(said), count)
        assert not away, f"{watched.who} shows the answer before the reveal: {away}"


def then_see(teacher: Watched, students: list[Watched], answer, said: str, count, charted: str | None) -> None:
    """After the reveal every screen says the reveal's sentence and, where the page charts the answer, points at it
    (explorer/pointer.py) once the veil is lifted (within a poll): on the projector, on the answer's own label where
    the chart names it so (`charted` "label"; "pointer": the chart names it shorter, "MLP 1")."""
    for watched in (teacher, *students):
        if said:
            expect(watched.box().get_by_text(plain_words(said)[:40], exact=False).first).to_be_visible()
        if charted:
            watched.page.wait_for_function(POINTED, polling=200)
            spots = pointed_at(screen(watched.page)[0])           # (a phone's heatmap may label by position alone)
            labelled = charted == "label" and watched is teacher
            assert spots and (not labelled or any(plain(s) == plain(answer) for s in spots)), (watched.who, spots)


# The reveal's pointer ("the model's answer", explorer/pointer.py) on one of the page's charts.
POINTED = """() => [...document.querySelectorAll('[data-testid=stMain] .js-plotly-plot')].some(p =>
  ((p.layout || {}).annotations || []).some(a => a.name === "the model's answer"))"""


# --- what each first screen shows at a step -----------------------------------------------------------------

# The live tally's words (its answers and counts, Vega's SVG text) beside the presenter's body text: their smallest
# font size and the main area's (px), once the tally is drawn.
TALLY_TYPE = """() => {
  const texts = [...document.querySelectorAll('.st-key-class_box [data-testid=stVegaLiteChart] svg text')]
    .filter(t => t.textContent.trim());
  if (!texts.length) return null;
  const px = e => parseFloat(getComputedStyle(e).fontSize);
  return {smallest: Math.min(...texts.map(px)), body: px(document.querySelector('[data-testid=stMain]'))};
}"""


# While a question is open, what answers it is a placeholder of its size on every screen (explorer/veil.py): the first
# one on screen stands in the main chart's place (marked for FIRST_SCREEN's selector).
VEIL = '[data-testid=stMain] [class*="st-key-veil_"]'
VEILED = """() => {
  document.querySelectorAll('[data-main-veil]').forEach(e => delete e.dataset.mainVeil);
  const shown = [...document.querySelectorAll('""" + VEIL + """')]
    .filter(e => e.offsetParent !== null && e.getBoundingClientRect().height > 0)
    .sort((a, b) => a.getBoundingClientRect().top - b.getBoundingClientRect().top);
  if (shown.length) shown[0].dataset.mainVeil = 'yes';
  return shown.length > 0;
}"""


def in_place_of(watched: Watched, main, asks: bool):
    """The element to measure for the step's main chart: at an open question (`asks`) the veil's first placeholder,
    when the page has one."""
    if main is None or not asks:
        return main
    return ("[data-main-veil]", None) if watched.page.evaluate(VEILED) else main


def teachers_screen(teacher: Watched, main, asks: bool = False, whole: bool = True) -> dict:
    """The share of the step's main chart (expected `whole`, else measured once it has settled) and of the class box
    on the teacher's window, the open tab, the pickers beside the title narrower than their value, and at a question
    (`asks`) the tally's type beside the body's."""
    seen = first_screen(teacher.page, *main, whole=whole) if main else None
    out = {"chart": None if main is None else (seen or {"share": 0.0})["share"], "top": (seen or {}).get("top"),
           "box": on_screen(teacher.box()), "tab": (seen or {}).get("open"), "pickers": pickers_too_narrow(teacher.page)}
    if asks:
        teacher.page.wait_for_function(TALLY_TYPE, polling=100)
        out["tally"] = teacher.page.evaluate(TALLY_TYPE)
    return out


def phones_screen(student: Watched, main) -> dict | None:
    """Where the step's main chart starts on a phone's window (px from its top), its height and share shown, and the
    charts' tick labels that are cut. Measured in the front tab, as its student looks at it (a tab behind another
    gets no animation frames, in which a chart is fitted to its room)."""
    if main is None:
        return None
    student.page.bring_to_front()
    seen = first_screen(student.page, *main, whole=False)
    if seen is None:                    # what the phone shows instead
        return {"missing": student.page.evaluate("""() => ({url: location.href.slice(-80),
            state: document.querySelector('[data-test-script-state]').dataset.testScriptState,
            titles: [...document.querySelectorAll('.explorer-chart .gtitle')].map(t => t.textContent),
            headings: [...document.querySelectorAll('[data-testid=stMain] h1')].map(h => h.textContent)})""")}
    return {"top": seen["top"], "height": seen["height"], "share": seen["share"], "tab": seen["open"],
            "cut": ticks_cut(student.page)}


def phone_misses(seen: dict | None, screen: int, starts: bool = False) -> bool:
    """The chart does not start on the first screen, or (unless it need only start there) shows less than 60% (less
    than all of a chart no taller than half the screen)."""
    if seen is None or "missing" in seen:
        return True
    least = 0.0 if starts else 0.999 if seen["height"] <= screen / 2 else 0.6
    return not 0 <= seen["top"] < screen or seen["share"] < least


def misses(row: dict) -> list[str]:
    """What a step's first screens miss of the targets (a screen on another tab than the step's misses them all), at
    a question before the answers and after the reveal. At a question the class box holds the question (then its
    answer) above the page: the main chart (while the question is open, the veil's placeholder in its place) must
    start on each first screen; after the reveal the phones' are measured (the teacher's is printed)."""
    asks = row["asks"]
    out = screen_misses(row, row["teacher"], row["phones"], asks)
    for what, share in row.get("question", {}).items():
        if share < 0.999:
            out.append(f"the teacher sees {share:.0%} of the {what}")
    tally = row["teacher"].get("tally")
    if tally and tally["smallest"] < tally["body"]:
        out.append(f"the tally's words are {tally['smallest']:g} px, the presenter's body text {tally['body']:g} px")
    if "revealed" in row:
        out += [f"after the reveal, {miss}" for miss in
                screen_misses(row, None, row["revealed"]["phones"], asks)]
    return out


def screen_misses(row: dict, teacher: dict | None, phones: list, starts: bool = False) -> list[str]:
    """What the teacher's (unless None) and the phones' screens at one moment of a step miss (with `starts`, a chart
    need only start on the screen)."""
    screens = [("the teacher", teacher or {}), *((f"phone {n + 1}", seen) for n, seen in enumerate(phones))]
    out = [f"{who} shows the tab {seen.get('tab')!r}" for who, seen in screens
           if row["tab"] and seen and "missing" not in seen and seen.get("tab") != row["tab"]]
    if teacher is None:
        teacher = {"chart": None, "box": 1.0, "pickers": []}
    if teacher["chart"] is not None and (not 0 <= (teacher["top"] or 0) < PROJECTOR["height"] or teacher["chart"] == 0
                                         if starts else teacher["chart"] < 0.999):
        out.append(f"the teacher sees {teacher['chart']:.0%} of the chart (its top {teacher['top']} px)")
    if teacher["box"] < 0.999:
        out.append(f"the teacher sees {teacher['box']:.0%} of the class box")
    if teacher["pickers"]:
        out.append(f"pickers beside the title narrower than their value [value, text px, room px]: {teacher['pickers']}")
    for n, seen in enumerate(phones):
        if row["chart"] and phone_misses(seen, PHONE["viewport"]["height"], starts):
            out.append(f"phone {n + 1}: {seen}")
        if seen and seen.get("cut"):
            out.append(f"phone {n + 1}: tick labels cut: {seen['cut']}")
    return out


def report(key: str, rows: list[dict]) -> None:
    print(f"\n{key}: share of the main chart on each first screen (teacher 1366 x 768 presenter; phones 390 x 844)")
    def phones(screens: list) -> str:
        return "; ".join("-" if seen is None else str(seen) if "missing" in seen else
                         f"top {seen['top']} px, {seen['share']:.2f} of {seen['height']} px" for seen in screens)

    def share(teacher: dict) -> str:
        return "-" if teacher["chart"] is None else f"{teacher['chart']:.2f}"

    for row in rows:
        question = " ".join(f"{what} {share:.2f}" for what, share in row.get("question", {}).items())
        if row["teacher"].get("tally"):
            question += f"; tally text {row['teacher']['tally']['smallest']:g} px (body {row['teacher']['tally']['body']:g})"
        print(f"  {row['where']}: teacher {share(row['teacher'])} (class box {row['teacher']['box']:.2f}"
              f"{'; ' + question if question else ''}); phones {phones(row['phones'])}")
        if "revealed" in row:
            print(f"    after the reveal: teacher {share(row['revealed']['teacher'])}; "
                  f"phones {phones(row['revealed']['phones'])}")
        for miss in misses(row):
            print(f"    MISSES: {miss}")


def summaries(teacher: Watched, students: list[Watched], lesson: lessons.Lesson) -> None:
    """At the lesson's last step each phone shows the student's own answers (the questions with a right answer,
    revealed); the teacher's Note leads back to the class page, which shows what the class got right and offers
    every answer as a CSV file."""
    # every kind but first-right, which reads Pythia's training steps (the lesson "How a real model learned" asks it)
    assert {step.question.kind for step in lesson.steps if step.question} == set(questions.KINDS) - {"first-right"}
    graded = sum(step.question is not None and step.question.kind != "poll" for step in lesson.steps)
    for student in students:
        student.box().get_by_text("Your answers in this class", exact=True).click()
        expect(student.box().get_by_text(re.compile(rf"^Your answers in this class: \d+ of {graded} revealed right"))
               ).to_be_visible()
        student.check("their own answers")
    teacher.box().get_by_role("button", name="Note").click()
    teacher.page.get_by_role("link", name="Show the join code and QR code").click()
    wait_until_run(teacher.page)
    expect(teacher.page.get_by_text("What the class got right")).to_be_visible()
    expect(teacher.page.get_by_role("button", name="Download every answer (CSV)")).to_be_visible()
    teacher.check("the class page")


@pytest.mark.parametrize("key", list(LESSONS))
def test_a_class_follows_every_step_of_a_ready_lesson_each_first_screen_showing_its_chart_with_no_error_or_dropout(
        chromium, app_url, key):
    lesson, count = LESSONS[key], len(LESSONS[key].steps)
    names = STUDENTS if key in TWO_PHONES else STUDENTS[1:]
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
            main, asks = main_element(step.page, label), step.question is not None
            rows.append({"where": where, "chart": main is not None, "tab": label, "asks": asks,
                         "teacher": teachers_screen(teacher, in_place_of(teacher, main, asks), asks, whole=not asks),
                         "phones": [phones_screen(student, in_place_of(student, main, asks)) for student in students]})
            if asks:
                rows[-1]["question"] = answer_and_reveal(
                    teacher, students, step.question.prompt, wcag,
                    revealed=REVEALED.get(step.question.kind, "The model's answer:"),
                    facts=(*facts_of(lesson, index), charted(step)))
                for watched in (teacher, *students):             # the poll lifts the veil: the page runs again
                    watched.page.wait_for_function(f"() => !document.querySelector('{VEIL}')", polling=100)
                rows[-1]["revealed"] = {"teacher": teachers_screen(teacher, main, whole=False),
                                        "phones": [phones_screen(student, main) for student in students]}
                wcag = None                             # (the first question's screens are checked)
            else:
                present = f"{len(students)} student{'s' * (len(students) != 1)} present"
                expect(teacher.box().get_by_text(present)).to_be_visible()
            for watched in (teacher, *students):
                watched.check(where)
        if key == LECTURE:
            summaries(teacher, students, lesson)
    finally:
        projector.close()
        phones.close()
        report(key, rows)
    missed = {row["where"]: misses(row) for row in rows if misses(row)}
    assert not missed, missed
    assert not found_wcag, wcag_report(found_wcag)
