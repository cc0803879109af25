"""From typed text to the ids a model reads, including the strange inputs students type."""
import pytest

from model.checkpoint import load_bundled
from model.inputs import prepare_text

TALES = load_bundled("tinytales").tokenizer


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_text_gets_a_friendly_error(text):
    with pytest.raises(ValueError, match="Type a sentence first"):
        prepare_text(TALES, text, 32)


def test_long_text_keeps_the_last_tokens_and_says_so():
    words = [f"{w}" for w in "the cat sat on the mat because it was tired .".split()] * 5   # 55 tokens
    prepared = prepare_text(TALES, " ".join(words), 32)
    assert prepared.ids == TALES.encode(" ".join(words))[-32:]
    assert prepared.dropped == 23
    assert "55 tokens long" in prepared.notices[0] and "last 32" in prepared.notices[0]


def test_unknown_words_and_emoji_are_counted_and_marked():
    prepared = prepare_text(TALES, "the 🐈 sat on the sofa", 32)
    assert [p.unknown for p in prepared.pieces] == [False, True, False, False, False, True]
    assert prepared.unknown == 2 and "2 words are not in" in prepared.notices[0]
    assert prepared.pieces[1].text == "🐈"


def test_a_normal_sentence_has_no_notices():
    prepared = prepare_text(TALES, "the cat sat on the mat because it was tired", 32)
    assert prepared.notices == [] and len(prepared.ids) == 10


def test_a_model_with_a_longer_context_than_is_shown_says_both():
    text = " ".join(["the cat sat on the mat because it was tired ."] * 8)          # 88 tokens
    prepared = prepare_text(TALES, text, 64, context=1024)
    assert prepared.ids == TALES.encode(text)[-64:] and prepared.dropped == 24
    assert "88 tokens long" in prepared.notices[0] and "1,024" in prepared.notices[0]
    assert "last 64" in prepared.notices[0]
    assert prepare_text(TALES, text, 16, context=16).context is None                  # the model's own limit
