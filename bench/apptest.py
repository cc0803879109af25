"""The app in this process through Streamlit's AppTest, as a visitor's script runs cost the server."""
import logging
from pathlib import Path

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
