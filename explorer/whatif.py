"""'What if' experiments: run the same sentence with one part of the model changed, and compare.

An experiment is a small hashable tuple, so its trace can be cached like the plain one:
    ("knock_out_head", layer, head)   ("remove_positions",)   ("skip_mlp", layer)
    ("remove_scaling",)               ("lift_mask",)
    ("bag_of_words",)                 positions removed and mask lifted: attention sees a bag of words
"""
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
import torch

from model import edits
from model.checkpoint import BUNDLED
from model.config import ModelConfig
from model.transformer import Trace

from .plot import style, token_label
from .state import View, get_bundle

Experiment = tuple


def describe(experiment: Experiment) -> str:
    """The experiment in words, for captions and legends."""
    kind = experiment[0]
    if kind == "knock_out_head":
        return f"head {experiment[2]} of layer {experiment[1]} knocked out"
    if kind == "skip_mlp":
        return f"feed-forward of layer {experiment[1]} skipped"
    return {"remove_positions": "positional encoding removed", "remove_scaling": "without the 1/√K scaling",
            "lift_mask": "causal mask lifted", "bag_of_words": "positions removed and mask lifted"}[kind]


def edits_for(cfg: ModelConfig, experiment: Experiment) -> tuple[dict, bool]:
    """(edits, causal) that carry out `experiment` on a model with config `cfg`."""
    kind = experiment[0]
    if kind == "knock_out_head":
        return edits.knock_out_head(experiment[1], experiment[2]), True
    if kind == "skip_mlp":
        return edits.skip_mlp(experiment[1]), True
    if kind == "remove_positions":
        return edits.remove_positions(), True
    if kind == "remove_scaling":
        return edits.remove_scaling(cfg), True
    if kind == "lift_mask":
        return {}, False
    if kind == "bag_of_words":
        return edits.remove_positions(), False
    raise ValueError(f"unknown experiment {experiment!r}")


@st.cache_resource(max_entries=64, show_spinner=False)
def _bundled_experiment(name: str, ids: tuple[int, ...], experiment: Experiment) -> Trace:
    return _run(name, ids, experiment)


def _run(name: str, ids, experiment: Experiment) -> Trace:
    model = get_bundle(name).model
    changes, causal = edits_for(model.cfg, experiment)
    return model.run(list(ids), edits=changes, causal=causal)


def experiment_trace(view: View, experiment: Experiment, ids: list[int] | None = None) -> Trace:
    """The trace of the view's sentence (or `ids`) with `experiment` applied; cached for bundled models."""
    ids = view.prepared.ids if ids is None else ids
    if view.name in BUNDLED:
        return _bundled_experiment(view.name, tuple(ids), experiment)
    return _run(view.name, ids, experiment)


def next_token_change(view: View, before: Trace, after: Trace, k: int = 6, position: int = -1) -> pd.DataFrame:
    """The tokens most likely before or after the change at `position`, with both probabilities."""
    p_before = torch.softmax(before["logits"][0, position], -1)                  # (V,)
    p_after = torch.softmax(after["logits"][0, position], -1)                    # (V,)
    top = sorted(set(p_before.topk(k).indices.tolist()) | set(p_after.topk(k).indices.tolist()),
                 key=lambda i: -float(p_before[i]))
    vocab = view.bundle.tokenizer.vocab
    return pd.DataFrame({"token": [vocab[i] for i in top],
                         "before": [float(p_before[i]) for i in top],
                         "after": [float(p_after[i]) for i in top],
                         "change": [float(p_after[i] - p_before[i]) for i in top]})


def change_figure(table: pd.DataFrame, experiment: Experiment, presenter: bool = False) -> go.Figure:
    """Grouped bars: next-token probabilities as the model is, and with the experiment applied."""
    tokens = [token_label(t) for t in table["token"]]
    fig = go.Figure([
        go.Bar(name="the model as it is", x=tokens, y=table["before"], marker_color="#4477AA",
               hovertemplate="%{x}: %{y:.4f}<extra>as it is</extra>"),
        go.Bar(name=describe(experiment), x=tokens, y=table["after"], marker_color="#EE6677",
               hovertemplate="%{x}: %{y:.4f}<extra>" + describe(experiment) + "</extra>"),
    ], layout=dict(title="Next-token probabilities: before and after", barmode="group",
                   yaxis=dict(title="probability", range=[0, 1]), legend=dict(orientation="h", y=-0.25)))
    return style(fig, presenter, 380)
