"""Watch it learn: one model at several steps of its training (Pythia's checkpoints are revisions of one repository:
step 0, 64, 512, 1000, ...), read on the student's sentence and on a repeated random sequence.

At each checkpoint (model/induction.py for the induction score):
    loss          the mean next-token cross-entropy (nats) over the sentence: how surprised the model is by each
                  next word of it, on average; a model that guesses evenly among V tokens scores ln V
    guess         the model's top next token after the whole sentence, its text and its probability
    induction     (L, H) each head's induction score on n random tokens repeated: the head's mean attention on the
                  token after the previous occurrence of the current one

Builders (pure: no Streamlit):
    learning(checkpoints, tokens, seed)                       every checkpoint read once -> Learning
    read_checkpoint(bundle, tokens, seed), from_readings(...) the same, one checkpoint at a time (the app's way)
    loss_figure / induction_figure                            both over steps, on a log x axis
    induction_sentence / loss_sentence / guess_sentence       what they show, in words, every number computed
    first_step_right(learning, target)                        the first step whose guess is the target, or None
"""
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import torch
import torch.nn.functional as F

from model.checkpoint import Bundle
from model.induction import induction_scores, repeated_random_tokens

from explorer.numbers import percent
from explorer.plot import COLORWAY, for_a_phone, safe, style, visible
from explorer.view import quote

# A head counts as an induction head from this score up. A head that spreads its attention evenly scores about
# 1 / (i + 1) at position i (it may see i + 1 positions): at most 1 / (n + 1) over the second copy, 0.02 at
# INDUCTION_LENGTH tokens, 0.06 at a tiny model's 16. A previous-token head scores about 0 (it looks at i - 1, not
# i - n + 1). So 0.4, 40% of a head's attention on average on the one position induction predicts, is many times
# chance and out of reach of a head that does something else (each position of the second copy holds a different
# token, so attending to one fixed kind of position hits i - n + 1 rarely); and it sits below 0.5 so that a head that
# has only half formed (splitting its weight between that position and another) already counts.
INDUCTION_THRESHOLD = 0.4
SLUG = "learning"

TEXT = """\
A language model starts as **random numbers** and learns by reading: after each batch of text its weights are
nudged so that the words that really came next get a little more probability. Most models are published only as
they ended. **Pythia** (EleutherAI, 2023) was also saved **as it learned**: 154 snapshots of the same model, from
step 0 (random weights, before any text) to step 143,000, each step having read 2,097,152 tokens of the Pile (English
web pages, books, papers and code).

This page reads your sentence with the model at each training step this server has:

1. **The loss**: how surprised the model is, on average, by each next word of your sentence (in nats; a model that
   guesses evenly among its V tokens scores ln V). Falling means learning.
2. **Its next word** after your sentence at each step, and how sure it is.
3. **Induction heads**: heads that find the previous time the current token appeared and look at the token that came
   after it, so the model can continue a repeated pattern ("... Harry Potter ... Harry" → "Potter"). Each head's
   **induction score** is how much of its attention lands there on a random sequence repeated twice: 1 is a perfect
   induction head, nearly 0 a head that does something else. In models like this one they appear suddenly, early in
   training (Olsson et al., 2022).

The training-step picker in the sidebar shows every other page at the step you choose.
"""

NO_CHECKPOINTS = ("Watch it learn reads a model that was saved as it learned. **Pythia-70M** was saved at 154 steps "
                  "of its training: pick it in the sidebar's model picker (it downloads once), or press the button.")
INDUCTION_LENGTH = 50        # tokens in each copy of the repeated sequence (as in TransformerLens' induction
                             # examples), shortened to half the context of a smaller model
ZERO_AT = 1                  # step 0 cannot sit on a log axis: it is drawn at 1 (half the first later step if that
                             # is 1 or less), left of every later checkpoint
HIGHLIGHT, OTHER = COLORWAY[0], "#9a9a9a"
HEIGHT, PHONE_HEIGHT = 420, 360


@dataclass(frozen=True, eq=False)
class Learning:
    """A model read at each of its checkpoints (sorted by step). Index s of each field is step steps[s]."""
    steps: tuple[int, ...]
    losses: tuple[float, ...]          # nats: mean next-token cross-entropy over the sentence
    guesses: tuple[int, ...]           # the top next token's id after the sentence
    guess_texts: tuple[str, ...]       # ... its text
    probabilities: tuple[float, ...]   # ... its probability
    induction: np.ndarray              # (S, L, H) each head's induction score at each step
    tokens: tuple[int, ...]            # the sentence's token ids
    copy_length: int                   # n: the induction scores read n random tokens, then the same n again


@dataclass(frozen=True, eq=False)
class Reading:
    """One checkpoint read on the sentence and the repeated random sequence (what `learning` collects per step)."""
    loss: float
    guess: int
    guess_text: str
    probability: float
    induction: np.ndarray              # (L, H)
    copy_length: int


def read_checkpoint(bundle: Bundle, tokens: list[int], seed: int = 0) -> Reading:
    """One checkpoint's loss on the sentence `tokens`, its guess after it, and each head's induction score (the app
    reads one checkpoint at a time, so a server never holds them all)."""
    if len(tokens) < 2:
        raise ValueError("the sentence needs at least two tokens: the loss scores each token after the first")
    model, vocab = bundle.model, bundle.tokenizer.vocab
    ids = torch.as_tensor(tokens, dtype=torch.long)                               # (T,)
    logits = model.predict(ids)[0]                                                # (T, V)
    loss = F.cross_entropy(logits[:-1], ids[1:]).item()                           # mean over T - 1 predictions
    probs = logits[-1].softmax(dim=-1)                                            # (V,)
    guess = int(probs[:len(vocab)].argmax())        # among the tokens the tokenizer can write (a model's vocabulary
                                                    # may be padded past it, as Pythia's is)
    copies = repeated_random_tokens(min(len(vocab), model.cfg.vocab_size), INDUCTION_LENGTH, seed=seed,
                                    max_len=model.cfg.max_len)                    # (B, 2n)
    scores = induction_scores(model, copies).numpy()                              # (L, H)
    return Reading(loss, guess, vocab[guess], float(probs[guess]), scores, copies.shape[1] // 2)


def learning(checkpoints: list[tuple[int, Bundle]], tokens: list[int], seed: int = 0) -> Learning:
    """Read each (step, bundle) checkpoint on the sentence `tokens` (at least 2, so there is a next token to
    predict) and on the same repeated random sequence (drawn with `seed`), sorted by step."""
    return from_readings([(step, read_checkpoint(bundle, tokens, seed)) for step, bundle in checkpoints], tokens)


def from_readings(readings: list[tuple[int, Reading]], tokens: list[int]) -> Learning:
    """The Learning of checkpoints read one by one (`read_checkpoint`), sorted by step."""
    if not readings:
        raise ValueError("there are no checkpoints to compare")
    steps = [int(step) for step, _ in readings]
    if len(set(steps)) != len(steps) or min(steps) < 0:
        raise ValueError(f"each checkpoint needs its own training step, 0 or more; got {sorted(steps)}")
    ordered = sorted(readings, key=lambda c: c[0])
    shapes = {r.induction.shape for _, r in ordered}
    if len(shapes) > 1:
        raise ValueError(f"checkpoints of one model have the same layers and heads; these have (layers, heads) "
                         f"{sorted(shapes)}")
    read = [r for _, r in ordered]
    return Learning(steps=tuple(int(s) for s, _ in ordered), losses=tuple(r.loss for r in read),
                    guesses=tuple(r.guess for r in read), guess_texts=tuple(r.guess_text for r in read),
                    probabilities=tuple(r.probability for r in read), induction=np.stack([r.induction for r in read]),
                    tokens=tuple(int(t) for t in tokens), copy_length=min(r.copy_length for r in read))


def first_step_right(learning: Learning, target: int | str) -> int | None:
    """The first step whose top guess after the sentence is `target` (a token id, or its text), or None if no
    checkpoint at hand guesses it: the answer to "at which of these steps does the model first get this word
    right?"."""
    at = learning.guesses if isinstance(target, (int, np.integer)) else learning.guess_texts
    return next((step for step, guess in zip(learning.steps, at) if guess == target), None)


# --- sentences ------------------------------------------------------------------------------------------------------

def _head(layer: int, head: int) -> str:
    return f"layer {layer}, head {head}"


def strongest_head(learning: Learning, step_index: int = -1) -> tuple[int, int]:
    """(layer, head) with the highest induction score at a step (by default the last)."""
    scores = learning.induction[step_index]                                      # (L, H)
    layer, head = np.unravel_index(int(scores.argmax()), scores.shape)
    return int(layer), int(head)


def first_induction(learning: Learning) -> tuple[int, int, int] | None:
    """(step index, layer, head): the first checkpoint at which some head's induction score reaches
    INDUCTION_THRESHOLD, and the head with the highest score there; None if no head does by the last one."""
    for s in range(len(learning.steps)):
        if learning.induction[s].max() >= INDUCTION_THRESHOLD:
            return (s, *strongest_head(learning, s))
    return None


def induction_sentence(learning: Learning) -> str:
    """When an induction head appears among the checkpoints at hand, which one, and its score before and after;
    or that none does by the last checkpoint (markdown)."""
    first = first_induction(learning)
    steps, scores = learning.steps, learning.induction
    if first is None:
        layer, head = strongest_head(learning)
        return (f"No head reaches an induction score of {INDUCTION_THRESHOLD} by step {steps[-1]:,}, the last "
                f"checkpoint at hand: the highest there is {scores[-1, layer, head]:.2f} ({_head(layer, head)}).")
    s, layer, head = first
    score = f"**{scores[s, layer, head]:.2f}**"
    what = ("of its attention on the token after the previous occurrence of the current one (its induction score; "
            f"{INDUCTION_THRESHOLD} counts as an induction head)")
    if s == 0:
        return (f"Already at step {steps[0]:,}, the first checkpoint at hand, **{_head(layer, head)}** is an "
                f"induction head: it puts {score} {what}." + _strongest_at_the_end(learning, (layer, head)))
    text = (f"An induction head appears between step {steps[s - 1]:,} and step {steps[s]:,}: at step {steps[s]:,} "
            f"**{_head(layer, head)}** puts {score} {what}, where at step {steps[s - 1]:,} it put "
            f"{scores[s - 1, layer, head]:.2f}.")
    return text + _strongest_at_the_end(learning, (layer, head))


def _strongest_at_the_end(learning: Learning, named: tuple[int, int]) -> str:
    """When another head than the named one is the strongest at the last checkpoint, a sentence saying so."""
    last = strongest_head(learning)
    if last == named or len(learning.steps) < 2:
        return ""
    return (f" By step {learning.steps[-1]:,} the strongest is {_head(*last)}, at "
            f"{learning.induction[-1, last[0], last[1]]:.2f}.")


def loss_sentence(learning: Learning) -> str:
    """The loss on the sentence from the first checkpoint to the last (markdown)."""
    steps, losses = learning.steps, learning.losses
    n = len(learning.tokens) - 1
    per = f"the mean over its {n} next-token prediction{'s' if n != 1 else ''}"
    if len(steps) == 1:
        return f"At step {steps[0]:,} the loss on your sentence ({per}) is **{losses[0]:.2f}** nats."
    first, last = f"{losses[0]:.2f}", f"{losses[-1]:.2f}"
    if first == last:
        return (f"The loss on your sentence ({per}) stays at **{first}** nats from step {steps[0]:,} to step "
                f"{steps[-1]:,}.")
    verb = "falls" if losses[-1] < losses[0] else "rises"
    return (f"The loss on your sentence ({per}) {verb} from **{first}** nats at step {steps[0]:,} to **{last}** at "
            f"step {steps[-1]:,}.")


def guess_sentence(learning: Learning) -> str:
    """The model's next-token guess after the sentence at the first and the last checkpoint, and since which step it
    has guessed the last one without a break (markdown)."""
    steps, texts, probs = learning.steps, learning.guess_texts, learning.probabilities
    word = [quote(visible(t)) for t in texts]
    text = f"After your sentence, the model at step {steps[0]:,} guesses {word[0]} ({percent(probs[0])})"
    if len(steps) == 1:
        return text + "."
    text += f"; at step {steps[-1]:,} it guesses {word[-1]} ({percent(probs[-1])})."
    run = len(steps) - 1                          # the last checkpoints' unbroken run of that same guess
    while run > 0 and learning.guesses[run - 1] == learning.guesses[-1]:
        run -= 1
    if 0 < run < len(steps) - 1:
        text += f" It has guessed {word[-1]} since step {steps[run]:,}."
    return text


# --- figures --------------------------------------------------------------------------------------------------------

def zero_at(steps) -> float:
    """Where step 0 is drawn on the log x axis: ZERO_AT, or half the first later step if that is not above it."""
    later = [s for s in steps if s > 0]
    return float(ZERO_AT) if not later or min(later) > ZERO_AT else min(later) / 2


def plotted_steps(steps) -> list[float]:
    """Where each step sits on the log x axis: the step itself, step 0 at zero_at(steps)."""
    return [float(s) if s > 0 else zero_at(steps) for s in steps]


PHONE_TICK_GAP = 0.6         # a phone labels a checkpoint's tick only this far (in log10 units) from the last labelled


def labelled_ticks(steps, phone: bool = False) -> list[int]:
    """The checkpoints whose ticks carry their step: every one, or on a phone's narrow axis those at least
    PHONE_TICK_GAP apart on the log scale (512 and 1,000 would overlap), the first and the last always."""
    if not phone:
        return list(steps)
    at = dict(zip(steps, np.log10(plotted_steps(steps))))
    kept = [steps[0]]
    for step in steps[1:]:
        if at[step] - at[kept[-1]] >= PHONE_TICK_GAP:
            kept.append(step)
    if kept[-1] != steps[-1]:                       # the last step always, in place of a neighbour too close to it
        kept[-1 if len(kept) > 1 and at[steps[-1]] - at[kept[-1]] < PHONE_TICK_GAP else len(kept):] = [steps[-1]]
    return kept


def _step_axis(fig: go.Figure, steps, phone: bool = False) -> None:
    """A log x axis with a tick at each checkpoint labelled with its real step (on a phone, those with room)."""
    title = "training step (log scale" + (f"; step 0 is drawn at {zero_at(steps):g})" if 0 in steps else ")")
    shown = labelled_ticks(steps, phone)
    fig.update_xaxes(type="log", title=title, tickvals=[x for x, s in zip(plotted_steps(steps), steps) if s in shown],
                     ticktext=[f"{s:,}" for s in shown])


def loss_figure(learning: Learning, presenter: bool = False, phone: bool = False) -> go.Figure:
    """The loss on the sentence at each checkpoint, over training steps on a log axis; hover shows the real step."""
    steps = learning.steps
    fig = go.Figure(go.Scatter(
        x=plotted_steps(steps), y=list(learning.losses), customdata=list(steps), mode="lines+markers",
        name="loss", line=dict(color=HIGHLIGHT, width=3),
        hovertemplate="step %{customdata:,}<br>loss %{y:.3f} nats<extra></extra>"))
    fig.update_layout(title="Loss on your sentence" if phone else "Loss on your sentence, over training",
                      showlegend=False)
    _step_axis(fig, steps, phone)
    fig.update_yaxes(title="loss (nats)", rangemode="tozero")
    fig = style(fig, presenter, PHONE_HEIGHT if phone else HEIGHT)
    return for_a_phone(fig) if phone else fig


def named_head(learning: Learning) -> tuple[int, int]:
    """The head the induction sentence names: the first to reach INDUCTION_THRESHOLD, else the strongest at the last
    checkpoint (the figure highlights the same one)."""
    first = first_induction(learning)
    return strongest_head(learning) if first is None else first[1:]


def induction_figure(learning: Learning, presenter: bool = False, phone: bool = False) -> go.Figure:
    """Each head's induction score over training steps (log axis), one line per head: the head the sentence names
    (named_head) highlighted and labelled, the others grey; a dashed line at INDUCTION_THRESHOLD."""
    steps, scores = learning.steps, learning.induction                          # (S,), (S, L, H)
    _, L, H = scores.shape
    best = named_head(learning)
    x = plotted_steps(steps)
    fig = go.Figure(layout=dict(title="Induction score of each head" if phone else
                                "Each head's induction score, over training"))
    heads = [(layer, head) for layer in range(L) for head in range(H) if (layer, head) != best] + [best]
    for layer, head in heads:                                   # the strongest last, so it is drawn on top
        name = _head(layer, head)
        strongest = (layer, head) == best
        fig.add_trace(go.Scatter(
            x=x, y=scores[:, layer, head].tolist(), customdata=list(steps), name=name,
            mode="lines+markers+text" if strongest else "lines",
            text=[""] * (len(steps) - 1) + [f"{name}"] if strongest else None, textposition="top left",
            line=dict(color=HIGHLIGHT if strongest else OTHER, width=4 if strongest else 1.5),
            opacity=1.0 if strongest else 0.7, showlegend=False,          # the strongest is labelled on its line
            hovertemplate=f"{safe(name)}<br>step %{{customdata:,}}<br>induction score %{{y:.3f}}<extra></extra>"))
    fig.add_hline(y=INDUCTION_THRESHOLD, line=dict(dash="dash", color=OTHER, width=1),
                  annotation_text=f"induction head: {INDUCTION_THRESHOLD}", annotation_position="bottom right")
    _step_axis(fig, steps, phone)
    fig.update_yaxes(title="induction score", range=[0, 1.05])
    fig = style(fig, presenter, PHONE_HEIGHT if phone else HEIGHT)
    return for_a_phone(fig) if phone else fig


def step_label(step: int) -> str:
    """A checkpoint as a question's option and the guess chart's bar: "step 1,000"."""
    return f"step {step:,}"


def guess_figure(learning: Learning, presenter: bool = False, phone: bool = False) -> go.Figure:
    """The model's next-token guess after the sentence at each checkpoint: one bar per step (in order, evenly spaced),
    as long as the guess's probability and labelled with the guess; the last step's guess in colour wherever it is
    the guess, so a student sees when the model first writes it. On a phone the bars lie down, one row a step, so
    each guess has room beside its bar."""
    steps, last = learning.steps, learning.guesses[-1]
    words = [safe(visible(t)) for t in learning.guess_texts]
    labels = [step_label(s) for s in steps]
    probabilities = list(learning.probabilities)
    fig = go.Figure(go.Bar(
        x=probabilities if phone else labels, y=labels if phone else probabilities, orientation="h" if phone else "v",
        text=words, textposition="outside", cliponaxis=False,
        marker_color=[HIGHLIGHT if g == last else OTHER for g in learning.guesses], customdata=words,
        hovertemplate=("%{y}" if phone else "%{x}") + ": guesses “%{customdata}”<br>probability "
                      + ("%{x:.1%}" if phone else "%{y:.1%}") + "<extra></extra>"))
    fig.update_layout(title="The next word at each step" if phone else "The model's next word after your sentence, "
                      "at each step", showlegend=False)
    value_axis = dict(title="probability of its guess", range=[0, 1.1], tickformat=".0%")
    if phone:
        fig.update_xaxes(**value_axis)
        fig.update_yaxes(title=None, autorange="reversed")            # step 0 at the top, as a list reads
    else:
        fig.update_xaxes(title="training step")
        fig.update_yaxes(**value_axis)
    fig = style(fig, presenter, PHONE_HEIGHT if phone else HEIGHT)
    return for_a_phone(fig) if phone else fig
