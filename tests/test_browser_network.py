"""Nothing leaves the classroom, in a real browser (Chromium through Playwright, see test_browser.py): every request
a page makes (scripts, styles, fonts, images, its websocket, charts) goes to the app's own server. No third-party
host: no web fonts, CDNs, telemetry, Plotly's cloud or map tiles."""
from urllib.parse import urlsplit

import pytest

from browser_support import open_view, wait_until_run
from explorer.app.plotly_component import PLOTLY_JS
from explorer.registry import BY_SLUG
from test_browser_a11y import ENCODER_DECODER_VIEW, PAGES, settle

LOCAL_SCHEMES = {"data", "blob", "about"}          # made inside the page, never fetched from a host


def elsewhere(urls: list[str], app_url: str) -> list[str]:
    """The URLs that do not go to the app's own host and port."""
    own = urlsplit(app_url).netloc
    return [url for url in urls if urlsplit(url).scheme not in LOCAL_SCHEMES and urlsplit(url).netloc != own]


@pytest.fixture
def logged(chromium):
    """A fresh browser profile (nothing cached: a student's first visit) that logs every request and websocket."""
    context = chromium.new_context(viewport={"width": 1366, "height": 768})
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.requests = []
    context.on("request", lambda request: page.requests.append(request.url))
    page.on("websocket", lambda socket: page.requests.append(socket.url))
    yield page
    context.close()


@pytest.mark.parametrize("slug", PAGES)
def test_every_request_of_every_page_goes_to_the_app_itself(logged, app_url, slug):
    open_view(logged, app_url, slug, **(ENCODER_DECODER_VIEW if slug == "encoder-decoder" else {}))
    settle(logged)
    for label in BY_SLUG[slug].labels[1:3]:                   # a few tabs: their charts are drawn only when open
        logged.get_by_role("tab", name=label, exact=True).click()
        wait_until_run(logged)
        settle(logged)
    logged.evaluate("() => document.fonts.ready")             # every font the page uses has loaded
    assert any(url.startswith("ws") for url in logged.requests), logged.requests   # the log sees the websocket,
    assert any(url.endswith(".woff2") for url in logged.requests)                  # the fonts (Streamlit's own)
    if logged.locator(".explorer-plot").count():                                   # and plotly.js, for charts
        assert any(url.endswith(f"/app/static/{PLOTLY_JS.name}") for url in logged.requests)
    assert elsewhere(logged.requests, app_url) == []


def test_a_request_to_another_host_or_port_is_caught():
    app = "http://127.0.0.1:8501"
    assert elsewhere([f"{app}/", f"{app}/static/js/index.js", "ws://127.0.0.1:8501/_stcore/stream",
                      "data:image/png;base64,xyz", "blob:http://127.0.0.1:8501/1"], app) == []
    third = ["https://fonts.googleapis.com/css2", "https://chart-studio.plotly.com/create", "http://127.0.0.1:9000/x",
             "https://api.mapbox.com/styles/v1"]
    assert elsewhere(third, app) == third
