"""The encoder-decoder page: the source read by the encoder, the target written by the decoder, and the
cross-attention between them (trace names encoder.*, decoder.blocks.i.attn.*, decoder.blocks.i.cross_attn.*).

The view's trace is the model reading the source and, in its decoder, the target it wrote greedily:
<bos> then each written token, so row t of a decoder pattern is the step that wrote target token t.
"""
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from model.edits import knock_out_head, remove_positions, scoped
from model.seq2seq import Beam, beam_search, greedy
from model.transformer import Trace

from . import cache
from .plot import SEQUENTIAL, labels, safe, style
from .view import View, quote

SLUG = "encoder-decoder"
SECTIONS = ["Cross-attention", "Encoder self-attention", "Decoder self-attention", "Decoding step by step",
            "What if?"]
NOT_HERE = ("This page shows an encoder-decoder (the 2017 transformer: a source in, a target out). Pick "
            "**sort** or **translate** in the sidebar's model picker.")

INTRO = """\
The original transformer ("Attention Is All You Need", 2017) has two halves. The **encoder** reads the whole
source at once: every source word may look at every other, before and after it (no causal mask). The
**decoder** writes the target one token at a time, starting from `<bos>`: first it looks back at what it
has written so far (masked self-attention, as in the decoder-only models), then it looks at the source
through **cross-attention**: its queries come from the target, its keys and values from the encoder's output.
Then the feed-forward network, as everywhere. The decoder stops when it writes `<eos>`.

{task}
"""
TASK_TEXT = {
    "translate": 'Cross-attention is where translation happens: to write the next French word the decoder asks '
                 '"which English word do I need now?". With "the red cat sleeps" it should look at *cat* to write '
                 '*chat*, then at *red* to write *rouge*: the word order flips, and the alignment shows it. Walk '
                 'through the tabs from left to right.',
    "digits": 'Cross-attention is how the decoder finds what to write: to sort "7 3 9 1" it must write the smallest '
              'digit it has not written yet, so each step looks for that digit among the source\'s. Walk through '
              'the tabs from left to right.',
}

CROSS_TEXT = """\
Each small square is one head of this layer: one row per token the decoder writes, one column per source
token, and each row adds up to 1. A bright cell says "to write this word, the decoder read that source word".
"""


def intro(v: View) -> str:
    """INTRO with the example of the picked model's task (a translation or a list of digits)."""
    task = "digits" if "9" in v.bundle.tokenizer.vocab else "translate"
    return INTRO.format(task=TASK_TEXT[task])


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
                 presenter: bool = False) -> go.Figure:
    """Every head's pattern (H, R, C) side by side on one 0..1 scale, the chosen head outlined in orange."""
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
        data.append(go.Heatmap(z=patterns[h], coloraxis="coloraxis", xaxis=f"x{axis}", yaxis=f"y{axis}",
                               name=f"head {h}", customdata=custom,
                               hovertemplate=f"head {h}<br>%{{customdata[0]}}<br>reads %{{customdata[1]}}"
                                             "<br>weight %{z:.4f}<extra></extra>"))
    fig = style(go.Figure(data, layout=layout), presenter, max(300, 30 * len(rows) + 170))
    return fig.update_layout(margin=dict(l=10, r=10, t=80, b=10))


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
    reads = labels([v.bundle.tokenizer.vocab[i] for i in trace["target"][0].tolist()])
    return heads_figure(patterns, row_labels(v, trace), reads,
                        f"Decoder self-attention, layer {layer}: masked, each step sees only what is written",
                        head, v.presenter)


def figure(kind: str, v: View, layer: int, head: int) -> go.Figure:
    """The view's figure `kind` ("cross", "encoder", "decoder"), built once per sentence, layer and head."""
    return cache.figure({"cross": _cross, "encoder": _encoder, "decoder": _decoder}[kind], v, layer, head)


def alignment_words(v: View, trace: Trace, layer: int, head: int) -> str:
    """For each written token, the source token this head reads most, with its weight."""
    pattern = trace[f"decoder.blocks.{layer}.cross_attn.pattern"][0, head]                      # (T, S)
    parts = [f"{quote(w)} ← {quote(v.tokens[int(row.argmax())])} ({float(row.max()):.2f})"
             for w, row in zip(written(v, trace), pattern)]
    return f"Layer {layer}, head {head}: " + ", ".join(parts) + "."


def math_lines(v: View, trace: Trace, layer: int, head: int, row: int, col: int, terms: int = 4) -> list[str]:
    """One cross-attention weight worked out: the target's query, the source's key, scale, softmax."""
    n = f"decoder.blocks.{layer}.cross_attn"
    q = trace[f"{n}.q"][0, head, row].double()                                                 # (K,)
    k = trace[f"{n}.k"][0, head].double()                                                      # (S, K)
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
    return cache.figure(lambda view, trace, size: beam_search(view.bundle.model, list(view.ids), size), v, size)


def beam_table(v: View, result: Beam) -> pd.DataFrame:
    """Every step's hypotheses, best first, with their total log-probability."""
    vocab = v.bundle.tokenizer.vocab
    return pd.DataFrame([{"step": s + 1, "rank": r + 1, "hypothesis": " ".join(vocab[i] for i in ids[1:]),
                          "log-probability": score, "finished": ids[-1] == v.bundle.model.eos_id}
                         for s, step in enumerate(result.steps) for r, (ids, score) in enumerate(step)])


# --- what if -----------------------------------------------------------------------------------------------

def experiments(layer: int, head: int) -> dict[str, dict]:
    """The page's what-ifs by label: their edits, by trace name."""
    return {f"Knock out cross-attention head {head} of layer {layer}":
            scoped("decoder.", knock_out_head(layer, head, "cross_attn")),
            "Remove the source's positions (the encoder sees a bag of words)": scoped("encoder.", remove_positions()),
            f"Knock out all of layer {layer}'s cross-attention": {f"decoder.blocks.{layer}.cross_attn.z": torch.zeros_like}}


def _whatif(v: View, trace: Trace, label: str, layer: int, head: int) -> str:
    return v.bundle.tokenizer.decode(greedy(v.bundle.model, list(v.ids), edits=experiments(layer, head)[label]))


def whatif_output(v: View, label: str, layer: int, head: int) -> str:
    """The target the model writes for the view's source with experiment `label` applied at every step,
    decoded once per sentence and experiment."""
    return cache.figure(_whatif, v, label, layer, head)
