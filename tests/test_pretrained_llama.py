"""SmolLM2 (a Llama-architecture model) in our own TransformerLM (model/pretrained.py), checked against transformers'
LlamaForCausalLM, and its tokenizer read from a tokenizer.json in SmolLM2's format.

Offline: the reference models are random, built by the test, with weights large enough (std 0.3, random RMSNorm
gains) that a wrong rotation, a wrong grouping of key/value heads or a wrong rotary base shows in the numbers."""
import json

import pytest
import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer as HFTokenizer

from gpt2_support import copy_into_hub_cache
from llama_support import (SMOLLM2_SHAPE, SPECIALS, reference_llama, rounded_to, smollm2_hub_cache,
                           smollm2_style_tokenizer_json, write_llama_dir)
from model.checkpoint import from_bytes, load, save, to_bytes
from model.hub import SMOLLM2, cached
from model.layers import cache_bytes_per_token
from model.pretrained import load_pretrained, llama_config
from model.tokenizers import load_tokenizer_json

SENTENCE = "Paris is the capital of France, and in 2024 the quick brown fox jumped 135 times over the lazy dog."
ATOL = 1e-4


def compare(bundle, reference, text=SENTENCE, atol=ATOL):
    """The residual stream (every hidden state), every attention pattern and the logits, ours against the reference."""
    ids = bundle.tokenizer.encode(text)
    trace = bundle.model.run(ids)
    with torch.no_grad():
        out = reference(torch.tensor([ids]), output_hidden_states=True, output_attentions=True)
    n = bundle.model.cfg.n_layers
    torch.testing.assert_close(trace["embed.out"], out.hidden_states[0], rtol=0, atol=atol)
    for i in range(n - 1):                                # transformers' last hidden state is after the final norm
        torch.testing.assert_close(trace[f"blocks.{i}.resid_post"], out.hidden_states[i + 1], rtol=0, atol=atol)
    torch.testing.assert_close(trace["final.norm"], out.hidden_states[n], rtol=0, atol=atol)
    for i in range(n):
        torch.testing.assert_close(trace[f"blocks.{i}.attn.pattern"], out.attentions[i], rtol=0, atol=atol)
    torch.testing.assert_close(trace["logits"], out.logits, rtol=0, atol=atol)


# Nine query heads sharing nine, three or one key/value heads (groups of 1, 3 and 9), and four sharing two
SHAPES = [dict(n_heads=9, n_kv_heads=9, d_model=36, n_layers=2), dict(n_heads=9, n_kv_heads=3, d_model=36, n_layers=2),
          dict(n_heads=9, n_kv_heads=1, d_model=72, n_layers=3), dict(n_heads=4, n_kv_heads=2, d_model=32, n_layers=2)]


@pytest.mark.parametrize("layout", ["hub", "saved"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s['n_heads']}heads-{s['n_kv_heads']}kv-{s['d_model']}wide")
def test_logits_patterns_and_the_residual_stream_match_transformers(tmp_path, layout, shape):
    reference = reference_llama(**shape, rope_theta=100_000.0)
    bundle = load_pretrained(write_llama_dir(tmp_path, reference, layout))
    cfg = bundle.model.cfg
    assert (cfg.pos, cfg.norm, cfg.activation, cfg.bias, cfg.rope_theta) == ("rope", "rms", "swiglu", False, 100_000.0)
    assert cfg.kv_heads == shape["n_kv_heads"] and cfg.norm_eps == 1e-5
    assert bundle.model.unembed.weight is bundle.model.embed.tok.weight and not bundle.model.training
    compare(bundle, reference)


def test_a_bfloat16_file_as_the_hub_serves_it_is_read_into_float32(tmp_path):
    reference = reference_llama()
    bundle = load_pretrained(write_llama_dir(tmp_path, reference, dtype=torch.bfloat16))
    assert all(p.dtype == torch.float32 for p in bundle.model.parameters())
    with pytest.raises(AssertionError):
        compare(bundle, reference)                        # the file's weights are rounded ...
    compare(bundle, rounded_to(reference, torch.bfloat16))        # ... and those are what we read, exactly


def test_an_untied_model_with_biases_matches_too(tmp_path):
    reference = reference_llama(tie=False, bias=True, n_kv_heads=3)
    bundle = load_pretrained(write_llama_dir(tmp_path, reference))
    assert bundle.model.cfg.bias and not bundle.model.cfg.tie_embeddings
    assert bundle.model.unembed.weight is not bundle.model.embed.tok.weight
    compare(bundle, reference)


def test_a_long_text_and_every_position_of_the_context_match(tmp_path):
    """Rotary angles grow with the position: the last positions of a full context turn fastest."""
    reference = reference_llama(n_positions=64)
    bundle = load_pretrained(write_llama_dir(tmp_path, reference))
    ids = (bundle.tokenizer.encode(SENTENCE) * 4)[:64]
    with torch.no_grad():
        expected = reference(torch.tensor([ids])).logits
    torch.testing.assert_close(bundle.model.run(ids)["logits"], expected, rtol=0, atol=ATOL)


# --- negative controls: the comparison notices what a conversion could get wrong --------------------------------

def test_a_wrong_rotary_base_is_caught(tmp_path):
    reference = reference_llama()
    directory = write_llama_dir(tmp_path, reference)
    spec = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps(spec | {"rope_theta": 10_000.0}))
    with pytest.raises(AssertionError):
        compare(load_pretrained(directory), reference)


def test_pairs_turned_in_the_interleaved_layout_are_caught(tmp_path):
    """Meta's original checkpoints pair dimensions (2i, 2i + 1); transformers' Llama pairs (i, i + K/2). Reading
    the query and key rows in the other order (as a converter that skipped the permutation would) must fail."""
    reference = reference_llama()
    bundle = load_pretrained(write_llama_dir(tmp_path, reference))
    K = bundle.model.cfg.d_head
    interleave = torch.arange(K).view(2, K // 2).T.reshape(-1)            # 0, K/2, 1, K/2 + 1, ...
    with torch.no_grad():
        for block in bundle.model.blocks:
            for W in (block.attn.W_q, block.attn.W_k):
                rows = W.weight.view(-1, K, W.weight.shape[1])
                rows.copy_(rows[:, interleave])
    with pytest.raises(AssertionError):
        compare(bundle, reference)


def test_key_value_heads_in_the_wrong_groups_are_caught(tmp_path):
    reference = reference_llama(n_heads=9, n_kv_heads=3)
    bundle = load_pretrained(write_llama_dir(tmp_path, reference))
    K = bundle.model.cfg.d_head
    with torch.no_grad():
        W = bundle.model.blocks[0].attn.W_k.weight.view(3, K, -1)
        W.copy_(W[[1, 2, 0]])                                             # key/value head 0 serves heads 3-5 ...
    with pytest.raises(AssertionError):
        compare(bundle, reference)


# --- the config -----------------------------------------------------------------------------------------------

def test_the_rotary_base_is_read_from_either_layout_of_config_json(tmp_path):
    reference = reference_llama(rope_theta=250_000.0)
    hub = json.loads((write_llama_dir(tmp_path / "hub", reference) / "config.json").read_text())
    saved = json.loads((write_llama_dir(tmp_path / "saved", reference, "saved") / "config.json").read_text())
    assert "rope_theta" in hub and "rope_parameters" not in hub                   # transformers 4's, SmolLM2's file
    assert saved["rope_parameters"]["rope_theta"] == 250_000.0                     # transformers 5's
    assert llama_config(hub).rope_theta == llama_config(saved).rope_theta == 250_000.0
    del hub["rope_theta"]
    assert llama_config(hub).rope_theta == 10_000.0                                # Llama's default


def test_smollm2s_shape_fits_the_limits_and_its_cache_costs_45_kb_a_token():
    spec = json.loads(json.dumps({**{"model_type": "llama", "hidden_act": "silu", "tie_word_embeddings": True,
                                     "rms_norm_eps": 1e-5, "rope_theta": 100000, "rope_scaling": None},
                                  "vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536,
                                  "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
                                  "max_position_embeddings": 8192}))
    cfg = llama_config(spec)
    assert (cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.kv_heads, cfg.d_head, cfg.d_ff, cfg.max_len) == \
        (30, 576, 9, 3, 64, 1536, 8192)
    assert cache_bytes_per_token(cfg) == 2 * 30 * 3 * 64 * 4 == 46_080           # 45 KB a token in float32
    assert cache_bytes_per_token(cfg, 2) == 23_040                                 # bfloat16
    with torch.device("meta"):
        from model.transformer import TransformerLM
        model = TransformerLM(cfg)
    assert sum(p.numel() for p in model.parameters()) == 134_515_008               # SmolLM2-135M's own count


@pytest.mark.parametrize("change, message", [
    (dict(rope_scaling={"rope_type": "llama3", "factor": 8.0}), "rotary positions of kind 'llama3'"),
    (dict(rope_parameters={"rope_type": "yarn", "rope_theta": 1e4}), "rotary positions of kind 'yarn'"),
    (dict(rope_interleaved=True), "interleaved"),
    (dict(hidden_act="gelu"), "activation"),
    (dict(head_dim=8), "head_dim"),
    (dict(attention_bias=True), "biases differ"),
    (dict(num_key_value_heads=2), "n_kv_heads must be a whole number that divides n_heads 9"),
    (dict(model_type="mistral"), "describes a mistral"),
])
def test_a_variant_we_do_not_compute_is_refused_in_plain_words(tmp_path, change, message):
    directory = write_llama_dir(tmp_path, reference_llama())
    spec = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps(spec | change))
    with pytest.raises(ValueError, match=message):
        load_pretrained(directory)


@pytest.mark.parametrize("damage, message", [
    (lambda t: t.pop("model.layers.1.mlp.gate_proj.weight"), "lacks the weight"),
    (lambda t: t.update({"model.layers.0.extra": torch.zeros(2)}), "unexpected weights"),
    (lambda t: t.update({"lm_head.weight": torch.zeros_like(t["model.embed_tokens.weight"])}), "differs"),
    (lambda t: t["model.norm.weight"].fill_(float("inf")), "NaN or infinite"),
])
def test_a_broken_file_gives_a_plain_error(tmp_path, damage, message):
    directory = write_llama_dir(tmp_path, reference_llama())
    tensors = load_file(directory / "model.safetensors")
    damage(tensors)
    save_file(tensors, directory / "model.safetensors")
    with pytest.raises(ValueError, match=message):
        load_pretrained(directory)


def test_older_files_rotary_frequency_buffers_are_skipped(tmp_path):
    reference = reference_llama()
    directory = write_llama_dir(tmp_path, reference)
    tensors = load_file(directory / "model.safetensors")
    tensors["model.layers.0.self_attn.rotary_emb.inv_freq"] = torch.ones(2)
    save_file(tensors, directory / "model.safetensors")
    compare(load_pretrained(directory), reference)


# --- the model in the app: our own files, the hub's cache, the facts ---------------------------------------------

def test_it_round_trips_through_our_own_files_and_says_what_it_is(tmp_path):
    reference = reference_llama(n_kv_heads=3)
    bundle = load_pretrained(write_llama_dir(tmp_path / "hub", reference))
    assert "SmolLM2" in bundle.facts["about"] and bundle.facts["licence"] == "Apache 2.0"
    assert bundle.facts["parameters"] == sum(p.numel() for p in reference.parameters())
    save(bundle, tmp_path / "ours")
    ids = bundle.tokenizer.encode(SENTENCE)
    for again in (load(tmp_path / "ours"), from_bytes(to_bytes(bundle))):
        assert again.model.cfg == bundle.model.cfg and again.model.unembed.weight is again.model.embed.tok.weight
        assert again.tokenizer.encode(SENTENCE) == ids
        torch.testing.assert_close(again.model.run(ids)["logits"], bundle.model.run(ids)["logits"], rtol=0, atol=0)


def test_a_smollm2_shaped_model_loads_from_a_prepared_cache_with_no_network(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache = smollm2_hub_cache(tmp_path, d_model=36)
    bundle = load_pretrained(cached(SMOLLM2, cache))
    cfg = bundle.model.cfg
    assert (cfg.n_layers, cfg.n_heads, cfg.kv_heads, cfg.vocab_size, cfg.max_len, cfg.rope_theta) == \
        (30, 9, 3, 49_152, 8192, 100_000.0)
    trace = bundle.model.run(bundle.tokenizer.encode(SENTENCE))
    assert trace["blocks.29.attn.k"].shape[1] == 3 and torch.isfinite(trace["logits"]).all()


def test_the_real_smollm2_shape_gives_transformers_logits(tmp_path):
    """30 layers, 576 wide, 49,152 tokens: the real model's every size, random weights."""
    shape = SMOLLM2_SHAPE | dict(n_positions=64)
    reference = reference_llama(**shape, init=0.05)
    directory = tmp_path / "smollm2"
    write_llama_dir(directory, reference)
    bundle = load_pretrained(directory)
    ids = bundle.tokenizer.encode(SENTENCE)[:16]
    with torch.no_grad():
        expected = reference(torch.tensor([ids])).logits
    torch.testing.assert_close(bundle.model.run(ids, names=["logits"])["logits"], expected, rtol=0, atol=ATOL)


# --- the tokenizer ---------------------------------------------------------------------------------------------

TEXTS = ["Paris is the capital of France.", "In 2024, 135 million numbers: 12 + 30 = 42!", "def add(a, b):\n\treturn a + b",
         "Ünïcödé and emoji 🙂 survive", "  two spaces, <|endoftext|> and <|im_start|> are special", ""]


def test_a_tokenizer_json_in_smollm2s_format_reads_as_the_library_reads_it(tmp_path):
    path = smollm2_style_tokenizer_json(tmp_path / "tokenizer.json", vocab_size=700)
    spec = json.loads(path.read_text())
    assert spec["pre_tokenizer"]["type"] == "Sequence" and spec["normalizer"] is None
    assert [t["content"] for t in spec["added_tokens"]] == SPECIALS
    ours, theirs = load_tokenizer_json(path), HFTokenizer.from_file(str(path))
    assert ours.vocab_size == 700 and ours.vocab[:3] == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    for text in TEXTS:
        assert ours.encode(text) == theirs.encode(text).ids, text
        assert ours.decode(ours.encode(text)) == text
    assert [p.text for p in ours.pieces("2024")] == ["2", "0", "2", "4"]            # every digit on its own
    assert ours.encode("<|endoftext|>") == [0]
    assert ours.replay(" 2024")[-1] == ["Ġ", "2", "0", "2", "4"]                     # merges never cross the cut


def test_digits_split_only_as_smollm2_splits_them(tmp_path):
    """A Sequence pre-tokenizer is read only when it is Digits (one by one) then GPT-2's ByteLevel split."""
    path = smollm2_style_tokenizer_json(tmp_path / "tokenizer.json")
    spec = json.loads(path.read_text())
    for other in ({"type": "Digits", "individual_digits": False}, {"type": "Whitespace"}):
        spec["pre_tokenizer"]["pretokenizers"][0] = other
        path.write_text(json.dumps(spec))
        with pytest.raises(ValueError, match="plain byte-level BPE"):
            load_tokenizer_json(path)


def test_copy_into_hub_cache_places_smollm2s_files_at_its_revision(tmp_path):
    snapshot = copy_into_hub_cache(write_llama_dir(tmp_path / "files", reference_llama()), tmp_path / "hub", SMOLLM2)
    assert snapshot.name == SMOLLM2.revision and cached(SMOLLM2, tmp_path / "hub") == snapshot
