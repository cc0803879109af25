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

A class can be gone: its teacher ended it, it expired, or the server restarted (the in-process store dies with its
process). The teacher's and student's URLs name their class and the store's life (`server=`, the store's
`server_id`), and the teacher's names the lesson (`lesson=`, never the teacher key), so a new session (a reload, or a
page that reconnected to a restarted server and ran again with its URL) tells them which it was and what to do
(`Gone`): the teacher starts the same lesson again in one click, a student joins the new code in the class box.
"""
import json
import secrets
from dataclasses import dataclass, field, replace

import altair as alt
import pandas as pd
import streamlit as st

from explorer.classroom import open_store, summary
from explorer.classroom.store import IDLE_SECONDS, Position, TooMany, WrongKey, normalise_code
from explorer import questions
from explorer.lessons import (Lesson, LessonError, LessonStep, MAX_STEPS, as_field, as_link, from_field, from_link, parse,
                              ready_lessons, step_from_view)
from explorer.questions import Asked
from explorer.registry import BY_SLUG
from explorer.veil import Veil, veil_for
from explorer.view import escape, model_key, quote

from . import cache, url
from .learning import learning_for
from .pinned import pinned_feature
from .components import front_end
from .state import READ_LIMIT, apply_view, keep_widget_values, get_bundle, model_name, on_a_phone, section_key, view_params
from .styles import BODY_TEXT_PX, PRESENTER_TEXT_PX

POLL_SECONDS = 1.0                  # a student's app follows the teacher within about this long
ROLE, CODE, KEY, SEAT, STEP = "class_role", "class_code", "_class_key", "class_seat", "_class_step"
LESSON = "_class_lesson"            # the lesson as JSON (a student reads it from the store)
PENDING, GO, MOVED = "_class_pending", "_class_go", "_class_moved"
FOLLOW, FOLLOW_TOGGLE = "_class_follow", "class_follow"    # the choice, and its toggle (a page switch may drop
                                                            # a widget's state; the plain key keeps the choice)
SERVER = "_class_server"            # the store's server_id when this session started or joined its class
GONE = "_class_gone"                # a Gone: the class this session was in, and why it is gone
VEIL = "_veil"                      # this run's Veil: the parts an open question hides (None: nothing hidden)
VEILED = "_veiled_step"             # the step whose question this screen's last full run veiled
REVEALED = "_revealed"              # the revealed question whose view is on screen (its answer is pointed at)
CHECKED = "_alone_checked"          # the steps whose question a lone walker has checked their guess on


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


def _parsed(raw: str) -> Lesson:
    """A lesson's JSON parsed, once per server."""
    return cache.for_the_class(("parsed", raw), lambda: parse(raw))


def parse_stored(raw: dict) -> Lesson:
    """A lesson as the store keeps it (checked again: a store is shared)."""
    return parse(json.dumps(raw))


def _class_lesson(code: str, version: str) -> Lesson:
    """Class `code`'s lesson, read from the store and parsed once per class and version (shared by every session
    in the class; never changed by a caller)."""
    def read() -> Lesson:
        raw = store().lesson(code)
        if raw is None:
            raise LookupError(code)         # not kept: the class is gone
        return parse_stored(raw)
    return cache.for_the_class(("class lesson", code, version), read)


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
        switch_to(file)
    st.rerun(scope="app")


def follow() -> None:
    """At the top of a full run: a following student whose teacher moved, or a teacher whose class was moved from
    their second screen (explorer/app/peek.py), gets the class's step as the pending one (a poll usually did it
    already)."""
    if role() not in ("student", "teacher") or not st.session_state.get(FOLLOW, True) or PENDING in st.session_state:
        return
    found = current(st.session_state.get(CODE, ""))
    if found is not None and _shown_step() != found[0].step:
        where, lesson_ = found
        go_to(lesson_.steps[where.step], where.step)


def _shown_step() -> int | None:
    """The class's step this session last opened (a teacher who opened none yet stands at the first: the class page
    keeps the join code up until they show a step, or their second screen moves the class)."""
    return st.session_state.get(STEP, 0 if role() == "teacher" else None)


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
        switch_to(file)


def switch_to(file: str) -> None:
    """Open page `file`. Presenter mode, high contrast and open tabs go along, and the URL keeps naming the class
    (Streamlit empties a URL's query on a page switch until the page's run writes it again: a server that died in
    between left a teacher's tab with a URL that named neither the class nor presenter mode; seen in Chromium)."""
    keep_widget_values()
    modes = {name: value for name, value in view_params().items() if name in ("presenter", "high_contrast")}
    url.switch_page(file, modes, url_params())


# --- starting, joining, leaving (callbacks from the class page) --------------------------------------------------


def start(lesson_json: str, teach: bool) -> None:
    """Start a class on this lesson (teach: the class page keeps showing its code, link and QR code while the room
    joins; `show_class_step` opens the step) or walk it alone (its first step opens)."""
    lesson_ = parse(lesson_json)
    st.session_state[LESSON] = lesson_json
    st.session_state.pop(GONE, None)
    if teach:
        code, key = store().open_class(json_of(lesson_))
        st.session_state.update({ROLE: "teacher", CODE: code, KEY: key, SERVER: store().server_id()})
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
    for done in ("_class_problem", GONE, "class_join_code"):
        st.session_state.pop(done, None)
    st.session_state.update({ROLE: "student", CODE: code, SEAT: seat, FOLLOW: True, SERVER: store().server_id()})
    where, lesson_ = current(code)
    go_to(lesson_.steps[where.step], where.step)


def join_from_page() -> None:
    """The class page's Join button."""
    join(st.session_state.get("class_join_code", ""), st.session_state.get("class_join_name", ""))


def join_link(code: str) -> str:
    """The link a student opens to join class `code` (the class page with the code filled in)."""
    return url.link("class", {"join": code})


def end() -> None:
    """The teacher ends the class (a callback): it is gone from the store for everyone."""
    try:
        store().close(st.session_state[CODE], st.session_state[KEY])
    except WrongKey:
        pass
    leave()


def leave() -> None:
    for key in (ROLE, CODE, KEY, SEAT, STEP, LESSON, FOLLOW, FOLLOW_TOGGLE, SERVER, GONE, "_class_problem",
                "class_join_code", VEIL, VEILED, REVEALED, CHECKED):
        st.session_state.pop(key, None)


def rejoin_from_url() -> None:
    """A new session (a reload, or a page that reconnected to a restarted server) finds its class from its first URL:
    a student's seat (join=, seat=) in a class that is still there; else what happened to it (`Gone`). join= alone
    fills in the code."""
    if st.session_state.get("_class_url_read"):
        return
    st.session_state["_class_url_read"] = True
    query = url.read()[0]
    if "teaching" in query:
        _teacher_from_url(query)
    elif "join" in query and "seat" in query:
        code = normalise_code(query["join"])
        if store().position(code) is not None:
            st.session_state[SEAT] = query["seat"]
            join(code, "")
        else:
            st.session_state[GONE] = Gone(code, why_gone(code, query.get("server", "")), url=_class_fields(query))
    elif "join" in query:
        st.session_state["class_join_code"] = normalise_code(query["join"])


def url_params() -> dict[str, str]:
    """What the URL keeps of the class (never the teacher key): a student's class, seat and store; a teacher's class,
    store and lesson; a gone class's the same until the tab joins or starts another (a reload says it again)."""
    state = st.session_state
    if role() == "student":
        return {"join": state[CODE], "seat": state[SEAT], "server": state[SERVER]}
    if role() == "teacher":
        return {"teaching": state[CODE], "server": state[SERVER], "lesson": _lesson_field(state[LESSON])}
    return state[GONE].url if GONE in state else {}


def _lesson_field(raw: str) -> str:
    return cache.for_the_class(("lesson field", raw), lambda: as_field(_parsed(raw)))


def _class_fields(query) -> dict[str, str]:
    return {name: query[name] for name in url.CLASS if name in query}


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


def add_this_view(slug: str, ask: bool = False) -> None:
    """A button's callback on any page: add the view on screen (page, model, sentence, layer, head, token, tab and
    the page's own fields) to the lesson being built; `ask`: with the question that fits it ("Ask the class")."""
    state = st.session_state
    view = {key: state[key] for key in ("text", "layer", "head", "token") if key in state} | {"model": model_name()}
    page = BY_SLUG[slug]
    fields = {key: state[key] for _, key in page.fields if key in state}
    step = step_from_view(slug, view, state.get(section_key(slug)), fields)
    add_step(replace(step, question=questions.suggested(slug, step.tab)) if ask else step)


def add_step(step: LessonStep) -> None:
    """Add `step` to the lesson being built (a discovery card's "Ask the class" too), and say how long it is."""
    steps = draft()
    if len(steps) < MAX_STEPS:
        steps.append(step)
    st.session_state["_lesson_added"] = len(steps)


def set_draft(lesson_: Lesson) -> None:
    st.session_state[DRAFT] = list(lesson_.steps)
    st.session_state["lesson_title"] = lesson_.title


def load_lesson_from_url() -> None:
    """`?lesson=...` in a session's first URL opens that lesson on the class page: a ready lesson's key picks it, a
    lesson's link becomes the lesson being built (a teacher's URL names their lesson so, after a restart too)."""
    if st.session_state.get("_lesson_link_loaded"):
        return
    st.session_state["_lesson_link_loaded"] = True
    value = url.read()[0].get("lesson")
    if value is None:
        return
    if value in ready_lessons():
        st.session_state["class_lesson"] = value
        return
    try:
        set_draft(from_link(value))
    except LessonError as problem:
        st.session_state["_class_problem"] = str(problem)


def lesson_link(lesson_: Lesson) -> str:
    return url.link("class", {"lesson": as_link(lesson_)})


# --- the question of a step ----------------------------------------------------------------------------------


def asked(step: LessonStep, name: str, text: str) -> Asked | None:
    """The step's question as the class sees it, answered by the step's model on the step's view, once per server
    (None: no question, or one this model or sentence cannot answer: `unanswerable` says why)."""
    try:
        return ask(step, name, text)
    except questions.Unanswerable:
        return None


def unanswerable(step: LessonStep, name: str, text: str) -> str | None:
    """Why the step's question cannot be asked on its model and sentence (None: it can, or it has none)."""
    try:
        ask(step, name, text)
    except questions.Unanswerable as problem:
        return str(problem)
    return None


def ask(step: LessonStep, name: str, text: str) -> Asked | None:
    """The step's question answered (questions.ask), computed once per server and kept for the class."""
    question = step.question
    if question is None:
        return None
    if not questions.KINDS[question.kind].needs_model:
        return questions.ask(question, None, None)
    name, text = step.view.get("model", name), step.view.get("text", text)
    try:
        bundle = get_bundle(name)
        reading = questions.reading(name, bundle, text, READ_LIMIT)
    except (KeyError, ValueError, OSError) as problem:
        raise questions.Unanswerable(f"The step's model {quote(name)} cannot read its sentence here ({problem}).") \
            from None
    cfg = bundle.model.cfg
    where = questions.place(step.view, cfg.n_layers, cfg.n_heads, len(reading.ids), step.fields)
    if step.fields.get("steer-by") == "feature":          # a pinned dictionary's feature, when this server has it
        where = replace(where, feature=pinned_feature(reading, where.layer, step.fields))
    learned = learning_for(reading) if question.kind == "first-right" else None    # the model at its steps here
    key = ("asked", model_key(name, bundle.model), reading.ids, where, question, learned and learned.steps)
    found = cache.for_the_class(key, lambda: _answered(question, reading, replace(where, learned=learned)))
    if isinstance(found, questions.Unanswerable):
        raise found
    return found


def _answered(question: questions.Question, reading, where: questions.Place) -> Asked | questions.Unanswerable:
    """The answer, or why there is none (kept too: a question this model cannot answer is not tried every poll)."""
    try:
        return questions.ask(question, reading, where)
    except questions.Unanswerable as problem:
        return problem


# --- guess first, then see: the veil over what answers an open question -------------------------------------------


def set_veil(name: str, text: str) -> None:
    """At the top of a full run, before the page draws: what this screen hides (the class's open question, or a
    lone walker's unchecked one: `current_veil`) and, once it is revealed, the question whose answer the page's
    charts point at (`revealed_here`). A teacher, every student and a lone walker: every screen of the class."""
    state = st.session_state
    state[VEIL] = state[VEILED] = state[REVEALED] = None
    if role() in ("teacher", "student"):
        found = current(state.get(CODE, ""))
        if found is None:
            return
        where, lesson_ = found
        index, revealed = where.step, where.is_revealed
    elif role() == "alone":
        lesson_, index = lesson(), state.get(STEP, 0)
        revealed = index in state.get(CHECKED, {})
    else:
        return
    step = lesson_.steps[index]
    if step.question is None:
        return
    asked_ = asked(step, *lesson_.reading_at(index, name, text))
    if asked_ is None:
        return
    if not revealed:
        state[VEIL], state[VEILED] = veil_for(asked_.kind, alone=role() == "alone"), index
    elif _on_the_steps_view(step, index):
        state[REVEALED] = asked_


def _on_the_steps_view(step: LessonStep, index: int) -> bool:
    """This screen shows step `index` on its page, with the model and sentence it names (a chart of another layer,
    head or token gets no pointer: a Target names its chart's title, explorer/pointer.py)."""
    state = st.session_state
    shown = {"model": model_name(), "text": state.get("text")}        # the model at its training step (Pythia's)
    return (state.get(STEP) == index and (state.get("_page") or "home") == step.page
            and all(shown[key] == value for key, value in step.view.items() if key in shown))


def current_veil() -> Veil | None:
    """What this run hides (set by `set_veil` at the top of the run)."""
    return st.session_state.get(VEIL)


def revealed_here() -> Asked | None:
    """The revealed question of the step on screen (its answer is pointed at on the page's charts)."""
    return st.session_state.get(REVEALED)


def _lift_the_veil_if_revealed(state: Position) -> None:
    """From the poll: the question this screen veiled was revealed, so the page is drawn again without the veil
    (within the poll's second, on every screen)."""
    if st.session_state.get(VEILED) == state.step and state.is_revealed:
        st.session_state[VEILED] = None
        st.rerun(scope="app")


def tally_frame(asked_: Asked, counts: dict[str, int], revealed: bool = False) -> pd.DataFrame:
    """The tally as a chart reads it: each option (the right one marked once revealed) and its students."""
    marked = [f"{o} ✓" if revealed and o == asked_.answer else o for o in asked_.options]
    return pd.DataFrame({"answer": marked, "students": [counts.get(o, 0) for o in asked_.options]})


def answer_words(asked_: Asked) -> str:
    """The revealed answer in words (Markdown): the model's with its number, the teacher's own, or a poll's none."""
    if asked_.kind == "poll":
        return "**A poll:** there is no right answer."
    if asked_.kind == "choice":
        return f"**The answer:** {quote(asked_.answer)}."
    number = asked_.shown.get(asked_.answer)           # a token count's answer is its own number
    return f"**The model's answer:** {quote(asked_.answer)}" + (f" ({escape(number)})." if number else ".")


def numbers_words(asked_: Asked, counts: dict[str, int]) -> str:
    """At the reveal, one line (a phone keeps the page's chart on its first screen): each option with the model's
    number for it ('top guess read there: “stage 1” the · ...') or, for a choice or a poll, the class's count."""
    if asked_.shown:
        return f"{escape(asked_.measure[:1].upper() + asked_.measure[1:])}: " + " · ".join(f"{quote(o)} {escape(asked_.shown.get(o, ''))}"
                                                          for o in asked_.options)
    return "The class: " + " · ".join(f"{quote(o)} {counts.get(o, 0)}" for o in asked_.options)


# --- what the class got right ------------------------------------------------------------------------------------

SUMMARY_SECONDS = 2.0               # the teacher's summary table refreshes this often on the class page


def asked_in(lesson_: Lesson, name: str, text: str) -> dict[int, Asked]:
    """Every question of the lesson as the class is asked it (those its models can answer), by step."""
    found = {n: asked(step, *lesson_.reading_at(n, name, text))
             for n, step in enumerate(lesson_.steps) if step.question}
    return {n: a for n, a in found.items() if a is not None}


@st.fragment(run_every=SUMMARY_SECONDS)
def class_summary(code: str, name: str, text: str) -> None:
    """The class page's table for the teacher, at any time: per question who answered, how many were right and the
    wrong answer given most; every answer as a CSV file (a student's name only where they gave one)."""
    found = current(code)
    if found is None:
        return
    asked_ = asked_in(found[1], name, text)
    if not asked_:
        st.caption("This lesson asks no question.")
        return
    s = store()
    answers = {n: s.answers(code, n) for n in asked_}
    st.dataframe(summary.summary_table(summary.summarise(asked_, answers)), hide_index=True)
    st.download_button("Download every answer (CSV)", summary.csv_of(summary.answers_table(asked_, answers,
                                                                                             s.roster(code))),
                       file_name=f"class-{code}-answers.csv", mime="text/csv", on_click="ignore", key="class_csv",
                       icon=":material/download:", help="One row per answer: the question, the student (their name "
                       "where they gave one, else a number), their answer and the right one. Nothing is kept once "
                       "the class ends: download it before.")


def own_summary(code: str, name: str, text: str) -> None:
    """A student's own answers in this class, and once revealed the right ones (the class page, and the class box
    on the lesson's last step)."""
    found = current(code)
    if found is None:
        return
    where, lesson_ = found
    asked_ = asked_in(lesson_, name, text)
    if not asked_:
        return
    seat = st.session_state[SEAT]
    mine = {n: store().my_answer(code, seat, n) for n in asked_}
    table = summary.own_table(asked_, {n: a for n, a in mine.items() if a is not None}, where.revealed)
    right = (table["right"] == "yes").sum()
    judged = table["right"].isin(["yes", "no"]).sum()
    st.markdown(f"**Your answers in this class:** {right} of {judged} revealed right." if judged else
                "**Your answers in this class**")
    st.dataframe(table, hide_index=True)


# --- a class that is gone: why, in plain words, and the way back -------------------------------------------------

RESTARTED, ENDED, EXPIRED, KEY_LOST = "restarted", "ended", "expired", "key lost"


@dataclass(frozen=True)
class Gone:
    """A class this tab was in that is gone (for a reloaded teacher's tab: no longer its to lead), and why: the class
    box says it (`gone_message`). `url` is what the tab's URL keeps meanwhile, so that a reload says it again."""
    code: str
    why: str                                 # RESTARTED, ENDED, EXPIRED or KEY_LOST
    lesson: str | None = None                # the teacher's lesson (JSON), to start it again in one click
    teacher: bool = False
    url: dict = field(default_factory=dict)


def why_gone(code: str, server: str) -> str:
    """Why class `code`, started or joined when the store's server_id was `server`, is not in the store: the server
    restarted (the store is a new one), its teacher ended it, or it expired (or the code never was one)."""
    if server != store().server_id():
        return RESTARTED
    return ENDED if store().ended(code) else EXPIRED


def _teacher_from_url(query) -> None:
    """A teacher's tab in a new session: its class is gone, or is still there (a reload, or its replica restarted
    with the class in Redis) but this session has no teacher key. Either way, the lesson again is one click away."""
    code = normalise_code(query["teaching"])
    try:
        lesson_ = from_field(query.get("lesson", "")).to_json()
    except LessonError:
        lesson_ = None
    why = KEY_LOST if store().position(code) is not None else why_gone(code, query.get("server", ""))
    st.session_state[GONE] = Gone(code, why, lesson_, teacher=True, url=_class_fields(query))


def class_gone(code: str) -> None:
    """From the poll: this session's class is gone. Leave it, remember why, and run the app again (its class box
    says it)."""
    teacher = role() == "teacher"
    gone = Gone(code, why_gone(code, st.session_state.get(SERVER, "")),
                st.session_state.get(LESSON) if teacher else None, teacher=teacher, url=url_params())
    leave()
    st.session_state[GONE] = gone
    st.rerun(scope="app")


def gone_message(gone: Gone) -> str:
    """What happened to the class, and what to do, in plain words (Markdown)."""
    code, hours = escape(gone.code), IDLE_SECONDS // 3600
    restarted = (f"**Class {code} ended because the server restarted.** The app was woken up, updated or restarted "
                 "after a problem, and a class lives in the server's memory.")
    if gone.teacher:
        return {RESTARTED: f"{restarted} Start the lesson again: your students join with the new code.",
                ENDED: f"**Class {code} has ended.** Start the lesson again for a new code.",
                EXPIRED: f"**Class {code} ended**: nobody used it for {hours} hours. Start the lesson again: your "
                         "students join with the new code.",
                KEY_LOST: f"**This tab no longer leads class {code}.** It was reloaded, or its server restarted, and "
                          "the teacher key lives only in the tab that started the class (never in a link). Start the "
                          "lesson again, and ask your students to join the new code."}[gone.why]
    return {RESTARTED: f"{restarted} Your teacher can start it again with a new code: type it here to join.",
            ENDED: f"**Your teacher ended class {code}.** To join another class, type its code here.",
            EXPIRED: f"**There is no class {code} any more.** A class ends after {hours} idle hours. To join a class, "
                     "type the code your teacher gives you."}[gone.why]


def start_again() -> None:
    """The teacher's one click after a gone class: the same lesson as a new class (a new code), on the class page."""
    start(st.session_state[GONE].lesson, teach=True)
    st.session_state[GO] = BY_SLUG["class"].file


def join_form() -> None:
    """A class code, an optional name and Join: the class page's join box, and a gone class's."""
    code = st.text_input("Class code", key="class_join_code", max_chars=16, placeholder="e.g. K7QX2M")
    st.text_input("Your name (optional)", key="class_join_name", max_chars=40,
                  help="Shown to your teacher as plain text. Leave it empty to stay anonymous.")
    st.button("Join", key="class_join", on_click=join_from_page, type="primary", icon=":material/login:",
              disabled=not code.strip())


def _gone_box() -> None:
    gone = st.session_state[GONE]
    st.markdown(gone_message(gone))
    if not gone.teacher and st.session_state.get("_page") != "class":     # the class page has a join box of its own
        if st.session_state.get("_class_problem"):
            st.warning(escape(st.session_state["_class_problem"]), icon=":material/info:")
        join_form()
    with st.container(horizontal=True):
        if gone.lesson is not None:
            st.button(f"Start {quote(_parsed(gone.lesson).title)} again", key="class_start_again",
                      on_click=start_again, type="primary", icon=":material/replay:")
        elif gone.teacher:
            st.page_link(BY_SLUG["class"].file, label="Choose a lesson on the Class page", icon=":material/school:")
        st.button("Close this message", key="class_gone_close", on_click=leave, icon=":material/close:")


# --- the class box ---------------------------------------------------------------------------------------------


def class_box(name: str, text: str) -> None:
    """The class box at the top of every page, for a session in a class or walking a lesson (in the main area, not
    the sidebar: a phone hides its sidebar, and a projector shows the tally). One short row, so the page's chart
    keeps the first screen of a projector and of a phone: where the class is, then the teacher's (or a lone
    walker's) Previous and Next, or a student's Follow; the step's note and the join code behind a button."""
    if st.session_state.pop(MOVED, False):
        _to_the_top(key="class_to_the_top")
    if role() is None:
        if GONE in st.session_state:
            with st.container(border=True, key="class_box"):
                _gone_box()
        return
    with st.container(border=True, key="class_box"):
        if role() == "alone":
            _alone(name, text)             # nothing to poll
        elif role() == "teacher":
            _teacher_row(name, text)
        else:
            _box(name, text)


# A new step opens at the top of its page, whatever was scrolled before (a page switch and a rerun of the same page
# keep the scroll position): the class box and the step's chart are its first screen. Drawn only on the run that
# opens a step, so it runs once (its element is hidden: explorer/app/styles.py).
_to_the_top = st.components.v2.component("explorer_to_the_top", html="", js=front_end("to_the_top.js"))


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
        class_gone(code)                   # the app runs again, and its class box says why
    state, lesson_ = found
    step = lesson_.steps[state.step]
    if _page_went_blank():                 # drawn again, as the class's step (a dropped page loses its open tab too)
        if role() == "teacher" or st.session_state.get(FOLLOW, True):
            go_to(step, state.step)
        st.rerun(scope="app")
    if role() == "teacher" and _shown_step() != state.step:    # moved from the teacher's second screen (peek.py)
        go_to(step, state.step)
        open_pending()
    _lift_the_veil_if_revealed(state)
    if role() == "teacher":
        _teacher(code, lesson_, state, step, name, text)
    else:
        _student(code, lesson_, state, step, name, text)


def _move(index: int) -> None:
    lesson_ = lesson()
    index = max(0, min(index, len(lesson_.steps) - 1))
    if role() == "teacher":
        try:
            store().move(st.session_state[CODE], st.session_state[KEY], index)
        except WrongKey:
            return                         # the class is gone: the poll says why
    go_to(lesson_.steps[index], index)


def _alone(name: str, text: str) -> None:
    lesson_ = lesson()
    index = st.session_state.get(STEP, 0)
    where = _step_row(index, len(lesson_.steps), lesson_.steps[index].note)
    where.markdown(f"**{escape(lesson_.title)}** · step {index + 1} of {len(lesson_.steps)}")
    asked_ = asked(lesson_.steps[index], *lesson_.reading_at(index, name, text))
    if asked_ is not None:
        _own_question(index, asked_)


def _own_question(index: int, asked_: Asked) -> None:
    """A lone walker's question, guess first, then see: the choices and "Check my guess" (what answers it is veiled
    on the page meanwhile); once checked, the answer beside their guess, as a class's reveal shows it."""
    checked = st.session_state.setdefault(CHECKED, {})
    if index not in checked:
        st.markdown(escape(asked_.prompt))
        row = st.container(horizontal=True, vertical_alignment="center")
        choice = row.radio(escape(asked_.prompt), asked_.options, key=f"alone_answer_{index}", horizontal=True,
                           format_func=escape, index=None, label_visibility="collapsed")
        row.button("Check my guess", key="alone_check", on_click=_check, args=(index, choice),
                   disabled=choice is None, icon=":material/visibility:",
                   help="Show the answer, and what the page hid until you guessed")
        return
    mine = checked[index]
    right = asked_.right(mine)
    st.markdown(answer_words(asked_) + "  \n" + f"**Your guess:** {quote(mine)}"
                + {True: " — right!", False: ".", None: "."}[right])
    if asked_.said:
        st.markdown(asked_.said)
    if asked_.shown:
        st.caption(numbers_words(asked_, {}))


def _check(index: int, choice: str | None) -> None:
    if choice is not None:
        st.session_state.setdefault(CHECKED, {})[index] = choice


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
    name, text = lesson_.reading_at(state.step, name, text)
    asked_ = asked(step, name, text)
    if asked_ is None:
        problem = unanswerable(step, name, text)
        st.markdown(f"{where} · {_present(present)}")
        if problem:
            st.caption(f"This step's question is not asked: {escape(problem)}")
        return
    counts = s.tally(code, state.step)
    line = st.container(horizontal=True, vertical_alignment="center")
    line.markdown(f"{where} · **{sum(counts.values())} of {present}** answered", width="content")
    if state.is_revealed:
        share = summary.share_words(summary.QuestionSummary(state.step, asked_, counts))
        line.markdown(answer_words(asked_) + (f" **{share}.**" if share else ""), width="content")
    else:
        line.button("Reveal", key="class_reveal", on_click=_reveal, args=(state.step,), icon=":material/visibility:",
                    help="Show every student the answer; answers close.")
    prompt, tally = st.columns([3, 2], vertical_alignment="center")
    prompt.markdown(escape(asked_.prompt))
    if state.is_revealed and asked_.said:
        prompt.markdown(asked_.said)
    ink = st.get_option(f"theme.{'dark' if st.context.theme.type == 'dark' else 'light'}.textColor")
    text_px = PRESENTER_TEXT_PX if st.session_state.get("presenter") else BODY_TEXT_PX
    tally.altair_chart(tally_chart(asked_, counts, present, state.is_revealed, ink, text_px), width="stretch")


# An answer's words beside its bar, up to this wide (Vega-Lite cuts a label at 180 px by default: on a projector
# "layer 1: after feed-forward" was shown as "layer 1: afte…").
TALLY_LABEL_PX = 400


def tally_chart(asked_: Asked, counts: dict[str, int], present: int, revealed: bool = False,
                ink: str = "#111111", text_px: int = PRESENTER_TEXT_PX) -> alt.LayerChart:
    """The live tally: a labelled bar per answer (in the order the students see them, the right one marked once
    revealed) with its count, on a scale of the students present (a bar across the whole width: all of them). Its
    words and counts in `ink`, the page theme's text colour (Streamlit's chart theme leaves a count's text black,
    unreadable on the dark theme), each label beside its bar (the theme pushed the first one up, over the second),
    and as large as the page's text (`text_px`: a projector's back row reads them). A row of 1.25 lines an
    answer: a projector's first screen keeps the page's chart under the question."""
    frame = tally_frame(asked_, counts, revealed)
    base = alt.Chart(frame).encode(
        y=alt.Y("answer:N", sort=list(frame["answer"]), title=None,
                axis=alt.Axis(labelOverlap=False, labelFlush=False, labelColor=ink, ticks=False, domain=False,
                              labelPadding=6, labelLimit=TALLY_LABEL_PX)),
        x=alt.X("students:Q", title=None, scale=alt.Scale(domain=[0, max(1, present)]), axis=None))
    bars = base.mark_bar(color="#4477AA")
    numbers = base.mark_text(align="left", dx=4, fontSize=text_px, color=ink).encode(text="students:Q")
    return ((bars + numbers).properties(height=round(1.25 * text_px) * len(asked_.options))
            .configure_axis(labelFontSize=text_px).configure_view(stroke=None))


def _reveal(index: int) -> None:
    try:
        store().reveal(st.session_state[CODE], st.session_state[KEY], index)
    except WrongKey as problem:
        st.session_state["_class_problem"] = str(problem)


# The page under the class box went blank: Streamlit (1.67) sometimes drops the elements a run of the app has just
# drawn when the class's poll runs right after it (tests/test_browser_lessons.py saw about one phone step in four
# stay blank for good but for the class box; with the placeholder in streamlit_app.py and no file watcher, still a
# teacher's page and a phone's in one walk of the four lessons out of two; Streamlit's tracker has the like: #9188).
# Checked at each poll, once the app is idle: no page title left means the page was dropped, and the poll opens the
# class's step again.
_blank_watch = st.components.v2.component("explorer_blank_watch", html="", js=front_end("blank_watch.js"))


def _page_went_blank() -> bool:
    """The browser said its page went blank (a poll's check, `_blank_watch`)."""
    seen = _blank_watch(data={"poll": secrets.token_hex(4)}, key="class_blank_watch", on_blank_change=lambda: None)
    return bool(getattr(seen, "blank", None))


def _student(code, lesson_, state, step, name, text) -> None:
    """A student's row (where the class is, Follow), at a question its choices in a row and Send, and at the
    lesson's end their own answers: short, so a phone's first screen keeps the page's chart."""
    s = store()
    seat = st.session_state[SEAT]
    following = st.session_state.get(FOLLOW, True)
    if following and st.session_state.get(STEP) != state.step:
        go_to(step, state.step)            # the teacher moved: one full run opens the class's step
    open_pending()                         # ... or "Back to the class's view" was pressed
    s.seen(code, seat)
    row = st.container(horizontal=True, vertical_alignment="center", wrap=False)   # one row on a phone: a wide code
    row.markdown(f"**Class {code}** · step {state.step + 1} of {len(lesson_.steps)}")   # wraps its words, not the row
    st.session_state[FOLLOW_TOGGLE] = following
    row.toggle("Follow the teacher", key=FOLLOW_TOGGLE, on_change=_keep_follow)   # off: explore on your own
    here = st.session_state.get("_page") or "home"
    if st.session_state.get(STEP) != state.step or not following or here != step.page:
        st.button("Back to the class's view", key="class_back", on_click=_back, args=(step, state.step),
                  icon=":material/groups:")
    asked_ = asked(step, *lesson_.reading_at(state.step, name, text))
    if asked_ is not None:
        _question(code, seat, state, asked_)
    if state.step == len(lesson_.steps) - 1 and (asked_ is None or state.is_revealed):
        with st.expander("Your answers in this class", icon=":material/checklist:"):    # the lesson's end, once its
            own_summary(code, name, text)                                               # last question is revealed


def _question(code: str, seat: str, state: Position, asked_: Asked) -> None:
    """A student's question: the prompt, then the choices in a row with Send; after the reveal, the answer beside
    their guess and the numbers in one line (on a phone only the class's: a model's numbers are on the page's chart,
    which the first screen keeps under the box)."""
    s = store()
    mine = s.my_answer(code, seat, state.step)
    if not state.is_revealed:
        st.markdown(escape(asked_.prompt))
        answer = st.container(horizontal=True, vertical_alignment="center")      # Send beside the choices
        choice = answer.radio(escape(asked_.prompt), asked_.options, key=f"class_answer_{state.step}", horizontal=True,
                              format_func=escape, index=asked_.options.index(mine) if mine in asked_.options else None,
                              label_visibility="collapsed")
        answer.button("Send", key="class_send", on_click=_answer, args=(code, seat, state.step, choice),
                      disabled=choice is None, icon=":material/send:", help="Send my answer to the teacher")
        if mine is not None:
            st.caption(f"Your answer: {quote(mine)}. You can change it until the teacher reveals.")
        return
    right = None if mine is None else asked_.right(mine)
    st.markdown(answer_words(asked_) + "  \n"
                + (f"**Your guess:** {quote(mine)}" + {True: " — right!", False: ".", None: "."}[right]
                   if mine is not None else "You did not answer this one."))
    if asked_.said:
        st.markdown(asked_.said)
    if not (asked_.shown and on_a_phone()):
        st.caption(numbers_words(asked_, s.tally(code, state.step) if not asked_.shown else {}))


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
