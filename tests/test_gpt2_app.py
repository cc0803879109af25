"""GPT-2 small in the app: the picker offers it, an offline server says why it cannot have it and keeps working."""
import time

import pytest

from conftest import open_page, page_text, plotly_figures
from explorer import models


@pytest.fixture
def offline_empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "CACHE_DIR", tmp_path)


def test_the_picker_offers_gpt2_small_with_its_size():
    at = open_page("home")
    picker = at.selectbox(key="model")
    assert "gpt2" in picker.options or any("GPT-2 small" in o for o in picker.options)
    assert picker.value == "tinytales"                              # the default stays the tiny model
    assert "124M parameters" in picker.help and "550 MB" in picker.help and "MIT" in picker.help


@pytest.mark.parametrize("slug", ["home", "attention", "prediction"])
def test_offline_the_picker_says_gpt2_needs_a_download_and_the_tiny_model_keeps_working(offline_empty_cache, slug):
    start = time.perf_counter()
    at = open_page(slug, model="gpt2")
    took = time.perf_counter() - start
    assert not at.exception
    warnings = [w.value for w in at.sidebar.warning]
    assert any("one-time download" in w and "offline" in w and "small models work as before" in w for w in warnings)
    assert at.selectbox(key="model").value == "tinytales"
    assert at.session_state["view"].name == "tinytales" and at.session_state["view"].trace is not None
    if slug != "home":
        assert plotly_figures(at)
    assert "Traceback" not in page_text(at)
    assert took < 60                                                 # no 23 s retries per attempt (AppTest is slow)


def test_picking_gpt2_offline_from_the_sidebar_goes_back_to_the_tiny_model(offline_empty_cache):
    at = open_page("home")
    at.selectbox(key="model").set_value("gpt2").run()
    assert not at.exception
    assert at.selectbox(key="model").value == "tinytales"
    assert any("one-time download" in w.value for w in at.sidebar.warning)
