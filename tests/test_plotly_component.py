"""The keyed Plotly component: plotly.js served from static/, and st.plotly_chart when it cannot be."""
import filecmp
import hashlib
import json

import pytest

from conftest import figure_titled, open_page, plotly_charts
from explorer.app import plotly_component


@pytest.fixture
def fresh_provider():
    plotly_component.provide_plotly_js.cache_clear()
    yield plotly_component.provide_plotly_js
    plotly_component.provide_plotly_js.cache_clear()


def test_the_served_plotly_js_is_the_plotly_package_own(fresh_provider):
    assert fresh_provider() is True
    assert filecmp.cmp(plotly_component.PLOTLY_JS, plotly_component.SHIPPED_JS, shallow=False)
    assert not list(plotly_component.STATIC.glob("*.part"))                 # no half-copied file left
    # named after its content, dated long ago: browsers keep it (Streamlit sends no Cache-Control)
    digest = hashlib.sha256(plotly_component.SHIPPED_JS.read_bytes()).hexdigest()
    assert plotly_component.PLOTLY_JS.name == f"plotly-{digest[:16]}.min.js"
    assert plotly_component.PLOTLY_JS.stat().st_mtime == plotly_component.LAST_MODIFIED


def test_a_read_only_app_folder_falls_back_to_st_plotly_chart(fresh_provider, monkeypatch, tmp_path):
    blocker = tmp_path / "a file"
    blocker.write_text("not a folder")
    monkeypatch.setattr(plotly_component, "STATIC", blocker / "static")          # cannot be created
    monkeypatch.setattr(plotly_component, "PLOTLY_JS", blocker / "static" / "plotly.min.js")
    assert fresh_provider() is False


def test_static_serving_switched_off_falls_back(fresh_provider, monkeypatch):
    monkeypatch.setattr(plotly_component.st, "get_option", lambda name: False)
    assert fresh_provider() is False


def test_pages_draw_through_the_component_and_fall_back_with_the_same_figures(monkeypatch):
    at = open_page("prediction")
    [chart] = [c for c in plotly_charts(at) if "Next-token probabilities" in c["figure"]]
    assert chart["config"]["toImageButtonOptions"]["width"] == 1920
    served = figure_titled(at, "Next-token probabilities")
    assert not at.get("plotly_chart")                                        # no Streamlit Plotly element
    monkeypatch.setattr(plotly_component, "provide_plotly_js", lambda: False)
    at.run()
    assert not plotly_charts(at)
    fallback = [c for c in at.get("plotly_chart") if "Next-token probabilities" in c.proto.spec]
    assert len(fallback) == 1 and '"toImageButtonOptions"' in fallback[0].proto.config
    assert fallback[0].proto.alt == chart["label"]                          # the same sentence for a screen reader
    spec = json.loads(fallback[0].proto.spec)
    assert spec["data"][0]["y"] == served["data"][0]["y"]                     # the very same numbers
