"""Pythia (GPT-NeoX) in our own TransformerLM (model/pretrained.py), checked against transformers' GPTNeoXForCausalLM,
and its training checkpoints (branches step<N> of one repository) fetched from a prepared Hugging Face cache.

Offline: the reference models are random, built by the test, with weights large enough (std 0.3, random LayerNorm
gains and biases) that a wrong rotation, a wrong q/k/v interleave or a wrong parallel block shows in the numbers."""
import json
import socket

import pytest
import torch
from safetensors.torch import load_file, save_file

from llama_support import rounded_to
from model import hub
from model.hub import PYTHIA_160M, PYTHIA_70M, PYTHIA_STEPS, HubUnavailable, at_step, fetch
from model.pretrained import load_pretrained, model_config, neox_config
from model.tokenizers import load_tokenizer_json
from model.transformer import TransformerLM
from neox_support import SPACES, TOKENS, fake_commit, neox_style_tokenizer_json, pythia_hub_cache, reference_neox, \
    write_neox_dir

SENTENCE = "Paris is the capital of France, and in 2024 the quick brown fox jumped 135 times over the lazy dog."


def compare(bundle, reference, text=SENTENCE):
    """Logits within 1e-4 and every attention pattern within 1e-5 of the reference's; the model keeps the
    tokenizer's rows of the vocabulary, and scores those tokens exactly as the reference does."""
    ids = bundle.tokenizer.encode(text)
    trace = bundle.model.run(ids)
    with torch.no_grad():
        out = reference(torch.tensor([ids]), output_attentions=True)
    V = bundle.tokenizer.vocab_size
    assert bundle.model.cfg.vocab_size == V < reference.config.vocab_size              # the padding rows are gone
    for i in range(bundle.model.cfg.n_layers):
        torch.testing.assert_close(trace[f"blocks.{i}.attn.pattern"], out.attentions[i], rtol=0, atol=1e-5)
    torch.testing.assert_close(trace["logits"], out.logits[..., :V], rtol=0, atol=1e-4)
    return trace["logits"]


@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "sequential"])
@pytest.mark.parametrize("rotary_fraction", [0.25, 0.5, 1.0])
def test_logits_and_attention_patterns_match_transformers(tmp_path, rotary_fraction, parallel):
    """Eight dimensions per head, of which 2 (Pythia's quarter), 4 or all 8 turn; blocks parallel (Pythia's) or not."""
    reference = reference_neox(rotary_fraction=rotary_fraction, parallel=parallel)
    bundle = load_pretrained(write_neox_dir(tmp_path, reference))
    cfg = bundle.model.cfg
    assert (cfg.pos, cfg.norm, cfg.norm_position, cfg.activation, cfg.bias) == ("rope", "layer", "pre", "gelu", True)
    assert (cfg.parallel, cfg.rotary_fraction, cfg.d_rotary) == (parallel, rotary_fraction, int(8 * rotary_fraction))
    assert bundle.model.unembed.weight is not bundle.model.embed.tok.weight and not bundle.model.training
    compare(bundle, reference)


@pytest.mark.parametrize("config_style", ["hub", "v5"])
@pytest.mark.parametrize("weights, dtype", [("safetensors", torch.float32), ("safetensors", torch.float16),
                                            ("bin", torch.float32), ("bin", torch.float16)],
                         ids=["safetensors-float32", "safetensors-float16", "bin-float32", "bin-float16"])
def test_either_weight_file_in_either_precision_and_either_config_style_is_read(tmp_path, weights, dtype,
                                                                                  config_style):
    """Pythia's checkpoints are float16 pytorch_model.bin files with a transformers 4 config.json."""
    reference = reference_neox(n_layers=3)
    directory = write_neox_dir(tmp_path, reference, weights=weights, config_style=config_style, dtype=dtype)
    bundle = load_pretrained(directory)
    assert all(p.dtype == torch.float32 for p in bundle.model.parameters())
    compare(bundle, rounded_to(reference, dtype))          # a float16 file holds rounded weights, and we read those


def test_every_weight_read_from_a_bin_file_owns_exactly_its_memory(tmp_path):
    """No weight is a view on the memory-mapped file, which would keep all of it (padding rows too) alive."""
    bundle = load_pretrained(write_neox_dir(tmp_path, reference_neox(), weights="bin", dtype=torch.float16))
    for name, p in bundle.model.named_parameters():
        assert p.is_contiguous() and p.dtype == torch.float32, name
        assert p.untyped_storage().nbytes() == p.numel() * 4, name


def test_reading_in_pieces_with_the_key_value_cache_gives_the_logits_of_reading_at_once(tmp_path):
    """Partial rotary positions turn each new token's query and key by its own position's angles."""
    bundle = load_pretrained(write_neox_dir(tmp_path, reference_neox()))
    ids = torch.tensor([bundle.tokenizer.encode(SENTENCE)])
    logits, cache = bundle.model.read(ids[:, :7])
    more, _ = bundle.model.read(ids[:, 7:], cache)
    torch.testing.assert_close(torch.cat([logits, more], dim=1), bundle.model.run(ids)["logits"], rtol=0, atol=1e-5)


def test_the_vocabulary_is_the_tokenizers_and_model_config_says_so_without_reading_weights(tmp_path):
    directory = write_neox_dir(tmp_path, reference_neox(vocab_size=600))
    assert model_config(directory).vocab_size == TOKENS == load_tokenizer_json(directory / "tokenizer.json").vocab_size
    assert neox_config(json.loads((directory / "config.json").read_text())).vocab_size == 600      # the file's rows


def test_pythias_own_tokenizer_format_with_its_nfc_normalizer_is_read(tmp_path):
    tokenizer = load_tokenizer_json(neox_style_tokenizer_json(tmp_path / "tokenizer.json", nfc=True))
    assert tokenizer.encode("cafe\u0301") == tokenizer.encode("caf\u00e9")               # NFC: one é either way
    assert tokenizer.vocab[-len(SPACES):] == list(SPACES) and tokenizer.vocab_size == TOKENS   # its runs of spaces


# --- what is refused ---------------------------------------------------------------------------------------------

def _edit_config(directory, **fields):
    spec = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps(spec | fields))


@pytest.mark.parametrize("change, message", [
    (dict(hidden_act="relu"), "GPT-NeoX variant is not supported .*activation 'relu'"),
    (dict(attention_bias=False), "GPT-NeoX variant is not supported .*attention without biases"),
    (dict(rope_scaling={"type": "linear", "factor": 2.0}), "GPT-NeoX variant .*rotary positions of kind 'linear'"),
    (dict(rotary_pct=0.1), r"the turned part of a head .* = 0"),
    (dict(model_type="gpt_neox_japanese"), "describes a gpt_neox_japanese: this app loads GPT-2 and Llama.*GPT-NeoX"),
    (dict(hidden_size=None), "lacks a GPT-NeoX size field|must be a whole number"),
    (dict(vocab_size=500), "the tokenizer has 577 tokens but the model expects 500"),
])
def test_a_variant_we_do_not_compute_is_refused_in_plain_words(tmp_path, change, message):
    directory = write_neox_dir(tmp_path, reference_neox())
    _edit_config(directory, **change)
    with pytest.raises(ValueError, match=message):
        load_pretrained(directory)


def test_a_config_without_its_size_fields_is_refused():
    with pytest.raises(ValueError, match="lacks a GPT-NeoX size field .*hidden_size"):
        neox_config({"model_type": "gpt_neox", "vocab_size": 600})


class Opens:
    """A pickled object whose unpickling opens (so creates) a file: what weights_only=True must never run."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


@pytest.mark.parametrize("content, message", [
    (lambda marker: {"gpt_neox.embed_in.weight": Opens(marker)}, "could not be read as weights .*Unpickling"),
    (lambda marker: [torch.zeros(2)], "holds something other than named tensors"),
    (lambda marker: {"gpt_neox.embed_in.weight": 3}, "holds something other than named tensors"),
])
def test_a_bin_file_holding_anything_but_tensors_is_refused_and_never_runs_code(tmp_path, content, message):
    directory = write_neox_dir(tmp_path / "model", reference_neox(), weights="bin")
    marker = tmp_path / "ran"
    torch.save(content(marker), directory / "pytorch_model.bin")
    with pytest.raises(ValueError, match=message):
        load_pretrained(directory)
    assert not marker.exists()


@pytest.mark.parametrize("damage, message", [
    (lambda t: t.pop("gpt_neox.layers.1.mlp.dense_h_to_4h.bias"), "lacks the weight"),
    (lambda t: t.pop("embed_out.weight"), "lacks the weight 'embed_out.weight'"),
    (lambda t: t.update({"gpt_neox.layers.0.extra": torch.zeros(2)}), "unexpected weights"),
    (lambda t: t.update({"gpt_neox.layers.0.attention.query_key_value.weight": torch.zeros(90, 32)}),
     r"query_key_value has shape \(90, 32\)"),
    (lambda t: t["gpt_neox.final_layer_norm.bias"].fill_(float("nan")), "NaN or infinite"),
])
def test_a_broken_file_gives_a_plain_error(tmp_path, damage, message):
    directory = write_neox_dir(tmp_path, reference_neox())
    tensors = load_file(directory / "model.safetensors")
    damage(tensors)
    save_file(tensors, directory / "model.safetensors")
    with pytest.raises(ValueError, match=message):
        load_pretrained(directory)


def test_a_directory_without_weights_says_which_files_it_lacks(tmp_path):
    directory = write_neox_dir(tmp_path, reference_neox())
    (directory / "model.safetensors").unlink()
    with pytest.raises(ValueError, match="lacks model.safetensors or pytorch_model.bin"):
        load_pretrained(directory)


def test_older_files_buffers_are_skipped_and_not_taken_for_weights(tmp_path):
    """Pythia's files carry attention.bias (the causal mask, beside the real attention.dense.bias), masked_bias and
    rotary_emb.inv_freq in every layer."""
    reference = reference_neox()
    directory = write_neox_dir(tmp_path, reference, weights="bin")
    assert "gpt_neox.layers.1.attention.bias" in torch.load(directory / "pytorch_model.bin", weights_only=True)
    compare(load_pretrained(directory), reference)


# --- the hub: Pythia's sizes, its checkpoints, offline ---------------------------------------------------------

@pytest.mark.parametrize("spec, shape", [(PYTHIA_70M, (512, 8, 6)), (PYTHIA_160M, (768, 12, 12))],
                         ids=["70m", "160m"])
def test_pythias_parameter_counts_are_those_of_their_real_shapes(spec, shape):
    d, heads, layers = shape
    real = {"model_type": "gpt_neox", "vocab_size": 50_304, "hidden_size": d, "num_attention_heads": heads,
            "num_hidden_layers": layers, "intermediate_size": 4 * d, "max_position_embeddings": 2048,
            "rotary_pct": 0.25, "rotary_emb_base": 10_000, "use_parallel_residual": True, "hidden_act": "gelu",
            "layer_norm_eps": 1e-5, "tie_word_embeddings": False}
    cfg = neox_config(real)
    assert (cfg.d_rotary, cfg.parallel, cfg.tie_embeddings) == (d // heads // 4, True, False)
    with torch.device("meta"):
        assert sum(p.numel() for p in TransformerLM(cfg).parameters()) == spec.parameters
    assert spec.revision == "step143000" and spec.files == ("config.json", "pytorch_model.bin", "tokenizer.json")
    assert "Apache 2.0" in spec.about and f"{spec.download_mb} MB" in spec.about


def test_the_checkpoints_offered_are_steps_pythia_saved():
    assert PYTHIA_70M.steps == PYTHIA_160M.steps == (0, 64, 512, 1000, 2000, 8000, 33000, 143000)
    assert len(PYTHIA_STEPS) == 154 and set(PYTHIA_70M.steps) <= set(PYTHIA_STEPS)
    early = at_step(PYTHIA_70M, 1000)
    assert (early.repo_id, early.revision, early.label) == ("EleutherAI/pythia-70m", "step1000",
                                                            "Pythia-70M at step 1,000 of 143,000")
    assert at_step(early, 512).label == "Pythia-70M at step 512 of 143,000"


@pytest.mark.parametrize("spec, step, message", [
    (PYTHIA_70M, 1500, "was not saved at step 1500"), (PYTHIA_70M, 3, "was not saved at step 3"),
    (PYTHIA_70M, 1000.0, "was not saved at step 1000.0"), (hub.GPT2, 1000, "GPT-2 small has no training checkpoints"),
])
def test_a_step_that_was_not_saved_is_refused(spec, step, message):
    with pytest.raises(ValueError, match=message):
        at_step(spec, step)


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a connection or to download fails the test; the hub is offline."""
    def refuse(*args, **kwargs):
        raise AssertionError("the network was used")
    download = hub.hf_hub_download

    def local_only(*args, **kwargs):
        assert kwargs.get("local_files_only"), "a download was attempted"
        return download(*args, **kwargs)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(hub, "hf_hub_download", local_only)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_each_checkpoint_is_fetched_offline_from_the_cache_and_is_its_own_model(tmp_path, no_network):
    cache, references = pythia_hub_cache(tmp_path, steps=(0, 1000, 143_000))
    logits = {}
    for step, reference in references.items():
        directory = fetch(at_step(PYTHIA_70M, step), cache_dir=cache)
        assert directory.name == fake_commit(PYTHIA_70M.repo_id, step)
        bundle = load_pretrained(directory)
        assert bundle.facts["source"] == "EleutherAI/pythia-70m" and bundle.facts["licence"] == "Apache 2.0"
        logits[step] = compare(bundle, reference)
    assert fetch(PYTHIA_70M, cache_dir=cache) == fetch(at_step(PYTHIA_70M, 143_000), cache_dir=cache)   # the final
    assert not torch.allclose(logits[0], logits[1000]) and not torch.allclose(logits[1000], logits[143_000])
    assert hub.cached(at_step(PYTHIA_70M, 1000), cache) is not None and hub.cached(PYTHIA_160M, cache) is None


def test_a_step_missing_from_the_cache_offline_says_so_in_plain_words(tmp_path, no_network):
    cache, _ = pythia_hub_cache(tmp_path, steps=(1000,))
    with pytest.raises(HubUnavailable) as caught:
        fetch(at_step(PYTHIA_70M, 2000), cache_dir=cache)
    message = str(caught.value)
    assert message.startswith("Pythia-70M at step 2,000 of 143,000 needs a one-time download of config.json, "
                              "pytorch_model.bin, tokenizer.json")
    assert "offline" in message and "Traceback" not in message

