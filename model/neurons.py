"""What a feed-forward neuron responds to and what it writes, read over a model's own text.

A neuron is one of the F numbers of `blocks.i.mlp.post` (after the activation; a gated MLP's SiLU(gate) x up). Its
*contexts* are the places in a text where it is largest; what it *writes* is its column of W_out, which it adds to
the residual stream, times its activation.

    own_text(bundle, user_text)        the text a model's neurons are read over: its own corpus (tiny tales, the
                                       roses poem, a lab model's training text) or, for a model trained elsewhere
                                       (GPT-2, SmolLM2), the bundled English text (ENGLISH)
    index_neurons(model, ids)          one pass over that text in windows, keeping every neuron's top activations
                                       with the activations around each (`NeuronIndex`), so a neuron's contexts are a
                                       lookup afterwards: `index.contexts(layer, neuron)`
    mlp_activations(model, tokens, layers)   mlp.post of some layers, reading no further than the last of them
    neuron_logits(model, layer, neuron)      what its output pushes up and down: its W_out column through the
                                       final norm's scale and the unembedding, one number per vocabulary token

    NeuronIndex.save(path), load_index(path)  the index kept on disk (safetensors), so a server passes once

A window starts with the tokenizer's document separator when it has one (GPT-2's and SmolLM2's `<|endoftext|>`, what
they saw before each document); its activations are never recorded. Tiny models learned from windows that start
anywhere in their text, so theirs start with the text itself. Each window after the first also rereads the last
BEFORE tokens of the one before it without recording them, so every token recorded has its context, and a context
shows what the model read in one window, shaded by the activations of that one reading.
"""
import operator
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.nn as nn
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from .checkpoint import Bundle
from .layers import causal_mask, check_tokens, start_run, stack
from .presets import corpus_texts
from .scope import scope_of
from .tokenizers import START
from .transformer import TransformerLM

BEFORE, AFTER = 12, 3          # a context shows up to 12 tokens before the peak and 3 after (within its window)
SPAN = BEFORE + 1 + AFTER
KEPT = 24                      # top activations kept per neuron (more than a page shows: a repeated text repeats)
WINDOW = 64                    # the most tokens a window holds (the app reads at most 64 of GPT-2's)
MAX_TOKENS = 160_000           # the most tokens of a text read (tiny tales' training text is 151,430 words)
MAX_CHARS = 2_000_000          # the most characters encoded to find them
POSITIONS_PER_BATCH = 512      # windows are read this many positions at a time

TEXTS_DIR = Path(__file__).parent / "texts"
HEADER_END = "-" * 100         # the bundled texts' header (title, source, licence) ends with a line of dashes


@dataclass(frozen=True)
class OwnText:
    """A text a model's neurons are read over: what it is called on a page, where it comes from, the text."""
    name: str
    source: str          # one sentence for the page: where the text comes from (and its licence when bundled)
    text: str


def bundled_text(file: str) -> str:
    """A text bundled in model/texts/, without its header."""
    whole = (TEXTS_DIR / file).read_text(encoding="utf-8")
    return whole.split(HEADER_END, 1)[1].split("\n", 1)[1]


ENGLISH = ("Pride and Prejudice", "pride_and_prejudice.txt",
           "the first twelve chapters of Jane Austen's “Pride and Prejudice” (1813, public domain), from the text of "
           "the Debian package r-cran-janeaustenr (Julia Silge's janeaustenr, MIT licence; the text from Project "
           "Gutenberg): model/texts/pride_and_prejudice.txt")
CORPUS_NAMES = {"tinytales": "tiny tales", "roses": "the roses poem", "digits": "digit sorting",
                "reverse": "digit reversal"}


def own_text(bundle: Bundle, user_text: str | None = None) -> OwnText:
    """The text `bundle`'s neurons are read over. A model that names a corpus of model/corpora.py (the bundled ones,
    and a lab model of a ready task) gets its own training text again, from its seed; a lab model trained on your own
    text needs that text (`user_text`: the lab keeps it in the session); a model trained elsewhere whose tokenizer
    reads any text (GPT-2, SmolLM2) gets the bundled English text. Raises ValueError when there is none."""
    facts = bundle.facts or {}
    corpus = facts.get("corpus")
    if corpus in CORPUS_NAMES:
        seed = int(facts.get("seed") or 0)
        seeded = f"; made by model/corpora.py with seed {seed}" if corpus in ("tinytales", "digits", "reverse") else ""
        return OwnText(CORPUS_NAMES[corpus], f"its own training text: {scope_of(bundle).training_data}{seeded}",
                       corpus_texts(corpus, seed)[0])
    if corpus == "text":
        if not user_text:
            raise ValueError("This model learned from your own text in the training lab; that text is needed to find "
                             "what its neurons respond to, and this session no longer has it.")
        return OwnText("your text", "its own training text: the text you gave the training lab", user_text)
    if bundle.tokenizer.kind != "bpe":
        raise ValueError("This model's file does not say which text it learned from, and its tokenizer knows only "
                         "the words of that text, so there is no text to read its neurons over.")
    name, file, source = ENGLISH
    return OwnText(name, source, bundled_text(file))


def text_ids(bundle: Bundle, text: OwnText) -> list[int]:
    """The text's token ids, at most MAX_TOKENS of them."""
    return bundle.tokenizer.encode(text.text[:MAX_CHARS])[:MAX_TOKENS]


def window_prefix(bundle: Bundle) -> tuple[int, ...]:
    """What each window starts with before its text: the tokenizer's document separator, if it has one."""
    if bundle.tokenizer.kind != "bpe":
        return ()
    vocab = bundle.tokenizer.vocab
    return (vocab.index(START),) if START in vocab else ()


@torch.no_grad()
def mlp_activations(model: TransformerLM, tokens, layers) -> dict[int, torch.Tensor]:
    """mlp.post (B, T, F) of each of `layers` for a batch of windows `tokens` (B, T): the model's own stack, read
    only as far as the last of those layers (no later block, no final norm, no unembedding)."""
    tokens = check_tokens(tokens, model.cfg)                                          # (B, T)
    names = {f"blocks.{i}.mlp.post" for i in layers}
    rec = start_run(model.trace_names[1:], keep=names, inputs={"tokens": tokens})
    blocks = model.blocks[:max(layers) + 1]
    stack(model.embed, blocks, nn.Identity(), tokens, rec, mask=causal_mask(tokens.shape[1], tokens.device))
    return {i: rec.values[f"blocks.{i}.mlp.post"] for i in layers}


@dataclass(frozen=True)
class Context:
    """One of a neuron's top contexts: the tokens around its peak (within the window the model read), the neuron's
    activation at each, and where the peak is."""
    ids: list[int]
    activations: list[float]
    peak: int                 # the peak's index in `ids`
    value: float              # the activation at the peak
    position: int             # the peak's place in the text (an index into the index's ids)
    repeats: int = 1          # how many of the kept top activations have exactly these tokens (a text that repeats)


@dataclass(frozen=True)
class NeuronIndex:
    """Every neuron's top activations over a text, from one pass: L layers, F neurons, the k largest each."""
    ids: torch.Tensor          # (n,) the text's token ids
    width: int                 # tokens per window the model read, its prefix included
    prefix: tuple[int, ...]    # ids read before each window's text, never recorded
    overlap: int               # text tokens each window after the first reads before those it records
    values: torch.Tensor       # (L, F, k) float32, largest first
    positions: torch.Tensor    # (L, F, k) int64, where each was: an index into ids
    spans: torch.Tensor        # (L, F, k, SPAN) float16: the neuron's activations from BEFORE tokens before to AFTER
                               # after each (NaN outside its window)
    seconds: float = 0.0       # how long the pass took

    @property
    def step(self) -> int:
        """Text tokens per window."""
        return self.width - len(self.prefix)

    def window_of(self, position: int) -> tuple[int, int]:
        """The text the model read when it recorded `position`: (start, stop), indices into ids (the window's
        prefix came before it)."""
        fresh = self.step - self.overlap
        i = 0 if position < self.step else (position - self.overlap) // fresh
        return i * fresh, min(i * fresh + self.step, len(self.ids))

    def contexts(self, layer: int, neuron: int, n: int = 10) -> list[Context]:
        """The neuron's `n` strongest contexts, strongest first; an exact repeat of a context shown counts in its
        `repeats` instead of showing twice."""
        L, F, _ = self.values.shape
        _check_place(layer, neuron, L, F)
        found: dict[tuple[int, ...], Context] = {}
        for value, position, span in zip(self.values[layer, neuron].tolist(), self.positions[layer, neuron].tolist(),
                                         self.spans[layer, neuron].float()):
            if value == float("-inf"):                                             # fewer places than k
                break
            start, stop = self.window_of(position)
            first, last = max(position - BEFORE, start), min(position + AFTER, stop - 1)   # within the window
            ids = self.ids[first:last + 1].tolist()
            activations = span[first - position + BEFORE:last - position + BEFORE + 1].tolist()
            activations[position - first] = value                                  # the peak, exactly (not float16)
            key = tuple(ids)
            if key in found:
                found[key] = replace(found[key], repeats=found[key].repeats + 1)
            elif len(found) < n:
                found[key] = Context(ids, activations, position - first, value, position)
        return list(found.values())

    def save(self, path: str | Path) -> None:
        """Keep the index on disk (safetensors: no pickle)."""
        save_file({"ids": self.ids, "values": self.values, "positions": self.positions, "spans": self.spans,
                   "prefix": torch.tensor(self.prefix, dtype=torch.long)}, str(path),
                  metadata={"width": str(self.width), "overlap": str(self.overlap), "seconds": str(self.seconds)})


def load_index(path: str | Path) -> NeuronIndex:
    """An index kept by `NeuronIndex.save`."""
    with safe_open(str(path), "pt") as f:
        meta = f.metadata()
    t = load_file(str(path))
    return NeuronIndex(t["ids"], int(meta["width"]), tuple(t["prefix"].tolist()), int(meta["overlap"]), t["values"],
                       t["positions"], t["spans"], float(meta["seconds"]))


@dataclass(frozen=True)
class Windows:
    """The windows one pass over a text reads (model/dictionary.py's pass reads the same): each is `prefix`, then
    `step` text tokens from a start; each after the first rereads `overlap` tokens of the one before without
    recording them, so every recorded token has that much text before it."""
    width: int                         # tokens per window, the prefix included
    prefix: tuple[int, ...]            # ids read before each window's text, never recorded
    overlap: int
    batches: tuple[tuple[int, ...], ...]   # the windows' starts (text positions), in batches read together

    @property
    def step(self) -> int:
        return self.width - len(self.prefix)

    @property
    def count(self) -> int:
        return sum(map(len, self.batches))

    def read(self, text: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]]:
        """Each batch of `text` (n,): its tokens (B, P + t), the text position each window starts at (B,), which of
        its text tokens are recorded (B, t), and how many windows are read by its end."""
        before, done = torch.tensor(self.prefix, dtype=torch.long), 0
        for batch in self.batches:
            chunk = torch.stack([text[s:s + self.step] for s in batch])                     # (B, t)
            tokens = torch.cat([before.expand(len(batch), -1), chunk], dim=1)                 # (B, P + t)
            first = torch.tensor(batch)                                                       # (B,)
            recorded = torch.arange(chunk.shape[1])[None] >= torch.where(first > 0, self.overlap, 0)[:, None]  # (B, t)
            done += len(batch)
            yield tokens, first, recorded, done


def plan_windows(ids, width: int, prefix: tuple[int, ...], what: str) -> tuple[torch.Tensor, Windows]:
    """The text (n,) and the windows of `width` tokens one pass reads it in, in batches of about
    POSITIONS_PER_BATCH positions, a shorter last window on its own; `what` the pass reads (for the messages)."""
    step = width - len(prefix)                                       # text tokens per window
    if step < 2:
        raise ValueError(f"a window of {width} tokens has too little room for text after its {len(prefix)} prefix "
                         "tokens")
    text = torch.as_tensor(ids, dtype=torch.long)                    # (n,)
    if text.numel() == 0:
        raise ValueError(f"the text is empty: there is nothing to read the {what} over")
    overlap = min(BEFORE, step // 2)
    starts = list(range(0, max(text.numel() - overlap, 1), step - overlap))
    full = [s for s in starts if s + step <= text.numel()]
    per_batch = max(1, POSITIONS_PER_BATCH // width)
    batches = [tuple(full[i:i + per_batch]) for i in range(0, len(full), per_batch)] + \
        [(s,) for s in starts[len(full):]]
    return text, Windows(width, tuple(prefix), overlap, tuple(batches))



@torch.no_grad()
def index_neurons(model: TransformerLM, ids: list[int], prefix: tuple[int, ...] = (), width: int | None = None,
                  k: int = KEPT, progress: Callable[[int, int], None] | None = None) -> NeuronIndex:
    """One pass over the text `ids` in windows of `width` tokens (by default the model's context, at most WINDOW),
    each starting with `prefix`: every neuron of every layer keeps its k largest activations, where they were and the
    activations around them. Each window after the first starts `overlap` tokens (up to BEFORE) before the tokens it
    records, so every token is recorded with that much text before it. `progress(windows done, windows)` is called
    after each batch of windows."""
    began = time.perf_counter()
    cfg = model.cfg
    text, windows = plan_windows(ids, min(cfg.max_len, WINDOW) if width is None else width, prefix, "neurons")
    L, F = cfg.n_layers, cfg.d_ff
    # 2) read each batch, and merge its top activations into every neuron's running top k
    tops = [(torch.zeros(F, 0), torch.zeros(F, 0, dtype=torch.long), torch.zeros(F, 0, SPAN)) for _ in range(L)]
    for tokens, first, recorded, done in windows.read(text):                 # (B, P + t), (B,), (B, t), windows read
        acts = mlp_activations(model, tokens, range(L))                                      # layer -> (B, P + t, F)
        tops = [merge_top(*tops[i], acts[i][:, len(prefix):].float(), recorded, first, k) for i in range(L)]
        if progress is not None:
            progress(done, windows.count)
    values, positions, spans = (torch.stack(part) for part in zip(*tops))                   # (L, F, k), ...
    return NeuronIndex(text, windows.width, tuple(prefix), windows.overlap, values, positions,
                       spans.clamp(-6e4, 6e4).half(), time.perf_counter() - began)


def merge_top(values: torch.Tensor, positions: torch.Tensor, spans: torch.Tensor, post: torch.Tensor,
           recorded: torch.Tensor, first: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One layer's running top k of every neuron, (F, k') values, positions and (F, k', SPAN) spans, merged with a
    batch's activations `post` (B, t, F) of windows starting at text positions `first` (B,), at the places
    `recorded` (B, t) marks."""
    B, t, F = post.shape
    candidates = post.masked_fill(~recorded[..., None], float("-inf"))      # (B, t, F)
    top = candidates.reshape(B * t, F).topk(min(k, B * t), dim=0)            # (kb, F) each
    b, p = top.indices // t, top.indices % t                                 # (kb, F): the window, the place in it
    padded = nn.functional.pad(post, (0, 0, BEFORE, AFTER), value=float("nan"))   # (B, BEFORE + t + AFTER, F)
    neuron = torch.arange(F)
    around = padded[b[..., None], p[..., None] + torch.arange(SPAN), neuron[None, :, None]]   # (kb, F, SPAN)
    values = torch.cat([values, top.values.T], dim=1)                        # (F, k' + kb)
    positions = torch.cat([positions, (first[b] + p).T], dim=1)              # (F, k' + kb)
    spans = torch.cat([spans, around.transpose(0, 1)], dim=1)                # (F, k' + kb, SPAN)
    keep = values.topk(min(k, values.shape[1]), dim=1).indices               # (F, k)
    return values.gather(1, keep), positions.gather(1, keep), spans[neuron[:, None], keep]


def direction_logits(model: TransformerLM, direction: torch.Tensor) -> torch.Tensor:
    """What one unit along `direction` (D,), added to the final residual stream, adds to each vocabulary token's
    logit (V,): through the final norm where that is simple (a LayerNorm centres it and multiplies by its scale, an
    RMSNorm multiplies; both then divide by the stream's size, one positive number for every token, which keeps the
    order), then the unembedding."""
    w = direction.detach().float()                                           # (D,)
    norm = model.final_norm
    if isinstance(norm, nn.LayerNorm):
        w = w - w.mean()
    if isinstance(norm, (nn.LayerNorm, nn.RMSNorm)) and norm.weight is not None:
        w = w * norm.weight.detach()
    return model.unembed.weight.detach() @ w                                 # (V,)


def neuron_logits(model: TransformerLM, layer: int, neuron: int) -> torch.Tensor:
    """What one unit of the neuron's activation adds to each vocabulary token's logit (V,), read straight through:
    its column of W_out (what it adds to the residual stream) through `direction_logits`. Later blocks can change
    what it does; this is its direct path only."""
    check_neuron(model, layer, neuron)
    return direction_logits(model, model.blocks[layer].mlp.W_out.weight[:, neuron])


def check_neuron(model: TransformerLM, layer: int, neuron: int) -> None:
    """Raise ValueError unless the model has that layer and that neuron in it."""
    _check_place(layer, neuron, model.cfg.n_layers, model.cfg.d_ff)


def _check_place(layer, neuron, L: int, F: int) -> None:
    for what, value, size in (("layer", layer, L), ("neuron", neuron, F)):
        try:
            whole = operator.index(value)
        except TypeError:
            raise ValueError(f"a {what} is a whole number, got {value!r}") from None
        if not 0 <= whole < size:
            raise ValueError(f"there is no {what} {value}: this model's {what}s are 0 to {size - 1}"
                             + (" in each layer" if what == "neuron" else ""))
