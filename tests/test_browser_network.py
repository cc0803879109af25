"""Nothing leaves the classroom: every request a page makes (scripts, styles, fonts, images, its websocket, charts)
goes to the app's own server. No third-party host: no web fonts, CDNs, telemetry, Plotly's cloud or map tiles.

The pages are checked in a real browser by the WCAG walk (tests/test_browser_a11y.py), which opens every page and
every tab in one browser profile per device (its first page a student's first visit, nothing cached) and logs every
request and websocket, those the cache answers too (browser_support.logged_tab, only_the_app_was_asked). Here: that the check tells the app's own URLs from others.
"""
from browser_support import elsewhere


def test_a_request_to_another_host_or_port_is_caught():
    app = "http://127.0.0.1:8501"
    assert elsewhere([f"{app}/", f"{app}/static/js/index.js", "ws://127.0.0.1:8501/_stcore/stream",
                      "data:image/png;base64,xyz", "blob:http://127.0.0.1:8501/1"], app) == []
    third = ["https://fonts.googleapis.com/css2", "https://chart-studio.plotly.com/create", "http://127.0.0.1:9000/x",
             "https://api.mapbox.com/styles/v1"]
    assert elsewhere(third, app) == third
