"""One URL state (explorer/app/url.py): the one module that reads and writes query parameters, one limit per kind of
parameter, anything unknown dropped."""
import ast
from pathlib import Path

from explorer.app import url
from explorer.registry import BY_SLUG, FIELD_CHARS
from explorer.view import MAX_CHARS

ROOT = Path(__file__).resolve().parents[1]


def test_only_the_url_module_touches_the_query_parameters():
    """st.query_params and st.switch_page's query are read and written in explorer/app/url.py alone."""
    files = [*(ROOT / "explorer").rglob("*.py"), *(ROOT / "pages").glob("*.py"), ROOT / "streamlit_app.py"]
    touching = sorted(str(path.relative_to(ROOT)) for path in files
                      if any(isinstance(node, ast.Attribute) and node.attr == "query_params"
                             or isinstance(node, ast.keyword) and node.arg == "query_params"
                             for node in ast.walk(ast.parse(path.read_text()))))
    assert touching == ["explorer/app/url.py"]


def test_each_kind_of_parameter_is_cut_to_its_one_limit_and_the_rest_is_dropped():
    long = "x" * 300_000
    query = {name: long for name in ("text", "lesson", "model", "layer", "section", "join", "seat", "server")}
    query |= {"probe": long, "what-if": long, "evil": "<script>", "__proto__": "1"}
    values, cut = url.read(query)
    assert len(values["text"]) == MAX_CHARS and len(values["lesson"]) == 200_000
    assert len(values["probe"]) == len(values["what-if"]) == FIELD_CHARS             # a page's own fields
    assert {len(values[n]) for n in ("model", "layer", "section", "join", "seat", "server")} == {url.SHORT}
    assert "evil" not in values and "__proto__" not in values and cut == set(values)
    assert url.read({"text": "the cat", "presenter": "1"}) == ({"text": "the cat", "presenter": "1"}, set())


def test_every_field_a_page_links_has_the_field_limit():
    linked = {name for page in BY_SLUG.values() for name in page.linked}
    assert linked and all(url.limit(name) == FIELD_CHARS for name in linked)
