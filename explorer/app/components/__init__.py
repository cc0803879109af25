"""The app's browser code: one JavaScript module (and its CSS) per Streamlit component, in files of their own so
editors, linters and readers treat them as code (tests/test_front_end.py checks each parses with `node --check`).

- chart.js, chart.css: the keyed Plotly chart (explorer/app/plotly_component.py)
- to_the_top.js: a class step opens at the top of its page (explorer/app/classroom.py)
- blank_watch.js: a class's page that went blank tells its poll (explorer/app/classroom.py)
"""
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent


@cache
def front_end(name: str) -> str:
    """The text of this folder's file `name` (a component's JavaScript or CSS)."""
    return (HERE / name).read_text(encoding="utf-8")
