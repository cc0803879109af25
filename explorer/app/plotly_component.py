"""A Plotly chart that keeps its place in the browser: a keyed Streamlit component around `Plotly.react`.

Why not `st.plotly_chart`: in Streamlit 1.67 its element id hashes the whole figure, even with a `key`, so
a figure whose numbers change is a new element: the browser unmounts the old chart and builds a new one,
then draws it again when Plotly hands its figure back (measured: several charts built per chart shown, per
sentence typed). Here the component's `key` is its identity, so a new sentence reaches the same chart and
`Plotly.react` redraws it in place (built once when the chart first appears; docs/figures.md has the figures).

Why not Altair/Vega-Lite (which the lab's live charts use): our step pages have 40-odd Plotly figures with
exact hover text, text in cells, shared colour axes and subplots; this keeps every one of them, unchanged,
and the tests keep reading the same figure JSON.

Revisit when Streamlit releases keyed Plotly charts with a stable identity (streamlit/streamlit#16052): then
`layout.chart` can call `st.plotly_chart(fig, key=key)` again and this module and `static/` can go.

plotly.js is Plotly's own cartesian bundle (npm `plotly.js-cartesian-dist-min`, the version the `plotly` package
ships: tests/test_plotly_component.py checks both), kept in `components/vendor/` with its licence: it has every trace
type the app draws (scatter, bar, heatmap) and is a third of the full bundle (1.5 MB instead of 4.8), so a student's
browser fetches 0.5 MB instead of 1.5 and starts it in half the time on every page it opens (docs/figures.md). It is
copied into `static/` and served by Streamlit's static file serving (`server.enableStaticServing` in the config).
Streamlit 1.67 serves `app/static/` gzipped (its gzip middleware skips only its own `static/` bundles) with an ETag
and a Last-Modified, but with no Cache-Control, and it answers a revalidation with the whole file again (no 304).
So the copy is named after a hash of its content (a name's bytes never change) and dated 2020-01-01: browsers keep
a file without Cache-Control for a tenth of its age since Last-Modified (heuristic freshness, RFC 9111 4.2.2), so
later visits load it from their cache.
"""
import contextlib
import functools
import hashlib
import json
import logging
import os
import shutil
from pathlib import Path

import plotly.io as pio
import streamlit as st

from explorer.plot import use_explorer_template

from .components import HERE, front_end     # chart.js: the chart, fitted to a phone, with its screen-reader label

STATIC = Path(__file__).resolve().parents[2] / "static"
SHIPPED_JS = HERE / "vendor" / "plotly-cartesian.min.js"        # Plotly's cartesian bundle (see above)
PLOTLY_JS = STATIC / f"plotly-{hashlib.sha256(SHIPPED_JS.read_bytes()).hexdigest()[:16]}.min.js"
LAST_MODIFIED = 1577836800                 # 2020-01-01 UTC: the copy's date, so browsers cache it (see above)
log = logging.getLogger(__name__)


@functools.cache
def provide_plotly_js() -> bool:
    """Copy Plotly's cartesian bundle into `static/` (once per process; atomic, so two servers
    starting together never serve half a file). False when the app cannot serve it (static serving switched
    off, or a read-only app folder): the charts then fall back to `st.plotly_chart`."""
    if not st.get_option("server.enableStaticServing"):
        log.warning("server.enableStaticServing is off: charts fall back to st.plotly_chart (rebuilt per update)")
        return False
    try:
        if not PLOTLY_JS.exists() or PLOTLY_JS.stat().st_size != SHIPPED_JS.stat().st_size:
            STATIC.mkdir(exist_ok=True)
            partial = PLOTLY_JS.with_suffix(f".{os.getpid()}.part")
            shutil.copyfile(SHIPPED_JS, partial)
            os.utime(partial, (LAST_MODIFIED, LAST_MODIFIED))
            os.replace(partial, PLOTLY_JS)
    except OSError as error:
        log.warning("cannot put plotly.js in %s (%s): charts fall back to st.plotly_chart", STATIC, error)
        return False
    return True


use_explorer_template()          # after importing Streamlit, which sets its own default
_component = st.components.v2.component("explorer_plotly", js=front_end("chart.js"),
                                         css=front_end("chart.css"), html="", isolate_styles=False)


def plotly_chart(figure: dict | str, key: str, config: dict, label: str, where=st, clickable: bool = False,
                 screen: bool = False, theme: str | None = None) -> dict | None:
    """Draw `figure` (a figure as a dict, e.g. `fig.to_dict()`, or its JSON) in `where` (a container, a column; by default where
    the page is) as the chart named `key`, announced to a screen reader as `label`: the same key on the next run
    updates the same chart in place. With `clickable`, returns the point a click just chose ({"x", "y", "curve",
    "point", "customdata"}) on the run that click starts, else None. With `screen` (presenter mode), a chart taller
    than the room left below its top on the first screen is drawn lower, so the whole of it shows without scrolling.
    `theme` ("light", "dark") is the page's theme the figure is drawn for: when the device switches to the other,
    the chart asks for a run, which draws it in the new one (chart.js, `followTheme`)."""
    if not provide_plotly_js():
        where.plotly_chart(json.loads(figure) if isinstance(figure, str) else figure, config=config,
                           key=f"chart_{key}", alt=label, theme=None)
        return None
    figure = figure if isinstance(figure, str) else pio.to_json(figure, validate=False)
    with contextlib.nullcontext() if where is st else where:
        result = _component(data={"figure": figure, "config": config, "label": label, "plotly": PLOTLY_JS.name,
                                  "clickable": clickable, "screen": screen, "theme": theme},
                            key=f"chart_{key}", on_theme_change=lambda: None,
                            **({"on_click_change": lambda: None} if clickable else {}))
    return getattr(result, "click", None) if clickable else None
