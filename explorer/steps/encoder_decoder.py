"""The encoder-decoder page: the source read by the encoder, the target written by the decoder, and the
cross-attention between them (trace names encoder.*, decoder.blocks.i.attn.*, decoder.blocks.i.cross_attn.*).

The view's trace is the model reading the source and, in its decoder, the target it wrote greedily:
<bos> then each written token, so row t of a decoder pattern is the step that wrote target token t.
"""
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from model import tasks
from model.edits import knock_out_head, remove_positions, scoped
from model.scope import scope_of
from model.seq2seq import Beam, beam_search, greedy
from model.transformer import Trace

from explorer import memo
from explorer.plot import MASKED, SEQUENTIAL, labels, safe, style
from explorer.scope import source_check
from explorer.registry import BY_SLUG
from explorer.view import View, quote

SLUG = "encoder-decoder"
SECTIONS = BY_SLUG["encoder-decoder"].labels           # the tabs, named in explorer/registry.py
NOT_HERE = ("This page shows an encoder-decoder (the 2017 transformer: a source in, a target out). Pick "
            "**sort** or **translate** below or in the sidebar's model picker.")

INTRO = """\
The original transformer ("Attention Is All You Need", 2017) has two halves. The **encoder** reads the whole
source at once: every source word may look at every other, before and after it (no causal mask). The
**decoder** writes the target one token at a time, starting from `<bos>`: first it looks back at what it
has written so far (masked self-attention, as in the decoder-only models), then it looks at the source
through **cross-attention**: its queries come from the target, its keys and values from the encoder's output.
Then the feed-forward network, as everywhere. The decoder stops when it writes `<eos>`.

{task} Walk through the tabs from left to right.
"""
TASK_TEXT = {
    "translate": 'Cross-attention is where a translation can be read off: to write the next French word the decoder '
                 'may read the English word it translates. Whether this model does, and which head, is measured '
                 'below for your sentence.',
    "sort": 'To sort, the decoder must write the smallest digit it has not written yet, so it can look for that '
            'digit among the source\'s. Whether this model does, and which head, is measured below for your list.',
    "reverse": 'To reverse, the decoder writes the source from its end, so step t can read the source position '
               't from the end. Whether this model does, and which head, is measured below for your list.',
}

CROSS_TEXT = """\
Each small square is one head of this layer: one row per token the decoder writes, one column per source
token, and each row adds up to 1. A bright cell says "to write this word, the decoder read that source word".
"""


def task_of(v: View) -> str:
    """The picked model's task (model.tasks): from its facts, else its vocabulary (digits: sort)."""
    return scope_of(v.bundle).task or ("sort" if "9" in v.bundle.tokenizer.vocab else "translate")


def intro(v: View) -> str:
    """INTRO with what cross-attention has to do for the picked model's task."""
    return INTRO.format(task=TASK_TEXT[task_of(v)])


def written(v: View, trace: Trace) -> list[str]:
    """The target tokens, one per decoder position: what position t wrote (the last wrote <eos>)."""
    vocab = v.bundle.tokenizer.vocab
    target = trace["target"][0].tolist()
    return [vocab[i] for i in target[1:]] + ["<eos>"]


def decoded_text(v: View, trace: Trace) -> str:
    """The whole target the model wrote, as text."""
    return v.bundle.tokenizer.decode(trace["target"][0, 1:].tolist())


def row_labels(v: View, trace: Trace) -> list[str]:
    return [f"{t} → {w}" for t, w in enumerate(written(v, trace))]


def heads_figure(patterns: np.ndarray, rows: list[str], cols: list[str], title: str, chosen: int | None,
                 presenter: bool = False, masked: np.ndarray | None = None) -> go.Figure:
    """Every head's pattern (H, R, C) side by side on one 0..1 scale, the chosen head outlined in orange; cells
    `masked` (R, C) marks have no value and show grey, as on every attention chart."""
    H = patterns.shape[0]
    gap = 0.03
    width = (1 - gap * (H - 1)) / H
    rows, cols = [safe(r) for r in rows], [safe(c) for c in cols]
    custom = np.dstack([np.repeat(np.array(rows, dtype=object)[:, None], len(cols), 1),
                        np.repeat(np.array(cols, dtype=object)[None, :], len(rows), 0)])
    layout = dict(title=title, annotations=[], shapes=[],
                  coloraxis=dict(colorscale=SEQUENTIAL, cmin=0, cmax=1, colorbar=dict(title=dict(text="weight"))))
    data = []
    for h in range(H):
        axis = "" if h == 0 else str(h + 1)
        x0 = h * (width + gap)
        domain = [x0, min(1.0, x0 + width)]
        layout[f"xaxis{axis}"] = dict(domain=domain, anchor=f"y{axis}", tickvals=list(range(len(cols))),
                                      ticktext=cols, tickangle=-90, showgrid=False)
        layout[f"yaxis{axis}"] = dict(domain=[0, 1], anchor=f"x{axis}", tickvals=list(range(len(rows))),
                                      ticktext=rows, showticklabels=h == 0, autorange="reversed", showgrid=False)
        layout["annotations"].append(dict(text=f"<b>head {h}</b>" if h == chosen else f"head {h}", x=x0 + width / 2,
                                          y=1.0, xref="paper", yref="paper", showarrow=False, yanchor="bottom"))
        if h == chosen:
            layout["shapes"].append(dict(type="rect", xref="paper", yref="paper", x0=domain[0], x1=domain[1], y0=0,
                                         y1=1, line=dict(color="#EE7733", width=4), name="selected head"))
        z = patterns[h] if masked is None else np.where(masked, np.nan, patterns[h])
        data.append(go.Heatmap(z=z, coloraxis="coloraxis", hoverongaps=False, xaxis=f"x{axis}", yaxis=f"y{axis}",
                               name=f"head {h}", customdata=custom,
                               hovertemplate=f"head {h}<br>%{{customdata[0]}}<br>reads %{{customdata[1]}}"
                                             "<br>weight %{z:.4f}<extra></extra>"))
    fig = style(go.Figure(data, layout=layout), presenter, max(300, 30 * len(rows) + 170))
    return fig.update_layout(margin=dict(l=10, r=10, t=80, b=10), plot_bgcolor=MASKED)


def _cross(v: View, trace: Trace, layer: int, head: int) -> go.Figure:
    patterns = trace[f"decoder.blocks.{layer}.cross_attn.pattern"][0].double().numpy()          # (H, T, S)
    return heads_figure(patterns, row_labels(v, trace), labels(v.tokens),
                        f"Cross-attention, layer {layer}: which source token each target token reads", head,
                        v.presenter)


def _encoder(v: View, trace: Trace, layer: int, head: int) -> go.Figure:
    patterns = trace[f"encoder.blocks.{layer}.attn.pattern"][0].double().numpy()                # (H, S, S)
    return heads_figure(patterns, labels(v.tokens), labels(v.tokens),
                        f"Encoder self-attention, layer {layer}: no mask, every source token sees every other",
                        head, v.presenter)


def _decoder(v: View, trace: Trace, layer: int, head: int) -> go.Figure:
    patterns = trace[f"decoder.blocks.{layer}.attn.pattern"][0].double().numpy()                # (H, T, T)
    vocab = v.bundle.tokenizer.vocab
    reads = labels([vocab[i] for i in trace["target"][0].tolist()])
    T = patterns.shape[-1]
    return heads_figure(patterns, row_labels(v, trace), reads,
                        f"Decoder self-attention, layer {layer}: masked, each step sees only what is written",
                        head, v.presenter, masked=np.triu(np.ones((T, T), dtype=bool), 1))


def figure(kind: str, v: View, layer: int, head: int) -> go.Figure:
    """The view's figure `kind` ("cross", "encoder", "decoder"), built once per sentence, layer and head."""
    return memo.per_view({"cross": _cross, "encoder": _encoder, "decoder": _decoder}[kind], v, layer, head)


def alignment_words(v: View, trace: Trace, layer: int, head: int) -> str:
    """For each written token, the source token this head reads most, with its weight."""
    pattern = trace[f"decoder.blocks.{layer}.cross_attn.pattern"][0, head]                      # (T, S)
    parts = [f"{quote(w)} ← {quote(v.tokens[int(row.argmax())])} ({float(row.max()):.2f})"
             for w, row in zip(written(v, trace), pattern)]
    return f"Layer {layer}, head {head}: " + ", ".join(parts) + "."


# --- what each written token needs from the source, and which head reads it ----------------------------------

def _lemmas() -> dict[str, str]:
    """Every English and French form of the grammar's nouns, adjectives and verbs -> the word's English name
    (articles left out: which article a French word needs is a matter of agreement, not of one source word)."""
    forms: dict[str, set[str]] = {}
    for noun in tasks.NOUNS:
        for form in (noun.english, noun.plural, noun.french, noun.french_plural):
            forms.setdefault(form, set()).add(noun.english)
    for adjective in tasks.ADJECTIVES:
        for form in (adjective.english, *adjective.forms):
            forms.setdefault(form, set()).add(adjective.english)
    for verb in tasks.VERBS:
        for form in (verb.english, verb.plural, verb.french, verb.french_plural):
            forms.setdefault(form, set()).add(verb.english)
    return {form: names.pop() for form, names in forms.items() if len(names) == 1}


def needed(v: View, trace: Trace) -> list[list[int]]:
    """For each written token (one per decoder row), the source positions that hold what it needs: the English
    word a French word translates, or the source digit(s) a sorted or reversed digit copies. Empty when no one
    source token is needed (an article, <eos>)."""
    source, out = v.tokens, written(v, trace)
    task = task_of(v)
    if task == "translate":
        lemma = _lemmas()
        return [[p for p, s in enumerate(source) if w in lemma and lemma.get(s) == lemma[w]] for w in out]
    if task == "reverse":
        return [[len(source) - 1 - t] if t < len(source) and source[len(source) - 1 - t] == w else []
                for t, w in enumerate(out)]
    return [[p for p, s in enumerate(source) if s == w] for w in out]


@dataclass(frozen=True)
class HeadFit:
    """How well one cross-attention head reads what each written token needs."""
    layer: int
    head: int
    hits: int              # rows whose most-read source position is one the token needs
    rows: int              # rows that need a source position
    weight: float          # mean weight on the needed positions over those rows


def head_fit(v: View, trace: Trace, layer: int, head: int) -> HeadFit:
    pattern = trace[f"decoder.blocks.{layer}.cross_attn.pattern"][0, head].double()            # (T, S)
    rows = [(t, want) for t, want in enumerate(needed(v, trace)) if want]
    hits = sum(int(pattern[t].argmax()) in want for t, want in rows)
    weight = sum(float(pattern[t, want].sum()) for t, want in rows) / max(1, len(rows))
    return HeadFit(layer, head, hits, len(rows), weight)


def best_head(v: View, trace: Trace) -> HeadFit:
    """The cross-attention head (of every layer) that reads what each written token needs most often, ties
    broken by the weight it puts there."""
    cfg = v.bundle.model.cfg
    fits = [head_fit(v, trace, layer, head) for layer in range(cfg.n_layers) for head in range(cfg.n_heads)]
    return max(fits, key=lambda f: (f.hits, f.weight))


def _reads(v: View, trace: Trace, fit: HeadFit) -> list[str]:
    """'“chat” ← “cat” (0.87)' for each written token that needs a source position; a miss names what it needed."""
    pattern = trace[f"decoder.blocks.{fit.layer}.cross_attn.pattern"][0, fit.head]              # (T, S)
    parts = []
    for t, (w, want) in enumerate(zip(written(v, trace), needed(v, trace))):
        if want:
            read = int(pattern[t].argmax())
            part = f"{quote(w)} ← {quote(v.tokens[read])} ({float(pattern[t, read]):.2f})"
            parts.append(part if read in want else part + f", not {quote(v.tokens[want[0]])}")
    return parts


def crossing(v: View, trace: Trace) -> tuple[str, str, str, str] | None:
    """Two written words whose source words come in the other order (written a then b, but b's source word
    before a's), as (a, b, source of a, source of b); None when the order is kept."""
    rows = [(t, want[0]) for t, want in enumerate(needed(v, trace)) if len(want) == 1]
    out = written(v, trace)
    for i, (t1, p1) in enumerate(rows):
        for t2, p2 in rows[i + 1:]:
            if p2 < p1:
                return out[t1], out[t2], v.tokens[p1], v.tokens[p2]
    return None


def alignment_story(v: View, trace: Trace) -> str:
    """What cross-attention does for this source, measured: the head that best reads what each written token
    needs, its reading for every such token, and whether the word order changes."""
    fit = best_head(v, trace)
    thing = "word" if task_of(v) == "translate" else "digit"
    if fit.rows == 0:
        return (f"None of the tokens the model wrote copies or translates a {thing} of this source, so there is no "
                "alignment to measure here.")
    reads = "; ".join(_reads(v, trace, fit))
    where = f"**layer {fit.layer}, head {fit.head}**"
    if fit.hits == fit.rows:
        text = (f"Measured for this source: {where} reads the source {thing} each written {thing} needs, for all "
                f"{fit.rows}: {reads}.")
    elif fit.hits:
        text = (f"Measured for this source: the head that follows the source best is {where}; it reads the source "
                f"{thing} a written {thing} needs for {fit.hits} of {fit.rows}: {reads}.")
    else:
        text = (f"Measured for this source: **no head** reads the source {thing} a written {thing} needs. The "
                f"closest, {where}, reads instead: {reads}.")
    cross = crossing(v, trace) if thing == "word" else None
    if cross:
        a, b, source_a, source_b = map(quote, cross)
        text += (f" The word order changes: {a} is written before {b}, but {source_b} comes before {source_a} in "
                 "the source, so the lines of the alignment cross.")
    return text


def math_lines(v: View, trace: Trace, layer: int, head: int, row: int, col: int, terms: int = 4) -> list[str]:
    """One cross-attention weight worked out: the target's query, the source's key, scale, softmax."""
    n = f"decoder.blocks.{layer}.cross_attn"
    q = trace[f"{n}.q"][0, head, row].double()                                                 # (K,)
    group = head // (trace[f"{n}.q"].shape[1] // trace[f"{n}.k"].shape[1])                     # its key/value head
    k = trace[f"{n}.k"][0, group].double()                                                     # (S, K)
    K = q.shape[0]
    products = q * k[col]
    dot = float(products.sum())
    shown = " + ".join(f"({float(q[i]):.3f})·({float(k[col, i]):.3f})" for i in range(min(terms, K)))
    more = f" + … ({K - terms} more terms)" if K > terms else ""
    scores = (k @ q / math.sqrt(K)).numpy()                                                    # (S,)
    weight = math.exp(scores[col]) / float(np.exp(scores).sum())
    target = written(v, trace)[row]
    return [f"Target row {row} (writing {quote(target)}) and source column {col} ({quote(v.tokens[col])}), "
            f"layer {layer} head {head}, K = {K}:", "",
            f"1. **Match**: the target's query · the source's key = {shown}{more} = **{dot:.4f}**.",
            f"2. **Scale**: {dot:.4f} / √{K} = **{dot / math.sqrt(K):.4f}** (the trace's score: "
            f"{float(trace[f'{n}.scores'][0, head, row, col]):.4f}).",
            "3. **Mask**: only padding is hidden; every source token may be read (no causal mask here).",
            f"4. **Softmax** over the {len(scores)} source tokens: e^{scores[col]:.4f} / Σ = **{weight:.4f}** "
            f"(the pattern shows {float(trace[f'{n}.pattern'][0, head, row, col]):.4f})."]


# --- decoding step by step ----------------------------------------------------------------------------

def greedy_table(v: View, trace: Trace) -> pd.DataFrame:
    """Each decoding step: what the decoder had written, the token it chose and that token's probability."""
    vocab = v.bundle.tokenizer.vocab
    probs = trace["logits"][0].softmax(-1)                                                     # (T, V)
    target = trace["target"][0].tolist()
    out = target[1:] + [v.bundle.model.eos_id]
    rows = []
    for t, chosen in enumerate(out):
        runner = probs[t].clone()
        runner[chosen] = -1
        rows.append({"step": t + 1, "written so far": " ".join(vocab[i] for i in target[:t + 1]),
                     "chooses": vocab[chosen], "probability": float(probs[t, chosen]),
                     "runner-up": vocab[int(runner.argmax())], "its probability": float(runner.max())})
    return pd.DataFrame(rows)


def beam(v: View, size: int) -> Beam:
    """Beam search of the view's source, once per sentence and beam size."""
    return memo.per_view(lambda view, trace, size: beam_search(view.bundle.model, list(view.ids), size), v, size)


def beam_table(v: View, result: Beam) -> pd.DataFrame:
    """Every step's hypotheses, best first, with their total log-probability."""
    vocab = v.bundle.tokenizer.vocab
    return pd.DataFrame([{"step": s + 1, "rank": r + 1, "hypothesis": " ".join(vocab[i] for i in ids[1:]),
                          "log-probability": score, "finished": ids[-1] == v.bundle.model.eos_id}
                         for s, step in enumerate(result.steps) for r, (ids, score) in enumerate(step)])


# --- what if -----------------------------------------------------------------------------------------------

WHAT_IT_DOES = {
    "head": "This sets the output of one cross-attention head to zero at every decoding step: the decoder writes "
            "without what that head read from the source.",
    "positions": "This leaves out the source's position signal: the encoder sees which words are there but not in "
                 "which order (a bag of words). The decoder keeps its own positions.",
    "layer": "This sets the output of every cross-attention head of one layer to zero at every decoding step: that "
             "layer's decoder reads nothing from the source.",
}


def experiments(layer: int, head: int) -> dict[str, dict]:
    """The page's what-ifs by label: their edits, by trace name."""
    return {f"Knock out cross-attention head {head} of layer {layer}":
            scoped("decoder.", knock_out_head(layer, head, "cross_attn")),
            "Remove the source's positions (the encoder sees a bag of words)": scoped("encoder.", remove_positions()),
            f"Knock out all of layer {layer}'s cross-attention": {f"decoder.blocks.{layer}.cross_attn.z": torch.zeros_like}}


def what_it_does(label: str) -> str:
    """What experiment `label` changes in the model, in a sentence."""
    return WHAT_IT_DOES["head" if label.startswith("Knock out cross-attention head") else
                        "positions" if label.startswith("Remove") else "layer"]


def _whatif(v: View, trace: Trace, label: str, layer: int, head: int) -> str:
    return v.bundle.tokenizer.decode(greedy(v.bundle.model, list(v.ids), edits=experiments(layer, head)[label]))


def whatif_output(v: View, label: str, layer: int, head: int) -> str:
    """The target the model writes for the view's source with experiment `label` applied at every step,
    decoded once per sentence and experiment."""
    return memo.per_view(_whatif, v, label, layer, head)


def target_probability(v: View, trace: Trace, edits: dict | None = None) -> float:
    """The probability the model (with `edits`) gives the whole target it wrote unedited, <eos> included: the
    product of each step's probability of the token written there."""
    target = trace["target"][0].tolist()                                                       # <bos> + written
    out = torch.tensor(target[1:] + [v.bundle.model.eos_id])                                   # (T,)
    logits = trace["logits"] if not edits else v.bundle.model.run(list(v.ids), target, edits=edits)["logits"]
    logp = torch.log_softmax(logits[0].double(), -1)                                           # (T, V)
    return float(logp[torch.arange(len(out)), out].sum().exp())


def _whatif_change(v: View, trace: Trace, label: str, layer: int, head: int) -> str:
    before, after = decoded_text(v, trace), whatif_output(v, label, layer, head)
    old, new = before.split(), after.split()
    changed = sum(a != b for a, b in zip(old, new)) + abs(len(old) - len(new))
    p_before = target_probability(v, trace)
    p_after = target_probability(v, trace, experiments(layer, head)[label])
    if changed == 0:
        sure = "more" if p_after > p_before else "less"
        text = (f"What changed: the decoder still writes the same target, {sure} sure of it: the probability it "
                f"gives that whole target goes from **{p_before:.2f}** to **{p_after:.2f}**.")
    else:
        text = (f"What changed: {changed} of {max(len(old), len(new))} written tokens differ, and the probability the "
                f"model gives its original target goes from **{p_before:.2f}** to **{p_after:.2f}**.")
    check = source_check(v)
    if check is not None and check.answer is not None:
        right = [before == check.answer, after == check.answer]
        text += {(True, True): " Both are the right answer.", (True, False): " The change broke a right answer.",
                 (False, True): " With the change it is the right answer; without it, it was not.",
                 (False, False): " Neither is the right answer."}[tuple(right)]
    return text


def whatif_change(v: View, label: str, layer: int, head: int) -> str:
    """What the what-if `label` changed, measured: how many written tokens differ, the probability of the original
    target before and after, and whether each target is the task's right answer."""
    return memo.per_view(_whatif_change, v, label, layer, head)
