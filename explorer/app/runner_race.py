"""A race in Streamlit 1.67's server that drops the end of a page run, and the one change that closes it.

A session runs its script on a ScriptRunner thread; everything a run sends (each element, then "script finished")
reaches the browser through callbacks the thread queues on the server's event loop, and AppSession drops the
callbacks of a runner that is no longer its current one. A runner whose run ended, with nothing else to do, stops.
When a fragment's `run_every` timer asks for a run just then, the stopped runner refuses it, and AppSession starts a
new runner at once, making the stopped one "not current" while its last callbacks still wait in the loop's queue:
the rest of the page run and its end are thrown away. The browser keeps the half-drawn page (the old step's
elements below the new step's top), with the app "running" for good; nothing runs it again.

On a quiet server the loop takes those callbacks within milliseconds, so it is rare; on a busy one (Community
Cloud's shared cores, a class of 30 whose full runs end together) it is common: measured with bench/cloud.py
(websocket students following a teacher at 1 core), 6-13 of 30 students were left on a half-drawn step before this
change, none after. (Streamlit's own guard, for a fragment that no longer exists, cites the same race:
streamlit/streamlit#9921.)

The change: a fragment's run that needs a new runner while the old one is still the current one waits one turn of
the event loop, behind the callbacks the old runner queued before it stopped; then it starts as before (or joins
the queue of a runner started meanwhile).
"""
import asyncio

from streamlit.runtime.app_session import AppSession, AppSessionState

_streamlits_own = AppSession._create_scriptrunner


def _create_scriptrunner(session: AppSession, rerun_data) -> None:
    stopped = session._scriptrunner
    if rerun_data.fragment_id and stopped is not None:
        # AppSession.request_rerun only gets here for a fragment when the current runner refused it: it has
        # stopped, and the callbacks it queued before stopping (the end of its run) are still to come.
        asyncio.get_running_loop().call_soon(_after_the_stopped_runner, session, stopped, rerun_data)
        return
    _streamlits_own(session, rerun_data)


def _after_the_stopped_runner(session: AppSession, stopped, rerun_data) -> None:
    """The stopped runner's run has reached the browser: run the fragment, unless its session or fragment is gone."""
    if session._state == AppSessionState.SHUTDOWN_REQUESTED or not session.has_fragment(rerun_data.fragment_id):
        return                                   # the tab closed, or a full run since then dropped the fragment
    current = session._scriptrunner
    if current is None or current is stopped:
        _streamlits_own(session, rerun_data)
    elif not current.request_rerun(rerun_data):  # a runner started meanwhile: the fragment runs after its run,
        _create_scriptrunner(session, rerun_data)     # or, if that one has stopped too, after its callbacks


def install() -> None:
    """Apply the change to this server's AppSession (once; safe to call on every run)."""
    AppSession._create_scriptrunner = _create_scriptrunner
