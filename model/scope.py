"""What a model knows, in one place: what it was trained on, the tokens a student can type, and the input
lengths it learned. Every page reads a model's scope from here (`scope_of`), whatever the model: bundled,
trained in the lab, uploaded, GPT-2 or an encoder-decoder.

The scope comes from the model's facts (its checkpoint's JSON), with these keys, all optional:

    training_data   one sentence a student reads: "20,000 sentences of a small English grammar ..."
    task            an encoder-decoder's task as model.tasks names it: "sort", "reverse", "translate"
    lengths         [lo, hi]: the digit-list lengths a digit task was trained on

A model that says nothing of its training (an old upload) gets "not recorded": we never guess.
"""
from dataclasses import dataclass

from . import tasks
from .tasks import strip_final_punctuation  # noqa: F401  (the app reads it from here)
from .tokenizers import BOS, EOS, PAD, UNK, Tokenizer

SPECIAL_TOKENS = (UNK, PAD, BOS, EOS)

NOT_RECORDED = "not recorded in this model's file"
# The training data of models whose checkpoints were written before `training_data` was a fact.
KNOWN_DATA = {
    "roses": "one short poem (“roses are red, violets are blue, sugar is sweet and so are you”), 200 times over",
    "tinytales": "20,000 sentences of simple English stories made from a small grammar (animals, places, "
                 "names and a few verbs)",
}
OUTSIDE = ("Outside what it learned a model still answers: it has no way to say “I don't know”, so it does what "
           "its weights make of the input. That answer is a guess, not a translation or a rule; seeing where it "
           "breaks is part of understanding what the model learned.")


@dataclass(frozen=True)
class Scope:
    """What one model knows."""
    training_data: str                   # what it learned from, in a sentence
    words: tuple[str, ...]               # what a student can type (empty: any text, as with GPT-2's bytes)
    unit: str                            # what one token is: "word", "character" or "token"
    context: int                         # the most positions it reads
    task: str | None = None              # an encoder-decoder's task (model.tasks), None for a language model
    lengths: tuple[int, int] | None = None   # the digit-list lengths a digit task was trained on


def typeable(tokenizer: Tokenizer) -> tuple[str, ...]:
    """The vocabulary a student can type: every token but the special ones (<unk>, <pad>, <bos>, <eos>).
    Empty for a byte-level tokenizer, which reads any text."""
    if tokenizer.unk_id is None:
        return ()
    return tuple(t for t in tokenizer.vocab if t not in SPECIAL_TOKENS)


def scope_of(bundle) -> Scope:
    """The scope of a model (a model.checkpoint.Bundle), read from its facts and its tokenizer."""
    facts = bundle.facts or {}
    task = facts.get("task") if facts.get("task") in tasks.TASKS else None
    lengths = facts.get("lengths")
    if task in ("sort", "reverse") and not (isinstance(lengths, (list, tuple)) and len(lengths) == 2):
        lengths = None
    data = facts.get("training_data") or KNOWN_DATA.get(facts.get("preset") or facts.get("corpus")) \
        or facts.get("about") or NOT_RECORDED
    unit = {"word": "word", "char": "character"}.get(bundle.tokenizer.kind, "token")
    return Scope(training_data=str(data), words=typeable(bundle.tokenizer), unit=unit,
                 context=bundle.model.cfg.max_len, task=task,
                 lengths=tuple(int(n) for n in lengths) if lengths else None)


