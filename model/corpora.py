"""Training texts: small corpora whose patterns a tiny transformer can learn and a student can see.

  roses         the one-line poem of many from-scratch walkthroughs
  tiny tales    seeded simple English with grammar to discover (agreement, pronouns, copying names)
  digit sorting "3 1 2 > 1 2 3 ." : the model must look back at the whole list
  digit reversal "3 1 4 > 4 1 3 .": the model must know where each digit stood (needs positions)
  user text     whatever a student uploads, checked and tidied

Tiny tales sentences are lowercase words separated by single spaces, ending in " .",
so the word tokenizer gives them back exactly.
"""
import random
from typing import NamedTuple

ROSES = "roses are red violets are blue sugar is sweet and so are you"


def roses_text(repeats: int) -> str:
    """The poem repeated as one stream of words."""
    return " ".join([ROSES] * repeats)


# --- tiny tales: the word lists ----------------------------------------------------------

ANIMALS = {"cat": "cats", "dog": "dogs", "bird": "birds", "fox": "foxes", "rabbit": "rabbits",
           "frog": "frogs", "horse": "horses", "mouse": "mice", "duck": "ducks", "bear": "bears",
           "cow": "cows", "pig": "pigs", "owl": "owls", "goat": "goats", "puppy": "puppies"}
PLACES = {"mat": "mats", "box": "boxes", "bed": "beds", "chair": "chairs", "rock": "rocks",
          "log": "logs", "rug": "rugs", "bench": "benches", "table": "tables", "hill": "hills"}
ADJECTIVES = ["big", "small", "little", "old", "young", "brown", "black", "white", "red", "fat",
              "fluffy", "tiny"]                                    # before a noun: "the big cat"
PLACE_ADJECTIVES = ["big", "small", "old", "red", "brown", "white"]  # "the old mat", not "the young mat"
FEELINGS = ["happy", "sad", "tired", "hungry", "sleepy", "scared", "angry", "cold", "wet", "bored"]
RESTING = ["sat", "slept", "rested", "stayed", "hid", "waited", "lay", "stood"]
DOING = ["chased", "saw", "liked", "followed", "helped", "found", "watched", "pushed", "heard", "loved"]
AT = ["on", "under", "near", "by", "behind"]                       # "sat on the mat"
WITH = ["near", "with", "behind", "beside"]                        # "the cat near the dogs"
NAMES = {"girl": ["mia", "emma", "lily", "zoe", "ava", "lucy", "anna", "ella", "nora", "ruby"],
         "boy": ["leo", "max", "sam", "ben", "tom", "jack", "noah", "finn", "omar", "ravi"]}
DET = {False: ["the", "a"], True: ["the", "some"]}                 # singular / plural
BE = {(False, "now"): "is", (True, "now"): "are", (False, "past"): "was", (True, "past"): "were"}
PRONOUN = {False: "it", True: "they"}
PLURAL = {**ANIMALS, **PLACES}

TINY_TALES_WORDS = sorted(
    {*ANIMALS, *ANIMALS.values(), *PLACES, *PLACES.values(), *ADJECTIVES, *FEELINGS, *RESTING,
     *DOING, *AT, *WITH, *NAMES, *NAMES["girl"], *NAMES["boy"], *DET[False], *DET[True],
     *BE.values(), *PRONOUN.values(), "because", "there", "named", "."})
"""Every word (and the full stop) the tiny tales grammar can produce."""


# --- tiny tales: the grammar ---------------------------------------------------------------
TRAIN_SEED, PROBE_SEED = 0, 12345  # probes come from other random draws than the training text

# Each sentence function returns a list of words; options fix a choice (used by the probes).

def _noun_phrase(rng, plural, noun=None, det=None):
    """Determiner, optional adjective, noun: "the big cat", "some dogs". noun is singular."""
    noun = noun or rng.choice(list(ANIMALS))
    words = [det or rng.choice(DET[plural])]
    if rng.random() < 0.5:
        words.append(rng.choice(ADJECTIVES if noun in ANIMALS else PLACE_ADJECTIVES))
    return words + [PLURAL[noun] if plural else noun]


def _is_feeling(rng, plural=None, tense=None, det=None):
    """Agreement: "the big cats are happy ."."""
    plural = rng.random() < 0.5 if plural is None else plural
    tense = tense or rng.choice(["now", "past"])
    return _noun_phrase(rng, plural, det=det) + [BE[plural, tense], rng.choice(FEELINGS), "."]


def _across_phrase(rng, plural=None, tense=None, attractor=None, det=None):
    """Agreement across a phrase whose noun may have the other number: "the cat near the dogs is happy ."."""
    plural = rng.random() < 0.5 if plural is None else plural
    tense = tense or rng.choice(["now", "past"])
    attractor = rng.random() < 0.5 if attractor is None else attractor
    return (_noun_phrase(rng, plural, det=det) + [rng.choice(WITH)] + _noun_phrase(rng, attractor, det="the")
            + [BE[plural, tense], rng.choice(FEELINGS), "."])


def _because(rng, plural=None, place_plural=None, det=None):
    """A pronoun that looks back past the place to the subject:
    "the cats sat on the mat because they were tired ."."""
    plural = rng.random() < 0.5 if plural is None else plural
    place_plural = rng.random() < 0.5 if place_plural is None else place_plural
    return (_noun_phrase(rng, plural, det=det) + [rng.choice(RESTING), rng.choice(AT)]
            + _noun_phrase(rng, place_plural, noun=rng.choice(list(PLACES)))
            + ["because", PRONOUN[plural], BE[plural, "past"], rng.choice(FEELINGS), "."])


def _chase(rng):
    """Who did what to whom, where only word order tells: "the dog chased the cat ."."""
    doer, done_to = rng.sample(list(ANIMALS), 2)
    return (_noun_phrase(rng, rng.random() < 0.5, doer) + [rng.choice(DOING)]
            + _noun_phrase(rng, rng.random() < 0.5, done_to) + ["."])


def _named(rng, who=None):
    """Copying a name: "there was a girl named mia . mia was happy ." (two sentences)."""
    who = who or rng.choice(list(NAMES))
    name = rng.choice(NAMES[who])
    then = rng.choice([["was", rng.choice(FEELINGS)], ["liked", "the", rng.choice(list(ANIMALS))],
                       ["saw", "a", rng.choice(list(ANIMALS))], ["sat", "on", "the", rng.choice(list(PLACES))]])
    return ["there", "was", "a", who, "named", name, ".", name] + then + ["."]


_ONE_SENTENCE = [_is_feeling, _across_phrase, _because, _chase]


def tiny_tales(n_sentences: int = 2000, seed: int = TRAIN_SEED) -> str:
    """n_sentences seeded sentences of simple English, each ending in " .", as one stream."""
    rng = random.Random(seed)
    words, left = [], n_sentences
    while left > 0:
        make = rng.choice(_ONE_SENTENCE + [_named] * (left > 1))
        sentence = make(rng)
        words += sentence
        left -= sentence.count(".")
    return " ".join(words)


# --- tiny tales: probes ----------------------------------------------------------------------


class Probe(NamedTuple):
    """A minimal pair: after prefix, the grammar allows good but not bad.
    The model passes when it gives good a higher probability than bad."""
    prefix: str
    good: str
    bad: str


def _cut(sentence, k, bad):
    """Probe at position k of a real grammar sentence: the grammar's next word is sentence[k]."""
    return Probe(" ".join(sentence[:k]), sentence[k], bad)


def tiny_tales_probes(n_per_set: int = 200, seed: int = PROBE_SEED) -> dict[str, list[Probe]]:
    """Four probe sets, each balanced between singular/plural (or girl/boy) answers.

    agreement                "the big cats"                     are / is
    agreement_across_phrase  "the cat near the dogs"            is / are  (attractor always the other number)
    pronoun                  "the cats sat on the mat because"  they / it (place noun either number)
    names                    "there was a girl named mia ."     mia / another girl's name
    """
    rng = random.Random(seed)
    sets = {name: [] for name in ("agreement", "agreement_across_phrase", "pronoun", "names")}
    for i in range(n_per_set):
        plural, tense = i % 2 == 1, ("now", "past")[i // 2 % 2]
        other = BE[not plural, tense]
        s = _is_feeling(rng, plural, tense, det="the")
        sets["agreement"].append(_cut(s, len(s) - 3, other))
        s = _across_phrase(rng, plural, tense, attractor=not plural, det="the")
        sets["agreement_across_phrase"].append(_cut(s, len(s) - 3, other))
        s = _because(rng, plural, place_plural=plural == (i // 2 % 2 == 0), det="the")
        sets["pronoun"].append(_cut(s, s.index("because") + 1, PRONOUN[not plural]))
        who = ("girl", "boy")[i % 2]
        s = _named(rng, who)
        sets["names"].append(_cut(s, 7, rng.choice([n for n in NAMES[who] if n != s[5]])))
    for probes in sets.values():
        rng.shuffle(probes)
    return sets


# --- digit sorting -------------------------------------------------------------------------

def _digit_examples(n_examples: int, seed: int, min_len: int, max_len: int, answer) -> list[str]:
    """Examples "<digits> > <answer(digits)> .", with min_len to max_len random digits each."""
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")
    rng = random.Random(seed)
    out = []
    for _ in range(n_examples):
        digits = [str(rng.randrange(10)) for _ in range(rng.randint(min_len, max_len))]
        out.append(" ".join(digits + [">"] + answer(digits) + ["."]))
    return out


def digit_sorting_examples(n_examples: int, seed: int = 0, min_len: int = 3, max_len: int = 6) -> list[str]:
    """Examples like "3 1 2 > 1 2 3 .": some digits, then the same digits sorted."""
    return _digit_examples(n_examples, seed, min_len, max_len, sorted)


def digit_sorting(n_examples: int, seed: int = 0, min_len: int = 3, max_len: int = 6) -> str:
    """Digit sorting examples as one stream."""
    return " ".join(digit_sorting_examples(n_examples, seed, min_len, max_len))


# Sorting needs no positions (a causal model sees which digits came, and sorted order ignores where they
# stood). Reversal does: its first answer is the digit that came last. Lists of 5 to 8 digits, so the
# model cannot get by with counting how many digits it has seen.
REVERSAL_LENGTHS = (5, 8)
REVERSAL_TEST_SEED = 424242        # held-out lists for exact-match tests: not the training or validation seeds


def digit_reversal_examples(n_examples: int, seed: int = 0, min_len: int = REVERSAL_LENGTHS[0],
                            max_len: int = REVERSAL_LENGTHS[1]) -> list[str]:
    """Examples like "3 1 4 1 5 > 5 1 4 1 3 .": some digits, then the same digits in reverse order."""
    return _digit_examples(n_examples, seed, min_len, max_len, lambda digits: digits[::-1])


def digit_reversal(n_examples: int, seed: int = 0) -> str:
    """Digit reversal examples as one stream."""
    return " ".join(digit_reversal_examples(n_examples, seed))


# --- user text -----------------------------------------------------------------------------

def user_text(data: bytes | str, max_bytes: int = 1_000_000) -> str:
    """Check an upload or pasted text and return it with newlines as "\\n".

    Raises ValueError with a message a student can act on.
    """
    if isinstance(data, str):
        try:
            data = data.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("This text contains characters that are not valid Unicode.") from None
    if not isinstance(data, (bytes, bytearray)):
        raise ValueError(f"Expected text or bytes, got {type(data).__name__}.")
    if len(data) > max_bytes:
        raise ValueError(f"This text is {len(data):,} bytes; the limit is {max_bytes:,} bytes. "
                         "Please use a shorter extract.")
    if b"\x00" in data:
        raise ValueError("This file looks binary (it contains NUL bytes), not plain text.")
    try:
        text = bytes(data).decode("utf-8-sig")  # -sig drops a byte order mark if there is one
    except UnicodeDecodeError:
        raise ValueError("This file is not UTF-8 text. Save it as plain text with UTF-8 encoding "
                         "and try again.") from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise ValueError("This text is empty (or only spaces); there is nothing to learn from.")
    return text
