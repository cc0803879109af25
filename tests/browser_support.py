"""A real server and a real browser for the browser tests: the benchmark's own (bench/live.py), so tests and
benchmark start the app and wait for it the same way, plus what only tests do."""
from urllib.parse import quote_plus

from bench.live import CHROMIUM, ROOT, launch, open_view, rss_mb, serve, wait_until_run  # noqa: F401


def type_sentence(page, text: str) -> None:
    """Type into the sidebar's Sentence box and press Enter; wait for the rerun to finish."""
    box = page.get_by_role("textbox", name="Sentence")
    box.fill(text)
    box.press("Enter")
    page.wait_for_url(lambda url: quote_plus(text) in url)      # the view reached the URL: the run started
    page.wait_for_selector("[data-test-script-state='notRunning']")
