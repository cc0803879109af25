"""Guess first, then see, as a test reads a screen: does anything on it give a question's answer away?

A screen gives the answer away when a chart's data ranks it first (the tallest bar of a bar chart, the largest cell
of a heatmap's row is in the answer's column or row), or when a text on it holds the sentence the reveal says or,
for a token count, the count of tokens. The answer is what the test computed from the model on its own
(tests/questions_support.py); the charts are Plotly's figure data as the page sends them (AppTest) or as the
browser drew them (Chromium: each `.js-plotly-plot` element's `data`).
"""
import re

import numpy as np

from conftest import decode


def plain(label) -> str:
    """A token as a chart or an option writes it, compared without the marks for spaces and quotes."""
    text = re.sub(r" \((position|id) \d+\)$", "", str(label))    # its place in the sentence, or its id
    text = re.sub(r"^\d+ (?=\S)", "", text)                          # a heatmap's "3 cat": position 3
    return text.replace("␣", " ").replace("“", "").replace("”", "").replace("⟨", "").replace("⟩", "").strip()


def _values(trace: dict, axis: str):
    value = trace.get(axis)
    return None if value is None else decode(value)


def _is_labels(values) -> bool:
    return values is not None and len(values) > 0 and all(isinstance(v, str) for v in np.asarray(values, dtype=object).ravel())


def _numbers(values):
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        return None
    return array if array.size and np.isfinite(array).any() else None


def _ticked(values, axis: dict, n: int):
    """A heatmap axis's labels: its own strings, or the axis's tick text at its numeric positions."""
    if _is_labels(values):
        return values
    ticks, words = axis.get("tickvals"), axis.get("ticktext")
    if ticks is None or words is None:
        return None
    where = dict(zip((float(t) for t in decode(ticks)), decode(words)))
    positions = range(n) if values is None else decode(values)
    return [str(where.get(float(p), "")) for p in positions]


def ranks_first(figure: dict, answer: str) -> list[str]:
    """Where `figure` (Plotly's JSON: data and layout) ranks `answer` first: a bar chart's largest bar, or a
    heatmap row's (or column's) largest cell, labelled with the answer."""
    found, want = [], plain(answer)
    title = str((figure.get("layout", {}).get("title") or {}).get("text", "") if isinstance(
        figure.get("layout", {}).get("title"), dict) else figure.get("layout", {}).get("title", ""))
    for trace in figure.get("data", []):
        x, y = _values(trace, "x"), _values(trace, "y")
        if trace.get("type") == "heatmap" and trace.get("z") is not None:
            z = _numbers(decode(trace["z"]))
            if z is None or z.ndim != 2:
                continue
            layout = figure.get("layout", {})
            x = _ticked(x, layout.get("xaxis" + trace.get("xaxis", "x")[1:], {}), z.shape[1])
            y = _ticked(y, layout.get("yaxis" + trace.get("yaxis", "y")[1:], {}), z.shape[0])
            columns = [plain(c) for c in x] if _is_labels(x) else None
            rows = [plain(r) for r in y] if _is_labels(y) else None
            filled = np.where(np.isfinite(z), z, -np.inf)
            if columns and len(columns) == z.shape[1] and any(
                    columns[int(filled[r].argmax())] == want for r in range(z.shape[0]) if np.isfinite(z[r]).any()):
                found.append(f"{title!r}: a row's largest cell is in the column of {answer!r}")
            if rows and len(rows) == z.shape[0] and any(
                    rows[int(filled[:, c].argmax())] == want for c in range(z.shape[1]) if np.isfinite(z[:, c]).any()):
                found.append(f"{title!r}: a column's largest cell is in the row of {answer!r}")
        elif trace.get("type", "bar") == "bar":
            for labels, values in ((x, y), (y, x)):
                numbers = _numbers(values) if _is_labels(labels) else None
                if numbers is not None and numbers.ndim == 1 and len(numbers) == len(labels):
                    if plain(labels[int(np.nanargmax(numbers))]) == want:
                        found.append(f"{title!r}: the largest bar is {answer!r}")
    return found


def gives_away(figures: list[dict], texts: list[str], answer: str | None, said: str = "",
               count: int | None = None) -> list[str]:
    """Everything on a screen (its charts' figures and its texts) that gives the answer away."""
    found = []
    if answer is not None:
        for figure in figures:
            found += ranks_first(figure, answer)
    text = "\n".join(texts)
    if said and said in text:
        found.append(f"the reveal's sentence is written: {said[:80]!r}")
    if count is not None and (f"{count} tokens" in text or f"**{count}** tokens" in text):
        found.append(f"the count {count} is written")
    return found


def pointed_at(figures: list[dict]) -> list[str]:
    """The labels the reveal's pointer stands on (explorer/pointer.py's annotation "the model's answer"): a bar's
    category or a heatmap cell's column (a row's label where it points at a whole row)."""
    spots = []
    for figure in figures:
        layout = figure.get("layout", {})
        for note in layout.get("annotations", []):
            if note.get("name") != "the model's answer":
                continue
            for letter in ("x", "y"):
                value = note.get(letter)
                axis = layout.get(f"{letter}axis" + (note.get(f"{letter}ref") or letter)[1:], {})
                if isinstance(value, str):
                    spots.append(value)
                elif axis.get("ticktext") is not None and value is not None:
                    ticks = [float(t) for t in decode(axis["tickvals"])]
                    if float(value) in ticks:
                        spots.append(str(decode(axis["ticktext"])[ticks.index(float(value))]))
    return spots
