"""Questions for a class, each answered from the model and the view it is asked on (no Streamlit).

A lesson step may carry a question (explorer/lessons.py reads it from the file). Its answer is never written in
the file, except for the teacher's own multiple choice: when the step is shown, `ask` reads the step's model and
sentence and answers it, with the model's numbers for the reveal and one computed sentence saying what the model
did. The options come from the model too, the right one among plausible others (other earlier words, other heads,
other layers), in an order every screen shares and that gives nothing away (the sentence's order, the model's
order, the alphabet, counting up): never the order of the model's own ranking.

    kind           fits the pages                 the model answers
    next-word      home, positions, attention,    which word it writes next (its four likeliest are the options)
                   feedforward, residual,
                   prediction, why
    token-count    home, tokenization             how many tokens a text becomes
    nearest-word   embedding                      which word's embedding is closest to a given word's (cosine)
    looks-at       attention                      which earlier word a head, from the selected token, looks at most
    lens-layer     residual                       at which stage the logit lens first puts the final guess on top
    knockout       attention                      which head, knocked out, changes the forecast most
    biggest-push   why                            which part (a head or an MLP) pushes the top guess's logit most
    reads-source   encoder-decoder                which source word a written word's cross-attention reads most
    steered-word   features                       which word it writes next, steered as the page's fields say (a
                                                  neuron's direction or two sentences' difference, at a strength)
    choice         every page                     (the teacher: options and the right one in the file)
    poll           every page                     (nobody: options without a right answer, a 1-5 scale by default)

`KINDS` is that table as code; a kind names the pages it fits, and the lesson parser refuses a question on any
other page. Each answer reuses the step builders the pages draw from (explorer/steps/), so what the class is
asked is what the page shows; and it says where it stands on the page's chart (`Asked.target`: the bar or the
cell, in the chart's own labels), for the reveal to point at it (explorer/pointer.py).
"""
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from model import attribution as model_attribution
from model import patching as model_patching
from model.checkpoint import Bundle
from model.inputs import prepare_text
from model.scope import strip_final_punctuation
from model.seq2seq import EncoderDecoder

from explorer import memo

from explorer.classroom.store import ANSWER_CHARS, clean_text
from explorer.numbers import percent
from explorer.plot import labels as axis_labels, safe, token_label, visible
from explorer.pointer import Target
from explorer.registry import BY_SLUG
from explorer.steps import attention, embedding, encoder_decoder, features, learning, residual, whatif, why
from explorer.view import View, escape, quote

OPTIONS = 4                        # the options the model offers (a phone shows four in a row or two)
MAX_OPTIONS = 6                    # a teacher's own choice or poll offers at most this many
POLL_SCALE = ("1", "2", "3", "4", "5")
PROMPT_CHARS, WORD_CHARS, TEXT_CHARS = 300, 40, 300


class Unanswerable(ValueError):
    """This question cannot be asked on this model or view (the message says why, for the teacher)."""


@dataclass(frozen=True)
class Question:
    """A question as a lesson file holds it: its kind and, depending on the kind, its own fields."""
    kind: str
    prompt: str = ""                      # empty: the kind's own words, said about the view
    options: tuple[str, ...] = ()         # choice and poll
    answer: str | None = None             # choice only: the teacher's right answer, one of options
    word: str | None = None               # nearest-word: the given word; reads-source: the written word
    text: str | None = None               # token-count: the text to cut (else the step's sentence)


@dataclass(frozen=True)
class Asked:
    """A question as the class sees it, and the model's answer with its numbers (for the reveal)."""
    kind: str
    prompt: str                           # plain text (escape it for Markdown)
    options: tuple[str, ...]              # in the order every screen shows them
    answer: str | None                    # one of options; None for a poll
    values: dict[str, float] = field(default_factory=dict)   # each option's number from the model
    shown: dict[str, str] = field(default_factory=dict)      # the same, as the reveal writes it (plain text)
    measure: str = ""                     # what the numbers are, a column's title
    said: str = ""                        # what the model did, one computed sentence (Markdown, text escaped)
    target: Target | None = None          # where the answer stands on the page's chart (explorer/pointer.py)

    def right(self, choice: str) -> bool | None:
        """Whether `choice` is the answer (None: a poll has no right answer)."""
        return None if self.answer is None else choice == self.answer


@dataclass(frozen=True)
class Place:
    """Where on the view a question looks: the step's layer, head and selected token, fitted to the model, and the
    page's own fields the step sets (by name: the features page's steering), and the dictionary feature they name
    when it steers by one (the app finds it: explorer/app/pinned.py `pinned_feature`), and the model at its training
    steps for a first-right question."""
    layer: int
    head: int
    token: int
    fields: tuple[tuple[str, object], ...] = ()
    feature: features.FeatureDirection | None = None
    learned: learning.Learning | None = None    # the model read at each training step this server has (the app
                                                # reads them: explorer/app/learning.py)


def reading(name: str, bundle: Bundle, text: str, limit: int) -> View:
    """The view a step's page builds: `text` read by model `name` as the page reads it (at most `limit` tokens; an
    encoder-decoder's source without its final full stop), and its trace (computed once, in the app)."""
    cfg = bundle.model.cfg
    if isinstance(bundle.model, EncoderDecoder):
        text = strip_final_punctuation(text)[0]
    view = View(name, bundle, text, presenter=False,
                prepared=prepare_text(bundle.tokenizer, text, min(cfg.max_len, limit), context=cfg.max_len))
    view.trace = memo.trace(view)
    return view


def place(view_fields: dict, n_layers: int, n_heads: int, n_tokens: int, page_fields: dict | None = None) -> Place:
    """A step's layer, head and token as its page shows them: a value the model does not have falls back to the
    first (the last token, for `token`), as a link's does; `page_fields`: the step's own page fields."""
    def fit(key: str, upper: int, default: int) -> int:
        value = view_fields.get(key, default)
        return value if isinstance(value, int) and 0 <= value < upper else default
    return Place(fit("layer", n_layers, 0), fit("head", n_heads, 0), fit("token", n_tokens, n_tokens - 1),
                 tuple(sorted((page_fields or {}).items())))


# --- labels every screen shows the same way ------------------------------------------------------------------


def label(token: str) -> str:
    """A token as an option: its visible text on one line ("␣cat", "⟨.⟩"), as the store keeps an answer."""
    return clean_text(visible(token), WORD_CHARS) or "⟨⟩"


def word_labels(tokens: list[str], positions: list[int]) -> dict[int, str]:
    """{position: label} for tokens of one sentence; a word that occurs more than once names its position."""
    labels = [label(t) for t in tokens]
    return {p: labels[p] + (f" (position {p})" if labels.count(labels[p]) > 1 else "") for p in positions}


def head_label(layer: int, head: int) -> str:
    return f"layer {layer}, head {head}"


def _stable_offset(text: str, n: int) -> int:
    """A number from 0 to n - 1 fixed by `text` (the same on every screen and server, unlike hash())."""
    return zlib.crc32(text.encode()) % n


def _in_order(ranked: list, order: Callable, keep: int = OPTIONS) -> list:
    """The first `keep` of `ranked` (the answer first), put in the order every screen shows (`order`'s key)."""
    return sorted(ranked[:keep], key=order)


def _decoder_only(view: View, kind: str) -> None:
    if isinstance(view.bundle.model, EncoderDecoder):
        raise Unanswerable(f"A {kind} question needs a decoder-only model; {view.name} is an encoder-decoder.")


# --- the kinds the model answers ------------------------------------------------------------------------------


def next_word(question: Question, view: View, where: Place) -> Asked:
    """The model's OPTIONS likeliest next tokens after the selected token, in alphabetical order; its top guess is
    the answer, with each option's probability."""
    _decoder_only(view, "next-word")
    probs = torch.softmax(view.trace["logits"][0, where.token].double(), -1)            # (V,)
    top = probs.topk(min(OPTIONS, probs.numel()))
    vocab = view.bundle.tokenizer.vocab
    words = [label(vocab[int(i)]) for i in top.indices]
    values = {w: float(p) for w, p in zip(words, top.values)}
    after = quote(label(view.tokens[where.token]))
    said = (f"After {after}, the model's top guess is {quote(words[0])} at {percent(values[words[0]])}"
            + (f"; then {quote(words[1])} at {percent(values[words[1]])}." if len(words) > 1 else "."))
    prompt = f"Which word will the model write after “{label(view.tokens[where.token])}”?"
    bar = Target(f"after “{safe(view.tokens[where.token])}” (position {where.token})",      # the prediction page's
                 col=token_label(vocab[int(top.indices[0])]))                             # probability bars
    return Asked("next-word", question.prompt or prompt, tuple(sorted(words)), words[0], values,
                 {w: percent(p) for w, p in values.items()}, "the model's probability", said, bar)


def token_count(question: Question, view: View, where: Place) -> Asked:
    """How many tokens the model's tokenizer cuts the text into (the question's, else the step's sentence). The
    options are four counts in a row around it, where it sits fixed by the text (so never always second)."""
    text = question.text or view.text
    pieces = view.bundle.tokenizer.pieces(text)
    n = len(pieces)
    start = max(1, n - _stable_offset(text, OPTIONS))
    options = tuple(str(k) for k in range(start, start + OPTIONS))
    shown = ", ".join(quote(label(p.text)) for p in pieces[:12]) + (", …" if n > 12 else "")
    unknown = sum(p.id == view.bundle.tokenizer.unk_id for p in pieces)
    short = text if len(text) <= 60 else text[:59] + "…"
    said = (f"{view.name} cuts {quote(short)} into **{n}** "
            f"token{'s' * (n != 1)}: {shown}"
            + (f" ({unknown} of them unknown to it, read as {escape('<unk>')})." if unknown else "."))
    return Asked("token-count", question.prompt or f"How many tokens does “{short}” become for this model?",
                 options, str(n), said=said)


def _special(token: str) -> bool:
    return token.startswith("<") and token.endswith(">")


def nearest_word(question: Question, view: View, where: Place) -> Asked:
    """Which word's embedding row is closest (cosine) to the given word's (the question's word, else the selected
    token): the nearest of the whole vocabulary, among other words of the sentence, alphabetically."""
    _decoder_only(view, "nearest-word")
    tok, vocab = view.bundle.tokenizer, view.bundle.tokenizer.vocab
    if question.word:
        try:
            word_id = why.target_token(tok, question.word)
        except ValueError as problem:
            raise Unanswerable(str(problem)) from None
    else:
        word_id = view.ids[where.token]
    if word_id == tok.unk_id or _special(vocab[word_id]):
        raise Unanswerable(f"{vocab[word_id]} has no meaning of its own to compare: pick a word the model knows.")
    weight = embedding.embedding_matrix(view)                                                 # (V, D)
    near = embedding.neighbours(weight, word_id, k=min(len(vocab) - 1, 16))
    ranked = [i for i in near["id"] if i != tok.unk_id and not _special(vocab[i])]
    if not ranked:
        raise Unanswerable(f"{view.name}'s vocabulary has no other word to compare with.")
    others = [i for i in dict.fromkeys(view.ids) if i not in (word_id, ranked[0], tok.unk_id)
              and not _special(vocab[i])]
    candidates = list(dict.fromkeys([ranked[0], *others[:OPTIONS - 1], *ranked[-(OPTIONS - 1):]]))[:OPTIONS]
    cosine = embedding.cosine_matrix(weight[[word_id, *candidates]])[0, 1:]                 # (n,)
    values = {label(vocab[i]): float(c) for i, c in zip(candidates, cosine)}
    answer, given = label(vocab[ranked[0]]), label(vocab[word_id])
    said = (f"Of every word {view.name} knows, the row nearest to {quote(given)}'s is {quote(answer)}'s: cosine "
            f"similarity **{values[answer]:.3f}**.")
    bar = Target(f"Nearest neighbours of “{token_label(vocab[word_id])}”",           # the embedding page's
                 row=f"{token_label(vocab[ranked[0]])} (id {ranked[0]})")            # neighbours tab
    return Asked("nearest-word", question.prompt or f"Which of these words is closest to “{given}” in the model's "
                 "embedding?", tuple(sorted(values)), answer, values, {w: f"{c:.3f}" for w, c in values.items()},
                 "cosine similarity", said, bar)


def looks_at(question: Question, view: View, where: Place) -> Asked:
    """Which earlier word (itself included) the step's head, from the selected token, gives the largest attention
    weight; the options are its OPTIONS largest, in the sentence's order."""
    _decoder_only(view, "looks-at")
    if where.token == 0:
        raise Unanswerable("The first token can only look at itself: pick a later token for this question.")
    top = attention.top_keys(view.trace, where.layer, where.head, where.token, k=OPTIONS)    # [(position, weight)]
    names = word_labels(view.tokens, [p for p, _ in top])
    chosen = _in_order([p for p, _ in top], order=lambda p: p)
    values = {names[p]: w for p, w in top}
    query = word_labels(view.tokens, [where.token])[where.token]
    axes = [safe(name) for name in axis_labels(view.tokens)]                # the pattern heatmap's rows and columns
    cell = Target(f"layer {where.layer} head {where.head}", row=axes[where.token], col=axes[top[0][0]])
    return Asked("looks-at", question.prompt or f"Layer {where.layer}, head {where.head}: which earlier word does "
                 f"“{query}” look at most?", tuple(names[p] for p in chosen), names[top[0][0]], values,
                 {n: f"{w:.2f}" for n, w in values.items()}, "attention weight",
                 escape(attention.head_sentence(view, view.trace, where.layer, where.head, where.token)) + ".", cell)


LENS_OPTIONS = 5                   # a deep model's stages (GPT-2: 13) are offered five in a row


def lens_layer(question: Question, view: View, where: Place) -> Asked:
    """At which stage of the stream the logit lens first reads the final guess on top, and keeps it there to the
    end (as the residual page's lens says it), among exactly the stages its chart draws by default (a tiny model's
    after attention too: residual.lens_reads_mid); every stage is an option, or five in a row around the answer."""
    _decoder_only(view, "lens-layer")
    with_mid = residual.lens_reads_mid(view)
    lens = residual.logit_lens(view, with_mid, where.token)       # one position: GPT-2 reads 13 vectors, not 832
    column, probs = lens.at(where.token)                                                      # (S,), (S,)
    first = residual.settled(column)
    stages = [name for _, name in lens.stages]
    offered = range(len(stages))
    if len(stages) > LENS_OPTIONS + 1:
        start = min(max(0, first - _stable_offset(view.text, LENS_OPTIONS)), len(stages) - LENS_OPTIONS)
        offered = range(start, start + LENS_OPTIONS)
    vocab = view.bundle.tokenizer.vocab
    values = {stages[s]: float(probs[s]) for s in offered}
    shown = {stages[s]: f"“{label(vocab[int(column[s])])}” {percent(probs[s])}" for s in offered}
    after = label(view.tokens[where.token])
    position, stage = safe(axis_labels(view.tokens)[where.token]), safe(stages[first])
    cell = (Target("Logit lens", row=stage, col=position) if len(stages) > residual.LENS_COLUMNS   # stages down
            else Target("Logit lens", row=position, col=stage))
    return Asked("lens-layer", question.prompt or "Reading the stream early (the logit lens): at which stage does "
                 f"the final guess after “{after}” first come out on top?", tuple(stages[s] for s in offered),
                 stages[first], values, shown, "top guess read there", residual.lens_in_words(view, lens, where.token),
                 cell)


def knockout(question: Question, view: View, where: Place) -> Asked:
    """Which head of the step's layer, knocked out, changes the forecast after the selected token most (the
    largest change of any word's probability, as the attention page's what-if measures it). A layer of more than
    OPTIONS heads (GPT-2: 12) offers the OPTIONS that write most into the stream there: each is run knocked out
    (one batch, from the layer on), within GPT-2's second."""
    _decoder_only(view, "knockout")
    model, layer = view.bundle.model, where.layer
    z = view.trace[f"blocks.{layer}.attn.z"][0, :, where.token]                                # (H, K)
    writes = model_attribution.head_writes(model.blocks[layer].attn, z).norm(dim=-1)           # (H,)
    heads = sorted(writes.topk(min(OPTIONS, len(writes))).indices.tolist())
    before = torch.softmax(view.trace["logits"][0, where.token].double(), -1)                  # (V,)
    after = torch.softmax(model_patching.knockout_logits(model, view.trace, layer, heads, where.token).double(), -1)
    changes = (after - before).abs().amax(-1)                                                  # (N,)
    best = int(changes.argmax())
    values = {head_label(layer, h): float(c) for h, c in zip(heads, changes)}
    vocab, answer = view.bundle.tokenizer.vocab, head_label(layer, heads[best])
    b, a = int(before.argmax()), int(after[best].argmax())
    token = quote(label(view.tokens[where.token]))
    said = (f"As it is, the model's top guess after {token} is {quote(label(vocab[b]))} at **{float(before[b]):.2f}**. "
            f"With head {heads[best]} of layer {layer} knocked out, "
            + (f"it is still {quote(label(vocab[a]))}, now at **{float(after[best, a]):.2f}**. " if a == b else
               f"it becomes {quote(label(vocab[a]))} at **{float(after[best, a]):.2f}**. ")
            + whatif.size_words(float(changes[best])))
    return Asked("knockout", question.prompt or f"Layer {layer}: which head, knocked out, changes the forecast after "
                 f"“{label(view.tokens[where.token])}” most?", tuple(values), answer, values,
                 {h: f"{c:.2f}" for h, c in values.items()}, "largest change of a word's probability", said)


def biggest_push(question: Question, view: View, where: Place) -> Asked:
    """Which part, a head or an MLP, adds most to the logit of the model's top guess after the selected token
    (direct logit attribution, as the why page splits it); the options are the OPTIONS largest, in the model's order."""
    _decoder_only(view, "biggest-push")
    target = int(view.trace["logits"][0, where.token].argmax())
    try:
        result = why.attribution(view, view.trace, where.token, target)
    except ValueError as problem:                                 # a post-norm model: the parts do not add up
        raise Unanswerable(str(problem)) from None
    column = result.column(target)
    parts = [i for i, p in enumerate(result.parts) if p.kind in ("head", "mlp")]
    ranked = sorted(parts, key=lambda i: -float(column[i]))
    names = {i: why.part_words(result.parts[i]).removeprefix("the ") for i in ranked[:OPTIONS]}
    values = {names[i]: float(column[i]) for i in ranked[:OPTIONS]}
    word, after = view.bundle.tokenizer.vocab[target], label(view.tokens[where.token])
    logit = float(result.logits[0])
    said = (f"The model's top guess after {quote(after)} is {quote(label(word))}, with a logit of **{logit:.2f}**; "
            f"the part that adds most to it is **{names[ranked[0]]}** ({why.signed(values[names[ranked[0]]])}).")
    reading = why.stream_tokens(view, view.trace)[where.token]
    bar = Target(f"Why “{token_label(word)}” after “{token_label(reading)}”",       # the why page's attribution
                 row=safe(result.parts[ranked[0]].label))
    return Asked("biggest-push", question.prompt or f"Which part pushes the model's top guess after “{after}”, "
                 f"“{label(word)}”, up the most?", tuple(names[i] for i in _in_order(ranked, order=lambda i: i)),
                 names[ranked[0]], values, {n: why.signed(v) for n, v in values.items()},
                 "added to the logit", said, bar)


def reads_source(question: Question, view: View, where: Place) -> Asked:
    """Which source word the step's cross-attention head reads most while the decoder writes a word (the
    question's word, else the first written word that translates or copies a source word); the options are the
    OPTIONS source words it reads most, in the source's order."""
    if not isinstance(view.bundle.model, EncoderDecoder):
        raise Unanswerable(f"A reads-source question needs an encoder-decoder; {view.name} has no source to read.")
    written = encoder_decoder.written(view, view.trace)
    needed = encoder_decoder.needed(view, view.trace)
    if question.word:
        if question.word not in written:
            raise Unanswerable(f"The model did not write {quote(question.word)} for this source; it wrote "
                               f"{quote(encoder_decoder.decoded_text(view, view.trace))}.")
        row = written.index(question.word)
    else:
        row = next((t for t, want in enumerate(needed) if want), 0)
    pattern = view.trace[f"decoder.blocks.{where.layer}.cross_attn.pattern"][0, where.head, row].double()  # (S,)
    top = pattern.topk(min(OPTIONS, pattern.numel()))
    ranked = [int(i) for i in top.indices]
    names = word_labels(view.tokens, ranked)
    values = {names[p]: float(pattern[p]) for p in ranked}
    out = label(written[row])
    said = (f"Layer {where.layer}, head {where.head}: while writing {quote(out)}, the decoder reads "
            f"{quote(names[ranked[0]])} most, with **{values[names[ranked[0]]]:.2f}** of its attention.")
    cell = Target(f"Cross-attention, layer {where.layer}:", row=safe(encoder_decoder.row_labels(view, view.trace)[row]),
                  col=safe(axis_labels(view.tokens)[ranked[0]]), panel=f"head {where.head}")   # the cross tab's panel
    return Asked("reads-source", question.prompt or f"Layer {where.layer}, head {where.head}: writing “{out}”, "
                 "which source word does the decoder read most?",
                 tuple(names[p] for p in _in_order(ranked, order=lambda p: p)), names[ranked[0]], values,
                 {n: f"{w:.2f}" for n, w in values.items()}, "attention weight", said, cell)


def steered_word(question: Question, view: View, where: Place) -> Asked:
    """Which token the model writes after the sentence when the features page's steering (its fields at the step:
    a neuron's direction, two sentences' difference or a pinned dictionary's feature, at a strength, after the
    step's layer) is added to the
    stream: the steered model's OPTIONS likeliest, alphabetically, its top one the answer."""
    _decoder_only(view, "steered-word")
    result = features.steered(view, view.trace, where.layer, where.fields, where.feature)
    if result.problem:
        raise Unanswerable(result.problem)
    after, before = result.shift.after.double(), result.shift.before.double()                 # (V,) each
    top = after.topk(min(OPTIONS, after.numel()))
    vocab = view.bundle.tokenizer.vocab
    words = [label(vocab[int(i)]) for i in top.indices]
    values = {w: float(p) for w, p in zip(words, top.values)}
    plain = label(vocab[int(before.argmax())])
    last = label(view.tokens[-1])
    by = re.sub(r"\\(.)", r"\1", result.label)                  # the label is Markdown: the prompt is plain text
    said = (f"Steered with {result.label} at strength {result.strength:g} after layer {result.layer}, the model's top "
            f"guess after {quote(last)} is {quote(words[0])} at {percent(values[words[0]])}"
            + (f"; without steering it is {quote(plain)} at {percent(float(before.max()))}." if plain != words[0]
               else ", as without steering."))
    return Asked("steered-word", question.prompt or f"Steered with {by} at strength {result.strength:g} after layer "
                 f"{result.layer}: which word does the model write after “{last}”?", tuple(sorted(words)), words[0],
                 values, {w: percent(p) for w, p in values.items()}, "the steered model's probability", said)


def first_right(question: Question, view: View, where: Place) -> Asked:
    """At which of the training steps this server has does the model first write, after the sentence, the word it
    writes at the last of them? The options are the steps, in order."""
    learned = where.learned
    if learned is None or len(learned.steps) < 2:
        raise Unanswerable("This question needs the model at two or more of its training steps on this server: pick "
                           "Pythia and download its steps on the Watch it learn page.")
    target, steps = learned.guesses[-1], learned.steps
    first = learning.first_step_right(learned, target)
    word, last = label(learned.guess_texts[-1]), label(view.tokens[-1])
    options = tuple(learning.step_label(s) for s in steps)
    at = steps.index(first)
    said = (f"At step {steps[-1]:,} the model writes {quote(word)} after {quote(last)}, at "
            f"{percent(learned.probabilities[-1])}; it first does at **step {first:,}**"
            + (f" (at step {steps[at - 1]:,} it wrote {quote(label(learned.guess_texts[at - 1]))})." if at else
               ", the first step at hand."))
    bar = Target("next word", row=learning.step_label(first), col=learning.step_label(first))   # a phone's bars
                                                          # lie down (row); both the desktop's and a phone's title
    return Asked("first-right", question.prompt or f"At which training step does the model first write “{word}” "
                 f"after “{last}”?", options, learning.step_label(first),
                 {o: float(g == target) for o, g in zip(options, learned.guesses)},
                 {o: f"writes {label(t)} ({percent(p)})" for o, t, p in zip(options, learned.guess_texts,
                                                                             learned.probabilities)},
                 "the model's next word at that step", said, bar)


def choice(question: Question, view: View | None, where: Place | None) -> Asked:
    """The teacher's own multiple choice: the options and the right one as the lesson writes them."""
    return Asked("choice", question.prompt, question.options, question.answer)


def poll(question: Question, view: View | None, where: Place | None) -> Asked:
    """A poll: the options as written (a 1-5 scale by default) and no right answer."""
    return Asked("poll", question.prompt or "How sure are you? (1: not at all, 5: very sure)",
                 question.options or POLL_SCALE, None)


# --- the table: each kind, the pages it fits, what it reads ----------------------------------------------------

EVERY_PAGE = tuple(BY_SLUG)


@dataclass(frozen=True)
class Kind:
    name: str
    pages: tuple[str, ...]                      # the pages (registry slugs) it fits
    answer: Callable[[Question, View, Place], Asked]
    fields: tuple[str, ...] = ()                # its own fields in a lesson file, beside kind and prompt
    about: str = ""                             # what the class is asked, in a few words

    @property
    def needs_model(self) -> bool:
        return self.name not in ("choice", "poll")


KINDS = {kind.name: kind for kind in [
    Kind("next-word", ("home", "positions", "attention", "feedforward", "residual", "prediction", "why"), next_word,
         about="which word the model writes next"),
    Kind("token-count", ("home", "tokenization"), token_count, ("text",), "how many tokens a text becomes"),
    Kind("nearest-word", ("embedding",), nearest_word, ("word",), "which word's embedding is closest to a word's"),
    Kind("looks-at", ("attention",), looks_at, about="which earlier word a head looks at most"),
    Kind("lens-layer", ("residual",), lens_layer, about="at which stage the logit lens first has the final guess"),
    Kind("knockout", ("attention",), knockout, about="which head, knocked out, changes the forecast most"),
    Kind("biggest-push", ("why",), biggest_push, about="which head or MLP pushes the top guess most"),
    Kind("reads-source", ("encoder-decoder",), reads_source, ("word",), "which source word a written word reads"),
    Kind("steered-word", ("features",), steered_word, about="which word the model writes next, steered"),
    Kind("first-right", ("learning",), first_right,
         about="at which training step the model first writes the word it ends up writing"),
    Kind("choice", EVERY_PAGE, choice, ("options", "answer"), "the teacher's own multiple choice"),
    Kind("poll", EVERY_PAGE, poll, ("options",), "a poll without a right answer"),
]}


# The question "Ask the class" puts on a view of each page (a teacher changes it in the lesson's table): the kind
# the page shows best; a page the model answers nothing about gets a poll.
SUGGESTED = {"home": "next-word", "tokenization": "token-count", "embedding": "nearest-word", "positions": "next-word",
             "attention": "looks-at", "feedforward": "next-word", "residual": "lens-layer", "prediction": "next-word",
             "why": "biggest-push", "encoder-decoder": "reads-source", "features": "steered-word",
             "learning": "first-right"}


def suggested(page: str, tab: str | None = None) -> Question:
    """The question "Ask the class" asks about a view of `page` (on the attention page's what-if tab: a knockout)."""
    if page == "attention" and tab == "what-if":
        return Question("knockout")
    return Question(SUGGESTED.get(page, "poll"))


def fitting(page: str) -> list[str]:
    """The kinds of question that fit page `page`, in the table's order."""
    return [name for name, kind in KINDS.items() if page in kind.pages]


def ask(question: Question, view: View | None, where: Place | None) -> Asked:
    """The question as the class sees it, answered from the view's model and trace at `where` (a choice or a poll
    needs neither); Unanswerable says why a model or view cannot answer it."""
    kind = KINDS[question.kind]
    if kind.needs_model and (view is None or view.trace is None):
        raise Unanswerable("This step's sentence cannot be read by its model, so its question cannot be asked.")
    return kind.answer(question, view, where)
