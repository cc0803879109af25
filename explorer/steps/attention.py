"""Step 4, attention: every token asks a question, earlier tokens answer, the best matches win.

Figure builders read one head of one layer from the trace (blocks.i.attn.q/k/v/scores/pattern) and
return Plotly figures; the text functions return Markdown with tokens escaped by `quote`.
"""
import math
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import torch

from model.transformer import Trace

from explorer import memo
from explorer.steps import whatif
from explorer.plot import (MASKED, SEQUENTIAL, for_a_phone, heatmap, heatmap_panels, labels, safe, style, token_label,
                          visible)
from explorer.registry import BY_SLUG
from explorer.view import View, quote
from explorer.steps.whatif import Experiment

INTRO = """\
Attention is how tokens share information. Picture a classroom where every word is a pupil.
Each word raises a **question**, its *query* ("who is doing something here?"). Every word also holds
up a **label** saying what it can offer, its *key*, and keeps an **answer** ready, its *value*. A word
compares its question with every label (a dot product: a big number when they match), turns the match
scores into shares that add up to 1 (the softmax), and takes that mix of answers. The best-matching
labels get most of the attention, just like looking around a classroom for the pupil who can answer.

One rule: a word may look only at itself and the words **before** it, never ahead (the *causal
mask*), because when the model predicts the next word, the future is not written yet.

{heads} Pick a layer and a head, then walk through the tabs below from left to
right: the questions, labels and answers, the four steps with the real numbers, who looks at whom,
every head at once, and what changes if you switch part of attention off.
"""

HEADS = {
    "one": "This model has **one head** per layer: each layer asks one kind of question. (Bigger models have "
           "several heads per layer, each asking its own kind of question: one may look for the subject, another "
           "for the previous word.)",
    "several": "Each layer of this model has **{H} heads**, each asking its own kind of question: one may look for "
               "the subject, another for the previous word.",
}


def intro(cfg) -> str:
    """The page's explanation, with this model's number of heads per layer."""
    return INTRO.format(heads=HEADS["one" if cfg.n_heads == 1 else "several"].format(H=cfg.n_heads))

# The page's sections, one tab each, in teaching order (the labels appear in links: section=...).
SECTIONS = BY_SLUG["attention"].labels           # the tabs, named in explorer/registry.py

QKV_TEXT = """\
Each token's vector is multiplied by three learned matrices, giving its query (the question), key (the
label) and value (the answer). Each head gets its own {K} numbers of each: one row per token below, one
column per number, on one colour scale (the same colour is the same number in all three).
"""
QKV_SHARED = """\
Each token's vector is multiplied by three learned matrices, giving its query (the question), key (the
label) and value (the answer). Each head gets its own {K} query numbers; its {K} key and {K} value numbers are
its group's: {per} query heads share one key/value head ({G} key/value heads for {H} heads). One row per token
below, one column per number, on one colour scale (the same colour is the same number in all three).
"""


def qkv_text(cfg) -> str:
    """What the Q, K and V panels hold for this model: every head its own three, or keys and values shared."""
    if cfg.kv_heads == cfg.n_heads:
        return QKV_TEXT.format(K=cfg.d_head)
    return QKV_SHARED.format(K=cfg.d_head, per=cfg.n_heads // cfg.kv_heads, G=cfg.kv_heads, H=cfg.n_heads)


QKV_TITLES = {"q": "Q: the questions", "k": "K: the labels", "v": "V: the answers"}

STEP_CAPTIONS = (
    "**1. Match.** The dot product q·k of each query row with each key column: how well a question "
    "matches a label.",
    "**2. Scale.** Divided by √K = √{K} = {sqrtK:g}, so long vectors do not make the softmax too sure of itself.",
    "**3. Mask.** Later tokens are hidden (−∞): a word may not look ahead.",
    "**4. Softmax.** Each row becomes shares between 0 and 1 that add up to 1: the attention pattern.",
)

WHATIF_TEXT = {
    "knock_out_head": "Silence this head: its answers never reach the rest of the model.",
    "remove_scaling": "Skip the division by √K in every head: the scores are √K = √{K} = {sqrtK:g} times larger "
                      "before the softmax (not K = {K} times: the division was by √K).",
    "lift_mask": "Let every word look ahead at the words after it, too, in every head.",
}


def whatif_text(experiment: Experiment, K: int) -> str:
    """What an experiment changes, in words, with this model's numbers (K dimensions per head)."""
    return WHATIF_TEXT[experiment.kind].format(K=K, sqrtK=math.sqrt(K))


def kv_head(trace: Trace, layer: int, head: int) -> int:
    """The key/value head query head `head` reads: head // (H / G) (itself when every head has its own)."""
    H, G = trace[f"blocks.{layer}.attn.q"].shape[1], trace[f"blocks.{layer}.attn.k"].shape[1]
    return head // (H // G)


def sharing_text(H: int, G: int) -> str:
    """Which query heads share a key/value head (grouped-query attention), in words; "" when none share."""
    if G == H:
        return ""
    per = H // G
    groups = "; ".join(f"heads {', '.join(str(h) for h in range(g * per, (g + 1) * per))} read key/value head {g}"
                       for g in range(G))
    kind = "multi-query attention: one key/value head for all" if G == 1 else "grouped-query attention"
    return (f"This model's {H} query heads share {G} key/value head{'s' if G > 1 else ''} ({kind}): {groups}. "
            f"Each query head still asks its own questions (its own queries), but the heads of a group compare them "
            f"with the same keys and read the same values, so the model keeps {G} sets of keys and values per layer "
            f"instead of {H}.")


def head_values(trace: Trace, layer: int, head: int) -> dict[str, np.ndarray]:
    """Q, K, V (T x K each) and the four steps (T x T each) for one head, as NumPy arrays."""
    name = f"blocks.{layer}.attn"
    q = trace[f"{name}.q"][0, head].double().numpy()                  # (T, K)
    group = kv_head(trace, layer, head)                                # the key/value head this query head reads
    k = trace[f"{name}.k"][0, group].double().numpy()                 # (T, K)
    scores = trace[f"{name}.scores"][0, head].double().numpy()        # (T, T), already / sqrt(K)
    T, K = q.shape
    future = np.triu(np.ones((T, T), dtype=bool), 1)
    return {"q": q, "k": k, "v": trace[f"{name}.v"][0, group].double().numpy(),
            "raw": scores * math.sqrt(K), "scaled": scores,
            "masked": np.where(future, np.nan, scores), "pattern": trace[f"{name}.pattern"][0, head].double().numpy(),
            "future": future}


# --- figures ------------------------------------------------------------------------------------


def qkv_figure(v: View, trace: Trace, layer: int, head: int) -> go.Figure:
    """The queries, keys and values of one head: three T x K heatmaps side by side in one figure."""
    values = head_values(trace, layer, head)
    return heatmap_panels([(QKV_TITLES[key], values[key]) for key in "qkv"], labels(v.tokens), row_title="token",
                          col_title="dimension", presenter=v.presenter)


def _step_heatmap(v: View, z: np.ndarray, title: str, value_name: str, signed: bool = True,
                  zmin=None, zmax=None, masked: np.ndarray | None = None, decimals: int = 1) -> go.Figure:
    """One of the four steps: a query x key heatmap; masked cells are blank, marked −∞ and say so on hover."""
    rows = labels(v.tokens)
    T = len(rows)
    fig = heatmap(z, rows, rows, title=title, row_title="query", col_title="key", value_name=value_name,
                  signed=signed, zmin=zmin, zmax=zmax, presenter=v.presenter, height=max(300, 26 * T + 130))
    hidden = np.zeros(z.shape, dtype=bool) if masked is None else masked
    values = np.nan_to_num(z)
    if T <= 10:     # few enough cells to print each number; the numbers replace the colour bar
        shown = np.where(hidden, "−∞", np.vectorize(lambda x: f"{x:.{decimals}f}")(values))
        fig.data[0].update(text=shown, texttemplate="%{text}", textfont=dict(size=11), showscale=False)
    else:
        fig.data[0].update(text=np.where(hidden, "−∞", ""), texttemplate="%{text}")
    fig.update_xaxes(tickangle=-90)
    if masked is not None:
        fig.update_layout(plot_bgcolor=MASKED)        # masked cells (no value) show grey, not white
        hover = np.where(masked, "−∞ (masked: a later token)", np.vectorize(lambda x: f"{x:.4f}")(values))
        labels_ = np.asarray(fig.data[0].customdata)
        fig.data[0].update(customdata=np.dstack([labels_[..., 0], labels_[..., 1], hover]),
                           hovertemplate="query %{customdata[0]}<br>key %{customdata[1]}<br>"
                                         f"{value_name} %{{customdata[2]}}<extra></extra>")
    return fig


def step_figures(v: View, trace: Trace, layer: int, head: int) -> list[go.Figure]:
    """The four steps of one head as heatmaps: q·k, divided by sqrt(K), masked, softmax."""
    x = head_values(trace, layer, head)
    K = x["q"].shape[1]
    return [
        _step_heatmap(v, x["raw"], "1. Raw scores q·k", "q·k"),
        _step_heatmap(v, x["scaled"], f"2. Divided by √{K}", "score"),
        _step_heatmap(v, x["masked"], "3. Causal mask applied", "score", masked=x["future"]),
        _step_heatmap(v, x["pattern"], "4. Softmax: the weights", "weight", signed=False, zmin=0.0, zmax=1.0,
                      decimals=2),
    ]


def pattern_figure(v: View, trace: Trace, layer: int, head: int) -> go.Figure:
    """The chosen head's attention pattern, large: query rows x key columns, 0..1. The masked cells (a later
    token) are blank and grey, with "masked" on hover, not a weight of 0.00."""
    x = head_values(trace, layer, head)
    future = x["future"]
    rows = labels(v.tokens)
    T = len(rows)
    fig = heatmap(np.where(future, np.nan, x["pattern"]), rows, rows,
                  title=f"Attention pattern of layer {layer} head {head}",
                  row_title="query (who is looking)", col_title="key (looked at)", value_name="weight",
                  signed=False, zmin=0.0, zmax=1.0, presenter=v.presenter, height=max(420, 34 * T + 150))
    weights = np.vectorize(lambda w: f"{w:.2f}")(x["pattern"])
    if T <= 14:       # few enough cells to print each weight
        fig.data[0].update(text=np.where(future, "", weights), texttemplate="%{text}",
                           textfont=dict(size=18 if v.presenter else 12))
    hover = np.where(future, "masked: a later token", np.vectorize(lambda w: f"{w:.4f}")(x["pattern"]))
    names = np.asarray(fig.data[0].customdata)
    fig.data[0].update(customdata=np.dstack([names[..., 0], names[..., 1], hover]),
                       hovertemplate="query %{customdata[0]}<br>key %{customdata[1]}<br>weight %{customdata[2]}"
                                     "<extra></extra>")
    return fig.update_layout(plot_bgcolor=MASKED)         # masked cells (no value) show grey


MAX_PANELS = 48


def grid_panels(cfg, layer: int) -> list[tuple[int, int]]:
    """(layer, head) of every panel in the grid: all heads of all layers, or only `layer`'s heads if too many."""
    if cfg.n_layers * cfg.n_heads <= MAX_PANELS:
        return [(l, h) for l in range(cfg.n_layers) for h in range(cfg.n_heads)]
    return [(layer, h) for h in range(cfg.n_heads)]


def all_heads_figure(v: View, trace: Trace, layer: int = 0, head: int | None = None) -> go.Figure:
    """Small multiples: the attention pattern of every head in every layer, on one 0..1 colour scale. The
    outer panels name the tokens (keys along the bottom row, queries down the first column); the panel of
    (layer, head), the one chosen in the pickers, is outlined in orange, its title in bold orange says "(chosen)"
    (not on a phone, where it would run into the next panel's title).

    The grid is laid out by hand (axis domains), as plotly's make_subplots would, but much faster (measured:
    see docs/figures.md, "Measured once, behind a design choice").
    """
    cfg = v.bundle.model.cfg
    panels = grid_panels(cfg, layer)
    cols = min(cfg.n_heads, 8)
    rows = math.ceil(len(panels) / cols)
    gap_x, gap_y = 0.02, 0.12 / rows
    width, height = (1 - gap_x * (cols - 1)) / cols, (1 - gap_y * (rows - 1)) / rows
    names = [safe(t) for t in labels(v.tokens)]
    T = len(names)
    custom = np.dstack([np.repeat(np.array(names, dtype=object)[:, None], T, axis=1),
                        np.repeat(np.array(names, dtype=object)[None, :], T, axis=0)])
    future = np.triu(np.ones((T, T), dtype=bool), 1)                          # masked: a later token
    everything = len(panels) == cfg.n_layers * cfg.n_heads
    layout = dict(title="Every head in every layer" if everything else f"Every head in layer {layer}",
                  annotations=[],
                  coloraxis=dict(colorscale=SEQUENTIAL, cmin=0, cmax=1, colorbar=dict(title=dict(text="weight"))))
    data = []
    ticks = dict(tickvals=list(range(T)), ticktext=names, tickfont=dict(size=13 if v.presenter else 10))
    layout["shapes"] = []
    for n, (l, h) in enumerate(panels):
        r, c = divmod(n, cols)
        axis = "" if n == 0 else str(n + 1)
        x0, top = c * (width + gap_x), 1 - r * (height + gap_y)
        x_domain, y_domain = [max(0.0, x0), min(1.0, x0 + width)], [max(0.0, top - height), min(1.0, top)]
        bottom_row = n + cols >= len(panels)
        layout[f"xaxis{axis}"] = dict(domain=x_domain, anchor=f"y{axis}", showticklabels=bottom_row,
                                      tickangle=-90, showgrid=False, zeroline=False, **ticks)
        layout[f"yaxis{axis}"] = dict(domain=y_domain, anchor=f"x{axis}", showticklabels=c == 0,
                                      showgrid=False, zeroline=False, autorange="reversed", **ticks)
        chosen = (l, h) == (layer, head)
        if chosen:
            layout["shapes"].append(dict(type="rect", xref="paper", yref="paper", x0=x_domain[0], x1=x_domain[1],
                                         y0=y_domain[0], y1=y_domain[1], line=dict(color=SELECTED, width=5),
                                         name="selected head"))
        name = (f"L{l} H{h}" if v.phone else f"layer {l} head {h}") if everything else f"head {h}"   # one layer:
                                                                                            # its title names it
        # a phone's panels are too narrow for "(chosen)" beside a neighbour's name: the outline and colour say it
        title = f"<b>{name}{'' if v.phone else ' (chosen)'}</b>" if chosen else name
        layout["annotations"].append(dict(text=title, x=x0 + width / 2, y=min(1.0, top), xref="paper", yref="paper",
                                          showarrow=False, yanchor="bottom",
                                          font=dict(size=16 if v.presenter else 12,
                                                    color=SELECTED if chosen else None)))
        data.append(go.Heatmap(
            z=np.where(future, np.nan, trace["pattern", l][0, h].numpy()), xaxis=f"x{axis}", yaxis=f"y{axis}",
            coloraxis="coloraxis", customdata=custom, name=f"layer {l} head {h}", hoverongaps=False,
            hovertemplate=(f"layer {l} head {h}<br>query %{{customdata[0]}}<br>key %{{customdata[1]}}"
                           "<br>weight %{z:.4f}<extra></extra>")))
    fig = style(go.Figure(data, layout=layout), v.presenter, (110 if v.phone else 280) * rows + 130)   # a phone's
                                                                            # panels are narrow: not as tall either
    return fig.update_layout(margin=dict(l=10, r=10, t=60, b=10), plot_bgcolor=MASKED)   # masked cells: grey


DIFFER = 0.01         # two heads' patterns differ when some weight differs by this much (weights are shown to 0.01)


def most_alike_heads(trace: Trace, n_layers: int) -> tuple[int, int, int, float] | None:
    """(layer, head a, head b, gap) of the two heads of one layer whose patterns are most alike, gap being the
    largest difference between their weights; None when every layer has a single head."""
    best = None
    for layer in range(n_layers):
        pattern = trace["pattern", layer][0].double()                               # (H, T, T)
        H = pattern.shape[0]
        for a in range(H):
            gaps = (pattern[a + 1:] - pattern[a]).abs().flatten(1).amax(-1)           # (H - a - 1,)
            for b, gap in enumerate(gaps.tolist(), start=a + 1):
                if best is None or gap < best[3]:
                    best = (layer, a, b, gap)
    return best


def grid_caption(v: View, trace: Trace) -> str:
    """What the small squares show, and whether heads of one layer look different here, measured (markdown); worked
    out once per view (a class on this tab asks for it once per student)."""
    return memo.per_view(_grid_caption, v)


def _grid_caption(v: View, trace: Trace) -> str:
    text = "Each small square is one head's pattern (rows: queries, columns: keys). "
    alike = most_alike_heads(trace, v.bundle.model.cfg.n_layers)
    if alike is None:
        text += ("This model has one head per layer, so each layer has a single pattern: there are no other heads "
                 "of the same layer to compare it with. ")
    else:
        layer, a, b, gap = alike
        pair = f"heads {a} and {b} of layer {layer}"
        if gap >= DIFFER:
            text += ("Heads in the same layer read the same tokens but ask different questions, so their patterns "
                     f"differ: even the two most alike, {pair}, differ by as much as **{gap:.2f}** in one weight. ")
        else:
            text += ("Heads in the same layer read the same tokens and can ask different questions, but here "
                     f"{pair} have nearly the same pattern: no weight differs by more than **{gap:.3f}**. ")
    return text + "Orange: the head chosen above."


SELECTED = "#EE7733"  # orange: the chosen head's panel, the chosen query's lines
LEVELS = 100         # lines are grouped by weight in steps of 1/LEVELS (0.01, the smallest weight drawn)
LINE_WIDTH = {True: 12.0, False: 5.0}        # pixels at weight 1: the chosen query's lines, the others'
LINE_OPACITY = {True: 1.0, False: 0.45}      # opacity at weight 1


def line_width(weight: float, chosen: bool) -> float:
    """A line's width is proportional to its weight: 0 at weight 0, LINE_WIDTH at weight 1 (the largest a
    weight can be), so a weight of 0.02 is a tenth as wide as 0.2."""
    return LINE_WIDTH[chosen] * weight


def line_opacity(weight: float, chosen: bool) -> float:
    """A line's opacity is proportional to its weight, as its width is: a weight near 0 is all but invisible."""
    return LINE_OPACITY[chosen] * weight


def who_lines_figure(v: View, layer: int, head: int, query: int) -> go.Figure:
    """`lines_figure` of the view's sentence, built once per (model, sentence, layer, head, query): a class that
    follows its teacher onto one view builds it once, not once per student."""
    return memo.per_view(lines_figure, v, layer, head, query)


def lines_figure(v: View, trace: Trace, layer: int, head: int, query: int, min_weight: float = 0.01) -> go.Figure:
    """Who looks at whom: queries on the left, keys on the right, one line per weight, its width and opacity
    proportional to the weight (`line_width`, `line_opacity`).

    The selected query's lines are orange and drawn on top, the others blue, narrower and fainter (on their own
    scale, also proportional); lines under `min_weight` are left out. Lines are drawn as one trace per weight
    step (1/LEVELS), far faster than one shape per line; the hover on each line gives its exact weight.
    """
    pattern = trace["pattern", layer][0, head].double().numpy()   # (T, T)
    tokens = v.tokens
    T = len(tokens)
    names = [safe(t) for t in labels(tokens)]
    groups: dict[tuple[bool, int], tuple[list, list, list]] = {}
    for i in range(T):
        for j in range(i + 1):
            w = float(pattern[i, j])
            level = round(w * LEVELS)                    # 0 below 0.005: a line that would not show
            if w < min_weight or level == 0:
                continue
            xs, ys, hover = groups.setdefault((i == query, level), ([], [], []))
            xs += [0, 0.5, 1, None]
            ys += [i, (i + j) / 2, j, None]
            hover += [f"{names[i]} → {names[j]}: weight {w:.4f}"] * 3 + [None]
    data = []
    for (chosen, level), (xs, ys, hover) in sorted(groups.items()):     # the chosen query's lines drawn last
        w = level / LEVELS
        data.append(go.Scatter(x=xs, y=ys, mode="lines", opacity=line_opacity(w, chosen), hovertext=hover,
                               hoverinfo="text", name=f"{'query' if chosen else 'other'} weight {w:.2f}",
                               line=dict(color=SELECTED if chosen else "#4477AA", width=line_width(w, chosen))))
    row = pattern[query]
    query_name = token_label(tokens[query])
    data.append(go.Scatter(x=[0] * T, y=list(range(T)), mode="markers+text", text=names, textposition="middle left",
                           marker=dict(size=9, color=[SELECTED if i == query else "#4477AA" for i in range(T)]),
                           name="queries", customdata=[names[int(pattern[i].argmax())] for i in range(T)],
                           hovertemplate="query %{text}<br>looks most at %{customdata}<extra></extra>"))
    data.append(go.Scatter(x=[1] * T, y=list(range(T)), mode="markers+text", text=names, textposition="middle right",
                           marker=dict(size=9, color="#4477AA"), name="keys", customdata=row,
                           hovertemplate=(f"key %{{text}}<br>gets %{{customdata:.4f}} of the attention of "
                                          f"{query} {query_name}<extra></extra>")))
    fig = go.Figure(data, layout=dict(
        title="Who looks at whom", showlegend=False,
        xaxis=dict(visible=False, range=[-1.4, 2.4] if v.presenter else [-0.9, 1.9]),
        yaxis=dict(visible=False, autorange="reversed"),
        annotations=[dict(x=0, y=-1, text="query", showarrow=False, yanchor="bottom"),
                     dict(x=1, y=-1, text="key", showarrow=False, yanchor="bottom")]))
    fig = style(fig, v.presenter, max(320, 30 * T + 120))
    return for_a_phone(fig) if v.phone else fig          # its two columns of words fit a phone's width


# --- cached figures: changing the query token or the what-if redraws nothing of these -----------


HEAD_FIGURES = {"qkv": qkv_figure, "steps": step_figures, "pattern": pattern_figure}


def head_figure(v: View, layer: int, head: int, which: str):
    """One of a head's figures of the view's sentence, "qkv", "steps" (a list of four) or "pattern", built once
    per (model, sentence). Only the open section's figure is built: building all three on every new sentence
    was most of the page's script run (see docs/figures.md, "Measured once, behind a design choice")."""
    return memo.per_view(_head_figure, v, layer, head, which)


def _head_figure(v: View, trace: Trace, layer: int, head: int, which: str):
    return HEAD_FIGURES[which](v, trace, layer, head)


def needs_overview(cfg) -> bool:
    """Too many heads for labelled panels (GPT-2: 144): the page adds one thumbnail map of them all."""
    return cfg.n_layers * cfg.n_heads > MAX_PANELS


def overview_figure(v: View, trace: Trace, layer: int = 0, head: int = 0) -> go.Figure:
    """Every head of every layer as thumbnails in ONE heatmap, as BertViz's model view: a row of heads per
    layer, each thumbnail that head's (T x T) pattern, a blank row and column between thumbnails, (layer,
    head) outlined. One trace with category labels keeps the hover exact (layer, head, query, key, weight)
    and the figure light: 144 separate heatmaps would cost the page and the browser far more.
    """
    cfg = v.bundle.model.cfg
    L, H = cfg.n_layers, cfg.n_heads
    names = [safe(t) for t in labels(v.tokens)]
    T, step = len(names), len(names) + 1
    patterns = torch.stack([trace["pattern", l][0] for l in range(L)]).double().numpy()  # (L, H, T, T)
    padded = np.full((L, H, step, step), np.nan)
    padded[:, :, :T, :T] = patterns
    z = padded.transpose(0, 2, 1, 3).reshape(L * step, H * step)[:-1, :-1]      # (L*step-1, H*step-1)

    def axis_labels(outer: str, inner: str, n: int) -> list[str]:
        cells = [[f"{outer} {i} · {inner} {name}" for name in names] + ["\u200b" * (i + 1)] for i in range(n)]
        return [c for block in cells for c in block][:-1]                       # gap labels are unique and blank

    x, y = axis_labels("head", "key", H), axis_labels("layer", "query", L)
    font = dict(size=16 if v.presenter else 11)
    axis = dict(showgrid=False, zeroline=False, tickfont=font)
    masked = np.zeros((L, H, step, step))
    masked[:, :, :T, :T] = np.triu(np.ones((T, T)), 1)                       # a later token: masked
    masked = masked.transpose(0, 2, 1, 3).reshape(L * step, H * step)[:-1, :-1]
    z = np.where(masked > 0, np.nan, z)
    fig = go.Figure([go.Heatmap(
        z=z, x=x, y=y, coloraxis="coloraxis", hoverongaps=False, name="every head",
        hovertemplate="%{y}<br>%{x}<br>weight %{z:.4f}<extra></extra>"),
        go.Heatmap(z=np.where(masked > 0, 1.0, np.nan), x=x, y=y, colorscale=[[0, MASKED], [1, MASKED]],
                   showscale=False, hoverinfo="skip", hoverongaps=False, name="masked")])
    fig.update_layout(
        title="Every head in every layer", coloraxis=dict(colorscale=SEQUENTIAL, cmin=0, cmax=1,
                                                          colorbar=dict(title=dict(text="weight"))),
        xaxis=dict(tickvals=[x[h * step + T // 2] for h in range(H)], ticktext=[f"head {h}" for h in range(H)],
                   side="top", **axis),
        yaxis=dict(tickvals=[y[l * step + T // 2] for l in range(L)], ticktext=[f"layer {l}" for l in range(L)],
                   autorange="reversed", scaleanchor="x", **axis),
        shapes=[dict(type="rect", x0=head * step - 0.5, x1=head * step + T - 0.5, y0=layer * step - 0.5,
                     y1=layer * step + T - 0.5, line=dict(color=SELECTED, width=3), name="selected head")])
    return style(fig, v.presenter, 760).update_layout(margin=dict(l=10, r=10, t=90, b=10))


def every_head_figure(v: View, layer: int, head: int) -> go.Figure:
    """overview_figure of the view's sentence with (layer, head) outlined, built once per chosen head."""
    return memo.per_view(overview_figure, v, layer, head)


def grid_figure(v: View, layer: int, head: int) -> go.Figure:
    """all_heads_figure of the view's sentence with (layer, head) outlined, built once per chosen head."""
    return memo.per_view(all_heads_figure, v, layer, head)


# --- words --------------------------------------------------------------------------------------


def top_keys(trace: Trace, layer: int, head: int, query: int, k: int = 3) -> list[tuple[int, float]]:
    """(key position, weight) of the `k` keys the query attends to most, largest first."""
    row = trace["pattern", layer][0, head, query, : query + 1]
    top = row.topk(min(k, query + 1))
    return [(int(i), float(w)) for i, w in zip(top.indices, top.values)]


def _token_at(tokens: list[str], i: int) -> str:
    """A token in quotes, with its position when the word occurs more than once."""
    return quote(tokens[i]) + (f" (position {i})" if tokens.count(tokens[i]) > 1 else "")


SHOWN_WEIGHT = 0.005      # the smallest weight read_row names: anything less is written 0.00


def _weight(w: float) -> str:
    """A weight to two decimals, or to two significant digits when it is too small for them (a long sentence)."""
    return f"{w:.2f}" if w >= SHOWN_WEIGHT else f"{w:.2g}"


def read_row(v: View, trace: Trace, layer: int, head: int, query: int) -> str:
    """The query's row of the pattern in words: where its attention goes, the top 3 keys with their real weights,
    leaving out keys whose weight would be written 0.00 (and saying so)."""
    tokens = v.tokens
    top = top_keys(trace, layer, head, query)
    (first, w0), rest = top[0], top[1:]
    shown = [(i, w) for i, w in rest if w >= SHOWN_WEIGHT]
    text = f"{_token_at(tokens, query)} puts **{_weight(w0)}** of its attention on {_token_at(tokens, first)}"
    if shown:
        text += ", then " + " and ".join(f"**{w:.2f}** on {_token_at(tokens, i)}" for i, w in shown)
    if len(shown) < len(rest):
        text += f"; every other key gets less than {SHOWN_WEIGHT}"
    text += "."
    if query == 0:
        text += " It is the first token, so it can only look at itself."
    return text


def head_sentence(v: View, trace: Trace, layer: int, head: int, query: int) -> str:
    """The chosen query's row in one plain sentence, for a screen reader (no Markdown): "Layer 1, head 2: “it”
    attends most to “dog” (0.91), then “the” (0.05)"."""
    top = [(i, w) for i, w in top_keys(trace, layer, head, query) if w >= SHOWN_WEIGHT]
    said = [f"“{visible(v.tokens[i])}” ({i}) ({w:.2f})" for i, w in top]
    return (f"Layer {layer}, head {head}: “{visible(v.tokens[query])}” ({query}) attends most to {said[0]}"
            + (", then " + ", ".join(said[1:]) if said[1:] else ""))


def math_lines(v: View, trace: Trace, layer: int, head: int, query: int, key: int, terms: int = 4) -> list[str]:
    """The weight of one (query, key) pair worked out: dot product, scaling, softmax over the visible keys."""
    x = head_values(trace, layer, head)
    q, k = x["q"][query], x["k"][key]
    K = q.shape[0]
    products = q * k
    dot = float(products.sum())
    shown = " + ".join(f"({q[i]:.3f})·({k[i]:.3f})" for i in range(min(terms, K)))
    more = f" + … ({K - terms} more terms)" if K > terms else ""
    tokens = v.tokens
    lines = [f"Query {_token_at(tokens, query)} (row {query}) and key {_token_at(tokens, key)} (column {key}), "
             f"layer {layer} head {head}, K = {K}:", ""]
    lines.append(f"1. **Match**: q·k = {shown}{more} = **{dot:.4f}** (the raw score heatmap shows "
                 f"{x['raw'][query, key]:.4f}).")
    score = dot / math.sqrt(K)
    lines.append(f"2. **Scale**: {dot:.4f} / √{K} = {dot:.4f} / {math.sqrt(K):g} = **{score:.4f}** "
                 f"(the trace's score: {x['scaled'][query, key]:.4f}).")
    if key > query:
        lines.append(f"3. **Mask**: {_token_at(tokens, key)} comes after {_token_at(tokens, query)}, so its score "
                     "becomes −∞ and its weight is exactly 0.")
        return lines
    visible = x["scaled"][query, : query + 1]
    total = float(np.exp(visible).sum())
    listed = ", ".join(f"{s:.2f}" for s in visible[:8]) + (", …" if query + 1 > 8 else "")
    lines.append(f"3. **Mask**: {_token_at(tokens, query)} may look at positions 0 to {query} "
                 f"({query + 1} keys, scores {listed}); later keys get −∞.")
    weight = math.exp(score) / total
    lines.append(f"4. **Softmax**: e^{score:.4f} / (sum of e^score over the {query + 1} visible keys) = "
                 f"{math.exp(score):.4f} / {total:.4f} = **{weight:.4f}**; the pattern holds "
                 f"**{x['pattern'][query, key]:.4f}**.")
    return lines


# --- what if ------------------------------------------------------------------------------------


# The what-if choices by key (the radio's values, which a discovery's "Show me" sets): the head chosen in the
# pickers, the head whose knockout changes the query's forecast most (when another), and two changes to every head.
WHATIF_KEYS = ("chosen", "most", "scaling", "mask")


def searched_heads(cfg, layer: int) -> tuple[tuple[int, int], ...]:
    """The heads whose knockout the what-if tries: all of them, or the chosen layer's when there are too many
    to run one by one (GPT-2's 144: as the grid of every head, `grid_panels`)."""
    return tuple(grid_panels(cfg, layer))


def heads_family(cfg, layer: int) -> whatif.Family:
    heads = searched_heads(cfg, layer)
    members = (f"all {len(heads)} heads" if len(heads) == cfg.n_layers * cfg.n_heads
               else f"the {len(heads)} heads of layer {layer}")
    return whatif.Family("head", "knocking out", members, lambda e: e.label.removeprefix("Knock out "))


def knockout_search(v: View, layer: int) -> whatif.Search:
    """Every searched head knocked out in turn, with each forecast's change, once per (model, sentence)."""
    return memo.per_view(_knockout_search, v, searched_heads(v.bundle.model.cfg, layer))


def _knockout_search(v: View, trace: Trace, heads: tuple[tuple[int, int], ...]) -> whatif.Search:
    return whatif.search(v, trace, [whatif.knock_out_head(l, h) for l, h in heads])


def experiments(layer: int, head: int, search: whatif.Search | None = None, query: int = -1) -> dict[str, Experiment]:
    """The what-if choices: knock out the chosen head, or the one that changes the query's forecast most (when
    `search` finds another that changes it visibly), remove the √K scaling, lift the mask."""
    options = {"chosen": whatif.knock_out_head(layer, head)}
    if search is not None and (most := whatif.most_that_shows(search, query)) not in (None, options["chosen"]):
        options["most"] = most
    return options | {"scaling": whatif.REMOVE_SCALING, "mask": whatif.LIFT_MASK}


def experiment_label(key: str, options: dict[str, Experiment], search: whatif.Search, query: int) -> str:
    """A choice's words; the head that changes this forecast most, visibly, says so."""
    label = options[key].label
    if key in ("chosen", "most") and options[key] == whatif.most_that_shows(search, query):
        label += ", the head that matters most here"
    return label


def whatif_notes(v: View, search: whatif.Search, before: Trace, after: Trace, experiment: Experiment, query: int,
                 layer: int) -> tuple[str, int | None]:
    """What the search of every head found for this forecast, and a query token to look at instead when this
    what-if changes it little (see whatif.search_notes)."""
    return whatif.search_notes(v.tokens, search, heads_family(v.bundle.model.cfg, layer), experiment, query,
                          whatif.changes(before, after))


def whatif_stage(v: View, trace: Trace, experiment: Experiment, query: int, layer: int):
    """What the what-if tab shows for `experiment` and the forecast after `query`: (its chart, the change in words,
    (the search's notes, a query token to look at instead)). Ask through memo.per_view: a class that opens the tab
    together computes it once."""
    after = whatif.experiment_trace(v, experiment)
    table = whatif.next_token_change(v, trace, after, position=query)
    return (whatif.change_figure(table, experiment, v.presenter), change_words(v, trace, after, experiment, query),
            whatif_notes(v, knockout_search(v, layer), trace, after, experiment, query, layer))


@dataclass
class Change:
    before: str          # top token as it is
    p_before: float
    after: str           # top token with the experiment
    p_after: float
    largest: float       # largest change of any token's probability


def top_change(v: View, before: Trace, after: Trace, position: int = -1) -> Change:
    p0 = torch.softmax(before["logits"][0, position].double(), -1)
    p1 = torch.softmax(after["logits"][0, position].double(), -1)
    vocab = v.bundle.tokenizer.vocab
    b, a = int(p0.argmax()), int(p1.argmax())
    return Change(vocab[b], float(p0[b]), vocab[a], float(p1[a]), float((p1 - p0).abs().max()))


def change_words(v: View, before: Trace, after: Trace, experiment: Experiment, position: int = -1) -> str:
    """How the top prediction for the token after `position` changed, in words."""
    T = len(v.tokens)
    position %= T
    c = top_change(v, before, after, position)
    where = _token_at(v.tokens, position)
    text = (f"As it is, the model's top guess for the word after {where} is {quote(c.before)} at "
            f"**{c.p_before:.2f}**. {experiment.changed}, ")
    if c.before == c.after:
        text += f"it is still {quote(c.after)}, now at **{c.p_after:.2f}**."
    else:
        text += f"it becomes {quote(c.after)} at **{c.p_after:.2f}**."
    text += " " + whatif.size_words(c.largest)
    if experiment.kind == "lift_mask":
        if position == T - 1:
            text += (" The last token already sees every token, so lifting the mask changes its prediction only "
                     "through the earlier tokens, which now peek ahead at it.")
        else:
            text += (f" Now {where} can also see the {T - 1 - position} token(s) after it, including the very word "
                     "it is meant to predict: a peek the model never had in training.")
    return text
