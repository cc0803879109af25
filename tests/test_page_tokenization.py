"""Step 1, tokenization: what a student sees when the sentence is cut into tokens and looked up."""
import html
from collections import Counter
from functools import lru_cache

import numpy as np
import torch

from conftest import (assert_each_section_draws_only_its_charts, decode, figure_titled, open_page, page_text,
                      show_section, type_text)
from explorer.steps import tokenization
from explorer.app.state import DEFAULT_SENTENCE, View
from model.checkpoint import Bundle, load_bundled
from model.config import ModelConfig
from model.inputs import prepare_text
from model.presets import corpus_texts
from model.tokenizers import BPETokenizer, CharTokenizer
from model.transformer import TransformerLM


@lru_cache
def tinytales():
    return load_bundled("tinytales")


@lru_cache
def tales_text():
    return corpus_texts("tinytales")[0]


@lru_cache
def tales_bpe():
    return BPETokenizer.from_texts([tales_text()], vocab_size=tokenization.BPE_VOCAB_SIZE)


def trace_named(figure, name):
    return next(t for t in figure["data"] if t.get("name") == name)


def texts(figure, name="tokens", raw=False):
    """The texts of one trace of a chips figure, as the student reads them (raw: as sent to Plotly)."""
    sent = [str(t) for t in decode(trace_named(figure, name)["text"])]
    return sent if raw else [html.unescape(t) for t in sent]


def show(at, section: str):
    return show_section(at, "tokenization", section)


def test_the_sentence_is_shown_as_tokens_with_their_real_ids():
    at = open_page("tokenization")
    assert not at.exception
    pieces = tinytales().tokenizer.pieces(DEFAULT_SENTENCE)
    figure = figure_titled(at, f"Your sentence as {len(pieces)} tokens")
    assert texts(figure) == [p.text for p in pieces]
    assert texts(figure, "subs") == [str(p.id) for p in pieces]
    assert texts(figure, "subs")[1] == str(tinytales().tokenizer.vocab.index("cat"))
    text = page_text(at)
    assert "puzzle pieces" in text and "dictionary" in text and "word tokenizer" in text
    assert "nothing was replaced by `<unk>`" in text


def test_unknown_words_are_orange_and_explained():
    at = open_page("tokenization")
    type_text(at, "the zebra sat on the marmalade")
    figure = figure_titled(at, "Your sentence as 6 tokens")
    assert texts(figure, "subs") == ["117", "0 <unk>", "106", "86", "117", "0 <unk>"]
    unknown_boxes = trace_named(figure, "boxes unknown")
    assert unknown_boxes["line"]["color"] == tokenization.CHIP_COLOURS["unknown"][1]
    assert list(unknown_boxes["x"]).count(None) == 2                              # two orange boxes
    text = page_text(at)
    assert "2 of 6 tokens are unknown" in text and "“zebra”" in text and "“marmalade”" in text
    assert "only knows the words it saw in its training text" in text


def test_word_char_and_bpe_are_compared_with_real_token_counts():
    at = show(open_page("tokenization"), "Three ways to cut")
    sentence = DEFAULT_SENTENCE
    char = CharTokenizer.from_texts([tales_text()])
    words, chars = len(sentence.split()), len(sentence)                         # every letter and space is known
    expected = {"Word": words, "Character": len(char.encode(sentence)), "BPE": len(tales_bpe().encode(sentence))}
    metrics = {m.label.split(" ")[0]: int(m.value) for m in at.metric}
    assert metrics == expected and expected["Character"] == chars
    assert any("★" in m.label and m.label.startswith("Word") for m in at.metric)
    figure = figure_titled(at, "cut three ways")
    labels = texts(figure, "labels")
    assert labels == [f"<b>Word ★</b><br>{words} tokens", f"<b>Character</b><br>{chars} tokens",
                      f"<b>BPE</b><br>{expected['BPE']} tokens"]
    shown = texts(figure)
    assert shown[words:words + chars] == [tokenization.visible(c) for c in sentence]               # the character row
    assert shown[-expected["BPE"]:] == [tokenization.visible(p.text) for p in tales_bpe().pieces(sentence)]
    assert "The model actually reads the **Word** tokens" in page_text(at)


def test_bpe_merges_replay_step_by_step_with_their_ranks():
    at = show(open_page("tokenization"), "BPE merges")
    assert at.selectbox(key="tokenization_word").value == " because"            # the longest word
    history = tales_bpe().replay(" because")
    last = len(history) - 1
    assert at.slider(key="tokenization_step").value == last
    figure = figure_titled(at, f"BPE merges, step {last} of {last}")
    assert texts(figure)[-1] == " because".replace(" ", "␣")                    # one token at the end
    at.slider(key="tokenization_step").set_value(0).run()
    assert "starts as its 8 bytes" in page_text(at)
    assert texts(figure_titled(at, f"step 0 of {last}")) == ["␣", "b", "e", "c", "a", "u", "s", "e"]
    at.slider(key="tokenization_step").set_value(1).run()
    rank = tales_bpe().merges.index(("Ġ", "b"))
    assert f"merge “␣” + “b” → “␣b”. It is merge **#{rank}**" in page_text(at)
    assert f"merge #{rank}" in texts(figure_titled(at, f"step 1 of {last}"), "subs")


def test_choosing_another_word_replays_that_word():
    at = show(open_page("tokenization"), "BPE merges")
    type_text(at, "Elephants sat")
    assert at.selectbox(key="tokenization_word").value == "Elephants"           # first word: no space before
    at.selectbox(key="tokenization_word").set_value(" sat").run()
    steps = tokenization.merge_steps(tales_bpe(), " sat")
    assert at.slider(key="tokenization_step").value == len(steps) - 1
    assert texts(figure_titled(at, "BPE merges"))[-1] == "␣sat"


def test_the_vocabulary_can_be_searched_and_counts_come_from_the_training_text():
    at = show(open_page("tokenization"), "The vocabulary")
    table = at.dataframe[0].value
    assert len(table) == 133 and list(table.columns) == ["id", "token", "count in training text"]
    at.text_input(key="tokenization_search").set_value("cat").run()
    table = at.dataframe[0].value
    vocab = tinytales().tokenizer.vocab
    assert list(table["token"]) == [t for t in vocab if "cat" in t] == ["cat", "cats"]
    counts = Counter(tales_text().split())
    assert list(table["count in training text"]) == [counts["cat"], counts["cats"]]
    assert list(table["id"]) == [vocab.index("cat"), vocab.index("cats")]
    at.text_input(key="tokenization_search").set_value("zebra").run()
    assert "would be `<unk>`" in page_text(at)


def test_show_the_math_looks_one_word_up():
    at = show(open_page("tokenization"), "The vocabulary")
    type_text(at, "The Cat sat")
    at.selectbox(key="token").set_value(1).run()
    text = page_text(at)
    assert "1. The text of token 1: “Cat”" in text and "Lowercased (the word tokenizer ignores capitals): “cat”" in text
    assert f"found at index **{tinytales().tokenizer.vocab.index('cat')}**" in text
    type_text(at, "the quokka")
    at.selectbox(key="token").set_value(1).run()
    assert "**not found**, so it becomes `<unk>` with **id 0**" in page_text(at)


STRANGE = [
    ("<script>alert(1)</script>", lambda fig: "<" in texts(fig) and "<" not in "".join(texts(fig, raw=True))),
    ("the 🐈 sat", lambda fig: "🐈" in texts(fig)),
    ("quantum zebras juggle marmalade", lambda fig: texts(fig, "subs") == ["0 <unk>"] * 4),
    ("a_b ¿¡ 1234567890 e\u0301", lambda fig: texts(fig) == ["a_b", "¿", "¡", "1234567890", "e", "\u0301"]),
]


def test_strange_sentences_are_shown_as_text():
    at = open_page("tokenization")
    for text, check in STRANGE:
        type_text(at, text)
        assert not at.exception, text
        assert check(figure_titled(at, "Your sentence as")), text
        for section, title in (("Three ways to cut", "three ways"), ("BPE merges", "BPE merges")):
            figure = figure_titled(show(at, section), title)
            assert "<" not in "".join(texts(figure, raw=True) + texts(figure, "subs", raw=True)), text
        show(at, "Your sentence as tokens")


def test_a_long_text_is_compared_in_full_but_drawn_in_part():
    long = ("the cat sat on the mat because it was tired . " * 45)[:2000]
    at = open_page("tokenization")
    type_text(at, long)
    assert not at.exception
    assert figure_titled(at, "Your sentence as 32 tokens")
    show(at, "Three ways to cut")
    metrics = {m.label.split(" ")[0]: int(m.value) for m in at.metric}
    assert metrics["Character"] == 2000
    assert f"+{2000 - tokenization.MAX_CHIPS} more" in texts(figure_titled(at, "three ways"))


def test_roses_compares_against_its_own_poem():
    at = show(open_page("tokenization", model="roses", text="roses are red, violets!"), "Three ways to cut")
    assert not at.exception
    assert at.metric[0].value == "6" and "12 tokens" in page_text(at)
    assert "the roses corpus" in page_text(at)
    show(at, "Your sentence as tokens")
    assert texts(figure_titled(at, "Your sentence as 6"), "subs")[3:] == ["0 <unk>", "10", "0 <unk>"]


def test_presenter_mode_keeps_the_figures_and_enlarges_them():
    at = open_page("tokenization", presenter=1)
    assert not at.exception
    normal = open_page("tokenization")
    big, small = figure_titled(at, "Your sentence as"), figure_titled(normal, "Your sentence as")
    assert big["layout"]["height"] > small["layout"]["height"]
    assert big["layout"]["font"]["size"] > small["layout"]["font"]["size"]


# --- the builders on models that are not bundled -------------------------------------------------

def tiny_view(tokenizer, text, facts=None, **cfg) -> View:
    cfg = ModelConfig(vocab_size=tokenizer.vocab_size, d_model=8, n_heads=2, n_layers=1, d_ff=16, max_len=16, **cfg)
    torch.manual_seed(0)
    bundle = Bundle(TransformerLM(cfg).eval(), tokenizer, facts or {})
    prepared = prepare_text(tokenizer, text, cfg.max_len)
    return View("tiny", bundle, text, False, prepared, bundle.model.run(prepared.ids))


def test_a_model_without_its_training_text_compares_against_its_own_vocabulary():
    char = CharTokenizer.from_texts(["abc cab"])
    v = tiny_view(char, "cab d", facts={"task": "text"})
    tokenizers, source = tokenization.comparison_tokenizers(v.bundle)
    assert tokenizers["char"] is char and "own vocabulary" in source
    assert tokenizers["word"].vocab == ["<unk>", "a", "b", "c"]              # the vocabulary joined as text
    cut = tokenization.comparison_pieces(tokenizers, "cab d")
    assert {k: len(p) for k, p in cut.items()} == {"word": 2, "char": 5, "bpe": len(tokenizers["bpe"].encode("cab d"))}
    figure = tokenization.sentence_figure(v)
    assert char.vocab == ["<unk>", " ", "a", "b", "c"]
    assert texts(figure.to_plotly_json(), "subs") == ["4", "2", "3", "1", "0 <unk>"]
    text, around = tokenization.lookup_math(v, 4)
    assert "**not found**" in text and list(around["id"]) == [0, 1, 2, 3]
    assert "1 of 5 tokens is unknown" in tokenization.unknown_note(v) and "“d”" in tokenization.unknown_note(v)


def test_a_bpe_model_replays_its_own_merges_and_never_has_unknown_tokens():
    bpe = BPETokenizer.from_texts(["the cat sat on the mat " * 20], vocab_size=280)
    v = tiny_view(bpe, "the cats", facts={"corpus": "roses", "seed": 0}, pos="learned", norm="rms")
    tokenizers, _ = tokenization.comparison_tokenizers(v.bundle)
    assert tokenizers["bpe"] is bpe and tokenizers["word"].vocab[1:] == sorted({"roses", "are", "red", "violets",
                                                                                "blue", "sugar", "is", "sweet",
                                                                                "and", "so", "you"})
    assert "no token is ever unknown" in tokenization.unknown_note(v)
    steps = tokenization.merge_steps(bpe, " cats")
    assert steps[0].symbols == [" ", "c", "a", "t", "s"] and steps[-1].symbols[-1] == "s"
    for before, step in zip(steps, steps[1:]):
        assert bpe.merges[step.rank] == tuple("Ġ" if s == " " else s for s in
                                              (step.pair[0].replace(" ", "Ġ"), step.pair[1].replace(" ", "Ġ")))
        assert len(step.symbols) == len(before.symbols) - 1
    text, _ = tokenization.lookup_math(v, 0)
    assert "made by BPE merges" in text


def test_long_words_are_cut_and_long_histories_fold():
    words = tokenization.replay_words("a " + "x" * 200 + " a")
    assert words == ["a", " " + "x" * tokenization.MAX_REPLAY_CHARS, " a"]
    steps = tokenization.merge_steps(tales_bpe(), " " + "because" * 3)
    figure = tokenization.merges_figure(steps, len(steps) - 1).to_plotly_json()
    labels = texts(figure, "labels")
    assert len(labels) <= tokenization.MAX_MERGE_ROWS + 1 and "hidden" in labels[1]
    assert labels[-1].startswith(f"step {len(steps) - 1}")


def test_vocabulary_search_matches_ids_and_visible_spaces():
    table = tokenization.vocabulary_table(tales_bpe(), None, "␣cat")
    assert "␣cat" in list(table["token"]) and "count in training text" not in table
    by_id = tokenization.vocabulary_table(tinytales().tokenizer, np.arange(133), "27")
    assert 27 in list(by_id["id"])


def test_a_word_no_merge_fits_stays_as_bytes_and_the_page_says_whose_merges_they_are():
    steps = tokenization.merge_steps(tales_bpe(), " zebra")
    assert len(steps) == 1 and steps[0].symbols == list(" zebra")
    assert "stays as its **6 single bytes**" in tokenization.merge_caption(steps, 0)
    note = tokenization.merges_note(tales_bpe(), tinytales().tokenizer)
    assert f"+ {len(tales_bpe().merges)} learned merges" in note and "reads word tokens" in note
    assert tokenization.merges_note(tales_bpe(), tales_bpe()).startswith("These are the model's own BPE merges")


def test_each_section_draws_only_its_own_chart_in_both_modes():
    assert_each_section_draws_only_its_charts("tokenization", tokenization.SECTIONS, [1, 1, 1, 0])   # the vocabulary: a table
