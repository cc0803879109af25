"""explorer/app/runner_race.py: a fragment's run that needs a new ScriptRunner waits until the stopped runner's
queued callbacks (the end of its page run) have gone through the event loop. The class benchmark (bench/cloud.py:
30 students following a teacher at 1 core) is where the race showed; here its order is checked step by step."""
import asyncio
import inspect
from concurrent.futures import ThreadPoolExecutor

import pytest
from streamlit.runtime.app_session import AppSession, AppSessionState
from streamlit.runtime.scriptrunner_utils.script_requests import RerunData

from explorer.app import runner_race


class Runner:
    def __init__(self, accepts: bool):
        self.accepts, self.asked = accepts, []

    def request_rerun(self, rerun_data) -> bool:
        self.asked.append(rerun_data)
        return self.accepts


class Session:
    """What runner_race reads of an AppSession."""

    def __init__(self, runner, fragments=("poll",)):
        self._scriptrunner, self._state, self.fragments = runner, AppSessionState.APP_IS_RUNNING, set(fragments)

    def has_fragment(self, fragment_id: str) -> bool:
        return fragment_id in self.fragments


def on_an_event_loop(run) -> None:
    """Run coroutine function `run` on an event loop of its own, in a thread of its own (as Streamlit's server runs
    its loop; a browser test's Playwright may hold this thread's loop)."""
    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, run()).result()


@pytest.fixture
def created(monkeypatch) -> list:
    """The runs Streamlit's own _create_scriptrunner was asked to start, in order, among the loop's other events."""
    events: list = []

    def create(session, rerun_data):
        events.append(("new runner", rerun_data.fragment_id))
        session._scriptrunner = Runner(accepts=True)

    monkeypatch.setattr(runner_race, "_streamlits_own", create)
    return events


def test_the_fragment_waits_for_the_stopped_runners_callbacks(created):
    stopped = Runner(accepts=False)
    session = Session(stopped)

    async def run():
        loop = asyncio.get_running_loop()
        loop.call_soon_threadsafe(created.append, "the end of the page run reaches the browser")
        runner_race._create_scriptrunner(session, RerunData(fragment_id="poll"))
        created.append("request handled")
        for _ in range(3):
            await asyncio.sleep(0)
    on_an_event_loop(run)
    assert created == ["request handled", "the end of the page run reaches the browser", ("new runner", "poll")]
    assert session._scriptrunner is not stopped


def test_a_full_run_and_a_first_run_start_at_once(created):
    async def run():
        runner_race._create_scriptrunner(Session(Runner(accepts=False)), RerunData())      # a full run (fastReruns)
        runner_race._create_scriptrunner(Session(None), RerunData(fragment_id="poll"))     # no runner yet
        created.append("request handled")
    on_an_event_loop(run)
    assert created == [("new runner", None), ("new runner", "poll"), "request handled"]


def test_a_runner_started_meanwhile_takes_the_fragment_after_its_run(created):
    session = Session(Runner(accepts=False))
    newer = Runner(accepts=True)

    async def run():
        runner_race._create_scriptrunner(session, RerunData(fragment_id="poll"))
        session._scriptrunner = newer                 # a click started a full run before the loop turned
        for _ in range(3):
            await asyncio.sleep(0)
    on_an_event_loop(run)
    assert created == [] and [r.fragment_id for r in newer.asked] == ["poll"]


def test_nothing_runs_for_a_fragment_or_a_tab_that_is_gone(created):
    gone_fragment = Session(Runner(accepts=False), fragments=())
    closed_tab = Session(Runner(accepts=False))
    closed_tab._state = AppSessionState.SHUTDOWN_REQUESTED

    async def run():
        for session in (gone_fragment, closed_tab):
            runner_race._create_scriptrunner(session, RerunData(fragment_id="poll"))
        for _ in range(3):
            await asyncio.sleep(0)
    on_an_event_loop(run)
    assert created == []


def test_streamlit_still_has_the_race_this_change_is_for():
    """If an upgrade of Streamlit changes either side of the race, this says so (and the change may go)."""
    request = inspect.getsource(AppSession.request_rerun)
    handle = inspect.getsource(AppSession._handle_scriptrunner_event_on_event_loop)
    assert "success = self._scriptrunner.request_rerun(rerun_data)" in request
    assert request.rstrip().endswith("self._create_scriptrunner(rerun_data)")
    assert "if sender is not self._scriptrunner:" in handle
    runner_race.install()
    assert AppSession._create_scriptrunner is runner_race._create_scriptrunner
