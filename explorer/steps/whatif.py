"""'What if' experiments: run the same sentence with one part of the model changed, and compare.

An experiment is a small frozen dataclass: what a button calls it, what a legend calls it, and the edits
that carry it out (model/edits.py). Two experiments are equal when they change the same thing, so an
experiment is also the cache key of its trace (explorer/app/cache.py).

    knock_out_head(layer, head)   skip_mlp(layer)   REMOVE_POSITIONS   REMOVE_SCALING   LIFT_MASK   BAG_OF_WORDS

A page's first what-if is chosen so that it shows something: `search` runs a family of experiments (every
head knocked out, every layer's feed-forward skipped) and measures how much each moves every forecast of the
sentence, and the words below say plainly when even the best of them changes little (`size_words`,
`search_notes`).
"""
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from model import edits as model_edits
from model.config import ModelConfig

from explorer import memo
from explorer.plot import style, token_label
from explorer.view import View, quote


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
                      lambda cfg: model_edits.knock_out_head(layer, head))


def skip_mlp(layer: int) -> Experiment:
    return Experiment("skip_mlp", f"Skip the feed-forward of layer {layer}", f"feed-forward of layer {layer} skipped",
                      f"With the feed-forward of layer {layer} skipped", lambda cfg: model_edits.skip_mlp(layer))


REMOVE_POSITIONS = Experiment("remove_positions", "Remove the positional encoding", "positional encoding removed",
                              "With the positional encoding removed", model_edits.remove_positions)
REMOVE_SCALING = Experiment("remove_scaling", "Remove the √K scaling", "without the 1/√K scaling",
                            "Without the division by √K", model_edits.remove_scaling)
LIFT_MASK = Experiment("lift_mask", "Lift the causal mask", "causal mask lifted", "With the causal mask lifted",
                       causal=False)
BAG_OF_WORDS = Experiment("bag_of_words", "Remove positions and lift the mask", "positions removed and mask lifted",
                          "With positions removed and the mask lifted", model_edits.remove_positions,
                          causal=False)


def experiment_trace(view: View, experiment: Experiment, ids: list[int] | None = None):
    """The trace of the view's sentence (or `ids`) with `experiment` applied, computed once per server."""
    return memo.trace(view, experiment, ids)


def next_token_change(view: View, before, after, k: int = 6, position: int = -1) -> pd.DataFrame:
    """The tokens most likely before or after the change at `position`, with both probabilities."""
    p_before = torch.softmax(before["logits"][0, position], -1)                  # (V,)
    p_after = torch.softmax(after["logits"][0, position], -1)                    # (V,)
    either = torch.cat([p_before.topk(k).indices, p_after.topk(k).indices]).unique()   # (<= 2k,)
    top = either[p_before[either].argsort(descending=True, stable=True)]         # most likely before first
    vocab = view.bundle.tokenizer.vocab
    before_p, after_p = p_before[top].tolist(), p_after[top].tolist()
    return pd.DataFrame({"token": [vocab[i] for i in top.tolist()], "before": before_p, "after": after_p,
                         "change": (p_after[top] - p_before[top]).tolist()})


CHANGE_HEIGHT = 380                 # the before-and-after chart's height (px)


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
    return style(fig, presenter, CHANGE_HEIGHT)


# --- how much an experiment changes, and which one changes most ----------------------------------------------

VISIBLE = 0.05      # a change of a probability a student can see on the bars' 0-to-1 scale: 5 points


def changes(before, after) -> np.ndarray:
    """The largest change of any token's probability in the forecast after each position: (T,)."""
    p_before = torch.softmax(before["logits"][0].double(), -1)                   # (T, V)
    p_after = torch.softmax(after["logits"][0].double(), -1)                     # (T, V)
    return (p_after - p_before).abs().amax(-1).numpy()


@dataclass(frozen=True)
class Search:
    """What each experiment of a family does to every forecast of one sentence: `changes[e, t]` is the largest
    change of any token's probability after position t with experiment e applied."""
    experiments: tuple[Experiment, ...]
    changes: np.ndarray                 # (E, T)

    def change(self, experiment: Experiment, position: int) -> float:
        return float(self.changes[self.experiments.index(experiment), position])

    def best(self, position: int) -> tuple[Experiment, float]:
        """The experiment that changes the forecast after `position` most, and by how much."""
        e = int(self.changes[:, position].argmax())
        return self.experiments[e], float(self.changes[e, position])

    def best_anywhere(self) -> tuple[Experiment, int, float]:
        """The experiment and position of the largest change in the whole sentence."""
        e, position = np.unravel_index(int(self.changes.argmax()), self.changes.shape)
        return self.experiments[e], int(position), float(self.changes[e, position])


def search(view: View, trace, experiments: list[Experiment]) -> Search:
    """Run the view's sentence once per experiment, keeping only the logits, and compare every forecast with
    `trace`'s (one run each: the numbers are those the experiment's own trace gives)."""
    model = view.bundle.model
    ids = list(view.ids)
    rows = [changes(trace, model.run(ids, edits=e.edits(model.cfg), causal=e.causal, names=["logits"]))
            for e in experiments]
    return Search(tuple(experiments), np.stack(rows))


def most_that_shows(search: Search, position: int) -> Experiment | None:
    """The experiment of the family that changes the forecast after `position` most, if it changes it visibly."""
    best, largest = search.best(position)
    return best if largest >= VISIBLE else None


def default_choice(search: Search, chosen: Experiment, position: int) -> str:
    """The what-if a page opens on: the student's own ("chosen"), unless it changes the forecast after `position`
    little and another of the family changes it visibly ("most"). When none does, the student's own stays, and
    the page says that no single one matters here (`search_notes`)."""
    most = most_that_shows(search, position)
    return "most" if search.change(chosen, position) < VISIBLE and most not in (None, chosen) else "chosen"


def at_most(largest: float) -> str:
    """A bound on a change under VISIBLE, never a bare 0.00: "by more than **0.004**" (rounded up, so that it is
    a bound: 0.0031 is said as 0.004), or "by as much as **0.001**" for less than 0.0005."""
    return f"by more than **{math.ceil(largest * 1000) / 1000:.3f}**" if largest >= 0.0005 else "by as much as **0.001**"


LITTLE = "That changes little"       # the words that start `size_words` for a change under VISIBLE


def size_words(largest: float) -> str:
    """The largest change of any word's probability, in a sentence that says plainly when it is small."""
    if largest >= VISIBLE:
        return f"The largest change of any word's probability is **{largest:.2f}**."
    return f"{LITTLE}: no word's probability moves {at_most(largest)}."


@dataclass(frozen=True)
class Family:
    """How a page's words name one experiment of its search family and the family itself."""
    kind: str                            # "head"
    verb: str                            # "knocking out"
    members: str                         # "all 8 heads"
    name: Callable[[Experiment], str]    # knock_out_head(1, 3) -> "head 3 of layer 1"


def search_notes(tokens: list[str], search: Search, family: Family, shown: Experiment, position: int,
                 shown_changes: np.ndarray) -> tuple[str, int | None]:
    """What the search found, in words, for the what-if `shown` on the forecast after `position`, and the
    position to look at instead when `shown` changes this forecast little (None: nowhere better).

    `shown_changes` is `changes(before, after)` of `shown` (T,), for an experiment outside the family.
    """
    def after(p: int) -> str:
        return f"the forecast after {quote(tokens[p])} (position {p})"
    lines = []
    if shown in search.experiments:
        best, largest = search.best(position)
        if largest < VISIBLE:
            lines.append(f"No single {family.kind} decides {after(position)}: {family.verb} any one of "
                         f"{family.members} moves no word's probability {at_most(largest)}.")
        elif best != shown:          # a visible change here, with another member: the page offers it as a choice
            return (f"Of {family.members}, {family.verb} {family.name(best)} changes this forecast most: by "
                    f"**{largest:.2f}**."), None
    if float(shown_changes[position]) >= VISIBLE:
        return " ".join(lines), None
    if shown in search.experiments:
        best, where, largest = search.best_anywhere()
        if largest >= VISIBLE:
            lines.append(f"{family.verb.capitalize()} one {family.kind} matters more for other words of this "
                         f"sentence: {family.verb} {family.name(best)} changes {after(where)} by **{largest:.2f}**.")
            return " ".join(lines), where
        lines.append(f"In this sentence, {family.verb} any one of {family.members} moves no forecast "
                     f"{at_most(largest)}.")
        return " ".join(lines), None
    where = int(shown_changes.argmax())
    largest = float(shown_changes[where])
    if largest >= VISIBLE:
        lines.append(f"{shown.changed}, the forecast that changes most is {after(where)}: by **{largest:.2f}**.")
        return " ".join(lines), where
    lines.append(f"{shown.changed}, no forecast of this sentence moves {at_most(largest)}.")
    return " ".join(lines), None
