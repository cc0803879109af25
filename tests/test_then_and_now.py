"""Then and now: GPT-2 small (2019), Pythia-70M (2023) and SmolLM2-135M (2024) on the big picture, switch by switch, on the student's
sentence, every number recomputed here from the models' files (random weights in their real shapes, prepared caches;
the hub is never reached)."""
import json

import pytest
from safetensors import safe_open
from tokenizers import Tokenizer

from conftest import open_page
from explorer.app import models
from explorer.steps.then_and_now import cache_claim, comparison_table, read_side
from gpt2_support import copy_into_hub_cache, gpt2_hub_cache
from llama_support import smollm2_shaped_dir
from model import hub
from model.hub import GPT2, PYTHIA_70M, SMOLLM2
from neox_support import pythia_hub_cache

TEXT = "The cat sat on the mat because it was tired."


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """A Hugging Face cache holding GPT-2's and SmolLM2's shapes (small widths)."""
    root = tmp_path_factory.mktemp("then-and-now")
    cache = gpt2_hub_cache(root / "gpt2", d_model=48)
    copy_into_hub_cache(smollm2_shaped_dir(root / "smollm2", d_model=36), cache, SMOLLM2)
    return cache


@pytest.fixture(scope="module")
def all_three(tmp_path_factory, both):
    """The same cache with Pythia-70M's shape (small width) at its final step, as its download leaves it."""
    import shutil
    root = tmp_path_factory.mktemp("with-pythia")
    shutil.copytree(both, root / "hub", symlinks=True)
    pythia_hub_cache(root, steps=(143_000,))
    return root / "hub"


def file_parameters(directory) -> int:
    """The learned numbers in model.safetensors, an lm_head tied to the embedding counted once."""
    config = json.loads((directory / "config.json").read_text())
    with safe_open(directory / "model.safetensors", "pt") as f:
        shapes = {name: f.get_slice(name).get_shape() for name in f.keys()}
    skip = {n for n in shapes if n.endswith((".attn.bias", ".attn.masked_bias", "rotary_emb.inv_freq"))}
    if config.get("tie_word_embeddings", True):
        skip |= {n for n in shapes if n.endswith("lm_head.weight")}
    total = 0
    for name, shape in shapes.items():
        if name not in skip:
            count = 1
            for size in shape:
                count *= size
            total += count
    return total


def cache_bytes(directory) -> int:
    """2 x layers x key/value heads x head size x 4 bytes, from config.json's own fields."""
    c = json.loads((directory / "config.json").read_text())
    if c.get("model_type") == "llama":
        layers, heads, d = c["num_hidden_layers"], c["num_attention_heads"], c["hidden_size"]
        kv = c.get("num_key_value_heads", heads)
    else:
        layers, heads, d = c["n_layer"], c["n_head"], c["n_embd"]
        kv = heads
    return 2 * layers * kv * (d // heads) * 4


def kb(n: float) -> str:
    return f"{n / 1024:,.1f} KB"


def test_each_side_is_read_from_its_files_and_its_numbers_are_the_files(both):
    gpt2_dir, smol_dir = hub.cached(GPT2, both), hub.cached(SMOLLM2, both)
    then, now = read_side(gpt2_dir, "GPT-2 small (2019)"), read_side(smol_dir, "SmolLM2-135M (2024)")
    assert then.parameters == file_parameters(gpt2_dir) and now.parameters == file_parameters(smol_dir)
    table = comparison_table([then, now], TEXT)
    assert list(table.columns) == ["GPT-2 small (2019)", "SmolLM2-135M (2024)"]
    row = table.loc
    assert row["Positions"].iloc[0].startswith("learned") and "θ = 100,000" in row["Positions"].iloc[1]
    assert row["Norm"].tolist() == ["LayerNorm, pre-norm", "RMSNorm, pre-norm"]
    assert row["Feed-forward"].iloc[0].startswith("GELU: 48 → 192 → 48")
    assert row["Feed-forward"].iloc[1].startswith("gated (SwiGLU): gate and up 36 → 96")
    assert row["Attention heads"].tolist() == ["12 heads, each with its own keys and values (size 4)",
                                               "9 query heads sharing 3 key/value heads, 3 each (size 4)"]
    assert row["Biases"].tolist() == ["yes", "none"]
    assert row["Layers × width"].tolist() == ["12 × 48", "30 × 36"]
    assert row["Vocabulary"].tolist() == ["50,257 tokens", "49,152 tokens"]
    assert row["Parameters"].tolist() == [f"{file_parameters(d):,} ({file_parameters(d) / 1e6:.1f} million)"
                                          for d in (gpt2_dir, smol_dir)]
    assert row["KV cache per token"].tolist() == [kb(cache_bytes(d)) for d in (gpt2_dir, smol_dir)]
    counts = [len(Tokenizer.from_file(str(d / "tokenizer.json")).encode(TEXT).ids) for d in (gpt2_dir, smol_dir)]
    assert [cell.split(" tokens:")[0] for cell in row["Your sentence"]] == [str(n) for n in counts]
    assert "␣cat" in row["Your sentence"].iloc[0]                                # a token's space shown
    assert row["Its KV cache"].tolist() == [kb(cache_bytes(d) * n) for d, n in zip((gpt2_dir, smol_dir), counts)]


def test_the_cache_claim_is_computed_from_both_models(both):
    gpt2_dir, smol_dir = hub.cached(GPT2, both), hub.cached(SMOLLM2, both)
    then, now = read_side(gpt2_dir, "GPT-2 small (2019)"), read_side(smol_dir, "SmolLM2-135M (2024)")
    a, b = cache_bytes(gpt2_dir), cache_bytes(smol_dir)
    claim = cache_claim(then, now)
    assert f"{30 / 12:.1f} times as many layers (30 against 12)" in claim
    assert f"keeps {kb(b)} per token" in claim
    assert (f"{a / b:.1f} times less than GPT-2 small's {kb(a)}" if b < a else f"{b / a:.1f} times") in claim
    assert "its 9 query heads share 3 key/value heads" in claim and f"it would keep {kb(b * 3)}" in claim


def test_the_big_picture_shows_both_models_when_the_panel_opens(both, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "CACHE_DIR", both)
    at = open_page("home", text=TEXT)
    assert not at.exception and not [t for t in at.table if "SmolLM2-135M (2024)" in t.value.columns]   # closed
    at.session_state["then_and_now"] = True                  # the student opens the panel
    at.run()
    assert not at.exception
    [table] = [t.value for t in at.table if "SmolLM2-135M (2024)" in t.value.columns]
    assert table.loc["Layers × width"].tolist() == ["12 × 48", "30 × 36"]
    expected = comparison_table([read_side(hub.cached(GPT2, both), "GPT-2 small (2019)"),
                                 read_side(hub.cached(SMOLLM2, both), "SmolLM2-135M (2024)")], TEXT)
    assert table.equals(expected)
    claims = [m.value for m in at.markdown if "per token in its cache" in m.value]
    assert claims == [cache_claim(read_side(hub.cached(GPT2, both), "GPT-2 small (2019)"),
                                  read_side(hub.cached(SMOLLM2, both), "SmolLM2-135M (2024)"))]


def test_offline_without_downloads_the_panel_says_how_to_get_them(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "CACHE_DIR", tmp_path)
    at = open_page("home")
    at.session_state["then_and_now"] = True
    at.run()
    assert not at.exception
    infos = [i.value for i in at.info]
    assert any("GPT-2 small (2019), Pythia-70M (2023) and SmolLM2-135M (2024) are not downloaded" in i
               and "model picker" in i for i in infos)
    assert not any("per token in its cache" in m.value for m in at.markdown)


def test_pythia_stands_between_them_with_its_own_switches(all_three, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "CACHE_DIR", all_three)
    at = open_page("home", text=TEXT)
    at.session_state["then_and_now"] = True
    at.run()
    assert not at.exception
    [table] = [t.value for t in at.table if "Pythia-70M (2023)" in t.value.columns]
    assert list(table.columns) == ["GPT-2 small (2019)", "Pythia-70M (2023)", "SmolLM2-135M (2024)"]
    pythia_dir = hub.cached(PYTHIA_70M, all_three)
    config = json.loads((pythia_dir / "config.json").read_text())
    K = config["hidden_size"] // config["num_attention_heads"]
    R = int(K * config["rotary_pct"])
    assert f"{R} of each head's {K} query and key dimensions ({R / K:.0%})" in table.loc["Positions"].iloc[1]
    assert table.loc["Attention and feed-forward"].tolist()[1].startswith("side by side")
    assert [c.startswith("one after the other") for c in table.loc["Attention and feed-forward"]] == [True, False, True]
    assert table.loc["Words in and out"].tolist() == ["one matrix (tied)", "two matrices (untied)",
                                                      "one matrix (tied)"]
    tokens = len(Tokenizer.from_file(str(pythia_dir / "tokenizer.json")).get_vocab())
    assert table.loc["Vocabulary"].iloc[1] == f"{tokens:,} tokens"
    claims = [m.value for m in at.markdown if "per token in its cache" in m.value]
    assert claims == [cache_claim(read_side(hub.cached(GPT2, all_three), "GPT-2 small (2019)"),
                                  read_side(hub.cached(SMOLLM2, all_three), "SmolLM2-135M (2024)"))]
