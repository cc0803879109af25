"""A link carries the page's own choices (explorer/registry.py: each page's linked fields) and reopens them."""
import pytest

from conftest import open_page


def test_a_link_reopens_the_prediction_pages_sampling_settings():
    at = open_page("prediction", temperature="2.5", **{"top-k": "7", "top-p": "0.5"}, strategy="sample")
    assert not at.exception and all("Session State" not in w.value for w in at.warning)
    assert at.slider(key="prediction_temperature").value == 2.5
    assert at.slider(key="prediction_top_k").value == 7
    assert at.slider(key="prediction_top_p").value == 0.5
    assert at.radio(key="prediction_strategy").value == "sample"
    assert at.query_params["temperature"] == "2.5" and at.query_params["top-k"] == "7"
    assert at.query_params["top-p"] == "0.5" and at.query_params["strategy"] == "sample"


@pytest.mark.parametrize("query", [{"temperature": "99"}, {"temperature": "abc"}, {"top-k": "-3"},
                                   {"top-k": "1e9"}, {"top-p": "0"}, {"strategy": "<script>"}, {"temperature": "nan"}])
def test_nonsense_in_a_link_falls_back_to_the_defaults(query):
    at = open_page("prediction", **query)
    assert not at.exception
    assert at.slider(key="prediction_temperature").value == 1.0 and at.slider(key="prediction_top_p").value == 1.0
    assert at.radio(key="prediction_strategy").value == "greedy"


def test_a_link_reopens_the_attention_what_if():
    at = open_page("attention", section="What if?", **{"what-if": "mask"})
    at.session_state["section_attention"] = "What if?"
    at.run()
    assert not at.exception and at.radio(key="attention_whatif").value == "mask"
    assert at.query_params["what-if"] == "mask"


def test_a_link_opens_the_lab_on_its_preset_with_every_knob_set():
    from explorer.lab.training import PRESETS
    preset = "sort (encoder-decoder)"
    at = open_page("training", preset=preset)
    assert not at.exception and at.selectbox(key="lab_preset").value == preset
    setup = PRESETS[preset][1]
    assert at.radio(key="lab_task").value == setup.task
    assert at.query_params["preset"] == preset
    assert not [m for m in at.markdown if "Changed from the preset" in m.value]      # the preset, as itself
    nonsense = open_page("training", preset="<b>nope</b>")
    assert not nonsense.exception and nonsense.selectbox(key="lab_preset").value == next(iter(PRESETS))


def test_a_link_opens_one_discovery_card_and_one_click_shows_them_all():
    at = open_page("discoveries", card="scaling")
    assert not at.exception
    radios = [r.key for r in at.radio]
    assert radios == ["discovery_radio_scaling"] and at.query_params["card"] == "scaling"
    at.button(key="discovery_every").click().run()
    assert len([r for r in at.radio if r.key.startswith("discovery_radio_")]) > 1 and "card" not in at.query_params
    assert not open_page("discoveries", card="nope").exception
