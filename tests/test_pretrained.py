"""GPT-2 in our own TransformerLM (model/pretrained.py), checked against Hugging Face's GPT2LMHeadModel.

Offline: the reference models are random, built by the test, with weights large enough (std 0.3, random
norms and biases) that any mistake in the conversion shows in the numbers."""
import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from gpt2_support import VOCAB, reference_gpt2, write_gpt2_dir
from model.checkpoint import from_bytes, load, save, to_bytes
from model.pretrained import convert_gpt2, gpt2_config, load_pretrained

SENTENCE = "Paris is the capital of France, and the quick brown fox jumps over the lazy dog."


def compare(bundle, reference, text=SENTENCE, atol=1e-4):
    """Every layer's hidden state, every attention pattern and the logits, ours against the reference."""
    ids = bundle.tokenizer.encode(text)
    trace = bundle.model.run(ids)
    with torch.no_grad():
        out = reference(torch.tensor([ids]), output_hidden_states=True, output_attentions=True)
    n = bundle.model.cfg.n_layers
    torch.testing.assert_close(trace["embed.out"], out.hidden_states[0], rtol=0, atol=atol)
    for i in range(n - 1):                                # HF's last hidden state is after ln_f
        torch.testing.assert_close(trace[f"blocks.{i}.resid_post"], out.hidden_states[i + 1], rtol=0, atol=atol)
    torch.testing.assert_close(trace["final.norm"], out.hidden_states[n], rtol=0, atol=atol)
    for i in range(n):
        torch.testing.assert_close(trace[f"blocks.{i}.attn.pattern"], out.attentions[i], rtol=0, atol=atol)
    torch.testing.assert_close(trace["logits"], out.logits, rtol=0, atol=atol)


@pytest.mark.parametrize("layout", ["hub", "prefixed"])
@pytest.mark.parametrize("n_layers, n_heads, d_model", [(2, 3, 24), (3, 1, 16)])
def test_every_intermediate_matches_hugging_face(tmp_path, layout, n_layers, n_heads, d_model):
    reference = reference_gpt2(n_layers=n_layers, n_heads=n_heads, d_model=d_model)
    bundle = load_pretrained(write_gpt2_dir(tmp_path, reference, layout))
    assert bundle.model.cfg.tie_embeddings and bundle.model.cfg.activation == "gelu_tanh"
    assert bundle.model.unembed.weight is bundle.model.embed.tok.weight and not bundle.model.training
    compare(bundle, reference)


def test_the_hub_layout_carries_mask_buffers_and_no_lm_head(tmp_path):
    names = set(load_file(write_gpt2_dir(tmp_path, reference_gpt2()) / "model.safetensors"))
    assert "h.0.attn.bias" in names and "h.0.attn.c_attn.bias" in names and "lm_head.weight" not in names
    assert not any(n.startswith("transformer.") for n in names)


def test_a_swapped_query_and_key_is_caught(tmp_path):
    """The negative control: with q and k swapped the comparison must fail (it would not at std 0.02)."""
    reference = reference_gpt2()
    directory = write_gpt2_dir(tmp_path, reference)
    bundle = load_pretrained(directory)
    with torch.no_grad():
        attn = bundle.model.blocks[1].attn
        q, k = attn.W_q.weight.clone(), attn.W_k.weight.clone()
        attn.W_q.weight.copy_(k)
        attn.W_k.weight.copy_(q)
    with pytest.raises(AssertionError):
        compare(bundle, reference)


def test_untransposed_conv1d_weights_are_caught(tmp_path):
    reference = reference_gpt2(d_model=24)
    directory = write_gpt2_dir(tmp_path, reference)
    tensors = load_file(directory / "model.safetensors")
    cfg = gpt2_config(json.loads((directory / "config.json").read_text()))
    weights = convert_gpt2(tensors, cfg)
    weights["blocks.0.attn.W_o.weight"] = weights["blocks.0.attn.W_o.weight"].T.contiguous()     # square: fits
    bundle = load_pretrained(directory)
    bundle.model.load_state_dict(weights)
    with pytest.raises(AssertionError):
        compare(bundle, reference)


def test_a_gpt2_shaped_model_round_trips_through_our_files_with_the_tie_kept(tmp_path):
    reference = reference_gpt2(n_layers=12, n_heads=12, d_model=48, n_positions=1024, init=0.1)
    bundle = load_pretrained(write_gpt2_dir(tmp_path / "hub", reference))
    cfg = bundle.model.cfg
    assert (cfg.n_layers, cfg.n_heads, cfg.vocab_size, cfg.max_len, cfg.d_ff) == (12, 12, VOCAB, 1024, 192)
    save(bundle, tmp_path / "ours")
    ids = bundle.tokenizer.encode(SENTENCE)
    for again in (load(tmp_path / "ours"), from_bytes(to_bytes(bundle))):
        assert again.model.unembed.weight is again.model.embed.tok.weight
        assert again.tokenizer.encode(SENTENCE) == ids
        torch.testing.assert_close(again.model.run(ids)["logits"], bundle.model.run(ids)["logits"], rtol=0, atol=0)


@pytest.mark.parametrize("damage, message", [
    (lambda d: (d / "tokenizer.json").unlink(), "lacks tokenizer.json"),
    (lambda d: (d / "config.json").write_text("{not json"), "config.json is not valid JSON"),
    (lambda d: (d / "model.safetensors").write_bytes(b"\x00" * 64), "model.safetensors could not be read"),
    (lambda d: _edit_tensors(d, lambda t: t.pop("h.1.mlp.c_fc.weight")), "lacks the weight"),
    (lambda d: _edit_tensors(d, lambda t: t.update({"wpe.weight": torch.zeros(64, 20)})), "wpe|embed.pos.weight"),
    (lambda d: _edit_tensors(d, lambda t: t["h.0.ln_1.weight"].fill_(float("nan"))), "NaN or infinite"),
    (lambda d: _edit_tensors(d, lambda t: t.update({"h.0.extra": torch.zeros(2)})), "unexpected weights"),
    (lambda d: _edit_config(d, n_head=5), "not divisible"),
    (lambda d: _edit_config(d, model_type="bert"), "describes a bert: this app loads GPT-2 and Llama"),
])
def test_a_broken_directory_gives_a_plain_error(tmp_path, damage, message):
    directory = write_gpt2_dir(tmp_path, reference_gpt2())
    damage(directory)
    with pytest.raises(ValueError, match=message):
        load_pretrained(directory)


def _edit_tensors(directory, change):
    tensors = load_file(directory / "model.safetensors")
    change(tensors)
    save_file(tensors, directory / "model.safetensors")


def _edit_config(directory, **fields):
    spec = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps(spec | fields))


def test_every_loaded_weight_owns_exactly_its_memory(tmp_path):
    """No weight is a view on the loaded file's storage, which would keep the whole file in memory."""
    bundle = load_pretrained(write_gpt2_dir(tmp_path, reference_gpt2()))
    storages = {}
    for name, p in bundle.model.named_parameters(remove_duplicate=False):
        assert p.is_contiguous() and p.dtype == torch.float32, name
        assert p.untyped_storage().nbytes() == p.numel() * 4, name
        storages.setdefault(p.untyped_storage().data_ptr(), set()).add(name)
    assert {"embed.tok.weight", "unembed.weight"} in storages.values()           # the tie: one matrix
    assert all(len(names) == 1 for names in storages.values() if "unembed.weight" not in names)
