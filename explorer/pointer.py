"""Point at a question's answer on the chart a page draws: the bar, the heatmap cell or the heatmap row (no Streamlit).

When a class's question is revealed (explorer/questions.py), the page's own chart can show where the model's answer
is: an arrow with "the model's answer" and an outline around the bar or the cell. A question says where its answer
stands as a `Target`, in the labels the chart itself shows (a heatmap's tick labels, a bar's category), never by an
index, so the pointer lands on the bar or the cell a student reads, or nowhere:

    kind           the chart (page, tab)                                       the target
    next-word      prediction: the probability bars                            the answer token's bar (x)
    looks-at       attention: the pattern heatmap of the question's head       the cell (query row, key column)
    lens-layer     residual, lens: the logit lens heatmap                      the cell (position, stage); a deep
                                                                               model's stages go down: (stage, position)
    nearest-word   embedding, neighbours: the neighbours' bars                 the answer word's bar (y)
    biggest-push   why, attribution: the parts' bars                           the answer part's bar (y)
    reads-source   encoder-decoder, cross: one heatmap per head                the cell (written word, source word) in
                                                                               the panel of the question's head

A chart of another layer, head, word or position (its title does not say the target's words) or one the answer is
not on (another stage, a neighbour cut from the list) gets no pointer: `point_at` returns an unchanged copy.
"""
import re
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

POINTER = "#AA3377"          # the arrow and the outline: a purple none of the charts pointed at uses for data
HALO = "#FFFFFF"             # a white line under the outline, so it shows on dark and light cells alike
NAME = "the model's answer"  # the annotation's and the shapes' name, so a test or a page can find them


@dataclass(frozen=True)
class Target:
    """Where a question's answer stands on its page's chart, as the chart labels it.

    title: words the chart's title says (its layer and head, its word, its position), ending at a word's end: a chart
           of layer 1 head 2 is not one of layer 1 head 21, and a chart of another layer gets no pointer.
    row:   the label on the y axis: a heatmap row's tick label, a horizontal bar's category.
    col:   the label on the x axis: a heatmap column's tick label, a vertical bar's category.
           A heatmap target with a row and no column points at the whole row (and the other way round).
    panel: the trace's name, on a figure of several heatmaps side by side ("head 2"); None: any trace.
    """
    title: str
    row: str | None = None
    col: str | None = None
    panel: str | None = None


def _titled(fig: go.Figure, words: str) -> bool:
    """Whether the figure's title says `words`, not followed by a letter or digit."""
    title = fig.layout.title.text or ""
    return re.search(re.escape(words) + r"(?!\w)", title) is not None


def _axis(fig: go.Figure, ref: str | None, letter: str):
    """The layout axis a trace's "x2" / "y" reference names (None: the first)."""
    suffix = (ref or letter)[1:]
    return fig.layout[f"{letter}axis{suffix}"]


def _tick_labels(fig: go.Figure, values, ref: str | None, letter: str) -> list[str]:
    """Each of a heatmap trace's x (or y) values as its axis shows it: its tick text, else the value itself."""
    axis = _axis(fig, ref, letter)
    shown = {}
    if axis.tickvals is not None and axis.ticktext is not None:
        shown = {v: str(t) for v, t in zip(axis.tickvals, axis.ticktext)}
    return [shown.get(v, str(v)) for v in values]


def _heatmap_spot(fig: go.Figure, trace: go.Heatmap, target: Target) -> dict | None:
    """Where on a heatmap trace the target is: its x and y ranges (in data units) and the arrow's point."""
    z = np.asarray(trace.z, dtype=float)                                           # (rows, cols)
    xs = np.asarray(trace.x).tolist() if trace.x is not None else list(range(z.shape[1]))
    ys = np.asarray(trace.y).tolist() if trace.y is not None else list(range(z.shape[0]))
    cols, rows = _tick_labels(fig, xs, trace.xaxis, "x"), _tick_labels(fig, ys, trace.yaxis, "y")
    if (target.row is not None and target.row not in rows) or (target.col is not None and target.col not in cols):
        return None
    i = rows.index(target.row) if target.row is not None else None
    j = cols.index(target.col) if target.col is not None else None
    if i is None and j is None:
        return None
    x0, x1 = (xs[j] - 0.5, xs[j] + 0.5) if j is not None else (min(xs) - 0.5, max(xs) + 0.5)
    y0, y1 = (ys[i] - 0.5, ys[i] + 0.5) if i is not None else (min(ys) - 0.5, max(ys) + 0.5)
    return dict(x0=x0, x1=x1, y0=y0, y1=y1, x=xs[j] if j is not None else max(xs),
                y=ys[i] if i is not None else min(ys), xref=trace.xaxis or "x", yref=trace.yaxis or "y", cell=True)


def _bar_spot(fig: go.Figure, target: Target) -> dict | None:
    """Where the target's bar is, over every bar trace (grouped bars share a category): the category's place on
    its axis, the tallest of its bars, and the arrow's point at that bar's end."""
    bars = [t for t in fig.data if isinstance(t, go.Bar) and (target.panel is None or t.name == target.panel)]
    if not bars:
        return None
    across = bars[0].orientation == "h"                       # horizontal bars: categories on y, values on x
    category = target.row if across else target.col
    if category is None:
        return None
    order, ends = [], []                                      # the axis's categories in order; the bars' ends
    for trace in bars:
        names = list(trace.y if across else trace.x)
        values = list(trace.x if across else trace.y)
        order += [n for n in names if n not in order]
        ends += [float(v) for n, v in zip(names, values) if n == category]
    if category not in order:
        return None
    end = max(ends, key=abs)
    place = order.index(category)
    refs = dict(xref=bars[0].xaxis or "x", yref=bars[0].yaxis or "y")
    if across:
        return dict(x0=0, x1=end, y0=place - 0.45, y1=place + 0.45, x=end, y=category, lying=True, **refs)
    return dict(x0=place - 0.45, x1=place + 0.45, y0=0, y1=end, x=category, y=end, lying=False, **refs)


def point_at(fig: go.Figure, target: Target | None, text: str = NAME) -> go.Figure:
    """A copy of `fig` with an arrow saying `text` at the bar, heatmap cell or heatmap row `target` names, and an
    outline around it; an unchanged copy when `target` is None or is not on this chart (another layer, head, word
    or position in its title, or no bar or cell with its labels). `fig` itself is never changed (a page's cached
    figure stays as it was).

    The arrow is the figure's annotation named NAME: on a bar chart its x (or y, bars lying down) is the bar's
    category and the other its value; on a heatmap its x and y are the cell's, whose tick labels are the target's.

    A page, once the question is revealed: `chart(point_at(fig, asked.target), key=...)`, where `fig` is the figure
    it draws anyway and `asked` the step's `questions.Asked` (every chart of the page may be passed: only the one
    the answer is on gets a pointer)."""
    out = go.Figure(fig)
    if target is None or not _titled(fig, target.title):
        return out
    spot = None
    for trace in fig.data:
        if isinstance(trace, go.Heatmap) and (target.panel is None or trace.name == target.panel):
            spot = _heatmap_spot(fig, trace, target)
            if spot:
                break
    if spot is None and any(isinstance(t, go.Bar) for t in fig.data):
        spot = _bar_spot(fig, target)
    if spot is None:
        return out
    refs = dict(xref=spot["xref"], yref=spot["yref"])
    box = dict(type="rect", x0=spot["x0"], x1=spot["x1"], y0=spot["y0"], y1=spot["y1"], layer="above",
               fillcolor="rgba(0,0,0,0)", name=NAME, **refs)
    out.add_shape(line=dict(color=HALO, width=6), **box)
    out.add_shape(line=dict(color=POINTER, width=3), **box)
    lying = spot.get("lying", False)                           # a bar lying down: the arrow comes from its end
    out.add_annotation(x=spot["x"], y=spot["y"], text=f"<b>{text}</b>", name=NAME, showarrow=True, arrowhead=2,
                       arrowwidth=2, arrowcolor=POINTER, ax=85 if lying else 40, ay=0 if lying else -50,
                       xanchor="left" if lying else "auto",              # beyond the bar's number, not over it
                       standoff=14 if spot.get("cell") else 55 if lying else 20,   # short of the cell's or bar's number
                       bgcolor="rgba(255,255,255,0.9)", bordercolor=POINTER, font=dict(color=POINTER), **refs)
    return out
