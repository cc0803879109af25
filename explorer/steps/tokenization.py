"""Step 1, tokenization: how the typed text becomes the token ids the model reads.

Plain functions of a View (or of tokenizers and pieces) that return figures, tables and text; the page
only lays them out. The comparison tokenizers are rebuilt from the model's own training text and cached
per corpus (`comparison_tokenizers`).
"""
import re
import unicodedata
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from model import presets
from model.checkpoint import Bundle
from model.tokenizers import UNK, BPETokenizer, CharTokenizer, Piece, Tokenizer, WordTokenizer

from explorer import memo
from explorer.plot import for_a_phone, safe, style
from explorer.registry import BY_SLUG
from explorer.view import View, quote

BPE_VOCAB_SIZE = 512           # 256 bytes + up to 256 learned merges
KINDS = ("word", "char", "bpe")
KIND_NAMES = {"word": "Word", "char": "Character", "bpe": "BPE"}
KIND_ABOUT = {
    "word": "one token per word or punctuation mark, looked up in a fixed list of words",
    "char": "one token per character",
    "bpe": "byte pair encoding: start from single bytes and glue the most frequent neighbouring pairs together",
}
UNITS = {"word": ("word", "words"), "char": ("character", "characters"), "bpe": ("token", "tokens")}   # what a token is
MAX_CHIPS = 60                 # per tokenizer in the comparison figure; longer texts say how many more


# --- explanations ------------------------------------------------------------------------

# The page's sections (tabs); only the open one is drawn, so a new sentence redraws one chart.
SECTIONS = BY_SLUG["tokenization"].labels           # the tabs, named in explorer/registry.py


def intro(v: View) -> str:
    """The page's explanation, with this model's tokenizer and vocabulary size."""
    tok = v.bundle.tokenizer
    return f"""\
A model cannot read letters. Before it does anything else, the text is **cut into pieces, called tokens**,
like cutting a sentence into puzzle pieces, and each piece is **looked up in a dictionary** (the
*vocabulary*) that gives it a number, its **token id**. From here on the model only ever sees those numbers.

Where to cut is a choice. This model uses a **{KIND_NAMES[tok.kind].lower()} tokenizer**
({KIND_ABOUT[tok.kind]}) with a vocabulary of **{tok.vocab_size:,} tokens**. The tabs below show your sentence
as tokens, how two other ways of cutting would have handled it, how BPE builds a word, and the vocabulary:

- **words**: few, meaningful pieces, but any word the tokenizer never saw in training becomes `<unk>` (unknown);
- **characters**: only a character never seen in training is unknown, but the sentence becomes very long;
- **BPE**: the compromise big models like GPT use: frequent words stay whole, rare words are built from smaller
  pieces, so nothing is unknown and sentences stay short.
"""


UNK_EXPLAINED = {
    "word": """\
**What is `<unk>`?** A word tokenizer only knows the words it saw in its training text. Its dictionary was
written once, before training, and cannot grow afterwards, because the model has learned exactly one row of
numbers for each entry. A word that is not in the dictionary is replaced by the special token `<unk>`
("unknown", id {unk_id}). The model then sees the same `<unk>` for every unknown word: {alike}. Character and
BPE tokenizers avoid this by building rare words from smaller pieces (a character tokenizer still reads a
character it never saw, such as an emoji, as `<unk>`; byte-level BPE never does).
""",
    "char": """\
**What is `<unk>`?** A character tokenizer only knows the characters it saw in its training text ({known:,} of
them). Its list was written once, before training, and cannot grow afterwards, because the model has learned
exactly one row of numbers for each entry. Any word spelled with those characters can be read, even one the
model never saw, letter by letter. A character that is not in the list (an emoji, a letter or sign the text
never used) is replaced by the special token `<unk>` ("unknown", id {unk_id}). The model then sees the same
`<unk>` for every unknown character: {alike}. Byte-level BPE avoids even this: it starts from the 256 possible
bytes, so nothing is ever unknown.
""",
}
# Examples of what a tokenizer may not know, tried when the sentence has fewer than two unknown pieces.
UNKNOWN_EXAMPLES = {"word": ["zebra", "marmalade", "quantum", "giraffe", "saxophone"],
                    "char": ["🙂", "é", "ß", "ж", "€", "Q", "7"]}


def cannot_tell(tok: Tokenizer, unknown: list[str]) -> str:
    """"it cannot tell *a* from *b*", with two pieces this tokenizer really reads as <unk> (the sentence's own first)."""
    found = list(dict.fromkeys(unknown))
    for example in UNKNOWN_EXAMPLES[tok.kind]:
        if len(found) >= 2:
            break
        pieces = tok.pieces(example)
        if example not in found and len(pieces) == 1 and pieces[0].unknown:
            found.append(example)
    one = UNITS[tok.kind][0]
    if len(found) < 2:
        return f"it cannot tell one unknown {one} from another"
    return f"it cannot tell {quote(found[0])} from {quote(found[1])}"


def unk_explained(tok: Tokenizer, unknown: list[str]) -> str:
    """What <unk> is, for this tokenizer (a word or character list), with examples it really does not know."""
    return UNK_EXPLAINED[tok.kind].format(unk_id=tok.unk_id, known=tok.vocab_size - 1,       # all but <unk> itself
                                          alike=cannot_tell(tok, unknown))


def unknown_note(v: View) -> str:
    """Which words of this sentence the model's tokenizer did not know, and what that means."""
    tok = v.bundle.tokenizer
    unknown = [p.text for p in v.prepared.pieces if p.unknown]
    if tok.unk_id is None:
        return ("This model's BPE tokenizer starts from the 256 possible bytes, so **no token is ever unknown**: "
                "a word it never saw is simply built from smaller pieces.")
    text = unk_explained(tok, unknown)
    if not unknown:
        return "Every token of this sentence is in the model's vocabulary: nothing was replaced by `<unk>`.\n\n" + text
    listed = ", ".join(quote(w) for w in dict.fromkeys(unknown))
    return (f"**{len(unknown)} of {len(v.prepared.pieces)} tokens {'is' if len(unknown) == 1 else 'are'} unknown** "
            "to this model "
            f"(shown in orange): {listed}.\n\n" + text)


def source_note(source: str, model_kind: str) -> str:
    return (f"The model actually reads the **{KIND_NAMES[model_kind]}** tokens (marked ★). The other tokenizers were "
            f"built from {source} only for this comparison; the model never saw their tokens. BPE keeps the space "
            "in front of a word as part of its token (␣cat), so the first word of a text, which has no space "
            "before it, can be cut differently.")


# --- chips: tokens drawn as labelled boxes ---------------------------------------------------

_VISIBLE = str.maketrans({" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"})


def visible(text: str) -> str:
    """Token text with spaces and line breaks drawn as visible marks (' cat' -> '␣cat')."""
    return text.translate(_VISIBLE) if text else "∅"


def _units(text: str) -> float:
    """Approximate width in character cells (wide characters such as emoji take two)."""
    return float(sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text))


def _shorten(text: str, limit: int = 18) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class Chip:
    """One box: the token's text (raw user text; escaped when drawn), a small line under it, a colour."""
    text: str
    sub: str = ""
    kind: str = "known"        # known, unknown, merged, plain
    hover: str = ""
    literal: bool = False      # our own words (e.g. "+9 more"): spaces stay spaces


CHIP_COLOURS = {"known": ("#E3EEFA", "#4477AA"), "unknown": ("#FDDCC8", "#CC3311"),
                "merged": ("#FFF0B3", "#B8860B"), "plain": ("#F2F2F2", "#9A9A9A")}


def chips_figure(rows: list[tuple[str, list[Chip]]], title: str, presenter: bool = False,
                 label_units: float = 0.0, phone: bool = False) -> go.Figure:
    """Rows of token chips that wrap onto new lines; `rows` pairs a label (our own Plotly text) with chips. The
    lines are as wide as the screen: a projector's (`presenter`: larger type), a phone's (`phone`) or a wide one's.

    Traces: "tokens" (chip texts), "subs" (the small line, e.g. ids), "hover", "labels" (row labels) and one
    filled outline per chip kind, "boxes known", "boxes unknown", ... (one polygon per chip, None between).
    Boxes are traces rather than layout shapes: a hundred shapes cost Plotly far more time to build.
    """
    width = 60.0 if presenter else 36.0 if phone else 92.0           # character cells across the figure
    centres_x, centres_y, texts, subs, hovers = [], [], [], [], []
    boxes = {kind: ([], []) for kind in CHIP_COLOURS}
    rules_x, rules_y, label_x, label_y, label_text = [], [], [], [], []
    line = -1
    for r, (label, chips) in enumerate(rows):
        line += 1
        if r:
            rules_x += [0.0, width, None]
            rules_y += [line - 0.55, line - 0.55, None]
        label_x.append(0.0), label_y.append(line), label_text.append(label)
        x = label_units
        for chip in chips:
            shown = chip.text if chip.literal else visible(_shorten(chip.text))
            w = max(_units(shown), 0.62 * _units(chip.sub), 1.0) + 1.4
            if x + w > width and x > label_units:
                line, x = line + 1, label_units
            bx, by = boxes[chip.kind]
            bx += [x, x + w, x + w, x, x, None]
            by += [line - 0.42, line - 0.42, line + 0.42, line + 0.42, line - 0.42, None]
            centres_x.append(x + w / 2), centres_y.append(line)
            texts.append(safe(shown)), subs.append(safe(chip.sub)), hovers.append(safe(chip.hover or chip.text))
            x += w + 0.5
    n_lines = line + 1
    big, small = (18, 13) if presenter else (14, 10)
    # with a small line under it, a chip's text sits just above its centre and the small line just below, a fixed
    # number of pixels apart, so the two never touch when the chart is drawn lower (presenter mode)
    data = [go.Scatter(name=f"boxes {kind}", x=bx, y=by, mode="lines", fill="toself", fillcolor=fill,
                       line=dict(color=border, width=2 if kind in ("unknown", "merged") else 1), hoverinfo="skip")
            for kind, (fill, border) in CHIP_COLOURS.items() for bx, by in [boxes[kind]] if bx]
    if rules_x:
        data.append(go.Scatter(name="rules", x=rules_x, y=rules_y, mode="lines", hoverinfo="skip",
                               line=dict(color="#CCCCCC", width=1)))
    data += [
        go.Scatter(name="tokens", x=centres_x, y=[y - 0.06 if sub else y for y, sub in zip(centres_y, subs)],
                   mode="text", text=texts, textposition=["top center" if sub else "middle center" for sub in subs],
                   textfont=dict(size=big, color="#1A1A1A"), hoverinfo="skip"),
        go.Scatter(name="subs", x=centres_x, y=[y + 0.06 for y in centres_y], mode="text", text=subs,
                   textposition="bottom center",
                   textfont=dict(size=small, color="#555555"), hoverinfo="skip"),
        go.Scatter(name="hover", x=centres_x, y=centres_y, mode="markers", hovertext=hovers,
                   marker=dict(size=26, opacity=0), hovertemplate="%{hovertext}<extra></extra>"),
    ]
    if label_units:
        data.append(go.Scatter(name="labels", x=label_x, y=label_y, mode="text", text=label_text,
                               textposition="middle right", textfont=dict(size=small + 1, color="#333333"),
                               hoverinfo="skip"))
    fig = go.Figure(data, layout=dict(title=title, showlegend=False, dragmode=False, plot_bgcolor="rgba(0,0,0,0)"))
    fig.update_xaxes(visible=False, range=[-0.2, width + 0.2], fixedrange=True)
    fig.update_yaxes(visible=False, range=[n_lines - 0.45, -0.55], fixedrange=True)
    # drawn lower on a projector's first screen, a chip still holds its two lines (big + small text, in pixels)
    fig.update_layout(meta=dict(min_height=130 + round((big + small) * 1.45) * n_lines))
    fig = style(fig, presenter, 70 + 52 * n_lines)
    return for_a_phone(fig) if phone else fig


def piece_chip(piece: Piece, position: int, tok: Tokenizer) -> Chip:
    """A chip for one token of the model's tokenizer: its text, its id, unknown ones in orange."""
    if piece.unknown:
        return Chip(piece.text, f"{piece.id} {UNK}", "unknown",
                    f"position {position}: {piece.text!r} is not in the vocabulary, so the model reads {UNK} "
                    f"(id {piece.id})")
    return Chip(piece.text, str(piece.id), "known",
                f"position {position}: {piece.text!r} -> id {piece.id} (vocabulary entry {tok.vocab[piece.id]!r})")


def sentence_figure(v: View) -> go.Figure:
    """The tokens the model reads, as chips with their ids (unknown words in orange)."""
    tok = v.bundle.tokenizer
    chips = [piece_chip(p, i, tok) for i, p in enumerate(v.prepared.pieces)]
    n = len(chips)
    return chips_figure([("", chips)], f"Your sentence as {n} token{'s' * (n != 1)} (token id under each piece)",
                        v.presenter, phone=v.phone)


# --- the comparison tokenizers ---------------------------------------------------------------

def corpus_of(bundle: Bundle) -> tuple[str, int] | None:
    """(corpus name, seed) of the model's training text when it can be rebuilt, else None."""
    facts = bundle.facts or {}
    name = facts.get("corpus") or facts.get("task")
    if name not in presets.CORPORA:
        return None
    seed = facts.get("seed", 0)
    return name, seed if isinstance(seed, int) and not isinstance(seed, bool) else 0


def _tokenizers_from_corpus(corpus: str, seed: int) -> dict[str, Tokenizer]:
    text = presets.corpus_texts(corpus, seed)[0]
    return {"word": presets.build_tokenizer("word", text, corpus), "char": CharTokenizer.from_texts([text]),
            "bpe": BPETokenizer.from_texts([text], vocab_size=BPE_VOCAB_SIZE)}


def _tokenizers_from_vocab(vocab: tuple[str, ...], kind: str) -> dict[str, Tokenizer]:
    return build_from_vocab(list(vocab), kind)


def build_from_vocab(vocab: list[str], kind: str) -> dict[str, Tokenizer]:
    """Comparison tokenizers built from a vocabulary joined as text (when the training text is unknown)."""
    entries = [t for t in vocab if t != UNK]
    text = " ".join(entries) or "?"
    return {"word": WordTokenizer.from_texts([text]), "char": CharTokenizer.from_texts([text]),
            "bpe": BPETokenizer.from_texts([text], vocab_size=BPE_VOCAB_SIZE)}


def comparison_tokenizers(bundle: Bundle) -> tuple[dict[str, Tokenizer], str]:
    """Word, char and BPE tokenizers for this model (its own kind is the model's tokenizer), and their source."""
    found = corpus_of(bundle)
    if found:
        made = memo.per_key(_tokenizers_from_corpus, *found)
        source = f"the model's training text (the {found[0]} corpus)"
    else:
        made = memo.per_key(_tokenizers_from_vocab, tuple(bundle.tokenizer.vocab), bundle.tokenizer.kind)
        source = "the model's own vocabulary (its training text is not available)"
    return {**made, bundle.tokenizer.kind: bundle.tokenizer}, source


def comparison_pieces(tokenizers: dict[str, Tokenizer], text: str) -> dict[str, list[Piece]]:
    """The text cut by each tokenizer (len() of each list is its token count)."""
    return {kind: tokenizers[kind].pieces(text) for kind in KINDS}


def comparison_figure(tokenizers: dict[str, Tokenizer], cut: dict[str, list[Piece]], model_kind: str,
                      presenter: bool = False, phone: bool = False) -> go.Figure:
    """The same text under word, character and BPE tokenizers (`cut` from comparison_pieces): one row each."""
    rows = []
    for kind in KINDS:
        tok, pieces = tokenizers[kind], cut[kind]
        chips = [piece_chip(p, i, tok) for i, p in enumerate(pieces[:MAX_CHIPS])]
        if len(pieces) > MAX_CHIPS:
            chips.append(Chip(f"+{len(pieces) - MAX_CHIPS} more", "", "plain",
                              f"{len(pieces) - MAX_CHIPS} more tokens not drawn", literal=True))
        star = " ★" if kind == model_kind else ""
        rows.append((f"<b>{KIND_NAMES[kind]}{star}</b><br>{len(pieces)} tokens", chips))
    return chips_figure(rows, "The same text cut three ways (★ = the tokenizer this model uses)", presenter,
                        label_units=11.0 if presenter else 10.0, phone=phone)


# --- BPE merges, replayed -----------------------------------------------------------------

_WORD = re.compile(r"\w+|[^\w\s]")


MAX_REPLAY_CHARS = 24          # longer words are cut for the replay (a merge history grows with the word)
MAX_MERGE_ROWS = 12            # steps drawn at once: step 0 and the latest ones


def replay_words(text: str, limit: int = 40) -> list[str]:
    """The distinct words of the text as BPE sees them: with the space in front when there is one.

    Words longer than MAX_REPLAY_CHARS are cut to that length.
    """
    out = []
    for m in _WORD.finditer(text):
        space = " " if m.start() > 0 and text[m.start() - 1] == " " else ""
        out.append(space + m.group()[:MAX_REPLAY_CHARS])
    return list(dict.fromkeys(out))[:limit]


def default_word(words: list[str]) -> int:
    """Index of the longest word (the first one on a tie)."""
    return max(range(len(words)), key=lambda i: (len(words[i].strip()), -i)) if words else 0


@dataclass(frozen=True)
class MergeStep:
    symbols: list[str]              # surface text of each symbol after this step
    pair: tuple[str, str] | None    # the merge applied to reach this step (surface text), None for step 0
    rank: int | None                # its rank: 0 = the first merge the tokenizer learned
    at: int | None                  # index of the new symbol in `symbols`


def merge_steps(bpe: BPETokenizer, word: str) -> list[MergeStep]:
    """BPETokenizer.replay(word) with, for every step, the pair that was merged and that merge's rank."""
    ranks = {pair: r for r, pair in enumerate(bpe.merges)}
    history = bpe.replay(word)
    out = [MergeStep([bpe.token_text(s) for s in history[0]], None, None, None)]
    for before, after in zip(history, history[1:]):
        j = next(j for j in range(len(after)) if after[j] != before[j])
        pair = (before[j], before[j + 1])
        out.append(MergeStep([bpe.token_text(s) for s in after], tuple(bpe.token_text(s) for s in pair),
                             ranks[pair], j))
    return out


def merges_figure(steps: list[MergeStep], upto: int, final_ids: list[int] | None = None,
                  presenter: bool = False, phone: bool = False) -> go.Figure:
    """Steps 0..upto of a word's merges, one row each; the newly merged symbol is highlighted."""
    shown = [0, *range(max(1, upto - MAX_MERGE_ROWS + 2), upto + 1)]
    rows = []
    for s in shown:
        step = steps[s]
        if s > 1 and s - 1 not in shown:
            rows.append((f"(steps 1-{s - 1} hidden)", []))
        chips = []
        for j, sym in enumerate(step.symbols):
            if j == step.at:
                chips.append(Chip(sym, f"merge #{step.rank}", "merged",
                                  f"{step.pair[0]!r} + {step.pair[1]!r} -> {sym!r} (merge rank {step.rank})"))
            else:
                chips.append(Chip(sym, "", "known" if s == len(steps) - 1 else "plain", repr(sym)))
        if s == len(steps) - 1 and final_ids is not None and len(final_ids) == len(chips):
            chips = [Chip(c.text, (c.sub + " · " if c.sub else "") + f"id {i}", c.kind, c.hover + f", id {i}")
                     for c, i in zip(chips, final_ids)]
        label = f"step {s}" + (" (bytes)" if s == 0 else "") + (" = final" if s == len(steps) - 1 and s else "")
        rows.append((label, chips))
    return chips_figure(rows, f"BPE merges, step {upto} of {len(steps) - 1}", presenter,
                        label_units=12.0 if presenter else 11.0, phone=phone)


def merge_caption(steps: list[MergeStep], upto: int) -> str:
    """What happened at step `upto`, in words (Markdown with the symbols quoted)."""
    step = steps[upto]
    if len(steps) == 1:
        return (f"No merge the tokenizer learned fits any neighbouring pair of this word, so it stays as its "
                f"**{len(step.symbols)} single bytes**: {len(step.symbols)} tokens. Rare words cost many tokens.")
    if step.pair is None:
        return (f"**Step 0**: the word starts as its {len(step.symbols)} bytes (one symbol each; ␣ is the space "
                f"in front of it). Move the slider to apply the merges one at a time.")
    a, b = step.pair
    text = (f"**Step {upto}**: merge {quote(visible(a))} + {quote(visible(b))} → {quote(visible(a + b))}. "
            f"It is merge **#{step.rank}** of the tokenizer's learned list: the lower the number, the earlier "
            f"it was learned, because that pair was more frequent in the training text. BPE always applies "
            f"the lowest-numbered merge that fits.")
    if upto == len(steps) - 1:
        n = len(step.symbols)
        text += f" No learned merge fits any more: the word ends as **{n} token{'s' * (n != 1)}**."
    return text


def merges_note(bpe: BPETokenizer, model_tok: Tokenizer) -> str:
    """Whose merges these are: the model's own, or the comparison tokenizer's."""
    special = bpe.vocab_size - 256 - len(bpe.merges)                 # GPT-2: <|endoftext|>
    size = (f"{bpe.vocab_size:,} tokens: 256 single bytes + {len(bpe.merges):,} learned merges"
            + (f" + {special} special token{'s' * (special != 1)}" if special > 0 else ""))
    if bpe is model_tok:
        return f"These are the model's own BPE merges ({size})."
    return (f"This BPE tokenizer ({size}) was built only for the comparison; the model itself reads "
            f"{KIND_NAMES[model_tok.kind].lower()} tokens.")


# --- the vocabulary -------------------------------------------------------------------------

def _corpus_counts(tok: Tokenizer, corpus: str, seed: int, kind: str, vocab: tuple[str, ...]) -> np.ndarray:
    ids = tok.encode(presets.corpus_texts(corpus, seed)[0])
    return np.bincount(np.asarray(ids, dtype=np.int64), minlength=len(vocab))


def corpus_counts(bundle: Bundle) -> np.ndarray | None:
    """How often each token of the model's vocabulary occurs in its training text (None if unknown)."""
    found = corpus_of(bundle)
    if not found:
        return None
    tok = bundle.tokenizer
    return memo.per_key(lambda *key: _corpus_counts(tok, *key), *found, tok.kind, tuple(tok.vocab))


def vocabulary_table(tok: Tokenizer, counts: np.ndarray | None, query: str = "") -> pd.DataFrame:
    """id, token (spaces shown as ␣) and training count of every vocabulary entry matching `query`."""
    vocab = tok.vocab
    table = pd.DataFrame({"id": np.arange(len(vocab)), "token": [visible(t) for t in vocab]})
    if counts is not None:
        table["count in training text"] = counts[: len(vocab)]
    query = query.strip().lower()
    if query:
        raw = pd.Series([t.lower() for t in vocab])
        match = raw.str.contains(query, regex=False) | table["token"].str.lower().str.contains(query, regex=False)
        if query.isdigit():
            match |= table["id"] == int(query)
        table = table[match.to_numpy()]
    return table.reset_index(drop=True)


# --- show the math ------------------------------------------------------------------------------

def lookup_math(v: View, position: int) -> tuple[str, pd.DataFrame]:
    """How the token at `position` got its id, in words, and the vocabulary entries around that id."""
    tok = v.bundle.tokenizer
    piece = v.prepared.pieces[position]
    vocab = tok.vocab
    if tok.kind == "word":
        key = piece.text.lower()
        steps = [f"1. The text of token {position}: {quote(piece.text)}",
                 f"2. Lowercased (the word tokenizer ignores capitals): {quote(key)}"
                 + (" (so capitals are lost: the model cannot tell them apart)" if key != piece.text else "")]
        if piece.unknown:
            steps.append(f"3. Look it up in the {tok.vocab_size:,}-word vocabulary: **not found**, so it becomes "
                         f"`<unk>` with **id {piece.id}**.")
        else:
            steps.append(f"3. Look it up in the {tok.vocab_size:,}-word vocabulary: found at index **{piece.id}**, "
                         f"so its token id is **{piece.id}**.")
    elif tok.kind == "char":
        steps = [f"1. The character at position {position}: {quote(visible(piece.text))}",
                 f"2. Look it up in the {tok.vocab_size:,}-character vocabulary: "
                 + (f"**not found**, so it becomes `<unk>` with **id {piece.id}**." if piece.unknown
                    else f"found at index **{piece.id}**, so its token id is **{piece.id}**.")]
    else:
        steps = [f"1. The piece at position {position}: {quote(visible(piece.text))}, made by BPE merges "
                 f"(see the replay above)",
                 f"2. Its entry in the {tok.vocab_size:,}-token vocabulary is at index **{piece.id}**: "
                 f"its token id is **{piece.id}**."]
    steps.append(f"\nThe model receives only the number **{piece.id}**; the letters are gone from here on.")
    lo, hi = max(0, piece.id - 3), min(len(vocab), piece.id + 4)
    around = pd.DataFrame({"id": range(lo, hi), "token": [visible(t) for t in vocab[lo:hi]],
                           "here": ["◀ your token" if i == piece.id else "" for i in range(lo, hi)]})
    return "\n".join(steps), around
