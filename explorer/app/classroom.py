"""A live class in the app: the teacher's controls and each student's follow box, at the top of every page.

The class itself lives in the store (explorer/classroom/store.py), one per server (`st.cache_resource`). A session
knows its part in session state: the class code, its role (teacher, student or alone with a lesson), the teacher
key (the teacher's session only, never in a URL) or the student's seat (in the student's URL, so a reload finds
them again). A small fragment polls the store every POLL_SECONDS, reading only where the class is (its step, its
revealed steps and its lesson's version: the lesson itself is parsed once per class and kept). When the teacher
moves, a following student's fragment sets the step as pending and asks for ONE full run: `st.switch_page` to the
step's page (or a rerun of the app when the page stays), whose top sets the step's view before the sidebar is drawn.
A full run that finds the teacher moved (a student's click, or AppTest, whose `run_every` never ticks) follows at
its top instead (`follow`), then switches page (`switch_if_moved`). The teacher's Previous and Next (and a lone
walker's) are drawn in the full run, outside the poll: a press is one run, and the buttons never depend on a timer.
"""
import json
import secrets
from urllib.parse import urlsplit

import altair as alt
import pandas as pd
import streamlit as st

from model.inputs import prepare_text

from explorer.classroom import open_store
from explorer.classroom.store import Position, TooMany, WrongKey, normalise_code
from explorer.lessons import (Asked, Lesson, LessonError, LessonStep, MAX_STEPS, as_link, from_link,
                              next_word_question, parse, step_from_view)
from explorer.registry import BY_SLUG
from explorer.view import escape, model_key, quote

from .state import READ_LIMIT, apply_view, keep_widget_values, get_bundle, section_key

POLL_SECONDS = 1.0                  # a student's app follows the teacher within about this long
ROLE, CODE, KEY, SEAT, STEP = "class_role", "class_code", "_class_key", "class_seat", "_class_step"
LESSON = "_class_lesson"            # the lesson as JSON (a student reads it from the store)
PENDING, GO, MOVED = "_class_pending", "_class_go", "_class_moved"
FOLLOW, FOLLOW_TOGGLE = "_class_follow", "class_follow"    # the choice, and its toggle (a page switch may drop
                                                            # a widget's state; the plain key keeps the choice)


@st.cache_resource
def store():
    """The server's class store: Redis when CLASS_STORE_URL is set, else this process's memory."""
    return open_store()


def role() -> str | None:
    return st.session_state.get(ROLE)


def lesson() -> Lesson | None:
    """The lesson this session walks or teaches."""
    raw = st.session_state.get(LESSON)
    return None if raw is None else _parsed(raw)


@st.cache_resource(max_entries=64, show_spinner=False)
def _parsed(raw: str) -> Lesson:
    return parse(raw)


def parse_stored(raw: dict) -> Lesson:
    """A lesson as the store keeps it (checked again: a store is shared)."""
    return parse(json.dumps(raw))


@st.cache_resource(max_entries=256, show_spinner=False)
def _class_lesson(code: str, version: str) -> Lesson:
    """Class `code`'s lesson, read from the store and parsed once per class and version (shared by every session
    in the class; never changed by a caller)."""
    raw = store().lesson(code)
    if raw is None:
        raise LookupError(code)             # not cached: the class is gone
    return parse_stored(raw)


def current(code: str) -> tuple[Position, Lesson] | None:
    """Where class `code` is and its lesson, or None once it has ended: one small read of the store per call."""
    where = store().position(code)
    if where is None:
        return None
    try:
        return where, _class_lesson(where.code, where.version)
    except LookupError:
        return None


# --- moving to a step: set the view before the sidebar is drawn, then open the step's page -----------------------


def go_to(step: LessonStep, index: int) -> None:
    """Ask the next full run to show `step` (call from a callback or a fragment, then `open_pending`)."""
    st.session_state[PENDING] = (index, step)


def open_pending() -> None:
    """From a fragment: one full run shows the pending step, on its page (`st.switch_page`) or, when the page
    stays, on this one (a rerun of the app). Its top sets the view (`apply_pending`); no second run follows."""
    pending = st.session_state.get(PENDING)
    if pending is None:
        return
    file = BY_SLUG[pending[1].page].file
    if file != BY_SLUG.get(st.session_state.get("_page") or "home", BY_SLUG["home"]).file:
        keep_widget_values()                 # presenter mode, high contrast and open tabs go along
        st.switch_page(file)
    st.rerun(scope="app")


def follow() -> None:
    """At the top of a full run: a following student whose teacher moved gets the class's step as the pending one
    (a student's poll usually did it already)."""
    if role() != "student" or not st.session_state.get(FOLLOW, True) or PENDING in st.session_state:
        return
    found = current(st.session_state.get(CODE, ""))
    if found is not None and st.session_state.get(STEP) != found[0].step:
        where, lesson_ = found
        go_to(lesson_.steps[where.step], where.step)


def apply_pending() -> None:
    """At the top of a run, before the sidebar: set the pending step's view (streamlit_app.py calls this)."""
    pending = st.session_state.pop(PENDING, None)
    if pending is None:
        return
    index, step = pending
    st.session_state[STEP] = index
    view = step.view
    apply_view(model=view.get("model"), text=view.get("text"), layer=view.get("layer"), head=view.get("head"),
               token=view.get("token"), sections={step.page: BY_SLUG[step.page].tab(step.tab)} if step.tab else None)
    page = BY_SLUG[step.page]
    for name, value in step.fields.items():        # a field a link carries is checked as a link's is, when its page runs
        if name in page.linked:
            st.session_state.setdefault("_url_fields", {})[name] = value
        else:
            st.session_state[page.field(name)] = value
    st.session_state[GO] = BY_SLUG[step.page].file
    st.session_state[MOVED] = True


def switch_if_moved(current_page: str) -> None:
    """After st.navigation: open the step's page if a move asked for another page than this one."""
    file = st.session_state.pop(GO, None)
    if file and file != BY_SLUG.get(current_page, BY_SLUG["home"]).file:
        keep_widget_values()                 # presenter mode, high contrast and open tabs go along
        st.switch_page(file)


# --- starting, joining, leaving (callbacks from the class page) --------------------------------------------------


def start(lesson_json: str, teach: bool) -> None:
    """Start a class on this lesson (teach: the class page keeps showing its code, link and QR code while the room
    joins; `show_class_step` opens the step) or walk it alone (its first step opens)."""
    lesson_ = parse(lesson_json)
    st.session_state[LESSON] = lesson_json
    if teach:
        code, key = store().open_class(json_of(lesson_))
        st.session_state.update({ROLE: "teacher", CODE: code, KEY: key})
    else:
        st.session_state.update({ROLE: "alone"})
        go_to(lesson_.steps[0], 0)


def show_class_step() -> None:
    """The teacher leaves the join code for the step the class is on (a callback)."""
    found = current(st.session_state.get(CODE, ""))
    if found is not None:
        go_to(found[1].steps[found[0].step], found[0].step)


def json_of(lesson_: Lesson) -> dict:
    return json.loads(lesson_.to_json())


def join(code: str, name: str) -> None:
    """Join class `code` as a student (a callback); a message in session state says why not."""
    code = normalise_code(code)
    seat = st.session_state.get(SEAT) or secrets.token_urlsafe(9)
    try:
        joined = store().join(code, seat, name)
    except TooMany as problem:
        st.session_state["_class_problem"] = str(problem)
        return
    if not joined:
        st.session_state["_class_problem"] = (f"There is no class with the code {code or '(empty)'}: check the "
                                              "code on the board (classes end after a few idle hours).")
        return
    st.session_state.pop("_class_problem", None)
    st.session_state.update({ROLE: "student", CODE: code, SEAT: seat, FOLLOW: True})
    where, lesson_ = current(code)
    go_to(lesson_.steps[where.step], where.step)


def join_from_page() -> None:
    """The class page's Join button."""
    join(st.session_state.get("class_join_code", ""), st.session_state.get("class_join_name", ""))


def join_link(code: str) -> str:
    """The link a student opens to join class `code` (the class page with the code filled in)."""
    url = urlsplit(getattr(st.context, "url", None) or "http://localhost:8501/")
    return f"{url.scheme}://{url.netloc}/class?join={code}"


def end() -> None:
    """The teacher ends the class (a callback): it is gone from the store for everyone."""
    try:
        store().close(st.session_state[CODE], st.session_state[KEY])
    except WrongKey:
        pass
    leave()


def leave() -> None:
    for key in (ROLE, CODE, KEY, SEAT, STEP, LESSON, FOLLOW, FOLLOW_TOGGLE, "_class_problem"):
        st.session_state.pop(key, None)


def rejoin_from_url(query) -> None:
    """A reloaded student's URL (join= and seat=) finds their seat again; join= alone fills in the code."""
    if role() is not None or "join" not in query:
        return
    code = normalise_code(query["join"])
    if "seat" in query and store().position(code) is not None:
        st.session_state[SEAT] = str(query["seat"])[:40]
        join(code, "")
    else:
        st.session_state["class_join_code"] = code


def url_params() -> dict[str, str]:
    """What a student's URL keeps (never the teacher key)."""
    if role() == "student":
        return {"join": st.session_state[CODE], "seat": st.session_state[SEAT]}
    return {}


@st.fragment(run_every=POLL_SECONDS)
def who_joined(code: str) -> None:
    """The class page's count and names of the students present, polled while the room joins (names as plain text)."""
    names, present = store().names(code), store().present(code)
    st.markdown(f"**{present}** student{'s' * (present != 1)} present"
                + (": " + ", ".join(escape(n) for n in names) if names else "."))


# --- building a lesson from the views a teacher visits ------------------------------------------------------------

DRAFT = "_lesson_draft"             # the lesson being built: a list of LessonStep


def draft() -> list[LessonStep]:
    return st.session_state.setdefault(DRAFT, [])


def add_this_view(slug: str) -> None:
    """A button's callback on any page: add the view on screen (page, model, sentence, layer, head, token, tab and
    the page's own fields) to the lesson being built."""
    state = st.session_state
    view = {key: state[key] for key in ("model", "text", "layer", "head", "token") if key in state}
    page = BY_SLUG[slug]
    fields = {key: state[key] for _, key in page.fields if key in state}
    steps = draft()
    if len(steps) < MAX_STEPS:
        steps.append(step_from_view(slug, view, state.get(section_key(slug)), fields))
    state["_lesson_added"] = len(steps)


def set_draft(lesson_: Lesson) -> None:
    st.session_state[DRAFT] = list(lesson_.steps)
    st.session_state["lesson_title"] = lesson_.title


def load_lesson_from_url(query) -> None:
    """`?lesson=...` (a lesson's link) opens that lesson on the class page, once per session."""
    if "lesson" not in query or st.session_state.get("_lesson_link_loaded"):
        return
    st.session_state["_lesson_link_loaded"] = True
    try:
        set_draft(from_link(str(query["lesson"])[:200_000]))
    except LessonError as problem:
        st.session_state["_class_problem"] = str(problem)


def lesson_link(lesson_: Lesson) -> str:
    url = urlsplit(getattr(st.context, "url", None) or "http://localhost:8501/")
    return f"{url.scheme}://{url.netloc}/class?lesson={as_link(lesson_)}"


# --- the question of a step ----------------------------------------------------------------------------------


@st.cache_resource(max_entries=64)
def _asked(key: str, ids: tuple, position: int, prompt: str, _bundle) -> Asked:
    return next_word_question(_bundle, list(ids), position, prompt)


def asked(step: LessonStep, name: str, text: str) -> Asked | None:
    """The step's question as the class sees it, answered by the step's model (None: no question, or no model)."""
    if step.question is None:
        return None
    name, text = step.view.get("model", name), step.view.get("text", text)
    try:
        bundle = get_bundle(name)
        cfg = bundle.model.cfg
        ids = prepare_text(bundle.tokenizer, text, min(cfg.max_len, READ_LIMIT), context=cfg.max_len).ids
    except (KeyError, ValueError, OSError):
        return None
    position = min(int(step.view.get("token", len(ids) - 1)), len(ids) - 1)
    return _asked(model_key(name, bundle.model), tuple(ids), position, step.question.prompt, bundle)


def percent(p: float) -> str:
    """A probability as a percentage a class can read: '99.9%', '0.1%', '< 0.1%' (never a bare 0)."""
    return f"{p:.1%}" if p >= 0.0005 else "< 0.1%"


def tally_frame(asked_: Asked, counts: dict[str, int]) -> pd.DataFrame:
    return pd.DataFrame({"answer": list(asked_.options), "students": [counts.get(o, 0) for o in asked_.options]})


# --- the class box ---------------------------------------------------------------------------------------------


def class_box(name: str, text: str) -> None:
    """The class box at the top of every page, for a session in a class or walking a lesson (in the main area, not
    the sidebar: a phone hides its sidebar, and a projector shows the tally). One short row, so the page's chart
    keeps the first screen of a projector and of a phone: where the class is, then the teacher's (or a lone
    walker's) Previous and Next, or a student's Follow; the step's note and the join code behind a button."""
    if st.session_state.pop(MOVED, False):
        _to_the_top(key="class_to_the_top")
    if role() is None:
        return
    with st.container(border=True, key="class_box"):
        if role() == "alone":
            _alone()                       # nothing to poll
        elif role() == "teacher":
            _teacher_row(name, text)
        else:
            _box(name, text)


# A new step opens at the top of its page, whatever was scrolled before (a page switch and a rerun of the same page
# keep the scroll position): the class box and the step's chart are its first screen. Drawn only on the run that
# opens a step, so it runs once (its element is hidden: explorer/app/styles.py).
_to_the_top = st.components.v2.component("explorer_to_the_top", html="", js="""export default function () {
  const main = document.querySelector('[data-testid="stMain"]');
  if (main) main.scrollTo({top: 0});
  window.scrollTo({top: 0});
}""")


def _teacher_row(name: str, text: str) -> None:
    """Drawn in the full run, so the teacher's Next never waits on, or goes with, a poll; the polled part (where the
    class is, who is present, a question's tally and Reveal) takes the row's first place."""
    found = current(st.session_state[CODE])
    if found is None:                      # an ended class: the poll says so
        _box(name, text)
        return
    state, lesson_ = found
    with _step_row(state.step, len(lesson_.steps), lesson_.steps[state.step].note):
        _box(name, text)


@st.fragment(run_every=POLL_SECONDS)
def _box(name: str, text: str) -> None:
    if role() not in ("teacher", "student"):
        return
    code = st.session_state[CODE]
    found = current(code)
    if found is None:
        st.warning(f"The class {code} has ended or its code expired.", icon=":material/event_busy:")
        st.button("Leave the class", key="class_leave", on_click=leave)
        return
    state, lesson_ = found
    step = lesson_.steps[state.step]
    if _page_went_blank():                 # drawn again, as the class's step (a dropped page loses its open tab too)
        if role() == "teacher" or st.session_state.get(FOLLOW, True):
            go_to(step, state.step)
        st.rerun(scope="app")
    if role() == "teacher":
        _teacher(code, lesson_, state, step, name, text)
    else:
        _student(code, lesson_, state, step, name, text)


def _move(index: int) -> None:
    lesson_ = lesson()
    index = max(0, min(index, len(lesson_.steps) - 1))
    if role() == "teacher":
        store().move(st.session_state[CODE], st.session_state[KEY], index)
    go_to(lesson_.steps[index], index)


def _alone() -> None:
    lesson_ = lesson()
    index = st.session_state.get(STEP, 0)
    where = _step_row(index, len(lesson_.steps), lesson_.steps[index].note)
    where.markdown(f"**{escape(lesson_.title)}** · step {index + 1} of {len(lesson_.steps)}")


def _step_row(index: int, count: int, note: str):
    """One row: a place for where the lesson is (returned, the rest of the row's width), a button that opens the
    step's note (for a teacher also the way back to the join code, for latecomers; for a lone walker Stop), then
    Previous and Next. Drawn in the full run: a press sets the step as pending (`_move`) and the run it starts
    shows it (`apply_pending`, `switch_if_moved`)."""
    row = st.container(horizontal=True, vertical_alignment="top")
    words = row.container(width="stretch")
    teacher_ = role() == "teacher"
    with row.popover("Note", icon=":material/sticky_note_2:",
                     help="The step's note" + (", and the way back to the join code" if teacher_ else "")):
        st.caption(escape(note) if note else "This step has no note.")
        if teacher_ and st.session_state.get("_page") != "class":
            st.page_link(BY_SLUG["class"].file, label="Show the join code and QR code", icon=":material/qr_code_2:")
        if role() == "alone":
            st.button("Stop the lesson", key="class_leave", on_click=leave, icon=":material/close:")
    row.button("Previous", key="class_previous", on_click=_move, args=(index - 1,), disabled=index == 0,
               icon=":material/arrow_back:")
    row.button("Next", key="class_next", on_click=_move, args=(index + 1,), disabled=index + 1 >= count,
               icon=":material/arrow_forward:", type="primary")
    return words


def _present(count: int) -> str:
    return f"{count} student{'s' * (count != 1)} present"


def _teacher(code, lesson_, state, step, name, text) -> None:
    """The teacher's live part, polled: where the class is and who is present; at a question, who has answered
    and Reveal on that line, then the prompt beside the tally as answers come in (short: a projector's first
    screen keeps the page's chart)."""
    s = store()
    present = s.present(code)
    where = f"**Class {code}** · step {state.step + 1} of {len(lesson_.steps)}"
    asked_ = asked(step, name, text)
    if asked_ is None:
        st.markdown(f"{where} · {_present(present)}")
        return
    counts = s.tally(code, state.step)
    line = st.container(horizontal=True, vertical_alignment="center")
    line.markdown(f"{where} · **{sum(counts.values())} of {present}** answered", width="content")
    if state.is_revealed:
        line.markdown(f"The model's answer: {quote(asked_.answer)} ({percent(asked_.probabilities[asked_.answer])})",
                      width="content")
    else:
        line.button("Reveal", key="class_reveal", on_click=_reveal, args=(state.step,), icon=":material/visibility:",
                    help="Show every student the model's answer; answers close.")
    prompt, tally = st.columns([3, 2], vertical_alignment="center")
    prompt.markdown(escape(asked_.prompt))
    tally.altair_chart(tally_chart(asked_, counts, present), width="stretch", theme=None)


def tally_chart(asked_: Asked, counts: dict[str, int], present: int) -> alt.LayerChart:
    """The live tally: a labelled bar per answer (in the order the students see them) with its count, on a scale
    of the students present (a bar across the whole width: all of them)."""
    base = alt.Chart(tally_frame(asked_, counts)).encode(
        y=alt.Y("answer:N", sort=list(asked_.options), title=None,
                axis=alt.Axis(labelOverlap=False, labelFontSize=16, labelColor="#333333", ticks=False, domain=False,
                              labelPadding=6)),
        x=alt.X("students:Q", title=None, scale=alt.Scale(domain=[0, max(1, present)]), axis=None))
    bars = base.mark_bar(color="#4477AA")
    numbers = base.mark_text(align="left", dx=4, fontSize=16, color="#333333").encode(text="students:Q")
    return (bars + numbers).properties(height=22 * len(asked_.options)).configure_view(stroke=None)


def _reveal(index: int) -> None:
    try:
        store().reveal(st.session_state[CODE], st.session_state[KEY], index)
    except WrongKey as problem:
        st.session_state["_class_problem"] = str(problem)


# The page under the class box went blank: Streamlit (1.67) sometimes drops the elements a run of the app has just
# drawn when the class's poll runs right after it (tests/test_browser_lessons.py saw about one phone step in four
# stay blank for good but for the class box; Streamlit's tracker has the like: #9188). Checked at each poll, once the
# app is idle: no page title left means the page was dropped, and the poll opens the class's step again.
_blank_watch = st.components.v2.component("explorer_blank_watch", html="", js="""
export default function ({ setTriggerValue }) {
  const check = setTimeout(() => {
    const state = document.querySelector("[data-test-script-state]");
    const idle = state && state.dataset.testScriptState === "notRunning";
    if (idle && !document.querySelector('[data-testid="stMain"] h1')) setTriggerValue("blank", Date.now());
  }, 400);
  return () => clearTimeout(check);
}""")


def _page_went_blank() -> bool:
    """The browser said its page went blank (a poll's check, `_blank_watch`)."""
    seen = _blank_watch(data={"poll": secrets.token_hex(4)}, key="class_blank_watch", on_blank_change=lambda: None)
    return bool(getattr(seen, "blank", None))


def _student(code, lesson_, state, step, name, text) -> None:
    """A student's row (where the class is, Follow), and at a question its choices in a row and Send: short, so a
    phone's first screen keeps the page's chart."""
    s = store()
    seat = st.session_state[SEAT]
    following = st.session_state.get(FOLLOW, True)
    if following and st.session_state.get(STEP) != state.step:
        go_to(step, state.step)            # the teacher moved: one full run opens the class's step
    open_pending()                         # ... or "Back to the class's view" was pressed
    s.seen(code, seat)
    row = st.container(horizontal=True, vertical_alignment="center")
    row.markdown(f"**Class {code}** · step {state.step + 1} of {len(lesson_.steps)}", width="content")
    st.session_state[FOLLOW_TOGGLE] = following
    row.toggle("Follow the teacher", key=FOLLOW_TOGGLE, on_change=_keep_follow)   # off: explore on your own
    here = st.session_state.get("_page") or "home"
    if st.session_state.get(STEP) != state.step or not following or here != step.page:
        st.button("Back to the class's view", key="class_back", on_click=_back, args=(step, state.step),
                  icon=":material/groups:")
    asked_ = asked(step, name, text)
    if asked_ is None:
        return
    mine = s.my_answer(code, seat, state.step)
    if not state.is_revealed:
        st.markdown(escape(asked_.prompt))
        answer = st.container(horizontal=True, vertical_alignment="center")      # Send beside the choices
        choice = answer.radio(asked_.prompt, asked_.options, key=f"class_answer_{state.step}", horizontal=True,
                              index=asked_.options.index(mine) if mine in asked_.options else None,
                              label_visibility="collapsed")
        answer.button("Send", key="class_send", on_click=_answer, args=(code, seat, state.step, choice),
                      disabled=choice is None, icon=":material/send:", help="Send my answer to the teacher")
        if mine is not None:
            st.caption(f"Your answer: {quote(mine)}. You can change it until the teacher reveals.")
        return
    st.markdown(f"**The model's answer:** {quote(asked_.answer)} ({percent(asked_.probabilities[asked_.answer])}).  \n"
                + (f"**Your guess:** {quote(mine)}" + (" — right!" if mine == asked_.answer else ".")
                   if mine is not None else "You did not answer this one."))
    st.caption("The model's chances: " + " · ".join(f"{quote(word)} {percent(p)}"
                                                     for word, p in asked_.probabilities.items()))


def _keep_follow() -> None:
    st.session_state[FOLLOW] = bool(st.session_state.get(FOLLOW_TOGGLE, True))


def _back(step: LessonStep, index: int) -> None:
    st.session_state[FOLLOW] = True
    go_to(step, index)


def _answer(code: str, seat: str, index: int, choice: str | None) -> None:
    if choice is None:
        return
    try:
        store().answer(code, seat, index, choice)
    except TooMany as problem:
        st.session_state["_class_problem"] = str(problem)
