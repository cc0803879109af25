"""The browser code is JavaScript in files of its own (explorer/app/components/), and every file parses."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import _in_ci
from explorer.app.components import HERE, front_end

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(HERE.glob("*.js"))


@pytest.fixture(scope="module")
def node():
    found = shutil.which("node")
    if found is None:
        if _in_ci():
            pytest.fail("node is needed to check the app's JavaScript (apt-get install nodejs)")
        pytest.skip("node not installed (apt-get install nodejs)")
    return found


def node_check(node, path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([node, "--check", str(path)], capture_output=True, text=True, timeout=60)


def test_the_three_components_have_their_files():
    assert [p.name for p in SCRIPTS] == ["blank_watch.js", "chart.js", "to_the_top.js"]
    assert "Plotly.react" in front_end("chart.js") and "focus-visible" in front_end("chart.css")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_each_script_parses_as_an_es_module(node, script):
    checked = node_check(node, script)
    assert checked.returncode == 0, checked.stderr
    assert re.search(r"^export default function", script.read_text(), re.M)      # what Streamlit calls


def test_the_check_catches_a_broken_script(node, tmp_path):
    (tmp_path / "package.json").write_text((HERE / "package.json").read_text())
    broken = tmp_path / "chart.js"
    broken.write_text(front_end("chart.js").replace("function loadPlotly(file) {", "function loadPlotly(file) {{", 1))
    assert node_check(node, broken).returncode != 0


def test_no_python_module_carries_javascript_in_a_string():
    sources = [*ROOT.glob("explorer/**/*.py"), *ROOT.glob("pages/*.py"), ROOT / "streamlit_app.py"]
    carrying = [str(p.relative_to(ROOT)) for p in sources if "export default function" in p.read_text()]
    assert carrying == []
    loaded = set(re.findall(r'front_end\("([\w.]+)"\)', "".join(p.read_text() for p in sources)))
    assert loaded == {p.name for p in HERE.iterdir() if p.suffix in (".js", ".css")}      # each file is used
