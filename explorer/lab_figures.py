"""Figures for the training lab: plain functions of a run's history (Plotly: cheap to redraw live)."""
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .plot import heatmap, labels, safe, style

COLOURS = ["#4477AA", "#EE6677", "#228833", "#CCBB44", "#66CCEE", "#AA3377"]   # Paul Tol's colour-blind-safe set


def loss_figure(run, log_scale: bool = False, presenter: bool = False) -> go.Figure:
    """Training and validation loss against steps."""
    fig = go.Figure(layout=dict(title="Loss", xaxis_title="step", yaxis_title="cross-entropy loss"))
    steps = [h["step"] for h in run.history]
    fig.add_scatter(x=steps, y=[h["loss"] for h in run.history], name="train", line_color=COLOURS[0],
                    hovertemplate="step %{x}: train loss %{y:.4f}<extra></extra>")
    fig.add_scatter(x=[e["step"] for e in run.evals], y=[e["val_loss"] for e in run.evals], name="validation",
                    mode="lines+markers", line_color=COLOURS[1],
                    hovertemplate="step %{x}: validation loss %{y:.4f}<extra></extra>")
    if log_scale:
        fig.update_yaxes(type="log")
    return style(fig, presenter, 320)


def metrics_figure(run, presenter: bool = False) -> go.Figure:
    """Accuracy, learning rate and per-layer gradient norms (gradient flow) side by side."""
    fig = make_subplots(rows=1, cols=3, subplot_titles=("accuracy", "learning rate", "gradient norm per layer"))
    steps = [h["step"] for h in run.history]
    fig.add_scatter(x=steps, y=[h["accuracy"] for h in run.history], name="train accuracy", row=1, col=1,
                    line_color=COLOURS[0], hovertemplate="step %{x}: %{y:.3f}<extra>train accuracy</extra>")
    fig.add_scatter(x=[e["step"] for e in run.evals], y=[e["val_accuracy"] for e in run.evals], row=1, col=1,
                    name="validation accuracy", mode="lines+markers", line_color=COLOURS[1],
                    hovertemplate="step %{x}: %{y:.3f}<extra>validation accuracy</extra>")
    fig.add_scatter(x=steps, y=[h["lr"] for h in run.history], name="learning rate", row=1, col=2,
                    line_color=COLOURS[2], hovertemplate="step %{x}: %{y:.2e}<extra>learning rate</extra>")
    layers = [k for k in (run.history[0] if run.history else {}) if k.startswith("grad ")]
    for i, key in enumerate(layers):
        fig.add_scatter(x=steps, y=[h[key] for h in run.history], name=key[5:], row=1, col=3,
                        line_color=COLOURS[i % len(COLOURS)],
                        hovertemplate="step %{x}: %{y:.4f}<extra>" + key[5:] + "</extra>")
    fig.update_yaxes(type="log", row=1, col=3)
    fig.update_layout(title="Accuracy, learning rate and gradient flow", legend=dict(orientation="h", y=-0.3))
    return style(fig, presenter, 320)


def compare_figure(runs, describe, presenter: bool = False) -> go.Figure:
    """Loss curves of every kept run, labelled by what differs from the first."""
    fig = go.Figure(layout=dict(title="Compare runs: training loss", xaxis_title="step", yaxis_title="loss",
                                yaxis_type="log", legend=dict(orientation="h", y=-0.3)))
    for i, run in enumerate(runs):
        label = run.label if i == 0 else f"{run.label}: {describe(run.setup, runs[0].setup)}"
        fig.add_scatter(x=[h["step"] for h in run.history], y=[h["loss"] for h in run.history],
                        name=safe(label), line_color=COLOURS[i % len(COLOURS)],
                        hovertemplate="step %{x}: loss %{y:.4f}<extra>" + safe(run.label) + "</extra>")
    return style(fig, presenter, 340)


def snapshot_figure(run, index: int, layer: int, head: int, presenter: bool = False) -> go.Figure:
    """The probe sentence's attention pattern for one head, as it was at snapshot `index`."""
    step, patterns = run.snapshots[index]
    vocab = run.tokenizer.vocab
    tokens = labels([vocab[i] for i in run.probe_ids])
    return heatmap(patterns[layer, head], tokens, tokens, title=f"Attention of layer {layer} head {head} at step {step}",
                   row_title="query", col_title="key", value_name="weight", signed=False, zmin=0, zmax=1,
                   presenter=presenter)
