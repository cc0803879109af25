"""A chart in words and in tables, read from the figure itself: what a screen reader says and "Show as a table".

`describe(fig)` writes one short sentence from the figure's data (its title, then for each heatmap its largest
and smallest cell with their row and column labels, for bars the largest bars, for lines where each curve
peaks). `tables(fig)` gives the same numbers as tables: one per heatmap (rows x columns), one for the bars or
points that share their labels. Both read any figure our builders draw (heatmaps, bars, lines, small multiples
on their own axes), so every chart gets them; a page may pass a better sentence where it knows what matters
(an attention head: who attends most to whom, `head_sentence` in explorer/steps/attention.py).
"""
import base64
import html
import math
import re
from dataclasses import dataclass

import numpy as np

DECIMALS = 4           # the tables' precision (hover shows 4 decimals too)
MAX_PARTS = 4          # traces a sentence describes before it says "and N more"


@dataclass(frozen=True)
class Table:
    title: str
    columns: list[str]
    rows: list[list]                 # each row: a label (str) then numbers (float, NaN where a cell is empty)


def plain(text) -> str:
    """Plotly label text as plain words: tags dropped (<b>, <br> becomes a space), entities decoded."""
    text = re.sub(r"<br\s*/?>", " ", str(text or ""), flags=re.I)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", text)).split())


def number(value: float) -> str:
    """A value as a sentence says it: 2 decimals (3 significant digits when small), whole numbers whole."""
    if value is None or not math.isfinite(value):
        return "none"
    if float(value).is_integer() and abs(value) < 1e6:
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}" if abs(value) >= 0.1 else f"{value:.2g}"


def _array(values) -> np.ndarray | None:
    """Values as an array; Plotly's packed form in figure JSON ({dtype, bdata, shape}) unpacked."""
    if values is None:
        return None
    if isinstance(values, dict) and "bdata" in values:
        array = np.frombuffer(base64.b64decode(values["bdata"]), dtype=np.dtype(values["dtype"]))
        shape = values.get("shape")
        if shape:
            array = array.reshape([int(s) for s in str(shape).split(",")] if isinstance(shape, str) else shape)
        return array
    return np.asarray(values, dtype=object)


def _floats(values) -> np.ndarray:
    """Numbers as floats, NaN where there is no number (None, text)."""
    array = _array(values)
    if array is None:
        return np.zeros(0)
    try:
        return np.asarray(array, dtype=float)
    except (TypeError, ValueError):
        return np.vectorize(_float, otypes=[float])(array)


def _float(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _axis(fig, trace, letter: str):
    """The layout axis a trace is drawn on ("x", "x2" -> layout.xaxis, layout.xaxis2)."""
    name = getattr(trace, f"{letter}axis", None) or letter
    return fig.layout[f"{letter}axis{name[1:]}"]


def _tick_labels(fig, trace, letter: str, positions) -> list[str]:
    """The labels a reader sees at `positions` on the trace's x or y axis (its tick text, else the values)."""
    axis = _axis(fig, trace, letter)
    names = {}
    if axis.tickvals is not None and axis.ticktext is not None:
        names = {_float(v): plain(t) for v, t in zip(axis.tickvals, axis.ticktext)}
    return [names.get(_float(p), number(p) if isinstance(p, (float, np.floating)) else plain(p)) for p in positions]


def _title(fig) -> str:
    return plain(fig.layout.title.text) if fig.layout.title and fig.layout.title.text else ""


def _axis_title(fig, trace, letter: str) -> str:
    axis = _axis(fig, trace, letter)
    return plain(axis.title.text) if axis.title and axis.title.text else ""


def _heatmap_labels(fig, trace) -> tuple[np.ndarray, list[str], list[str]]:
    z = _floats(trace.z)
    if z.ndim == 1:
        z = z[None, :]
    n_rows, n_cols = z.shape
    xs = list(_array(trace.x).ravel()) if trace.x is not None else list(range(n_cols))
    ys = list(_array(trace.y).ravel()) if trace.y is not None else list(range(n_rows))
    return z, _tick_labels(fig, trace, "y", ys[:n_rows]), _tick_labels(fig, trace, "x", xs[:n_cols])


def weights(z: np.ndarray) -> bool:
    """True for a matrix of attention weights: non-negative rows that each add up to 1 (empty cells left out)."""
    finite = np.isfinite(z)
    if not finite.any() or np.nanmin(z) < 0:
        return False
    sums = np.nansum(z, axis=1)[finite.any(axis=1)]
    return bool(np.allclose(sums, 1.0, atol=1e-3))


def _panel_name(fig, trace, n: int) -> str:
    return plain(trace.name) if trace.name else f"panel {n + 1}"


def _heatmap_sentence(fig, trace, name: str) -> str:
    z, rows, cols = _heatmap_labels(fig, trace)
    what = f"{len(rows)} rows × {len(cols)} columns"
    if not np.isfinite(z).any():
        return f"{name}{what}, no values"
    if weights(z):                                 # attention: say who each of the last rows reads most
        best = [f"{rows[r]} attends most to {cols[int(np.nanargmax(z[r]))]} ({number(np.nanmax(z[r]))})"
                for r in range(len(rows))[-2:] if np.isfinite(z[r]).any()]
        return f"{name}{what} of weights; " + ", ".join(best)
    hi = np.unravel_index(np.nanargmax(z), z.shape)
    lo = np.unravel_index(np.nanargmin(z), z.shape)
    return (f"{name}{what}; highest {number(z[hi])} at {rows[hi[0]]} × {cols[hi[1]]}, "
            f"lowest {number(z[lo])} at {rows[lo[0]]} × {cols[lo[1]]}")


def _bar_values(fig, trace) -> tuple[list[str], np.ndarray]:
    horizontal = trace.orientation == "h"
    values = _floats(trace.x if horizontal else trace.y).ravel()
    where = trace.y if horizontal else trace.x
    places = list(_array(where).ravel()) if where is not None else list(range(len(values)))
    names = _tick_labels(fig, trace, "y" if horizontal else "x", places[:len(values)])
    return names + [str(i) for i in range(len(names), len(values))], values


def _bar_sentence(fig, trace, name: str) -> str:
    names, values = _bar_values(fig, trace)
    if not len(values) or not np.isfinite(values).any():
        return f"{name}no bars"
    order = [i for i in np.argsort(-np.nan_to_num(values, nan=-np.inf), kind="stable") if np.isfinite(values[i])]
    top = ", ".join(f"{names[i]} ({number(values[i])})" for i in order[:3])
    return f"{name}{len(values)} bars, largest {top}"


def _line_values(fig, trace) -> tuple[list[str], np.ndarray]:
    values = _floats(trace.y).ravel()
    places = list(_array(trace.x).ravel()) if trace.x is not None else list(range(len(values)))
    names = _tick_labels(fig, trace, "x", places[:len(values)])
    return names + [str(i) for i in range(len(names), len(values))], values


def _line_sentence(fig, trace, name: str) -> str:
    names, values = _line_values(fig, trace)
    if trace.text is not None and trace.mode and "text" in trace.mode:         # labelled points (a map)
        words = [plain(t) for t in np.atleast_1d(np.asarray(trace.text, dtype=object)) if plain(t)]
        shown = ", ".join(words[:6]) + (f" and {len(words) - 6} more" if len(words) > 6 else "")
        return f"{name}{len(values)} points" + (f", labelled {shown}" if words else "")
    if not len(values) or not np.isfinite(values).any():
        return f"{name}no points"
    hi, lo = int(np.nanargmax(values)), int(np.nanargmin(values))
    if len(values) == 1:
        return f"{name}{names[0]} {number(values[0])}"
    return (f"{name}{len(values)} points from {names[0]} to {names[-1]}, highest {number(values[hi])} at "
            f"{names[hi]}, lowest {number(values[lo])} at {names[lo]}")


def drawn(trace) -> bool:
    """A trace that draws a picture (boxes, rules, outlines: lines broken by gaps) or is hidden, not data."""
    labelled = trace.type in ("scatter", "scattergl") and "text" in (trace.mode or "")
    if trace.visible is False or (trace.hoverinfo == "skip" and not labelled):
        return True
    if trace.type in ("scatter", "scattergl") and trace.marker.opacity == 0 and not labelled:
        return True                                                 # invisible targets for the hover text
    return trace.type in ("scatter", "scattergl") and trace.x is not None and any(
        x is None for x in np.asarray(_array(trace.x), dtype=object).ravel())


def diagram(fig) -> bool:
    """A drawing of boxes and arrows (every axis hidden): described by its words, with no table of numbers."""
    axes = [fig.layout[k] for k in fig.layout if k.startswith(("xaxis", "yaxis"))] or [fig.layout.xaxis]
    return all(axis.visible is False for axis in axes)


def _parts(fig) -> list[str]:
    if diagram(fig):
        return []
    parts, kinds = [], [t.type for t in fig.data]
    for n, trace in enumerate(fig.data):
        if drawn(trace):
            continue
        many = kinds.count(trace.type) > 1
        name = f"{_panel_name(fig, trace, n)}: " if many or trace.name else ""
        if trace.type == "heatmap":
            parts.append(_heatmap_sentence(fig, trace, name))
        elif trace.type == "bar":
            parts.append(_bar_sentence(fig, trace, name))
        elif trace.type in ("scatter", "scattergl"):
            parts.append(_line_sentence(fig, trace, name))
    return parts


def _labelled_points(fig) -> list[Table]:
    """A diagram's labelled points as tables: text traces drawn at the same places side by side (chips: each
    token over its id), in reading order."""
    groups: dict[tuple, Table] = {}
    for n, trace in enumerate(fig.data):
        if trace.type not in ("scatter", "scattergl") or "text" not in (trace.mode or "") or trace.text is None:
            continue
        words = [plain(t) for t in np.atleast_1d(np.asarray(trace.text, dtype=object)).ravel()]
        xs = tuple(np.round(_floats(trace.x).ravel(), 3)) if trace.x is not None else tuple(range(len(words)))
        if xs not in groups:
            groups[xs] = Table(_title(fig) or _panel_name(fig, trace, n), [], [[] for _ in words])
        table = groups[xs]
        table.columns.append(_panel_name(fig, trace, n))
        for row, word in zip(table.rows, words):
            row.append(word)
    return list(groups.values())


def _notes(fig) -> list[str]:
    """A diagram's words (its notes, and its labelled points: "the (117), cat (27)"), when it has no data."""
    notes = list(dict.fromkeys(plain(a.text) for a in fig.layout.annotations or () if a.text))
    for table in _labelled_points(fig):
        notes += [row[0] + (f" ({', '.join(w for w in row[1:] if w)})" if any(row[1:]) else "")
                  for row in table.rows if row and any(c.isalnum() for c in row[0])]     # not a drawn "+"
    shown = notes[:12] + ([f"and {len(notes) - 12} more"] if len(notes) > 12 else [])
    return [", ".join(shown)] if notes else []


def describe(fig, lead: str | None = None) -> str:
    """One short sentence about `fig` from its data: its title, then each trace (at most MAX_PARTS of them)."""
    parts = _parts(fig) or _notes(fig)
    shown = parts[:MAX_PARTS] + ([f"and {len(parts) - MAX_PARTS} more"] if len(parts) > MAX_PARTS else [])
    title = _title(fig) or "Chart: " + ", ".join(plain(t.name) for t in fig.data if t.name)
    body = "; ".join(shown)
    return " ".join(s for s in (f"{title}.", f"{lead}." if lead else "", f"{body}." if body else "") if s)


def has_tables(fig) -> bool:
    """Whether `tables(fig)` has anything to show (cheap: the tables themselves are built only when asked)."""
    return bool(tables(fig)) if diagram(fig) else any(not drawn(t) for t in fig.data)


def _rounded(values) -> list:
    return [round(float(v), DECIMALS) if math.isfinite(v) else float("nan") for v in values]


def tables(fig) -> list[Table]:
    """The figure's numbers as tables: a heatmap as its rows x columns; bars and lines that share their labels
    side by side, one column per trace (labelled points: one row per point, with x and y)."""
    out: list[Table] = []
    shared: dict[tuple, Table] = {}
    if diagram(fig):
        return [t for t in _labelled_points(fig) if len({row[0] for row in t.rows}) > 1]
    for n, trace in enumerate(fig.data):
        if drawn(trace):
            continue
        name = _panel_name(fig, trace, n)
        if trace.type == "heatmap":
            z, rows, cols = _heatmap_labels(fig, trace)
            corner = " \\ ".join(t for t in (_axis_title(fig, trace, "y"), _axis_title(fig, trace, "x")) if t)
            out.append(Table(name if trace.name else (_title(fig) or name), [corner or "row", *cols],
                             [[label, *_rounded(row)] for label, row in zip(rows, z)]))
            continue
        if trace.type == "bar":
            labels, values = _bar_values(fig, trace)
        elif trace.type in ("scatter", "scattergl"):
            labels, values = _line_values(fig, trace)
            if trace.text is not None and trace.mode and "text" in trace.mode:
                words = [plain(t) for t in np.asarray(trace.text, dtype=object).ravel()]
                xs = _floats(trace.x)
                out.append(Table(name, ["label", "x", "y"],
                                 [[w, *_rounded([x, y])] for w, x, y in zip(words, xs, values)]))
                continue
        else:
            continue
        key = (trace.type == "bar", tuple(labels))
        if key not in shared:
            place = _axis_title(fig, trace, "y" if trace.type == "bar" and trace.orientation == "h" else "x")
            shared[key] = Table(_title(fig) or name, [place or "label"], [[label] for label in labels])
            out.append(shared[key])
        table = shared[key]
        column = name if trace.name else (_axis_title(fig, trace, "x" if trace.orientation == "h" else "y")
                                          or "value")
        table.columns.append(column)
        for row, value in zip(table.rows, _rounded(values)):
            row.append(value)
    return out
