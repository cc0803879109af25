"""plotly.js on a school network: compressed on a first visit, from the browser's cache on later ones."""
import gzip
import urllib.request

from bench.live import watch_network
from browser_support import open_view
from explorer.app.plotly_component import PLOTLY_JS, SHIPPED_JS

CHART_DRAWN = "() => document.querySelector('.js-plotly-plot .main-svg') !== null"


def plotly_js_loads(context, url: str) -> list[dict]:
    """Open `url` in a new tab of `context` until its first chart is drawn; every load of plotly.js the tab
    made, as Chromium's network log saw it (bytes on the wire, from the cache or not, headers)."""
    page = context.new_page()
    log = watch_network(page)
    page.goto(url)
    page.wait_for_function(CHART_DRAWN)
    page.close()
    return [load for load in log.values() if PLOTLY_JS.name in load.get("url", "")]


def test_plotly_js_travels_gzipped_once_and_later_visits_take_it_from_the_cache(chromium, app_url):
    context = chromium.new_context()                       # a student's browser that has never seen the app
    url = f"{app_url}/attention?model=tinytales&text=the+cat+sat+on+the+mat"
    [first] = plotly_js_loads(context, url)
    assert not first["cached"] and first["headers"]["content-encoding"] == "gzip"
    assert first["wire"] < 0.4 * SHIPPED_JS.stat().st_size               # 1.5 MB as about 0.5 MB
    assert first["headers"]["last-modified"] == "Wed, 01 Jan 2020 00:00:00 GMT"
    for visit in range(2):                                 # later visits (new tabs): nothing over the network
        [later] = plotly_js_loads(context, url)
        assert later["cached"] and later.get("wire", 0) < 1000, (visit, later)
    context.close()


def test_the_served_file_is_plotlys_cartesian_bundle_gzipped_and_validated(tab, app_url):
    open_view(tab, app_url, "attention", model="tinytales", text="the cat sat")        # the app has started
    request = urllib.request.Request(f"{app_url}/app/static/{PLOTLY_JS.name}", headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(request) as response:
        headers, body = response.headers, response.read()
    assert headers["Content-Encoding"] == "gzip" and "Accept-Encoding" in headers["Vary"]
    assert gzip.decompress(body) == SHIPPED_JS.read_bytes()                    # Plotly's bundle, byte for byte
    assert headers["ETag"] and headers["Last-Modified"] == "Wed, 01 Jan 2020 00:00:00 GMT"
    assert "no-store" not in headers.get("Cache-Control", "") and "no-cache" not in headers.get("Cache-Control", "")
