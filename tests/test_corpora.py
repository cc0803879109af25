"""The training texts: what patterns are in them, and what uploads are refused."""
import re
from collections import Counter

import pytest

from model import corpora
from model.corpora import (PROBE_SEED, REVERSAL_TEST_SEED, ROSES, TINY_TALES_WORDS, TRAIN_SEED, digit_reversal,
                           digit_reversal_examples, digit_sorting, digit_sorting_examples, roses_text, tiny_tales, tiny_tales_probes, user_text)

TALES = tiny_tales(3000, seed=TRAIN_SEED)


# --- a recogniser for the tiny tales grammar, written from the word lists -------------------

def one_of(words):
    return "(?:" + "|".join(sorted(words)) + ")"


ADJ, PADJ = one_of(corpora.ADJECTIVES), one_of(corpora.PLACE_ADJECTIVES)
SG, PL = one_of(corpora.ANIMALS), one_of(corpora.ANIMALS.values())
NP = {False: f"(?:the|a) (?:{ADJ} )?{SG}", True: f"(?:the|some) (?:{ADJ} )?{PL}"}
PLACE = f"(?:(?:the|a) (?:{PADJ} )?{one_of(corpora.PLACES)}|(?:the|some) (?:{PADJ} )?{one_of(corpora.PLACES.values())})"
FEEL = one_of(corpora.FEELINGS)
ANY_NP = f"(?:{NP[False]}|{NP[True]})"
ATTRACTOR = f"the (?:{ADJ} )?(?:{SG}|{PL})"
NAME = one_of(corpora.NAMES["girl"] + corpora.NAMES["boy"])
GRAMMAR = {
    "agreement": f"(?:{NP[False]} (?:is|was)|{NP[True]} (?:are|were)) {FEEL} \\.",
    "across": f"(?:{NP[False]} {one_of(corpora.WITH)} {ATTRACTOR} (?:is|was)|"
              f"{NP[True]} {one_of(corpora.WITH)} {ATTRACTOR} (?:are|were)) {FEEL} \\.",
    "because": f"(?:{NP[False]} {one_of(corpora.RESTING)} {one_of(corpora.AT)} {PLACE} because it was|"
               f"{NP[True]} {one_of(corpora.RESTING)} {one_of(corpora.AT)} {PLACE} because they were) {FEEL} \\.",
    "chase": f"{ANY_NP} {one_of(corpora.DOING)} {ANY_NP} \\.",
    "named": f"there was a (?:girl|boy) named ({NAME}) \\. \\1 (?:was {FEEL}|liked the {SG}|saw a {SG}|"
             f"sat on the {one_of(corpora.PLACES)}) \\.",
}


def kind_of(sentence):
    """Which template a sentence (or name story) matches, or None."""
    for kind, pattern in GRAMMAR.items():
        if re.fullmatch(pattern, sentence):
            return kind
    return None


def stories(text):
    """Split the stream into sentences, keeping each name story (two sentences) whole."""
    parts = [s.strip() + " ." for s in text.split(" .") if s.strip()]
    out = []
    for s in parts:
        if out and out[-1].startswith("there was") and out[-1].count(".") == 1:
            out[-1] += " " + s
        else:
            out.append(s)
    return out


def is_plural(noun):
    return noun in corpora.ANIMALS.values() or noun in corpora.PLACES.values()


SINGULAR = {plural: noun for noun, plural in corpora.ANIMALS.items()} | {noun: noun for noun in corpora.ANIMALS}


# --- small corpora ----------------------------------------------------------------------------

def test_roses():
    assert ROSES.split()[:3] == ["roses", "are", "red"]
    assert roses_text(3) == " ".join([ROSES] * 3)


def test_digit_sorting():
    examples = digit_sorting_examples(200, seed=1, min_len=2, max_len=5)
    for ex in examples:
        left, right = ex.removesuffix(" .").split(" > ")
        assert right.split() == sorted(left.split()) and 2 <= len(left.split()) <= 5
    assert digit_sorting(200, seed=1, min_len=2, max_len=5) == " ".join(examples)
    assert digit_sorting(50, seed=2) != digit_sorting(50, seed=3)
    with pytest.raises(ValueError):
        digit_sorting(5, seed=0, min_len=4, max_len=3)


def test_digit_reversal_is_seeded_and_its_held_out_lists_are_new():
    examples = digit_reversal_examples(300, seed=0)
    for ex in examples:
        left, right = ex.removesuffix(" .").split(" > ")
        assert right.split() == left.split()[::-1] and 5 <= len(left.split()) <= 8
    assert digit_reversal(300, seed=0) == " ".join(examples) == digit_reversal(300, seed=0)
    train = set(digit_reversal_examples(5000, seed=0))
    held_out = digit_reversal_examples(200, seed=REVERSAL_TEST_SEED)
    assert held_out != digit_reversal_examples(200, seed=0)
    assert sum(ex in train for ex in held_out) < 10        # lists of 5-8 digits rarely repeat


# --- tiny tales -----------------------------------------------------------------------------

def test_tiny_tales_is_seeded():
    assert tiny_tales(200, seed=7) == tiny_tales(200, seed=7)
    assert tiny_tales(200, seed=7) != tiny_tales(200, seed=8)


def test_tiny_tales_has_the_requested_number_of_sentences():
    for n in (1, 2, 3, 50):
        assert tiny_tales(n, seed=n).count(" .") == n


def test_tiny_tales_format():
    assert TALES == TALES.lower() and "  " not in TALES and TALES.endswith(" .")
    assert set(TALES.split()) <= set(TINY_TALES_WORDS)


def test_every_sentence_follows_the_grammar():
    kinds = Counter(kind_of(s) for s in stories(TALES))
    assert None not in kinds, [s for s in stories(TALES) if kind_of(s) is None][:3]
    assert set(kinds) == set(GRAMMAR)


def test_vocabulary_is_modest_and_covers_classroom_sentences():
    assert 100 <= len(TINY_TALES_WORDS) <= 250
    assert len(set(TINY_TALES_WORDS)) == len(TINY_TALES_WORDS)
    for s in ["the cat sat on the mat because it was tired", "the dog chased the cat",
              "the cats near the dog are happy", "there was a girl named mia . mia was happy ."]:
        assert set(s.split()) <= set(TINY_TALES_WORDS), s
    assert set(TINY_TALES_WORDS) == set(tiny_tales(20000, seed=1).split())  # every word is reachable


def test_pronouns_match_the_subject_not_the_place():
    because = [s.split() for s in stories(TALES) if kind_of(s) == "because"]
    same = 0
    for words in because:
        subject = next(w for w in words if w in SINGULAR)
        place = words[words.index("because") - 1]
        pronoun = words[words.index("because") + 1]
        assert pronoun == ("they" if is_plural(subject) else "it")
        same += is_plural(place) == is_plural(subject)
    assert 0.35 < same / len(because) < 0.65  # the nearest noun is no guide


def test_across_phrase_attractor_has_the_other_number_about_half_the_time():
    across = [s.split() for s in stories(TALES) if kind_of(s) == "across"]
    other = 0
    for words in across:
        k = next(i for i, w in enumerate(words) if w in corpora.WITH)
        subject, attractor = words[k - 1], words[-4]
        assert attractor in SINGULAR
        other += is_plural(subject) != is_plural(attractor)
    assert 0.35 < other / len(across) < 0.65


def test_chasing_happens_in_both_directions():
    pairs = set()
    for s in stories(TALES):
        if kind_of(s) == "chase":
            pairs.add(tuple(SINGULAR[w] for w in s.split() if w in SINGULAR))
    assert sum((b, a) in pairs for a, b in pairs) > 20


def test_name_stories_repeat_the_name():
    named = [s.split() for s in stories(TALES) if kind_of(s) == "named"]
    assert len(named) > 100 and all(w[5] == w[7] for w in named)
    assert len({w[5] for w in named}) == 20


# --- probes ---------------------------------------------------------------------------------

PROBES = tiny_tales_probes(200)
COMPLETE = {  # finish a probe after its answer so the recogniser can check it
    "agreement": lambda p, w: f"{p.prefix} {w} happy .",
    "agreement_across_phrase": lambda p, w: f"{p.prefix} {w} happy .",
    "pronoun": lambda p, w: f"{p.prefix} {w} {'was' if w == 'it' else 'were'} tired .",
    "names": lambda p, w: f"{p.prefix} {w} was happy .",
}
TEMPLATE = {"agreement": "agreement", "agreement_across_phrase": "across", "pronoun": "because", "names": "named"}


def test_probe_sets_have_the_requested_size():
    assert set(PROBES) == {"agreement", "agreement_across_phrase", "pronoun", "names"}
    assert all(len(v) == 200 for v in PROBES.values())
    assert all(len(v) == 12 for v in tiny_tales_probes(12, seed=3).values())
    assert PROBE_SEED != TRAIN_SEED
    assert tiny_tales_probes(20) == tiny_tales_probes(20) != tiny_tales_probes(20, seed=1)


@pytest.mark.parametrize("name", list(TEMPLATE))
def test_good_answers_follow_the_grammar_and_bad_ones_do_not(name):
    for p in PROBES[name]:
        assert p.good != p.bad
        assert kind_of(COMPLETE[name](p, p.good)) == TEMPLATE[name], p
        assert kind_of(COMPLETE[name](p, p.bad)) is None, p


@pytest.mark.parametrize("name", ["agreement", "agreement_across_phrase", "pronoun"])
def test_probes_are_balanced_between_singular_and_plural(name):
    goods = Counter(p.good for p in PROBES[name])
    singular = goods["is"] + goods["was"] + goods["it"]
    assert singular == 100
    if name != "pronoun":
        assert goods["is"] + goods["are"] == 100  # present and past tense evenly


def test_across_phrase_probes_always_have_an_opposite_attractor():
    for p in PROBES["agreement_across_phrase"]:
        words = p.prefix.split()
        assert is_plural(words[-1]) != (p.good in ("are", "were"))


def test_pronoun_probes_vary_the_place_number():
    places = [p.prefix.split()[-2] for p in PROBES["pronoun"]]
    plural = [is_plural(w) for w in places]
    assert sum(plural) == 100


def test_name_probes_copy_the_earlier_name():
    boys = 0
    for p in PROBES["names"]:
        words = p.prefix.split()
        assert words[-2] == p.good and p.bad in corpora.NAMES[words[3]]
        boys += words[3] == "boy"
    assert boys == 100


# --- user text --------------------------------------------------------------------------------

def test_user_text_accepts_utf8_and_normalises_newlines():
    assert user_text("a\r\nb\rc\n") == "a\nb\nc\n"
    assert user_text("héllo 🙂 你好".encode()) == "héllo 🙂 你好"
    assert user_text("\ufeffhi".encode()) == "hi"  # a byte order mark is dropped


@pytest.mark.parametrize("data, message", [
    (b"caf\xe9", "not UTF-8"), (b"PK\x03\x04\x00\x00", "binary"), (b"", "empty"), ("  \n\t ", "empty"),
    (b"x" * 101, "100 bytes"), ("é" * 51, "100 bytes"), (123, "text or bytes"),
])
def test_user_text_refuses_with_a_friendly_message(data, message):
    with pytest.raises(ValueError, match=message):
        user_text(data, max_bytes=100)
