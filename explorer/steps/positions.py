"""Step 3, positional encoding: where each token stands, added to what it is.

Figure builders take a View (or plain values) and return Plotly figures; the page only lays them out.
The "what if" at the end compares two orders of the same words with and without the position signal,
and says honestly what the numbers show: without positions every word enters the model with the same
vector in both orders, but the causal mask still leaks a little order; only with the mask lifted too
are the two sentences exactly the same to the model.
"""
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from model.config import ModelConfig
from model.inputs import Prepared, prepare_text
from model.layers import rope_frequencies
from model.transformer import Trace, TransformerLM, sinusoidal_table

from explorer import memo
from explorer.steps import whatif
from explorer.steps.embedding import cosine_matrix
from explorer.plot import heatmap, labels, safe, style, token_label, window
from explorer.steps.tokenization import UNITS
from explorer.registry import BY_SLUG
from explorer.view import View, quote

# --- explanations -------------------------------------------------------------------------------

_WHY = """\
Attention, the next step, looks at all the tokens at once, like a crowd seen from above: on its own it
cannot tell who came first. "the dog chased the cat" and "the cat chased the dog" use the same words,
and only their order says who did the chasing. So before anything else, each token's vector gets a
**seat number** added to it, like the row and seat printed on a cinema ticket, or the page number at
the bottom of a page. Walk through the tabs below from left to right.
"""

_SINUSOIDAL = """\
This model uses **sinusoidal** positions, the recipe of the 2017 paper that introduced transformers.
A seat number here is not one number but {D} numbers, one per dimension, and each is a wave (a sine
or a cosine) of the position. The first dimensions wave fast, like the second hand of a clock; the
last ones wave slowly, like the hour hand. Together the hands give every position its own pattern,
just as the three hands of a clock together tell the exact time. Nothing here is learned: the same
table (one row per position, up to the context of {L}) is added to every sentence.
"""

_LEARNED = """\
This model uses **learned** positions, as GPT-2 does. It keeps a table with one row of {D} numbers
for each seat, 0 to {last}, and it learned those numbers during training, just like the token
embeddings. Where sinusoidal positions come from a formula, these rows are whatever helped this
model predict best; the figures show what it found.
"""

_NONE = """\
This model has **no position signal**: its position vectors are all zeros, so each token's input is
its token embedding alone. To the model the sentence arrives as a bag of words: "the dog chased the
cat" and "the cat chased the dog" enter as the same vectors (one per token) in a different order. The only hint
of order left is the causal mask of the next step (each token sees only the tokens before it); the
experiment in the last tab, "What if?", measures how much that hint is worth.
"""


_ROPE = """\
This model uses **rotary positions** (RoPE), as Llama, Mistral, Qwen, SmolLM2 and Pythia do. Nothing is added to the
token's vector: its position vector is all zeros. Instead, inside every attention head, each query and each key
is **turned**. {turned} form {pairs} pairs, and each pair is turned like a clock hand by an angle
that grows with the position: position x frequency, one frequency per pair, from 1 radian per position (the
fastest pair) down to {slowest:.6f} (the slowest, base θ = {theta:,.0f}). A query and a key turned this way
have a dot product that depends only on how far apart they stand, not on where: the "What if?" tab shifts every
position and shows the scores unchanged.
"""


def intro(cfg: ModelConfig) -> str:
    """The page's explanation, for the kind of position signal this model uses."""
    body = {"sinusoidal": _SINUSOIDAL, "learned": _LEARNED, "none": _NONE, "rope": _ROPE}[cfg.pos]
    K, R = cfg.d_head, cfg.d_rotary
    slowest = float(rope_frequencies(R, cfg.rope_theta)[-1]) if cfg.pos == "rope" else 0.0
    turned = f"A head's {K} dimensions" if R == K else f"The first {R} of a head's {K} dimensions"
    text = body.format(D=cfg.d_model, L=cfg.max_len, last=cfg.max_len - 1, K=K, pairs=R // 2, turned=turned,
                       slowest=slowest, theta=cfg.rope_theta)
    return _WHY + "\n" + text + ("" if cfg.pos != "rope" or R == K else "\n" + partial_rotary_words(cfg) + "\n")


def partial_rotary_words(cfg: ModelConfig) -> str:
    """What a model that turns only part of each head (Pythia: a quarter) does with the rest."""
    K, R = cfg.d_head, cfg.d_rotary
    return (f"**Only part of each head turns** in this model: dimensions 0 to {R - 1} ({R / K:.0%} of the {K}, the "
            f"model's rotary fraction {cfg.rotary_fraction:g}) turn with the position; dimensions {R} to {K - 1} are "
            "never turned. A query and a key meet in both parts at once: the turned part's share of their score "
            "depends on how far apart the two tokens stand, the unturned part's share does not, so a head can match "
            "a word wherever it stands and still tell near from far.")


def kind_caption(cfg: ModelConfig) -> str:
    return {"sinusoidal": f"Position signal: sinusoidal (fixed waves, {cfg.d_model} per position).",
            "learned": f"Position signal: learned (a trained table of {cfg.max_len:,} rows of {cfg.d_model} numbers).",
            "none": "Position signal: none. This model has no position signal.",
            "rope": f"Position signal: rotary (queries and keys turned in {cfg.d_rotary // 2} pairs per head"
                    + (f", {cfg.d_rotary} of its {cfg.d_head} dimensions" if cfg.d_rotary < cfg.d_head else "")
                    + f", base {cfg.rope_theta:,.0f}; nothing added to the stream)."}[cfg.pos]


# The page's sections (tabs); only the open one is drawn, so a new sentence redraws one or two charts.
SECTIONS = BY_SLUG["positions"].labels           # the tabs, named in explorer/registry.py

FORMULA_TEXT = """\
Below, for the same dimensions and seats: the waves the 2017 paper's sinusoidal formula would have put there.
This model was never given them; it learned its own values from data. Compare the shapes: in the real GPT-2
many learned dimensions turn out to be smooth curves over the seats too, found by training, not written down.
"""

def sum_text(v: View, trace: Trace) -> str:
    """What the sum does to a word that stands in two seats, for this model (markdown): said in general from its
    position table, then shown on the first word the sentence repeats, from the inputs the model read."""
    table = position_table(v.bundle.model)
    one = UNITS[v.bundle.tokenizer.kind][0]
    if table is None:
        text = (f"The token's vector says **what** the {one} is. This model adds no position vector (every "
                "position vector is zero), so the input the first layer reads is the token's vector alone: the same "
                f"{one} in two different seats enters the model as the same vector.")
    else:
        shared = len(table) - len(torch.unique(table, dim=0))      # seats whose row another seat has too
        text = (f"The token's vector says **what** the {one} is; the position vector says **where** it stands. They "
                "are simply added, number by number, and the sum is what the first layer reads. ")
        text += (f"The same {one} in two different seats therefore enters the model as two different vectors."
                 if shared == 0 else
                 f"Two seats with different position vectors give the same {one} two different inputs; in this "
                 f"model's table, {shared:,} of {len(table):,} seats repeat another seat's vector.")
    ids = list(v.prepared.ids)
    repeat = next(((i, j) for j in range(len(ids)) for i in range(j) if ids[i] == ids[j]), None)
    if repeat is not None:
        i, j = repeat
        inputs = trace["embed.out"][0]                                     # (T, D)
        gap = float((inputs[i] - inputs[j]).abs().max())
        where = f"In your sentence, {quote(v.tokens[j])} stands in seats {i} and {j}"
        text += (f" {where}: its two input vectors differ by up to **{gap:.4f}** in one dimension." if gap > 0 else
                 f" {where}: its two input vectors are exactly the same.")
    return text


SIMILARITY_TEXT = {
    "sinusoidal": "Cosine similarity: 1 means two position vectors point the same way, 0 means unrelated. "
                  "Neighbouring seats look alike; further apart the similarity mostly falls, in ripples (with "
                  "very few dimensions a far seat can look alike again). With sinusoidal waves the similarity "
                  "depends only on the distance between two seats, not on where they are.",
    "learned": "Cosine similarity: 1 means two position vectors point the same way, 0 means unrelated. "
               "Whatever structure you see here (for example neighbours looking alike) the model learned.",
}

def order_text(kind: str) -> str:
    """The two-orders experiment, in the units this model's tokenizer cuts text into (markdown)."""
    one, many = UNITS[kind]
    return f"""\
Take the seat numbers away and what is left? Here the model reads two sentences made of the same
{many} in a different order, three times: as trained, with the position signal removed, and with the
position signal removed **and** the causal mask lifted (every {one} may then see every other {one}).
For each {one} we compare what the model predicts after it in the two sentences (the {one} is matched
with the same {one} in the other sentence, wherever it stands).
"""


# --- values ---------------------------------------------------------------------------------------


def position_table(model: TransformerLM) -> torch.Tensor | None:
    """The model's whole position table (max_len x D), or None when it has no position signal."""
    if model.cfg.pos == "sinusoidal":
        return model.embed.pos_table.detach()
    if model.cfg.pos == "learned":
        return model.embed.pos.weight.detach()
    return None


def default_dims(cfg: ModelConfig) -> list[int]:
    """Dimensions shown first: a fast sine/cosine pair and a slower pair."""
    D = cfg.d_model
    picks = [0, 1, D // 8 * 2, D // 8 * 2 + 1]
    return list(dict.fromkeys(d for d in picks if d < D))


def wavelength(cfg: ModelConfig, dim: int) -> float:
    """How many positions one full wave of a sinusoidal dimension takes: 2 pi * 10000^(2i/D)."""
    i = dim // 2
    return 2 * math.pi * 10000 ** (2 * i / cfg.d_model)


def dim_name(cfg: ModelConfig, dim: int, sinusoidal: bool | None = None) -> str:
    if cfg.pos == "sinusoidal" if sinusoidal is None else sinusoidal:
        wave = "sin" if dim % 2 == 0 else "cos"
        return f"dim {dim} ({wave}, one wave = {wavelength(cfg, dim):.1f} positions)"
    return f"dim {dim}"


def _dim_labels(shown: range) -> list[str]:
    return [str(d) for d in shown]


def _window_note(shown: range, n: int) -> str:
    return f" (dimensions {shown.start}–{shown.stop - 1} of {n:,})" if len(shown) < n else ""


def _thin_ticks(fig: go.Figure, shown: range) -> None:
    """Label every 8th (or 4th) dimension when there are many, so numbers do not overlap."""
    n = len(shown)
    if n > 24:
        step = 8 if n > 64 else 4
        fig.update_xaxes(tickvals=list(range(0, n, step)), ticktext=[str(d) for d in shown[::step]])


# --- figures --------------------------------------------------------------------------------------


def added_figure(v: View, trace: Trace, dims: tuple[int, int] | None = None) -> go.Figure:
    """T x D heatmap of the position vectors actually added to this sentence (trace embed.pos); a window of
    dimensions `dims` = (start, stop) when there are more than DIMS_SHOWN."""
    pos = trace["embed.pos"][0]                                        # (T, D)
    shown = window(pos.shape[1], dims)
    fig = heatmap(pos[:, shown.start:shown.stop], labels(v.tokens), _dim_labels(shown),
                  title="Position vectors added to your sentence" + _window_note(shown, pos.shape[1]),
                  row_title="position", col_title="dimension", value_name="position value",
                  presenter=v.presenter, height=max(240, 26 * pos.shape[0] + 130))
    _thin_ticks(fig, shown)
    return fig


MAX_TABLE_ROWS = 128


def table_figure(v: View, trace: Trace, dims: tuple[int, int] | None = None) -> go.Figure | None:
    """The model's whole position table (up to MAX_TABLE_ROWS positions), with the sentence's rows boxed."""
    table = position_table(v.bundle.model)
    if table is None:
        return None
    rows = min(table.shape[0], MAX_TABLE_ROWS)
    shown = window(table.shape[1], dims)
    D, T = len(shown), trace["tokens"].shape[1]
    what = "sinusoidal: fixed waves" if v.bundle.model.cfg.pos == "sinusoidal" else "learned in training"
    fig = heatmap(table[:rows, shown.start:shown.stop], [str(p) for p in range(rows)], _dim_labels(shown),
                  title=f"The whole position table ({what})" + _window_note(shown, table.shape[1]),
                  row_title="position", col_title="dimension",
                  value_name="position value", presenter=v.presenter, height=min(900, max(300, 14 * rows + 130)))
    _thin_ticks(fig, shown)
    if rows > 24:
        fig.update_yaxes(tickvals=list(range(0, rows, 4)), ticktext=[str(p) for p in range(0, rows, 4)])
    fig.add_shape(type="rect", x0=-0.5, x1=D - 0.5, y0=-0.5, y1=min(T, rows) - 0.5,
                  line=dict(color="black", width=3))
    fig.add_annotation(x=D - 0.5, y=min(T, rows) - 0.5, text="your sentence's rows", showarrow=False,
                       xanchor="right", yanchor="top", bgcolor="white", font=dict(color="black"))
    return fig


SAMPLES_PER_POSITION = 20      # the smooth wave between two seats is drawn from this many points


def smooth_wave(cfg: ModelConfig, dim: int, positions: np.ndarray) -> np.ndarray:
    """A sinusoidal dimension's wave at any (fractional) position, by the table's own formula:
    sin(p / 10000^(2i/D)) for an even dimension 2i, cos of the same for the odd one after it."""
    freq = math.exp((dim // 2 * 2) * (-math.log(10000.0) / cfg.d_model))
    return np.sin(positions * freq) if dim % 2 == 0 else np.cos(positions * freq)


CURVE_SEATS = 128      # seats in view at first (GPT-2 has 1,024: its fast waves would be a solid block)


def curves_figure(v: View, trace: Trace, dims: list[int], formula: bool = False) -> go.Figure | None:
    """Each chosen dimension's value over every position 0..max_len-1: a sinusoidal wave drawn smooth (sampled
    finely between the seats) with a dot at each real seat (the table's value); the sentence's seats are the
    large dots. Learned values have nothing between seats, so they are drawn as straight segments.

    `formula` draws the 2017 paper's sinusoidal table for the same dimensions and seats instead, to set
    beside a learned table (GPT-2's): what the formula would have put there."""
    cfg = v.bundle.model.cfg
    table = sinusoidal_table(cfg.max_len, cfg.d_model) if formula else position_table(v.bundle.model)
    if table is None or not dims:
        return None
    positions = np.arange(table.shape[0])
    fine = np.linspace(0, positions[-1], positions[-1] * SAMPLES_PER_POSITION + 1)
    T = trace["tokens"].shape[1]
    tokens = [token_label(t) for t in v.tokens]
    palette = ["#4477AA", "#EE6677", "#228833", "#CCBB44", "#66CCEE", "#AA3377", "#BBBBBB", "#000000"]
    sinusoidal = formula or cfg.pos == "sinusoidal"
    data = []
    for n, d in enumerate(dims):
        colour = palette[n % len(palette)]
        column = table[:, d].numpy()
        x, y = (fine, smooth_wave(cfg, d, fine)) if sinusoidal else (positions, column)
        data.append(go.Scatter(x=x, y=y, mode="lines", name=dim_name(cfg, d, sinusoidal), line=dict(color=colour, width=2),
                               legendgroup=str(d), hoverinfo="skip"))
        data.append(go.Scatter(x=positions, y=column, mode="markers", name=f"dim {d}: every seat",
                               marker=dict(color=colour, size=6), legendgroup=str(d), showlegend=False,
                               hovertemplate=f"dim {d}<br>position %{{x}}<br>value %{{y:.4f}}<extra></extra>"))
        data.append(go.Scatter(x=list(range(T)), y=column[:T], mode="markers", name=f"dim {d}: your sentence",
                               marker=dict(color=colour, size=11, line=dict(color="black", width=1)),
                               legendgroup=str(d), showlegend=False, customdata=tokens,
                               hovertemplate=(f"dim {d}<br>position %{{x}}: %{{customdata}}"
                                              "<br>value %{y:.4f}<extra></extra>")))
    kind = ("the sinusoidal formula, not used by this model" if formula else
            "sine and cosine waves" if sinusoidal else "learned values")
    shown = min(len(positions), CURVE_SEATS)
    more = f"; the first {shown} of {len(positions):,} seats (drag to pan)" if shown < len(positions) else ""
    fig = go.Figure(data, layout=dict(
        title=f"Chosen dimensions over every position ({kind})<br><sup>dots: the seats; large dots: your "
              f"sentence's seats{more}</sup>",
        xaxis=dict(title="position", range=[-0.5, shown - 0.5]), yaxis=dict(title="value"),
        legend=dict(orientation="h", y=-0.22)))
    fig.add_vrect(x0=-0.5, x1=T - 0.5, fillcolor="#DDDDDD", opacity=0.35, line_width=0, layer="below")
    return style(fig, v.presenter, 420)


def sum_figure(v: View, trace: Trace, position: int, dims: tuple[int, int] | None = None) -> go.Figure:
    """Three rows for one token: its token vector, its position vector, and their sum (the input)."""
    rows = torch.stack([trace["embed.tok"][0, position], trace["embed.pos"][0, position],
                        trace["embed.out"][0, position]])                  # (3, D)
    token = v.tokens[position]
    shown = window(rows.shape[1], dims)
    fig = heatmap(rows[:, shown.start:shown.stop], [f"token {token}", f"+ position {position}", "= input"],
                  _dim_labels(shown),
                  title=f"Token + position = input, for {safe(quote_plain(token))} at position {position}",
                  col_title="dimension", value_name="value", presenter=v.presenter, height=260)
    _thin_ticks(fig, shown)
    return fig


def sum_caption(v: View, trace: Trace, position: int) -> str:
    """The lengths of the three vectors: which of the two parts dominates the input (plain text)."""
    tok, pos, out = (float(trace[name][0, position].norm()) for name in ("embed.tok", "embed.pos", "embed.out"))
    return (f"Lengths (square root of the sum of squares): token vector {tok:.2f}, position vector {pos:.2f}, "
            f"input {out:.2f}.")


def quote_plain(token: str) -> str:
    """A token in curly quotes for a Plotly title (escape it with safe() too)."""
    return "“" + token.replace("\n", " ") + "”"


def similarity_figure(v: View, trace: Trace, whole_table: bool = False) -> go.Figure | None:
    """Cosine similarity between position vectors: the sentence's T positions, or the whole table."""
    if v.bundle.model.cfg.pos in ("none", "rope"):
        return None
    if whole_table:
        table = position_table(v.bundle.model)[:MAX_TABLE_ROWS]
        names = [str(p) for p in range(table.shape[0])]
        title = "Similarity between position vectors (the whole table)"
    else:
        table = trace["embed.pos"][0]
        names = labels(v.tokens)
        title = "Similarity between the position vectors of your sentence"
    sims = cosine_matrix(table).numpy()                                                # (n, n)
    n = len(names)
    fig = heatmap(sims, names, names, title=title, row_title="position", col_title="position",
                  value_name="cosine similarity", zmin=-1.0, zmax=1.0, text=n <= 12,
                  presenter=v.presenter, height=min(760, max(320, 26 * n + 140)))
    if n > 24:
        ticks = list(range(0, n, 4))
        fig.update_xaxes(tickvals=ticks, ticktext=[safe(names[i]) for i in ticks])
        fig.update_yaxes(tickvals=ticks, ticktext=[safe(names[i]) for i in ticks])
    return fig


# --- rotary positions: each pair of a head's dimensions turned by position x frequency -----------------

def rope_figure(v: View, trace: Trace) -> go.Figure | None:
    """The angle (radians) each pair of query and key dimensions turns by at each position of the sentence."""
    if "embed.rope" not in trace:
        return None
    angles = trace["embed.rope"][0].numpy()                                            # (T, R/2)
    pairs = [f"pair {i}" for i in range(angles.shape[1])]
    partial = v.bundle.model.cfg.d_rotary < v.bundle.model.cfg.d_head
    return heatmap(angles, labels(v.tokens), pairs, title="Rotary positions: the angle each pair turns by",
                   row_title="position", col_title="pair of dimensions (i and i + R/2, of the R that turn)" if partial
                   else "pair of dimensions (i and i + K/2)", value_name="angle (radians)",
                   text=angles.size <= 64, presenter=v.presenter,
                   height=min(440, max(300, 14 * len(v.tokens) + 120)) if v.phone      # on a phone's first screen
                   else min(760, max(320, 26 * len(v.tokens) + 140)))


def rope_text(v: View, trace: Trace) -> str:
    """The angles of the figure said in numbers, read from the trace (markdown)."""
    cfg = v.bundle.model.cfg
    angles = trace["embed.rope"][0]                                                    # (T, R/2)
    freqs = rope_frequencies(cfg.d_rotary, cfg.rope_theta)
    last = angles.shape[0] - 1
    turned = (f"Each head's {cfg.d_head} dimensions form {cfg.d_head // 2} pairs" if cfg.d_rotary == cfg.d_head else
              f"The first {cfg.d_rotary} of each head's {cfg.d_head} dimensions form {cfg.d_rotary // 2} pairs (the "
              f"other {cfg.d_head - cfg.d_rotary} never turn)")
    return (f"{turned}. Pair 0 turns by "
            f"{float(freqs[0]):.4f} radian per position, pair {len(freqs) - 1} by {float(freqs[-1]):.6f}. At position "
            f"{last} ({quote(v.tokens[last])}) pair 0 has turned **{float(angles[last, 0]):.4f}** radians and pair "
            f"{len(freqs) - 1} **{float(angles[last, -1]):.6f}**: the angle is position x frequency. The queries and "
            "keys are turned by these angles inside every attention layer; nothing is added to the token's vector.")


SHIFT = 5          # the what-if's shift: every position moved on by this many seats


def shift_edits(cfg: ModelConfig, k: int) -> dict:
    """Every rotary angle as if each token stood k seats further on."""
    step = rope_frequencies(cfg.d_rotary, cfg.rope_theta)
    return {"embed.rope": lambda angles: angles + k * step}


@dataclass(frozen=True)
class Shift:
    k: int
    score_change: float        # the largest change of any attention score, any layer and head
    angle_change: float        # the largest change of any rotary angle (radians)
    query_change: float        # the largest change of any turned query (they do move)


def shift_positions(v: View, trace: Trace, k: int = SHIFT) -> Shift:
    """Shift every position by k: the queries and keys turn further, their scores stay (they depend on distance)."""
    cfg = v.bundle.model.cfg
    shifted = v.bundle.model.run(list(v.prepared.ids), edits=shift_edits(cfg, k))
    biggest = lambda name: max(float((shifted[name, i] - trace[name, i]).abs().max())   # noqa: E731
                               for i in range(cfg.n_layers))
    return Shift(k, biggest("scores"), float((shifted["embed.rope"] - trace["embed.rope"]).abs().max()),
                 biggest("q"))


def shift_text(s: Shift) -> str:
    """What the shift did, in numbers (markdown)."""
    return (f"Every token moved on by **{s.k}** seats: each rotary angle grew by up to {s.angle_change:.4f} radians "
            f"and the turned queries changed by up to {s.query_change:.4f}, yet no attention score changed by more "
            f"than **{s.score_change:.1e}** (float rounding). A turned query and key meet at an angle that depends "
            "only on how far apart they stand, so moving the whole sentence changes nothing attention sees.")


# --- cached figures: they depend only on the model, the sentence and presenter mode ---------------


def figure(kind: str, v: View, *args) -> go.Figure | None:
    """The view's figure `kind` ("added", "table", "curves", "sum", "similarity"), built once per sentence."""
    return memo.per_view(_BUILDERS[kind], v, *args)


_BUILDERS = {"added": added_figure, "table": table_figure, "curves": curves_figure, "sum": sum_figure,
             "similarity": similarity_figure, "rope": rope_figure}


# --- show the math ------------------------------------------------------------------------------


def math_lines(v: View, trace: Trace, position: int, dim: int) -> list[str]:
    """One entry of the position signal worked out, then added to the token's value (markdown lines)."""
    cfg = v.bundle.model.cfg
    token = quote(v.tokens[position])
    tok = float(trace["embed.tok"][0, position, dim])
    pos = float(trace["embed.pos"][0, position, dim])
    out = float(trace["embed.out"][0, position, dim])
    lines = [f"Token {token} at position **{position}**, dimension **{dim}** of {cfg.d_model}:"]
    if cfg.pos == "sinusoidal":
        i = dim // 2
        rate = 10000 ** (2 * i / cfg.d_model)
        angle = position / rate
        wave = "sin" if dim % 2 == 0 else "cos"
        value = math.sin(angle) if wave == "sin" else math.cos(angle)
        lines += [
            f"1. Dimension {dim} is {'even' if wave == 'sin' else 'odd'}, so it is a **{wave}e** wave"
            f" with i = {dim} // 2 = {i}.",
            f"2. Its slowness: 10000^(2·{i}/{cfg.d_model}) = 10000^{2 * i / cfg.d_model:.4f} = **{rate:.4f}**"
            f" (one full wave every 2π × {rate:.4f} = {2 * math.pi * rate:.1f} positions).",
            f"3. Angle: position / slowness = {position} / {rate:.4f} = **{angle:.4f}** radians.",
            f"4. {wave}({angle:.4f}) = **{value:.4f}**; the model's table holds **{pos:.4f}**.",
        ]
    elif cfg.pos == "learned":
        lines.append(f"1. The model looks up row {position} of its learned table and takes dimension {dim}:"
                     f" **{pos:.4f}** (a number it learned in training, no formula).")
    else:
        lines.append(f"1. This model has no position signal: the position value is **{pos:.4f}**.")
    lines.append(f"{len(lines)}. Input = token + position = {tok:.4f} + ({pos:.4f}) = **{out:.4f}**.")
    return lines


# --- what if: the same words in another order -----------------------------------------------------

DEFAULT_PAIR = ("the dog chased the cat", "the cat chased the dog")
CONDITIONS = ("as trained", "positions removed", "positions removed, mask lifted")
INPUT_COLUMN = "inputs differ by"
PREDICTION_COLUMN = "predictions differ by"
PRESENTER_COLUMNS = ("model", INPUT_COLUMN, PREDICTION_COLUMN)     # what fits on a projector
SAME = 5e-5         # differences below this print as 0.0000: the same to every digit shown


MAX_TRIED = 60      # word swaps of the sidebar sentence tried for a pair


def same_tokens_reordered(tokenizer, a: str, b: str) -> bool:
    """`a` and `b` are read as exactly the same tokens (none of them <unk>) in a different order."""
    ids_a, ids_b = tokenizer.encode(a), tokenizer.encode(b)
    return ids_a != ids_b and sorted(ids_a) == sorted(ids_b) and tokenizer.unk_id not in ids_a


def _reorders(text: str):
    """`text` with its words reversed, then with two of its words swapped, the farthest apart first and the first
    word kept in place first (a BPE tokenizer cuts a word differently at the very start, where no space comes
    before it)."""
    words = text.split()
    yield " ".join(words), " ".join(words[::-1])
    pairs = sorted(((i, j) for j in range(len(words)) for i in range(j) if words[i] != words[j]),
                   key=lambda p: (p[0] == 0, p[0] - p[1]))
    for i, j in pairs[:MAX_TRIED]:
        swapped = list(words)
        swapped[i], swapped[j] = words[j], words[i]
        yield " ".join(words), " ".join(swapped)


def _from_vocabulary(tokenizer):
    """Three known tokens of the vocabulary, written in two orders (for a list tokenizer, which decodes them as
    they are)."""
    known = [i for i, t in enumerate(tokenizer.vocab) if i != tokenizer.unk_id and not (t.startswith("<") and
                                                                                       t.endswith(">"))][:3]
    if len(known) == 3:
        yield tokenizer.decode(known), tokenizer.decode(known[::-1])


def default_pair(v: View) -> tuple[str, str]:
    """Two sentences that this model's tokenizer reads as exactly the same tokens in a different order: the
    dog-and-cat pair when it has no unknown word; otherwise the sidebar sentence with its words reversed, or two
    of them swapped; otherwise the same with its unknown words left out; otherwise three tokens of the vocabulary
    in two orders. The sidebar sentence twice when none works (the page then says the two are the same)."""
    tok = v.bundle.tokenizer
    text = v.text or ""
    known = " ".join(w for w in text.split() if tok.unk_id not in tok.encode(w))      # its unknown words left out
    for a, b in (DEFAULT_PAIR, *_reorders(text), *_reorders(known), *_from_vocabulary(tok)):
        if same_tokens_reordered(tok, a, b):
            return a, b
    return v.text, v.text


def order_traces(v: View, ids: list[int]) -> list[Trace]:
    """The traces of `ids` under each of CONDITIONS (each computed once per server)."""
    return [memo.trace(v, ids=ids), memo.trace(v, whatif.REMOVE_POSITIONS, ids), memo.trace(v, whatif.BAG_OF_WORDS, ids)]


def prepare_pair(v: View, a: str, b: str) -> tuple[Prepared, Prepared]:
    """Both sentences as the model reads them; ValueError with a friendly message for empty text."""
    max_len = v.bundle.model.cfg.max_len
    return prepare_text(v.bundle.tokenizer, a, max_len), prepare_text(v.bundle.tokenizer, b, max_len)


def match_words(ids_a: list[int], ids_b: list[int]) -> list[tuple[int, int]]:
    """(position in A, position in B) for each word of A found in B: the k-th 'the' with the k-th 'the'."""
    seen: dict[int, int] = {}
    where_b: dict[int, list[int]] = {}
    for j, t in enumerate(ids_b):
        where_b.setdefault(t, []).append(j)
    pairs = []
    for i, t in enumerate(ids_a):
        k = seen.get(t, 0)
        seen[t] = k + 1
        if k < len(where_b.get(t, [])):
            pairs.append((i, where_b[t][k]))
    return pairs


@dataclass
class OrderComparison:
    words: pd.DataFrame         # one row per matched word: word, positions, differences per condition
    summary: pd.DataFrame       # one row per condition
    same_bag: bool              # the two sentences use exactly the same words
    identical: bool             # the two sentences are the same token for token
    input_diff: list[float]     # per condition: largest difference between a word's input vectors
    pred_diff: list[float]      # per condition: largest difference in next-token probability, any word
    n_same: list[int]           # per condition: words predicted identically (to 4 decimals)
    tokens_a: list[str]         # the two sentences' tokens, for examples in words
    tokens_b: list[str]


def _top(vocab: list[str], probs: torch.Tensor) -> str:
    best = int(probs.argmax())
    return f"{vocab[best]} {float(probs[best]):.2f}"


def compare_orders(vocab: list[str], ids_a: list[int], ids_b: list[int],
                   traces_a: list[Trace], traces_b: list[Trace]) -> OrderComparison:
    """Per matched word and per condition: how different the two sentences look to the model."""
    pairs = match_words(ids_a, ids_b)
    ia = [i for i, _ in pairs]
    ib = [j for _, j in pairs]
    words = pd.DataFrame({"word": [vocab[ids_a[i]] for i in ia], "position in A": ia, "position in B": ib})
    summary_rows, input_diff, pred_diff, n_same = [], [], [], []
    for name, ta, tb in zip(CONDITIONS, traces_a, traces_b):
        pa = torch.softmax(ta["logits"][0].double(), -1)                   # (Ta, V)
        pb = torch.softmax(tb["logits"][0].double(), -1)                   # (Tb, V)
        if pairs:
            d_pred = (pa[ia] - pb[ib]).abs().amax(-1).numpy()                # (n,)
            d_in = (ta["embed.out"][0, ia] - tb["embed.out"][0, ib]).abs().amax(-1).double().numpy()
        else:
            d_pred = d_in = np.zeros(0)
        words[name] = d_pred
        words[f"{name}: top after A"] = [_top(vocab, pa[i]) for i in ia]
        words[f"{name}: top after B"] = [_top(vocab, pb[j]) for j in ib]
        input_diff.append(float(d_in.max()) if len(d_in) else 0.0)
        pred_diff.append(float(d_pred.max()) if len(d_pred) else 0.0)
        n_same.append(int((d_pred < SAME).sum()))
        best_a, best_b = int(pa[-1].argmax()), int(pb[-1].argmax())
        summary_rows.append({
            "model": name,
            "next after A": f"{vocab[best_a]} ({float(pa[-1, best_a]):.2f})",
            "next after B": f"{vocab[best_b]} ({float(pb[-1, best_b]):.2f})",
            INPUT_COLUMN: input_diff[-1],
            PREDICTION_COLUMN: pred_diff[-1],
            "same prediction": f"{n_same[-1]} of {len(pairs)} words",
        })
    return OrderComparison(words=words, summary=pd.DataFrame(summary_rows),
                           same_bag=sorted(ids_a) == sorted(ids_b), identical=list(ids_a) == list(ids_b),
                           input_diff=input_diff, pred_diff=pred_diff, n_same=n_same,
                           tokens_a=[vocab[t] for t in ids_a], tokens_b=[vocab[t] for t in ids_b])


COLUMN_HELP = {
    "next after A": "next after A / B: the top guess for the word after each whole sentence.",
    INPUT_COLUMN: "inputs differ by: the largest difference between a word's input vector in A and in B.",
    PREDICTION_COLUMN: "predictions differ by: the largest difference in any next-word probability, over all words.",
    "same prediction": "same prediction: words whose prediction is the same in both sentences, to 4 decimals.",
}


def table_caption(columns) -> str:
    """What the shown columns of the comparison table mean."""
    return " ".join(text for column, text in COLUMN_HELP.items() if column in columns)


def order_figure(comparison: OrderComparison, presenter: bool = False) -> go.Figure | None:
    """Grouped bars: for each matched word, the largest next-token probability difference per condition."""
    words = comparison.words
    if words.empty:
        return None
    x = [f"{token_label(w)} ({a}↔{b})"
         for w, a, b in zip(words["word"], words["position in A"], words["position in B"])]
    colours = ["#4477AA", "#EE6677", "#228833"]
    few = len(words) <= (4 if presenter else 8)
    data = [go.Bar(name=name, x=x, y=words[name], marker_color=colour,
                   customdata=np.stack([[safe(t) for t in words[f"{name}: top after A"]],
                                        [safe(t) for t in words[f"{name}: top after B"]]], axis=-1),
                   text=[f"{d:.2f}" for d in words[name]] if few else None, textposition="outside",
                   hovertemplate=("%{x}<br>largest difference %{y:.4f}<br>top next word in A: %{customdata[0]}"
                                  "<br>top next word in B: %{customdata[1]}<extra>" + name + "</extra>"))
            for name, colour in zip(CONDITIONS, colours)]
    fig = go.Figure(data, layout=dict(
        title="Same word, two orders: how different is the next-word prediction?", barmode="group",
        xaxis=dict(title="word (position in A ↔ position in B)"),
        yaxis=dict(title="largest probability difference", range=[0, 1.1]), legend=dict(orientation="h", y=-0.3)))
    return style(fig, presenter, 400)


def _num(x: float) -> str:
    return "0.0000" if x < SAME else f"{x:.4f}"


def order_verdict(comparison: OrderComparison, has_positions: bool, a: str, b: str, rotary: bool = False) -> str:
    """What the numbers show, in words (markdown; the sentences go through quote)."""
    c = comparison
    n = len(c.words)
    if c.identical:
        return "The two sentences are the same, token for token: type two different orders to compare."
    parts = []
    if not c.same_bag:
        parts.append(f"{quote(a)} and {quote(b)} do not use exactly the same words, so even a model blind to "
                     "order would treat them differently; only the words found in both are compared.")
    if n == 0:
        return " ".join(parts + ["They have no word in common, so there is nothing to compare."])
    (as_is, no_pos, bag) = c.pred_diff
    if rotary:
        parts.append(f"**As trained**, the same word enters the model with the same vector in both sentences "
                     f"(largest difference {_num(c.input_diff[0])}): rotary positions add nothing. Its queries and "
                     f"keys are turned by its seat inside attention, and its prediction differs by up to "
                     f"**{_num(as_is)}**.")
    elif has_positions:
        parts.append(f"**As trained**, the same word enters the model with a different vector in each sentence "
                     f"(largest difference {_num(c.input_diff[0])}), because its seat number differs, and its "
                     f"prediction differs by up to **{_num(as_is)}**.")
    else:
        parts.append("This model has no position signal, so removing it changes nothing: the first two rows "
                     "are the same model.")
    parts.append(f"**Without positions**, every word enters with exactly the same vector in both sentences "
                 f"(largest difference {_num(c.input_diff[1])}). ")
    if no_pos < SAME:
        parts[-1] += "Every word's prediction is the same in both sentences."
    else:
        worst = int(c.words["positions removed"].to_numpy().argmax())
        word, i, j = c.words.iloc[worst][["word", "position in A", "position in B"]]
        seen_a, seen_b = " ".join(c.tokens_a[: i + 1]), " ".join(c.tokens_b[: j + 1])
        differ = (f"Yet the predictions still differ, by up to **{_num(no_pos)}** ({c.n_same[1]} of {n} words "
                  f"are predicted the same)")
        if c.same_bag:
            parts[-1] += (f"{differ}. That is the causal mask at work: each word sees only itself and the words "
                          f"before it. {quote(word)} sees {quote(seen_a)} in A but {quote(seen_b)} in B. So even "
                          "with no seat numbers, a causal model still gets some order information from which words "
                          "each word is allowed to see.")
        else:
            parts[-1] += (f"{differ}: partly because of the causal mask (each word sees only the words before it), "
                          "partly because the two sentences do not share every word.")
    if bag < SAME:
        parts.append(f"**Without positions and without the mask**, every word sees the same bag of words in both "
                     f"sentences, and its prediction is identical (largest difference {_num(bag)}, "
                     f"{c.n_same[2]} of {n} words the same): the model can no longer tell the two orders apart.")
    else:
        parts.append(f"**Without positions and without the mask** the predictions differ by at most {_num(bag)}.")
    return "\n\n".join(parts)
