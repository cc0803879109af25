"""Figures for the training lab: plain functions of a run's history. The live views (loss, metrics, attention
snapshot) are Vega-Lite charts with fixed specs, updated in place at every tick; the rest are Plotly figures,
drawn through explorer.app.layout.chart (also redrawn in place)."""
import itertools
import math

import altair as alt
import pandas as pd

import plotly.graph_objects as go

from explorer.plot import MASKED, labels, safe, style

# Paul Tol's "muted" scheme: nine colours, distinct for colour-blind viewers, one per legend entry of a figure.
COLOURS = ["#332288", "#CC6677", "#999933", "#44AA99", "#117733", "#88CCEE", "#882255", "#DDCC77", "#AA4499"]
DIVERGED = "#000000"          # the divergence marker: black, unlike every curve


def log_ticks(values) -> dict:
    """Clean tick labels for a log axis over `values`: 0.1, 0.2, 0.5, 1, 2, 5, ... (Plotly's own repeat 2, 5)."""
    finite = [v for v in values if v and v > 0 and math.isfinite(v)]
    if not finite:
        return {}
    low, high = math.floor(math.log10(min(finite))), math.ceil(math.log10(max(finite)))
    ticks = [m * 10.0 ** e for e in range(low, high + 1) for m in (1, 2, 5)]
    ticks = [t for t in ticks if min(finite) / 2.5 <= t <= max(finite) * 2.5]
    return dict(tickvals=ticks, ticktext=[f"{t:g}" for t in ticks])


def loss_figure(run, log_scale: bool = False, presenter: bool = False) -> go.Figure:
    """Training and validation loss against steps; a diverged run is marked where its loss blew up."""
    fig = go.Figure(layout=dict(title="Loss", xaxis_title="step", yaxis_title="cross-entropy loss"))
    steps, losses = [s for s, _ in run.losses], [loss for _, loss in run.losses]       # every step, so a blow-up shows
    fig.add_scatter(x=steps, y=losses, name="train", line_color=COLOURS[0],
                    hovertemplate="step %{x}: train loss %{y:.4f}<extra></extra>")
    fig.add_scatter(x=[e["step"] for e in run.evals], y=[e["val_loss"] for e in run.evals], name="validation",
                    mode="lines+markers", line_color=COLOURS[1],
                    hovertemplate="step %{x}: validation loss %{y:.4f}<extra></extra>")
    values = losses + [e["val_loss"] for e in run.evals]
    if run.divergence:
        values.append(_add_divergence(fig, run))
    if log_scale:
        fig.update_yaxes(type="log", **log_ticks(values))
    return style(fig, presenter, 320)


def loss_chart(run, log_scale: bool = False, presenter: bool = False) -> alt.LayerChart:
    """The live loss curve (training loss at every step, validation loss at each observation) as a Vega-Lite
    chart. Its spec stays the same from tick to tick and only its data grows, so Streamlit updates the chart in
    place: measured on a throwaway app, st.plotly_chart built charts at every tick where this builds none (its chart
    id hashes the whole figure; the step pages' keyed Plotly component avoids that too, and was built after this).
    A diverged run is drawn by loss_figure, once, with its blow-up marked."""
    rows = [("train", s, loss) for s, loss in run.losses] + [("validation", e["step"], e["val_loss"]) for e in run.evals]
    data = pd.DataFrame(rows, columns=["series", "step", "loss"])
    colour = alt.Color("series:N", title=None, scale=alt.Scale(domain=["train", "validation"], range=COLOURS[:2]),
                       legend=alt.Legend(orient="top"))
    y = alt.Y("loss:Q", title="cross-entropy loss", scale=alt.Scale(type="log" if log_scale else "linear"))
    tooltip = [alt.Tooltip("series:N"), alt.Tooltip("step:Q"), alt.Tooltip("loss:Q", format=".4f")]
    base = alt.Chart(data).encode(x=alt.X("step:Q", title="step"), y=y, color=colour, tooltip=tooltip)
    chart = alt.layer(base.mark_line(), base.mark_point(filled=True, size=40).transform_filter(
        alt.datum.series == "validation")).properties(title="Loss", height=int(320 * (1.15 if presenter else 1)))
    size = 20 if presenter else 13
    return chart.configure_axis(labelFontSize=size, titleFontSize=size).configure_title(fontSize=size + 2) \
        .configure_legend(labelFontSize=size)


def _add_divergence(fig: go.Figure, run) -> float:
    """A black cross at the step the loss blew up, and the limit it crossed; returns the cross's height."""
    where = run.divergence
    shown = f"{where.loss:,.1f}" if math.isfinite(where.loss) else "NaN (overflow)"
    last = run.losses[-1][1] if run.losses else where.limit
    y = min(where.loss, 2 * where.limit) if math.isfinite(where.loss) else max(last, where.limit)
    fig.add_scatter(x=[where.step], y=[y], name=f"diverged at step {where.step}", mode="markers+text",
                    marker=dict(symbol="x", size=16, color=DIVERGED), text=[f"diverged: loss {shown}"],
                    textposition="middle left", textfont_color=DIVERGED,
                    hovertemplate=f"step {where.step}: loss {shown}<extra>diverged</extra>")
    fig.add_hline(y=where.limit, line_dash="dot", line_color=DIVERGED,
                  annotation_text=f"limit: 5 × ln(vocabulary) = {where.limit:.1f}", annotation_position="top left")
    return y


def metrics_data(run) -> pd.DataFrame:
    """The live metrics in long form (panel, series, step, value): accuracy, learning rate, gradient norms."""
    rows = [("accuracy", "train accuracy", h["step"], h["accuracy"]) for h in run.history]
    rows += [("accuracy", "validation accuracy", e["step"], e["val_accuracy"]) for e in run.evals]
    rows += [("accuracy", "held-out exact match", e["step"], e["exact_match"]) for e in run.evals if "exact_match" in e]
    rows += [("learning rate", "learning rate", h["step"], h["lr"]) for h in run.history]
    rows += [("gradient norm per layer", k[5:], h["step"], h[k]) for h in run.history for k in h if k.startswith("grad ")]
    return pd.DataFrame(rows, columns=["panel", "series", "step", "value"])


def metrics_chart(run, presenter: bool = False) -> alt.HConcatChart:
    """Accuracy, learning rate and per-layer gradient norms (gradient flow) side by side, as Vega-Lite: the
    spec stays the same while the data grows, so the browser updates it in place (as loss_chart)."""
    base = alt.Chart(metrics_data(run)).mark_line(point=alt.OverlayMarkDef(size=12)).encode(
        x=alt.X("step:Q", title="step"),
        color=alt.Color("series:N", title=None, legend=alt.Legend(orient="bottom", columns=3)),
        tooltip=[alt.Tooltip("series:N"), alt.Tooltip("step:Q"), alt.Tooltip("value:Q", format=".4g")])
    height = int(220 * (1.3 if presenter else 1))

    def panel(name: str, log: bool = False):
        y = alt.Y("value:Q", title=name, scale=alt.Scale(type="log") if log else alt.Undefined)
        return base.encode(y=y).transform_filter(alt.datum.panel == name).properties(height=height, width=170)

    size = 20 if presenter else 12
    return alt.hconcat(panel("accuracy"), panel("learning rate"), panel("gradient norm per layer", log=True)) \
        .resolve_scale(color="independent").properties(title="Accuracy, learning rate and gradient flow") \
        .configure_axis(labelFontSize=size, titleFontSize=size).configure_legend(labelFontSize=size)

def flow_figure(run, presenter: bool = False) -> go.Figure:
    """Gradient flow: the mean and the largest absolute gradient of every parameter at the last step, as bars on
    a log scale (embeddings first, the unembedding last): a layer whose gradients vanish learns nothing."""
    names = list(run.flow)
    fig = go.Figure([go.Bar(x=names, y=[run.flow[n][i] for n in names], name=label, marker_color=colour,
                            hovertemplate="%{x}<br>" + label + " %{y:.3e}<extra></extra>")
                     for i, (label, colour) in enumerate([("mean |gradient|", COLOURS[3]),
                                                          ("largest |gradient|", COLOURS[1])])])
    fig.update_yaxes(type="log", title="|gradient|")
    fig.update_xaxes(tickangle=-60, tickfont=dict(size=9 if not presenter else 13))
    fig.update_layout(title=f"Gradient flow at step {run.steps_done}: every parameter's gradients", barmode="group",
                      legend=dict(orientation="h", y=1.02, yanchor="bottom"))
    return style(fig, presenter, 420)


def same_task_runs(runs, active) -> list:
    """The runs trained on the active run's task: losses of different tasks cannot be compared."""
    return [run for run in runs if run.setup.task == active.setup.task]


COMPARE_WINDOW = 10          # the compare chart's points: the mean training loss over each 10 steps, for every run


def loss_means(run, window: int = COMPARE_WINDOW) -> list[tuple[int, int, float]]:
    """(first step, last step, mean training loss) over steps 1-10, 11-20, ... of a run (the last block may be
    shorter). Computed from every step's loss, so it is the same however the run's ticks were cut."""
    blocks: dict[int, list[tuple[int, float]]] = {}
    for step, loss in run.losses:
        blocks.setdefault((step - 1) // window, []).append((step, loss))
    return [(rows[0][0], rows[-1][0], sum(loss for _, loss in rows) / len(rows)) for _, rows in sorted(blocks.items())]


def compare_figure(runs, describe, settings, presenter: bool = False, window: int = COMPARE_WINDOW) -> go.Figure:
    """Loss curves of runs of one task, each point the mean training loss over `window` steps for every run alike;
    the legend says what differs from the first, the hover every setting."""
    fig = go.Figure(layout=dict(title=f"Compare runs: training loss, mean of every {window} steps",
                                xaxis_title="step", yaxis_title=f"training loss (mean over {window} steps)",
                                yaxis_type="log", legend=dict(orientation="h", y=-0.3)))
    first, shown = runs[0], []
    for run, colour in zip(runs, COLOURS):
        differs = "reference" if run is first else describe(run.setup, first.setup)
        if len(differs) > 40:
            differs = differs[:38].rsplit(",", 1)[0] + ", …"
        words = settings(run.setup)
        details = "<br>".join(safe(", ".join(words[i:i + 5])) for i in range(0, len(words), 5))
        means = loss_means(run, window)
        shown += [mean for *_, mean in means]
        fig.add_scatter(x=[last for _, last, _ in means], y=[mean for *_, mean in means],
                        customdata=[[first_step] for first_step, _, _ in means],
                        name=safe(f"{run.label}: {differs}"), line_color=colour,
                        hovertemplate="steps %{customdata[0]}-%{x}: mean loss %{y:.4f}<br>" + details
                                      + "<extra>" + safe(run.label) + "</extra>")
    fig.update_yaxes(**log_ticks(shown))
    return style(fig, presenter, 340)


def length_figure(results, trained: tuple[int, int], done: str = "sorted", presenter: bool = False) -> go.Figure:
    """Exact match by list length (explorer.lab.training.LengthResult): bars for the lengths the model trained on and
    for those it never saw, the trained lengths shaded."""
    lo, hi = trained
    fig = go.Figure(layout=dict(title="Exact match by list length", xaxis_title="digits in the list",
                                yaxis_title=f"lists {done} exactly right (%)"))
    fig.add_vrect(x0=lo - 0.5, x1=hi + 0.5, fillcolor="#DDDDDD", opacity=0.5, line_width=0, layer="below",
                  annotation_text=f"trained on {lo} to {hi} digits", annotation_position="top")
    for name, inside, colour in (("lengths it trained on", True, COLOURS[3]),
                                 ("lengths it never saw", False, COLOURS[1])):
        rows = [r for r in results if (lo <= r.length <= hi) == inside]
        fig.add_bar(x=[r.length for r in rows], y=[100 * r.exact for r in rows], name=name, marker_color=colour,
                    text=[r.percent for r in rows], textposition="outside", cliponaxis=False,
                    customdata=[[r.right, r.lists] for r in rows],
                    hovertemplate="%{x} digits: %{customdata[0]} of %{customdata[1]} new lists exactly right "
                                  "(%{text})<extra></extra>")
    fig.update_xaxes(dtick=1, range=[0.5, max((r.length for r in results), default=hi) + 0.5])
    fig.update_yaxes(range=[0, 125], tickvals=[0, 20, 40, 60, 80, 100])   # room above the bars' labels for the shade's
    fig.update_layout(legend=dict(orientation="h", y=-0.25), bargap=0.15)
    return style(fig, presenter, 340)


def snapshot_chart(run, index: int, layer: int, head: int, presenter: bool = False) -> alt.Chart:
    """The probe's attention in one layer and head at a saved snapshot, as a Vega-Lite heatmap with a fixed title
    (the step and head go in the caption), so a new snapshot only swaps the chart's data and the browser updates it
    in place."""
    step, patterns = run.snapshots[index]
    vocab = run.tokenizer.vocab
    cols = labels([vocab[i] for i in run.probe_ids])
    rows = labels([vocab[i] for i in run.probe_target] + ["<eos>"]) if run.encoder_decoder else cols
    weights = patterns[layer, head]                                                  # (rows, cols)
    causal = not run.encoder_decoder                      # a language model's later tokens are masked
    data = pd.DataFrame([(r, c, row, col, float(weights[r, c]), causal and c > r) for r, row in enumerate(rows)
                         for c, col in enumerate(cols)], columns=["r", "c", "row", "column", "weight", "masked"])
    title = "Cross-attention snapshot" if run.encoder_decoder else "Attention snapshot"
    size = 20 if presenter else 13
    return alt.Chart(data, title=title, height=int(300 * (1.3 if presenter else 1))).mark_rect().encode(
        x=alt.X("column:O", sort=alt.EncodingSortField("c"), title="reading (source)" if run.encoder_decoder else "key"),
        y=alt.Y("row:O", sort=alt.EncodingSortField("r"), title="writing" if run.encoder_decoder else "query"),
        color=alt.condition(alt.datum.masked, alt.value(MASKED),         # the grey of every masked cell
                            alt.Color("weight:Q", scale=alt.Scale(scheme="viridis", domain=[0, 1]))),
        tooltip=[alt.Tooltip("row:O", title="query"), alt.Tooltip("column:O", title="key"),
                 alt.Tooltip("weight:Q", format=".4f")],
    ).configure_axis(labelFontSize=size, titleFontSize=size).configure_title(fontSize=size + 2)


def snapshot_caption(run, index: int, layer: int, head: int) -> str:
    step = run.snapshots[index][0]
    what = "cross-attention" if run.encoder_decoder else "attention"
    return f"The probe's {what} in layer {layer}, head {head}, at step {step}. Hover for the exact weight."
