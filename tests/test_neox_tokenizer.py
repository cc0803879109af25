"""Pythia's tokenizer (GPT-NeoX-20B's) read by model.tokenizers.load_tokenizer_json: text normalised to Unicode NFC
first, and 23 added tokens that are not special (runs of 24 down to 2 spaces, after the BPE vocabulary) found in
the text before the merges run. Every id and every decoded text is checked against the `tokenizers` library's own
reading of the same file (a test-only reference here), on a file trained here in Pythia's layout; and GPT-2's file
still reads as it did."""
import json
import tempfile
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer

from gpt2_support import real_gpt2_tokenizer_json
from model.pretrained import fit_vocab, neox_config
from model.tokenizers import START, load_tokenizer_json
from neox_support import SPACES, SPECIALS, neox_style_tokenizer_text

CODE = "def add(a, b):\n    if a:\n        return a + b\n\treturn b\n\n\nclass Box:\n    pass\n"
CORPUS = ("Paris is the capital of France. The quick brown fox jumps over the lazy dog, 12 times in 2024! "
          "Café, naïve, résumé, Ångström, Straße, ñandú. 東京は日本の首都です。你好，世界。 مرحبا بالعالم "
          "🙂🍕👩‍👩‍👧 " + CODE) * 30

BATTERY = [
    "The quick brown fox jumps over the lazy dog.",                              # plain English
    "Paris is the capital of France, and in 2024 it had 2,102,650 people.",
    *(" " * n for n in range(1, 31)),                                             # runs of 1 to 30 spaces alone
    *("a" + " " * n + "b" for n in range(2, 31)),                                 # ... between words
    "   leading", "trailing   ", "  both  ends  ", " one", "x ", "  \n  ", "a  \tb", "\t\tx", "\n\n\n",
    "word\n    indented\n\tand tabbed\r\n", " " * 25 + "x" + " " * 48,
    "cafe\u0301", "caf\u00e9", "e\u0301", "A\u030a", "\u212b", "n\u0303and\u00fa", "\u1100\u1161\u11a8",  # NFC
    "o\u0308\u0301 a\u0323\u0302", "\ufb01 ligature (NFC keeps it)", "\u00a0nbsp\u2003em space",
    "🙂🍕👩‍👩‍👧 ok", "👍🏽 🇫🇷", "東京は日本の首都です", "你好，世界", "مرحبا بالعالم",
    "0123456789 3.14159 1,000,000 12+30=42",
    "<|endoftext|>", "<|endoftext|>Hi", "a<|endoftext|>b", "<|endoftext|>   x", "x<|padding|>  <|endoftext|>",
    CODE, "if x:\n        y = [1,  2,   3]\n            return y  # done\n",
    "", "\x00\x07 control \x1b",
]


@pytest.fixture(scope="module")
def pythia_format() -> str:
    return neox_style_tokenizer_text(vocab_size=900, nfc=True, corpus=CORPUS)


@pytest.fixture(scope="module")
def pair(pythia_format):
    """(ours, the library's) on the same Pythia-format file."""
    return load_tokenizer_json_text(pythia_format), HFTokenizer.from_str(pythia_format)


def load_tokenizer_json_text(text: str):
    """load_tokenizer_json on `text` written to a temporary file."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "tokenizer.json"
        path.write_text(text, encoding="utf-8")
        return load_tokenizer_json(path)


def test_the_file_is_in_pythias_layout(pythia_format):
    spec = json.loads(pythia_format)
    bpe = len(spec["model"]["vocab"])
    assert spec["normalizer"] == {"type": "NFC"}
    assert [(t["id"], t["content"], t["special"]) for t in spec["added_tokens"]] == \
        [(0, SPECIALS[0], True), (1, SPECIALS[1], True)] + [(bpe + i, s, False) for i, s in enumerate(SPACES)]
    assert SPACES[0] == " " * 24 and SPACES[-1] == " " * 2 and len(SPACES) == 23


@pytest.mark.parametrize("text", BATTERY)
def test_ids_and_decoded_text_are_the_librarys(pair, text):
    ours, theirs = pair
    ids = theirs.encode(text).ids
    assert ours.encode(text) == ids
    assert [p.id for p in ours.pieces(text)] == ids
    assert ours.decode(ids) == theirs.decode(ids, skip_special_tokens=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*" \t\n ab東🙂0", "\u0301", "e\u0301", "<|endoftext|>", " " * 7]),
                max_size=40).map("".join))
def test_any_mix_of_spaces_accents_and_specials_gives_the_librarys_ids(pair, text):
    ours, theirs = pair
    assert ours.encode(text) == theirs.encode(text).ids
    assert ours.decode(ours.encode(text)) == theirs.decode(theirs.encode(text).ids, skip_special_tokens=False)


@pytest.mark.parametrize("text", ["cafe\u0301 ne\u0301e", "A\u030angstro\u0308m", "\u212b", "e\u0301\n\t"])
def test_text_comes_back_in_nfc(pair, text):
    ours, _ = pair
    assert ours.decode(ours.encode(text)) == unicodedata.normalize("NFC", text) != text
    assert ours.encode(text) == ours.encode(unicodedata.normalize("NFC", text))


def test_runs_of_spaces_are_their_added_tokens_and_show_as_spaces(pair):
    ours, theirs = pair
    first = ours.vocab_size - len(SPACES)
    assert ours.vocab_size == theirs.get_vocab_size() == first + 23
    assert ours.vocab[first:] == list(SPACES) and ours.vocab[:2] == SPECIALS
    for n in range(2, 25):
        assert ours.encode(" " * n) == [first + 24 - n]                     # 24 spaces first, 2 spaces last
    pieces = ours.pieces("a" + " " * 30 + "b")                               # the longest run first, then the rest
    assert [p.text for p in pieces] == ["a", " " * 24, " " * 6, "b"] and not any(p.unknown for p in pieces)
    assert "".join(p.text for p in ours.pieces(CODE)) == CODE


def test_pythias_real_sizes_50254_bpe_tokens_then_spaces_up_to_50276(tmp_path):
    """Pythia: BPE ids 0 to 50253 (0 and 1 its specials), runs of spaces 50254 to 50276, 50,277 tokens in all, and
    weights with 50,304 rows, which the loader cuts to the tokenizer's size."""
    tok = load_tokenizer_json_text(neox_style_tokenizer_text(vocab_size=50_277, nfc=True, corpus=CORPUS))
    assert tok.vocab_size == 50_277 and tok.vocab[50_254] == " " * 24 and tok.vocab[50_276] == " " * 2
    assert tok.encode(" " * 24) == [50_254] and tok.encode("a  b")[1] == 50_276 and tok.encode(START) == [0]
    real = {"model_type": "gpt_neox", "vocab_size": 50_304, "hidden_size": 512, "num_attention_heads": 8,
            "num_hidden_layers": 6, "intermediate_size": 2048, "max_position_embeddings": 2048, "rotary_pct": 0.25,
            "rotary_emb_base": 10_000, "use_parallel_residual": True, "hidden_act": "gelu", "layer_norm_eps": 1e-5,
            "tie_word_embeddings": False}
    assert fit_vocab(neox_config(real), tok.vocab_size, "gpt_neox").vocab_size == 50_277


@pytest.mark.parametrize("change", [
    lambda spec: spec.update(normalizer={"type": "NFKC"}),
    lambda spec: spec.update(normalizer={"type": "Lowercase"}),
    lambda spec: spec["added_tokens"][-1].update(lstrip=True),
    lambda spec: spec["added_tokens"][-1].update(content="Ġthe"),                # a text already in the vocabulary
    lambda spec: spec["added_tokens"][-1].update(id=5),                          # an id inside the vocabulary
    lambda spec: spec["added_tokens"][-1].update(special=True),                  # a special outside the vocabulary
], ids=["nfkc", "lowercase", "lstrip", "in-vocab-text", "in-vocab-id", "special-outside"])
def test_what_pythias_file_does_not_do_is_still_refused(pythia_format, change):
    spec = json.loads(pythia_format)
    assert "Ġthe" in spec["model"]["vocab"]
    change(spec)
    with pytest.raises(ValueError, match="plain byte-level BPE"):
        load_tokenizer_json_text(json.dumps(spec))


# --- GPT-2's file reads as before ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gpt2_pair(tmp_path_factory):
    path = real_gpt2_tokenizer_json(tmp_path_factory.mktemp("gpt2") / "tokenizer.json")
    return load_tokenizer_json(path), HFTokenizer.from_file(str(path))


@pytest.mark.parametrize("text", BATTERY)
def test_gpt2_still_gives_the_librarys_ids_with_no_normalising_and_no_added_spaces(gpt2_pair, text):
    ours, theirs = gpt2_pair
    assert ours.encode(text) == theirs.encode(text).ids
    assert ours.decode(ours.encode(text)) == text                             # exactly, combining accents too


def test_gpt2_has_no_added_spaces_and_does_not_normalise(gpt2_pair):
    ours, _ = gpt2_pair
    assert not ours.nfc and ours.vocab_size == 50_257 and ours.vocab[-1] == START
    assert ours.encode("cafe\u0301") != ours.encode("caf\u00e9")
    assert [p.text for p in ours.pieces("a    b")] == ["a", " ", " ", " ", " b"]  # GPT-2's own split of a run
