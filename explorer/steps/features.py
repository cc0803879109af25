"""Features: what one feed-forward neuron responds to and writes, and steering the model with a direction.

Every builder is a plain function of the view (no Streamlit calls), so tests can call it. The model side is in
model/neurons.py (the text a model's neurons are read over, the one pass over it, what a neuron writes) and
model/steering.py (the steering edit, its directions, the two continuations). The trace names read here:
blocks.i.mlp.post [T, F] (a neuron's activation) and blocks.i.resid_post [T, D] (where steering adds its direction).

Neurons
    own_text(view, user_text)                     the text the model's neurons are read over, and where it comes from
    neuron_index(view, text, progress)            the one pass over it (once per model in the app)
    contexts_table / contexts_figure / contexts_sentence       its strongest contexts, each token shaded
    output_tokens / output_figure / output_sentence            the tokens its output pushes up and down
    sentence_activations / sentence_figure / fires_sentence    where it fires on the student's sentence
    busiest_neuron(view, layer)                   the neuron that fires hardest on the sentence: one to open first

Steering
    neuron_source / difference_source / feature_source         a direction and how a sentence names it
    steer(view, source, layer, strength, n_tokens)             both continuations and the next token's shift
    continuation_table / continuation_figure / shift_table / shift_figure / steering_sentence
"""
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from explorer import memo
from explorer.numbers import percent, percents
from explorer.plot import SEQUENTIAL, for_a_phone, labels, safe, style, token_label
from explorer.steps.feedforward import activation_name, post_range
from explorer.view import View, quote, shorten
from model import neurons
from model.neurons import AFTER, BEFORE, NeuronIndex, OwnText, check_neuron, neuron_logits
from model.steering import (Shift, Steered, check_direction, difference_direction, neuron_direction,
                            next_token_shift, steered_continuation, steering_edit)

UP, DOWN = "#EE6677", "#4477AA"      # Paul Tol's red and blue: positive and negative, safe for colour-blind viewers
CONTEXTS = 10                        # contexts a page shows
OUTPUT_TOKENS = 10                   # tokens pushed up, and as many pushed down
STEER_TOKENS = 20                    # tokens written with and without steering
SHIFTS = 8                           # risers and fallers in the shift chart
AROUND = {"phone": (4, 1), "presenter": (6, 2)}   # tokens a context row shows before and after its peak, when
                                                 # not BEFORE and AFTER: a phone's and a projector's are shorter
CONTEXTS_SHOWN = {"presenter": 6}    # contexts a projector's first screen holds whole (else CONTEXTS)
STEPS_SHOWN = {"presenter": 10}      # written tokens the continuation chart shows on a projector (else all)
# The longest token text a heatmap's cell shows (a longer one is cut, "…" at its end), by screen (else 5): what a
# cell holds at that screen's width, since the chart leaves out every cell label of a heatmap whose longest label
# does not fit its cell (explorer/app/components/chart.js); hover shows each whole.
CONTEXT_CHARS = {"phone": 4, "presenter": 8}       # a context's token (16 columns on a desktop, 6 on a phone)
STEP_CHARS = {"phone": 10, "presenter": 6}         # a written token (20 columns; 10 on a projector, 2 on a phone)
BAR_ROOM = 105                       # px under a phone's heatmap: its x axis' labels and title, then its colour bar


def _colourbar(title: str, phone: bool) -> dict:
    """A heatmap's colour bar: beside it, or on a phone lying at the foot of the figure (in the BAR_ROOM px
    `_phone_layout` keeps there, under the x axis' labels and title)."""
    if not phone:
        return dict(title=dict(text=title))
    return dict(title=dict(text=title, side="right"), orientation="h", thickness=12, len=0.6, x=0.1, xanchor="left",
                yref="container", y=0, yanchor="bottom", ypad=8)


def _phone_layout(fig: go.Figure, room: int = BAR_ROOM) -> go.Figure:
    """A styled heatmap laid out for a phone: `room` px under its plot for the x axis and the colour bar."""
    return for_a_phone(fig.update_layout(margin_b=room))


def _vocab(view: View) -> list[str]:
    return view.bundle.tokenizer.vocab


def _joined(view: View, tokens: list[str]) -> str:
    """Token texts as the text they read: words with spaces between, byte-level tokens as they are."""
    return getattr(view.bundle.tokenizer, "separator", "").join(tokens)


def _screen(view: View) -> str:
    return "phone" if view.phone else "presenter" if view.presenter else "desktop"


def _short(token: str, view: View | None = None, chars: dict = CONTEXT_CHARS) -> str:
    """A token cut to fit a heatmap's cell on the view's screen (`chars`: the most characters, by screen)."""
    most = chars.get(_screen(view), 5) if view is not None else 5
    return token if len(token) <= most else token[:most - 1] + "…"


def _signed(x: float) -> str:
    """A number with its sign, a real minus sign for negatives: +0.84, −0.77."""
    return f"{x:+.2f}".replace("-", "−")


# --------------------------------------------------------------------------------------------------
# Neurons: the text they are read over, and the one pass over it
# --------------------------------------------------------------------------------------------------

def own_text(view: View, user_text: str | None = None) -> OwnText:
    """The text the view's model's neurons are read over (model/neurons.py `own_text`): its own training text, or the
    bundled English text for a model trained elsewhere. `user_text`: a lab model trained on your own text needs it
    (the lab keeps it in the session). Raises ValueError, in words, when there is none."""
    return neurons.own_text(view.bundle, user_text)


def neuron_index(view: View, text: OwnText, progress=None, kept: Path | None = None) -> NeuronIndex:
    """Every neuron's strongest activations over `text`, from one pass (once per model and text in the app;
    `progress(windows done, windows)` while it runs). The pass reads every window through every layer: for GPT-2
    small over the bundled English text it takes over a minute on one core, so the app keeps it in file `kept`
    (read back instead of reading the text again; a broken file is read again and replaced)."""
    bundle = view.bundle

    def pass_over_text(model, text_name: str, kept: Path | None, progress=None) -> NeuronIndex:
        return kept_on_disk(kept, neurons.load_index,
                            lambda index: tuple(index.values.shape[:2]) == (model.cfg.n_layers, model.cfg.d_ff),
                            lambda: neurons.index_neurons(model, neurons.text_ids(bundle, text),
                                                          neurons.window_prefix(bundle), progress=progress))
    return memo.per_input(pass_over_text, view, text.name, kept, progress=progress)


def kept_on_disk(kept: Path | None, load, fits, make):
    """What `make()` computes, kept in file `kept` (None: not kept): read back with `load(kept)` when the file is
    there and `fits` (else a broken, partly written or another model's file is made again and replaced); a
    read-only disk keeps it in memory only."""
    if kept is not None and kept.exists():
        try:
            value = load(kept)
            if fits(value):
                return value
        except Exception:                                    # a broken or partly written file: make it again
            pass
        kept.unlink(missing_ok=True)
    value = make()
    if kept is not None:
        try:
            kept.parent.mkdir(parents=True, exist_ok=True)
            value.save(kept)
        except OSError:                                      # a read-only disk: kept in memory only
            pass
    return value


# --------------------------------------------------------------------------------------------------
# A neuron's strongest contexts
# --------------------------------------------------------------------------------------------------

def contexts_table(view: View, index: NeuronIndex, layer: int, neuron: int, n: int | None = None) -> pd.DataFrame:
    """The neuron's `n` strongest contexts (by default as many as the view's screen shows), strongest first: each
    context's tokens, the activation at each (for shading), where the peak is, its value, and how many times the text
    repeats the context exactly."""
    check_neuron(view.bundle.model, layer, neuron)
    n = n or contexts_shown(view)
    vocab = _vocab(view)
    rows = []
    for rank, c in enumerate(index.contexts(layer, neuron, n), start=1):
        tokens = [vocab[i] for i in c.ids]
        marked = _joined(view, tokens[:c.peak] + [f"«{tokens[c.peak]}»"] + tokens[c.peak + 1:])
        rows.append({"rank": rank, "activation": c.value, "token": tokens[c.peak], "context": marked,
                     "tokens": tokens, "activations": c.activations, "peak": c.peak, "repeats": c.repeats,
                     "position": c.position})
    return pd.DataFrame(rows, columns=["rank", "activation", "token", "context", "tokens", "activations", "peak",
                                       "repeats", "position"])


def contexts_shown(view: View) -> int:
    """How many strongest contexts the view's screen shows: fewer on a projector, whose first screen holds them."""
    return CONTEXTS_SHOWN.get(_screen(view), CONTEXTS)


def contexts_figure(view: View, table: pd.DataFrame, text: OwnText, layer: int, neuron: int) -> go.Figure:
    """One row per context, its peak in one column, each token shaded by the neuron's activation there (ReLU from 0
    on Viridis; GELU and SwiGLU on the blue-white-red scale, white at 0); exact values on hover. A phone shows fewer
    tokens around each peak, and names a row by its peak's value alone."""
    before, after = AROUND.get(_screen(view), (BEFORE, AFTER))
    offsets = list(range(-before, after + 1))
    z = np.full((len(table), len(offsets)), np.nan)
    words = np.full(z.shape, "", dtype=object)
    hover = np.full(z.shape, "", dtype=object)
    for r, row in enumerate(table.itertuples()):
        for j, (token, a) in enumerate(zip(row.tokens, row.activations)):
            col = j - row.peak + before
            if 0 <= col < len(offsets):
                z[r, col] = a
                words[r, col] = token_label(_short(token, view))
                hover[r, col] = token_label(token)
    # a phone's rows are lower and its colour bar lies under the plot: the chart fits the phone's first screen
    height = max(260, 30 * len(table) + 200) if view.phone else max(260, 34 * len(table) + 150)
    shown = z[np.isfinite(z)]
    relu = view.bundle.model.cfg.activation == "relu"
    scale = post_range(torch.tensor(shown if shown.size else np.zeros(1)), relu)
    rows = [("" if view.phone else f"{row.rank}: ") + f"{row.activation:.2f}"
            + (f" ×{row.repeats}" if row.repeats > 1 else "") for row in table.itertuples()]
    fig = go.Figure(go.Heatmap(
        z=z, x=offsets, y=list(range(len(table))), text=words, texttemplate="%{text}",
        customdata=np.dstack([np.repeat(np.array(rows, dtype=object)[:, None], len(offsets), 1), hover]),
        hovertemplate="context %{customdata[0]}<br>token “%{customdata[1]}”, %{x} from the peak"
                      "<br>activation %{z:.4f}<extra></extra>",
        colorscale=scale.get("colorscale", SEQUENTIAL), zmin=scale["zmin"], zmax=scale["zmax"],
        colorbar=_colourbar("activation", view.phone), xgap=2, ygap=2,
        textfont=dict(size=15 if view.presenter else 11)))
    title = (f"Neuron {neuron}, layer {layer}: its top contexts" if view.phone
             else f"Where neuron {neuron} of layer {layer} fires most in {safe(text.name)}")
    fig.update_layout(title=title, plot_bgcolor="rgba(0,0,0,0)")
    fig.update_xaxes(title="tokens from the peak (0)" if view.phone else
                     "tokens before and after the peak (0: the peak)", tickvals=offsets, zeroline=False,
                     showgrid=False)
    fig.update_yaxes(tickvals=list(range(len(rows))), ticktext=rows, title="context: its peak activation",
                     autorange="reversed", showgrid=False)
    fig = style(fig, view.presenter, height)
    return _phone_layout(fig) if view.phone else fig


def contexts_sentence(view: View, index: NeuronIndex, table: pd.DataFrame, text: OwnText, layer: int,
                      neuron: int) -> str:
    """Where the neuron fires most over the text, and on which tokens its strongest contexts peak (Markdown)."""
    if table.empty:
        return f"Neuron {neuron} of layer {layer} has no recorded activation over {_name_of(text)}."
    top = table.iloc[0]
    start = (f"Over {_name_of(text)} ({len(index.ids):,} tokens), neuron {neuron} of layer {layer} fires most on "
             f"{quote(top.token)}, at {top.activation:.2f}, in {quote(top.context)}")
    start += f" (the text has it {top.repeats} times)." if top.repeats > 1 else "."
    counts = table.groupby("token", sort=False)["repeats"].sum().sort_values(ascending=False, kind="stable")
    if len(counts) == 1:
        return start + f" All of its {int(counts.sum())} strongest places peak on {quote(top.token)}."
    named = [f"{quote(t)} ({n})" for t, n in counts.head(3).items()]
    listed = ", ".join(named[:-1]) + " and " + named[-1]
    more = f", and {len(counts) - 3} more" if len(counts) > 3 else ""
    return start + (f" Its {int(counts.sum())} strongest places peak on {len(counts)} different tokens: "
                    f"{listed}{more}.")


def _name_of(text: OwnText) -> str:
    return text.name if text.name == "your text" else f"*{text.name}*"


# --------------------------------------------------------------------------------------------------
# What the neuron writes: the tokens its output pushes up and down
# --------------------------------------------------------------------------------------------------

def output_tokens(view: View, layer: int, neuron: int, k: int = OUTPUT_TOKENS) -> pd.DataFrame:
    """The k tokens whose scores one unit of the neuron's activation raises most and the k it lowers most, read
    straight through the final norm's scale and the unembedding (model/neurons.py `neuron_logits`)."""
    return pushed_tokens(_vocab(view), neuron_logits(view.bundle.model, layer, neuron), k)


def pushed_tokens(vocab: list[str], logits: torch.Tensor, k: int = OUTPUT_TOKENS) -> pd.DataFrame:
    """The k tokens a direction's `logits` (V,) raise most and the k it lowers most: a neuron's or a feature's."""
    k = min(k, logits.numel() // 2)
    up, down = logits.topk(k), (-logits).topk(k)
    rows = [{"pushes": "up", "rank": r + 1, "id": i, "token": vocab[i], "logit change": v}
            for r, (v, i) in enumerate(zip(up.values.tolist(), up.indices.tolist()))]
    rows += [{"pushes": "down", "rank": r + 1, "id": i, "token": vocab[i], "logit change": -v}
             for r, (v, i) in enumerate(zip(down.values.tolist(), down.indices.tolist()))]
    return pd.DataFrame(rows, columns=["pushes", "rank", "id", "token", "logit change"])


def output_figure(view: View, table: pd.DataFrame, layer: int, neuron: int) -> go.Figure:
    """Horizontal bars: the tokens pushed up (red, top) and down (blue, bottom), by how much per unit of activation."""
    fig = go.Figure()
    for pushes, colour, name in (("up", UP, "pushed up"), ("down", DOWN, "pushed down")):
        part = table[table.pushes == pushes]
        y = [f"{'↑' if pushes == 'up' else '↓'}{r} {token_label(t)}" for r, t in zip(part["rank"], part.token)]
        fig.add_bar(x=part["logit change"], y=y, orientation="h", name=name, marker_color=colour,
                    text=[_signed(v) for v in part["logit change"]], textposition="outside", cliponaxis=False,
                    customdata=[token_label(t) for t in part.token],
                    hovertemplate="<b>%{customdata}</b><br>score change per unit of activation %{x:+.4f}"
                                  "<extra></extra>")
    fig.update_layout(title=f"Neuron {neuron}, layer {layer}: what it writes" if view.phone else
                      f"What neuron {neuron} of layer {layer} writes: the tokens it pushes up and down",
                      xaxis_title="change to the token's score (logit) per unit of activation",
                      legend=dict(orientation="h", y=-0.2), bargap=0.25)
    # room beyond each end for the bars' numbers (outside them): a share of the axis' width, larger on a phone's
    changes = table["logit change"]
    low, high = min(0.0, float(changes.min())), max(0.0, float(changes.max()))
    room = 0.17 if view.phone else 0.07
    pad = (high - low) * room / (1 - 2 * room) or 1.0
    fig.update_xaxes(range=[low - pad, high + pad])
    fig.update_yaxes(autorange="reversed", type="category")
    return style(fig, view.presenter, max(320, 22 * len(table) + 140))


def output_sentence(view: View, table: pd.DataFrame, layer: int, neuron: int) -> str:
    """The token each unit of the neuron's activation raises most and the one it lowers most (Markdown)."""
    up, down = table[table.pushes == "up"].iloc[0], table[table.pushes == "down"].iloc[0]
    through = {"LayerNorm": "the final norm's scale", "RMSNorm": "the final norm's scale"}.get(
        type(view.bundle.model.final_norm).__name__, "")
    path = f"Read straight through {through} and the unembedding" if through else "Read straight through the unembedding"
    return (f"{path}, each unit of neuron {neuron}'s activation in layer {layer} raises the score of {quote(up.token)} "
            f"most ({_signed(up['logit change'])}) and lowers {quote(down.token)} most "
            f"({_signed(down['logit change'])}). Later blocks may change what it does; this is its direct path.")


# --------------------------------------------------------------------------------------------------
# Where it fires on the student's sentence
# --------------------------------------------------------------------------------------------------

def sentence_activations(view: View, layer: int, neuron: int) -> list[float]:
    """The neuron's activation at each token of the view's sentence, from its trace (blocks.i.mlp.post)."""
    check_neuron(view.bundle.model, layer, neuron)
    return view.trace[f"blocks.{layer}.mlp.post"][0, :, neuron].tolist()


def busiest_neuron(view: View, layer: int) -> int:
    """The neuron of `layer` with the largest activation anywhere in the sentence."""
    post = view.trace[f"blocks.{layer}.mlp.post"][0]                            # (T, F)
    return int(post.amax(0).argmax())


def sentence_figure(view: View, index: NeuronIndex | None, text: OwnText | None, layer: int,
                    neuron: int) -> go.Figure:
    """A bar per token of the sentence: the neuron's activation there, with its strongest over the text as a line."""
    acts = sentence_activations(view, layer, neuron)
    x = list(range(len(acts)))
    fig = go.Figure(go.Bar(
        x=x, y=acts, marker_color=[UP if a >= 0 else DOWN for a in acts],
        customdata=[safe(t) for t in labels(view.tokens)],
        hovertemplate="token %{customdata}<br>activation %{y:.4f}<extra></extra>"))
    if index is not None and text is not None:
        top = float(index.values[layer, neuron, 0])
        fig.add_hline(y=top, line_dash="dash", line_color="#555555",
                      annotation_text=f"its strongest in {safe(text.name)}: {top:.2f}",
                      annotation_position="top left")
    fig.update_layout(title=f"Neuron {neuron}, layer {layer}, on your sentence" if view.phone else
                      f"Neuron {neuron} of layer {layer} on your sentence (after {activation_name(view)}: trace name "
                      f"blocks.{layer}.mlp.post)",
                      yaxis_title="activation", xaxis=dict(tickvals=x, ticktext=labels(view.tokens),
                                                           title="token", tickangle=-45 if len(x) > 12 else 0))
    return style(fig, view.presenter, 340)


def fires_sentence(view: View, index: NeuronIndex | None, text: OwnText | None, layer: int, neuron: int) -> str:
    """Where the neuron fires most in the sentence, and how that compares with its strongest over the text."""
    acts = sentence_activations(view, layer, neuron)
    i = int(np.argmax(acts))
    token, a = view.tokens[i], acts[i]
    if a <= 0:
        return (f"In your sentence neuron {neuron} of layer {layer} does not fire: its largest activation is "
                f"{a:.2f}".replace("-", "−") + f", at {quote(token)} (token {i}).")
    said = f"In your sentence neuron {neuron} of layer {layer} fires most on {quote(token)} (token {i}), at {a:.2f}"
    if index is None or text is None or float(index.values[layer, neuron, 0]) <= 0:
        return said + "."
    top = float(index.values[layer, neuron, 0])
    if a >= top:
        return said + f": more than anywhere in {_name_of(text)} (at most {top:.2f} there)."
    return said + f": {percent(a / top)} of its strongest in {_name_of(text)} ({top:.2f})."


# --------------------------------------------------------------------------------------------------
# Steering: a direction added to the residual stream while the model writes
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Source:
    """A steering direction (D,) and how a sentence names it."""
    kind: str                # "neuron", "difference" or "feature"
    label: str               # Markdown: "neuron 17 of layer 1", "“I love” minus “I hate”", "feature 123"
    direction: torch.Tensor


def neuron_source(view: View, layer: int, neuron: int) -> Source:
    """What a neuron writes (its W_out column), at length 1."""
    return Source("neuron", f"neuron {neuron} of layer {layer}", neuron_direction(view.bundle.model, layer, neuron))


def difference_source(view: View, first: str, second: str, layer: int, how: str = "mean") -> Source:
    """Sentence `first`'s residual stream after block `layer` minus `second`'s (model/steering.py); an empty
    sentence raises ValueError saying which."""
    tok, max_len = view.bundle.tokenizer, view.bundle.model.cfg.max_len
    ids = [tok.encode(s or "")[:max_len] for s in (first, second)]
    direction = difference_direction(view.bundle.model, ids[0], ids[1], layer, how)
    return Source("difference", f"{quote((first or '').strip())} minus {quote((second or '').strip())}", direction)


def feature_source(view: View, vector, label: str) -> Source:
    """Any direction of the model's width (a dictionary feature's decoder row), named `label` (Markdown)."""
    return Source("feature", label, check_direction(view.bundle.model, vector))


@dataclass(frozen=True)
class Steering:
    """The view's sentence continued without and with a steering direction, and how its next token's probabilities
    moved; or, when that cannot be done, `problem` in words."""
    label: str
    layer: int
    strength: float
    steered: Steered | None = None
    shift: Shift | None = None
    problem: str | None = None


def steer(view: View, source: Source, layer: int, strength: float, n_tokens: int = STEER_TOKENS,
          k: int = SHIFTS) -> Steering:
    """Add `strength` x the source's direction after block `layer` at every position while the model writes
    `n_tokens` greedy tokens after the sentence; a bad strength, layer or direction, or numbers that overflow,
    come back as `problem`."""
    model = view.bundle.model
    try:
        if not 0 <= int(layer) < model.cfg.n_layers:
            raise ValueError(f"there is no layer {layer}: this model's layers are 0 to {model.cfg.n_layers - 1}")
        check_direction(model, source.direction)
        edits = steering_edit(layer, source.direction, strength)
        steered = steered_continuation(model, list(view.ids), edits, n_tokens)
        shift = next_token_shift(model, list(view.ids), edits, k)
    except ValueError as e:
        return Steering(source.label, layer, float(strength) if _is_number(strength) else 0.0, problem=str(e))
    return Steering(source.label, layer, float(strength), steered, shift)


def _is_number(x) -> bool:
    try:
        float(x)
        return True
    except (TypeError, ValueError):
        return False


def _written(view: View, tokens: list[int]) -> str:
    return view.bundle.tokenizer.decode(tokens).strip()


def continuation_table(view: View, result: Steering) -> pd.DataFrame:
    """Step by step: the token written without and with steering, each with the probability it had there."""
    s = result.steered
    vocab = _vocab(view)
    n = max(len(s.plain.tokens), len(s.steered.tokens))

    def at(gen, i, what):
        if i >= len(gen.tokens):
            return None
        return vocab[gen.tokens[i]] if what == "token" else gen.probs[i]
    return pd.DataFrame({"step": range(1, n + 1),
                         "without": [at(s.plain, i, "token") for i in range(n)],
                         "probability without": [at(s.plain, i, "p") for i in range(n)],
                         "with steering": [at(s.steered, i, "token") for i in range(n)],
                         "probability with": [at(s.steered, i, "p") for i in range(n)],
                         "same": [at(s.plain, i, "token") == at(s.steered, i, "token") for i in range(n)]})


def continuation_figure(view: View, result: Steering) -> go.Figure:
    """The two continuations side by side, one cell per written token, coloured by the probability it had (Viridis,
    0 to 1); on a phone the steps run down the screen, on a projector the first STEPS_SHOWN steps are shown."""
    table = continuation_table(view, result).head(STEPS_SHOWN.get(_screen(view)))
    rows = ["without", "with"]
    p = np.array([table["probability without"], table["probability with"]], dtype=float)        # (2, n)
    words = np.array([[token_label(_short(t, view, STEP_CHARS)) if t is not None else "" for t in table[c]]
                      for c in ("without", "with steering")], dtype=object)
    full = np.array([[safe(t) if t is not None else "" for t in table[c]] for c in ("without", "with steering")],
                    dtype=object)
    steps = list(range(1, len(table) + 1))
    names = np.repeat(np.array(["without steering", f"with steering at strength {result.strength:g}"],
                               dtype=object)[:, None], len(steps), 1)
    custom = np.dstack([names, full, np.repeat(np.array(steps)[None, :], 2, 0)])
    height = 26 * len(steps) + 200 if view.phone else 240
    if view.phone:
        p, words, custom = p.T, words.T, custom.transpose(1, 0, 2)
    fig = go.Figure(go.Heatmap(
        z=p, text=words, texttemplate="%{text}", customdata=custom, colorscale=SEQUENTIAL, zmin=0.0, zmax=1.0,
        xgap=2, ygap=2, colorbar=_colourbar("probability", view.phone),
        textfont=dict(size=16 if view.presenter else 11),
        hovertemplate="%{customdata[0]}, step %{customdata[2]}: “%{customdata[1]}”<br>probability %{z:.4f}"
                      "<extra></extra>"))
    if view.phone:
        fig.update_xaxes(tickvals=[0, 1], ticktext=rows, side="top")
        fig.update_yaxes(tickvals=list(range(len(steps))), ticktext=[str(s) for s in steps], title="step",
                         autorange="reversed")
    else:
        fig.update_xaxes(tickvals=list(range(len(steps))), ticktext=[str(s) for s in steps], title="step")
        fig.update_yaxes(tickvals=[0, 1], ticktext=rows, autorange="reversed")
    fig.update_layout(title=f"Steering at strength {result.strength:g}" if view.phone else
                      f"What the model writes after your sentence, without and with steering (strength "
                      f"{result.strength:g}, after layer {result.layer})", plot_bgcolor="rgba(0,0,0,0)")
    fig = style(fig, view.presenter, height)
    if view.phone:               # the columns' names over the plot, under the title; the colour bar at the foot
        return _phone_layout(fig.update_layout(margin_t=90), room=50)
    return fig


def shift_table(view: View, result: Steering) -> pd.DataFrame:
    """The next token's biggest risers and fallers: probability without, with, and the change."""
    shift, vocab = result.shift, _vocab(view)
    rows = [{"moved": moved, "id": i, "token": vocab[i], "without": float(shift.before[i]),
             "with steering": float(shift.after[i]), "change": shift.change(i)}
            for moved, ids in (("rose", shift.risers), ("fell", shift.fallers)) for i in ids]
    return pd.DataFrame(rows, columns=["moved", "id", "token", "without", "with steering", "change"])


def shift_figure(view: View, result: Steering) -> go.Figure:
    """Bars: how far each of the next token's biggest risers (red) and fallers (blue) moved, in percentage points
    (those that moved less than 0.05 points left out, unless none moved more); exact probabilities on hover."""
    table = shift_table(view, result)
    visible = table[(100 * table.change).abs() >= 0.05]
    table = visible if len(visible) else table
    x = list(range(len(table)))
    fig = go.Figure(go.Bar(
        x=x, y=100 * table.change, marker_color=[UP if c > 0 else DOWN for c in table.change],
        text=[f"{100 * c:+.1f}".replace("-", "−") for c in table.change], textposition="outside", cliponaxis=False,
        customdata=np.stack([[token_label(t) for t in table.token], [percent(p) for p in table.without],
                             [percent(p) for p in table["with steering"]]], -1),
        hovertemplate="<b>%{customdata[0]}</b><br>without: %{customdata[1]}<br>with steering: %{customdata[2]}"
                      "<br>change %{y:+.2f} points<extra></extra>"))
    fig.update_layout(title="How the next token moves" if view.phone else
                      f"How the next token's probabilities move with steering (strength {result.strength:g} after "
                      f"layer {result.layer})",
                      yaxis_title="change (percentage points)",
                      xaxis=dict(tickvals=x, ticktext=[token_label(t) for t in table.token], title="next token",
                                 tickangle=-45 if len(x) > 10 else 0))
    return style(fig, view.presenter, 360)


def steering_sentence(view: View, result: Steering) -> str:
    """What steering changed, every number from the two runs (Markdown): "Steered with … at strength 8 after layer
    1, the model writes “…” instead of “…”; “x” rose from 3% to 41%."""
    if result.problem:
        return result.problem
    s, shift, vocab = result.steered, result.shift, _vocab(view)
    start = f"Steered with {result.label} at strength {result.strength:g} after layer {result.layer}, the model"
    plain, steered = _written(view, s.plain.tokens), _written(view, s.steered.tokens)
    if not shift.risers:
        moved = ""
    else:
        x = shift.risers[0]
        before, after = percents(float(shift.before[x]), float(shift.after[x]))
        moved = f"{quote(vocab[x])} rose from {before} to {after}"
    if s.first_difference is None:
        said = f"{start} still writes {quote(shorten(plain))}: at this strength it changes no word."
        return said + (f" Its next token's largest rise: {moved}." if moved else " No next-token probability moves.")
    said = f"{start} writes {quote(shorten(steered))} instead of {quote(shorten(plain))}"
    return said + (f"; {moved}." if moved else ".")


# --------------------------------------------------------------------------------------------------
# The steering a page shows (and a class question asks about): its fields, with their defaults
# --------------------------------------------------------------------------------------------------

STEER_BY = ("neuron", "difference", "feature")     # a neuron's direction, two sentences' difference, or a dictionary
                                                    # feature's decoder row (the Dictionary features tab picks one)
STEER_BY_LABELS = {"neuron": "a neuron", "difference": "two sentences' difference", "feature": "a dictionary feature"}
DEFAULT_STRENGTH = {"neuron": 8.0, "difference": 4.0, "feature": 8.0}
NO_FEATURE = ("No dictionary feature is chosen for this model yet: pick one on the Dictionary features tab and press "
              "“Steer with this feature”.")


@dataclass(frozen=True)
class FeatureDirection:
    """A dictionary feature to steer with: `key` names it uniquely (its dictionary's key and its number: what a cache
    compares, never the vector), `label` names it on the page (Markdown), `direction` is its decoder row (D,)."""
    key: str
    label: str
    direction: torch.Tensor = field(compare=False, repr=False)
DEFAULT_PAIR = {"bpe": ("I love this", "I hate this")}      # GPT-2 and SmolLM2; a word-level model: its own words


def default_pair(view: View) -> tuple[str, str]:
    """Two sentences to subtract: a love/hate pair for a model that reads any text, else the view's sentence and the
    same sentence without its last word (a model of a few hundred words knows neither "love" nor "hate")."""
    if view.bundle.tokenizer.kind in DEFAULT_PAIR:
        return DEFAULT_PAIR[view.bundle.tokenizer.kind]
    words = view.text.split()
    return view.text, " ".join(words[:-1]) or view.text


def steering_source(view: View, layer: int, fields: dict,
                    feature: FeatureDirection | None = None) -> tuple[Source, float]:
    """The direction and strength the page's fields choose (`fields` by the page's field names, any missing one at
    its default: steer by a neuron, the one that fires most on the sentence in `layer`; steering by a dictionary
    feature reads `feature`). A ValueError says what is wrong with a sentence, or that no feature is chosen."""
    by = fields.get("steer-by") if fields.get("steer-by") in STEER_BY else "neuron"
    strength = fields.get("strength", DEFAULT_STRENGTH[by])
    if by == "feature":
        if feature is None:
            raise ValueError(NO_FEATURE)
        return feature_source(view, feature.direction, feature.label), strength
    if by == "neuron":
        neuron = fields.get("neuron")
        if not isinstance(neuron, int) or not 0 <= neuron < view.bundle.model.cfg.d_ff:
            neuron = busiest_neuron(view, layer)
        return neuron_source(view, layer, neuron), strength
    first, second = default_pair(view)
    return difference_source(view, fields.get("sentence-a", first), fields.get("sentence-b", second), layer), strength


def steered(view: View, trace, layer: int, fields: tuple[tuple[str, object], ...],
            feature: FeatureDirection | None = None) -> Steering:
    """The page's steering (`steering_source` of its fields, as (name, value) pairs, and the dictionary `feature`
    when it steers by one) of the view's sentence, or the problem in words (an empty sentence, a strength out of
    range, numbers that overflow). Ask it through memo.per_view: a class that opens the view together computes it
    once."""
    try:
        source, strength = steering_source(view, layer, dict(fields), feature)
    except ValueError as problem:
        return Steering("", layer, 0.0, problem=str(problem))
    return steer(view, source, layer, strength)
