"""The teacher's second screen: a laptop beside the projector, or the teacher's phone, shows what the projector must
not show yet (the open question's answer with its number, and the step's note) and leads the class too: Previous,
Next and Reveal.

The teacher's class page offers its link (`link`): the class page with `peek=` (the class), `key=` (the peek key,
`explorer.classroom.store.peek_key` of the teacher key: it moves the class and reveals, but cannot end the class, and
the teacher key itself never leaves the teacher's tab) and `server=` (the store's life, so that a restart is told as
on the other screens). A session opened with it reads them once (`from_url`) and keeps them in its own URL, so a
reload opens the second screen again. It never joins the class, so it is never counted as a student nor tallied. The
class page draws it (`second_screen`), polling the store each POLL_SECONDS; the projector follows its Previous and
Next through its own poll (`explorer/app/classroom.py`), as a student follows the teacher.
"""
from dataclasses import dataclass

import streamlit as st

from explorer.classroom.store import WrongKey, normalise_code, peek_key
from explorer.registry import BY_SLUG
from explorer.view import escape, quote

from . import classroom, url

PEEK = "_class_peek"                # this session's Peek: the class whose second screen it is


@dataclass(frozen=True)
class Peek:
    """A second screen's class, from its link."""
    code: str
    key: str                        # the peek key from the link (checked by the store at every read and move)
    server: str                     # the store's server_id when the link was made


def link() -> str:
    """The teacher's second screen's link (from their tab, which holds the teacher key; a secret: it leads the class)."""
    state = st.session_state
    return url.link("class", {"peek": state[classroom.CODE], "key": peek_key(state[classroom.KEY]),
                              "server": state[classroom.SERVER]})


def from_url() -> None:
    """A new session opened with a second screen's link (or reloaded) becomes that class's second screen."""
    if st.session_state.get("_peek_url_read"):
        return
    st.session_state["_peek_url_read"] = True
    query = url.read()[0]
    if "peek" in query:                    # a link without its key is refused as a wrong one is
        st.session_state[PEEK] = Peek(normalise_code(query["peek"]), query.get("key", ""), query.get("server", ""))


def url_params() -> dict[str, str]:
    """What the URL keeps of a second screen: its link's parameters (nothing for any other session)."""
    peek = st.session_state.get(PEEK)
    return {} if peek is None else {"peek": peek.code, "key": peek.key, "server": peek.server}


def active() -> bool:
    return PEEK in st.session_state


def second_screen(name: str, text: str) -> None:
    """The class page of a second screen: the class's step, its note and question with the answer, and the controls;
    or, for a class that is gone or a link that does not lead it, why in plain words (and no control)."""
    peek = st.session_state[PEEK]
    if classroom.store().position(peek.code) is None:
        st.info(gone_message(peek), icon=":material/info:")
    elif not classroom.store().leads(peek.code, peek.key):
        st.error(f"**This link does not lead class {escape(peek.code)}.** A second screen's link is made by the "
                 "teacher's tab that started the class (the Class page, “Your second screen”): open that link "
                 "again, whole.", icon=":material/key_off:")
    else:
        _screen(name, text)


def gone_message(peek: Peek) -> str:
    """Why the second screen's class is gone, in plain words (Markdown), as the teacher's tab says it."""
    code, why = escape(peek.code), classroom.why_gone(peek.code, peek.server)
    return {classroom.RESTARTED: f"**Class {code} ended because the server restarted.** A class lives in the server's "
                                 "memory. Start the lesson again on your teacher's tab, and open its new second "
                                 "screen's link.",
            classroom.ENDED: f"**Class {code} has ended.** A new class has a new second screen's link, on the Class "
                             "page of the tab that starts it.",
            classroom.EXPIRED: f"**There is no class {code} any more.** A class ends after "
                               f"{classroom.IDLE_SECONDS // 3600} idle hours."}[why]


@st.fragment(run_every=classroom.POLL_SECONDS)
def _screen(name: str, text: str) -> None:
    """Polled: where the class is and the step's note; at a question its prompt, the answer with its number and the
    model's sentence (revealed or not), and who has answered what; Previous, Next and Reveal."""
    peek = st.session_state.get(PEEK)
    found = None if peek is None else classroom.current(peek.code)
    if found is None:
        st.rerun(scope="app")              # gone: the page says why
    where, lesson_ = found
    step, count = lesson_.steps[where.step], len(lesson_.steps)
    asked_ = classroom.asked(step, *lesson_.reading_at(where.step, name, text))
    present = classroom.store().present(peek.code)
    st.markdown(f"**Class {escape(peek.code)}** · step {where.step + 1} of {count} · "
                f"{escape(BY_SLUG[step.page].title)} · {present} student{'s' * (present != 1)} present")
    row = st.container(horizontal=True)
    row.button("Previous", key="peek_previous", on_click=_move, args=(where.step - 1,), disabled=where.step == 0,
               icon=":material/arrow_back:")
    row.button("Next", key="peek_next", on_click=_move, args=(where.step + 1,), disabled=where.step + 1 >= count,
               icon=":material/arrow_forward:", type="primary")
    if asked_ is not None:
        row.button("Reveal", key="peek_reveal", on_click=_reveal, args=(where.step,), disabled=where.is_revealed,
                   icon=":material/visibility:", help="Show every screen the answer; answers close.")
    if st.session_state.get("_peek_problem"):
        st.warning(escape(st.session_state["_peek_problem"]), icon=":material/info:")
    st.markdown(f"**Note:** {escape(step.note)}" if step.note else "This step has no note.")
    if asked_ is None:
        problem = classroom.unanswerable(step, *lesson_.reading_at(where.step, name, text))
        if problem:
            st.caption(f"This step's question is not asked: {escape(problem)}")
        return
    counts = classroom.store().tally(peek.code, where.step)
    st.markdown(f"**Question:** {escape(asked_.prompt)}")
    st.markdown(classroom.answer_words(asked_) + " " + ("*Revealed: every screen shows it.*" if where.is_revealed
                                                        else "*Not revealed: only this screen shows it.*"))
    if asked_.said:
        st.markdown(asked_.said)
    if asked_.shown:
        st.caption(classroom.numbers_words(asked_, {}))
    st.markdown(f"**{sum(counts.values())} of {present}** answered: "
                + " · ".join(f"{quote(o)} {counts.get(o, 0)}" for o in asked_.options))


def _move(index: int) -> None:
    _lead(classroom.store().move, index)


def _reveal(index: int) -> None:
    _lead(classroom.store().reveal, index)


def _lead(action, index: int) -> None:
    """`action` (the store's move or reveal) at step `index`, with the second screen's key: the projector's poll
    follows."""
    peek = st.session_state[PEEK]
    try:
        action(peek.code, peek.key, index)
        st.session_state.pop("_peek_problem", None)
    except WrongKey as problem:            # the class ended meanwhile: the next poll says so
        st.session_state["_peek_problem"] = str(problem)
