"""Step 6, the residual stream and normalization: a running total that every layer adds to, kept in scale.

Every builder is a plain function of the view and its trace (no Streamlit calls), so tests can call it.
Trace names used: embed.out, blocks.i.resid_pre / attn.in / attn.out / resid_mid / mlp.in / mlp.out /
resid_post, final.norm and logits. The logit lens calls the model's own final norm and unembedding
(read-only, under torch.no_grad) on the stream after each stage.
"""
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
import torch.nn as nn

from explorer import memo
from explorer.plot import as_numpy, for_a_phone, heatmap, labels, safe, style, token_label
from explorer.registry import BY_SLUG
from explorer.view import View, quote

SLUG = "residual"

TEXT = """\
Picture a **shared notebook** that travels with each token through the model. The embedding writes the
first page. Then every layer reads the notebook and **adds its own notes** on top: attention adds what
it gathered from earlier tokens, the feed-forward network adds what it looked up. Nothing is erased;
each layer's output is simply *added* to what is already there. That running total is called the
**residual stream**, and the model's final guess is read from the last page.

Adding instead of replacing has two big benefits. A layer that has nothing useful to say can add
almost nothing and leave the notebook as it was, and during training the learning signal can flow
straight back through the additions to every layer.

Because every layer adds more, the numbers in the stream tend to grow. **Normalization** rescales a
vector before it is used, like converting test scores from different exams to one standard scale so
they can be compared. **LayerNorm** subtracts the vector's average and divides by its spread, so the
numbers end up with mean 0 and variance 1, then applies a learned gain and shift. **RMSNorm** only
divides by the typical size (root mean square), then applies a learned gain (no shift). In a **pre-norm** model (GPT-2 and most modern models)
each sublayer reads a normalized copy while the stream itself is never normalized and tends to grow; in a
**post-norm** model
(the 2017 paper) the stream is normalized after each addition.

The **logit lens** (the last tab) asks the notebook at every stage: "if the model had to answer now,
what would it guess?" Walk through the tabs below from left to right.
"""

# The page's sections (tabs); only the open one is drawn, so a new sentence redraws one chart.
SECTIONS = BY_SLUG["residual"].labels           # the tabs, named in explorer/registry.py

NORM_NAMES = {"layer": "LayerNorm", "rms": "RMSNorm", "none": "no norm"}
ANALOGY_TEXT = {
    "pre": "This model is **pre-norm**: the stream itself is never normalized; each sublayer reads a "
           "normalized copy, and one final norm is applied before the prediction.",
    "post": "This model is **post-norm**: after each addition the whole stream is normalized, so it never "
            "grows far.",
}


# --------------------------------------------------------------------------------------------------
# Stages of the stream
# --------------------------------------------------------------------------------------------------

def stream_stages(view: View, with_mid: bool = True) -> list[tuple[str, str]]:
    """(trace name, plain label) for the stream: embed.out, then resid_mid and resid_post of each block."""
    stages = [("embed.out", "token + position")]
    for i in range(view.bundle.model.cfg.n_layers):
        if with_mid:
            stages.append((f"blocks.{i}.resid_mid", f"layer {i}: after attention"))
        stages.append((f"blocks.{i}.resid_post", f"layer {i}: after feed-forward"))
    return stages


def stream_norms(view: View) -> np.ndarray:
    """(T, S) L2 norm of the stream for each token at each stage of stream_stages."""
    return np.stack([as_numpy(view.trace[name][0].norm(dim=-1)) for name, _ in stream_stages(view)], axis=1)


def stream_norms_figure(view: View) -> go.Figure:
    """Tokens x stages heatmap of the stream's size."""
    stages = stream_stages(view)
    fig = heatmap(stream_norms(view), labels(view.tokens), [label for _, label in stages],
                  title="Size of the residual stream at each stage", row_title="token",
                  col_title="stage", value_name="size", signed=False, text=len(stages) <= 12,
                  presenter=view.presenter, height=max(300, 26 * len(view.tokens) + 150))
    names = np.array([name for name, _ in stages], dtype=object)
    hover_rows = np.array([safe(t) for t in labels(view.tokens)], dtype=object)
    custom = np.dstack([np.repeat(hover_rows[:, None], len(stages), 1), np.repeat(names[None, :], len(view.tokens), 0)])
    fig.update_traces(customdata=custom, hovertemplate="token %{customdata[0]}<br>trace name: %{customdata[1]}"
                                                       "<br>size of the vector (L2 norm) %{z:.4f}<extra></extra>")
    return fig


# --------------------------------------------------------------------------------------------------
# What each sublayer adds
# --------------------------------------------------------------------------------------------------

CONTRIBUTIONS = [  # (trace name suffix, legend, colour)
    ("resid_pre", "stream entering the layer", "#BBBBBB"),
    ("attn.out", "attention adds", "#4477AA"),
    ("resid_mid", "stream after attention", "#888888"),
    ("mlp.out", "feed-forward adds", "#EE6677"),
]


def contributions(view: View, layer: int) -> pd.DataFrame:
    """Per token: L2 norms of the stream and of what attention and the MLP (feed-forward) add to it in `layer`."""
    table = {"token": view.tokens}
    for suffix, _, _ in CONTRIBUTIONS:
        table[suffix] = as_numpy(view.trace[suffix, layer][0].norm(dim=-1)).astype(float)
    return pd.DataFrame(table)


def contributions_figure(view: View, layer: int) -> go.Figure:
    """Grouped bars per token: the stream's size next to the size of each sublayer's addition."""
    table = contributions(view, layer)
    x = [safe(t) for t in labels(view.tokens)]
    fig = go.Figure([go.Bar(name=legend, x=x, y=table[suffix], marker_color=colour,
                            hovertemplate=f"%{{x}}<br>{legend}: size %{{y:.4f}}<br>trace name: "
                                          f"blocks.{layer}.{suffix}<extra></extra>")
                     for suffix, legend, colour in CONTRIBUTIONS])
    fig.update_layout(title=f"What layer {layer} adds to the stream (sizes of the vectors)", barmode="group",
                      xaxis_title="token", yaxis_title="size of the vector",
                      legend=dict(orientation="h", x=0, y=1.0, yanchor="bottom"))
    style(fig, view.presenter, 420)
    return fig.update_layout(margin=dict(t=130 if view.presenter else 95))     # room for the legend above


# --------------------------------------------------------------------------------------------------
# Normalization: where it sits, and what it does to one token
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class NormStep:
    key: str             # "norm1", "norm2", "final"
    label: str
    module: nn.Module
    x_name: str          # what goes in, in plain words (the trace's names are for code, not students)
    y_name: str          # what comes out, in plain words
    x: torch.Tensor      # (T, D)
    y: torch.Tensor      # (T, D), from the trace


def norm_steps(view: View, layer: int) -> list[NormStep]:
    """The norms this model applies in block `layer` (and the final norm), with their real inputs and outputs."""
    model, trace = view.bundle.model, view.trace
    cfg = model.cfg
    if cfg.norm == "none":
        return []
    b, block = f"blocks.{layer}", model.blocks[layer]
    get = lambda name: trace[f"{b}.{name}"][0]                         # noqa: E731  (T, D)
    if cfg.norm_position == "pre":
        last = cfg.n_layers - 1
        return [
            NormStep("norm1", "norm1, before attention", block.norm1, f"the stream entering layer {layer}",
                     "what attention reads", get("resid_pre"), get("attn.in")),
            NormStep("norm2", "norm2, before the feed-forward network", block.norm2,
                     f"the stream entering layer {layer} (a parallel block: what attention reads too)" if cfg.parallel
                     else f"the stream after layer {layer}'s attention", "what the feed-forward network reads",
                     get("resid_pre" if cfg.parallel else "resid_mid"), get("mlp.in")),
            NormStep("final", "final norm, before the prediction", model.final_norm,
                     f"the stream leaving the last layer ({last})", "what the prediction reads",
                     trace["resid_post", last][0], trace["final.norm"][0]),
        ]
    return [
        NormStep("norm1", "norm1, after attention is added", block.norm1,
                 f"the stream entering layer {layer} plus what attention adds", f"the stream after layer {layer}'s attention",
                 get("resid_pre") + get("attn.out"), get("resid_mid")),
        NormStep("norm2", "norm2, after the feed-forward network is added", block.norm2,
                 f"the stream after layer {layer}'s attention plus what the feed-forward network adds",
                 f"the stream leaving layer {layer}", get("resid_mid") + get("mlp.out"), get("resid_post")),
    ]


def _eps(module: nn.Module) -> float:
    eps = getattr(module, "eps", None)
    return float(torch.finfo(torch.float32).eps if eps is None else eps)


def _param(module: nn.Module, name: str) -> np.ndarray | None:
    value = getattr(module, name, None)
    return None if value is None else value.detach().double().numpy()


@dataclass(frozen=True)
class NormMath:
    """One token through one norm, recomputed step by step in float64 from the real input and weights."""
    kind: str                  # "layer" or "rms"
    x: np.ndarray              # (D,) input
    mean: float                # LayerNorm: mean of x (0 for RMSNorm, which does not centre)
    var: float                 # LayerNorm: variance of x (population, as LayerNorm uses)
    rms: float                 # RMSNorm: sqrt(mean(x^2) + eps); LayerNorm: sqrt(var + eps)
    eps: float
    z: np.ndarray              # (D,) normalized, before the learned gain and bias
    gain: np.ndarray | None    # (D,) learned scale (None if the norm has none)
    bias: np.ndarray | None    # (D,) learned shift (None if the norm has none)
    y: np.ndarray              # (D,) z * gain + bias, computed here
    traced: np.ndarray         # (D,) the output the trace recorded


def norm_math(view: View, step: NormStep, token: int) -> NormMath:
    kind = view.bundle.model.cfg.norm
    x = as_numpy(step.x[token]).astype(np.float64)
    eps = _eps(step.module)
    if kind == "layer":
        mean, var = float(x.mean()), float(x.var())
        scale = float(np.sqrt(var + eps))
        z = (x - mean) / scale
    else:
        mean, var = 0.0, float(x.var())
        scale = float(np.sqrt((x ** 2).mean() + eps))
        z = x / scale
    gain, bias = _param(step.module, "weight"), _param(step.module, "bias")
    y = z * (1.0 if gain is None else gain) + (0.0 if bias is None else bias)
    return NormMath(kind, x, mean, var, scale, eps, z, gain, bias, y, as_numpy(step.y[token]).astype(np.float64))


def norm_stats(m: NormMath) -> pd.DataFrame:
    """Mean, variance, RMS and L2 norm of the input, the normalized vector and the real output."""
    rows = [("input", m.x), ("normalized, before gain and bias", m.z), ("output, after gain and bias", m.traced)]
    return pd.DataFrame({
        "vector": [name for name, _ in rows],
        "mean": [float(v.mean()) for _, v in rows],
        "variance": [float(v.var()) for _, v in rows],
        "RMS": [float(np.sqrt((v ** 2).mean())) for _, v in rows],
        "L2 norm": [float(np.linalg.norm(v)) for _, v in rows],
    })


def _learned_range(values: np.ndarray | None, start: float) -> tuple[float, float] | None:
    """(smallest, largest) of a norm's learned gain or bias, or None while every value is still its starting value
    (1 or 0) to the four decimals shown."""
    if values is None or np.abs(values - start).max() < 5e-5:
        return None
    return float(values.min()), float(values.max())


def _four(x: float) -> str:
    """x to four decimals, never "-0.0000"."""
    text = f"{x:.4f}"
    return "0.0000" if text == "-0.0000" else text


def norm_caption(m: NormMath, step: NormStep) -> str:
    """What the norm does to this token, from the norm's own gain and bias and the output the trace recorded: the
    output is stretched or shifted only where the learned values have moved from 1 and 0 (a fresh model's have not)."""
    gain, bias = _learned_range(m.gain, 1.0), _learned_range(m.bias, 0.0)
    y = m.traced
    mean, var, rms = _four(float(y.mean())), _four(float(y.var())), _four(float(np.sqrt((y ** 2).mean())))
    if m.kind == "layer":
        text = (f"LayerNorm takes {step.x_name} and centres and rescales it: before the learned gain and bias, the "
                "vector has mean 0 and variance 1 (up to the tiny ε). ")
        if gain is None and bias is None:
            return text + (f"This norm's gain is still 1 and its bias 0 in every dimension (their starting values), "
                           f"so the real output ({step.y_name}) is that vector itself: mean {mean}, variance {var}.")
        moves = [f"stretched by a learned gain (from {gain[0]:.4f} to {gain[1]:.4f})" if gain else
                 "not stretched (its gain is still 1)",
                 f"shifted by a learned bias (from {bias[0]:.4f} to {bias[1]:.4f})" if bias else
                 "not shifted (its bias is still 0)"]
        same = (mean, var) == ("0.0000", "1.0000")
        return text + (f"The real output ({step.y_name}) then has each dimension {moves[0]} and {moves[1]}, so its "
                       f"mean is {mean} and its variance {var}"
                       + (": still 0 and 1 to four decimals." if same else ", no longer 0 and 1."))
    text = (f"RMSNorm takes {step.x_name} and divides it by its root mean square: before the learned gain, its RMS "
            "is 1. ")
    if gain is None:
        return text + (f"This norm's gain is still 1 in every dimension (its starting value), so the real output "
                       f"({step.y_name}) is that vector itself: RMS {rms}.")
    return text + (f"The real output ({step.y_name}) is then stretched by a learned gain per dimension (from "
                   f"{gain[0]:.4f} to {gain[1]:.4f}), so its RMS is {rms}.")


def norm_scatter_figure(view: View, m: NormMath, step: NormStep, token: int) -> go.Figure:
    """Each dimension's value before (x) and after (y) normalization: the plain rescaling is a straight line."""
    dims = np.arange(len(m.x))
    fig = go.Figure([
        go.Scatter(x=m.x, y=m.z, mode="markers", name="normalized, before gain and bias",
                   marker=dict(color="#4477AA", size=7), customdata=dims,
                   hovertemplate=f"dimension %{{customdata}}<br>input ({step.x_name}) %{{x:.4f}}<br>normalized "
                                 "%{y:.4f}<extra></extra>"),
        go.Scatter(x=m.x, y=m.traced, mode="markers", name="output, after the learned gain and bias",
                   marker=dict(color="#EE6677", size=7, symbol="diamond"), customdata=dims,
                   hovertemplate="dimension %{customdata}<br>input %{x:.4f}<br>output %{y:.4f}<extra></extra>"),
    ])
    fig.update_layout(title=f"Before and after {NORM_NAMES[m.kind]}: token {token} {token_label(view.tokens[token])}, "
                            f"{step.label}",
                      xaxis_title="value going into the norm", yaxis_title="value after the norm",
                      legend=dict(orientation="h", y=-0.25))
    return style(fig, view.presenter, 420)


def math_table(m: NormMath, shown: int = 6) -> pd.DataFrame:
    """The first few dimensions worked out: input, centred, normalized, gain, bias, output, trace."""
    d = np.arange(min(shown, len(m.x)))
    table = {"d": d, "x_d": m.x[d]}
    if m.kind == "layer":
        table["x_d − mean"] = m.x[d] - m.mean
    table["normalized z_d"] = m.z[d]
    if m.gain is not None:
        table["gain_d"] = m.gain[d]
    if m.bias is not None:
        table["bias_d"] = m.bias[d]
    table["z_d × gain_d + bias_d" if m.bias is not None else "z_d × gain_d"] = m.y[d]
    table["trace"] = m.traced[d]
    return pd.DataFrame(table)


def latex_number(x: float) -> str:
    """A small number such as 1e-05 in LaTeX: 10^{-5} (or 1.5 \\times 10^{-6})."""
    mantissa, exponent = f"{x:.1e}".split("e")
    power = f"10^{{{int(exponent)}}}"
    return power if mantissa == "1.0" else f"{mantissa} \\times {power}"


def _p(x: float) -> str:
    """A number for a formula, in brackets when negative: 2 - (-1.5), not 2 - -1.5."""
    return f"({x:.4f})" if x < 0 else f"{x:.4f}"


def math_latex(m: NormMath) -> list[str]:
    """The norm's formulas with this token's real numbers, ending with dimension 0 (LaTeX, numbers only)."""
    D, eps = len(m.x), latex_number(m.eps)
    gain = 1.0 if m.gain is None else float(m.gain[0])
    if m.kind == "layer":
        lines = [
            f"\\text{{mean}} = \\tfrac{{1}}{{{D}}}\\sum_d x_d = {m.mean:.4f}",
            f"\\text{{var}} = \\tfrac{{1}}{{{D}}}\\sum_d (x_d - \\text{{mean}})^2 = {m.var:.4f}",
            f"z_d = \\frac{{x_d - {_p(m.mean)}}}{{\\sqrt{{{m.var:.4f} + {eps}}}}} = \\frac{{x_d - {_p(m.mean)}}}"
            f"{{{m.rms:.4f}}}",
            f"z_0 = \\frac{{{m.x[0]:.4f} - {_p(m.mean)}}}{{{m.rms:.4f}}} = {m.z[0]:.4f}",
        ]
    else:
        lines = [
            f"\\text{{RMS}} = \\sqrt{{\\tfrac{{1}}{{{D}}}\\sum_d x_d^2 + {eps}}} = {m.rms:.4f}",
            f"z_d = \\frac{{x_d}}{{{m.rms:.4f}}}, \\quad z_0 = \\frac{{{m.x[0]:.4f}}}{{{m.rms:.4f}}} = {m.z[0]:.4f}",
        ]
    if m.bias is not None:
        lines.append(f"y_0 = z_0 \\cdot \\text{{gain}}_0 + \\text{{bias}}_0 = {m.z[0]:.4f} \\times {_p(gain)} "
                     f"+ {_p(float(m.bias[0]))} = {m.y[0]:.4f}")
    else:
        lines.append(f"y_0 = z_0 \\cdot \\text{{gain}}_0 = {m.z[0]:.4f} \\times {_p(gain)} = {m.y[0]:.4f}")
    return lines


@dataclass(frozen=True)
class Box:
    key: str           # "x", "n1", "attn", "add1", "mid", "n2", "mlp", "add2", "out"
    label: str
    x: float           # centre
    y: float           # 1: on the stream itself, 0: on a side branch (a sublayer's detour)


def block_layout(view: View) -> list[Box]:
    """Where each part of one block sits: the stream runs along y=1, sublayers branch off below it.

    In a pre-norm model the norms sit on the branches (only the sublayer's copy is normalized); in a
    post-norm model they sit on the stream itself, right after each +. In a parallel block (Pythia) both branches
    leave the stream entering the block, the feed-forward network's on a second lane below attention's (y=-1).
    """
    cfg = view.bundle.model.cfg
    T, D = view.trace["embed.out"].shape[1:]
    shape = f"{T} × {D}"
    norm = NORM_NAMES[cfg.norm]
    stream = [Box("x", f"stream in<br>{shape}", 0.7, 1)]
    if cfg.norm == "none":
        return stream + [Box("attn", "attention", 2.6, 0), Box("add1", "+", 4.2, 1),
                         Box("mid", f"after attention<br>{shape}", 5.5, 1), Box("mlp", "feed-forward", 7.4, 0),
                         Box("add2", "+", 9.0, 1), Box("out", f"stream out<br>{shape}", 10.3, 1)]
    if cfg.parallel:                 # both sublayers branch off the stream entering the block, one lane each
        return stream + [Box("n1", f"{norm}<br>norm1", 2.45, 0), Box("attn", "attention", 3.75, 0),
                         Box("n2", f"{norm}<br>norm2", 2.45, -1), Box("mlp", "feed-forward", 3.75, -1),
                         Box("add1", "+", 5.0, 1), Box("mid", f"after attention<br>{shape}", 6.15, 1),
                         Box("add2", "+", 7.3, 1), Box("out", f"stream out<br>{shape}", 8.45, 1)]
    if cfg.norm_position == "pre":
        return stream + [Box("n1", f"{norm}<br>norm1", 2.45, 0), Box("attn", "attention", 3.75, 0),
                         Box("add1", "+", 5.0, 1), Box("mid", f"after attention<br>{shape}", 6.15, 1),
                         Box("n2", f"{norm}<br>norm2", 7.9, 0), Box("mlp", "feed-forward", 9.2, 0),
                         Box("add2", "+", 10.4, 1), Box("out", f"stream out<br>{shape}", 11.55, 1)]
    return stream + [Box("attn", "attention", 2.45, 0), Box("add1", "+", 3.6, 1),
                     Box("n1", f"{norm}<br>norm1", 4.75, 1), Box("mid", f"after attention<br>{shape}", 6.1, 1),
                     Box("mlp", "feed-forward", 7.85, 0), Box("add2", "+", 9.0, 1),
                     Box("n2", f"{norm}<br>norm2", 10.15, 1),
                     Box("out", f"stream out<br>{shape}", 11.5, 1)]


BOX_W, BOX_H, PLUS_PX = 1.2, 0.44, 26
UPRIGHT_W, UPRIGHT_H = 0.72, 0.8      # a phone's: a box along the stream (down), and across it
BOX_TRACE = {"x": "<br>trace name: blocks.{layer}.resid_pre", "mid": "<br>trace name: blocks.{layer}.resid_mid",
             "out": "<br>trace name: blocks.{layer}.resid_post", "attn": "<br>trace name: blocks.{layer}.attn.out",
             "mlp": "<br>trace name: blocks.{layer}.mlp.out"}
STREAM_BLUE, NORM_FILL, NORM_EDGE = "#4477AA", "#FFD166", "#B8860B"


def block_figure(view: View, layer: int) -> go.Figure:
    """One block as this model wires it: the stream along the top, sublayers as detours, norms in yellow. On a phone
    (`view.phone`) the stream runs down the right side and the detours down the left, so the boxes keep their size.

    Everything is placed in (along, across) coordinates: along the stream (`Box.x`), and across it (`Box.y`: 1 the
    stream, 0 a detour); `at` turns them into the figure's (x, y), upright or not."""
    cfg = view.bundle.model.cfg
    upright = view.phone
    boxes = block_layout(view)
    by_key = {b.key: b for b in boxes}
    along, across = (UPRIGHT_W, UPRIGHT_H) if upright else (BOX_W, BOX_H)
    notes: list[dict] = []           # annotations (arrows and labels), collected and added at once (faster)
    shapes: list[dict] = []

    def at(f: float, c: float) -> tuple[float, float]:          # (along, across) -> (x, y)
        return (c, f) if upright else (f, c)

    def edge(b: Box, side: int) -> float:            # where a box begins (-1) or ends (+1) along the stream; a + is a point
        return b.x if b.key.startswith("add") else b.x + side * along / 2

    def arrow(f0, c0, f1, c1, stream=False, into_plus=False, from_plus=False):
        (x0, y0), (x1, y1) = at(f0, c0), at(f1, c1)
        notes.append(dict(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y", text="",
                          showarrow=True, arrowhead=2, arrowsize=1 if stream else 1.2,
                          standoff=PLUS_PX / 2 + 1 if into_plus else 0,
                          startstandoff=PLUS_PX / 2 if from_plus else 0,
                          arrowwidth=4 if stream else 1.6, arrowcolor=STREAM_BLUE if stream else "#555555"))

    def area(f0, f1, c0, c1) -> dict:                # a shape's corners
        (x0, y0), (x1, y1) = at(f0, c0), at(f1, c1)
        return dict(x0=x0, x1=x1, y0=y0, y1=y1)

    def line(f0, c0, f1, c1):
        shapes.append(dict(type="line", **area(f0, f1, c0, c1), line=dict(color="#555555", width=1.6)))

    # the stream: every box on it, one after the other, joined by thick blue arrows
    on_stream = [b for b in boxes if b.y == 1]
    for a, b in zip(on_stream, on_stream[1:]):
        arrow(edge(a, 1), 1, edge(b, -1), 1, stream=True, into_plus=b.key.startswith("add"),
              from_plus=a.key.startswith("add"))
    # each sublayer: branch off the stream after the box it reads, run along its lane, come back into its +
    lowest = min(b.y for b in boxes)                  # -1: a parallel block's second lane
    for plus, source, lane in (("add1", "x", 0), ("add2", "x" if cfg.parallel else "mid", lowest)):
        branch = [b for b in boxes if b.y == lane and by_key[source].x < b.x < by_key[plus].x]
        start = edge(by_key[source], 1) + 0.25
        shapes.append(dict(type="circle", **area(start - 0.05, start + 0.05, 0.95, 1.05), fillcolor="#555555",
                           line=dict(width=0)))
        line(start, 1, start, lane)
        arrow(start, lane, edge(branch[0], -1), lane)
        for a, b in zip(branch, branch[1:]):
            arrow(edge(a, 1), lane, edge(b, -1), lane)
        line(edge(branch[-1], 1), lane, by_key[plus].x, lane)
        arrow(by_key[plus].x, lane, by_key[plus].x, 1, into_plus=True)
    others = [b for b in boxes if not b.key.startswith("add")]       # the + are round markers, drawn below
    for b in others:
        is_norm = b.key in ("n1", "n2")
        shapes.append(dict(type="rect", **area(b.x - along / 2, b.x + along / 2, b.y - across / 2, b.y + across / 2),
                           fillcolor=NORM_FILL if is_norm else "#E8EEF7",
                           line=dict(color=NORM_EDGE if is_norm else STREAM_BLUE, width=3 if is_norm else 1.5)))
        x, y = at(b.x, b.y)
        notes.append(dict(x=x, y=y, text=f"<b>{b.label}</b>" if is_norm else b.label, showarrow=False,
                          font=dict(color="#222222", size=15 if view.presenter else 12 if upright else 13)))
    end = max(b.x for b in boxes) + along / 2 + 0.1
    if upright:                      # the words above the stream and under the detours
        notes.append(dict(x=1, y=0, text="the residual stream", showarrow=False, yanchor="bottom",
                          font=dict(color=STREAM_BLUE)))
        notes.append(dict(x=lowest - 0.5, y=end, text="sublayers read a copy and add<br>their result back at the +",
                          showarrow=False, xanchor="left", yanchor="top", font=dict(color="#555555")))
    else:
        notes.append(dict(x=0.1, y=1.45, text="the residual stream", showarrow=False, xanchor="left",
                          font=dict(color=STREAM_BLUE)))
        notes.append(dict(x=0.1, y=lowest - 0.42, text="sublayers read a copy and add their result back at the +",
                          showarrow=False, xanchor="left", font=dict(color="#555555")))
    pluses = [b for b in boxes if b.key.startswith("add")]
    plus_at, box_at = [at(b.x, 1) for b in pluses], [at(b.x, b.y) for b in others]
    data = [
        go.Scatter(x=[x for x, _ in plus_at], y=[y for _, y in plus_at], mode="markers+text", text=["+"] * len(pluses),
                   textfont=dict(size=22 if view.presenter else 17, color="#222222"), showlegend=False,
                   marker=dict(size=PLUS_PX, color="white", line=dict(color="#555555", width=2)),
                   hovertemplate="+ : the sublayer's result is added to the stream<extra></extra>"),
        # invisible markers so hovering a box says what it is
        go.Scatter(x=[x for x, _ in box_at], y=[y for _, y in box_at], mode="markers", showlegend=False,
                   marker=dict(size=30, opacity=0),
                   customdata=[b.label.replace("<br>", ": ") + BOX_TRACE.get(b.key, "").format(layer=layer)
                               for b in others],
                   hovertemplate="%{customdata}<extra></extra>"),
    ]
    where = ("no normalization" if cfg.norm == "none" else f"{cfg.norm_position}-norm, {NORM_NAMES[cfg.norm]}") \
        + (", parallel: both sublayers read the stream in" if cfg.parallel and not upright else
           ", parallel" if cfg.parallel else "")
    fig = go.Figure(data, layout=dict(
        title=f"How block {layer} of this model is wired: {where}", plot_bgcolor="rgba(0,0,0,0)",
        hovermode="closest", annotations=notes, shapes=shapes))
    if upright:                      # down the screen: 46 px per unit along the stream
        fig.update_layout(xaxis=dict(visible=False, range=[lowest - 0.55, 1.55]),
                          yaxis=dict(visible=False, range=[end + 1.1, -0.55]))
        return for_a_phone(style(fig, view.presenter, round(46 * (end + 1.65)) + 60))
    fig.update_layout(xaxis=dict(visible=False, range=[0, end]), yaxis=dict(visible=False, range=[lowest - 0.6, 1.6]))
    return style(fig, view.presenter, 300 - 110 * lowest)


def diagram_caption(view: View) -> str:
    cfg = view.bundle.model.cfg
    if cfg.norm == "none":
        return "This model has no normalization: the stream is only ever added to."
    text = ANALOGY_TEXT[cfg.norm_position]
    if cfg.parallel:
        text += (" Its blocks are **parallel**, as GPT-NeoX's and Pythia's are: attention and the feed-forward "
                 "network both read the stream entering the block, each through its own norm, and both add their "
                 "results into it, so stream out = stream in + attention + feed-forward. In GPT-2 the feed-forward "
                 "network reads the stream after attention has added to it.")
    if cfg.norm_position == "pre":
        text += (f" After the last block, a final {NORM_NAMES[cfg.norm]} (final.norm) prepares the stream for the "
                 "unembedding.")
    return text + (" Yellow boxes are the norms. The thick blue line is the stream itself: each sublayer reads a "
                   "copy of it and adds its result back at the +.")


# --------------------------------------------------------------------------------------------------
# The logit lens
# --------------------------------------------------------------------------------------------------

LENS_MID_LAYERS = 4     # up to this many layers the lens reads each layer's stream after attention too


def lens_reads_mid(view: View) -> bool:
    """Whether the lens chart reads each layer's stream after attention too, as the page draws it by default (a deep
    model's two readings per layer would crowd the chart): the stages a lens-layer question offers are the same."""
    return view.bundle.model.cfg.n_layers <= LENS_MID_LAYERS


@dataclass(frozen=True)
class Lens:
    stages: list[tuple[str, str]]    # (trace name, label)
    top_ids: np.ndarray              # (S, T) top token id read at each stage and position
    top_probs: np.ndarray            # (S, T) its probability
    start: int = 0                   # the sentence's position of column 0 (a lens of one position reads only it)

    def at(self, position: int) -> tuple[np.ndarray, np.ndarray]:
        """The top ids and their probabilities (S,), (S,) read at the sentence's `position`."""
        return self.top_ids[:, position - self.start], self.top_probs[:, position - self.start]


@torch.no_grad()
def logit_lens(view: View, with_mid: bool = True, position: int | None = None) -> Lens:
    """The top guess read from the stream at every stage, through the model's own final norm and unembedding, at
    every position or at `position` only (a question asked about one: GPT-2's 13 unembeddings of one vector).

    One stage at a time: GPT-2's 25 stages x 64 positions x 50,257 probabilities at once would be 320 MB."""
    model, stages = view.bundle.model, stream_stages(view, with_mid)
    read = slice(None) if position is None else slice(position, position + 1)
    ids, probs = [], []
    for name, _ in stages:
        logits = model.unembed(model.final_norm(view.trace[name][0, read]))      # (T, V)
        top = logits.max(-1)
        ids.append(top.indices)
        probs.append(torch.exp(top.values - torch.logsumexp(logits, -1)))       # its softmax probability
    return Lens(stages, as_numpy(torch.stack(ids)), as_numpy(torch.stack(probs)).astype(float),
                0 if position is None else position)


def settled(column: np.ndarray) -> int:
    """The first stage from which a column's top guess (S,) is the final one, and stays so to the end."""
    first = len(column) - 1
    while first > 0 and column[first - 1] == column[-1]:
        first -= 1
    return first


LENS_COLUMNS = 12       # more stages than this (GPT-2: 13 or 25) go down the rows, positions across


def lens_figure(view: View, lens: Lens) -> go.Figure:
    """Positions x stages (like the stream's size above), or stages x positions for a deep model: each cell is
    the top guess for the next token, coloured by its probability."""
    vocab = view.bundle.tokenizer.vocab
    words = np.array([[vocab[i] for i in row] for row in lens.top_ids], dtype=object)             # (S, T)
    S, T = words.shape
    positions, stages = labels(view.tokens), [label for _, label in lens.stages]
    down = S > LENS_COLUMNS
    across = T if down else S                                                   # cells side by side
    keep = 12 if across <= 8 else max(3, 96 // across)                           # characters that fit a cell
    short = np.array([[token_label(w if len(w) <= keep else w[:keep - 1] + "…") for w in row] for row in words],
                     dtype=object)
    custom = np.dstack([np.repeat(np.array([safe(t) for t in positions], dtype=object)[None, :], S, 0),
                        np.repeat(np.array([f"{label} (trace name: {n})" for n, label in lens.stages],
                                           dtype=object)[:, None], T, 1),
                        np.vectorize(safe, otypes=[object])(words)])                             # (S, T, 3)
    title = "Logit lens: the top next-token guess read from the stream after each stage"
    common = dict(title=title, value_name="probability", signed=False, zmin=0.0, zmax=1.0, presenter=view.presenter)
    if down:
        fig = heatmap(lens.top_probs, stages, positions, row_title="stage", col_title="reading position",
                      height=26 * S + 200, **common)
    else:
        fig = heatmap(lens.top_probs.T, positions, stages, row_title="reading position", col_title="stage",
                      height=max(300, 28 * T + 150), **common)
        short, custom = short.T, custom.transpose(1, 0, 2)
    fig.update_traces(text=short, texttemplate="%{text}", customdata=custom,
                      textfont=dict(size=18 if view.presenter else (13 if across <= 16 else 10)),
                      hovertemplate="reading position %{customdata[0]}<br>after %{customdata[1]}"
                                    "<br>top guess for the next token: %{customdata[2]}"
                                    "<br>probability %{z:.4f}<extra></extra>")
    return fig


def _lens(view: View, trace, with_mid: bool) -> Lens:
    return logit_lens(view, with_mid)


def lens_of(view: View, with_mid: bool) -> Lens:
    """logit_lens of the view's sentence, once per sentence (GPT-2: 25 unembeddings of 50,257 scores each)."""
    return memo.per_view(_lens, view, with_mid)


def _lens_chart(view: View, trace, with_mid: bool) -> go.Figure:
    return lens_figure(view, lens_of(view, with_mid))


def lens_chart(view: View, with_mid: bool) -> go.Figure:
    """lens_figure of the view's sentence, built once per sentence."""
    return memo.per_view(_lens_chart, view, with_mid)


def lens_in_words(view: View, lens: Lens, position: int = -1) -> str:
    """At which stage the final guess at `position` first becomes the top guess."""
    vocab = view.bundle.tokenizer.vocab
    position %= len(view.tokens)
    column, probs = lens.at(position)
    final, first = int(column[-1]), settled(column)
    where = lens.stages[first][1]
    start = (f"After {quote(view.tokens[position])}, the model's final guess is {quote(vocab[final])} "
             f"({probs[-1]:.1%}).")
    if first == len(column) - 1:
        return f"{start} Reading the stream early, it only becomes the top guess at the last stage, **{where}**."
    return f"{start} Reading the stream early, it is already the top guess from stage **{where}** on."
