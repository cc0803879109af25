"""Every model states its scope (model/scope.py), and the pages say what a model cannot read (issue 20).

A student sees: the words a tiny model does not know, named, with the list of the words it does know; a sentence
it can read offered in the main area; for an encoder-decoder, a "what this model knows" card.
"""
import re

import pytest
import torch

from claims_support import lab_bundle
from conftest import open_page, page_text, type_text
from model import corpora, tasks
from model.checkpoint import Bundle, from_bytes, load_bundled, to_bytes
from model.inputs import prepare_text
from model.scope import KNOWN_DATA, NOT_RECORDED, scope_of, strip_final_punctuation
from explorer.plot import visible


@pytest.mark.parametrize("name", ["tinytales", "roses", "sort", "translate"])
def test_every_bundled_model_states_what_it_was_trained_on_and_the_words_it_reads(name):
    bundle = load_bundled(name)
    scope = scope_of(bundle)
    vocab = bundle.tokenizer.vocab
    assert set(scope.words) == {t for t in vocab if not (t.startswith("<") and t.endswith(">"))}
    assert scope.context == bundle.model.cfg.max_len and scope.unit == "word"
    assert scope.training_data not in ("", NOT_RECORDED)
    if name in ("sort", "translate"):
        assert scope.task == name
        assert scope.training_data == bundle.facts["training_data"]
    else:
        assert scope.task is None and scope.training_data == KNOWN_DATA[name]


def test_a_digit_model_states_the_list_lengths_it_learned():
    scope = scope_of(load_bundled("sort"))
    assert scope.lengths == tuple(load_bundled("sort").facts["lengths"]) == (1, 10)
    assert set(scope.words) == set(tasks.DIGITS)


def test_an_uploaded_model_that_records_nothing_says_so_instead_of_guessing():
    bundle = lab_bundle()
    assert scope_of(bundle).training_data == NOT_RECORDED
    told = Bundle(bundle.model, bundle.tokenizer, {"training_data": "my own poem (12 lines)"})
    again = from_bytes(to_bytes(told))                                   # the facts travel with the file
    assert scope_of(again).training_data == "my own poem (12 lines)"


def test_gpt2_reads_any_text_and_states_its_training_data(tmp_path):
    from gpt2_support import reference_gpt2, write_gpt2_dir
    from model.pretrained import load_pretrained
    scope = scope_of(load_pretrained(write_gpt2_dir(tmp_path, reference_gpt2())))
    assert not scope.words and scope.unit == "token" and scope.context == 64
    assert scope.training_data.startswith("WebText")


@pytest.mark.parametrize("text, expected", [
    ("The Red Cat Sleeps.", ("The Red Cat Sleeps", ".")), ("is it?", ("is it", "?")), ("hi", ("hi", None)),
    (".", (".", None)), ("", ("", None)), ("a b !  ", ("a b", "!")),
])
def test_a_final_mark_is_taken_off_once(text, expected):
    assert strip_final_punctuation(text) == expected


# --- the tiny models name the words they do not know ------------------------------------------------------

def test_the_unknown_words_are_named_and_the_word_list_opens():
    at = open_page("attention")
    type_text(at, "the zebra ate a pizza and the zebra slept")
    prepared = prepare_text(load_bundled("tinytales").tokenizer, "the zebra ate a pizza and the zebra slept", 32)
    unknown = list(dict.fromkeys(p.text for p in prepared.pieces if p.unknown))
    assert unknown == ["zebra", "ate", "pizza", "and"]
    [notice] = [w.value for w in at.warning if "vocabulary" in w.value]
    assert prepared.unknown == 5                                         # "zebra" twice
    assert "5 words are not in the model's vocabulary (“zebra”, “ate”, “pizza” and “and”)" in notice
    words = scope_of(load_bundled("tinytales")).words
    [listing] = [e for e in at.expander if e.label == f"The {len(words)} words tinytales knows"]
    shown = listing.markdown[0].value.split(" · ")
    assert [w.replace("\\", "") for w in shown] == [visible(w) for w in words]
    assert "zebra" not in shown and "cat" in shown


def test_typed_html_in_an_unknown_word_is_shown_as_text():
    at = open_page("home")
    type_text(at, "<script>alert(1)</script>")
    [notice] = [w.value for w in at.warning if "vocabulary" in w.value]
    assert "“\\<”" in notice and "“script”" in notice                     # escaped for Markdown, never HTML


def test_switching_to_an_encoder_decoder_offers_a_source_it_can_read_in_the_main_area():
    at = open_page("encoder-decoder")                                     # the tiny tales sentence
    at.selectbox(key="model").set_value("translate").run()
    offer = at.button(key="use_example")
    assert offer.label.startswith("Use a sentence translate knows")
    assert "use_example" not in [b.key for b in at.sidebar.button]
    offer.click().run()
    v = at.session_state["view"]
    assert v.text == "the small red cat sees the big dog" and v.prepared.unknown == 0
    assert tasks.check_source("translate", v.text).problems == ()
    assert not [b for b in at.button if b.key == "use_example"]


def test_a_final_full_stop_and_capitals_are_read_as_a_student_types_them():
    at = open_page("encoder-decoder", model="translate", text="The Red Cat Sleeps.")
    v = at.session_state["view"]
    assert list(v.ids) == v.bundle.tokenizer.encode("the red cat sleeps") and v.prepared.unknown == 0
    assert "The final “\\.” was left out" in page_text(at) or "The final “.” was left out" in page_text(at)
    written = v.bundle.tokenizer.decode(v.trace["target"][0, 1:].tolist())
    assert written == tasks.translate("the red cat sleeps") == "le chat rouge dort"


def test_the_home_page_says_what_the_model_learned_or_that_its_file_does_not_say():
    at = open_page("home")
    assert f"**tinytales** was trained on {KNOWN_DATA['tinytales']}. It reads at most 32 tokens." in page_text(at)
    at.session_state["trained_models"] = {"upload: mine": lab_bundle()}           # a file that records nothing
    at.run()
    at.selectbox(key="model").set_value("upload: mine").run()
    assert ("**upload\\: mine** does not say what it was trained on (its file records nothing about its training "
            "data). It reads at most 32 tokens.") in page_text(at)
