"""The whole app: the sidebar, the big picture page, URL state and strange input (AppTest, no browser)."""
import pytest
from streamlit.testing.v1 import AppTest

from conftest import APP, open_page, page_text, plotly_figures, type_text
from explorer.steps.attention import SECTIONS
from explorer.app.state import DEFAULT_SENTENCE
from explorer.registry import STEPS
from model.checkpoint import load_bundled

STRANGE = {
    "empty": "",
    "emoji": "the 🐈 sat on the 🧶 😺",
    "long": ("the cat sat on the mat because it was tired . " * 45)[:2000],
    "script": "<script>alert(1)</script> <img src=x onerror=alert(1)>",
    "unknown": "quantum zebras juggle marmalade",
}


def test_big_picture_shows_the_pipeline_with_this_sentences_real_shapes():
    at = open_page()
    assert not at.exception
    text = page_text(at)
    cfg = load_bundled("tinytales").model.cfg                          # the checkpoint's own numbers
    T = len(DEFAULT_SENTENCE.split())
    assert f"{T} tokens" in text and f"{T} x {cfg.d_model}" in text and f"{cfg.vocab_size:,} scores" in text
    assert f"{cfg.n_heads} x {T} x {T} per layer" in text
    assert at.text_input(key="text").value == DEFAULT_SENTENCE


@pytest.mark.parametrize("step", [s.slug for s in STEPS])
@pytest.mark.parametrize("kind", list(STRANGE))
def test_every_page_survives_strange_input(step, kind):
    at = open_page(step)
    type_text(at, STRANGE[kind])
    assert not at.exception, at.exception
    assert at.text_input(key="text").value == STRANGE[kind]
    if kind == "empty":
        assert "Type a sentence first" in page_text(at)
    if kind == "long":
        assert "only the last 32 tokens are used" in page_text(at)
    if kind in ("unknown", "script", "emoji"):
        assert "not in the model's vocabulary" in page_text(at)


def test_the_view_is_in_the_url_and_a_link_reopens_it():
    at = open_page("home")
    type_text(at, "the dog chased the cat")
    assert at.query_params["text"] == "the dog chased the cat"
    again = open_page("home", model="roses", text="roses are red", presenter=1)
    assert again.selectbox(key="model").value == "roses"
    assert again.text_input(key="text").value == "roses are red"
    assert again.toggle(key="presenter").value is True
    assert "3 tokens" in page_text(again)


def test_high_contrast_is_a_sidebar_toggle_kept_in_the_url_and_styles_the_page():
    from explorer.app.styles import HIGH_CONTRAST_CSS
    at = open_page("attention")
    assert at.toggle(key="high_contrast").value is False and "high_contrast" not in at.query_params
    assert HIGH_CONTRAST_CSS not in [h.proto.body for h in at.get("html")]
    at.toggle(key="high_contrast").set_value(True).run()
    assert at.session_state["high_contrast"] is True and at.query_params["high_contrast"] == "1"
    assert HIGH_CONTRAST_CSS in at.get("html")[0].proto.body
    again = open_page("attention", presenter=1, high_contrast=1)              # a link reopens it
    assert again.toggle(key="high_contrast").value is True and again.session_state["high_contrast"] is True


def deep_link(slug: str, **query) -> AppTest:
    """A session whose first run is page `slug` with these URL parameters (a link opened in a new tab)."""
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in query.items():
        at.query_params[key] = str(value)
    return at.switch_page(f"pages/{slug}.py").run()


def test_the_open_section_is_in_the_url_and_a_link_reopens_it():
    at = deep_link("attention", text="the dog chased the cat", section="Every head")
    assert not at.exception
    assert at.session_state["section_attention"] == "Every head"
    assert [f["layout"]["title"]["text"] for f in plotly_figures(at)] == ["Every head in every layer"]
    assert at.query_params["section"] == "Every head"
    at.session_state["section_attention"] = "What if?"              # a click on another tab
    at.run()
    assert at.query_params["section"] == "What if?"
    assert "section=What+if%3F" in at.get("code")[0].value            # the "copy a link" box
    at.switch_page("pages/positions.py").run()                       # another page, then back: still open
    assert at.query_params["section"] == "The seat numbers"           # that page's own open tab, not this one's
    at.switch_page("pages/attention.py").run()
    assert at.session_state["section_attention"] == "What if?"


@pytest.mark.parametrize("section", ["no such tab", "<script>alert(1)</script>", "x" * 5000, ""])
def test_an_unknown_section_in_a_link_opens_the_first_one(section):
    at = deep_link("attention", section=section)
    assert not at.exception
    assert at.session_state["section_attention"] == SECTIONS[0]
    [figure] = plotly_figures(at)                  # the first section's one figure: Q, K and V
    assert [t["name"][0] for t in figure["data"]] == ["Q", "K", "V"]


@pytest.mark.parametrize("query, notice", [
    (dict(model="gpt-17"), "model that does not exist"),
    (dict(layer=99), "layer '99'"),
    (dict(head=-1), "head '-1'"),
    (dict(token="abc"), "token 'abc'"),
    (dict(layer="1e999", head="NaN"), "which this model does not have"),
])
def test_nonsense_in_the_url_falls_back_to_defaults_with_a_notice(query, notice):
    at = open_page("home", **query)
    assert not at.exception
    assert notice in page_text(at)
    assert at.selectbox(key="model").value in ("tinytales", "roses")


def test_roses_model_is_available_in_the_sidebar():
    at = open_page()
    at.selectbox(key="model").set_value("roses").run()
    type_text(at, "roses are red violets are")
    assert "11 scores" not in page_text(at)          # vocab of 12 words, not 11
    assert "12 scores" in page_text(at)
    assert "“blue”" in page_text(at)
    assert load_bundled("roses").model.cfg.d_model == 32


def test_the_big_picture_points_to_the_discoveries():
    at = open_page()
    links = [link for link in at.get("page_link") if link.proto.label == "Discoveries"]
    assert len(links) == 1 and links[0].proto.page.endswith("discoveries")
    assert "Not sure where to look?" in page_text(at)


def test_a_value_widgets_callback_after_a_page_switch_took_its_widget_away_changes_nothing_and_raises_nothing():
    """Streamlit calls a widget's on_change with the browser's last value even when the page that drew it has gone:
    such a callback must not raise (during a fragment run, an exception there turned a student's page white)."""
    def script():
        import streamlit as st
        from explorer.app import classroom, lab, layout
        st.session_state["_figure_format"] = "SVG"
        for callback in (layout._keep_format, lab.apply_preset, classroom._keep_follow):
            callback()                                   # none of their widgets was drawn in this session
        st.write(f"{st.session_state['_figure_format']} {st.session_state['_class_follow']}")

    at = AppTest.from_function(script, default_timeout=60).run()
    assert not at.exception
    assert at.markdown[0].value == "SVG True"            # the kept choice is untouched; following stays on
