"""'What if' experiments: run the same sentence with one part of the model changed, and compare.

An experiment is a small frozen dataclass: what a button calls it, what a legend calls it, and the edits
that carry it out (model/edits.py). Two experiments are equal when they change the same thing, so an
experiment is also the cache key of its trace (explorer/cache.py).

    knock_out_head(layer, head)   skip_mlp(layer)   REMOVE_POSITIONS   REMOVE_SCALING   LIFT_MASK   BAG_OF_WORDS
"""
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd
import plotly.graph_objects as go
import torch

from model import edits as E
from model.config import ModelConfig

from . import cache
from .plot import style, token_label
from .view import View


def _no_edits(cfg: ModelConfig) -> dict:
    return {}


@dataclass(frozen=True)
class Experiment:
    """One change to the model, run on the same sentence and compared with the model as it is."""
    kind: str                   # "knock_out_head", "skip_mlp", "remove_positions", "remove_scaling", ...
    label: str                  # a choice's words: "Knock out head 1 of layer 0"
    description: str            # a legend's words: "head 1 of layer 0 knocked out"
    changed: str                # a sentence's start: "With head 1 of layer 0 knocked out"
    edits: Callable[[ModelConfig], dict] = field(default=_no_edits, compare=False, repr=False)
    causal: bool = True         # False lifts the causal mask


def knock_out_head(layer: int, head: int) -> Experiment:
    return Experiment("knock_out_head", f"Knock out head {head} of layer {layer}",
                      f"head {head} of layer {layer} knocked out", f"With head {head} of layer {layer} knocked out",
                      lambda cfg: E.knock_out_head(layer, head))


def skip_mlp(layer: int) -> Experiment:
    return Experiment("skip_mlp", f"Skip the feed-forward of layer {layer}", f"feed-forward of layer {layer} skipped",
                      f"With the feed-forward of layer {layer} skipped", lambda cfg: E.skip_mlp(layer))


REMOVE_POSITIONS = Experiment("remove_positions", "Remove the positional encoding", "positional encoding removed",
                              "With the positional encoding removed", lambda cfg: E.remove_positions())
REMOVE_SCALING = Experiment("remove_scaling", "Remove the √K scaling", "without the 1/√K scaling",
                            "Without the division by √K", E.remove_scaling)
LIFT_MASK = Experiment("lift_mask", "Lift the causal mask", "causal mask lifted", "With the causal mask lifted",
                       causal=False)
BAG_OF_WORDS = Experiment("bag_of_words", "Remove positions and lift the mask", "positions removed and mask lifted",
                          "With positions removed and the mask lifted", lambda cfg: E.remove_positions(),
                          causal=False)


def experiment_trace(view: View, experiment: Experiment, ids: list[int] | None = None):
    """The trace of the view's sentence (or `ids`) with `experiment` applied, computed once per server."""
    return cache.trace(view, experiment, ids)


def next_token_change(view: View, before, after, k: int = 6, position: int = -1) -> pd.DataFrame:
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
        go.Bar(name=experiment.description, x=tokens, y=table["after"], marker_color="#EE6677",
               hovertemplate="%{x}: %{y:.4f}<extra>" + experiment.description + "</extra>"),
    ], layout=dict(title="Next-token probabilities: before and after", barmode="group",
                   yaxis=dict(title="probability", range=[0, 1]), legend=dict(orientation="h", y=-0.25)))
    return style(fig, presenter, 380)
