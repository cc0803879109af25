"""SmolLM2-135M in the app, as GPT-2 is: the picker offers it, an offline server says why it cannot have it, and
every page and tab reads a SmolLM2-shaped model (random weights, its real 30 layers, 9 heads sharing 3 key/value
heads, 49,152 tokens, 8,192 positions, rotary base 100,000; width 36) from a prepared cache."""
import time

import pytest
import torch

from conftest import open_page, page_text, show_section
from explorer.app import models
from explorer.registry import STEPS
from llama_support import smollm2_hub_cache
from model import hub
from model.hub import SMOLLM2
from model.pretrained import load_pretrained

TEXT = "Paris is the capital of France, and the quick brown fox jumps over the lazy dog."


@pytest.fixture(scope="module")
def smollm2_cache(tmp_path_factory):
    return smollm2_hub_cache(tmp_path_factory.mktemp("smollm2"), d_model=36)


@pytest.fixture
def smollm2(smollm2_cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")                  # a prepared cache needs no network
    monkeypatch.setattr(models, "CACHE_DIR", smollm2_cache)
    return load_pretrained(hub.cached(SMOLLM2, smollm2_cache))


def test_the_picker_offers_smollm2_with_its_size_from_the_registry():
    at = open_page("home")
    picker = at.selectbox(key="model")
    assert "SmolLM2-135M" in picker.options and picker.value == "tinytales"
    assert models.label("smollm2") == "SmolLM2-135M" and models.label("gpt2") == "GPT-2 small (124M)"
    assert f"{SMOLLM2.parameters / 1e6:.0f}M" == "135M"
    assert "135M parameters" in picker.help and "270 MB" in picker.help and "Apache 2.0" in picker.help


def test_offline_the_picker_says_smollm2_needs_a_download_and_the_tiny_model_keeps_working(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "CACHE_DIR", tmp_path)
    start = time.perf_counter()
    at = open_page("attention", model="smollm2")
    assert not at.exception and time.perf_counter() - start < 60
    warnings = [w.value for w in at.sidebar.warning]
    assert any("SmolLM2-135M needs a one-time download" in w and "offline" in w
               and "small models work as before" in w for w in warnings)
    assert at.selectbox(key="model").value == "tinytales" and at.session_state["view"].trace is not None


def test_every_page_and_tab_runs_with_smollm2_on_its_own_numbers(smollm2):
    at = open_page("home", model="smollm2", text=TEXT)
    assert not at.exception and at.selectbox(key="model").value == "smollm2"
    v = at.session_state["view"]
    ids = smollm2.tokenizer.encode(TEXT)
    assert list(v.prepared.ids) == ids
    torch.testing.assert_close(v.trace["logits"], smollm2.model.run(ids)["logits"])        # SmolLM2's own numbers
    assert "49,152" in page_text(at) and "9 query heads share 3 key/value heads" in page_text(at)
    at.session_state["prediction_kv_cache"] = True                      # the KV cache panel open too
    for step in STEPS:
        at.switch_page(step.file).run()
        assert not at.exception, step.slug
        for label in step.labels or [None]:
            if label is not None:
                show_section(at, step.slug, label)
            assert not at.exception, (step.slug, label, at.exception)
            assert "Traceback" not in page_text(at)
        if step.slug == "positions":
            assert "rotary" in page_text(at) and "base 100,000" in page_text(at)


def test_smollm2s_kv_cache_is_a_third_of_what_one_key_value_head_per_query_head_would_keep(smollm2):
    from model.layers import cache_bytes_per_token
    cfg = smollm2.model.cfg
    at = open_page("prediction", model="smollm2", text=TEXT)
    at.session_state["prediction_kv_cache"] = True                      # the student opens the KV cache panel
    at.run()
    assert not at.exception
    text = page_text(at)
    per_token = 2 * 30 * 3 * cfg.d_head * 4
    assert cache_bytes_per_token(cfg) == per_token
    assert f"2 x 30 x 3 x {cfg.d_head} x 4 bytes = **{per_token:,} bytes" in text
    assert f"its 9 query heads share 3 key/value heads" in text and f"{3 * per_token:,} bytes per token, 3 times" in text
    at.switch_page("pages/attention.py").run()
    assert "heads 0, 1, 2 read key/value head 0" in page_text(at)
