"""Step 5, the feed-forward network: expand, activate, contract, with this sentence's real numbers.

Every builder is a plain function of the view and its trace (no Streamlit calls), so tests can call it.
The trace names used here: blocks.i.mlp.in [T, D], .pre [T, F], .post [T, F], .out [T, D].
"""
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from plotly.colors import sample_colorscale

from explorer import memo
from explorer.numbers import percents
from explorer.steps import whatif
from explorer.plot import DIMS_SHOWN, DIVERGING, as_numpy, for_a_phone, heatmap, labels, style, token_label
from explorer.registry import BY_SLUG
from explorer.view import View, quote

SLUG = "feedforward"
ALL_NEURONS_UP_TO = 256         # a wider layer (GPT-2: 3,072) shows its strongest neurons, or a window at a time
TOP_K = 10

TEXT = """\
After attention has let the tokens talk to each other, every token goes off **on its own** to think.
Picture each token consulting a notebook of facts the model learned in training, privately, without
looking at its neighbours. The same notebook is used by every token, but each token reads a different
page, depending on what its vector says.

The notebook lookup has three moves:

1. **Expand.** The token's vector of *D* numbers is multiplied by a matrix **W_in**, giving *F* numbers
   (here {D} → {F}: {times} as many; four times is the usual choice). Each of those numbers is one
   **neuron**: it measures how strongly the token matches one pattern the model learned ("is this a verb?", "did a name come before?").
2. **Activate.** A simple bend is applied to each neuron. **ReLU** keeps positive values and turns every
   negative one into exactly 0; **GELU** does nearly the same but lets small negative values through,
   softly. This bend is what lets the network learn more than straight-line rules: a neuron stays
   quiet unless its pattern is really there.
3. **Contract.** A second matrix **W_out** turns the *F* neuron values back into *D* numbers, which are
   added to the token's running notebook (the residual stream, next step).

Because each token is processed separately, the order of the tokens does not matter here: the same
vector always gives the same result, wherever it sits in the sentence. Walk through the tabs below
from left to right: the three moves, which neurons fire, the strongest neurons of one token, how many
values the bend switches off, and what the model guesses without this layer.
"""


def intro(cfg) -> str:
    """TEXT with this model's widths: how many times wider the hidden layer is than the stream."""
    ratio = cfg.d_ff / cfg.d_model
    times = {2: "twice", 4: "four times"}.get(ratio) or (f"{ratio:g} times" if ratio == round(ratio, 1)
                                                         else f"about {ratio:.1f} times")    # SwiGLU's 8/3: 2.7
    text = TEXT.format(D=f"{cfg.d_model:,}", F=f"{cfg.d_ff:,}", times=times)
    if cfg.activation == "swiglu":
        text += "\n" + SWIGLU_TEXT.format(D=f"{cfg.d_model:,}", F=f"{cfg.d_ff:,}")
    return text

# The page's sections (tabs); only the open one is drawn, so a new sentence redraws one or two charts.
SECTIONS = BY_SLUG["feedforward"].labels           # the tabs, named in explorer/registry.py

HEATMAP_TEXT = {
    "relu": "ReLU never goes below 0, so every cell is 0 (dark) or positive: a neuron is either off or on.",
    "gelu": ("GELU can be slightly negative (never below about −0.17), so the faint blue cells are neurons gently "
             "pushed below zero; red cells are neurons that fire."),
    "swiglu": ("SwiGLU multiplies SiLU of the gate by the up projection, which can have either sign: red cells are "
               "neurons pushed up, blue cells neurons pushed down; near 0 the gate holds the neuron shut."),
}

SWIGLU_TEXT = """\
This model's feed-forward network is **gated** (SwiGLU, as in Llama and SmolLM2). Its expand move uses two
matrices instead of one: **W_gate** and **W_up** each turn the token's {D} numbers into {F} (trace names mlp.gate
and mlp.up). Each neuron's value is then SiLU(gate) × up (mlp.post): SiLU(x) = x / (1 + e^(−x)) is near 0 for a
negative gate, so the gate decides how much of the up projection passes. W_out contracts the result back to {D}.
"""


def _block(layer: int) -> str:
    return f"blocks.{layer}.mlp"


def activation_name(view: View) -> str:
    return {"relu": "ReLU", "swiglu": "SwiGLU"}.get(view.bundle.model.cfg.activation, "GELU")


def pre_name(cfg) -> str:
    """The trace name (within the MLP) of the values the activation bends: the gate of a gated MLP, else pre."""
    return "gate" if cfg.activation == "swiglu" else "pre"


def heatmap_text(activation: str) -> str:
    """How to read the activations heatmap for this activation ("gelu_tanh" reads like "gelu")."""
    return HEATMAP_TEXT[activation if activation in ("relu", "swiglu") else "gelu"]


def gelu(x: float, kind: str) -> float:
    """GELU as the model computes it: exact ("gelu", with erf) or GPT-2's tanh approximation ("gelu_tanh")."""
    if kind == "gelu_tanh":
        return 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return x * 0.5 * (1 + math.erf(x / math.sqrt(2)))


# --------------------------------------------------------------------------------------------------
# Expand, activate, contract: the shapes
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Stage:
    name: str          # the trace name, e.g. "mlp.pre"
    rows: int          # T
    cols: int          # D or F
    what: str


def stages(view: View, layer: int) -> list[Stage]:
    """The four values of one feed-forward pass with their real shapes (read from the trace)."""
    trace, n = view.trace, _block(layer)
    act = activation_name(view)
    what = {"in": "input", "pre": f"before {act}", "gate": "gate", "up": "up", "post": f"after {act}",
            "out": "output"}
    names = (("in", "gate", "up", "post", "out") if view.bundle.model.cfg.activation == "swiglu"
             else ("in", "pre", "post", "out"))
    return [Stage(f"mlp.{k}", *trace[f"{n}.{k}"].shape[1:], what[k]) for k in names]


def shapes_figure(view: View, layer: int) -> go.Figure:
    """A row of boxes, each as tall as its width in numbers: D, then F, then F, then D again. On a phone
    (`view.phone`) a column of bars instead, each as wide as its numbers, so their words fit."""
    cfg = view.bundle.model.cfg
    parts = stages(view, layer)
    widest = max(s.cols for s in parts)
    arrows = ([f"W_in<br>{cfg.d_model} → {cfg.d_ff:,}", activation_name(view), f"W_out<br>{cfg.d_ff:,} → {cfg.d_model}"]
              if cfg.activation != "swiglu" else
              [f"W_gate<br>{cfg.d_model} → {cfg.d_ff:,}", f"W_up (of the input)<br>{cfg.d_model} → {cfg.d_ff:,}",
               "SiLU(gate)<br>× up", f"W_out<br>{cfg.d_ff:,} → {cfg.d_model}"])
    colour = {s.name: "#4477AA" if s.cols == cfg.d_model else "#EE6677" for s in parts}
    if view.phone:
        fig = _shapes_upright(view, parts, widest, arrows, colour)
    else:
        fig = _shapes_in_a_row(view, parts, widest, arrows, colour)
    fig.update_layout(title=f"Expand, activate, contract: layer {layer} with this sentence's shapes",
                      plot_bgcolor="rgba(0,0,0,0)")
    return for_a_phone(style(fig, view.presenter, 420)) if view.phone else style(fig, view.presenter, 260)


def _shape_hover(places: list[tuple[float, float]], parts: list[Stage]) -> go.Scatter:
    """An invisible trace so hovering a box shows its exact shape."""
    return go.Scatter(
        x=[x for x, _ in places], y=[y for _, y in places], mode="markers",
        marker=dict(size=40, opacity=0), customdata=[[s.name, s.rows, s.cols, s.what] for s in parts],
        hovertemplate="%{customdata[3]}: %{customdata[1]} tokens × %{customdata[2]} numbers"
                      "<br>trace name: %{customdata[0]}<extra></extra>", showlegend=False)


def _shapes_in_a_row(view: View, parts: list[Stage], widest: int, arrows: list[str], colour: dict) -> go.Figure:
    shapes, notes = [], []           # collected, then added at once (add_annotation calls are slow one by one)
    gap, box = 1.6, 1.0
    for i, s in enumerate(parts):
        x0 = i * (box + gap)
        half = 0.5 * max(s.cols / widest, 0.12)
        shapes.append(dict(type="rect", x0=x0, x1=x0 + box, y0=-half, y1=half, line=dict(color=colour[s.name], width=2),
                           fillcolor=colour[s.name], opacity=0.35))
        notes.append(dict(x=x0 + box / 2, y=0, text=f"<b>{s.what}</b><br>{s.rows} × {s.cols}", showarrow=False,
                          font=dict(color="#222222")))
        notes.append(dict(x=x0 + box / 2, y=-0.62, text=f"trace name: {s.name}", showarrow=False,
                          font=dict(color="#777777", size=15 if view.presenter else 11)))
        if i < len(arrows):
            notes.append(dict(x=x0 + box + gap - 0.05, y=0, ax=x0 + box + 0.05, ay=0, xref="x", yref="y",
                              axref="x", ayref="y", showarrow=True, arrowhead=2, arrowwidth=2, text=""))
            notes.append(dict(x=x0 + box + gap / 2, y=0.17, text=arrows[i], showarrow=False))
    hover = _shape_hover([(i * (box + gap) + box / 2, 0) for i in range(len(parts))], parts)
    return go.Figure(hover, layout=dict(shapes=shapes, annotations=notes,
                                        xaxis=dict(visible=False, range=[-0.4, len(parts) * (box + gap) - gap + 0.4]),
                                        yaxis=dict(visible=False, range=[-0.75, 0.6])))


def _shapes_upright(view: View, parts: list[Stage], widest: int, arrows: list[str], colour: dict) -> go.Figure:
    """The same, down a phone's screen: a bar per value, as wide as its numbers, its trace name under it, and the
    weights that turn one into the next beside the arrow between them."""
    shapes, notes = [], []
    step, bar = 1.7, 0.6              # from one bar's top to the next's; a bar's height
    for i, s in enumerate(parts):
        top, half = i * step, 0.5 * max(s.cols / widest, 0.32)
        shapes.append(dict(type="rect", x0=-half, x1=half, y0=top, y1=top + bar,
                           line=dict(color=colour[s.name], width=2), fillcolor=colour[s.name], opacity=0.35))
        notes.append(dict(x=0, y=top + bar / 2, text=f"<b>{s.what}</b><br>{s.rows} × {s.cols}", showarrow=False,
                          font=dict(color="#222222")))
        notes.append(dict(x=0, y=top + bar + 0.05, text=f"trace name: {s.name}", showarrow=False, yanchor="top",
                          font=dict(color="#777777", size=11)))
        if i < len(arrows):
            notes.append(dict(x=0, y=top + step - 0.05, ax=0, ay=top + bar + 0.45, xref="x", yref="y", axref="x",
                              ayref="y", showarrow=True, arrowhead=2, arrowwidth=2, text=""))
            notes.append(dict(x=0.06, y=top + bar + 0.75, text=arrows[i], showarrow=False, xanchor="left"))
    hover = _shape_hover([(0, i * step + bar / 2) for i in range(len(parts))], parts)
    return go.Figure(hover, layout=dict(shapes=shapes, annotations=notes,
                                        xaxis=dict(visible=False, range=[-0.55, 0.55]),
                                        yaxis=dict(visible=False, range=[(len(parts) - 1) * step + bar + 0.4, -0.15])))


# --------------------------------------------------------------------------------------------------
# Neuron activations
# --------------------------------------------------------------------------------------------------

def _relu_range(post: torch.Tensor, relu: bool) -> dict:
    """ReLU values start at exactly 0, so the colour scale does too (0 is the darkest colour)."""
    return dict(zmin=0.0, zmax=max(float(post.max()), 1e-6)) if relu else {}


def range_words(view: View, layer: int, neurons: tuple[int, int] | None = None) -> str:
    """The real range of the activations heatmap, which its colour scale spans."""
    post = view.trace[f"{_block(layer)}.post"][0]                         # (T, F)
    shown = post[:, shown_neurons(post, neurons)]
    low, high = float(shown.min()), float(shown.max())
    if view.bundle.model.cfg.activation == "relu":
        return f"Here the values run from {low:.2f} to {high:.2f}; the colours run from 0 to {high:.2f}."
    return (f"Here the values run from {low:.2f} to {high:.2f}, and so do the colours, with white at 0.").replace(
        "-", "−")


def signed_range(values) -> dict:
    """A diverging colour scale over the real range of `values`, lowest to highest, with 0 white: the blue-white-
    red scale, symmetric around 0, cut to that range. GELU never goes below about −0.17, so its heatmaps show a
    short pale blue end instead of a blue half no value reaches."""
    low, high = float(values.min()), float(values.max())
    if high <= low:
        high = low + 1e-6
    reach = max(abs(low), abs(high))                       # the symmetric scale runs from -reach to +reach
    stops = np.unique(np.append(np.linspace(0.0, 1.0, 21), (0.0 - low) / (high - low) if low < 0 < high else 0.0))
    values_at = low + stops * (high - low)
    colours = sample_colorscale(DIVERGING, list((values_at + reach) / (2 * reach)))
    return dict(zmin=low, zmax=high, colorscale=[[float(s), c] for s, c in zip(stops, colours)])


def post_range(post: torch.Tensor, relu: bool) -> dict:
    """The colour range of a heatmap of activations after the bend: ReLU from 0, GELU over its real range."""
    return _relu_range(post, True) if relu else signed_range(post)


def shown_neurons(post: torch.Tensor, neurons: tuple[int, int] | None) -> list[int]:
    """The neurons (columns of post, (T, F)) a heatmap shows: `neurons` = (start, stop), or by default all
    of them up to ALL_NEURONS_UP_TO, else the DIMS_SHOWN that fire most strongly for some token (in order)."""
    F = post.shape[1]
    if neurons is not None:
        return list(range(*neurons))[:F]
    if F <= ALL_NEURONS_UP_TO:
        return list(range(F))
    strongest = post.abs().amax(0).topk(DIMS_SHOWN).indices                    # (DIMS_SHOWN,)
    return sorted(strongest.tolist())


def activations_figure(view: View, layer: int, neurons: tuple[int, int] | None = None) -> go.Figure:
    """Tokens x neurons heatmap of mlp.post (diverging for GELU, which can be negative; Viridis for ReLU)."""
    post = view.trace[f"{_block(layer)}.post"][0]                         # (T, F)
    F = post.shape[1]
    shown = shown_neurons(post, neurons)
    relu = view.bundle.model.cfg.activation == "relu"
    title = (f"Neuron activations after {activation_name(view)}, layer {layer}: {len(view.tokens)} tokens × "
             f"{F:,} neurons")
    if len(shown) < F:
        title += (f" (neurons {shown[0]}–{shown[-1]})" if neurons is not None
                  else f" (the {len(shown)} that fire most)")
    scale = post_range(post[:, shown], relu)
    fig = heatmap(post[:, shown], labels(view.tokens), [str(j) for j in shown], title=title,
                  row_title="token", col_title="neuron", value_name="activation", signed=not relu,
                  zmin=scale["zmin"], zmax=scale["zmax"], presenter=view.presenter,
                  height=max(300, 24 * len(view.tokens) + 140))
    if "colorscale" in scale:
        fig.data[0].update(colorscale=scale["colorscale"])
    step = max(1, len(shown) // 16)
    fig.update_xaxes(tickvals=list(range(0, len(shown), step)), ticktext=[str(j) for j in shown[::step]])
    return fig


# --------------------------------------------------------------------------------------------------
# The strongest neurons for one token
# --------------------------------------------------------------------------------------------------

def top_neurons(view: View, layer: int, token: int, k: int = TOP_K) -> pd.DataFrame:
    """The k neurons with the largest activation for `token`, and the other tokens that also fire them.

    "Also fires on" lists the other positions whose activation is positive and at least half of this
    token's (strongest first), with their values.
    """
    post = view.trace[f"{_block(layer)}.post"][0]                         # (T, F)
    k = min(k, post.shape[1])
    top = post[token].topk(k)
    tokens = view.tokens
    rows = []
    for value, j in zip(top.values.tolist(), top.indices.tolist()):
        column = post[:, j]
        others = [(t, float(column[t])) for t in torch.argsort(column, descending=True).tolist()
                  if t != token and float(column[t]) > 0 and float(column[t]) >= 0.5 * value]
        rows.append({"neuron": j, "activation": value,
                     "also fires on": [f"{t} {tokens[t]} ({a:.2f})" for t, a in others]})
    return pd.DataFrame(rows)


def top_neurons_figure(view: View, layer: int, token: int, table: pd.DataFrame) -> go.Figure:
    """Bars: the token's strongest neurons with their real activations."""
    names = [f"n{j}" for j in table["neuron"]]
    also = ["<br>".join(token_label(s) for s in a[:6]) + (" …" if len(a) > 6 else "") if a else "no other token"
            for a in table["also fires on"]]
    fig = go.Figure(go.Bar(
        x=names, y=table["activation"], marker_color="#EE6677", customdata=also,
        text=[f"{a:.2f}" for a in table["activation"]], textposition="outside",
        hovertemplate="neuron %{x}<br>activation %{y:.4f}<br><b>also fires on</b><br>%{customdata}<extra></extra>"))
    fig.update_layout(title=f"Strongest neurons for token {token} {token_label(view.tokens[token])} "
                            f"(layer {layer})",
                      xaxis_title="neuron", yaxis_title=f"activation (after {activation_name(view)})")
    top = float(table["activation"].max()) if len(table) else 1.0
    fig.update_yaxes(range=[min(0.0, float(table["activation"].min()) * 1.2), max(top, 1e-6) * 1.2])
    return style(fig, view.presenter, 360)


def top_neurons_everywhere_figure(view: View, layer: int, token: int, table: pd.DataFrame) -> go.Figure:
    """The same neurons across every token of the sentence: who else makes them fire."""
    post = view.trace[f"{_block(layer)}.post"][0]                         # (T, F)
    neurons = table["neuron"].tolist()
    relu = view.bundle.model.cfg.activation == "relu"
    scale = post_range(post[:, neurons], relu)
    fig = heatmap(post[:, neurons].T, [f"n{j}" for j in neurons], labels(view.tokens),
                  title=f"Where else these neurons fire (layer {layer})", row_title="neuron",
                  col_title="token", value_name="activation", signed=not relu, text=len(view.tokens) <= 12,
                  zmin=scale["zmin"], zmax=scale["zmax"],
                  presenter=view.presenter, height=max(300, 30 * len(neurons) + 150))
    if "colorscale" in scale:
        fig.data[0].update(colorscale=scale["colorscale"])
    return fig.update_traces(textfont=dict(size=18 if view.presenter else 11))


# --------------------------------------------------------------------------------------------------
# What the activation switches off
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Zeroed:
    count: int
    total: int
    rule: str          # how they were counted, in words

    @property
    def share(self) -> float:
        return self.count / self.total if self.total else 0.0


def zeroed(view: View, layer: int) -> Zeroed:
    """ReLU: activations that are exactly 0 in mlp.post. GELU: mlp.pre values below 0, squashed near 0."""
    n = _block(layer)
    if view.bundle.model.cfg.activation == "relu":
        post = view.trace[f"{n}.post"][0]
        return Zeroed(int((post == 0).sum()), post.numel(), "exactly 0 after ReLU")
    if view.bundle.model.cfg.activation == "swiglu":
        gate = view.trace[f"{n}.gate"][0]
        return Zeroed(int((gate < 0).sum()), gate.numel(),
                      "gated by a negative gate, whose SiLU lies between −0.28 and 0, so little of the up projection "
                      "passes")
    pre = view.trace[f"{n}.pre"][0]
    return Zeroed(int((pre < 0).sum()), pre.numel(), "negative before GELU, so squashed to between −0.17 and 0")


def histogram_bins(view: View, layer: int, bins: int = 60) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(edges, counts of mlp.pre, counts of mlp.post) over the same bins."""
    n = _block(layer)
    pre = as_numpy(view.trace[f"{n}.{pre_name(view.bundle.model.cfg)}"][0]).ravel().astype(float)
    post = as_numpy(view.trace[f"{n}.post"][0]).ravel().astype(float)
    low, high = min(pre.min(), post.min()), max(pre.max(), post.max())
    if high <= low:
        high = low + 1.0
    edges = np.linspace(low, high, bins + 1)
    return edges, np.histogram(pre, edges)[0], np.histogram(post, edges)[0]


def histogram_figure(view: View, layer: int) -> go.Figure:
    """Overlaid histograms of every value before (mlp.pre, or a gated MLP's mlp.gate) and after (mlp.post)."""
    edges, pre, post = histogram_bins(view, layer)
    before = f"mlp.{pre_name(view.bundle.model.cfg)}"
    centres, width = (edges[:-1] + edges[1:]) / 2, edges[1] - edges[0]
    act = activation_name(view)
    ranges = [[float(a), float(b)] for a, b in zip(edges[:-1], edges[1:])]
    fig = go.Figure([
        go.Bar(x=centres, y=pre, width=width, name=f"before {act}", marker_color="#4477AA",
               opacity=0.6, customdata=ranges,
               hovertemplate="%{customdata[0]:.3f} to %{customdata[1]:.3f}: %{y} values<extra>trace name: " + before + "</extra>"),
        go.Bar(x=centres, y=post, width=width, name=f"after {act}", marker_color="#EE6677",
               opacity=0.6, customdata=ranges,
               hovertemplate="%{customdata[0]:.3f} to %{customdata[1]:.3f}: %{y} values<extra>trace name: mlp.post</extra>"),
    ])
    fig.update_layout(title=f"Neuron values before and after {act}, layer {layer}", barmode="overlay",
                      xaxis_title="value", yaxis_title="how many (token, neuron) pairs",
                      legend=dict(orientation="h", y=-0.25))
    return style(fig, view.presenter, 360)


# --------------------------------------------------------------------------------------------------
# What if this layer had no feed-forward network?
# --------------------------------------------------------------------------------------------------

def experiment(layer: int) -> whatif.Experiment:
    return whatif.skip_mlp(layer)


def skip_search(view: View) -> whatif.Search:
    """Every layer's feed-forward skipped in turn, with each forecast's change, once per (model, sentence)."""
    return memo.per_view(_skip_search, view)


def _skip_search(view: View, trace) -> whatif.Search:
    return whatif.search(view, trace, [experiment(layer) for layer in range(view.bundle.model.cfg.n_layers)])


def family(cfg) -> whatif.Family:
    return whatif.Family("layer's feed-forward", "skipping", f"the {cfg.n_layers} layers' feed-forward networks",
                    lambda e: e.description.removesuffix(" skipped").replace("feed-forward", "the feed-forward"))


def choices(layer: int, search: whatif.Search, position: int) -> dict[str, int]:
    """The what-if choices, as the layer whose feed-forward is skipped: the chosen layer, or the one whose
    skipping changes the forecast after `position` most (when another, and visibly)."""
    most = whatif.most_that_shows(search, position)
    if most is None or most == experiment(layer):
        return {"chosen": layer}
    return {"chosen": layer, "most": search.experiments.index(most)}      # the search runs layer 0, 1, ...


def choice_label(key: str, options: dict[str, int], search: whatif.Search, position: int) -> str:
    shown = experiment(options[key])
    return shown.label + (", the one that matters most here" if shown == whatif.most_that_shows(search, position) else "")


def whatif_notes(view: View, search: whatif.Search, before, after, shown: whatif.Experiment, position: int):
    """What skipping each layer's feed-forward does to this forecast, and a token to look at instead when the
    shown one changes it little (see whatif.search_notes)."""
    return whatif.search_notes(view.tokens, search, family(view.bundle.model.cfg), shown, position,
                          whatif.changes(before, after))


def change_in_words(view: View, before, after, layer: int, position: int = -1) -> str:
    """How the top next-token guess at `position` changed when the feed-forward network (MLP) was skipped, and the largest change of
    any token's probability (said plainly when it is small)."""
    vocab = view.bundle.tokenizer.vocab
    p_before = torch.softmax(before["logits"][0, position], -1)
    p_after = torch.softmax(after["logits"][0, position], -1)
    b, a = int(p_before.argmax()), int(p_after.argmax())
    size = whatif.size_words(float(whatif.changes(before, after)[position]))
    start = f"{experiment(layer).changed}, the top guess after {quote(view.tokens[position])}"
    if a == b:
        old, new = percents(float(p_before[b]), float(p_after[b]))
        if old == new:
            return f"{start} stays {quote(vocab[b])} at {old}: this layer's feed-forward network hardly matters for it. {size}"
        return f"{start} stays {quote(vocab[b])}, but its probability goes from {old} to {new}. {size}"
    old, top, new = percents(float(p_before[b]), float(p_after[a]), float(p_after[b]))
    return (f"{start} changes from {quote(vocab[b])} ({old}) to {quote(vocab[a])} ({top}); "
            f"{quote(vocab[b])} now gets {new}. {size}")


# --------------------------------------------------------------------------------------------------
# Show the math: one neuron of one token
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class NeuronMath:
    token: int
    neuron: int
    inputs: list[float]        # mlp.in for the token, D values
    weights: list[float]       # W_in.weight[j], D values
    bias: float
    total: float               # sum of products, before the bias
    pre: float                 # total + bias, computed here
    traced_pre: float          # the trace's mlp.pre value
    post: float                # activation(pre), computed here
    traced_post: float
    activation: str            # "relu", "gelu", "gelu_tanh" or "swiglu" (then pre is the gate)
    up: float = 0.0            # a gated MLP's up projection of the token for this neuron (its trace value)


def neuron_math(view: View, layer: int, token: int, neuron: int) -> NeuronMath:
    """pre_j = sum_d in_d * W_in[j, d] + b_j and its activation, from the real weights and trace."""
    mlp = view.bundle.model.blocks[layer].mlp
    kind = view.bundle.model.cfg.activation
    W = mlp.W_gate if kind == "swiglu" else mlp.W_in                      # a gated MLP: the gate's row
    x = view.trace[f"{_block(layer)}.in"][0, token].double()             # (D,)
    w = W.weight[neuron].detach().double()                                 # (D,)
    bias = float(W.bias[neuron].detach()) if W.bias is not None else 0.0
    total = float((x * w).sum())
    pre = total + bias
    up = float(view.trace[f"{_block(layer)}.up"][0, token, neuron]) if kind == "swiglu" else 0.0
    post = (max(pre, 0.0) if kind == "relu" else pre / (1 + math.exp(-pre)) * up if kind == "swiglu"
            else gelu(pre, kind))
    traced = view.trace[f"{_block(layer)}.{'gate' if kind == 'swiglu' else 'pre'}"]
    return NeuronMath(token, neuron, x.tolist(), w.tolist(), bias, total, pre, float(traced[0, token, neuron]), post,
                      float(view.trace[f"{_block(layer)}.post"][0, token, neuron]), kind, up)


def _num(x: float) -> str:
    return f"{x:.3f}" if x >= 0 else f"({x:.3f})"


def neuron_math_latex(m: NeuronMath, shown: int = 3) -> list[str]:
    """The sum written with its first few real terms, then the activation; LaTeX lines (numbers only)."""
    D, j = len(m.inputs), m.neuron
    terms = " + ".join(f"({a:.3f} \\times {_num(b)})" for a, b in list(zip(m.inputs, m.weights))[:shown])
    more = f" + \\dots \\;(\\text{{{D} terms}})" if D > shown else ""
    lines = [
        f"\\text{{pre}}_{{{j}}} = \\sum_{{d=0}}^{{{D - 1}}} \\text{{in}}_d \\, W_{{\\text{{in}}}}[{j}, d] + b_{{{j}}}",
        f"= {terms}{more} + b_{{{j}}}",
        f"= {m.total:.4f} + {_num(m.bias)} = {m.pre:.4f}",
    ]
    if m.activation == "swiglu":
        lines[0] = lines[0].replace("\\text{pre}", "\\text{gate}").replace("W_{\\text{in}}", "W_{\\text{gate}}")
        lines.append(f"\\text{{post}}_{{{j}}} = \\text{{SiLU}}(\\text{{gate}}_{{{j}}}) \\cdot \\text{{up}}_{{{j}}} = "
                     f"\\frac{{{m.pre:.4f}}}{{1 + e^{{-{_num(m.pre)}}}}} \\cdot {_num(m.up)} = {m.post:.4f}")
    elif m.activation == "relu":
        lines.append(f"\\text{{post}}_{{{j}}} = \\max(0, {m.pre:.4f}) = {m.post:.4f}")
    elif m.activation == "gelu_tanh":                     # GPT-2's approximation of GELU
        inner = f"\\sqrt{{2/\\pi}}\\,({m.pre:.4f} + 0.044715 \\cdot {_num(m.pre)}^3)"
        lines.append(f"\\text{{post}}_{{{j}}} = \\text{{GELU}}(\\text{{pre}}_{{{j}}}), \\quad \\text{{GELU}}(x) \\approx "
                     f"x \\cdot \\tfrac12\\left(1 + \\tanh\\left(\\sqrt{{2/\\pi}}\\,(x + 0.044715\\,x^3)\\right)\\right)")
        lines.append(f"= {m.pre:.4f} \\cdot \\tfrac12\\left(1 + \\tanh\\left({inner}\\right)\\right) = {m.post:.4f}")
    else:
        erf = f"\\operatorname{{erf}}\\!\\left(\\tfrac{{{m.pre:.4f}}}{{\\sqrt 2}}\\right)"
        lines.append(f"\\text{{post}}_{{{j}}} = \\text{{GELU}}(\\text{{pre}}_{{{j}}}), \\quad \\text{{GELU}}(x) = "
                     f"x \\cdot \\tfrac12\\left(1 + \\operatorname{{erf}}(x / \\sqrt 2)\\right)")
        lines.append(f"= {m.pre:.4f} \\cdot \\tfrac12\\left(1 + {erf}\\right) = {m.post:.4f}")
    return lines


def neuron_terms(m: NeuronMath, shown: int = 8) -> pd.DataFrame:
    """The first few products of the sum, as a table."""
    rows = list(zip(m.inputs, m.weights))[:shown]
    return pd.DataFrame({"d": range(len(rows)), "in_d (mlp.in)": [a for a, _ in rows],
                         f"W_in[{m.neuron}, d]": [b for _, b in rows], "product": [a * b for a, b in rows]})
