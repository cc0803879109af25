"""Every sentence a step page states about the model, recomputed from the model (issue 20).

For each model and sentence the app is opened with AppTest and every step page (the big picture, then steps
1 to 7) is walked tab by tab with its "Show the math" panels open. On each tab, every sentence that states a
number or a behaviour of this model (the top guess and its chance, where a head looks most, the largest change
of a what-if, the number of tokens, the shapes, the unknown words, how the stream grows, ...) is looked for,
must be there, and must say what the model does: the claim is recomputed from the model itself (its weights,
its tokenizer and a `model.run` of our own), not read back from the page's code.

Four decoder-only models of different settings, three sentences each, one of them with words the model does
not know, and two more lab models on one sentence with a word twice:

    tinytales   word tokens, sinusoidal positions, LayerNorm pre-norm, GELU (bundled)
    roses       word tokens, sinusoidal positions, LayerNorm pre-norm, ReLU, 12 tokens (bundled)
    gpt2        GPT-2's shape: byte-level BPE of 50,257 tokens, learned positions, 12 layers x 12 heads,
                GELU (tanh), tied embeddings; random weights from a prepared hub cache (tests/gpt2_support.py)
    lab: char   a lab model: characters, learned positions, RMSNorm post-norm, ReLU, random weights
                (tests/claims_support.py), published into the session as the lab does
    lab: no positions   byte-level BPE, no position signal, LayerNorm post-norm, GELU, random weights
    lab: one head       word tokens, sinusoidal positions, RMSNorm pre-norm, GELU, one head per layer

The selected layer and head are the model's last ones; the selected token is whatever the app selects (read
from the session), so the checks hold whichever token a page selects by default.
"""
import math
import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn
from streamlit.testing.v1 import AppTest

from claims_support import LAB, bundled, lab_bundle
from conftest import APP, decode, figure_titled, page_text, show_section
from explorer.plot import visible
from explorer.view import DEFAULT_SENTENCE, escape, quote
from model import edits
from model.tokenizers import UNK
from model.transformer import sinusoidal_table

GPT2_NAME, LAB_NAME = "gpt2", "lab: char"
LABS = {LAB_NAME: LAB["char, rms, post-norm, relu, learned"],                 # lab models, as the lab names them
        "lab: no positions": LAB["bpe, layer, post-norm, gelu, no positions"],
        "lab: one head": LAB["word, rms, pre-norm, gelu, 1 head"],
        "lab: today's": LAB["today's: rope, rms, swiglu, 4 heads sharing 2, no biases"]}
SENTENCES = {
    "tinytales": [DEFAULT_SENTENCE, "The Dog chased the cat. It slept under the table.",
                  "the zebra ate my marmalade near the river"],
    "roses": ["roses are red violets are blue sugar is sweet", "sugar is sweet and so are you",
              "roses are purple and tulips are yellow"],
    GPT2_NAME: [DEFAULT_SENTENCE, "Paris is the capital of France, and I love pizza.",
                "Zyzzyva flibbertigibbet 🙂 quux"],
    LAB_NAME: ["roses are red violets are blue", "sugar is sweet and so are you", "roses are pink, tulips are 🙂"],
    "lab: no positions": ["roses are red roses are blue"],
    "lab: one head": ["roses are red roses are blue"],
    "lab: today's": ["roses are red violets are blue sugar is sweet"],
}
CASES = [(model, text) for model, texts in SENTENCES.items() for text in texts]
SPECIAL = {UNK, "<pad>", "<bos>", "<eos>"}
NUMBER = r"(−?-?\d[\d,]*(?:\.\d+)?(?:e[-+]\d+)?)"


# --- the models, as the test holds them (never the app's own objects) -----------------------------------

@pytest.fixture(scope="module")
def gpt2_cache(tmp_path_factory):
    """A Hugging Face cache holding a GPT-2-shaped model with random weights where GPT-2's files would be."""
    from gpt2_support import copy_into_hub_cache, gpt2_shaped_dir
    from model.hub import GPT2
    root = tmp_path_factory.mktemp("gpt2_claims")
    cache = root / "hub"
    copy_into_hub_cache(gpt2_shaped_dir(root / "files", d_model=48), cache, GPT2)
    return cache


@lru_cache
def gpt2_bundle(cache: Path):
    from model.hub import GPT2, cached
    from model.pretrained import load_pretrained
    return load_pretrained(cached(GPT2, cache))


def lab_model(name: str):
    return lab_bundle(**LABS[name])


class Ref:
    """The sentence as the test's own copy of the model reads it, and that reading's trace."""

    def __init__(self, bundle, text: str, name: str):
        self.bundle, self.text, self.bundle_name = bundle, text, name
        self.model, self.tok = bundle.model, bundle.tokenizer
        self.pieces = self.tok.pieces(text)
        self.ids = [p.id for p in self.pieces]
        assert len(self.ids) <= min(self.model.cfg.max_len, 64)          # these sentences are read whole
        self.trace = self.model.run(self.ids)
        self.vocab = self.tok.vocab
        self.T = len(self.ids)
        self.D = self.trace["embed.out"].shape[-1]
        self.V = self.trace["logits"].shape[-1]
        self.L = sum(1 for name in self.trace if name.endswith(".attn.pattern"))
        self.H = self.trace["blocks.0.attn.pattern"].shape[1]
        self.K = self.trace["blocks.0.attn.q"].shape[-1]
        self.F = self.trace["blocks.0.mlp.post"].shape[-1]              # the hidden width (SwiGLU: gate x up)
        # Unknown: the tokenizer gave the piece the id of <unk> though the text is not "<unk>" itself.
        self.unknown = [p.text for p in self.pieces if self.tok.unk_id is not None and p.id == self.tok.unk_id
                        and p.text != UNK]

    @property
    def tokens(self) -> list[str]:
        """What the model reads at each position: the typed piece, or <unk>."""
        return [self.vocab[i] if self.tok.unk_id is not None and i == self.tok.unk_id else p.text
                for i, p in zip(self.ids, self.pieces)]

    def probs(self, trace=None) -> torch.Tensor:
        return torch.softmax((trace or self.trace)["logits"][0].double(), -1)           # (T, V)

    def at(self, i: int) -> str:
        """A token in quotes, with its position when the word occurs more than once (as the pages name one)."""
        tokens = self.tokens
        return quote(tokens[i]) + (f" (position {i})" if tokens.count(tokens[i]) > 1 else "")

    def activation(self, layer: int = 0) -> str:
        """Which bend the feed-forward applies, found by recomputing mlp.post from mlp.pre (SwiGLU: from its gate
        and up projection)."""
        post = self.trace[f"blocks.{layer}.mlp.post"]
        if f"blocks.{layer}.mlp.gate" in self.trace:
            gate, up = self.trace[f"blocks.{layer}.mlp.gate"], self.trace[f"blocks.{layer}.mlp.up"]
            torch.testing.assert_close(post, nn.functional.silu(gate) * up)
            return "swiglu"
        pre = self.trace[f"blocks.{layer}.mlp.pre"]
        for name, fn in (("relu", nn.ReLU()), ("gelu", nn.GELU()), ("gelu_tanh", nn.GELU(approximate="tanh"))):
            if torch.allclose(fn(pre), post, atol=1e-6):
                return name
        raise AssertionError("mlp.post is none of ReLU, GELU, GELU (tanh) of mlp.pre")

    def norm(self) -> tuple[str, str]:
        """(LayerNorm / RMSNorm / none, pre / post): read from the model's modules and checked on the trace."""
        block, tr = self.model.blocks[0], self.trace
        kind = ("LayerNorm" if isinstance(block.norm1, nn.LayerNorm) else "RMSNorm" if isinstance(block.norm1, nn.RMSNorm)
                else "none")
        added = tr["blocks.0.resid_pre"] + tr["blocks.0.attn.out"]
        position = "pre" if torch.allclose(tr["blocks.0.resid_mid"], added, atol=1e-6) else "post"
        if kind == "none":
            assert position == "pre" and torch.equal(tr["blocks.0.attn.in"], tr["blocks.0.resid_pre"])
        return kind, position

    def positions(self) -> str:
        """none, rope, sinusoidal or learned: what the trace's embed.pos holds (rope: nothing, and the angles its
        queries and keys turn by in embed.rope)."""
        pos = self.trace["embed.pos"][0]
        if not pos.any():
            return "rope" if "embed.rope" in self.trace else "none"
        if torch.allclose(pos, sinusoidal_table(self.T, self.D), atol=1e-5):
            return "sinusoidal"
        torch.testing.assert_close(pos, self.model.embed.pos.weight[: self.T].detach())
        return "learned"


# --- reading the page ----------------------------------------------------------------------------------

class Claims:
    """The text of one tab, and the claims checked on it (each one must be on the page)."""
    count = 0

    def __init__(self, at: AppTest, where: str):
        assert not at.exception, (where, at.exception)
        self.at, self.where = at, where
        self.text = re.sub(r"\s*\n\s*", " ", page_text(at))        # a sentence may wrap in the Markdown source

    def says(self, *fragments: str) -> None:
        for fragment in fragments:
            Claims.count += 1
            assert fragment in self.text, f"{self.where}: the page does not say {fragment!r}\n\n{self.text[:3000]}"

    def never(self, fragment: str) -> None:
        assert fragment not in self.text, f"{self.where}: the page says {fragment!r}, which is not true here"

    def find(self, pattern: str) -> re.Match:
        Claims.count += 1
        m = re.search(pattern, self.text)
        assert m, f"{self.where}: no sentence matching /{pattern}/ on the page\n\n{self.text[:3000]}"
        return m


def value(shown: str) -> float:
    return float(shown.replace(",", "").replace("−", "-").rstrip("%"))


def shows(shown: str, true: float, what: str = "") -> None:
    """`shown` (a number as the page writes it) is `true` rounded to the digits written."""
    mantissa, _, exponent = shown.rstrip("%").partition("e")                  # %g writes 2.18019e+06
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    step = 10 ** (int(exponent or 0) - decimals)
    assert abs(value(shown) - true) <= 0.5 * step + 1e-6 + 1e-6 * abs(true), \
        f"{what}: the page says {shown}, the model gives {true!r}"


def percent(shown: str, p: float, what: str = "") -> None:
    shows(shown, 100 * p, what)


def names(words: list[str]) -> str:
    """“a”, “b” and “c”: how a notice lists words."""
    quoted = [quote(w) for w in words]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def vector(shown: str) -> list[float]:
    return [value(x) for x in re.findall(NUMBER, shown)]


# --- the pages --------------------------------------------------------------------------------------------

def check_notices(c: Claims, ref: Ref) -> None:
    """The warning above every page: which words the model reads as <unk> (and nothing when none)."""
    if not ref.unknown:
        c.never("not in the model's vocabulary")
        return
    distinct = list(dict.fromkeys(ref.unknown))
    unit = "character" if ref.tok.kind == "char" else "word"
    n = len(ref.unknown)
    said = f"{n} {unit} is" if n == 1 else f"{n} {unit}s are"
    c.says(f"{said} not in the model's vocabulary ({names(distinct[:8])}")
    c.says(f"the model reads {'it' if n == 1 else 'each'} as <unk>.")


def check_word_list(c: Claims, at: AppTest, ref: Ref) -> None:
    """The panel of every word the model can read: its count, and every entry of the vocabulary but <unk> and
    the other special tokens (none for byte-level BPE, which reads any text)."""
    panels = [e for e in at.expander if " knows" in e.label]
    Claims.count += 1
    if ref.tok.unk_id is None:
        assert not panels
        return
    words = [t for t in ref.vocab if t not in SPECIAL]
    unit = "character" if ref.tok.kind == "char" else "word"
    [panel] = panels
    assert panel.label == f"The {len(words):,} {unit}s {escape(ref.bundle_name)} knows"
    [listed] = [m.value for m in panel.markdown]
    shown = [w.strip() for w in listed.split("·")]
    # Every word is listed as the charts label it (a space as ␣, "." as ⟨.⟩), escaped for Markdown.
    assert shown == [quote(visible(w))[1:-1] for w in words]


def check_offered_sentence(at: AppTest, ref: Ref) -> None:
    """With unknown words, a bundled model offers a sentence of its own: one it knows every word of."""
    buttons = [b for b in at.button if b.key == "use_example"]
    Claims.count += 1
    has_example = ref.bundle_name not in (GPT2_NAME, *LABS) or bool(ref.bundle.facts.get("example"))
    if not (ref.unknown and has_example):
        assert not buttons, f"offers {buttons[0].label!r} though it reads every word, or has no sentence of its own"
        return
    [button] = buttons
    assert button.label.startswith(f"Use a sentence {ref.bundle_name} knows: “")
    button.click().run()
    offered = Ref(ref.bundle, at.session_state["text"], ref.bundle_name)
    assert offered.text != ref.text and not offered.unknown                 # every word of it known
    assert not [w for w in at.warning if "not in the model's vocabulary" in w.value]


def check_home(at: AppTest, ref: Ref) -> None:
    c = Claims(at, "home")
    check_notices(c, ref)
    T, D, V, L, H, F = ref.T, ref.D, ref.V, ref.L, ref.H, ref.F
    tr = ref.trace
    m = c.find(r"Model: .+? · (\d+) layers · d_model (\d+)")
    assert (int(m[1]), int(m[2])) == (L, D)
    c.says(f"It reads at most {ref.model.cfg.max_len:,} tokens.")
    seats = ref.model.embed.pos.weight.shape[0] if ref.positions() == "learned" else None
    assert seats in (None, ref.model.cfg.max_len)                  # a learned table has a row per seat it reads
    check_word_list(c, at, ref)
    c.says(f"The model reads {T} token ids from a vocabulary of {V:,}.", f"#### {T} tokens",
           f"Each token id picks a row of {D} learned numbers.", f"#### {T} x {D}")
    pos = ref.positions()
    if pos == "rope":
        c.says("Nothing is added: attention turns each query and key by an angle that grows with its position "
               "(rotary positions).")
        queries_and_keys_turn(ref)
    else:
        c.says("This model adds no position signal." if pos == "none" else f"A {pos} position signal is added to each row.")
    c.says(f"**Attention ({L} layers x {H} heads)**", f"#### {H} x {T} x {T} per layer",
           f"Each head weighs the {T} tokens; each token looks only at itself and earlier tokens.")
    G = tr["blocks.0.attn.k"].shape[1]                                             # key/value heads kept
    if G < H:
        c.says(f"Its {H} query heads share {G} key/value heads.")
    for layer in range(L):
        pattern = tr[f"blocks.{layer}.attn.pattern"][0]                            # (H, T, T)
        assert not pattern.triu(1).any()                                          # never a later token
        torch.testing.assert_close(pattern.sum(-1), torch.ones(H, T))
    act = {"relu": "ReLU", "gelu": "GELU", "gelu_tanh": "GELU, tanh approximation",
           "swiglu": "SwiGLU: SiLU of a gate times an up projection"}[ref.activation()]
    c.says(f"Each token is expanded to {F:,} neurons, activated ({act}) and contracted back.",
           f"#### {T} x {D} → {T} x {F:,} → {T} x {D}")
    kind, position = ref.norm()
    if kind == "none":
        c.says("Every layer adds its work to the stream; this model has no normalization.")
    elif position == "pre":
        c.says(f"Every layer adds its work to the stream; {kind} rescales the copy each sublayer reads (pre-norm), "
               "so the stream itself can grow.")
        stream_is_only_added_to(ref)
    else:
        c.says(f"Every layer adds its work to the stream; {kind} rescales the stream after each addition "
               "(post-norm), so it keeps its scale.")
        stream_keeps_its_scale(ref)
    p = ref.probs()[-1]
    m = c.find(rf"The last position's {V:,} scores become probabilities: the top guess is (“.*?”) at (\d+)%\.")
    assert m[1] == quote(ref.vocab[int(p.argmax())])
    percent(m[2], float(p.max()), "the top guess")
    c.says(f"#### {V:,} scores")


def queries_and_keys_turn(ref: Ref) -> None:
    """Rotary positions: each layer's queries and keys are its unturned ones turned pair by pair (dimension i with
    i + K/2) by the trace's angles, position x frequency."""
    tr, K = ref.trace, ref.K
    angles = tr["embed.rope"][0].double()                                           # (T, K/2)
    T = angles.shape[0]
    freqs = angles[1] if T > 1 else angles[0]
    torch.testing.assert_close(angles, torch.arange(T, dtype=torch.float64)[:, None] * freqs[None])
    cos, sin = angles.cos().repeat(1, 2), angles.sin().repeat(1, 2)                 # (T, K)
    for layer in range(ref.L):
        for name in ("q", "k"):
            x = tr[f"blocks.{layer}.attn.{name}_unrotated"][0].double()            # (heads, T, K)
            half = torch.cat([-x[..., K // 2:], x[..., :K // 2]], -1)
            torch.testing.assert_close(x * cos + half * sin, tr[f"blocks.{layer}.attn.{name}"][0].double(),
                                       rtol=1e-5, atol=1e-5)


def stream_is_only_added_to(ref: Ref) -> None:
    """Pre-norm: each block adds attention's and the feed-forward network's outputs to the stream and never rescales it."""
    for layer in range(ref.L):
        b = f"blocks.{layer}"
        torch.testing.assert_close(ref.trace[f"{b}.resid_post"],
                                   ref.trace[f"{b}.resid_pre"] + ref.trace[f"{b}.attn.out"] + ref.trace[f"{b}.mlp.out"])


def stream_keeps_its_scale(ref: Ref) -> None:
    """Post-norm: the stream after each block is a norm's output, so its length is bounded by the norm's gain."""
    sizes = []
    for layer, block in enumerate(ref.model.blocks):
        for norm, name in ((block.norm1, "resid_mid"), (block.norm2, "resid_post")):
            gain = norm.weight.detach().abs().max()
            shift = norm.bias.detach().norm() if getattr(norm, "bias", None) is not None else 0.0
            stream = ref.trace[f"blocks.{layer}.{name}"][0].norm(dim=-1)
            assert float(stream.max()) <= float(gain * math.sqrt(ref.D) + shift) + 1e-4
            sizes.append(float(stream.mean()))
    assert max(sizes) <= 1.5 * min(sizes)


def check_tokenization(at: AppTest, ref: Ref) -> None:
    tok, T, V = ref.tok, ref.T, ref.V
    kinds = {"word": "Word", "char": "Character", "bpe": "BPE"}
    c = Claims(show_section(at, "tokenization", "Your sentence as tokens"), "tokenization: as tokens")
    check_notices(c, ref)
    c.says(f"This model uses a **{kinds[tok.kind].lower()} tokenizer**", f"with a vocabulary of **{V:,} tokens**",
           f"This model uses a **{kinds[tok.kind].lower()} tokenizer** with {V:,} tokens.")
    assert V == tok.vocab_size
    if tok.unk_id is None:
        c.says("**no token is ever unknown**")
        assert tok.decode(ref.ids) == ref.text                                 # every byte read, nothing lost
    elif ref.unknown:
        n = len(ref.unknown)
        c.says(f"**{n} of {T} tokens {'is' if n == 1 else 'are'} unknown** to this model (shown in orange): "
               + ", ".join(quote(w) for w in dict.fromkeys(ref.unknown)) + ".",
               "orange pieces were not and are read as `<unk>`")
    else:
        c.says("Every token of this sentence is in the model's vocabulary: nothing was replaced by `<unk>`.")
    if tok.unk_id is not None:                          # what <unk> is, for this kind of tokenizer
        one, many = {"word": ("word", "words"), "char": ("character", "characters")}[tok.kind]
        c.says(f"A {one} tokenizer only knows the {many} it saw in its training text",
               f"The model then sees the same `<unk>` for every unknown {one}: ")
        if tok.kind == "char":
            c.says(f"({V - 1:,} of them)")
        m = c.find(r"it cannot tell (“.+?”) from (“.+?”)\.")
        for example in m.groups():                       # two pieces this tokenizer really reads as <unk>
            [piece] = [p for p in tok.pieces(example[1:-1])]
            assert piece.id == tok.unk_id, example
        assert m[1] != m[2]
        if ref.unknown:                                 # the sentence's own unknown pieces come first
            assert m[1] == quote(ref.unknown[0])
    title = figure_titled(at, "Your sentence as")["layout"]["title"]["text"]
    assert title.startswith(f"Your sentence as {T} token{'s' * (T != 1)} ")

    c = Claims(show_section(at, "tokenization", "Three ways to cut"), "tokenization: three ways")
    c.says(f"The model actually reads the **{kinds[tok.kind]}** tokens (marked ★).")
    counts = {m.label: int(m.value.replace(",", "")) for m in at.metric}
    Claims.count += 2
    assert counts[f"{kinds[tok.kind]} tokens ★ (this model)"] == T
    assert counts["Character tokens" + (" ★ (this model)" if tok.kind == "char" else "")] == len(ref.text)

    at.session_state["math_tokenization"] = True
    c = Claims(show_section(at, "tokenization", "BPE merges"), "tokenization: BPE merges")
    check_merges(c, at, ref)

    c = Claims(show_section(at, "tokenization", "The vocabulary"), "tokenization: vocabulary")
    c.says(f"The model's vocabulary: {V:,} tokens", f"{V:,} of {V:,} entries shown.")
    position = at.session_state["token"]
    i, piece = ref.ids[position], ref.pieces[position]
    c.says(f"The model receives only the number **{i}**; the letters are gone from here on.")
    if piece.text in ref.unknown:
        c.says(f"**not found**, so it becomes `<unk>` with **id {i}**.")
        assert i == tok.unk_id
    elif tok.kind == "bpe":
        c.says(f"Its entry in the {V:,}-token vocabulary is at index **{i}**: its token id is **{i}**.")
        assert ref.vocab[i] == piece.text
    else:
        c.says(f"found at index **{i}**, so its token id is **{i}**.")
        assert ref.vocab[i] == (piece.text.lower() if tok.kind == "word" else piece.text)
    if tok.kind == "word":
        c.says(f"2. Lowercased (the word tokenizer ignores capitals): {quote(piece.text.lower())}")


def check_merges(c: Claims, at: AppTest, ref: Ref) -> None:
    """The replay of one word's BPE merges: its last merge is the lowest-ranked that fits, and the count is real."""
    from explorer.steps.tokenization import comparison_tokenizers
    bpe = ref.tok if ref.tok.kind == "bpe" else comparison_tokenizers(ref.bundle)[0]["bpe"]
    special = bpe.vocab_size - 256 - len(bpe.merges)
    size = (f"{bpe.vocab_size:,} tokens: 256 single bytes + {len(bpe.merges):,} learned merges"
            + (f" + {special} special token{'s' * (special != 1)}" if special > 0 else ""))
    if bpe is ref.tok:
        c.says(f"These are the model's own BPE merges ({size}).")
    else:
        c.says(f"This BPE tokenizer ({size}) was built only for the comparison; the model itself reads "
               f"{ {'word': 'word', 'char': 'character'}[ref.tok.kind]} tokens.")
    word = at.session_state["tokenization_word"]
    history = bpe.replay(word)
    n = len(bpe.encode(word))
    assert [bpe.token_text(s) for s in history[-1]] == [p.text for p in bpe.pieces(word)]
    if len(history) == 1:
        bytes_ = len(word.encode("utf-8"))
        c.says(f"so it stays as its **{bytes_} single bytes**: {bytes_} tokens.")
        assert n == bytes_
        return
    step = at.session_state["tokenization_step"]
    assert step == len(history) - 1                                          # a new word shows all its merges
    ranks = {pair: r for r, pair in enumerate(bpe.merges)}
    before = history[-2]
    lowest = min(ranks[p] for p in zip(before, before[1:]) if p in ranks)
    m = c.find(rf"\*\*Step {step}\*\*: merge (“.*?”) \+ (“.*?”) → (“.*?”)\. It is merge \*\*#(\d+)\*\*")
    assert int(m[4]) == lowest
    a, b = bpe.merges[lowest]
    from explorer.steps.tokenization import visible
    assert (m[1], m[2]) == (quote(visible(bpe.token_text(a))), quote(visible(bpe.token_text(b))))
    c.says(f"No learned merge fits any more: the word ends as **{n} token{'s' * (n != 1)}**.")


def check_embedding(at: AppTest, ref: Ref) -> None:
    T, D, V = ref.T, ref.D, ref.V
    W = ref.model.embed.tok.weight.detach()                                          # (V, D), as stored
    rows = ref.trace["embed.tok"][0]                                                 # (T, D), as used
    scale = float((rows / W[ref.ids]).nan_to_num(1.0).median())
    torch.testing.assert_close(rows, W[ref.ids] * scale)
    c = Claims(show_section(at, "embedding", "Your sentence's rows"), "embedding: rows")
    check_notices(c, ref)
    one, many = {"word": ("word", "words"), "char": ("character", "characters"), "bpe": ("token", "tokens")}[ref.tok.kind]
    c.says(f"**vector of {D} numbers**", f"({V:,} rows)", f"({D} columns)",
           f"Each row is one token's {D:,} learned numbers",
           f"The same {one} always gets the same row, wherever it stands")
    if abs(scale - 1) > 1e-6:
        m = c.find(rf"multiplies every row by √{D} = ([\d.]+)")
        shows(m[1], scale, "embed_scale")
    else:
        c.never("also multiplies every row by")
    for i in range(T):
        for j in range(i):
            if ref.ids[i] == ref.ids[j]:
                assert torch.equal(rows[i], rows[j])
    if ref.unknown:
        c.says(f"Unknown {many} all share the `<unk>` row.")
        for i in (i for i, t in enumerate(ref.ids) if t == ref.tok.unk_id):
            torch.testing.assert_close(rows[i], W[ref.tok.unk_id] * scale)
    else:
        c.never(f"Unknown {many} all share")
    check_closeness(c, ref, W)
    title = figure_titled(at, "This sentence's embeddings")["layout"]["title"]["text"]
    assert title.startswith(f"This sentence's embeddings: {T} tokens x {D:,} numbers")
    check_lookup(c, at, ref, W, rows)

    c = Claims(show_section(at, "embedding", "The vocabulary map"), "embedding: map")
    X = W.double() - W.double().mean(0)
    spread = torch.linalg.eigvalsh(X.T @ X).flip(0)                                 # per direction, largest first
    share = (spread[:2] / spread.sum()).tolist()
    c.says(f"The embedding matrix has {V:,} rows of {D:,} numbers", f"the other {D - 2} directions")
    m = c.find(rf"They keep \*\*{NUMBER}%\*\* of the spread \(direction 1: {NUMBER}%, direction 2: {NUMBER}%\)")
    percent(m[1] + "%", sum(share), "kept")
    percent(m[2] + "%", share[0], "direction 1")
    percent(m[3] + "%", share[1], "direction 2")

    c = Claims(show_section(at, "embedding", "Similar tokens"), "embedding: similar")
    c.says("The diagonal is always 1 (every token compared with itself).")
    unit = rows.double() / rows.double().norm(dim=-1, keepdim=True)
    torch.testing.assert_close(torch.diag(unit @ unit.T), torch.ones(T, dtype=torch.float64))

    at.session_state["math_embedding"] = True
    c = Claims(show_section(at, "embedding", "Nearest neighbours"), "embedding: neighbours")
    position = at.session_state["token"]
    token_id = ref.ids[position]
    Wd = W.double()
    cos = Wd @ Wd[token_id] / (Wd.norm(dim=1) * Wd[token_id].norm())                 # (V,)
    cos[token_id] = -2
    k = min(8, V - 1)
    c.says(f"The {k} vocabulary tokens whose rows point most nearly the same way as the row of "
           f"{quote(ref.vocab[token_id])}, out of all {V:,}.")
    bars = figure_titled(at, "Nearest neighbours of")["data"][0]
    shown_ids = [int(i) for i in decode(bars["customdata"])]
    assert len(shown_ids) == k and cos[shown_ids].min() >= cos.topk(k).values.min() - 1e-9    # the k nearest
    np.testing.assert_allclose(decode(bars["x"]), cos[shown_ids].numpy(), atol=1e-6)
    m = c.find(rf"Cosine similarity of {re.escape(quote(ref.vocab[token_id]))} \(row {token_id}\) and (“.*?”) "
               rf"\(row (\d+)\)")
    nearest = int(m[2])
    assert m[1] == quote(ref.vocab[nearest]) and float(cos[nearest]) >= float(cos.max()) - 1e-9
    a, b = Wd[token_id], Wd[nearest]
    m = c.find(rf"\({D} terms\) = \*\*{NUMBER}\*\*")
    shows(m[1], float(a @ b), "dot product")
    m = c.find(rf"\|a\| = √\(a·a\) = \*\*{NUMBER}\*\*, \|b\| = \*\*{NUMBER}\*\*")
    shows(m[1], float(a.norm()), "|a|")
    shows(m[2], float(b.norm()), "|b|")
    m = c.find(rf"cosine = a·b / \(\|a\| × \|b\|\) = .*? = \*\*{NUMBER}\*\*")
    shows(m[1], float(cos[nearest]), "cosine")
    check_lookup(c, at, ref, W, rows)


GROUPS = {"animal": ["bear", "bird", "cat", "cow", "dog", "duck", "fox", "frog", "goat", "horse", "mouse", "owl", "pig",
                     "puppy", "rabbit"],
          "feeling": ["angry", "bored", "happy", "hungry", "sad", "scared", "sleepy", "tired"]}


def check_closeness(c: Claims, ref: Ref, W: torch.Tensor) -> None:
    """The explanation says words used alike sit close (animals to animals, ...) only where the rows show it, with
    the numbers measured; otherwise it gives this model's own nearest row to the sentence's first known token."""
    Wd = W.double()
    unit = Wd / Wd.norm(dim=1, keepdim=True)

    def nearest(i: int, k: int) -> list[int]:
        cos = unit @ unit[i]
        cos[i] = -2
        return cos.topk(k).indices.tolist()

    close = []
    for name, words in GROUPS.items():
        pieces = [ref.tok.pieces(" " + w if ref.tok.kind == "bpe" else w) for w in words]
        ids = [p[0].id for p, w in zip(pieces, words) if len(p) == 1 and not p[0].unknown and len(p[0].text.strip()) == len(w)]
        if len(ids) < 4:
            c.never(f"of each {name}'s")
            continue
        same = float(np.mean([len(set(nearest(i, 5)) & set(ids)) for i in ids]))
        m = c.find(rf"of each {name}'s 5 nearest rows, on average \*\*{NUMBER}\*\* are {name}s too")
        shows(m[1], same, f"{name}s near {name}s")
        if same >= 2.5 and same > 5 * 5 * (len(ids) - 1) / (ref.V - 1):
            close.append(name)
    if close:
        c.says("ended up near each other: " + ", ".join(f"{g}s close to {g}s" for g in close) + ".")
        return
    c.never("close to")
    c.says("Training moves the tokens around so that words used in the same way can end up near each other.")
    first = next(i for i in ref.ids if i != ref.tok.unk_id)
    m = c.find(rf"the row nearest to that of {re.escape(quote(ref.vocab[first]))} is the row of (“.*?”) \(cosine "
               rf"similarity {NUMBER}\)")
    other = [i for i in nearest(first, 2) if i != ref.tok.unk_id][0]
    assert m[1] == quote(ref.vocab[other])
    shows(m[2], float(unit[first] @ unit[other]), "the example's cosine")


def check_lookup(c: Claims, at: AppTest, ref: Ref, W: torch.Tensor, rows: torch.Tensor) -> None:
    """The math panel: token -> id -> row of the matrix -> its first numbers, and embed.tok."""
    position = at.session_state["token"]
    token_id, piece = ref.ids[position], ref.pieces[position]
    name = quote(piece.text) + (" (read as `<unk>`)" if piece.text in ref.unknown else "")
    c.says(f"1. Token {position} is {name} with **id {token_id}**.",
           f"2. So the model reads **row {token_id}** of the {ref.V:,} x {ref.D} embedding matrix.")
    n = min(6, ref.D)
    m = c.find(rf"That row's first {n} of {ref.D} numbers: `\[(.*?)\]`")
    for shown, true in zip(vector(m[1]), W[token_id, :n].tolist()):
        shows(f"{shown:.4f}", true, "the row")
    m = c.find(r"(?:unchanged: |giving )`\[(.*?)\]`")
    for shown, true in zip(vector(m[1]), rows[position, :n].tolist()):
        shows(f"{shown:.4f}", true, "embed.tok")


def check_positions(at: AppTest, ref: Ref) -> None:
    T, D = ref.T, ref.D
    kind = ref.positions()
    pos = ref.trace["embed.pos"][0]
    c = Claims(show_section(at, "positions", "The seat numbers"), "positions: seats")
    check_notices(c, ref)
    if kind == "sinusoidal":
        L = ref.model.embed.pos_table.shape[0]
        c.says(f"Position signal: sinusoidal (fixed waves, {D} per position).", f"not one number but {D} numbers",
               f"up to the context of {L})", "Nothing here is learned")
        torch.testing.assert_close(ref.model.embed.pos_table, sinusoidal_table(L, D))
        assert not [n for n, _ in ref.model.named_parameters() if n.startswith("embed.pos")]
    elif kind == "learned":
        L = ref.model.embed.pos.weight.shape[0]
        c.says(f"Position signal: learned (a trained table of {L:,} rows of {D} numbers).",
               f"one row of {D} numbers for each seat, 0 to {L - 1}")
    elif kind == "rope":
        K = ref.K
        c.says(f"Position signal: rotary (queries and keys turned in {K // 2} pairs per head, base "
               f"{ref.model.cfg.rope_theta:,.0f}; nothing added to the stream).",
               "nothing is added to a token's vector (its position vectors are all zero)")
        assert not pos.any()
        queries_and_keys_turn(ref)
    else:
        c.says("Position signal: none.", "This model has no position signal: every position vector is zero")

    at.session_state["math_positions"] = True
    c = Claims(show_section(at, "positions", "Token + position"), "positions: token + position")
    p = at.session_state["token"]
    tok_, pos_, out = (float(ref.trace[name][0, p].norm()) for name in ("embed.tok", "embed.pos", "embed.out"))
    m = c.find(rf"token vector {NUMBER}, position vector {NUMBER}, input {NUMBER}\.")
    shows(m[1], tok_, "token vector")
    shows(m[2], pos_, "position vector")
    shows(m[3], out, "input")
    one, many = {"word": ("word", "words"), "char": ("character", "characters"), "bpe": ("token", "tokens")}[ref.tok.kind]
    inputs = ref.trace["embed.out"][0]                                               # (T, D)
    if kind in ("none", "rope"):                    # rotary positions turn queries and keys, not the input
        c.says(f"the same {one} in two different seats enters the model as the same vector.")
        c.never("two different vectors")
    else:
        c.says(f"The same {one} in two different seats therefore enters the model as two different vectors.")
        table = ref.model.embed.pos_table if kind == "sinusoidal" else ref.model.embed.pos.weight.detach()
        assert len(torch.unique(table, dim=0)) == len(table)                       # every seat its own row
    repeats = [(i, j) for j in range(T) for i in range(j) if ref.ids[i] == ref.ids[j]]
    if repeats:
        i, j = repeats[0]
        gap = float((inputs[i] - inputs[j]).abs().max())
        m = c.find(rf"In your sentence, {re.escape(quote(ref.tokens[j]))} stands in seats {i} and {j}: its two input "
                   rf"vectors (?:differ by up to \*\*{NUMBER}\*\* in one dimension|(are exactly the same))\.")
        if m[2]:
            assert gap == 0 and kind in ("none", "rope")
        else:
            shows(m[1], gap, "the repeated word's two inputs")
            assert gap > 0
    dim = at.selectbox(key="positions_math_dim").value
    c.says(f"Token {quote(ref.tokens[p])} at position **{p}**, dimension **{dim}** of {D}:")
    table_value = float(pos[p, dim])
    if kind == "sinusoidal":
        angle = p / 10000 ** (2 * (dim // 2) / D)
        wave = math.sin(angle) if dim % 2 == 0 else math.cos(angle)
        m = c.find(rf"(?:sin|cos)\({NUMBER}\) = \*\*{NUMBER}\*\*; the model's table holds \*\*{NUMBER}\*\*")
        shows(m[1], angle, "angle")
        shows(m[2], wave, "the wave")
        shows(m[3], table_value, "the table")
    elif kind == "learned":
        m = c.find(rf"takes dimension {dim}: \*\*{NUMBER}\*\*")
        shows(m[1], table_value, "the learned table")
    m = c.find(rf"Input = token \+ position = {NUMBER} \+ \({NUMBER}\) = \*\*{NUMBER}\*\*")
    for shown, name in zip(m.groups(), ("embed.tok", "embed.pos", "embed.out")):
        shows(shown, float(ref.trace[name][0, p, dim]), name)

    c = Claims(show_section(at, "positions", "Which seats look alike"), "positions: alike")
    if kind == "sinusoidal":
        c.says("Neighbouring seats look alike", "the similarity depends only on the distance between two seats")
        x = pos.double() / pos.double().norm(dim=-1, keepdim=True)
        sims = x @ x.T                                                               # (T, T)
        for i in range(T):
            for j in range(T):
                assert abs(float(sims[i, j] - sims[0, abs(i - j)])) < 1e-5
        assert float(sims.diagonal(1).min()) > 0.5                                 # neighbours alike
    elif kind == "learned":
        c.says("Whatever structure you see here (for example neighbours looking alike) the model learned.")

    c = Claims(show_section(at, "positions", "What if?"), "positions: what if")
    c.says(f"two sentences made of the same {many} in a different order")
    a, b = at.session_state["positions_sentence_a"], at.session_state["positions_sentence_b"]
    ids_a, ids_b = ref.tok.encode(a), ref.tok.encode(b)
    Claims.count += 1                                # the pair offered is what that sentence says
    assert ids_a != ids_b and sorted(ids_a) == sorted(ids_b) and ref.tok.unk_id not in ids_a, (a, b)
    check_order_verdict(c, at, ref, kind)


def check_order_verdict(c: Claims, at: AppTest, ref: Ref, kind: str) -> None:
    """The two-orders experiment, recomputed: three runs of each sentence, words matched k-th with k-th."""
    a, b = at.session_state["positions_sentence_a"], at.session_state["positions_sentence_b"]
    ids_a, ids_b = ref.tok.encode(a), ref.tok.encode(b)
    if ids_a == ids_b:
        c.says("The two sentences are the same, token for token")
        return
    runs = lambda ids: [ref.model.run(ids), ref.model.run(ids, edits=edits.remove_positions(ref.model.cfg)),  # noqa: E731
                        ref.model.run(ids, edits=edits.remove_positions(ref.model.cfg), causal=False)]
    ta, tb = runs(ids_a), runs(ids_b)
    pairs, seen = [], {}
    for i, t in enumerate(ids_a):
        k = seen[t] = seen.get(t, -1) + 1
        where = [j for j, u in enumerate(ids_b) if u == t]
        if k < len(where):
            pairs.append((i, where[k]))
    same_bag = sorted(ids_a) == sorted(ids_b)
    if not same_bag:
        c.says(f"{quote(a)} and {quote(b)} do not use exactly the same words")
    if not pairs:
        c.says("They have no word in common")
        return
    ia, ib = [i for i, _ in pairs], [j for _, j in pairs]
    n = len(pairs)
    d_in, d_pred, n_same = [], [], []
    for x, y in zip(ta, tb):
        pa, pb = torch.softmax(x["logits"][0].double(), -1), torch.softmax(y["logits"][0].double(), -1)
        d = (pa[ia] - pb[ib]).abs().amax(-1)
        d_pred.append(d)
        d_in.append(float((x["embed.out"][0, ia] - y["embed.out"][0, ib]).abs().max()))
        n_same.append(int((d < 5e-5).sum()))
    as_is, no_pos, bag = (float(d.max()) for d in d_pred)
    if kind == "rope":
        m = c.find(rf"\*\*As trained\*\*, the same word enters the model with the same vector in both sentences "
                   rf"\(largest difference {NUMBER}\): rotary positions add nothing\. Its queries and keys are turned "
                   rf"by its seat inside attention, and its prediction differs by up to \*\*{NUMBER}\*\*\.")
        shows(m[1], d_in[0], "input difference as trained")
        shows(m[2], as_is, "prediction difference as trained")
        assert d_in[0] == 0
    elif kind != "none":
        m = c.find(rf"\*\*As trained\*\*, the same word enters the model with a different vector in each sentence "
                   rf"\(largest difference {NUMBER}\), because its seat number differs, and its prediction differs "
                   rf"by up to \*\*{NUMBER}\*\*\.")
        shows(m[1], d_in[0], "input difference as trained")
        shows(m[2], as_is, "prediction difference as trained")
        assert d_in[0] > 0
    else:
        c.says("This model has no position signal, so removing it changes nothing")
        assert as_is == no_pos
    m = c.find(rf"\*\*Without positions\*\*, every word enters with exactly the same vector in both sentences "
               rf"\(largest difference {NUMBER}\)\.")
    shows(m[1], d_in[1], "input difference without positions")
    assert d_in[1] == 0
    if no_pos < 5e-5:
        c.says("Every word's prediction is the same in both sentences.")
    else:
        m = c.find(rf"Yet the predictions still differ, by up to \*\*{NUMBER}\*\* \((\d+) of (\d+) words are "
                   rf"predicted the same\)")
        shows(m[1], no_pos, "prediction difference without positions")
        assert (int(m[2]), int(m[3])) == (n_same[1], n)
        if same_bag:
            c.says("That is the causal mask at work")
            assert bag < 5e-5                                 # lifting the mask is what removes the difference
            worst = int(d_pred[1].argmax())
            i, j = pairs[worst]
            vocab = ref.vocab
            c.says(f"{quote(vocab[ids_a[i]])} sees {quote(' '.join(vocab[t] for t in ids_a[:i + 1]))} in A but "
                   f"{quote(' '.join(vocab[t] for t in ids_b[:j + 1]))} in B")
    if bag < 5e-5:
        m = c.find(rf"its prediction is identical \(largest difference {NUMBER}, (\d+) of (\d+) words the same\)")
        shows(m[1], bag, "prediction difference as a bag of words")
        assert (int(m[2]), int(m[3])) == (n_same[2], n)
    else:
        m = c.find(rf"\*\*Without positions and without the mask\*\* the predictions differ by at most {NUMBER}\.")
        shows(m[1], bag, "prediction difference as a bag of words")


def check_attention(at: AppTest, ref: Ref) -> None:
    layer, head = at.session_state["layer"], at.session_state["head"]
    T, K, tr = ref.T, ref.K, ref.trace
    name = f"blocks.{layer}.attn"
    pattern = tr[f"{name}.pattern"][0, head].double()                                 # (T, T)
    c = Claims(show_section(at, "attention", "Queries, keys, values"), "attention: qkv")
    check_notices(c, ref)
    H, G = tr[f"{name}.q"].shape[1], tr[f"{name}.k"].shape[1]                    # query heads, key/value heads
    if G == H:
        c.says(f"Questions, labels and answers: layer {layer}, head {head}", f"Each head gets its own {K} numbers of each")
    else:
        c.says(f"Questions, labels and answers: layer {layer}, head {head}",
               f"Each head gets its own {K} query numbers; its {K} key and {K} value numbers are its group's: "
               f"{H // G} query heads share one key/value head ({G} key/value heads for {H} heads).",
               f"Head {head} reads key/value head {head // (H // G)}")

    c = Claims(show_section(at, "attention", "The four steps"), "attention: steps")
    keys = tr[f"{name}.k"][0].double().repeat_interleave(H // G, dim=0)             # (H, T, K): each head its group's
    raw = tr[f"{name}.q"][0].double() @ keys.transpose(-2, -1)                      # (H, T, T)
    scores = tr[f"{name}.scores"][0].double()
    big = scores.abs() > 1e-3
    m = c.find(rf"Divided by √K = √(\d+) = {NUMBER},")
    assert int(m[1]) == K
    shows(m[2], float((raw[big] / scores[big]).median()), "the scaling")
    c.says("Later tokens are hidden (−∞): a word may not look ahead.",
           "Each row becomes shares between 0 and 1 that add up to 1")
    assert not pattern.triu(1).any()
    torch.testing.assert_close(pattern.sum(-1), torch.ones(T, dtype=torch.float64))

    at.session_state["math_attention"] = True
    c = Claims(show_section(at, "attention", "Who looks at whom"), "attention: who looks at whom")
    query = at.session_state["token"]
    row = pattern[query, : query + 1]
    m = c.find(rf"{re.escape(ref.at(query))} puts \*\*{NUMBER}\*\* of its attention on (“.*?”(?: \(position \d+\))?)"
               rf"(?:, then \*\*{NUMBER}\*\* on (“.*?”(?: \(position \d+\))?)"
               rf"(?: and \*\*{NUMBER}\*\* on (“.*?”(?: \(position \d+\))?))?)?"
               rf"(; every other key gets less than 0\.005)?\.")
    stated = [(m[k], m[k + 1]) for k in (1, 3, 5) if m[k] is not None]
    # The three keys it attends to most, but none whose weight would be written 0.00 (after the first): then the
    # sentence says that every other key gets less than 0.005.
    top = row.topk(min(3, query + 1)).values
    listed = 1 + int((top[1:] >= 0.005).sum())
    assert len(stated) == listed and bool(m[7]) == (listed < len(top))
    named = {ref.at(i): i for i in range(query + 1)}
    for shown, who in stated:
        shows(shown, float(row[named[who]]), f"weight on {who}")
        assert value(shown) > 0                                  # never "0.00 on “it”"
    shown_keys = {named[who] for _, who in stated}
    least = min(float(row[i]) for i in shown_keys)
    others = [float(row[i]) for i in range(query + 1) if i not in shown_keys]
    assert all(w <= least + 1e-9 for w in others)                                   # the top ones
    if m[7]:
        assert all(w < 0.005 for w in others)
    assert float(row[named[stated[0][1]]]) >= float(row.max()) - 1e-9
    if query == 0:
        c.says("It is the first token, so it can only look at itself.")
    c.says(f"Orange: the lines of {quote(ref.tokens[query])}", "A line's width and opacity are proportional to its "
           "weight: half the weight, half as wide and half as opaque; weights under 0.01 are left out.")
    check_lines(figure_titled(at, "Who looks at whom"), pattern, query)
    key = at.selectbox(key="attention_math_key").value
    c.says(f"Query {ref.at(query)} (row {query}) and key {ref.at(key)} (column {key}), layer {layer} head {head}, "
           f"K = {K}:")
    q, k = tr[f"{name}.q"][0, head, query].double(), keys[head, key]
    m = c.find(rf"1\. \*\*Match\*\*: q·k = .*? = \*\*{NUMBER}\*\*")
    shows(m[1], float(q @ k), "q·k")
    m = c.find(rf"2\. \*\*Scale\*\*: .*? = \*\*{NUMBER}\*\*")
    shows(m[1], float(q @ k) / math.sqrt(K), "the scaled score")
    if key <= query:
        c.says(f"may look at positions 0 to {query} ({query + 1} keys")
        m = c.find(rf"4\. \*\*Softmax\*\*: .*? = \*\*{NUMBER}\*\*; the pattern holds \*\*{NUMBER}\*\*\.")
        shows(m[1], float(pattern[query, key]), "the softmax")
        shows(m[2], float(pattern[query, key]), "the pattern")

    c = Claims(show_section(at, "attention", "Every head"), "attention: every head")
    if ref.L * ref.H > 48:
        c.says(f"All {ref.L * ref.H} heads at once")
    gaps = [(float((tr[f"blocks.{l}.attn.pattern"][0, a] - tr[f"blocks.{l}.attn.pattern"][0, b]).abs().max()), l, a, b)
            for l in range(ref.L) for a in range(ref.H) for b in range(a + 1, ref.H)]       # every pair of one layer
    if ref.H == 1:
        c.says("This model has **one head** per layer",
               "This model has one head per layer, so each layer has a single pattern")
        c.never("so their patterns differ")
    else:
        c.says(f"Each layer of this model has **{ref.H} heads**")
        gap, l, a, b = min(gaps)
        if gap >= 0.01:
            m = c.find(rf"so their patterns differ: even the two most alike, heads {a} and {b} of layer {l}, differ by "
                       rf"as much as \*\*{NUMBER}\*\* in one weight\.")
        else:
            m = c.find(rf"heads {a} and {b} of layer {l} have nearly the same pattern: no weight differs by more than "
                       rf"\*\*{NUMBER}\*\*")
            c.never("so their patterns differ")
        shows(m[1], gap, "the most alike heads' largest difference")

    check_attention_whatifs(show_section(at, "attention", "What if?"), ref)


def radio_choices(radio) -> list:
    """The values behind a radio's options (indices, or keys such as "chosen"), in the order shown."""
    values = {}
    for candidate in [*range(len(radio.options)), "chosen", "most", "scaling", "mask"]:
        try:
            values.setdefault(str(radio.format_func(candidate)), candidate)
        except (KeyError, IndexError, TypeError):
            pass
    return [values[label] for label in radio.options]


VISIBLE = 0.05        # a change a student can see on the bars' 0-to-1 scale (explorer/steps/whatif.py says so in words)


def changes(ref: Ref, after) -> torch.Tensor:
    """The largest change of any token's probability in the forecast after each position: (T,)."""
    return (ref.probs(after) - ref.probs()).abs().amax(-1)


def at_most(largest: float) -> str:
    """How a small change is bounded in words: the pattern, with the number to check."""
    return rf"by more than \*\*{NUMBER}\*\*" if largest >= 0.0005 else r"by as much as \*\*(0\.001)\*\*"


def check_bound(m: re.Match, group: int, largest: float, what: str) -> None:
    """"No word's probability moves by more than X" is true (X is at least the largest change) and tight (within
    the 0.001 its three decimals can say)."""
    bound = value(m[group])
    assert largest <= bound + 1e-9, f"{what}: the page says no more than {m[group]}, the model moves {largest!r}"
    assert largest < 0.0005 or bound - largest < 0.001 + 1e-9, f"{what}: {m[group]} is no tight bound of {largest!r}"


class Family:
    """A what-if's family of experiments (every head knocked out, every layer's feed-forward skipped), run by the
    test: `change[e]` is (T,), how much experiment e moves the forecast after each position."""

    def __init__(self, ref: Ref, kind: str, verb: str, members: str, runs: dict[str, dict]):
        self.kind, self.verb, self.members = kind, verb, members
        self.names = list(runs)
        self.change = torch.stack([changes(ref, ref.model.run(ref.ids, **how)) for how in runs.values()])   # (E, T)

    def best(self, position: int) -> tuple[str, float]:
        e = int(self.change[:, position].argmax())
        return self.names[e], float(self.change[e, position])

    def most_that_shows(self, position: int) -> str | None:
        """The member that changes the forecast after `position` most, if it changes it visibly."""
        best, largest = self.best(position)
        return best if largest >= VISIBLE else None

    def best_anywhere(self) -> tuple[str, int, float]:
        e, t = divmod(int(self.change.argmax()), self.change.shape[1])
        return self.names[e], t, float(self.change[e, t])


def check_size(c: Claims, largest: float) -> None:
    """The what-if's last sentence: how much the forecast moved, said plainly when it is little."""
    if largest >= VISIBLE:
        m = c.find(rf"The largest change of any word's probability is \*\*{NUMBER}\*\*\.")
        shows(m[1], largest, "the largest change")
    else:
        m = c.find(rf"That changes little: no word's probability moves {at_most(largest)}\.")
        check_bound(m, 1, largest, "the largest change")


def check_notes(c: Claims, at: AppTest, ref: Ref, family: Family, shown: str | None, changed: str,
                shown_change: torch.Tensor, position: int, button: str) -> None:
    """What the search of the family found, in words, and the token the page offers to look at instead."""
    tokens = ref.tokens
    after = lambda p: re.escape(f"the forecast after {quote(tokens[p])} (position {p})")     # noqa: E731
    elsewhere = None
    if shown is not None:
        best, largest = family.best(position)
        if largest < VISIBLE:
            m = c.find(rf"No single {re.escape(family.kind)} decides {after(position)}: {family.verb} any one of "
                       rf"{re.escape(family.members)} moves no word's probability {at_most(largest)}\.")
            check_bound(m, 1, largest, "the family's largest change here")
        elif best != shown:
            m = c.find(rf"Of {re.escape(family.members)}, {family.verb} {re.escape(best)} changes this forecast "
                       rf"most: by \*\*{NUMBER}\*\*\.")
            shows(m[1], largest, "the family's largest change here")
            shown_change = None                                    # nothing more is said
    if shown_change is not None and float(shown_change[position]) < VISIBLE:
        if shown is not None:
            best, where, largest = family.best_anywhere()
            if largest >= VISIBLE:
                m = c.find(rf"{family.verb.capitalize()} one {re.escape(family.kind)} matters more for other words of "
                           rf"this sentence: {family.verb} {re.escape(best)} changes {after(where)} by "
                           rf"\*\*{NUMBER}\*\*\.")
                shows(m[1], largest, "the family's largest change anywhere")
                elsewhere = where
            else:
                m = c.find(rf"In this sentence, {family.verb} any one of {re.escape(family.members)} moves no forecast "
                           rf"{at_most(largest)}\.")
                check_bound(m, 1, largest, "the family's largest change anywhere")
        else:
            where = int(shown_change.argmax())
            largest = float(shown_change[where])
            if largest >= VISIBLE:
                m = c.find(rf"{re.escape(changed)}, the forecast that changes most is {after(where)}: by "
                           rf"\*\*{NUMBER}\*\*\.")
                shows(m[1], largest, "the largest change anywhere")
                elsewhere = where
            else:
                m = c.find(rf"{re.escape(changed)}, no forecast of this sentence moves {at_most(largest)}\.")
                check_bound(m, 1, largest, "the largest change anywhere")
    looks = [b for b in at.button if b.key == button]
    Claims.count += 1
    if elsewhere is None:
        assert not looks, f"{c.where}: offers {looks[0].label!r}, but no other forecast changes visibly"
    else:
        assert [b.label for b in looks] == [f"Look at the forecast after {quote(tokens[elsewhere])}"]


def check_top_guess(c: Claims, ref: Ref, after, position: int, changed: str) -> float:
    """As it is / with the change: the top guess for the word after `position` and its chance."""
    p0, p1 = ref.probs()[position], ref.probs(after)[position]
    b, a = int(p0.argmax()), int(p1.argmax())
    m = c.find(rf"the model's top guess for the word after {re.escape(ref.at(position))} is (“.*?”) at "
               rf"\*\*{NUMBER}\*\*\. {re.escape(changed)}, (it is still|it becomes) (“.*?”)(?:, now)? at "
               rf"\*\*{NUMBER}\*\*\.")
    assert m[1] == quote(ref.vocab[b]) and m[4] == quote(ref.vocab[a])
    assert (m[3] == "it is still") == (a == b)
    shows(m[2], float(p0[b]), "top guess before")
    shows(m[5], float(p1[a]), "top guess after")
    return float((p1 - p0).abs().max())


def check_lines(figure: dict, pattern: torch.Tensor, query: int) -> None:
    """Who looks at whom: one line per weight of at least 0.01, its width and opacity proportional to the weight
    (one scale for the query's orange lines, another for the rest)."""
    drawn = {True: [], False: []}                                   # (weight, width, opacity) per kind of line
    for trace in figure["data"]:
        if trace.get("mode") != "lines":
            continue
        chosen = trace["line"]["color"] != "#4477AA"
        for hover in list(decode(trace["hovertext"]))[0::4]:
            drawn[chosen].append((float(hover.rsplit("weight ", 1)[1]), trace["line"]["width"], trace["opacity"]))
    T = pattern.shape[0]
    want = {True: sorted(float(pattern[query, j]) for j in range(query + 1) if pattern[query, j] >= 0.01),
            False: sorted(float(pattern[i, j]) for i in range(T) for j in range(i + 1)
                          if i != query and pattern[i, j] >= 0.01)}
    for chosen in (True, False):
        np.testing.assert_allclose(sorted(w for w, _, _ in drawn[chosen]), want[chosen], atol=5e-5)
        if drawn[chosen]:
            heaviest = max(drawn[chosen])
            for w, width, opacity in drawn[chosen]:                  # up to the 0.01 steps lines are grouped by
                assert abs(width - heaviest[1] / heaviest[0] * w) <= heaviest[1] / heaviest[0] * 0.0101
                assert abs(opacity - heaviest[2] / heaviest[0] * w) <= heaviest[2] / heaviest[0] * 0.0101


def check_attention_whatifs(at: AppTest, ref: Ref) -> None:
    """Each what-if the page offers, run by the test on its own copy of the model, against the page's words: the
    knocked-out heads searched (all of them, or the chosen layer's when there are too many), the head that
    matters most, the top guess before and after, how much it moved, and where it would move more."""
    layer, head, T, K = at.session_state["layer"], at.session_state["head"], ref.T, ref.K
    heads = ([(l, h) for l in range(ref.L) for h in range(ref.H)] if ref.L * ref.H <= 48
             else [(layer, h) for h in range(ref.H)])
    family = Family(ref, "head", "knocking out",
                    f"all {len(heads)} heads" if len(heads) == ref.L * ref.H else f"the {len(heads)} heads of layer {layer}",
                    {f"head {h} of layer {l}": dict(edits=edits.knock_out_head(l, h)) for l, h in heads})
    radio = at.radio(key="attention_whatif")
    query = at.session_state["token"]
    best = family.most_that_shows(query)
    offered = [f"Knock out {name}" for name in dict.fromkeys([f"head {head} of layer {layer}", best]) if name]
    Claims.count += 1
    knockouts = [o.removesuffix(", the head that matters most here") for o in radio.options if o.startswith("Knock")]
    assert knockouts == offered                     # the chosen head, and the one that matters most (if visibly)
    assert [o for o in radio.options if o.endswith(", the head that matters most here")] == \
        ([f"Knock out {best}, the head that matters most here"] if best else [])
    for choice in radio_choices(radio):
        at.radio(key="attention_whatif").set_value(choice).run()
        label = at.radio(key="attention_whatif").options[at.radio(key="attention_whatif").index]
        c = Claims(at, f"attention: what if {label!r}")
        assert at.session_state["token"] == query
        shown = None
        if knock := re.match(r"Knock out (head (\d+) of layer (\d+))", label):
            shown, h, l = knock[1], int(knock[2]), int(knock[3])
            what, changed = "Silence this head", f"With head {h} of layer {l} knocked out"
            after = ref.model.run(ref.ids, edits=edits.knock_out_head(l, h))
        elif label.startswith("Remove the √K scaling"):
            what = f"the scores are √K = √{K} = {math.sqrt(K):g} times larger before the softmax (not K = {K} times"
            changed = "Without the division by √K"
            after = ref.model.run(ref.ids, edits=edits.remove_scaling(ref.model.cfg))
            first = "blocks.0.attn.scores"                              # the first layer reads the same input
            torch.testing.assert_close(after[first], ref.trace[first] * math.sqrt(K))
        else:
            assert label.startswith("Lift the causal mask"), label
            what, changed = "Let every word look ahead at the words after it, too, in every head.", \
                "With the causal mask lifted"
            after = ref.model.run(ref.ids, causal=False)
            for l in range(ref.L):                                          # every head now looks ahead
                assert float(after[f"blocks.{l}.attn.pattern"][0, :, :-1].triu(1).sum(-1).min()) > 0
        c.says(what, f"The chart: the prediction for the word after the query token ({query}: "
                     f"{quote(ref.tokens[query])}).")
        largest = check_top_guess(c, ref, after, query, changed)
        check_size(c, largest)
        if label.startswith("Lift the causal mask"):
            c.says("The last token already sees every token" if query == T - 1
                   else f"can also see the {T - 1 - query} token(s) after it")
        check_notes(c, at, ref, family, shown, changed, changes(ref, after), query, "attention_whatif_look")


def check_feedforward(at: AppTest, ref: Ref) -> None:
    layer = at.session_state["layer"]
    T, D, F, tr = ref.T, ref.D, ref.F, ref.trace
    b = f"blocks.{layer}.mlp"
    act = ref.activation(layer)
    gated = act == "swiglu"                          # SwiGLU: the bend is read from the gate, post = SiLU(gate) x up
    pre_name = "gate" if gated else "pre"
    pre, post, out = tr[f"{b}.{pre_name}"][0], tr[f"{b}.post"][0], tr[f"{b}.out"][0]
    mlp = ref.model.blocks[layer].mlp
    W_in = mlp.W_gate if gated else mlp.W_in
    c = Claims(show_section(at, "feedforward", "Expand, activate, contract"), "feedforward: shapes")
    check_notices(c, ref)
    c.says(f"Layer {layer} of {ref.L}: every token's {D} numbers go through {F:,} neurons and come back as {D:,} "
           "numbers.")
    times = {2: "twice", 4: "four times"}.get(F / D, f"{F / D:g} times" if F * 10 % D == 0 else f"about {F / D:.1f} times")
    c.says(f"(here {D:,} → {F:,}: {times} as many")

    c = Claims(show_section(at, "feedforward", "Which neurons fire"), "feedforward: which fire")
    c.says(f"each column one of the {F:,} neurons")
    assert F <= 256                                                  # every neuron is drawn (wider: the strongest)
    m = c.find(rf"Here the values run from {NUMBER} to {NUMBER}(;|, and so do the colours)")
    shows(m[1], float(post.min()), "the lowest activation")
    shows(m[2], float(post.max()), "the highest activation")
    assert (m[3] == ";") == (act == "relu")
    if act == "relu":
        c.says("ReLU never goes below 0")
        assert float(post.min()) >= 0
    elif gated:
        c.says("SwiGLU multiplies SiLU of the gate by the up projection, which can have either sign")
        assert float(post.min()) < 0 < float(post.max())
    else:
        c.says("GELU can be slightly negative (never below about −0.17)")
        assert -0.17 - 5e-3 <= float(post.min()) < 0

    at.session_state["math_feedforward"] = True
    c = Claims(show_section(at, "feedforward", "The strongest neurons"), "feedforward: strongest")
    token = at.session_state["token"]
    c.says(f"The bars: the {min(10, F)} neurons that fire most for {quote(ref.tokens[token])}.",
           "Hover a bar to see the other tokens that fire it at least half as strongly.")
    bars = figure_titled(at, "Strongest neurons for token")["data"][0]
    top = post[token].topk(min(10, F))
    assert list(bars["x"]) == [f"n{j}" for j in top.indices.tolist()]
    np.testing.assert_allclose(decode(bars["y"]), top.values.numpy(), rtol=1e-6)
    for j, value, hover in zip(top.indices.tolist(), top.values.tolist(), bars["customdata"]):
        others = [t for t in post[:, j].argsort(descending=True).tolist()
                  if t != token and float(post[t, j]) > 0 and float(post[t, j]) >= 0.5 * value]
        if others:
            listed = [int(x) for x in re.findall(r"(?:^|<br>)(\d+) ", hover)]
            assert listed == others[:6] and hover.endswith(" …") == (len(others) > 6), (j, hover)
        else:
            assert hover == "no other token"
    m = c.find(rf"Token {token} {re.escape(quote(ref.tokens[token]))}, its strongest neuron \*\*n(\d+)\*\* in layer "
               rf"{layer}\.")
    j = int(m[1])
    assert float(post[token, j]) >= float(post[token].max()) - 1e-9
    c.says(f"(a weight matrix of {F:,} × {D:,})")
    assert tuple(W_in.weight.shape) == (F, D)
    m = c.find(rf"recorded mlp\.{pre_name} = {NUMBER} and mlp\.post = {NUMBER} for this token and neuron")
    shows(m[1], float(pre[token, j]), f"mlp.{pre_name}")
    shows(m[2], float(post[token, j]), "mlp.post")
    x = tr[f"{b}.in"][0, token].double()
    total = float(x @ W_in.weight[j].detach().double())
    latex = " ".join(element.value for element in at.latex)
    m = re.search(rf"= {NUMBER} \+ \(?{NUMBER}\)? = {NUMBER}", latex)
    Claims.count += 1
    assert m, latex
    shows(m[1], total, "the sum of products")
    shows(m[2], float(W_in.bias[j].detach()) if W_in.bias is not None else 0.0, "the bias")
    shows(m[3], float(pre[token, j]), "the neuron's value")
    if gated:                                        # then SiLU(gate) x up, with the up projection's own value
        m = re.search(rf"\\cdot {NUMBER} = {NUMBER}", latex)
        Claims.count += 1
        assert m, latex
        shows(m[1], float(tr[f"{b}.up"][0, token, j]), "the up projection")
        shows(m[2], float(post[token, j]), "SiLU(gate) x up")

    c = Claims(show_section(at, "feedforward", "Switched off"), "feedforward: switched off")
    if act == "relu":
        off, rule = post == 0, "exactly 0 after ReLU"
    elif gated:
        off = pre < 0
        rule = ("gated by a negative gate, whose SiLU lies between −0.28 and 0, so little of the up projection "
                "passes")
        assert float(nn.functional.silu(pre[off]).min()) >= -0.2785 and float(nn.functional.silu(pre[off]).max()) <= 0
    else:
        off, rule = pre < 0, "negative before GELU, so squashed to between −0.17 and 0"
        squashed = post[off]
        assert round(float(squashed.min()), 2) >= -0.17 and float(squashed.max()) <= 0      # to the digits shown
    count = int(off.sum())
    c.says(f"**{count:,} of {T * F:,}** neuron values ({T} tokens × {F:,} neurons) in layer {layer} are {rule}.")
    [metric] = [m for m in at.metric if m.label == "Switched off"]
    Claims.count += 1
    percent(metric.value, count / (T * F), "switched off")
    with torch.no_grad():
        without = mlp.W_out(post.masked_fill(off, 0.0))
    carry_nothing = torch.allclose(without, out, rtol=0, atol=1e-6)
    if act == "relu":
        c.says("Only the rest carry a signal on to W_out.")
        assert carry_nothing
    else:
        c.says("They still pass a faint signal on to W_out; the rest carry the strong one.")
        assert not carry_nothing

    show_section(at, "feedforward", "What if?")
    token = at.session_state["token"]
    family = Family(ref, "layer's feed-forward", "skipping", f"the {ref.L} layers' feed-forward networks",
                    {f"the feed-forward of layer {l}": dict(edits=edits.skip_mlp(l)) for l in range(ref.L)})
    best = family.most_that_shows(token)
    radio = at.radio(key="mlp_whatif")
    offered = [f"Skip {name}" for name in dict.fromkeys([f"the feed-forward of layer {layer}", best]) if name]
    Claims.count += 1
    assert [o.removesuffix(", the one that matters most here") for o in radio.options] == offered
    assert [o for o in radio.options if o.endswith("matters most here")] == \
        ([f"Skip {best}, the one that matters most here"] if best else [])
    for choice in radio_choices(radio):
        at.radio(key="mlp_whatif").set_value(choice).run()
        label = at.radio(key="mlp_whatif").options[at.radio(key="mlp_whatif").index]
        skipped = int(re.match(r"Skip the feed-forward of layer (\d+)", label)[1])
        c = Claims(at, f"feedforward: what if {label!r}")
        c.says(f"with layer {skipped}'s feed-forward output set to zero; the bars compare its guesses for the token after "
               f"{quote(ref.tokens[token])}.")
        after = ref.model.run(ref.ids, edits=edits.skip_mlp(skipped))
        p0, p1 = ref.probs()[token], ref.probs(after)[token]
        bb, aa = int(p0.argmax()), int(p1.argmax())
        changed = f"With the feed-forward of layer {skipped} skipped"
        start = f"{changed}, the top guess after {quote(ref.tokens[token])}"
        if aa == bb:
            m = c.find(rf"{re.escape(start)} stays {re.escape(quote(ref.vocab[bb]))}(?: at {NUMBER}%: this layer's "
                       rf"feed-forward network hardly matters for it\.|, but its probability goes from {NUMBER}% to {NUMBER}%\.)")
            if m[1] is not None:
                percent(m[1], float(p0[bb]), "unchanged top guess")
                percent(m[1], float(p1[bb]), "unchanged top guess")
            else:
                percent(m[2], float(p0[bb]), "top guess before")
                percent(m[3], float(p1[bb]), "top guess after")
        else:
            m = c.find(rf"{re.escape(start)} changes from {re.escape(quote(ref.vocab[bb]))} \({NUMBER}%\) to "
                       rf"{re.escape(quote(ref.vocab[aa]))} \({NUMBER}%\); {re.escape(quote(ref.vocab[bb]))} now "
                       rf"gets {NUMBER}%\.")
            percent(m[1], float(p0[bb]), "old top guess before")
            percent(m[2], float(p1[aa]), "new top guess")
            percent(m[3], float(p1[bb]), "old top guess after")
            assert float(m[2]) > float(m[3]) or float(p1[aa]) == float(p1[bb]), "the new favourite looks smaller"
        check_size(c, float((p1 - p0).abs().max()))
        check_notes(c, at, ref, family, f"the feed-forward of layer {skipped}", changed, changes(ref, after), token,
                    "mlp_whatif_look")


def check_residual(at: AppTest, ref: Ref) -> None:
    layer = at.session_state["layer"]
    tr, T, D = ref.trace, ref.T, ref.D
    kind, position = ref.norm()
    c = Claims(show_section(at, "residual", "How one block is wired"), "residual: wired")
    check_notices(c, ref)
    c.says(f"This model: {ref.L} layers, a stream of {D} numbers per token, "
           + ("no norm." if kind == "none" else f"{kind}, {position}-norm."))
    c.says("Because every layer adds more, the numbers in the stream tend to grow.")
    if kind == "none":
        c.says("This model has no normalization: the stream is only ever added to.")
        stream_is_only_added_to(ref)
    elif position == "pre":
        c.says("This model is **pre-norm**: the stream itself is never normalized; each sublayer reads a "
               "normalized copy, and one final norm is applied before the prediction.",
               f"After the last block, a final {kind} (final.norm) prepares the stream for the unembedding.")
        stream_is_only_added_to(ref)
        block = ref.model.blocks[layer]
        with torch.no_grad():
            torch.testing.assert_close(tr[f"blocks.{layer}.attn.in"], block.norm1(tr[f"blocks.{layer}.resid_pre"]))
            torch.testing.assert_close(tr["final.norm"], ref.model.final_norm(tr[f"blocks.{ref.L - 1}.resid_post"]))
    else:
        c.says("This model is **post-norm**: after each addition the whole stream is normalized, so it never "
               "grows far.")
        stream_keeps_its_scale(ref)

    c = Claims(show_section(at, "residual", "What a layer adds"), "residual: what a layer adds")
    size = lambda name: float(tr[f"blocks.{layer}.{name}"][0].norm(dim=-1).mean())      # noqa: E731
    m = c.find(rf"On average attention adds a vector {NUMBER} long to a stream {NUMBER} long, and the feed-forward network adds one "
               rf"{NUMBER} long to a stream {NUMBER} long \(averages over the {T} tokens\)\.")
    for shown, name in zip(m.groups(), ("attn.out", "resid_pre", "mlp.out", "resid_mid")):
        shows(shown, size(name), name)

    at.session_state["math_residual"] = True
    c = Claims(show_section(at, "residual", "Normalization"), "residual: normalization")
    if kind == "none":
        c.says("This model has no normalization layers")
    else:
        token = at.session_state["token"]
        m = c.find(rf"{kind} for token {token} {re.escape(quote(ref.tokens[token]))}, .*? in layer {layer}: its input "
                   r"is (.+?), its output (.+?)\. ")
        # the page names them in plain words; here, what each phrase is in the trace
        last = ref.model.cfg.n_layers - 1
        b = f"blocks.{layer}"
        named = {f"the stream entering layer {layer}": [f"{b}.resid_pre"], "what attention reads": [f"{b}.attn.in"],
                 f"the stream after layer {layer}'s attention": [f"{b}.resid_mid"],
                 "what the feed-forward network reads": [f"{b}.mlp.in"],
                 f"the stream leaving the last layer ({last})": [f"blocks.{last}.resid_post"],
                 "what the prediction reads": ["final.norm"], f"the stream leaving layer {layer}": [f"{b}.resid_post"],
                 f"the stream entering layer {layer} plus what attention adds": [f"{b}.resid_pre", f"{b}.attn.out"],
                 f"the stream after layer {layer}'s attention plus what the feed-forward network adds":
                     [f"{b}.resid_mid", f"{b}.mlp.out"]}
        assert m[1] in named and m[2] in named, (m[1], m[2])
        x = sum(tr[name][0, token] for name in named[m[1]]).double()                 # (D,)
        [output] = named[m[2]]
        y = tr[output][0, token]
        module = {"norm1": ref.model.blocks[layer].norm1, "norm2": ref.model.blocks[layer].norm2}.get(
            at.session_state["residual_norm"], ref.model.final_norm)
        with torch.no_grad():
            torch.testing.assert_close(module(x.float()), y, atol=1e-5, rtol=1e-5)   # the named values are its own
        eps = module.eps if module.eps is not None else torch.finfo(torch.float32).eps
        # Stretched or shifted only where the norm's learned gain and bias have moved from 1 and 0 (a fresh lab
        # model's have not), with the output's real mean and variance (or RMS).
        gain = module.weight.detach().double()
        bias = module.bias.detach().double() if getattr(module, "bias", None) is not None else None
        moved_gain = float((gain - 1).abs().max()) >= 5e-5
        moved_bias = bias is not None and float(bias.abs().max()) >= 5e-5
        out = y.double()
        if not moved_gain and not moved_bias:
            c.says("This norm's gain is still 1")
            c.never("stretched by a learned gain")
            c.never("no longer 0 and 1")
        if moved_gain:
            m = c.find(rf"stretched by a learned gain (?:per dimension )?\(from {NUMBER} to {NUMBER}\)")
            shows(m[1], float(gain.min()), "smallest gain")
            shows(m[2], float(gain.max()), "largest gain")
        if moved_bias:
            m = c.find(rf"shifted by a learned bias \(from {NUMBER} to {NUMBER}\)")
            shows(m[1], float(bias.min()), "smallest bias")
            shows(m[2], float(bias.max()), "largest bias")
        if kind == "LayerNorm":
            m = c.find(rf"mean(?: is)? {NUMBER}(?:,| and its) variance {NUMBER}")
            shows(m[1], float(out.mean()), "the output's mean")
            shows(m[2], float(out.var(unbiased=False)), "the output's variance")
            if moved_gain or moved_bias:
                c.says(": still 0 and 1 to four decimals." if (m[1].replace("-", ""), m[2]) == ("0.0000", "1.0000")
                       else ", no longer 0 and 1.")
        else:
            m = c.find(rf"(?:itself: RMS|so its RMS is) {NUMBER}\.")
            shows(m[1], float(out.pow(2).mean().sqrt()), "the output's RMS")
        latex = " ".join(element.value for element in at.latex)
        Claims.count += 1
        if kind == "LayerNorm":
            c.says("before the learned gain and bias, the vector has mean 0 and variance 1 (up to the tiny ε)")
            z = (x - x.mean()) / torch.sqrt(x.var(unbiased=False) + eps)
            assert abs(float(z.mean())) < 1e-9 and abs(float(z.var(unbiased=False)) - 1) < 1e-3
            mean = re.search(rf"\\text{{mean}} = .*?= {NUMBER}", latex)
            var = re.search(rf"\\text{{var}} = .*?= {NUMBER}", latex)
            assert mean and var, latex
            shows(mean[1], float(x.mean()), "mean")
            shows(var[1], float(x.var(unbiased=False)), "variance")
        else:
            c.says("before the learned gain, its RMS is 1")
            z = x / torch.sqrt((x ** 2).mean() + eps)
            assert abs(float(torch.sqrt((z ** 2).mean())) - 1) < 1e-3
            rms = re.search(rf"\\text{{RMS}} = .*?= {NUMBER}", latex)
            assert rms, latex
            shows(rms[1], float(torch.sqrt((x ** 2).mean() + eps)), "RMS")
        m = c.find(rf"Recomputed here, the output matches the model's trace to within ([\d.]+e[-+]\d+)\.")
        assert float(m[1]) < 1e-4

    c = Claims(show_section(at, "residual", "Logit lens"), "residual: logit lens")
    with_mid = at.toggle(key="residual_lens_mid").value
    stages = [("embed.out", "token + position")]
    for i in range(ref.L):
        if with_mid:
            stages.append((f"blocks.{i}.resid_mid", f"layer {i}: after attention"))
        stages.append((f"blocks.{i}.resid_post", f"layer {i}: after feed-forward"))
    with torch.no_grad():
        read = [torch.softmax(ref.model.unembed(ref.model.final_norm(tr[name][0, -1])).double(), -1)
                for name, _ in stages]
    torch.testing.assert_close(read[-1], ref.probs()[-1], atol=1e-5, rtol=1e-4)                      # the last stage is the real output
    tops = [int(p.argmax()) for p in read]
    final = tops[-1]
    first = len(tops) - 1
    while first > 0 and tops[first - 1] == final:
        first -= 1
    m = c.find(rf"After {re.escape(quote(ref.tokens[-1]))}, the model's final guess is (“.*?”) \({NUMBER}%\)\.")
    assert m[1] == quote(ref.vocab[final])
    percent(m[2], float(read[-1][final]), "the final guess")
    label = stages[first][1]
    c.says(f"it only becomes the top guess at the last stage, **{label}**." if first == len(tops) - 1
           else f"it is already the top guess from stage **{label}** on.")
    c.says("The last column is the model's real prediction.")


def check_prediction(at: AppTest, ref: Ref) -> None:
    V = ref.V
    at.session_state["math_prediction"] = True
    at.switch_page("pages/prediction.py").run()
    c = Claims(at, "prediction")
    check_notices(c, ref)
    c.says(f"one of the {V:,} tokens it knows")              # 50,257 as every count is written
    position = at.session_state["token"]
    logits = ref.trace["logits"][0, position].double()
    p = torch.softmax(logits, -1)
    best = int(p.argmax())
    metrics = {m.label: m for m in at.metric}
    Claims.count += 3
    assert metrics["Tokens in the draw"].value == f"{V:,} of {V:,}"
    assert metrics["Chance kept"].value == "100.00%"
    assert metrics["Favourite"].value == quote(ref.vocab[best])
    percent(metrics["Favourite"].delta.split()[0], float(p[best]), "the favourite")
    c.says(f"All {V:,} tokens take part in the draw; nothing is cut.")
    if position + 1 < ref.T:
        actual = ref.ids[position + 1]
        rank = 1 + int((logits > logits[actual]).sum()) + int((logits[:actual] == logits[actual]).sum())
        m = c.find(rf"In your sentence the next token is {re.escape(quote(ref.vocab[actual]))}: the model gave it "
                   rf"\*\*{NUMBER}%\*\* \(rank ([\d,]+) of {V:,}\)\.")
        percent(m[1], float(p[actual]), "the next token's chance")
        assert m[2] == f"{rank:,}"
    else:
        c.says(f"After the last token, {quote(ref.tokens[-1])}, the sentence ends")
    m = c.find(rf"For the likeliest token, {re.escape(quote(ref.vocab[best]))}: its logit is {NUMBER}; .*? add up to "
               rf"\*\*{NUMBER}\*\*\. So its probability is .*? = \*\*{NUMBER}\*\*\.")
    shows(m[1], float(logits[best]), "the top logit")
    shows(m[2], float(logits.exp().sum()), "the sum of exponentials")
    shows(m[3], float(p[best]), "the top probability")
    c.says("Top-k is off.", "Top-p is at 1: every token is allowed")
    m = c.find(rf"For {re.escape(quote(ref.vocab[best]))}: {NUMBER} / {NUMBER} = \*\*{NUMBER}\*\*")
    shows(m[1], float(p[best]), "before rescaling")
    shows(m[2], 1.0, "the mass kept")

    k = 5                                                   # cut to the five favourites
    if V <= 1000:
        at.slider(key="prediction_top_k").set_value(k).run()
    else:
        at.select_slider(key="prediction_top_k_steps").set_value(k).run()
    c = Claims(at, "prediction, top-5")
    mass = float(p.topk(k).values.sum())
    m = c.find(rf"{k} of {V:,} tokens take part in the draw\. Together they had {NUMBER}% of the chance; each is "
               rf"divided by {NUMBER} so that they add up to 100% again\.")
    percent(m[1], mass, "the mass kept")
    shows(m[2], mass, "the divisor")
    c.says(f"Top-k keeps ranks 1 to {k} and cuts the other {V - k:,}.")
    metrics = {m.label: m for m in at.metric}
    Claims.count += 3
    assert metrics["Tokens in the draw"].value == f"{k} of {V:,}"
    percent(metrics["Chance kept"].value, mass, "chance kept")
    percent(metrics["Favourite"].delta.split()[0], float(p[best]) / mass, "the favourite after the cut")
    m = c.find(rf"For {re.escape(quote(ref.vocab[best]))}: {NUMBER} / {NUMBER} = \*\*{NUMBER}\*\*")
    shows(m[2], mass, "the mass kept")
    shows(m[3], float(p[best]) / mass, "the favourite rescaled")

    at.slider(key="prediction_top_k").set_value(V).run() if V <= 1000 else \
        at.select_slider(key="prediction_top_k_steps").set_value(V).run()
    at.button(key="prediction_next").click().run()          # greedy: the favourite after the last token
    c = Claims(at, "prediction, greedy")
    written = int(ref.probs()[-1].argmax())
    c.says(f"{quote(ref.text)} + **{quote(ref.tok.decode([written]))}**")


PAGES = [("tokenization", check_tokenization), ("embedding", check_embedding), ("positions", check_positions),
         ("attention", check_attention), ("feedforward", check_feedforward), ("residual", check_residual)]


def open_app(model: str, text: str, bundle, request, monkeypatch) -> AppTest:
    """The app on the big picture, with `model` reading `text`, its last layer and head chosen."""
    at = AppTest.from_file(APP, default_timeout=60)
    if model == GPT2_NAME:
        from explorer.app import models
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")                          # a prepared cache needs no network
        monkeypatch.setattr(models, "CACHE_DIR", request.getfixturevalue("gpt2_cache"))
    if model in LABS:
        at.session_state["trained_models"] = {model: bundle}            # as the lab's "Explore" adds it
    cfg = bundle.model.cfg
    for key, value in dict(model=model, text=text, layer=cfg.n_layers - 1, head=cfg.n_heads - 1).items():
        at.query_params[key] = str(value)
    at.run()
    return at


@pytest.mark.parametrize("model, text", CASES)
def test_every_claim_on_every_step_page_is_what_the_model_computes(model, text, request, monkeypatch):
    bundle = (gpt2_bundle(request.getfixturevalue("gpt2_cache")) if model == GPT2_NAME
              else lab_model(model) if model in LABS else bundled(model))
    at = open_app(model, text, bundle, request, monkeypatch)
    assert not at.exception and at.session_state["model"] == model
    ref = Ref(bundle, text, model)
    assert list(at.session_state["view"].prepared.ids) == ref.ids                 # the page reads what we read
    start = Claims.count
    check_home(at, ref)
    for slug, check in PAGES:
        at.session_state[f"math_{slug}"] = True
        at.switch_page(f"pages/{slug}.py").run()
        check(at, ref)
    check_prediction(at, ref)
    check_offered_sentence(at, ref)
    print(f"\n{model}, {text!r}: {Claims.count - start} claims checked")
    assert Claims.count - start > 60
