"""The app in this process through Streamlit's AppTest, as a visitor's script runs cost the server."""
import contextlib
import logging
from pathlib import Path
from unittest import mock

from .live import ROOT

APP = str(ROOT / "streamlit_app.py")
_patched = False


def pages_run_through_the_entry_point() -> None:
    """Make AppTest's switch_page run streamlit_app.py (with its sidebar), as a real browser does (as the
    tests' conftest does): with a pages/ folder present Streamlit would run the page file alone."""
    global _patched
    if _patched:
        return
    from streamlit.runtime import pages_manager

    original = pages_manager.PagesManager.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        pages_manager.PagesManager.uses_pages_directory = False

    pages_manager.PagesManager.__init__ = init
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").setLevel(logging.ERROR)
    _patched = True


def open_app(page_file: str | None, timeout: float = 60, **query):
    """An AppTest of the app with these URL parameters, run once, then switched to `page_file`
    ("pages/attention.py"; None: the home page)."""
    from streamlit.testing.v1 import AppTest

    pages_run_through_the_entry_point()
    at = AppTest.from_file(APP, default_timeout=timeout)
    for key, value in query.items():
        at.query_params[key] = str(value)
    at.run()
    if page_file is not None:
        at.switch_page(page_file).run()
    return at


def empty_page(folder: Path):
    """An AppTest of a page with nothing but a title: what any script run costs."""
    from streamlit.testing.v1 import AppTest

    empty = Path(folder) / "empty_page.py"
    empty.write_text("import streamlit as st\n\nst.title('An empty page')\n")
    return AppTest.from_file(str(empty), default_timeout=60)


def raised(at) -> str:
    """The start of the exception the page shows, or "" (a broken page is fast for the wrong reason)."""
    return at.exception[0].message[:80] if at.exception else ""


def fragment_ids(at) -> list[str]:
    """The ids of the fragments the last full run registered (AppTest keeps them between runs)."""
    return list(at._fragment_storage._fragments)


def run_fragment(at, fragment_id: str, timeout: float = 60) -> int:
    """Run one fragment alone, as a server does when its `run_every` timer fires (AppTest has no such run: its
    run_every never ticks). What the fragment asks for (st.switch_page, st.rerun) follows in the same call, as on
    a server. Returns how many full runs followed (0: the fragment ran alone, and the page keeps its last tree).
    (Uses AppTest's private runner: a benchmark's and tests' tool, pinned to the Streamlit in requirements.txt.)"""
    from functools import partial

    from streamlit.testing.v1 import app_test, local_script_runner

    pages = dict(at._registered_pages)
    runners = []

    def runner(*args, **kwargs):
        made = local_script_runner.LocalScriptRunner(*args, **kwargs)
        args[2]._set_pages(pages)                 # the session's pages, as a server's session keeps them
        runners.append(made)
        return made

    tree = at._tree
    at._page_hash = ""                 # the page the last run finished on (AppTest keeps a switch_page's target)
    poll = partial(local_script_runner.RerunData, fragment_id_queue=[fragment_id], is_auto_rerun=True)
    with mock.patch.object(app_test, "LocalScriptRunner", runner), \
            mock.patch.object(local_script_runner, "RerunData", poll):
        at.run(timeout=timeout)
    started = [data for data in runners[0].event_data if "fragment_ids_this_run" in data]   # SCRIPT_STARTED
    full_runs = sum(data["fragment_ids_this_run"] is None for data in started)
    if not full_runs:
        at._tree = tree
    return full_runs


@contextlib.contextmanager
def compiled_once():
    """AppTest compiles the app's scripts again on every run (a new ScriptCache per run); a server compiles each
    once and keeps the bytecode for every session. Within this block, AppTest runs share one cache, as a server's
    sessions do (the classroom bench measures what a server spends per run)."""
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache
    from streamlit.testing.v1 import app_test, local_script_runner

    shared = ScriptCache()
    with mock.patch.object(app_test, "ScriptCache", lambda: shared), \
            mock.patch.object(local_script_runner, "ScriptCache", lambda: shared):
        yield
