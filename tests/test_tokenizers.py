"""What a student sees when text becomes tokens."""
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer as HFTokenizer

from model.corpora import ROSES, TINY_TALES_WORDS, tiny_tales
from model.tokenizers import (UNK, BPETokenizer, CharTokenizer, Piece, WordTokenizer, load_tokenizer,
                              tokenizer_from_dict)

OTHER_SCRIPTS = ["🙂👩‍👩‍👧 ok", "你好，世界", "مرحبا بالعالم", "e\u0301 ñ", "Ünïcödé", "a\x00b\x07\x1b\r\n\tc", ""]
TALES = tiny_tales(300, seed=0)


@pytest.fixture(scope="module")
def bpe():
    return BPETokenizer.from_texts([TALES, ROSES * 20, "🙂 你好 مرحبا " * 20], vocab_size=400)


@pytest.fixture(scope="module")
def word():
    return WordTokenizer.from_texts([TALES], extra_words=TINY_TALES_WORDS)


@pytest.fixture(scope="module")
def char():
    return CharTokenizer.from_texts([TALES])


@pytest.fixture(scope="module", params=["word", "char", "bpe"])
def any_tok(request, word, char, bpe):
    return {"word": word, "char": char, "bpe": bpe}[request.param]


# --- the shared interface -------------------------------------------------------------------

def test_kinds(word, char, bpe):
    assert (word.kind, char.kind, bpe.kind) == ("word", "char", "bpe")
    assert (word.unk_id, char.unk_id, bpe.unk_id) == (0, 0, None)
    assert word.vocab[0] == char.vocab[0] == UNK


@pytest.mark.parametrize("text", OTHER_SCRIPTS + ["the cat sat on the mat because it was tired .", "Zebra!!"])
def test_pieces_line_up_with_encode(any_tok, text):
    pieces = any_tok.pieces(text)
    assert all(isinstance(p, Piece) for p in pieces)
    assert [p.id for p in pieces] == any_tok.encode(text)
    assert all(0 <= p.id < any_tok.vocab_size for p in pieces)
    assert [p.unknown for p in pieces] == [p.id == any_tok.unk_id for p in pieces]


def test_empty_text_gives_no_tokens(any_tok):
    assert any_tok.encode("") == [] and any_tok.pieces("") == [] and any_tok.decode([]) == ""


def test_vocab_matches_vocab_size(any_tok):
    assert len(any_tok.vocab) == any_tok.vocab_size


@pytest.mark.parametrize("bad", [[-1], [10**6], ["3"], [1.5]])
def test_decode_refuses_ids_outside_the_vocabulary(any_tok, bad):
    with pytest.raises(ValueError):
        any_tok.decode(bad)


def test_save_and_load_give_identical_encodings(any_tok, tmp_path):
    path = tmp_path / "tok.json"
    any_tok.save(path)
    again = load_tokenizer(path)
    assert type(again) is type(any_tok) and again.vocab == any_tok.vocab
    for text in OTHER_SCRIPTS + [TALES[:500]]:
        assert again.encode(text) == any_tok.encode(text)
    assert json.loads(json.dumps(any_tok.to_dict())) == any_tok.to_dict()


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=40))
def test_never_crashes_on_any_unicode(word, char, bpe, text):
    for tok in (word, char, bpe):
        assert len(tok.pieces(text)) == len(tok.encode(text))
        tok.decode(tok.encode(text))


def test_lone_surrogates_do_not_crash(any_tok):
    assert len(any_tok.encode("a\ud800b")) == len(any_tok.pieces("a\ud800b")) > 0


def test_very_long_text(any_tok):
    text = ("the cat sat on the mat 🙂 " * 5000)
    assert len(any_tok.encode(text)) >= 5000


# --- word -----------------------------------------------------------------------------------

def test_word_splits_words_and_punctuation(word):
    assert word.split("The cat, sat!  Café 🙂") == ["the", "cat", ",", "sat", "!", "café", "🙂"]


def test_word_round_trip_is_the_normalised_text(word):
    assert word.decode(word.encode("The cat sat.  It was TIRED.")) == "the cat sat . it was tired ."
    assert word.decode(word.encode(TALES)) == TALES  # the corpus is already normalised


def test_word_marks_unknown_words_and_keeps_their_surface_text(word):
    pieces = word.pieces("The zebra sat")
    assert pieces == [Piece("The", word.vocab.index("the"), False), Piece("zebra", 0, True),
                      Piece("sat", word.vocab.index("sat"), False)]
    assert word.decode(word.encode("the zebra")) == "the <unk>"


def test_word_vocab_is_sorted_and_deterministic():
    a = WordTokenizer.from_texts(["b a c a", "d"])
    assert a.vocab == [UNK, "a", "b", "c", "d"]
    assert WordTokenizer.from_texts(["d", "b a c a"]).vocab == a.vocab
    assert WordTokenizer.from_texts(["b a c a a b"], max_words=2).vocab == [UNK, "a", "b"]


# --- char -----------------------------------------------------------------------------------

def test_char_round_trip_and_unknowns():
    tok = CharTokenizer.from_texts(OTHER_SCRIPTS)
    for text in OTHER_SCRIPTS:
        assert tok.decode(tok.encode(text)) == text
    assert [p.unknown for p in tok.pieces("a😀")] == [False, True]
    assert tok.pieces("😀")[0].text == "😀"


def test_char_is_one_token_per_code_point(char):
    assert len(char.encode("e\u0301🙂x")) == 4  # e, combining accent, emoji, x


# --- bpe ------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", OTHER_SCRIPTS + ["  two  spaces ", "\n\n", "zzzz qqqq", "x" * 3000])
def test_bpe_round_trip_is_exact(bpe, text):
    assert bpe.decode(bpe.encode(text)) == text
    assert not any(p.unknown for p in bpe.pieces(text))


@settings(max_examples=100, deadline=None)
@given(text=st.text())
def test_bpe_round_trip_any_text(bpe, text):
    assert bpe.decode(bpe.encode(text)) == text


def test_bpe_pieces_show_surface_text(bpe):
    text = "the cat sat on the mat"
    assert "".join(p.text for p in bpe.pieces(text)) == text
    assert any(p.text.startswith(" ") for p in bpe.pieces(text))  # "Ġ" shown as a real space


def test_bpe_partial_characters_show_their_bytes():
    tok = BPETokenizer.from_texts(["abc"], vocab_size=256)  # no merges: every byte is its own token
    assert [p.text for p in tok.pieces("a🙂")] == ["a", "<0xF0>", "<0x9F>", "<0x99>", "<0x82>"]


def test_bpe_training_is_deterministic(bpe):
    again = BPETokenizer.from_texts([TALES, ROSES * 20, "🙂 你好 مرحبا " * 20], vocab_size=400)
    assert again.to_dict() == bpe.to_dict()


def test_bpe_learns_merges_in_rank_order(bpe):
    assert len(bpe.merges) == bpe.vocab_size - 256
    assert all(isinstance(a, str) and isinstance(b, str) for a, b in bpe.merges)
    assert ("Ġ", "t") in bpe.merges  # " t" (as in " the") is among the most common pairs


def test_bpe_replay_ends_at_the_librarys_tokens(bpe):
    hf = HFTokenizer.from_str(bpe.to_dict()["tokenizer_json"])
    words = set(TALES.split()[:400]) | {" " + w for w in TINY_TALES_WORDS} | {
        "unbelievable", " 🙂", "你好", " مرحبا", "roses are red", "a  b", ""}
    for w in words:
        steps = bpe.replay(w)
        assert steps[-1] == hf.encode(w).tokens, w
        assert "".join(steps[0]) == "".join(steps[-1])
        assert all(len(b) == len(a) - 1 for a, b in zip(steps, steps[1:]))  # one merge per step


def test_bpe_replay_starts_from_bytes(bpe):
    steps = bpe.replay(" 🙂")
    assert steps[0] == ["Ġ", "ð", "Ł", "Ļ", "Ĥ"]  # the 5 bytes in the byte alphabet
    assert [bpe.token_text(t) for t in steps[0]][:2] == [" ", "<0xF0>"]


# --- uploads --------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [
    [], "word", {}, {"vocab": [UNK]}, {"kind": "sentencepiece", "vocab": [UNK]},
    {"kind": "word", "vocab": [UNK], "extra": 1}, {"kind": "word", "vocab": ["cat"]},
    {"kind": "word", "vocab": [UNK, "a b"]}, {"kind": "word", "vocab": [UNK, "a", "a"]},
    {"kind": "word", "vocab": [UNK, 3]}, {"kind": "word", "vocab": "<unk>"},
    {"kind": "char", "vocab": [UNK, "ab"]}, {"kind": "char", "vocab": []},
    {"kind": "bpe"}, {"kind": "bpe", "tokenizer_json": 5}, {"kind": "bpe", "tokenizer_json": "{not json"},
    {"kind": "bpe", "tokenizer_json": "{}"},
])
def test_from_dict_refuses_bad_input(bad):
    with pytest.raises(ValueError):
        tokenizer_from_dict(bad)


def test_from_dict_refuses_a_bpe_that_is_not_byte_level(bpe):
    spec = json.loads(bpe.to_dict()["tokenizer_json"])
    spec["pre_tokenizer"] = {"type": "Whitespace"}
    with pytest.raises(ValueError, match="byte-level"):
        tokenizer_from_dict({"kind": "bpe", "tokenizer_json": json.dumps(spec)})
    spec = json.loads(bpe.to_dict()["tokenizer_json"])
    del spec["model"]["vocab"]["Ġ"]
    with pytest.raises(ValueError):
        tokenizer_from_dict({"kind": "bpe", "tokenizer_json": json.dumps(spec)})


def test_load_refuses_a_file_that_is_not_json(tmp_path):
    path = tmp_path / "tok.json"
    path.write_text("hello")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_tokenizer(path)
