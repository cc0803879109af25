"""What the current model knows, said where the student looks: the unknown words named, the word list, and for
an encoder-decoder whether the source is one it learned to answer (no Streamlit: pages draw these texts).

Everything here reads the model's scope (model/scope.py) and the view's input; nothing is written by hand for
one model.
"""
from __future__ import annotations

import pandas as pd

from model import tasks
from model.scope import NOT_RECORDED, OUTSIDE, Scope, scope_of

from explorer.plot import visible
from explorer.view import View, escape, quote

NAMED_AT_MOST = 8          # unknown words named in a notice; the rest are counted


def named(words: list[str], at_most: int = NAMED_AT_MOST) -> str:
    """“a”, “b” and “c” (each quoted, safe for Markdown); more than `at_most`: “a”, …, and 4 more."""
    shown = [quote(w) for w in words[:at_most]]
    if len(words) > at_most:
        return ", ".join(shown) + f" and {len(words) - at_most} more"
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


def input_notices(view: View) -> list[str]:
    """What happened to the typed text: cut to the context, and which tokens the model reads as <unk>."""
    prepared = view.prepared
    if prepared is None:
        return []
    notes = list(prepared.length_notices)
    if prepared.unknown:
        notes.append(prepared.unknown_notice(named(prepared.unknown_words)))
    return notes


def words_title(view: View) -> str:
    """The word list's title: how many tokens model `view.name` can read."""
    scope = scope_of(view.bundle)
    return f"The {len(scope.words):,} {scope.unit}s {escape(view.name)} knows"


def words_markdown(scope: Scope) -> str:
    """Every token a student can type, in a line of Markdown (each escaped)."""
    return " · ".join(escape(visible(w)) for w in scope.words)       # a space as ␣, "." as ⟨.⟩


def training_line(view: View) -> str:
    """One line of what the model learned from and how much it reads."""
    scope = scope_of(view.bundle)
    step, final = (view.bundle.facts or {}).get("training_step"), (view.bundle.facts or {}).get("final_step")
    if isinstance(step, int) and isinstance(final, int) and step < final:     # a checkpoint saved as it learned
        learned = (f"is the model before any training: its random weights at step 0, before it read "
                   f"{scope.training_data}." if step == 0 else
                   f"is the model after {step:,} of its {final:,} training steps on {scope.training_data}.")
    else:
        learned = (f"was trained on {scope.training_data}." if scope.training_data != NOT_RECORDED
                   else "does not say what it was trained on (its file records nothing about its training data).")
    return f"**{escape(view.name)}** {learned} It reads at most {scope.context:,} tokens."


# --- encoder-decoders: is the source one the model learned to answer? -----------------------------------

def source_check(view: View) -> tasks.SourceCheck | None:
    """The task's verdict on the view's source (None for a model without a task, or without a source)."""
    scope = scope_of(view.bundle)
    if scope.task is None or not view.text.strip():
        return None
    return tasks.check_source(scope.task, view.text, scope.lengths)


def outside_text(check: tasks.SourceCheck) -> str:
    """The flag beside the answer: why this source is outside what the model learned, and what that means."""
    reasons = " ".join(escape(problem) for problem in check.problems)          # they quote what was typed
    return f"**Outside what this model learned.** {reasons}\n\n{OUTSIDE}"


def answer_line(view: View, written: str, check: tasks.SourceCheck) -> str:
    """The task's own right answer beside the model's, and whether they agree (nothing when there is none)."""
    if check.answer is None:
        return ""
    verdict = "the model wrote exactly this" if written == check.answer else "the model wrote something else"
    return f"**The right answer** ({'grammar' if scope_of(view.bundle).task == 'translate' else 'rule'}): " \
           f"{quote(check.answer)}: {verdict}."


def grammar_line() -> str:
    """The translation grammar in a sentence, counted from its lexicon (model/tasks.py)."""
    before = [a.english for a in tasks.ADJECTIVES if getattr(a, "before_noun", False)]
    after = [a.english for a in tasks.ADJECTIVES if not getattr(a, "before_noun", False)]
    objects = sum(v.transitive for v in tasks.VERBS)
    return (f"It learned one small grammar: *the* or *a*, up to two adjectives, a noun, a verb, and for "
            f"{objects} of the {len(tasks.VERBS)} verbs an object made the same way. {len(tasks.NOUNS)} nouns, "
            f"{len(tasks.VERBS)} verbs and {len(tasks.ADJECTIVES)} adjectives: "
            + (f"{len(before)} that French puts before the noun ({', '.join(before)}) and " if before else "")
            + f"{len(after)} colours that go after it. Any other word, or another sentence shape, is outside what "
              "it learned. The table lists every word.")


def digits_line(view: View) -> str:
    """What a digit task's model reads: single digits separated by spaces, in lists of the trained lengths."""
    scope = scope_of(view.bundle)
    lengths = (f"lists of {scope.lengths[0]} to {scope.lengths[1]} digits" if scope.lengths
               else "lists whose lengths were not recorded")
    return (f"It reads the digits 0 to 9, one at a time and separated by spaces (“7 3 9”, not “739”), and it was "
            f"trained on {lengths}. A longer or shorter list, a number of two digits or a word is outside what it "
            "learned.")


def lexicon_table(task: str) -> pd.DataFrame:
    """The task's lexicon (model.tasks.lexicon) as a table a student reads."""
    return pd.DataFrame(tasks.lexicon(task))
