"""Dictionary features: a feature's card (what it fires on over the model's own text, how often, what it writes, where
it fires on the student's sentence) and the lab's live curves of a dictionary in training.

Every builder is a plain function of the view (no Streamlit calls). The model side is model/sae.py (the sparse
autoencoder) and model/dictionary.py (the one pass over a text, what a feature writes). A feature is named by its
number only: the card shows what it fires on and what it writes, never a description that was not computed.

    Dictionary(key, name, sae, source)           a dictionary a page reads; `place_layer`, `place_words`: where it reads
    sentence_features / busiest_feature          its features on the sentence, from the view's trace
    sentence_table / sentence_figure / sentence_words      the tokens x features view of the sentence
    feature_index(view, chosen, text, progress)  the one pass over the model's own text (once per model and dictionary)
    contexts_table / contexts_figure / contexts_words       its strongest contexts, each token shaded
    density_figure / density_words               how often it fires, among all the dictionary's features
    output_tokens / output_figure / output_words the tokens its decoder row pushes up and down
    steering_direction(view, chosen, feature)    its decoder row, to steer with (explorer/steps/features.py)
    training_figure / training_words             the lab's four live curves of a dictionary in training
"""
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from explorer import memo
from explorer.lab.figures import log_ticks
from explorer.numbers import percent
from explorer.plot import SEQUENTIAL, for_a_phone, labels, safe, style
from explorer.steps import features
from explorer.view import View, quote
from model import dictionary as model_dictionary
from model import neurons
from model.dictionary import HISTOGRAM_EDGES, FeatureIndex
from model.neurons import OwnText
from model.sae import SAE, SAEMetrics

SENTENCE_FEATURES = {"phone": 6, "presenter": 8}     # feature columns of the sentence's heatmap (else 10)
LOG_FLOOR = 1e-7                                    # a density drawn on a log axis, at least (0 is "never fires")


@dataclass(frozen=True)
class Dictionary:
    """A dictionary a page reads: `key` names it uniquely (what caches compare: one key per SAE object), `name` on the
    page, the SAE, and one sentence saying where it comes from."""
    key: str
    name: str
    sae: SAE = field(compare=False, repr=False)
    source: str = ""
    pinned: str = ""             # a dictionary from the hub: its repository, revision and files (what the app's
                                 # kept files are named by); "" for one of this session's


def place_layer(sae: SAE) -> int | None:
    """The page's layer whose stream the dictionary reads, "after block L": blocks.L.resid_post is L, and so is
    blocks.{L+1}.resid_pre (the same stream); another value of block L (attention's or the MLP's) is L; the
    embeddings or the final norm, None."""
    match = re.fullmatch(r"blocks\.(\d+)\.(.+)", sae.trace_name)
    if not match:
        return None
    layer = int(match.group(1))
    return layer - 1 if match.group(2) == "resid_pre" else layer


def place_words(sae: SAE) -> str:
    """Where the dictionary reads, in words: "the residual stream after block 1 (trace name blocks.1.resid_post)"."""
    name, layer = sae.trace_name, place_layer(sae)
    if name == "blocks.0.resid_pre":
        where = "the residual stream entering block 0 (the embeddings)"
    elif name.endswith(("resid_pre", "resid_post")):
        where = f"the residual stream after block {layer}"
    else:
        where = f"block {layer}'s {name.split('.', 2)[2]}" if layer is not None else name
    return f"{where} (trace name {name})"


def steers(view: View, sae: SAE) -> bool:
    """Whether a feature's decoder row can steer the view's model: the dictionary reads its residual stream after a
    block (the place steering adds to)."""
    name = sae.trace_name
    return (name.endswith(("resid_pre", "resid_post")) and name != "blocks.0.resid_pre"
            and sae.cfg.d_in == view.bundle.model.cfg.d_model)


def _screen(view: View) -> str:
    return "phone" if view.phone else "presenter" if view.presenter else "desktop"


def check_feature(sae: SAE, feature) -> int:
    """The feature's number, or a ValueError in words."""
    if isinstance(feature, bool) or not isinstance(feature, int) or not 0 <= feature < sae.cfg.d_sae:
        raise ValueError(f"there is no feature {feature!r}: this dictionary's features are 0 to {sae.cfg.d_sae - 1:,}")
    return feature


# --------------------------------------------------------------------------------------------------
# On the student's sentence
# --------------------------------------------------------------------------------------------------

@torch.no_grad()
def sentence_features(view: View, sae: SAE) -> torch.Tensor:
    """(T, d_sae): every feature at each token of the view's sentence, encoded from its trace."""
    return sae.encode(sae.read(view.trace))[0]


def busiest_feature(view: View, sae: SAE) -> int:
    """The feature that fires most on the sentence's last token (on the whole sentence, if none fires there)."""
    acts = sentence_features(view, sae)                                              # (T, d_sae)
    last = acts[-1]
    return int(last.argmax()) if float(last.max()) > 0 else int(acts.amax(0).argmax())


def sentence_table(view: View, sae: SAE, chosen: int | None = None, n: int | None = None) -> pd.DataFrame:
    """The features that fire most on the sentence (largest activation at any token, at most `n`, by the screen), as
    columns "feature 12", one row per token; features that never fire on it are left out, but the `chosen` one is
    always there (last, in place of the n-th, when it is not among them)."""
    n = n or SENTENCE_FEATURES.get(_screen(view), 10)
    acts = sentence_features(view, sae)                                              # (T, d_sae)
    peak = acts.amax(0)                                                              # (d_sae,)
    top = [int(f) for f in peak.topk(min(n, len(peak))).indices if float(peak[f]) > 0]
    if chosen is not None and chosen not in top:
        top = top[:n - 1] + [check_feature(sae, chosen)]
    return pd.DataFrame({f"feature {f}": acts[:, f].tolist() for f in top},
                        index=pd.Index(view.tokens, name="token"))


def sentence_figure(view: View, table: pd.DataFrame, chosen_feature: int | None = None) -> go.Figure:
    """Tokens (rows) x the features that fire most on the sentence (columns), each cell the feature's activation at
    that token (Viridis from 0); the chosen feature's column outlined."""
    z = table.to_numpy(dtype=float) if len(table.columns) else np.zeros((len(table), 0))
    rows, cols = labels(view.tokens), [c.removeprefix("feature ") for c in table.columns]
    height = max(260, 28 * len(rows) + 150)
    fig = go.Figure(go.Heatmap(
        z=z, x=list(range(len(cols))), y=list(range(len(rows))), colorscale=SEQUENTIAL, zmin=0.0,
        zmax=float(z.max()) if z.size else 1.0, xgap=1, ygap=1,
        customdata=np.dstack([np.repeat(np.array([safe(r) for r in rows], dtype=object)[:, None], len(cols), 1),
                              np.repeat(np.array(cols, dtype=object)[None, :], len(rows), 0)]) if z.size else None,
        hovertemplate="token %{customdata[0]}<br>feature %{customdata[1]}<br>activation %{z:.4f}<extra></extra>",
        colorbar=features._colourbar("activation", view.phone)))
    if chosen_feature is not None and f"feature {chosen_feature}" in table.columns:
        i = list(table.columns).index(f"feature {chosen_feature}")
        fig.add_shape(type="rect", x0=i - 0.5, x1=i + 0.5, y0=-0.5, y1=len(rows) - 0.5, line=dict(width=3,
                      color="#EE6677"))
    fig.update_xaxes(tickvals=list(range(len(cols))), ticktext=cols, title="feature", side="bottom", showgrid=False)
    fig.update_yaxes(tickvals=list(range(len(rows))), ticktext=[safe(r) for r in rows], title="token",
                     autorange="reversed", showgrid=False)
    fig.update_layout(title="Features on your sentence" if view.phone else
                      "The features that fire most on your sentence, token by token", plot_bgcolor="rgba(0,0,0,0)")
    fig = style(fig, view.presenter, height + (50 if view.phone else 0))        # a phone's colour bar: under it
    return features._phone_layout(fig) if view.phone else fig


def sentence_words(view: View, sae: SAE) -> str:
    """How many features fire at each token, on average, and the strongest one (Markdown)."""
    acts = sentence_features(view, sae)                                              # (T, d_sae)
    firing = (acts > 0).sum(-1).float()                                              # (T,)
    if float(acts.max()) <= 0:
        return f"None of the dictionary's {sae.cfg.d_sae:,} features fires on your sentence."
    t, f = np.unravel_index(int(acts.argmax()), tuple(acts.shape))
    return (f"Of the dictionary's {sae.cfg.d_sae:,} features, {float(firing.mean()):.1f} fire at each token of your "
            f"sentence on average (from {int(firing.min())} to {int(firing.max())}). The strongest is feature {f}, "
            f"at {float(acts[t, f]):.2f} on {quote(view.tokens[t])} (token {t}).")


# --------------------------------------------------------------------------------------------------
# Over the model's own text: the one pass
# --------------------------------------------------------------------------------------------------

def feature_index(view: View, chosen: Dictionary, text: OwnText, progress=None,
                  kept: Path | None = None) -> FeatureIndex:
    """Every feature's strongest activations, how often it fires and how strongly, over `text`, from one pass (once
    per model, dictionary and text in the app; `progress(windows done, windows)` while it runs). GPT-2's pass takes
    over a minute on one core, so the app keeps a pinned dictionary's in file `kept` (as the neurons' pass)."""
    bundle, sae = view.bundle, chosen.sae

    def pass_over_text(model, text_name: str, dictionary_key: str, kept: Path | None,
                       progress=None) -> FeatureIndex:
        return features.kept_on_disk(kept, model_dictionary.load_feature_index,
                                     lambda index: index.fired.shape == (sae.cfg.d_sae,),
                                     lambda: model_dictionary.index_features(model, sae, neurons.text_ids(bundle, text),
                                                                             neurons.window_prefix(bundle),
                                                                             progress=progress))
    return memo.per_input(pass_over_text, view, text.name, chosen.key, kept, progress=progress)


def contexts_table(view: View, index: FeatureIndex, feature: int, n: int | None = None) -> pd.DataFrame:
    """The feature's `n` strongest contexts (by default as many as the view's screen shows), strongest first, in the
    columns of features.contexts_table: each context's tokens, the activation at each (for shading), its peak, value
    and repeats."""
    vocab = view.bundle.tokenizer.vocab
    n = n or features.contexts_shown(view)
    rows = []
    for rank, c in enumerate(index.contexts(feature, n), start=1):
        if c.value <= 0:                                 # a feature fires only above 0: the rest is no context
            break
        tokens = [vocab[i] for i in c.ids]
        marked = features._joined(view, tokens[:c.peak] + [f"«{tokens[c.peak]}»"] + tokens[c.peak + 1:])
        rows.append({"rank": rank, "activation": c.value, "token": tokens[c.peak], "context": marked,
                     "tokens": tokens, "activations": c.activations, "peak": c.peak, "repeats": c.repeats,
                     "position": c.position})
    return pd.DataFrame(rows, columns=["rank", "activation", "token", "context", "tokens", "activations", "peak",
                                       "repeats", "position"])


def contexts_figure(view: View, table: pd.DataFrame, text: OwnText, feature: int) -> go.Figure:
    """One row per context, its peak in one column, each token shaded by the feature's activation there (as a
    neuron's contexts are drawn: explorer/steps/features.py)."""
    fig = features.contexts_figure(view, table, text, 0, feature)
    scale = dict(colorscale=SEQUENTIAL, zmin=0.0, zmax=float(table.activation.max()) if len(table) else 1.0)
    fig.update_traces(**scale)                           # a feature is never below 0: Viridis from 0
    return fig.update_layout(title=f"Feature {feature}: its top contexts" if view.phone
                             else f"Where feature {feature} fires most in {safe(text.name)}")


def contexts_words(view: View, index: FeatureIndex, table: pd.DataFrame, text: OwnText, feature: int) -> str:
    """Where the feature fires most over the text, and on which tokens its strongest contexts peak (Markdown)."""
    name = text.name if text.name == "your text" else f"*{text.name}*"
    if table.empty:
        return f"Feature {feature} fires nowhere in {name} ({index.tokens:,} tokens): it is a dead feature there."
    top = table.iloc[0]
    said = (f"Over {name} ({index.tokens:,} tokens), feature {feature} fires most on {quote(top.token)}, at "
            f"{top.activation:.2f}, in {quote(top.context)}.")
    counts = table.groupby("token", sort=False)["repeats"].sum().sort_values(ascending=False, kind="stable")
    if len(counts) == 1:
        return said + f" All of its {int(counts.sum())} strongest places peak on {quote(top.token)}."
    named = [f"{quote(t)} ({n})" for t, n in counts.head(3).items()]
    more = f", and {len(counts) - 3} more" if len(counts) > 3 else ""
    return said + (f" Its {int(counts.sum())} strongest places peak on {len(counts)} different tokens: "
                   f"{', '.join(named[:-1])} and {named[-1]}{more}.")


# --------------------------------------------------------------------------------------------------
# How often it fires
# --------------------------------------------------------------------------------------------------

def density_figure(view: View, index: FeatureIndex, feature: int) -> go.Figure:
    """Two histograms (stacked on a phone): the feature's activations where it fires (tokens per bin, bins evenly
    spaced on a log axis), and the share of tokens every feature of the dictionary fires on (log axis), with this
    feature's marked."""
    density = index.density.numpy()                                                  # (d_sae,)
    counts = index.counts[feature].numpy()                                           # (bins,)
    edges = HISTOGRAM_EDGES.numpy()
    used = np.nonzero(counts)[0]
    phone = view.phone
    fig = make_subplots(rows=2 if phone else 1, cols=1 if phone else 2, vertical_spacing=0.28,
                        horizontal_spacing=0.1,
                        subplot_titles=(f"Feature {feature}: how strongly", "Every feature: how often"))
    if len(used):
        span = slice(used[0], used[-1] + 1)
        centres = np.sqrt(edges[:-1] * edges[1:])[span]
        fig.add_bar(x=centres, y=counts[span], width=(edges[1:] - edges[:-1])[span], marker_color=features.UP,
                    name=f"feature {feature}", customdata=np.stack([edges[:-1][span], edges[1:][span]], -1),
                    hovertemplate="activation %{customdata[0]:.3g} to %{customdata[1]:.3g}: %{y:,} tokens"
                                  "<extra></extra>", row=1, col=1)
    fig.update_xaxes(type="log", title="activation where it fires", row=1, col=1,
                     **log_ticks(edges[used[0]:used[-1] + 2] if len(used) else []))
    fig.update_yaxes(title="tokens", row=1, col=1)
    logs = np.log10(np.maximum(density, LOG_FLOOR))
    where = dict(row=2, col=1) if phone else dict(row=1, col=2)
    fig.add_histogram(x=logs[density > 0], xbins=dict(size=0.25), marker_color=features.DOWN, name="every feature",
                      hovertemplate="%{y:,} features<extra></extra>", **where)
    mine = float(np.log10(max(density[feature], LOG_FLOOR)))
    if density[feature] > 0:
        fig.add_vline(x=mine, line_color=features.UP, line_width=3, line_dash="dash", **where)
    ticks = [t for t in range(-7, 1) if logs[density > 0].size and
             logs[density > 0].min() - 1 <= t <= max(logs[density > 0].max(), mine) + 1]
    fig.update_xaxes(title="share of tokens it fires on (log scale)", tickvals=ticks,
                     ticktext=[f"{100 * 10.0 ** t:g}%" for t in ticks], **where)
    fig.update_yaxes(title="features", **where)
    fig.update_layout(showlegend=False, bargap=0.05,
                      title=f"How often feature {feature} fires" if phone else
                      f"How often feature {feature} fires: on {percent(float(density[feature]))} of the text's "
                      "tokens")
    fig = style(fig, view.presenter, 560 if phone else 340)
    fig.update_layout(margin_t=90 if view.presenter else 70)
    return for_a_phone(fig) if phone else fig


def density_words(index: FeatureIndex, feature: int, text: OwnText) -> str:
    """How often the feature fires, where that stands among the dictionary's features, and how many never fire."""
    density = index.density
    share, fired = float(density[feature]), int(index.fired[feature])
    dead = int((index.fired == 0).sum())
    rank = int((density > density[feature]).sum()) + 1
    name = text.name if text.name == "your text" else f"*{text.name}*"
    said = (f"Feature {feature} fires on {fired:,} of the {index.tokens:,} tokens of {name}: {percent(share)}."
            if fired else f"Feature {feature} never fires on the {index.tokens:,} tokens of {name}.")
    if fired:
        said += f" It is the {_ordinal(rank)} most frequent of the dictionary's {len(density):,} features."
    return said + (f" {dead:,} of them never fire on this text (dead features)." if dead else
                   " Every feature fires somewhere in this text.")


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n:,}{suffix}"


# --------------------------------------------------------------------------------------------------
# What it writes
# --------------------------------------------------------------------------------------------------

def output_tokens(view: View, sae: SAE, feature: int, k: int = features.OUTPUT_TOKENS) -> pd.DataFrame:
    """The k tokens whose scores one unit of the feature raises most and the k it lowers most, read straight through
    the final norm's scale and the unembedding (model/dictionary.py `feature_logits`); columns as
    features.output_tokens."""
    logits = model_dictionary.feature_logits(view.bundle.model, sae, check_feature(sae, feature))   # (V,)
    return features.pushed_tokens(view.bundle.tokenizer.vocab, logits, k)


def output_figure(view: View, table: pd.DataFrame, feature: int) -> go.Figure:
    """The tokens pushed up (red) and down (blue), as a neuron's are drawn (explorer/steps/features.py)."""
    fig = features.output_figure(view, table, 0, feature)
    return fig.update_layout(title=f"Feature {feature}: what it writes" if view.phone else
                             f"What feature {feature} writes: the tokens it pushes up and down")


def output_words(view: View, table: pd.DataFrame, feature: int) -> str:
    """The token each unit of the feature raises most and the one it lowers most (Markdown)."""
    up, down = table[table.pushes == "up"].iloc[0], table[table.pushes == "down"].iloc[0]
    through = ("the final norm's scale and the unembedding" if type(view.bundle.model.final_norm).__name__ in
               ("LayerNorm", "RMSNorm") else "the unembedding")
    return (f"Read straight through {through}, each unit of feature {feature} (its decoder row) raises the score of "
            f"{quote(up.token)} most ({features._signed(up['logit change'])}) and lowers {quote(down.token)} most "
            f"({features._signed(down['logit change'])}). Later blocks may change what it does; this is its direct "
            "path.")


def steering_direction(view: View, chosen: Dictionary, feature: int) -> features.FeatureDirection:
    """The feature's decoder row, to steer with, named by the dictionary and its number."""
    feature = check_feature(chosen.sae, feature)
    return features.FeatureDirection(f"{chosen.key}:{feature}", f"feature {feature} of {chosen.name}",
                                     chosen.sae.W_dec[feature].detach().clone())


# --------------------------------------------------------------------------------------------------
# The lab: a dictionary in training
# --------------------------------------------------------------------------------------------------

LAB_INTRO = """\
A **sparse autoencoder** learns a dictionary of directions in the residual stream after one block: many more
directions than the stream has numbers, of which only a few fire at each token. It reads the model's own text through
**{model}** up to that block, then learns to rebuild each token's stream from its few firing features. Watch four
numbers: the **reconstruction error** falls, **L0** (how many features fire per token) stays small, the **explained
variance** climbs towards 1, and **dead features** (which never fire) stay few. Then read what each feature fires on,
on the Features page.
"""

CURVE_POINTS = 300                                   # the most steps a live curve draws
CURVES = (("mse", "reconstruction error (MSE)"), ("l0", "L0: features firing per token"),
          ("explained_variance", "explained variance"), ("dead", "dead features (share)"))


def curve_steps(history: list[SAEMetrics], most: int = CURVE_POINTS) -> list[SAEMetrics]:
    """The steps a curve draws: every one up to `most`, then evenly thinned, the last always kept (a redraw of 1,500
    steps at every tick costs the browser more than the training costs the server)."""
    every = max(1, math.ceil(len(history) / most))
    shown = history[::every]
    return shown + history[-1:] if history and shown[-1] is not history[-1] else shown


def training_figure(history: list[SAEMetrics], presenter: bool = False, phone: bool = False) -> go.Figure:
    """The four live curves of a dictionary in training, step by step (`curve_steps`): reconstruction error, L0,
    explained variance and the share of dead features (four panels, two by two; one above another on a phone)."""
    rows, cols = (4, 1) if phone else (2, 2)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[title for _, title in CURVES],
                        vertical_spacing=0.12 if phone else 0.2, horizontal_spacing=0.12)
    history = curve_steps(history)
    steps = [m.step for m in history]
    for i, (name, title) in enumerate(CURVES):
        fig.add_scatter(x=steps, y=[getattr(m, name) for m in history], name=title, mode="lines",
                        line_color=features.DOWN if name != "dead" else features.UP,
                        hovertemplate=f"step %{{x}}: {title} %{{y:.4g}}<extra></extra>",
                        row=i // cols + 1, col=i % cols + 1)
    fig.update_xaxes(title="step")
    fig.update_yaxes(rangemode="tozero", row=rows, col=cols)     # dead features: a share, from 0
    fig.update_layout(showlegend=False, title="The dictionary learning")
    return style(fig, presenter, 900 if phone else 520)


def training_words(history: list[SAEMetrics]) -> str:
    """The last step's four numbers, in a sentence."""
    if not history:
        return "No step yet."
    m = history[-1]
    return (f"Step {m.step}: explained variance {m.explained_variance:.3f}, {m.l0:.1f} features firing per token (L0), "
            f"reconstruction error {m.mse:.4g}, {percent(m.dead)} of the features dead (none fired for a while).")
