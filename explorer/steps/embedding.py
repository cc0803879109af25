"""Step 2, embedding: every token id picks one learned row of numbers from the embedding matrix.

Plain functions of a View, a Trace or the embedding matrix that return figures, tables and text; the page
only lays them out. The vocabulary's 2-D map (a PCA) is computed once per model (`vocab_pca`).
"""
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from model import corpora
from model.tokenizers import UNK
from model.transformer import Trace

from explorer import memo
from explorer.plot import as_numpy, heatmap, safe, style, token_label, visible, window
from explorer.steps.tokenization import UNITS
from explorer.registry import BY_SLUG
from explorer.view import View, quote

N_NEIGHBOURS = 8
MATH_VALUES = 6                # how many numbers of a row the math panel writes out
PCA_CHUNK = 8192               # rows converted to double at a time by pca_2d


# --- explanations ------------------------------------------------------------------------

# Words the tiny tales use in the same places (model/corpora.py): a model that reads them as single tokens is
# checked for whether training put each group together (group_neighbours).
WORD_GROUPS = {"animal": list(corpora.ANIMALS), "feeling": [w for w in corpora.FEELINGS if w not in ("cold", "wet")]}
NEAREST = 5             # each word's nearest rows looked at
MIN_GROUP = 4           # a group is checked when at least this many of its words are single tokens


@dataclass(frozen=True)
class GroupNeighbours:
    """How close the rows of one group of words sit: of each word's NEAREST nearest rows, how many are the group's."""
    name: str               # "animal", "feeling"
    words: int              # the group's words this model reads as one token each
    same: float             # of each word's NEAREST nearest rows, on average this many are the group's
    chance: float           # what NEAREST rows drawn at random would hold on average

    @property
    def close(self) -> bool:
        """Most of a word's nearest rows are its group's, and many times more than chance would give."""
        return self.same >= NEAREST / 2 and self.same > 5 * self.chance


def group_ids(tokenizer, words: list[str]) -> list[int]:
    """The ids of the words this tokenizer reads as one known token each (a byte-level BPE with the space it
    puts in front of a word)."""
    ids = []
    for word in words:
        pieces = tokenizer.pieces(word if tokenizer.kind != "bpe" else " " + word)
        if len(pieces) == 1 and not pieces[0].unknown and (tokenizer.kind != "char" or len(word) == 1):
            ids.append(pieces[0].id)
    return ids


def group_neighbours(weight: torch.Tensor, tokenizer) -> list[GroupNeighbours]:
    """For each of WORD_GROUPS with at least MIN_GROUP single-token words: how many of each word's NEAREST
    nearest rows (cosine, itself left out) belong to the group. Light for GPT-2: one (V x D) @ (D x n) product."""
    W = weight.detach()
    V = W.shape[0]
    norms = W.norm(dim=1).clamp_min(1e-12)                                           # (V,)
    found = []
    for name, words in WORD_GROUPS.items():
        ids = list(dict.fromkeys(group_ids(tokenizer, words)))
        if len(ids) < MIN_GROUP or V <= NEAREST:
            continue
        sims = (W @ W[ids].T) / (norms[:, None] * norms[ids][None, :])              # (V, n)
        sims[ids, range(len(ids))] = -math.inf                                       # not itself
        nearest = sims.topk(NEAREST, dim=0).indices                                  # (NEAREST, n)
        same = float(torch.isin(nearest, torch.tensor(ids)).sum()) / len(ids)
        found.append(GroupNeighbours(name, len(ids), same, NEAREST * (len(ids) - 1) / (V - 1)))
    return found


def nearest_example(v: View) -> str:
    """The nearest row to the first known token of the sentence, as an example from this model (markdown)."""
    W, vocab, unk = embedding_matrix(v), v.bundle.tokenizer.vocab, v.bundle.tokenizer.unk_id
    known = [i for i in v.prepared.ids if i != unk]
    if not known or W.shape[0] < 2:
        return ""
    token = known[0]
    norms = W.norm(dim=1).clamp_min(1e-12)
    sims = (W @ W[token]) / (norms * norms[token])                                   # (V,)
    sims[token] = -math.inf
    if unk is not None:
        sims[unk] = -math.inf
    other = int(sims.argmax())
    return (f" For example, in this model the row nearest to that of {quote(vocab[token])} is the row of "
            f"{quote(vocab[other])} (cosine similarity {float(sims[other]):.2f}); the tab “{SECTIONS[3]}” shows "
            "the nearest rows of any token.")


def closeness(v: View) -> str:
    """Whether words used in the same way sit close together in this model: measured on groups of words when it
    reads them (animals, feelings), else a general sentence and this model's own nearest row to an example."""
    groups = memo.per_model(lambda bundle: group_neighbours(embedding_matrix_of(bundle), bundle.tokenizer),
                             v.name, v.bundle)
    close = [g for g in groups if g.close]
    measured = "; ".join(f"of each {g.name}'s {NEAREST} nearest rows, on average **{g.same:.1f}** are {g.name}s"
                         f" too (rows drawn at random: {g.chance:.2g})" for g in groups)
    if close:
        together = ", ".join(f"{g.name}s close to {g.name}s" for g in close)
        text = ("Training moved the tokens around until words that are used in the same way ended up near each "
                f"other: {together}. Measured in this model: {measured}.")
        return text
    text = "Training moves the tokens around so that words used in the same way can end up near each other."
    if groups:
        text += (f" In this model the {' and the '.join(g.name + 's' for g in groups)} have not come together: "
                 f"{measured}.")
    return text + nearest_example(v)


def embedding_matrix_of(bundle) -> torch.Tensor:
    return bundle.model.embed.tok.weight.detach()


def intro(v: View) -> str:
    cfg = v.bundle.model.cfg
    D, V = cfg.d_model, cfg.vocab_size
    scale = (f"\n\nThis model also multiplies every row by √{D} = {math.sqrt(D):.3f} (it scales its embeddings), as the 2017 "
             "paper does, so the embeddings are not drowned out by the positional signal added next."
             if cfg.embed_scale else "")
    return f"""\
A token id is just a number on a list; **17** is not "closer" to **18** in meaning. So the model's first
move is to swap each id for a **vector of {D} numbers** it learned during training.

Think of **coordinates on a map of meaning**. GPS places a town with 2 numbers; this model places every
token with **{D} numbers**. {closeness(v)}

The coordinates live in the **embedding matrix**: one row per vocabulary entry ({V:,} rows) and one column per
dimension ({D} columns). "Embedding" a token means nothing more than **reading row number *id***. Nothing is
computed yet; it is a table lookup.{scale} Walk through the tabs below from left to right.
"""


# The page's sections (tabs); only the open one is drawn, so a new sentence redraws one chart.
SECTIONS = BY_SLUG["embedding"].labels           # the tabs, named in explorer/registry.py


def rows_caption(v: View) -> str:
    """Under the sentence's rows: the colours, one row per token wherever it stands, and <unk>'s shared row, in
    the units this model's tokenizer cuts text into."""
    one, many = UNITS[v.bundle.tokenizer.kind]
    return (f"Each row is one token's {v.bundle.model.cfg.d_model:,} learned numbers: red positive, blue negative, "
            f"white near 0. The same {one} always gets the same row, wherever it stands (position is added in the "
            "next step)." + (f" Unknown {many} all share the `{UNK}` row." if v.prepared.unknown else ""))


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def position_labels(v: View, limit: int = 14, mark_unknown: bool = True) -> list[str]:
    """'0 the', '1 cat', ... (long words shortened) with '→<unk>' after unknown words: what the model read."""
    return [f"{i} {_short(visible(p.text), limit)}" + (f" →{UNK}" if p.unknown and mark_unknown else "")
            for i, p in enumerate(v.prepared.pieces)]


def embedding_matrix(v: View) -> torch.Tensor:
    """The token embedding matrix, V x D (rows are token ids), as stored (before any embed_scale)."""
    return v.bundle.model.embed.tok.weight.detach()


# --- this sentence's rows ----------------------------------------------------------------

def rows_figure(v: View, trace: Trace, dims: tuple[int, int] | None = None) -> go.Figure:
    """embed.tok of this sentence as a heatmap: one row per token, one column per dimension (a window of
    them, `dims` = (start, stop), when there are more than DIMS_SHOWN)."""
    values = trace["embed.tok"][0]                                                   # (T, D)
    D = values.shape[1]
    shown = window(D, dims)
    title = f"This sentence's embeddings: {values.shape[0]} tokens x {D:,} numbers"
    if len(shown) < D:
        title += f" (dimensions {shown.start}–{shown.stop - 1})"
    fig = heatmap(values[:, shown.start:shown.stop], position_labels(v), [str(d) for d in shown], title=title,
                  row_title="token", col_title="dimension", value_name="value", presenter=v.presenter)
    step = max(1, len(shown) // 16)
    fig.update_xaxes(tickvals=list(range(0, len(shown), step)), ticktext=[str(d) for d in shown[::step]])
    return fig


# --- the vocabulary on a map (PCA) ----------------------------------------------------------

@dataclass(frozen=True)
class Pca:
    coords: np.ndarray          # (V, 2) every token's position on the map
    explained: np.ndarray       # (2,) share of the total variance each axis keeps


def pca_2d(weight: torch.Tensor) -> Pca:
    """The two directions along which the rows of `weight` spread most, and every row's position on them.

    The directions are the top eigenvectors of the rows' (D x D) covariance, summed over chunks of rows in
    double precision: exact, and light for GPT-2's 50,257 x 768 matrix, where an SVD of the whole matrix in
    double is slow and large (docs/figures.md has the measured figures). The sign of each direction is fixed
    (largest loading positive) so the map does not flip between runs.
    """
    W = weight.detach()
    V, D = W.shape
    k = min(2, V, D)
    total_sum, gram = torch.zeros(D, dtype=torch.float64), torch.zeros(D, D, dtype=torch.float64)
    for rows in W.split(PCA_CHUNK):
        rows = rows.double()                                                         # (chunk, D)
        total_sum += rows.sum(0)
        gram += rows.T @ rows
    mean = total_sum / V                                                             # (D,)
    cov = gram - V * torch.outer(mean, mean)                                         # (D, D), centred
    values, vectors = torch.linalg.eigh(cov)                                         # ascending
    dirs = vectors[:, -k:].flip(1).T if k else vectors[:, :0].T                      # (k, D), largest first
    flip = torch.sign(dirs.gather(1, dirs.abs().argmax(1, keepdim=True)))            # (k, 1)
    dirs = dirs * torch.where(flip == 0, torch.ones_like(flip), flip)
    coords = torch.cat([(rows.double() - mean) @ dirs.T for rows in W.split(PCA_CHUNK)]).numpy()   # (V, k)
    total = float(values.clamp(min=0).sum())
    explained = values.flip(0)[:k].clamp(min=0).numpy() / total if total > 0 else np.zeros(k)
    if k < 2:                                                                        # a 1-dimensional model
        coords = np.hstack([coords, np.zeros((coords.shape[0], 2 - k))])
        explained = np.concatenate([explained, np.zeros(2 - k)])
    return Pca(coords, explained)


def vocab_pca(v: View) -> Pca:
    """pca_2d of the model's embedding matrix, computed once per model."""
    return memo.per_model(lambda bundle: pca_2d(bundle.model.embed.tok.weight.detach()), v.name, v.bundle)


MAP_WIDTH_PX = 900      # about how wide the map is drawn (the figure's height is set), for label spacing


def label_box(x: float, y: float, text: str, font_px: float) -> tuple[float, float, float, float]:
    """(left, right, bottom, top) in pixels of a label written just above the point (x, y) in pixels."""
    half = 0.3 * font_px * max(len(text), 1) + 2
    return x - half, x + half, y + 4, y + 4 + 1.3 * font_px


def overlaps(a: tuple, b: tuple) -> bool:
    return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]


def spaced_labels(pixels: np.ndarray, texts: list[str], fixed: list[tuple], font_px: float) -> list[bool]:
    """Which of the points (at `pixels`) get a label: greedily, in order, each label whose box collides with no
    label already placed (the `fixed` boxes, e.g. the sentence's labels, are placed first)."""
    boxes = list(fixed)
    chosen = []
    for (x, y), text in zip(pixels, texts):
        box = label_box(x, y, text, font_px)
        free = not any(overlaps(box, other) for other in boxes)
        if free:
            boxes.append(box)
        chosen.append(free)
    return chosen


def to_pixels(xy: np.ndarray, size_px: tuple[float, float]) -> np.ndarray:
    """Map coordinates to approximate pixels of a plot `size_px` (width, height) showing all of them."""
    low, high = xy.min(0), xy.max(0)
    span = np.where(high > low, high - low, 1.0)
    return (xy - low) / span * np.asarray(size_px, dtype=float)


MAP_TOKENS = 5_000      # a bigger vocabulary (GPT-2's 50,257) shows its first 5,000 ids: a cloud one can read


def map_ids(vocab_size: int) -> np.ndarray:
    """The token ids drawn as grey dots: all of a small vocabulary, the first MAP_TOKENS of a big one (in a BPE
    vocabulary such as GPT-2's: the bytes, then the earliest merges, which are the most common pieces)."""
    return np.arange(min(vocab_size, MAP_TOKENS))


def pca_figure(v: View, pca: Pca, label_all: bool = False) -> go.Figure:
    """The vocabulary's tokens (map_ids) as grey dots on the 2-D map; this sentence's tokens in red with labels.
    Grey labels go only where they collide with no other label (all of them with `label_all`)."""
    vocab = v.bundle.tokenizer.vocab
    ids = v.prepared.ids
    grey_ids = map_ids(len(vocab))
    xy = pca.coords[grey_ids]                                                    # (N, 2)
    hover = [safe(f"{vocab[i]!r} (id {i})") for i in grey_ids]
    grey_px, red_px = (14, 20) if v.presenter else (10, 14)
    size_px = (MAP_WIDTH_PX, 480 * (1.3 if v.presenter else 1.0) - 150)         # the plot area, roughly
    seen = list(dict.fromkeys(ids))
    pixels = to_pixels(np.vstack([xy, pca.coords[seen]]), size_px)              # grey dots, then the sentence
    red = [label_box(x, y, visible(vocab[i]), red_px) for (x, y), i in zip(pixels[len(xy):len(xy) + len(seen)], seen)]
    names = [visible(vocab[i]) for i in grey_ids]
    shown = [True] * len(names) if label_all else spaced_labels(pixels[:len(xy)], names, red, grey_px)
    in_sentence = set(seen)
    shown = [keep and int(i) not in in_sentence for i, keep in zip(grey_ids, shown)]   # the sentence's own are red
    title = (f"The whole vocabulary on a map ({len(vocab):,} tokens, PCA)" if len(grey_ids) == len(vocab) else
             f"The vocabulary on a map (its first {len(grey_ids):,} of {len(vocab):,} tokens, PCA)")
    fig = go.Figure(layout=dict(title=title))
    gl = len(grey_ids) > 2000                                        # WebGL keeps big vocabularies fast
    fig.add_trace((go.Scattergl if gl else go.Scatter)(
        name="vocabulary", x=xy[:, 0], y=xy[:, 1], mode="markers+text",
        # WebGL draws text as plain characters (no HTML), so escaping would show "&lt;"; SVG text is escaped
        text=[(n if gl else safe(n)) if keep else "" for n, keep in zip(names, shown)], textposition="top center",
        textfont=dict(color="#777777", size=grey_px),
        marker=dict(color="#BBBBBB", size=7), hovertext=hover,
        hovertemplate="%{hovertext}<br>PC 1 %{x:.4f}<br>PC 2 %{y:.4f}<extra>vocabulary</extra>"))
    where = {i: [p for p, j in enumerate(ids) if j == i] for i in seen}
    fig.add_trace((go.Scattergl if gl else go.Scatter)(           # WebGL is drawn over SVG: red goes there too
        name="your sentence", x=pca.coords[seen, 0], y=pca.coords[seen, 1], mode="markers+text",
        text=[visible(vocab[i]) if gl else token_label(vocab[i]) for i in seen], textposition="top center",
        textfont=dict(color="#CC3311", size=red_px),
        marker=dict(color="#CC3311", size=12, line=dict(color="white", width=1)),
        customdata=np.array(seen),
        hovertext=[safe(f"{vocab[i]!r} (id {i}) at position(s) {', '.join(map(str, where[i]))}") for i in seen],
        hovertemplate="%{hovertext}<br>PC 1 %{x:.4f}<br>PC 2 %{y:.4f}<extra>your sentence</extra>"))
    e1, e2 = pca.explained
    fig.update_xaxes(title=f"direction 1 ({e1:.1%} of the spread)", zeroline=False)
    fig.update_yaxes(title=f"direction 2 ({e2:.1%} of the spread)", zeroline=False)
    fig.update_layout(legend=dict(orientation="h", y=-0.18))
    return style(fig, v.presenter, 480)


def _map_figure(v: View, trace, label_all: bool) -> go.Figure:
    return pca_figure(v, vocab_pca(v), label_all)


def map_figure(v: View, label_all: bool = False) -> go.Figure:
    """pca_figure of the model's map for the view's sentence, built once per sentence."""
    return memo.per_view(_map_figure, v, label_all)


def pca_note(v: View, pca: Pca) -> str:
    cfg = v.bundle.model.cfg
    kept = float(pca.explained.sum())
    return (f"The embedding matrix has {cfg.vocab_size:,} rows of {cfg.d_model:,} numbers; a screen has 2 dimensions. "
            f"PCA finds the 2 directions along which the rows differ most. They keep **{kept:.1%}** of the spread "
            f"(direction 1: {pca.explained[0]:.1%}, direction 2: {pca.explained[1]:.1%}); the rest lies in the "
            f"other {max(cfg.d_model - 2, 0)} directions, so tokens that look close here may still differ there. "
            "Use the cosine similarities below for the full picture.")


# --- cosine similarity ----------------------------------------------------------------------

def cosine_matrix(vectors: torch.Tensor) -> torch.Tensor:
    """(N, D) -> (N, N) cosine similarity of every pair of rows (0 for an all-zero row)."""
    x = vectors.detach().double()
    norms = x.norm(dim=-1, keepdim=True)                                             # (N, 1)
    unit = x / torch.where(norms > 0, norms, torch.ones_like(norms))
    return unit @ unit.T                                                             # (N, N)


def cosine_figure(v: View, trace: Trace, show_values: bool = True) -> go.Figure:
    """T x T cosine similarity between this sentence's token embeddings, on a fixed -1..1 scale."""
    sims = cosine_matrix(trace["embed.tok"][0])                                      # (T, T)
    T = sims.shape[0]
    rows, cols = position_labels(v), position_labels(v, limit=8, mark_unknown=False)
    return heatmap(sims, rows, cols, title="Cosine similarity between this sentence's tokens",
                   row_title="token", col_title="token", value_name="cosine", zmin=-1.0, zmax=1.0,
                   text=show_values and T <= 12, presenter=v.presenter, height=max(360, 30 * T + 140))


# --- nearest neighbours ---------------------------------------------------------------------

def neighbours(weight: torch.Tensor, token_id: int, k: int = N_NEIGHBOURS) -> pd.DataFrame:
    """The k vocabulary rows most similar (cosine) to row `token_id`, itself excluded: id, cosine."""
    W = weight.detach().double()
    row = W[token_id]
    norms = W.norm(dim=1) * row.norm()
    sims = torch.where(norms > 0, (W @ row) / torch.where(norms > 0, norms, torch.ones_like(norms)),
                       torch.zeros_like(norms))                                      # (V,)
    sims[token_id] = -math.inf
    top = sims.topk(min(k, W.shape[0] - 1))
    return pd.DataFrame({"id": top.indices.tolist(), "cosine": top.values.tolist()})


def neighbours_table(v: View, token_id: int) -> pd.DataFrame:
    """neighbours() of a token with the token texts added."""
    table = neighbours(embedding_matrix(v), token_id)
    vocab = v.bundle.tokenizer.vocab
    table.insert(1, "token", [vocab[i] for i in table["id"]])
    return table


def neighbours_figure(v: View, token_id: int, table: pd.DataFrame) -> go.Figure:
    """Horizontal bars: the nearest tokens by cosine similarity, nearest on top."""
    vocab = v.bundle.tokenizer.vocab
    names = [f"{token_label(t)} (id {i})" for t, i in zip(table["token"], table["id"])]
    fig = go.Figure(go.Bar(x=table["cosine"], y=names, orientation="h", marker_color="#4477AA",
                           text=[f"{c:.3f}" for c in table["cosine"]], textposition="outside",
                           customdata=table["id"], hovertemplate="%{y}<br>cosine %{x:.4f}<extra></extra>"),
                    layout=dict(title=f"Nearest neighbours of “{token_label(vocab[token_id])}”"))
    low = float(table["cosine"].min()) if len(table) else 0.0
    fig.update_xaxes(title="cosine similarity", range=[min(0.0, low - 0.25 if low < 0 else 0.0), 1.05])
    fig.update_traces(cliponaxis=False)
    fig.update_yaxes(autorange="reversed")
    return style(fig, v.presenter, 90 + 34 * max(len(table), 1))


# --- show the math ------------------------------------------------------------------------------

def _vector(values, n: int = MATH_VALUES) -> str:
    shown = ", ".join(f"{x:.4f}" for x in values[:n])
    return f"[{shown}{', …' if len(values) > n else ''}]"


def lookup_math(v: View, trace: Trace, position: int) -> str:
    """Token id -> row of the embedding matrix -> its first numbers (and the √D scale, if the model has it)."""
    cfg = v.bundle.model.cfg
    piece = v.prepared.pieces[position]
    token_id = v.prepared.ids[position]
    row = as_numpy(embedding_matrix(v)[token_id])
    used = as_numpy(trace["embed.tok"][0, position])
    name = quote(piece.text) + (f" (read as `{UNK}`)" if piece.unknown else "")
    lines = [f"1. Token {position} is {name} with **id {token_id}**.",
             f"2. So the model reads **row {token_id}** of the {cfg.vocab_size:,} x {cfg.d_model} embedding matrix.",
             f"3. That row's first {min(MATH_VALUES, cfg.d_model)} of {cfg.d_model} numbers: `{_vector(row)}`"]
    if cfg.embed_scale:
        lines.append(f"4. This model scales its embeddings: the row is multiplied by √{cfg.d_model} = "
                     f"{math.sqrt(cfg.d_model):.4f}, giving `{_vector(used)}`, the vector the model reads on with.")
    else:
        lines.append(f"4. This model does not scale its embeddings, so the row goes in unchanged: "
                     f"`{_vector(used)}`.")
    return "\n".join(lines)


def cosine_math(v: View, token_id: int, other_id: int) -> str:
    """cos(a, b) = a·b / (|a| |b|) for two vocabulary rows, written out with their real numbers."""
    W = embedding_matrix(v).double()
    a, b = W[token_id], W[other_id]
    vocab = v.bundle.tokenizer.vocab
    D = a.shape[0]
    n = min(3, D)
    terms = " + ".join(f"({float(a[i]):.4f} × {float(b[i]):.4f})" for i in range(n))
    dot, na, nb = float(a @ b), float(a.norm()), float(b.norm())
    cos = dot / (na * nb) if na and nb else 0.0
    return (f"Cosine similarity of {quote(vocab[token_id])} (row {token_id}) and {quote(vocab[other_id])} "
            f"(row {other_id}):\n\n"
            f"- dot product a·b = {terms}{' + …' if D > n else ''} ({D} terms) = **{dot:.4f}**\n"
            f"- lengths: |a| = √(a·a) = **{na:.4f}**, |b| = **{nb:.4f}**\n"
            f"- cosine = a·b / (|a| × |b|) = {dot:.4f} / ({na:.4f} × {nb:.4f}) = **{cos:.4f}**\n\n"
            "1 means the two rows point the same way, 0 unrelated, -1 opposite. The length does not count, "
            "only the direction" + (" (so the √D scale changes nothing here)." if v.bundle.model.cfg.embed_scale
                                    else "."))
