"""The keyed Plotly component: Plotly's cartesian bundle served from static/, and st.plotly_chart when it cannot be."""
import filecmp
import hashlib
import json
import re
from pathlib import Path

import pytest

from conftest import figure_titled, open_page, plotly_charts
from explorer.app import plotly_component


@pytest.fixture
def fresh_provider():
    plotly_component.provide_plotly_js.cache_clear()
    yield plotly_component.provide_plotly_js
    plotly_component.provide_plotly_js.cache_clear()


ROOT = Path(__file__).resolve().parents[1]
# The trace types Plotly's bundle registers (each trace module says so in the minified code).
REGISTERED = re.compile(r'moduleType:"trace",name:"(\w+)"')


def test_the_bundle_is_the_plotly_js_version_the_plotly_package_writes_figures_for():
    import plotly.offline
    header = plotly_component.SHIPPED_JS.read_text(encoding="utf-8")[:200]
    assert re.search(r"plotly\.js \(cartesian - minified\) v(\S+)", header).group(1) == \
        plotly.offline.get_plotlyjs_version()


def test_the_bundle_has_every_trace_type_the_app_draws():
    """Every `go.<Trace>(` the app's code builds is a trace type the bundle registers; nothing uses plotly.express
    (which builds trace types of its own choosing)."""
    import plotly.graph_objects as go
    code = "".join(p.read_text() for p in [*ROOT.glob("explorer/**/*.py"), *ROOT.glob("pages/*.py")])
    built = {getattr(go, name)().type for name in re.findall(r"\bgo\.([A-Z]\w+)\(", code) if name != "Figure"}
    registered = set(REGISTERED.findall(plotly_component.SHIPPED_JS.read_text(encoding="utf-8")))
    assert built == {"scatter", "bar", "heatmap"} and built <= registered, (built, registered)
    assert "plotly.express" not in code
    full = (Path(go.__file__).parents[1] / "package_data" / "plotly.min.js").read_text(encoding="utf-8")
    assert len(set(REGISTERED.findall(full))) > 3 * len(registered)       # the check reads the same marks there


def test_the_served_plotly_js_is_plotlys_cartesian_bundle(fresh_provider):
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
