"""Property-based tests: whatever a visitor types or puts in the URL, no page breaks.

Hypothesis pushes random Unicode, control characters, very long and HTML-laden sentences and hostile
query parameters through every page (AppTest). No exception, no traceback shown, and the sentence
shown back is exactly the text that was typed.
"""
from hypothesis import HealthCheck, given, settings, strategies as st_

from conftest import open_page, show_section, type_text
from explorer.steps import attention
from explorer.steps import embedding
from explorer.steps import feedforward
from explorer.steps import positions
from explorer.steps import residual
from explorer.steps import tokenization
from explorer.registry import DISCOVER, LAB, STEPS

PAGES = [s.slug for s in STEPS] + [DISCOVER.slug, LAB.slug]
SECTIONS = {"tokenization": tokenization.SECTIONS, "embedding": embedding.SECTIONS,       # the pages in tabs
            "positions": positions.SECTIONS, "attention": attention.SECTIONS,
            "feedforward": feedforward.SECTIONS, "residual": residual.SECTIONS}
HTML = st_.sampled_from(["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "<b>bold</b>",
                         "javascript:alert(1)", "[link](javascript:alert(1))", "**not bold**", "$x^2$",
                         "&lt;&amp;", "\u202eevil", "<!--", "{{7*7}}", "%s%n"])
SENTENCES = st_.one_of(
    st_.text(max_size=60),                                             # any Unicode, control characters too
    st_.text(alphabet=st_.characters(codec="utf-8"), min_size=500, max_size=2000),
    st_.lists(st_.one_of(HTML, st_.sampled_from(["the", "cat", "sat", "🐈", "."])), max_size=12).map(" ".join),
)
QUERY_VALUES = st_.one_of(st_.text(max_size=30), st_.integers(-10**9, 10**9).map(str),
                          st_.sampled_from(["NaN", "inf", "-1", "1e999", "", "0x10", "[]", "{}", "None"]))
QUERIES = st_.dictionaries(st_.sampled_from(["model", "text", "layer", "head", "token", "presenter", "section",
                                            "zzz"]),
                           QUERY_VALUES, max_size=5)
SLOW = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def no_traceback(at):
    assert not at.exception, at.exception
    assert not at.error or all("Traceback" not in str(e.value) for e in at.error)


@SLOW
@given(page=st_.sampled_from(PAGES), text=SENTENCES, tab=st_.integers(0, 4))
def test_any_sentence_on_any_page_is_shown_back_and_breaks_nothing(page, text, tab):
    text = text.replace("\x00", "")[:2000]
    at = open_page(page)
    if page in SECTIONS:                                        # any of the page's tabs, not only the first
        show_section(at, page, SECTIONS[page][tab % len(SECTIONS[page])])
    type_text(at, text)
    no_traceback(at)
    assert at.text_input(key="text").value == text


@SLOW
@given(page=st_.sampled_from(PAGES), query=QUERIES)
def test_any_query_parameters_fall_back_without_breaking(page, query):
    at = open_page(page, **query)
    no_traceback(at)
    assert at.selectbox(key="model").value in ("tinytales", "roses")
    assert isinstance(at.session_state["layer"], int) and isinstance(at.session_state["head"], int)
