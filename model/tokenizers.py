"""Tokenizers: how text becomes the list of numbers a model reads.

Three ways to cut text into tokens, behind one small interface:
  word  one token per word or punctuation mark; unseen words become <unk>
  char  one token per character; unseen characters become <unk>
  bpe   byte-level Byte Pair Encoding (GPT-2 style): start from the bytes of the text and
        merge the most frequent neighbouring pair, again and again. Every byte is in the
        vocabulary, so nothing is ever unknown and any text comes back exactly (after Unicode
        NFC, for a tokenizer that normalises first, as Pythia's).

Every tokenizer has:
  encode(text) -> ids      decode(ids) -> text      pieces(text) -> one Piece per id
  vocab (index = id)       vocab_size               to_dict() / tokenizer_from_dict(d)
"""
import codecs
import functools
import json
import operator
import re
import unicodedata
from typing import Iterable, NamedTuple

from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

UNK = "<unk>"
PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"     # tokens 1, 2 and 3 of an encoder-decoder's vocabulary
START = "<|endoftext|>"       # GPT-2's separator between documents, so also what it saw before each one


class Piece(NamedTuple):
    """One token as a student sees it: the text it covers, its id, and whether it is <unk>."""
    text: str
    id: int
    unknown: bool


class Tokenizer:
    """The shared interface. Subclasses set _vocab and fill in pieces, decode and to_dict."""
    kind = ""
    unk_id: int | None = None  # id of <unk>, or None when nothing can be unknown
    _vocab: list[str]

    def encode(self, text: str) -> list[int]:
        """Text -> token ids. Empty text gives []."""
        return [p.id for p in self.pieces(text)]

    def decode(self, ids: list[int]) -> str:
        raise NotImplementedError

    def pieces(self, text: str) -> list[Piece]:
        raise NotImplementedError

    @property
    def vocab(self) -> list[str]:
        """Every token's text; the index is the id."""
        return list(self._vocab)

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    def to_dict(self) -> dict:
        raise NotImplementedError

    def save(self, path) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f)  # ASCII escapes, so even odd characters survive

    def _check_ids(self, ids) -> list[int]:
        """Refuse ids that are not in the vocabulary (rather than silently dropping them)."""
        out, n = [], self.vocab_size
        for i in ids:
            try:
                i = operator.index(i)  # accepts numpy and torch integers too
            except TypeError:
                raise ValueError(f"token ids must be whole numbers, got {i!r}") from None
            if not 0 <= i < n:
                raise ValueError(f"token id {i} is not in the vocabulary (ids run from 0 to {n - 1})")
            out.append(i)
        return out

    def __repr__(self):
        return f"{type(self).__name__}(vocab_size={self.vocab_size})"


class _ListTokenizer(Tokenizer):
    """Word and char tokenizers: a fixed list of strings with <unk> at id 0."""
    unk_id = 0
    separator = ""  # what decode puts between tokens

    def __init__(self, vocab: list[str]):
        if not isinstance(vocab, list) or not vocab or vocab[0] != UNK:
            raise ValueError(f"a {self.kind} vocabulary must be a list of strings starting with {UNK!r}")
        for entry in vocab[1:]:
            if not isinstance(entry, str) or not self._valid_entry(entry):
                raise ValueError(f"{entry!r} cannot be a token of a {self.kind} tokenizer")
        if len(set(vocab)) != len(vocab):
            raise ValueError(f"the {self.kind} vocabulary lists a token twice")
        self._vocab = list(vocab)
        self._ids = {s: i for i, s in enumerate(vocab)}

    def _split(self, text: str) -> list[tuple[str, str]]:
        """Cut text into (surface text, vocabulary key) pairs."""
        raise NotImplementedError

    def _valid_entry(self, entry: str) -> bool:
        raise NotImplementedError

    def pieces(self, text: str) -> list[Piece]:
        out = []
        for surface, key in self._split(text):
            i = self._ids.get(key, self.unk_id)
            out.append(Piece(surface, i, i == self.unk_id))
        return out

    def decode(self, ids: list[int]) -> str:
        """Join the tokens' strings; <unk> comes back as the text '<unk>'."""
        return self.separator.join(self._vocab[i] for i in self._check_ids(ids))

    def to_dict(self) -> dict:
        return {"kind": self.kind, "vocab": list(self._vocab)}


# A word is a run of letters/digits/underscores in any script; any other non-space
# character (punctuation, symbols, emoji) is a token on its own.
WORD_RE = re.compile(r"\w+|[^\w\s]")


class WordTokenizer(_ListTokenizer):
    """Lowercased words and single punctuation marks.

    Decode rule: tokens are joined by single spaces, punctuation included
    ("the cat sat . it was tired ."), the same format as the bundled corpora.
    So decode(encode(t)) == normalise(t) whenever every word is known.
    """
    kind = "word"
    separator = " "

    @staticmethod
    def split(text: str) -> list[str]:
        """The lowercased tokens of text: what encode looks up in the vocabulary."""
        return [m.group().lower() for m in WORD_RE.finditer(text)]

    @classmethod
    def from_texts(cls, texts: Iterable[str], extra_words: Iterable[str] = (),
                   max_words: int | None = None) -> "WordTokenizer":
        """Vocabulary = <unk>, then every word seen (or the max_words most frequent), sorted."""
        texts = [texts] if isinstance(texts, str) else texts
        counts = {}
        for text in texts:
            for w in cls.split(text):
                counts[w] = counts.get(w, 0) + 1
        words = sorted(counts, key=lambda w: (-counts[w], w))[:max_words]
        words = set(words) | {w for extra in extra_words for w in cls.split(extra)}
        return cls([UNK] + sorted(words - {UNK}))

    def _split(self, text):
        return [(m.group(), m.group().lower()) for m in WORD_RE.finditer(text)]

    def _valid_entry(self, entry):
        return entry != "" and not any(c.isspace() for c in entry)


class CharTokenizer(_ListTokenizer):
    """One token per Unicode character (code point). Decode joins them with nothing between."""
    kind = "char"

    @classmethod
    def from_texts(cls, texts: Iterable[str], extra_chars: str = "") -> "CharTokenizer":
        """Vocabulary = <unk>, then every character seen, sorted by code point."""
        texts = [texts] if isinstance(texts, str) else texts
        chars = set(extra_chars)
        for text in texts:
            chars.update(text)
        return cls([UNK] + sorted(chars))

    def _split(self, text):
        return [(c, c) for c in text]

    def _valid_entry(self, entry):
        return len(entry) == 1


# --- byte-level BPE --------------------------------------------------------------------

def _byte_alphabet() -> dict[str, int]:
    """GPT-2's byte-level alphabet: each of the 256 bytes is shown as one printable character
    (a space is 'Ġ', a newline 'Ċ'). Returns character -> byte."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


BYTE_OF = _byte_alphabet()

# Bytes that are not a whole UTF-8 character are shown as <0xF0>.
codecs.register_error("show_bytes", lambda e: ("".join(f"<0x{b:02X}>" for b in e.object[e.start:e.end]), e.end))

# A fixed sample every loaded BPE tokenizer must give back exactly.
_ROUND_TRIP_CHECK = "Hello, world! 🙂 你好 مرحبا e\u0301\n\t"


class BPETokenizer(Tokenizer):
    """Byte-level BPE trained with Hugging Face `tokenizers`.

    vocab and pieces show each token's surface text (" the", or "<0xF0>" for part of a
    character); merges and replay use the library's byte alphabet ("Ġthe"), and
    token_text turns one into the other. A loaded tokenizer may first normalise text to
    Unicode NFC and may have added tokens after its merges' vocabulary (Pythia's runs of
    2 to 24 spaces), found in the text before the merges run; they show as their own text.
    """
    kind = "bpe"

    def __init__(self, hf: HFTokenizer):
        self._hf = hf
        ids = hf.get_vocab()
        self._tokens = sorted(ids, key=ids.get)  # byte-alphabet strings, index = id
        if [ids[t] for t in self._tokens] != list(range(len(ids))):
            raise ValueError("the BPE vocabulary ids must run 0, 1, 2, ... without gaps")
        self._vocab = [self.token_text(t) for t in self._tokens]
        spec = json.loads(hf.to_str())
        self.nfc = (spec.get("normalizer") or {}).get("type") == "NFC"   # text is NFC-normalised before the split
        model = spec["model"]
        self.merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
        self._rank = {pair: r for r, pair in enumerate(self.merges)}

    @classmethod
    def from_texts(cls, texts: Iterable[str], vocab_size: int = 512, min_frequency: int = 2) -> "BPETokenizer":
        """Learn up to vocab_size - 256 merges from texts (fewer if the texts run out of pairs)."""
        if vocab_size < 256:
            raise ValueError("a byte-level BPE vocabulary needs at least 256 tokens, one per byte")
        texts = [texts] if isinstance(texts, str) else texts
        hf = HFTokenizer(models.BPE())
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        hf.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        hf.train_from_iterator((_clean(t) for t in texts), trainer)
        return cls(hf)

    @staticmethod
    def token_text(token: str) -> str:
        """Byte-alphabet token -> the text it covers: 'Ġthe' -> ' the', 'ðŁ' -> '<0xF0><0x9F>'.
        A token with a character outside the byte alphabet (an added token such as Pythia's '   ')
        is its own text, as the library's decoder reads it."""
        if not all(c in BYTE_OF for c in token):
            return token
        return bytes(BYTE_OF[c] for c in token).decode("utf-8", errors="show_bytes")

    def encode(self, text: str) -> list[int]:
        return self._hf.encode(_clean(text)).ids

    def decode(self, ids: list[int]) -> str:
        return self._hf.decode(self._check_ids(ids), skip_special_tokens=False)

    def pieces(self, text: str) -> list[Piece]:
        enc = self._hf.encode(_clean(text))
        return [Piece(self.token_text(t), i, False) for t, i in zip(enc.tokens, enc.ids)]

    def replay(self, word: str) -> list[list[str]]:
        """The merge-by-merge history of one word, in the byte alphabet.

        Step 0 is the word's bytes. Each later step applies the lowest-ranked merge that
        fits anywhere, so the last step is the final tokens. Text with several words is
        split the way the tokenizer splits it first, and merges never cross that split.
        (Added tokens, such as Pythia's runs of spaces, are not merges and are not shown here.)
        """
        text = unicodedata.normalize("NFC", _clean(word)) if self.nfc else _clean(word)
        words = [list(w) for w, _ in self._hf.pre_tokenizer.pre_tokenize_str(text)]
        steps = [sum(words, [])]
        while True:
            # 1) find the best-ranked pair of neighbours in any word
            best = min(((self._rank[pair], w, j) for w, syms in enumerate(words)
                        for j, pair in enumerate(zip(syms, syms[1:])) if pair in self._rank), default=None)
            if best is None:
                return steps
            # 2) merge it and record the symbols
            _, w, j = best
            words[w][j:j + 2] = [words[w][j] + words[w][j + 1]]
            steps.append(sum(words, []))

    def to_dict(self) -> dict:
        return {"kind": self.kind, "tokenizer_json": self._hf.to_str()}


def _clean(text: str) -> str:
    """Swap lone surrogates (not real Unicode, cannot be UTF-8 encoded) for '\ufffd'."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def _bpe_from_json(tokenizer_json) -> BPETokenizer:
    """Rebuild a BPETokenizer from the library's JSON, checking it is the kind we train."""
    if not isinstance(tokenizer_json, str):
        raise ValueError("tokenizer_json must be a string holding the Hugging Face tokenizer JSON")
    try:
        spec = json.loads(tokenizer_json)
        hf = HFTokenizer.from_str(tokenizer_json)
    except Exception as e:  # the library raises its own exception types
        raise ValueError(f"tokenizer_json is not a valid Hugging Face tokenizer: {e}") from None
    model, pre, dec = spec.get("model") or {}, spec.get("pre_tokenizer") or {}, spec.get("decoder") or {}
    post = spec.get("post_processor") or {"type": "ByteLevel"}
    if model.get("type") != "BPE" or model.get("dropout") or not _byte_level_split(pre) \
            or dec.get("type") != "ByteLevel" or spec.get("normalizer") not in (None, {"type": "NFC"}) \
            or post.get("type") != "ByteLevel" or not _plain_added_tokens(spec, model):
        raise ValueError("tokenizer_json must be a plain byte-level BPE tokenizer (BPE model, ByteLevel "
                         "pre-tokenizer (after one splitting digits, as SmolLM2's), decoder and post-processor, "
                         "no normalizer but NFC (Pythia's), special tokens only from its vocabulary, other added "
                         "tokens (Pythia's runs of spaces) only after it)")
    if not set(BYTE_OF) <= set(hf.get_vocab()):
        raise ValueError("the BPE vocabulary must contain all 256 bytes")
    tok = BPETokenizer(hf)
    expected = unicodedata.normalize("NFC", _ROUND_TRIP_CHECK) if tok.nfc else _ROUND_TRIP_CHECK
    if tok.decode(tok.encode(_ROUND_TRIP_CHECK)) != expected:
        raise ValueError("this BPE tokenizer does not give text back exactly")
    return tok


def _byte_level_split(pre: dict) -> bool:
    """Whether a pre-tokenizer cuts text as GPT-2's does (ByteLevel with its word pattern, no added space),
    optionally after cutting every digit off on its own first (SmolLM2's: Digits, then ByteLevel)."""
    steps = (pre.get("pretokenizers") or []) if pre.get("type") == "Sequence" else [pre]
    if len(steps) == 2 and steps[0] == {"type": "Digits", "individual_digits": True}:
        steps = steps[1:]
    return len(steps) == 1 and isinstance(steps[0], dict) and steps[0].get("type") == "ByteLevel" \
        and not steps[0].get("add_prefix_space") and steps[0].get("use_regex", True)


def _plain_added_tokens(spec: dict, model: dict) -> bool:
    """Whether every added token is either a special token already in the vocabulary (GPT-2's <|endoftext|>,
    Pythia's <|endoftext|> and <|padding|>) or a plain piece of text with an id past the vocabulary's (Pythia's
    runs of 2 to 24 spaces, ids 50254 to 50276), which takes in no neighbouring space and may sit inside a word."""
    vocab = model.get("vocab") or {}
    added = spec.get("added_tokens") or []
    if not all(isinstance(t, dict) for t in added):
        return False
    return all(vocab.get(t.get("content")) == t.get("id") if t.get("special") else
               isinstance(t.get("content"), str) and t["content"] != "" and t["content"] not in vocab
               and isinstance(t.get("id"), int) and t["id"] >= len(vocab)
               and not (t.get("lstrip") or t.get("rstrip") or t.get("single_word"))
               for t in added)


def load_tokenizer_json(path) -> BPETokenizer:
    """A byte-level BPE tokenizer from a Hugging Face `tokenizer.json` file (GPT-2's, SmolLM2's or Pythia's). The
    same file read again (each of Pythia's training steps ships the same one) is the same tokenizer, built once: a
    tokenizer is only ever read, never changed."""
    try:
        text = open(path, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"the tokenizer file could not be read: {e}") from None
    return _bpe_from_file(text)


@functools.lru_cache(maxsize=4)
def _bpe_from_file(text: str) -> BPETokenizer:
    return _bpe_from_json(text)


TOKENIZERS = {"word": WordTokenizer, "char": CharTokenizer, "bpe": BPETokenizer}
_FIELDS = {"word": {"kind", "vocab"}, "char": {"kind", "vocab"}, "bpe": {"kind", "tokenizer_json"}}


def tokenizer_from_dict(d: dict) -> Tokenizer:
    """Build a tokenizer from to_dict() output, refusing anything malformed (uploads come here)."""
    if not isinstance(d, dict):
        raise ValueError("a tokenizer must be a JSON object")
    kind = d.get("kind")
    if kind not in TOKENIZERS:
        raise ValueError(f"tokenizer kind must be one of {', '.join(TOKENIZERS)}; got {kind!r}")
    missing, unknown = _FIELDS[kind] - set(d), set(d) - _FIELDS[kind]
    if missing:
        raise ValueError(f"missing {kind} tokenizer fields: {', '.join(sorted(missing))}")
    if unknown:
        raise ValueError(f"unknown {kind} tokenizer fields: {', '.join(sorted(unknown))}")
    if kind == "bpe":
        return _bpe_from_json(d["tokenizer_json"])
    return TOKENIZERS[kind](d["vocab"])


def load_tokenizer(path) -> Tokenizer:
    """Read a tokenizer saved with save(path)."""
    with open(path, encoding="utf-8") as f:
        try:
            d = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"the tokenizer file is not valid JSON: {e}") from None
    return tokenizer_from_dict(d)
