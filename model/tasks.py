"""Source -> target tasks for the encoder-decoder, generated offline and seeded (held-out sets use another seed).

    sort        "3 1 2"              -> "1 2 3"
    reverse     "3 1 2"              -> "2 1 3"
    translate   "the red cat sleeps" -> "le chat rouge dort"

The translation is a toy English -> French grammar built from a small hand-checked lexicon, with what a
student can see the model learn: French articles agree with the noun's gender and number (le chat, la
souris, les chats), colour adjectives come after the noun and agree with it (la voiture verte, les chiens
noirs), and the verb agrees with its subject (le chat dort, les chats dorment). Every noun starts with a
consonant, so no elision (l') is needed, and every English noun shows its number (no "fish"), so every
source has exactly one right translation.
"""
import random
from dataclasses import dataclass

import torch

from .seq2seq import BOS, EOS, PAD
from .tokenizers import UNK, WordTokenizer

TASKS = ("sort", "reverse", "translate")
DIGITS = "0123456789"


@dataclass(frozen=True)
class Noun:
    english: str
    plural: str
    french: str
    french_plural: str
    gender: str                  # "m" or "f"


@dataclass(frozen=True)
class Adjective:
    english: str
    forms: tuple[str, str, str, str]     # masculine, feminine, masculine plural, feminine plural


@dataclass(frozen=True)
class Verb:
    english: str                 # third person singular: "sleeps"
    plural: str                  # "sleep"
    french: str                  # "dort"
    french_plural: str           # "dorment"
    transitive: bool = False


NOUNS = (
    Noun("cat", "cats", "chat", "chats", "m"), Noun("dog", "dogs", "chien", "chiens", "m"),
    Noun("horse", "horses", "cheval", "chevaux", "m"), Noun("boy", "boys", "garçon", "garçons", "m"),
    Noun("rabbit", "rabbits", "lapin", "lapins", "m"), Noun("duck", "ducks", "canard", "canards", "m"),
    Noun("mouse", "mice", "souris", "souris", "f"), Noun("girl", "girls", "fille", "filles", "f"),
    Noun("car", "cars", "voiture", "voitures", "f"), Noun("cow", "cows", "vache", "vaches", "f"),
    Noun("house", "houses", "maison", "maisons", "f"), Noun("table", "tables", "table", "tables", "f"),
)
ADJECTIVES = (
    Adjective("red", ("rouge", "rouge", "rouges", "rouges")),
    Adjective("green", ("vert", "verte", "verts", "vertes")),
    Adjective("black", ("noir", "noire", "noirs", "noires")),
    Adjective("white", ("blanc", "blanche", "blancs", "blanches")),
    Adjective("blue", ("bleu", "bleue", "bleus", "bleues")),
    Adjective("grey", ("gris", "grise", "gris", "grises")),
)
VERBS = (
    Verb("sleeps", "sleep", "dort", "dorment"), Verb("eats", "eat", "mange", "mangent"),
    Verb("runs", "run", "court", "courent"), Verb("sings", "sing", "chante", "chantent"),
    Verb("jumps", "jump", "saute", "sautent"),
    Verb("sees", "see", "voit", "voient", transitive=True), Verb("likes", "like", "aime", "aiment", transitive=True),
    Verb("follows", "follow", "suit", "suivent", transitive=True),
)
ARTICLES = {("the", "m", False): "le", ("the", "f", False): "la", ("the", "m", True): "les",
            ("the", "f", True): "les", ("a", "m", False): "un", ("a", "f", False): "une"}


def noun_phrase(rng: random.Random) -> tuple[str, str, bool]:
    """(English, French, plural) of a noun phrase: an article, a noun, perhaps a colour after it in French."""
    noun, plural = rng.choice(NOUNS), rng.random() < 0.4
    article = "the" if plural or rng.random() < 0.7 else "a"
    adjective = rng.choice(ADJECTIVES) if rng.random() < 0.6 else None
    english = [article] + ([adjective.english] if adjective else []) + [noun.plural if plural else noun.english]
    french = [ARTICLES[(article, noun.gender, plural)], noun.french_plural if plural else noun.french]
    if adjective:
        french.append(adjective.forms[(noun.gender == "f") + 2 * plural])
    return " ".join(english), " ".join(french), plural


def translation_pair(rng: random.Random) -> tuple[str, str]:
    """One sentence: subject, verb (agreeing with the subject), and an object if the verb takes one."""
    subject_en, subject_fr, plural = noun_phrase(rng)
    verb = rng.choice(VERBS)
    english, french = [subject_en, verb.plural if plural else verb.english], \
        [subject_fr, verb.french_plural if plural else verb.french]
    if verb.transitive:
        object_en, object_fr, _ = noun_phrase(rng)
        english.append(object_en)
        french.append(object_fr)
    return " ".join(english), " ".join(french)


def translate(english: str) -> str | None:
    """The grammar's own French for an English sentence it can make, else None (the lab's probe target)."""
    nouns = {n.english: (n, False) for n in NOUNS} | {n.plural: (n, True) for n in NOUNS}
    adjectives = {a.english: a for a in ADJECTIVES}
    verbs = {v.english: (v, False) for v in VERBS} | {v.plural: (v, True) for v in VERBS}
    words = english.lower().split()

    def phrase(i: int):                              # -> (French, plural, next index) or None
        if i >= len(words) or words[i] not in ("the", "a"):
            return None
        article, i = words[i], i + 1
        adjective = adjectives.get(words[i]) if i < len(words) else None
        i += adjective is not None
        if i >= len(words) or words[i] not in nouns:
            return None
        noun, plural = nouns[words[i]]
        if (article, noun.gender, plural) not in ARTICLES:
            return None
        french = [ARTICLES[(article, noun.gender, plural)], noun.french_plural if plural else noun.french]
        if adjective:
            french.append(adjective.forms[(noun.gender == "f") + 2 * plural])
        return french, plural, i + 1

    subject = phrase(0)
    if subject is None or subject[2] >= len(words) or words[subject[2]] not in verbs:
        return None
    french, plural, i = subject
    verb, verb_plural = verbs[words[i]]
    if verb_plural != plural and verb.english != verb.plural:
        return None
    french = french + [verb.french_plural if plural else verb.french]
    if verb.transitive:
        obj = phrase(i + 1)
        if obj is None or obj[2] != len(words):
            return None
        french += obj[0]
    elif i + 1 != len(words):
        return None
    return " ".join(french)


def answer(task: str, source: str) -> str | None:
    """The right target for a source of `task`, or None when the source is not one the task can answer."""
    if task == "translate":
        return translate(source)
    digits = source.split()
    if not digits or any(d not in DIGITS for d in digits):
        return None
    return " ".join(sorted(digits) if task == "sort" else digits[::-1])


def digit_pair(rng: random.Random, task: str, lengths: tuple[int, int] = (3, 8)) -> tuple[str, str]:
    digits = [rng.choice(DIGITS) for _ in range(rng.randint(*lengths))]
    out = sorted(digits) if task == "sort" else digits[::-1]
    return " ".join(digits), " ".join(out)


def pairs(task: str, n: int, seed: int = 0) -> list[tuple[str, str]]:
    """`n` (source, target) pairs of `task`, the same for the same seed."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    rng = random.Random(f"{task}-{seed}")
    make = translation_pair if task == "translate" else lambda r: digit_pair(r, task)
    return [make(rng) for _ in range(n)]


def held_out(task: str, n: int, train: list[tuple[str, str]], seed: int = 1_000) -> list[tuple[str, str]]:
    """`n` pairs from another seed that never occur in `train` (a model must generalise to them)."""
    seen, out, extra = {s for s, _ in train}, [], 0
    while len(out) < n:
        for pair in pairs(task, n, seed + extra):
            if pair[0] not in seen and len(out) < n:
                seen.add(pair[0])
                out.append(pair)
        extra += 1
        if extra > 50:
            break
    return out


def tokenizer_for(task: str) -> WordTokenizer:
    """One word vocabulary for source and target: <unk> 0, <pad> 1, <bos> 2, <eos> 3, then every word."""
    if task == "translate":
        words = {w for n in NOUNS for w in (n.english, n.plural, n.french, n.french_plural)}
        words |= {w for a in ADJECTIVES for w in (a.english, *a.forms)}
        words |= {w for v in VERBS for w in (v.english, v.plural, v.french, v.french_plural)}
        words |= {"the", "a"} | set(ARTICLES.values())
    else:
        words = set(DIGITS)
    return WordTokenizer([UNK, PAD, BOS, EOS] + sorted(words))


def encode_pairs(tokenizer: WordTokenizer, data: list[tuple[str, str]], max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(sources [N, S], targets [N, T]) padded with <pad>; each target is <bos> words <eos>."""
    pad, bos, eos = (tokenizer.vocab.index(t) for t in (PAD, BOS, EOS))
    sources = [tokenizer.encode(s) for s, _ in data]
    targets = [[bos] + tokenizer.encode(t) + [eos] for _, t in data]
    longest = max(max(map(len, sources)), max(map(len, targets)))
    if longest > max_len:
        raise ValueError(f"a pair needs {longest} positions; the model has {max_len}")

    def padded(rows):
        width = max(map(len, rows))
        return torch.tensor([r + [pad] * (width - len(r)) for r in rows])
    return padded(sources), padded(targets)
