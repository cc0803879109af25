"""Step 8, why this prediction: the logit split into what each part of the model wrote, the routes along which the
tokens built the final stream, and activation patching between two sentences.

Builders read model/attribution.py and model/patching.py and return tables, Plotly figures and Markdown; every
sentence that states a number is computed here from the current run (tests/test_why.py recomputes each one).
"""
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from model import attribution as model_attribution
from model import patching as model_patching
from model.tokenizers import Tokenizer

from explorer.plot import heatmap, labels, safe, style, token_label, visible
from explorer.registry import BY_SLUG
from explorer.view import View, quote

SECTIONS = BY_SLUG["why"].labels                 # the tabs, named in explorer/registry.py
TOP_TARGETS = 5                                   # the favourites offered as the token to explain
BARS = 14                                         # parts drawn one by one; the rest share one bar
PRESENTER_BARS = 7                                # on a projector: fewer, taller bars
ROUTE_THRESHOLD = 0.02                            # llm-transparency-tool uses 0.04; a tiny model's heads are weaker
SMALL_GAP = 0.5                                   # a logit-difference gap below this is called small
PROMOTED = 8                                      # tokens listed as promoted and as suppressed
PUSH, PULL, TOTAL, REST = "#CC3311", "#0077BB", "#6E6E6E", "#9E9E9E"   # greys readable on a light and a dark page
KIND_WORDS = {"embed": "the embeddings", "head": "the attention heads", "mlp": "the feed-forward layers (MLPs)",
              "bias": "the biases"}

EXPLANATION = """\
**Why this word?** The model's last vector is a **sum**: the token's embedding, its position's embedding, and
whatever every attention head and every feed-forward layer (MLP) added to the residual stream on the way up.
The score of a token (its *logit*) is read off that sum by the final norm and the unembedding.

1. **Attribution.** Hold the final norm's scale fixed at the value this sentence really had; then the score
   splits exactly into one share per part, and the shares add up to the score the model computed. A long bar
   to the right pushed the token up; a bar to the left held it back. *Why X rather than Y?* is the same split
   for the difference of two scores.
2. **Contribution routes.** Each head mixes in earlier tokens. Following the biggest contributions back from the
   chosen position, layer by layer, draws the routes along which the sentence's tokens built the prediction
   (Ferrando & Voita, 2024).
3. **Patching.** Type a second sentence with one word changed. Run the model on it, but put back one piece of
   the first sentence's computation (the stream at one layer and position, or one head's output): how much of
   the original answer comes back tells you where the model keeps the information that made the difference.

A bar says what a part *wrote*, not what would happen without it: a part can also change what later layers
read. Patching measures that second kind of effect.
"""

RESIDUAL, HEAD_EDGE, MLP_EDGE = "#888888", "#0077BB", "#EE7733"


def target_token(tokenizer: Tokenizer, word: str) -> int:
    """The id of a typed word, when it is one token of the model's vocabulary (for GPT-2's BPE, " word" is
    tried first: a word inside a sentence starts with its space); otherwise a ValueError in words."""
    word = word.strip()
    if not word:
        raise ValueError("Type a word to explain.")
    for text in (" " + word, word) if tokenizer.unk_id is None else (word,):
        ids = tokenizer.encode(text)
        if len(ids) == 1 and ids[0] != tokenizer.unk_id:
            return ids[0]
    ids = tokenizer.encode(word)
    if tokenizer.unk_id is not None and tokenizer.unk_id in ids:
        raise ValueError(f"{quote(word)} is not in this model's vocabulary: it has no score to explain. "
                         "Pick one of its favourites or another word it knows.")
    raise ValueError(f"{quote(word)} is {len(ids)} tokens for this model, and a score belongs to one token. "
                     "Type a single token.")


def stream_tokens(view: View, trace) -> list[str]:
    """The tokens of the stream the logits are read from: the sentence, or for an encoder-decoder the target its
    decoder read (<bos> first, then what it wrote)."""
    if "target" in trace:
        vocab = view.bundle.tokenizer.vocab
        return [vocab[i] for i in trace["target"][0].tolist()]
    return view.tokens


def favourites(trace, position: int, n: int = TOP_TARGETS) -> list[int]:
    """The `n` tokens with the highest logits after `position`, best first."""
    logits = trace["logits"][0, position]
    return logits.topk(min(n, logits.numel())).indices.tolist()


def attribution(view: View, trace, position: int, target: int, other: int | None = None) -> model_attribution.Attribution:
    """The attribution of `target` (and `other`) at `position` of the view's run."""
    targets = [target] if other is None else [target, other]
    return model_attribution.attribute(view.bundle.model, trace, position, targets)


def attribution_table(view: View, result: model_attribution.Attribution, target: int, other: int | None = None) -> pd.DataFrame:
    """One row per part, in the model's order: its contribution to the target's logit (and the other's, and the
    difference). The CSV download is this table."""
    vocab = view.bundle.tokenizer.vocab
    table = pd.DataFrame({
        "part": [p.label for p in result.parts], "kind": [p.kind for p in result.parts],
        "layer": pd.array([p.layer for p in result.parts], dtype="Int64"),
        "head": pd.array([p.head for p in result.parts], dtype="Int64"),
        f"to “{visible(vocab[target])}”": result.column(target).numpy()})
    if other is not None:
        table[f"to “{visible(vocab[other])}”"] = result.column(other).numpy()
        table["difference"] = result.difference(target, other).numpy()
    return table


def contribution_figure(result: model_attribution.Attribution, values: torch.Tensor, title: str, total_label: str,
                        presenter: bool = False, bars: int = BARS) -> go.Figure:
    """Horizontal bars, largest first: the `bars` largest parts one by one, the rest as one bar, then the total
    (their sum, which is the model's logit or logit difference)."""
    values = values.numpy()
    order = np.argsort(-np.abs(values), kind="stable")
    shown, rest = order[:bars], order[bars:]
    names = [safe(result.parts[i].label) for i in shown]
    numbers = [float(values[i]) for i in shown]
    colours = [PUSH if v >= 0 else PULL for v in numbers]
    if len(rest):
        names.append(f"the other {len(rest)} parts")
        numbers.append(float(values[rest].sum()))
        colours.append(REST)
    names.append(safe(total_label))
    numbers.append(float(values.sum()))
    colours.append(TOTAL)
    heads = [[p.layer, p.head] if p.kind == "head" and p.attention != "cross_attn" else [-1, -1]
             for p in (result.parts[i] for i in shown)]
    heads += [[-1, -1]] * (len(names) - len(heads))          # the rest and the total open nothing
    fig = go.Figure(go.Bar(
        x=numbers, y=names, orientation="h", marker_color=colours, text=[f"{v:+.2f}" for v in numbers],
        customdata=heads,                                    # (layer, head) of a self-attention head's bar
        textposition="outside", cliponaxis=False, constraintext="none",
        hovertemplate="<b>%{y}</b><br>%{x:+.4f}<extra></extra>"),
        layout=dict(title=title, xaxis=dict(title="contribution to the score (logit)", zeroline=True,
                                            zerolinecolor="#888888"),
                    yaxis=dict(autorange="reversed", type="category")))
    span = max(abs(min(numbers)), abs(max(numbers))) or 1.0
    fig.update_xaxes(range=[min(0.0, min(numbers)) - 0.25 * span, max(0.0, max(numbers)) + 0.25 * span])
    return style(fig, presenter, 60 + 26 * len(names))


def attribution_figure(view: View, trace, position: int, target: int, other: int | None = None) -> go.Figure:
    """The bars of `target`'s logit at `position` or, with `other`, of the difference (a builder for memo.per_view:
    remembered per model, sentence and choice)."""
    result = attribution(view, trace, position, target, other)
    vocab, after = view.bundle.tokenizer.vocab, stream_tokens(view, trace)[position]
    bars = PRESENTER_BARS if view.presenter else BARS        # fewer, larger bars on a projector's first screen
    if other is None:
        return contribution_figure(result, result.column(target),
                                   f"Why “{token_label(vocab[target])}” after “{token_label(after)}”",
                                   "total = the model's logit", view.presenter, bars)
    return contribution_figure(result, result.difference(target, other),
                               f"“{token_label(vocab[target])}” minus “{token_label(vocab[other])}”",
                               "total = the difference", view.presenter, bars)


def signed(value: float) -> str:
    return f"{value:+.2f}".replace("-", "−")


def part_words(part: model_attribution.Part) -> str:
    """A part as a sentence says it: "layer 1 head 3", "the MLP of layer 0", "the token embedding"."""
    if part.kind == "head":
        cross = "cross-attention " if part.attention == "cross_attn" else ""
        return f"layer {part.layer} {cross}head {part.head}"
    if part.kind == "mlp":
        return f"the MLP of layer {part.layer}"
    return f"the {part.label}"


def source_story(view: View, trace, result: model_attribution.Attribution, index: int, target: int,
                 other: int | None = None) -> str:
    """For a head: which source token most of its contribution comes from ("... most of it, +1.80, comes from
    “dog” at position 2")."""
    part = result.parts[index]
    sources = model_attribution.head_sources(view.bundle.model, trace, result.position, part.layer, part.head, target,
                             part.attention or "attn", other)
    value = float(sources.sum())
    best = int(sources.argmax()) if value >= 0 else int(sources.argmin())
    cross = part.attention == "cross_attn"                      # it read the source, not the stream's tokens
    tokens = view.tokens if cross else stream_tokens(view, trace)
    where = f"{quote(tokens[best])} at {'source ' if cross else ''}position {best}"
    return f"most of it ({signed(float(sources[best]))}) comes from {where}"


def attribution_story(view: View, trace, result: model_attribution.Attribution, target: int) -> str:
    """What the bars say, in words: the logit, the biggest push for and against, the kinds' totals, and for the
    strongest head the token it read."""
    vocab = view.bundle.tokenizer.vocab
    values = result.column(target)
    logit = float(result.logits[result.targets.index(target)])
    word = quote(vocab[target])
    up, down = int(values.argmax()), int(values.argmin())
    after = quote(stream_tokens(view, trace)[result.position])
    lines = [f"The model gives {word} a score (logit) of **{logit:.2f}** after {after} (position {result.position}); "
             f"the {len(values)} parts below add up to it."]
    if values[up] > 0:
        lines.append(f"The biggest push up comes from **{part_words(result.parts[up])}** "
                     f"({signed(float(values[up]))}).")
    if values[down] < 0:
        lines.append(f"The biggest push down comes from **{part_words(result.parts[down])}** "
                     f"({signed(float(values[down]))}).")
    kinds = [(k, float(sum(v for p, v in zip(result.parts, values.tolist()) if p.kind == k))) for k in KIND_WORDS]
    lines.append("Together: " + ", ".join(f"{words} {signed(v)}" for (k, v), words in
                                          zip(kinds, KIND_WORDS.values())) + ".")
    heads = [i for i, p in enumerate(result.parts) if p.kind == "head"]
    if heads:
        strongest = max(heads, key=lambda i: abs(float(values[i])))
        lines.append(f"{part_words(result.parts[strongest]).capitalize()} adds {signed(float(values[strongest]))} "
                     f"to {word}; {source_story(view, trace, result, strongest, target)}.")
    return " ".join(lines)


def rather_story(view: View, result: model_attribution.Attribution, target: int, other: int) -> str:
    """Why `target` rather than `other`: the gap and the parts that make most of it."""
    vocab = view.bundle.tokenizer.vocab
    a, b = (float(result.logits[result.targets.index(t)]) for t in (target, other))
    difference = result.difference(target, other)
    best = int(difference.argmax()) if a >= b else int(difference.argmin())
    ahead, behind = (quote(vocab[target]), quote(vocab[other])) if a >= b else (quote(vocab[other]), quote(vocab[target]))
    return (f"{quote(vocab[target])} scores {a:.2f} and {quote(vocab[other])} {b:.2f}: a difference of "
            f"**{signed(a - b)}**, which the parts below add up to. The part that puts {ahead} furthest ahead of "
            f"{behind} is **{part_words(result.parts[best])}** ({signed(float(difference[best]))}).")


def head_story(view: View, trace, result: model_attribution.Attribution, layer: int, head: int, target: int) -> str:
    """One head's bar in words, with the source token most of it comes from."""
    index = next(i for i, p in enumerate(result.parts) if p.kind == "head" and p.attention == "attn"
                 and p.layer == layer and p.head == head)
    value = float(result.column(target)[index])
    rank = heads_by_size(result, result.column(target)).index(index) + 1
    heads = sum(p.kind == "head" for p in result.parts)
    return (f"Layer {layer} head {head} adds {signed(value)} to {quote(view.bundle.tokenizer.vocab[target])} "
            f"(number {rank} of {heads} heads by size); {source_story(view, trace, result, index, target)}.")


DECODER = ("{name} is an encoder-decoder: this page explains its **decoder**, which wrote {written} for your "
           "source. Pick a position of what it wrote; the parts are the decoder's embeddings, its self-attention "
           "heads, its **cross-attention** heads (which read the source), its MLPs and its biases. Contribution routes "
           "and patching are drawn for decoder-only models (tinytales, roses, GPT-2); the encoder-decoder page shows "
           "the encoder and cross-attention themselves.")


def decoder_note(view: View, trace) -> str:
    """What the page explains for an encoder-decoder."""
    written = stream_tokens(view, trace)[1:]
    return DECODER.format(name=view.name, written=quote(" ".join(written)) if written else "nothing")


def heads_by_size(result: model_attribution.Attribution, values: torch.Tensor) -> list[int]:
    """The indices of the head parts, largest contribution (in size) first."""
    heads = [i for i, p in enumerate(result.parts) if p.kind == "head"]
    return sorted(heads, key=lambda i: -abs(float(values[i])))


# --- contribution routes -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Node:
    """A state of the stream on the routes graph: at `position`, "mid" (after block `layer`'s attention) or
    "post" (leaving block `layer`), or the embeddings (layer -1)."""
    layer: int
    state: str
    position: int

    @property
    def row(self) -> int:
        """Its row in the figure, from the embeddings (0) up."""
        return 0 if self.layer < 0 else 1 + 2 * self.layer + (self.state == "post")

    @property
    def sublayer(self) -> str:
        """What wrote this state's update: "attn" (mid) or "mlp" (post)."""
        return "attn" if self.state == "mid" else "mlp"


def edge_ends(edge: model_attribution.Edge) -> tuple[Node, Node]:
    """Where an edge starts and ends on the graph."""
    if edge.into == "mid":
        start = Node(edge.layer - 1, "post", edge.source) if edge.layer else Node(-1, "embed", edge.source)
        return start, Node(edge.layer, "mid", edge.target)
    return Node(edge.layer, "mid", edge.source), Node(edge.layer, "post", edge.target)


def clicked_head(click: dict | None) -> tuple[int, int] | None:
    """The (layer, head) of the attribution bar a click chose (see `contribution_figure`), or None."""
    data = (click or {}).get("customdata")
    if isinstance(data, list) and len(data) == 2 and all(isinstance(v, int) for v in data) and data[0] >= 0:
        return data[0], data[1]
    return None


def clicked_node(click: dict | None, nodes: list[Node]) -> int | None:
    """The index in `nodes` (route_nodes) of the stream state a click on the routes chose, or None."""
    data = (click or {}).get("customdata")
    where = {(n.row, n.position): i for i, n in enumerate(nodes)}
    return where.get(tuple(data)) if isinstance(data, list) and len(data) == 2 else None


def route_nodes(edges: list[model_attribution.Edge]) -> list[Node]:
    """Every state an update was written into on the routes (the nodes a student can open), top layer first."""
    nodes = {edge_ends(e)[1] for e in edges if e.kind != "residual"}
    return sorted(nodes, key=lambda n: (-n.row, n.position))


def routes_figure(view: View, edges: list[model_attribution.Edge], position: int, threshold: float,
                  presenter: bool = False) -> go.Figure:
    """The routes: positions across, the stream's states up (embeddings, then after attention and after the MLP
    of each layer); a line per kept contribution, as wide as its weight: blue through a head, orange through an
    MLP, grey along the residual stream."""
    L, T = view.bundle.model.cfg.n_layers, len(view.tokens)
    data = []
    for kind, colour, name in (("residual", RESIDUAL, "residual stream"), ("head", HEAD_EDGE, "attention head"),
                               ("mlp", MLP_EDGE, "MLP")):
        first = True
        for edge in (e for e in edges if e.kind == kind):
            start, end = edge_ends(edge)
            shift = 0.18 if kind == "mlp" else 0.0
            what = f"head {edge.head}" if kind == "head" else name
            data.append(go.Scatter(
                x=[start.position + shift, end.position + shift], y=[start.row, end.row], mode="lines",
                line=dict(color=colour, width=2 + 10 * edge.weight), opacity=0.5 + 0.5 * edge.weight,
                name=name, legendgroup=kind, showlegend=first,
                hovertemplate=(f"layer {edge.layer}, {safe(what)}<br>from {safe(view.tokens[edge.source])} "
                               f"(position {edge.source})<br>weight {edge.weight:.3f}<extra></extra>")))
            first = False
    nodes = sorted({n for e in edges for n in edge_ends(e)}, key=lambda n: (n.row, n.position))
    data.append(go.Scatter(
        x=[n.position for n in nodes], y=[n.row for n in nodes], mode="markers", name="stream state",
        marker=dict(size=[14 if n.position == position and n.row == 2 * L else 9 for n in nodes], color=TOTAL),
        hovertemplate="%{text}<extra></extra>", showlegend=False, customdata=[[n.row, n.position] for n in nodes],
        text=[f"{safe(view.tokens[n.position])} (position {n.position}), " +
              ("embeddings" if n.layer < 0 else f"layer {n.layer} after {'attention' if n.state == 'mid' else 'the MLP'}")
              for n in nodes]))
    rows = ["embeddings"] + [f"L{i} {w}" for i in range(L) for w in ("attention", "MLP")]
    fig = go.Figure(data, layout=dict(
        title=f"Routes into the prediction after “{token_label(view.tokens[position])}” (weights ≥ {threshold:g})",
        xaxis=dict(tickvals=list(range(T)), ticktext=[safe(t) for t in labels(view.tokens)], title="position",
                   range=[-0.5, T - 0.5]),
        yaxis=dict(tickvals=list(range(len(rows))), ticktext=rows, range=[-0.5, len(rows) - 0.5]),
        legend=dict(orientation="h", y=-0.25, x=0)))
    return style(fig, presenter, 160 + 70 * len(rows))


def routes_story(view: View, edges: list[model_attribution.Edge], position: int) -> str:
    """Which earlier tokens reach the position through heads, the strongest first."""
    into = {}
    for e in edges:
        if e.kind == "head" and e.source != e.target:
            into[e.source] = into.get(e.source, 0.0) + e.weight
    kept = len(edges)
    if not into:
        return (f"{kept} contributions pass the threshold, and none of them brings another token in: at this "
                "threshold the prediction is built from this position's own stream. Lower the threshold to see "
                "weaker routes.")
    best = max(into, key=into.get)
    tokens = "1 earlier token reaches" if len(into) == 1 else f"{len(into)} earlier tokens reach"
    return (f"{kept} contributions pass the threshold. Through attention heads, {tokens} "
            f"{quote(view.tokens[position])}; the strongest is "
            f"{quote(view.tokens[best])} (position {best}, weights adding up to {into[best]:.2f}).")


def node_table(view: View, trace, node: Node, position: int, n: int = PROMOTED) -> pd.DataFrame:
    """The tokens a node's update promotes most and suppresses most, read at `position`'s final norm."""
    scores = model_attribution.node_update_logits(view.bundle.model, trace, node.position, node.layer, node.sublayer)
    vocab = view.bundle.tokenizer.vocab
    up = scores.topk(n).indices.tolist()
    down = scores.topk(n, largest=False).indices.tolist()
    return pd.DataFrame({"promotes": [visible(vocab[i]) for i in up], "up by": [float(scores[i]) for i in up],
                         "suppresses": [visible(vocab[i]) for i in down],
                         "down by": [float(scores[i]) for i in down]})


def node_label(view: View, node: Node) -> str:
    what = "attention" if node.state == "mid" else "MLP"
    return f"layer {node.layer} {what} at {node.position}: {visible(view.tokens[node.position])}"


def node_story(view: View, node: Node, table: pd.DataFrame) -> str:
    what = "attention" if node.state == "mid" else "MLP"
    return (f"What layer {node.layer}'s {what} wrote at {quote(view.tokens[node.position])} (position "
            f"{node.position}), read directly by the unembedding: it pushes {quote(table.promotes[0])} up most "
            f"({signed(table['up by'][0])}) and {quote(table.suppresses[0])} down most "
            f"({signed(table['down by'][0])}).")


# --- activation patching -------------------------------------------------------------------------------------

SWAPS = {"cat": "dog", "dog": "cat", "he": "she", "she": "he", "boy": "girl", "girl": "boy", "red": "blue",
         "blue": "red", "big": "small", "small": "big", "mary": "john", "john": "mary", "tom": "anna", "anna": "tom"}


def suggested_corruption(view: View) -> str | None:
    """The sentence with one word swapped for a word of the same kind it knows ("cat" -> "dog"), or None."""
    words = view.text.split()
    vocab = set(view.bundle.tokenizer.vocab) if view.bundle.tokenizer.unk_id is not None else None
    for i, word in enumerate(words):
        swap = SWAPS.get(word.lower())
        if swap and (vocab is None or swap in vocab):
            return " ".join(words[:i] + [swap] + words[i + 1:])
    return None


@dataclass(frozen=True)
class Patching:
    """The pair and both grids."""
    pair: model_patching.Pair
    resid: torch.Tensor            # (L, T)
    heads: torch.Tensor            # (L, H)


def patching(model, clean: tuple[int, ...], corrupted: tuple[int, ...], position: int, answer: int | None = None,
             other: int | None = None, progress=None) -> Patching:
    """Both grids for a sentence pair (model/patching.py), comparing `answer` with `other` (by default the clean
    run's favourite with the corrupted run's); `progress(done, total)` follows the patched runs."""
    pair = model_patching.make_pair(model, list(clean), list(corrupted), position, answer, other)
    L, T, H = model.cfg.n_layers, len(clean), model.cfg.n_heads
    total = L * T + L * H

    def report(offset):
        return None if progress is None else (lambda done, _: progress(offset + done, total))
    resid = model_patching.resid_pre_grid(model, pair, progress=report(0))
    heads = model_patching.head_out_grid(model, pair, progress=report(L * T))
    return Patching(pair, resid, heads)


@dataclass(frozen=True)
class Estimate:
    """Attribution patching's estimates of both grids (one forward and one backward pass)."""
    resid: torch.Tensor            # (L, T)
    heads: torch.Tensor            # (L, H)


def estimate(model, clean: tuple[int, ...], corrupted: tuple[int, ...], position: int, answer: int | None = None,
             other: int | None = None, progress=None) -> Estimate:
    """Both grids estimated by attribution patching, for the same pair as `patching`."""
    pair = model_patching.make_pair(model, list(clean), list(corrupted), position, answer, other)
    return Estimate(model_patching.resid_pre_estimate(model, pair), model_patching.head_out_estimate(model, pair))


def agreement(exact: torch.Tensor, estimated: torch.Tensor) -> tuple[float | None, float, tuple[int, int]]:
    """(correlation over the cells, None when either grid is constant; the largest gap; its cell)."""
    x, y = exact.flatten().double(), estimated.flatten().double()
    r = None if x.std() == 0 or y.std() == 0 else float(torch.corrcoef(torch.stack([x, y]))[0, 1])
    gap = (exact - estimated).abs()
    cell = divmod(int(gap.argmax()), exact.shape[1])
    return r, float(gap.max()), cell


def agreement_story(view: View, result: Patching, guess: Estimate) -> str:
    """How well the one-pass estimate matches the exact grids."""
    parts = []
    for what, exact, estimated, where in (
            ("stream", result.resid, guess.resid, lambda c: f"layer {c[0]}, {quote(view.tokens[c[1]])} (position {c[1]})"),
            ("head", result.heads, guess.heads, lambda c: f"layer {c[0]} head {c[1]}")):
        r, gap, cell = agreement(exact, estimated)
        shape = f"correlation {r:.2f}" if r is not None else "no correlation (a grid is constant)"
        parts.append(f"the {what} grid: {shape}, largest gap {gap:.2f} ({where(cell)}, exact "
                     f"{float(exact[cell]):.2f}, estimate {float(estimated[cell]):.2f})")
    return ("The estimate takes one forward and one backward pass instead of one run per cell: it multiplies each "
            "difference between the runs by how fast the score gap changes with it, a straight-line guess. Against "
            "the exact grids, " + "; ".join(parts) + ". Where the model bends (a softmax, a norm), the guess misses.")


def estimate_figure(view: View, guess: Estimate, which: str, presenter: bool = False) -> go.Figure:
    """An estimated grid, drawn as its exact twin is."""
    L = guess.resid.shape[0]
    if which == "resid":
        return heatmap(guess.resid, [f"layer {i}" for i in range(L)], labels(view.tokens),
                       title="Estimated: the stream entering a layer", row_title="entering", col_title="position",
                       value_name="estimated", zmin=-1, zmax=1, text=True, presenter=presenter)
    return heatmap(guess.heads, [f"layer {i}" for i in range(L)], [f"head {h}" for h in range(guess.heads.shape[1])],
                   title="Estimated: one head's output", row_title="layer", col_title="head", value_name="estimated",
                   zmin=-1, zmax=1, text=True, presenter=presenter)


def pair_story(view: View, result: Patching, corrupted_tokens: list[str]) -> str:
    vocab = view.bundle.tokenizer.vocab
    pair = result.pair
    changed = [t for t, (a, b) in enumerate(zip(pair.clean, pair.corrupted)) if a != b]
    where = ", ".join(f"{quote(view.tokens[t])} → {quote(corrupted_tokens[t])} (position {t})" for t in changed)
    return (f"The sentences differ at {where}. After {quote(view.tokens[pair.position])} (position "
            f"{pair.position}) we compare {quote(vocab[pair.answer])} with {quote(vocab[pair.other])}: "
            f"score difference {signed(pair.clean_diff)} in your sentence, {signed(pair.corrupted_diff)} in the "
            "changed one. Each cell below is the share of that gap a patch brings back: 1 all of it, 0 none."
            + (f" The gap is small ({signed(pair.clean_diff - pair.corrupted_diff)}): the changed word barely matters "
               "here, so the shares are ratios of small numbers. A position where it matters more shows more."
               if abs(pair.clean_diff - pair.corrupted_diff) < SMALL_GAP else ""))


def resid_story(view: View, result: Patching) -> str:
    """The cell of the residual grid that restores most, and the position that restores most entering the last layer."""
    grid = result.resid
    layer, t = divmod(int(grid.argmax()), grid.shape[1])
    last = grid[-1]
    t_last = int(last.argmax())
    return (f"Putting back the stream of {quote(view.tokens[t])} (position {t}) entering layer {layer} restores "
            f"**{float(grid[layer, t]):.0%}**. Entering the last layer ({grid.shape[0] - 1}), the position that "
            f"restores most is {quote(view.tokens[t_last])} (position {t_last}, {float(last[t_last]):.0%}).")


def heads_story(result: Patching) -> str:
    grid = result.heads
    layer, h = divmod(int(grid.abs().argmax()), grid.shape[1])
    share = float(grid[layer, h])
    effect = f"it restores {share:.0%} of the gap" if share >= 0 else \
        f"it moves the difference {-share:.0%} of the gap further away from your sentence's"
    return f"Of the {grid.numel()} heads, putting back **layer {layer} head {h}** alone changes most: {effect}."


def resid_figure(view: View, result: Patching, presenter: bool = False) -> go.Figure:
    grid = result.resid
    return heatmap(grid, [f"layer {i}" for i in range(grid.shape[0])], labels(view.tokens),
                   title="Restored by the stream entering a layer", row_title="entering",
                   col_title="position", value_name="restored", zmin=-1, zmax=1, text=True, presenter=presenter)


def heads_figure(result: Patching, presenter: bool = False) -> go.Figure:
    grid = result.heads
    return heatmap(grid, [f"layer {i}" for i in range(grid.shape[0])], [f"head {h}" for h in range(grid.shape[1])],
                   title="Restored by one head's output (all positions)", row_title="layer", col_title="head",
                   value_name="restored", zmin=-1, zmax=1, text=True, presenter=presenter)


def grid_csv(grid: torch.Tensor, columns: list[str]) -> str:
    """A patching grid as CSV: one row per layer."""
    table = pd.DataFrame(grid.numpy(), columns=columns)
    table.insert(0, "layer", range(grid.shape[0]))
    return table.to_csv(index=False)
