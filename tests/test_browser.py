"""The app in a real browser: headless Chromium (Debian's) driven by Playwright against `streamlit run`.

What AppTest cannot see: that every page's figures are really drawn, that the sidebar drives the page,
that a copied link reopens a view, and that user text stays text (no script runs, no element appears).
Under CI (CI=true) a missing Chromium or Playwright fails these tests; on a laptop without them they skip.
"""
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote_plus

import pytest

from explorer.steps import STEPS

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect, sync_playwright
except ImportError:                      # checked in the `chromium` fixture: fail under CI, skip elsewhere
    sync_playwright = None

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]
WITHOUT_CHARTS = {"home"}                # every other step page draws Plotly figures
XSS = "<img src=x onerror=alert(1)>"
TIMEOUT = 30_000                         # ms; the first page of a fresh server loads the model


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def app_url():
    """`streamlit run streamlit_app.py` on a free local port, for the whole session."""
    port = free_port()
    log = tempfile.NamedTemporaryFile("w+", prefix="streamlit-", suffix=".log", delete=False)
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "streamlit_app.py", "--server.address", "127.0.0.1",
         "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if urllib.request.urlopen(base + "/_stcore/health", timeout=1).status == 200:
                    break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                pytest.fail("streamlit did not start:\n" + log.read()[-3000:])
            time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)
        log.close()
        os.unlink(log.name)


@pytest.fixture(scope="session")
def chromium():
    """Debian's Chromium through Playwright (never a downloaded browser)."""
    missing = [what for what, ok in (("Playwright", sync_playwright is not None),
                                     (CHROMIUM, os.path.exists(CHROMIUM))) if not ok]
    if missing:
        message = f"{' and '.join(missing)} not installed (apt-get install chromium; pip install playwright)"
        if in_ci():
            pytest.fail("the browser tests must run in CI: " + message)
        pytest.skip(message)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def browser_context(chromium):
    """One browser profile for the session, so the app's scripts are downloaded once and cached."""
    context = chromium.new_context(viewport={"width": 1280, "height": 1000})
    yield context
    context.close()


@pytest.fixture
def tab(browser_context, app_url):
    """A fresh tab (a new Streamlit session) that records any JavaScript dialog it is shown."""
    page = browser_context.new_page()
    page.set_default_timeout(TIMEOUT)
    page.dialogs = []

    def on_dialog(dialog):
        page.dialogs.append(dialog.message)
        dialog.dismiss()
    page.on("dialog", on_dialog)
    yield page
    page.close()


def wait_until_run(page) -> None:
    """Wait for the app to finish its script run (as ../shared/tools/snap.py does)."""
    page.wait_for_selector("[data-testid='stApp']")
    page.wait_for_timeout(300)
    page.wait_for_selector("[data-test-script-state='notRunning']")


def open_view(page, app_url: str, slug: str, **query) -> None:
    path = "" if slug == "home" else slug
    page.goto(f"{app_url}/{path}" + ("?" + "&".join(f"{k}={quote_plus(str(v))}" for k, v in query.items())
                                     if query else ""))
    wait_until_run(page)


def type_sentence(page, text: str) -> None:
    """Type into the sidebar's Sentence box and press Enter; wait for the rerun to finish."""
    box = page.get_by_role("textbox", name="Sentence")
    box.fill(text)
    box.press("Enter")
    page.wait_for_url(lambda url: quote_plus(text) in url)      # the view reached the URL: the run started
    page.wait_for_selector("[data-test-script-state='notRunning']")


def rendered_plots(page) -> int:
    """How many Plotly figures are really drawn (their SVG exists), after waiting for the first one."""
    try:
        page.wait_for_selector(".js-plotly-plot .main-svg", state="attached", timeout=15_000)
    except PlaywrightTimeout:
        return 0
    return page.locator(".js-plotly-plot").count()


def selectbox_value(page, label: str) -> str:
    return page.locator(f"[data-testid='stSelectbox'] input[aria-label='{label}']").input_value()


@pytest.mark.parametrize("slug", [step.slug for step in STEPS])
def test_every_page_opens_without_errors_and_draws_its_figures(tab, app_url, slug):
    open_view(tab, app_url, slug)
    errors = tab.locator("[data-testid='stException']")
    assert errors.count() == 0, errors.first.inner_text()
    title = next(step.title for step in STEPS if step.slug == slug)
    expect(tab.locator("h1").first).to_contain_text(title)
    if slug not in WITHOUT_CHARTS:
        assert rendered_plots(tab) > 0, f"the {slug} page drew no Plotly figure"
        assert tab.locator("[data-testid='stPlotlyChart']").count() > 0


def test_typing_a_sentence_in_the_sidebar_updates_the_page(tab, app_url):
    open_view(tab, app_url, "prediction")
    expect(tab.locator(".js-plotly-plot .gtitle").first).to_contain_text("“tired”")
    type_sentence(tab, "the dog chased the")
    titles = tab.locator(".js-plotly-plot .gtitle")
    expect(titles.filter(has_text="Next-token probabilities")).to_contain_text("after “the” (position 3)")
    assert selectbox_value(tab, "Show what the model predicted after token") == "3: the"
    assert "text=the+dog+chased+the" in tab.url
    assert tab.locator("[data-testid='stException']").count() == 0


def test_a_copied_link_reopens_the_same_view(tab, app_url):
    open_view(tab, app_url, "attention", model="roses", text="roses are red", layer=1, head=1, token=2)
    sidebar = tab.locator("[data-testid='stSidebar']")
    assert sidebar.locator("input[aria-label='Model']").input_value() == "roses"
    assert sidebar.get_by_role("textbox", name="Sentence").input_value() == "roses are red"
    assert tab.locator("[data-testid='stException']").count() == 0
    assert selectbox_value(tab, "Layer") == "1"
    assert selectbox_value(tab, "Head") == "1"


def test_html_in_the_sentence_is_shown_as_text_and_never_runs(tab, app_url):
    open_view(tab, app_url, "prediction")
    type_sentence(tab, XSS)
    assert tab.get_by_role("textbox", name="Sentence").input_value() == XSS
    tab.get_by_role("button", name="Next token").click()
    expect(tab.get_by_text(f"“{XSS}” +")).to_be_visible()        # the sentence, shown as plain text
    for step in STEPS:                                             # and on every page, opened from a link
        open_view(tab, app_url, step.slug, text=XSS)
        assert tab.locator("img[src='x']").count() == 0, f"an <img> from the sentence appeared on {step.slug}"
        assert tab.locator("[data-testid='stException']").count() == 0, step.slug
    tab.wait_for_timeout(300)
    assert tab.dialogs == [], f"a dialog opened: {tab.dialogs}"
