"""Source -> target tasks for the encoder-decoder, generated offline and seeded (held-out sets use another seed).

    sort        "3 1 2"                    -> "1 2 3"
    reverse     "3 1 2"                    -> "2 1 3"
    translate   "the small red cat sleeps" -> "le petit chat rouge dort"

The digit tasks read lists of single digits separated by spaces; how long the lists are is part of the recipe
(`lengths`: the bundled sort learns 1 to 10 digits, the lab 3 to 8).

The translation is a toy English -> French grammar built from a small hand-checked lexicon (`lexicon` lists
it), with what a student can see the model learn:

  - French articles agree with the noun's gender and number (le chat, la souris, les chats);
  - six colours come after the noun and agree with it (la voiture verte, les chiens noirs);
  - six adjectives come before the noun, and agree too (la petite souris, les vieilles vaches,
    le vieux cheval): "the small red cat" is "le petit chat rouge", one word kept in place and one
    that crosses the noun;
  - the verb agrees with its subject (le chat dort, les chats dorment).

Every noun starts with a consonant, so no elision (l') and no "vieil" is needed; English writes "an" before
"old"; every English noun shows its number (no "fish"), so every source has exactly one right translation.

`check_source` says whether a typed source is one a task's model learned, and if not, why, in sentences a
student reads.
"""
import itertools
import random
from dataclasses import dataclass

import torch

from .tokenizers import BOS, EOS, PAD, UNK, WordTokenizer

TASKS = ("sort", "reverse", "translate")
DIGITS = "0123456789"
DEFAULT_LENGTHS = (3, 8)         # digit-list lengths when a caller names none (the training lab's)


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
    before_noun: bool = False            # French puts it before the noun (le petit chat); colours go after

    def agreeing(self, noun: Noun, plural: bool) -> str:
        """The French form that agrees with `noun` in gender and number."""
        return self.forms[(noun.gender == "f") + 2 * plural]


@dataclass(frozen=True)
class Verb:
    english: str                 # third person singular: "sleeps"
    plural: str                  # "sleep"
    french: str                  # "dort"
    french_plural: str           # "dorment"
    transitive: bool = False     # takes an object: "the cat sees a dog"


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
    Adjective("small", ("petit", "petite", "petits", "petites"), before_noun=True),
    Adjective("big", ("grand", "grande", "grands", "grandes"), before_noun=True),
    Adjective("young", ("jeune", "jeune", "jeunes", "jeunes"), before_noun=True),
    Adjective("old", ("vieux", "vieille", "vieux", "vieilles"), before_noun=True),
    Adjective("good", ("bon", "bonne", "bons", "bonnes"), before_noun=True),
    Adjective("pretty", ("joli", "jolie", "jolis", "jolies"), before_noun=True),
)
COLOURS = tuple(a for a in ADJECTIVES if not a.before_noun)          # after the noun in French
BEFORE_NOUN = tuple(a for a in ADJECTIVES if a.before_noun)          # before the noun in French
VERBS = (
    Verb("sleeps", "sleep", "dort", "dorment"), Verb("eats", "eat", "mange", "mangent"),
    Verb("runs", "run", "court", "courent"), Verb("sings", "sing", "chante", "chantent"),
    Verb("jumps", "jump", "saute", "sautent"),
    Verb("sees", "see", "voit", "voient", transitive=True), Verb("likes", "like", "aime", "aiment", transitive=True),
    Verb("follows", "follow", "suit", "suivent", transitive=True),
)
# (English article, gender, plural) -> French. "an" is how English writes "a" before a vowel ("an old cat").
ARTICLES = {("the", "m", False): "le", ("the", "f", False): "la", ("the", "m", True): "les",
            ("the", "f", True): "les", ("a", "m", False): "un", ("a", "f", False): "une"}
ENGLISH_ARTICLES = ("the", "a", "an")


def english_article(article: str, next_word: str) -> str:
    """"a" written as English writes it before `next_word`: "an" before a vowel (only "old" here)."""
    return "an" if article == "a" and next_word[0] in "aeiou" else article


def noun_phrase(rng: random.Random) -> tuple[str, str, bool]:
    """(English, French, plural) of a noun phrase: an article, perhaps an adjective French puts before the
    noun, perhaps a colour (after the noun in French), and the noun."""
    noun, plural = rng.choice(NOUNS), rng.random() < 0.4
    article = "the" if plural or rng.random() < 0.7 else "a"
    before = rng.choice(BEFORE_NOUN) if rng.random() < 0.45 else None
    colour = rng.choice(COLOURS) if rng.random() < 0.5 else None
    words = [a.english for a in (before, colour) if a] + [noun.plural if plural else noun.english]
    english = [english_article(article, words[0])] + words
    french = [ARTICLES[(article, noun.gender, plural)]] + ([before.agreeing(noun, plural)] if before else []) \
        + [noun.french_plural if plural else noun.french] + ([colour.agreeing(noun, plural)] if colour else [])
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


# --- the grammar read backwards: English -> its French, or why the grammar does not make it ------------------

def _quoted(words) -> str:
    """“a”, “b” and “c”."""
    shown = [f"“{w}”" for w in words]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


def _or(adjectives) -> str:
    """small, big or old."""
    names = [a.english for a in adjectives]
    return ", ".join(names[:-1]) + " or " + names[-1]


def _parse(words: list[str]) -> tuple[str | None, str | None]:
    """(the grammar's French, None) for lowercased English words it makes, else (None, why not: one sentence)."""
    nouns = {n.english: (n, False) for n in NOUNS} | {n.plural: (n, True) for n in NOUNS}
    adjectives = {a.english: a for a in ADJECTIVES}
    verbs = {v.english: (v, False) for v in VERBS} | {v.plural: (v, True) for v in VERBS}

    def phrase(i: int, where: str):              # -> (French words, plural, next index, English) or a problem
        if i >= len(words):
            return f"{where} the grammar needs a noun phrase (such as “the dog”), but the sentence stops."
        if words[i] not in ENGLISH_ARTICLES:
            if words[i] in nouns or words[i] in adjectives:
                return f"“{words[i]}” needs an article before it: the grammar's noun phrases start with “the”, " \
                       f"“a” or “an” (“the {words[i]}”)."
            return f"{where} the grammar needs “the”, “a” or “an”, not “{words[i]}”."
        start, article, i = i, words[i], i + 1
        before = colour = None
        while i < len(words) and words[i] in adjectives:
            adjective = adjectives[words[i]]
            if colour and adjective.before_noun:
                return f"“{colour.english} {adjective.english}”: English puts “{adjective.english}” before the " \
                       f"colour (“{adjective.english} {colour.english}”)."
            if (before and adjective.before_noun) or (colour and not adjective.before_noun):
                kind = "one colour" if colour and not adjective.before_noun else f"one of {_or(BEFORE_NOUN)}"
                return f"“{words[i - 1]} {words[i]}”: the grammar puts at most {kind} in a noun phrase."
            before, colour = (adjective, colour) if adjective.before_noun else (before, adjective)
            i += 1
        english = " ".join(words[start:i + 1])
        if i >= len(words) or words[i] not in nouns:
            found = f"not “{words[i]}”" if i < len(words) else "but the sentence stops"
            return f"After “{' '.join(words[start:i])}” the grammar needs a noun, {found}."
        noun, plural = nouns[words[i]]
        if article != "the" and plural:
            return f"“{article}” is for one thing and “{words[i]}” is plural: the grammar writes " \
                   f"“the {' '.join(words[start + 1:i + 1])}”."
        if article != "the" and article != english_article("a", words[start + 1]):
            right = english_article("a", words[start + 1])
            return f"English writes “{right} {words[start + 1]}”, not “{article} {words[start + 1]}”."
        french = [ARTICLES[("the" if article == "the" else "a", noun.gender, plural)]] \
            + ([before.agreeing(noun, plural)] if before else []) \
            + [noun.french_plural if plural else noun.french] + ([colour.agreeing(noun, plural)] if colour else [])
        return french, plural, i + 1, english

    subject = phrase(0, "At the start")
    if isinstance(subject, str):
        return None, subject
    french, plural, i, subject_en = subject
    if i >= len(words) or words[i] not in verbs:
        example = "sleep" if plural else "sleeps"
        found = f", not “{words[i]}”" if i < len(words) else ""
        return None, f"After “{subject_en}” the grammar needs a verb (“{subject_en} {example}”){found}."
    verb, verb_plural = verbs[words[i]]
    if verb_plural != plural:
        right = verb.plural if plural else verb.english
        return None, f"“{words[i]}” does not agree with “{subject_en}”: the grammar writes “{subject_en} {right}”."
    french = french + [verb.french_plural if plural else verb.french]
    rest = " ".join(words[i + 1:])
    if not verb.transitive:
        if rest:
            return None, f"“{words[i]}” takes no object in the grammar, so the sentence ends there; “{rest}” is more."
        return " ".join(french), None
    obj = phrase(i + 1, f"After “{words[i]}”")
    if isinstance(obj, str):
        if i + 1 >= len(words):
            return None, f"“{words[i]}” needs an object in the grammar (“{subject_en} {words[i]} a dog”)."
        return None, obj
    if obj[2] != len(words):
        return None, f"The grammar ends the sentence after its object (“{obj[3]}”); “{' '.join(words[obj[2]:])}” " \
                     "is more."
    return " ".join(french + obj[0]), None


def translate(english: str) -> str | None:
    """The grammar's own French for an English sentence it can make (any case), else None."""
    return _parse(english.lower().split())[0]


def answer(task: str, source: str) -> str | None:
    """The right target for a source of `task`, or None when the source is not one the task can answer."""
    if task == "translate":
        return translate(source)
    digits = source.split()
    if not digits or any(len(d) != 1 or d not in DIGITS for d in digits):
        return None
    return " ".join(sorted(digits) if task == "sort" else digits[::-1])


# --- generating pairs ---------------------------------------------------------------------------------------

def digit_pair(rng: random.Random, task: str, lengths: tuple[int, int] = DEFAULT_LENGTHS) -> tuple[str, str]:
    """A random list of lengths[0] to lengths[1] digits (every length as likely) and its sorted or reversed list."""
    digits = [rng.choice(DIGITS) for _ in range(rng.randint(*lengths))]
    out = sorted(digits) if task == "sort" else digits[::-1]
    return " ".join(digits), " ".join(out)


def pairs(task: str, n: int, seed: int = 0, lengths: tuple[int, int] = DEFAULT_LENGTHS) -> list[tuple[str, str]]:
    """`n` (source, target) pairs of `task`, the same for the same seed; a digit task's lists have lengths[0] to
    lengths[1] digits (translate ignores `lengths`)."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    lo, hi = lengths
    if not 1 <= lo <= hi:
        raise ValueError(f"lengths must be 1 <= shortest <= longest, got {lengths}")
    rng = random.Random(f"{task}-{seed}")
    make = translation_pair if task == "translate" else lambda r: digit_pair(r, task, (lo, hi))
    return [make(rng) for _ in range(n)]


def held_out(task: str, n: int, train: list[tuple[str, str]], seed: int = 1_000,
             lengths: tuple[int, int] = DEFAULT_LENGTHS) -> list[tuple[str, str]]:
    """`n` pairs from another seed that never occur in `train` (a model must generalise to them)."""
    seen, out, extra = {s for s, _ in train}, [], 0
    while len(out) < n:
        for pair in pairs(task, n, seed + extra, lengths):
            if pair[0] not in seen and len(out) < n:
                seen.add(pair[0])
                out.append(pair)
        extra += 1
        if extra > 50:
            break
    return out


EVERY_LIST_UP_TO = 1_000        # lengths with at most this many lists are tested on every one of them


def length_test(task: str, length: int, train: list[tuple[str, str]], n: int = 200,
                seed: int = 2_000) -> list[tuple[str, str]]:
    """Test pairs of a digit task with exactly `length` digits: every list of that length when there are at most
    EVERY_LIST_UP_TO (10 of one digit, 100 of two, 1,000 of three: training has seen most of them), else `n`
    different lists that are not in `train`."""
    if 10 ** length <= EVERY_LIST_UP_TO:
        sources = [" ".join(d) for d in itertools.product(DIGITS, repeat=length)]
    else:
        seen, sources, rng = {s for s, _ in train}, [], random.Random(f"length-{task}-{length}-{seed}")
        while len(sources) < n:
            source, _ = digit_pair(rng, task, (length, length))
            if source not in seen:
                seen.add(source)
                sources.append(source)
    return [(source, answer(task, source)) for source in sources]


def training_data(task: str, n: int, lengths: tuple[int, int] = DEFAULT_LENGTHS) -> str:
    """What `n` pairs of `task` are, in one sentence a student reads (a checkpoint's "training_data" fact)."""
    if task == "translate":
        return (f"{n:,} sentences of a small English grammar ({len(NOUNS)} nouns, {len(ADJECTIVES)} adjectives, "
                f"{len(VERBS)} verbs) with their French")
    return f"{n:,} random lists of {lengths[0]} to {lengths[1]} digits and their " \
           f"{'sorted' if task == 'sort' else 'reversed'} versions"


# --- what a task's model knows, and whether a typed source is inside it ----------------------------------------

def _english_words() -> set[str]:
    """Every English word of the grammar."""
    return {w for n in NOUNS for w in (n.english, n.plural)} | {a.english for a in ADJECTIVES} \
        | {w for v in VERBS for w in (v.english, v.plural)} | set(ENGLISH_ARTICLES)


def lexicon(task: str) -> list[dict]:
    """Every word a task's model learned, one row each (a table a student reads). For translate: kind (noun,
    adjective, verb, article), English, its plural, the French forms, a noun's gender, where an adjective goes
    in French, whether a verb takes an object. For sort and reverse: the ten digits."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    if task != "translate":
        return [{"kind": "digit", "token": d} for d in DIGITS]

    def row(kind, english, plural, french, french_plural, gender="", grammar=""):
        return {"kind": kind, "English": english, "English plural": plural, "French": french,
                "French plural": french_plural, "gender": gender, "grammar": grammar}
    rows = [row("article", "the", "the", "le / la", "les", grammar="agrees with the noun"),
            row("article", "a / an", "", "un / une", "", grammar="one thing only; “an” before a vowel")]
    rows += [row("noun", n.english, n.plural, n.french, n.french_plural,
                 gender={"m": "masculine", "f": "feminine"}[n.gender]) for n in NOUNS]
    rows += [row("adjective", a.english, a.english, f"{a.forms[0]} / {a.forms[1]}", f"{a.forms[2]} / {a.forms[3]}",
                 grammar="before the noun" if a.before_noun else "after the noun") for a in ADJECTIVES]
    rows += [row("verb", v.english, v.plural, v.french, v.french_plural,
                 grammar="takes an object" if v.transitive else "no object") for v in VERBS]
    return rows


@dataclass(frozen=True)
class SourceCheck:
    """A task's verdict on a typed source."""
    unknown: tuple[str, ...]     # typed words the task's vocabulary does not have, in order, without repeats
    answer: str | None           # the grammar's / task's own right target (answer(task, source)), None when none
    problems: tuple[str, ...]    # why this source is outside what the model learned, in sentences; () when inside

    @property
    def inside(self) -> bool:
        return not self.problems


FINAL_MARKS = ".!?"


def strip_final_punctuation(text: str) -> tuple[str, str | None]:
    """(text without one final full stop, question or exclamation mark, the mark or None): the tasks' sources
    have no punctuation, and a student types "The red cat sleeps." as a sentence."""
    stripped = text.rstrip()
    if stripped and stripped[-1] in FINAL_MARKS and stripped[:-1].strip():
        return stripped[:-1].rstrip(), stripped[-1]
    return text, None


def _is(words) -> str:
    return "is" if len(words) == 1 else "are"


def check_source(task: str, source: str, lengths: tuple[int, int] | None = None) -> SourceCheck:
    """Whether `source` is one `task`'s model learned to answer, and if not, why. Case does not matter, and one
    final ".", "!" or "?" is allowed. `lengths` are a digit task's trained list lengths (None: not checked)."""
    text, _ = strip_final_punctuation(source)
    words = WordTokenizer.split(text)
    vocabulary = set(tokenizer_for(task).vocab) - {UNK, PAD, BOS, EOS}
    unknown = tuple(dict.fromkeys(w for w in words if w not in vocabulary))
    right = answer(task, " ".join(words)) if words else None
    if not words:
        wanted = ("an English sentence such as “the red cat sleeps”" if task == "translate"
                  else "digits separated by spaces, such as “3 1 2”")
        return SourceCheck(unknown, None, (f"The source is empty: the model needs {wanted}.",))
    problems = []
    if task == "translate":
        french = [w for w in dict.fromkeys(words) if w in vocabulary and w not in _english_words()]
        if unknown:
            problems.append(f"{_quoted(unknown)} {_is(unknown)} not in the model's vocabulary: it learned "
                            f"{len(NOUNS)} nouns, {len(ADJECTIVES)} adjectives, {len(VERBS)} verbs and the articles "
                            "“the”, “a” and “an”.")
        if french:
            problems.append(f"{_quoted(french)} {_is(french)} French: the model reads English and writes French.")
        if problems:
            problems.append("This is not a sentence the grammar makes, so there is no right French to compare with.")
        elif right is None:
            problems += ["Every word is in the model's vocabulary, but this is not a sentence its grammar makes.",
                         _parse(words)[1]]
        return SourceCheck(unknown, right, tuple(problems))
    numbers = [w for w in unknown if all(c in DIGITS for c in w)]
    others = [w for w in unknown if w not in numbers]
    if numbers:
        kind = "a two-digit number" if len(numbers) == 1 and len(numbers[0]) == 2 else \
            f"a number of {len(numbers[0])} digits" if len(numbers) == 1 else "numbers of more than one digit"
        problems.append(f"{_quoted(numbers)} {_is(numbers)} {kind}: the model reads one digit at a time, "
                        f"separated by spaces (“{' '.join(numbers[0])}”).")
    if others:
        problems.append(f"{_quoted(others)} {_is(others)} not {'a digit' if len(others) == 1 else 'digits'}: "
                        "the model reads only the digits 0 to 9, separated by spaces.")
    if not problems and lengths and not lengths[0] <= len(words) <= lengths[1]:
        problems.append(f"{len(words)} digit{'s' * (len(words) != 1)}: the model was trained on lists of "
                        f"{lengths[0]} to {lengths[1]} digits.")
    return SourceCheck(unknown, right, tuple(problems))


# --- tokens -------------------------------------------------------------------------------------------------

def tokenizer_for(task: str) -> WordTokenizer:
    """One word vocabulary for source and target: <unk> 0, <pad> 1, <bos> 2, <eos> 3, then every word."""
    if task == "translate":
        words = _english_words()
        words |= {w for n in NOUNS for w in (n.french, n.french_plural)}
        words |= {w for a in ADJECTIVES for w in a.forms}
        words |= {w for v in VERBS for w in (v.french, v.french_plural)}
        words |= set(ARTICLES.values())
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
