"""The first page, as a student sees it (Streamlit AppTest, no browser)."""
import json
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from explorer.state import DEFAULT_SENTENCE
from model.checkpoint import load_bundled

APP = str(Path(__file__).resolve().parents[1] / "streamlit_app.py")


@pytest.fixture
def app():
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception
    return at


def chart(at) -> dict:
    return json.loads(at.get("plotly_chart")[0].proto.spec)


def type_sentence(at, text: str) -> AppTest:
    at.text_input(key="sentence").set_value(text).run()
    assert not at.exception
    return at


def test_default_sentence_shows_its_tokens_and_the_models_real_top_five(app):
    table = app.dataframe[0].value
    assert list(table["token"]) == DEFAULT_SENTENCE.split()
    bundle = load_bundled("tinytales")
    assert list(table["id"]) == bundle.tokenizer.encode(DEFAULT_SENTENCE)
    logits = bundle.model.run(bundle.tokenizer.encode(DEFAULT_SENTENCE))["logits"][0, -1]
    probs = logits.softmax(-1)
    top = probs.topk(5)
    bars = chart(app)["data"][0]
    assert bars["y"] == [bundle.tokenizer.vocab[i] for i in top.indices.tolist()][::-1]
    assert bars["x"] == pytest.approx(top.values.tolist()[::-1], abs=1e-6)
    assert bars["y"][-1] == "."       # after "... because it was tired" the sentence ends


def test_empty_sentence_gets_a_friendly_prompt_not_an_error(app):
    type_sentence(app, "   ")
    assert "Type a sentence first" in app.info[0].value
    assert not app.get("plotly_chart")


def test_html_is_shown_as_text_and_unknown_words_are_flagged(app):
    type_sentence(app, "<script>alert(1)</script> the cat")
    tokens = list(app.dataframe[0].value["token"])
    assert "⚠ script" in tokens and "<" in "".join(tokens)
    assert any("not in the model's vocabulary" in w.value for w in app.warning)


def test_long_text_is_cut_to_the_context_with_a_notice(app):
    type_sentence(app, "the cat sat on the mat . " * 20)
    assert len(app.dataframe[0].value) == load_bundled("tinytales").model.cfg.max_len
    assert any("only the last 32 tokens are used" in w.value for w in app.warning)


def test_roses_model_continues_its_poem(app):
    app.selectbox(key="model").set_value("roses").run()
    type_sentence(app, "roses are red violets are")
    assert chart(app)["data"][0]["y"][-1] == "blue"
