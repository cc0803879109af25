"""Guess first, then see, as a test reads a screen: does anything on it give a question's answer away?

A screen gives the answer away when a chart's data ranks it first (the tallest bar of a bar chart, the largest cell
of a heatmap's row is in the answer's column or row), or when a text on it holds the sentence the reveal says or,
for a token count, the count of tokens. The answer is what the test computed from the model on its own
(tests/questions_support.py); the charts are Plotly's figure data as the page sends them (AppTest) or as the
browser drew them (Chromium: each `.js-plotly-plot` element's `data`).
"""
import html
import re

import numpy as np

from conftest import decode


def plain(label) -> str:
    """A token as a chart or an option writes it, compared without the marks for spaces and quotes."""
    text = re.sub(r" \((position|id) \d+\)$", "", str(label))    # its place in the sentence, or its id
    text = re.sub(r"^\d+ (?=\S)", "", text)                          # a heatmap's "3 cat": position 3
    text = re.sub(r"\s*<br\s*/?>\s*", " ", text)                      # a chart's label wrapped onto two lines
    text = html.unescape(text)                                       # a label's "&lt;": the "<" a student reads
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


# --- a screen in Chromium ----------------------------------------------------------------------------------------

# Each Plotly chart's data and layout as the browser drew it (typed arrays as lists), and the main area's text.
SCREEN = """() => {
  const plain = v => v == null ? null : ArrayBuffer.isView(v) ? Array.from(v) : Array.isArray(v) ? v.map(plain) : v;
  const figures = [...document.querySelectorAll('[data-testid=stMain] .js-plotly-plot')].map(el => {
    const layout = {title: el.layout && el.layout.title, annotations: (el.layout && el.layout.annotations) || []};
    for (const [name, axis] of Object.entries(el.layout || {}))
      if (/^[xy]axis\\d*$/.test(name)) layout[name] = {tickvals: plain(axis.tickvals), ticktext: plain(axis.ticktext)};
    return {layout, data: (el.data || []).map(t => ({type: t.type || 'scatter', x: plain(t.x), y: plain(t.y),
      z: plain(t.z), xaxis: t.xaxis, yaxis: t.yaxis}))};
  });
  return {figures, text: document.querySelector('[data-testid=stMain]').innerText};
}"""


def screen(page) -> tuple[list[dict], str]:
    """What a browser tab shows: its charts' figures and its main area's text."""
    seen = page.evaluate(SCREEN)
    return seen["figures"], seen["text"]


def facts(lesson, index: int, name: str = "tinytales", text: str = "") -> tuple[str | None, str, int | None]:
    """A lesson step's question as this test answers it from the model on its own: (the answer, the sentence the
    reveal says, the token count for a token-count question)."""
    from explorer import questions
    from questions_support import bundle_of, expected_answer
    step = lesson.steps[index]
    model, text = lesson.reading_at(index, name, text)
    if not questions.KINDS[step.question.kind].needs_model:
        return step.question.answer, "", None                 # a choice's own answer, a poll's none
    bundle = bundle_of(model)
    ids = bundle.tokenizer.encode(text)[-min(bundle.model.cfg.max_len, 64):]
    answer = expected_answer(bundle, ids, {"model": model, "text": text, **step.view, "fields": step.fields},
                             step.question)
    reading = questions.reading(model, bundle, text, 64)
    cfg = bundle.model.cfg
    where = questions.place(step.view, cfg.n_layers, cfg.n_heads, len(reading.ids), step.fields)
    if step.question.kind == "first-right":                   # the model at each step the server has
        from dataclasses import replace
        from explorer.steps import learning
        from questions_support import checkpoints_of
        where = replace(where, learned=learning.learning(checkpoints_of(model), list(reading.ids)))
    said = questions.ask(step.question, reading, where).said
    return answer, said, int(answer) if step.question.kind == "token-count" else None


# The kinds whose answer the page's chart holds, where the reveal's pointer lands (explorer/pointer.py): "label" where
# the bar or cell is labelled with the answer's own words, "pointer" where the chart names it shorter ("MLP 1").
# Where: the page and tab of the chart the answer's Target names (another page's chart of the same numbers, a
# what-if's bars, gets no pointer).
CHARTED = {"next-word": ("prediction", None, "label"), "looks-at": ("attention", "who-looks", "label"),
           "nearest-word": ("embedding", "neighbours", "label"), "reads-source": ("encoder-decoder", "cross", "label"),
           "lens-layer": ("residual", "lens", "label"), "biggest-push": ("why", "attribution", "pointer")}


def charted(step) -> str | None:
    """How the reveal points at a step's answer on its page ("label", "pointer"), or None where it does not."""
    page, tab, how = CHARTED.get(step.question.kind, (None, None, None))
    return how if (step.page, step.tab) == (page, tab) else None


def plain_words(said: str) -> str:
    """A reveal's sentence (Markdown) as the browser shows it: no escapes, no bold marks."""
    return re.sub(r"\\(.)", r"\1", said).replace("**", "")
