"""A real server and a real browser for tests and the benchmark: `streamlit run` on 127.0.0.1 and
Debian's Chromium through Playwright (never a downloaded browser)."""
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote_plus

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(timeout: float = 60, env: dict | None = None):
    """Start `streamlit run streamlit_app.py` on a free port; yields (base URL, server process). `env` adds
    environment variables for the server (e.g. a Hugging Face cache)."""
    port = free_port()
    log = tempfile.NamedTemporaryFile("w+", prefix="streamlit-", suffix=".log", delete=False)
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "streamlit_app.py", "--server.address", "127.0.0.1",
         "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if urllib.request.urlopen(base + "/_stcore/health", timeout=1).status == 200:
                    break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise RuntimeError("streamlit did not start:\n" + log.read()[-3000:])
            time.sleep(0.2)
        yield base, server
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(10)
        log.close()
        os.unlink(log.name)


def launch(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)


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


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children, in MB (Linux /proc)."""
    total = 0
    for p in [pid, *_children(pid)]:
        try:
            with open(f"/proc/{p}/status") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            pass
    return total / 1024


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = [int(c) for c in f.read().split()]
    except OSError:
        return []
    return kids + [g for k in kids for g in _children(k)]
