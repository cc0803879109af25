"""SmolLM2 (a Llama-architecture model) for tests that cannot reach the Hugging Face hub.

    smollm2_style_tokenizer_json(path, ...)  a tokenizer.json in SmolLM2's format (byte-level BPE after splitting
                                             digits, its 17 special tokens first), trained here with `tokenizers`
    reference_llama(...)                     transformers' own LlamaForCausalLM (a test-only reference) with random
                                             weights large enough that a wrong rotation or head grouping shows
    write_llama_dir(path, reference)         a directory in the hub's layout (SmolLM2's config.json, bfloat16 or
                                             float32 model.safetensors without lm_head), or as save_pretrained writes
                                             it (transformers 5: rope_parameters), for load_pretrained
    smollm2_hub_cache(root, d_model)         a Hugging Face cache holding a SmolLM2-shaped model (random weights)
                                             where SmolLM2's files would be: for the app's tests
"""
import functools
import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from gpt2_support import copy_into_hub_cache

# SmolLM2's special tokens, ids 0 to 16 of its vocabulary, in its order
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>", "<reponame>", "<file_sep>", "<filename>",
            "<gh_stars>", "<issue_start>", "<issue_comment>", "<issue_closed>", "<jupyter_start>", "<jupyter_text>",
            "<jupyter_code>", "<jupyter_output>", "<jupyter_script>", "<empty_output>"]
SMOLLM2_SHAPE = dict(vocab_size=49_152, n_layers=30, n_heads=9, n_kv_heads=3, d_model=576, d_ff=1536,
                     n_positions=8192, rope_theta=100_000.0)
TEXT = ("Paris is the capital of France, and the quick brown fox jumps over the lazy dog. In 2024, 135 million "
        "numbers were enough for a small model to write 12 + 30 = 42 and def add(a, b): return a + b. ") * 20


@functools.cache
def _tokenizer_json_text(vocab_size: int) -> str:
    """Trained on TEXT up to what it offers, then padded with tokens no text reaches, to `vocab_size`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=min(vocab_size, 600), special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([TEXT], trainer)
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    for i in range(vocab_size - len(vocab)):
        vocab[f"<pad_{i}>"] = len(vocab)
    assert len(vocab) == vocab_size and [vocab[s] for s in SPECIALS] == list(range(len(SPECIALS)))
    return json.dumps(spec)


def smollm2_style_tokenizer_json(path: Path, vocab_size: int = 600) -> Path:
    """Write a tokenizer.json in SmolLM2's format with `vocab_size` tokens to `path` (a file) and return it."""
    path.write_text(_tokenizer_json_text(vocab_size), encoding="utf-8")
    return path


def reference_llama(n_layers=2, n_heads=9, n_kv_heads=3, d_model=36, d_ff=40, vocab_size=600, n_positions=64,
                    rope_theta=100_000.0, tie=True, bias=False, seed=0, init=0.3):
    """A random LlamaForCausalLM; every weight, RMSNorms included, drawn with std `init` (Llama's 0.02 would leave a
    wrong rotation or key/value grouping within 1e-4 of the right logits)."""
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=d_model, intermediate_size=d_ff, num_hidden_layers=n_layers,
                      num_attention_heads=n_heads, num_key_value_heads=n_kv_heads, max_position_embeddings=n_positions,
                      rope_theta=rope_theta, rms_norm_eps=1e-5, tie_word_embeddings=tie, attention_bias=bias,
                      mlp_bias=bias, initializer_range=init, bos_token_id=0, eos_token_id=0)
    cfg._attn_implementation = "eager"                   # attention patterns come back only from "eager"
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + init * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(init * torch.randn_like(p))
    return model


def hub_config(reference) -> dict:
    """config.json as the hub serves SmolLM2-135M's (written by transformers 4.40: rope_theta at the top level)."""
    c = reference.config
    return {"architectures": ["LlamaForCausalLM"], "attention_bias": c.attention_bias, "attention_dropout": 0.0,
            "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "silu", "hidden_size": c.hidden_size,
            "initializer_range": 0.041666666666666664, "intermediate_size": c.intermediate_size,
            "is_llama_config": True, "max_position_embeddings": c.max_position_embeddings, "mlp_bias": c.mlp_bias,
            "model_type": "llama", "num_attention_heads": c.num_attention_heads,
            "num_hidden_layers": c.num_hidden_layers, "num_key_value_heads": c.num_key_value_heads,
            "pretraining_tp": 1, "rms_norm_eps": c.rms_norm_eps, "rope_interleaved": False, "rope_scaling": None,
            "rope_theta": c.rope_parameters["rope_theta"], "tie_word_embeddings": c.tie_word_embeddings,
            "torch_dtype": "bfloat16", "transformers_version": "4.40.1", "use_cache": True,
            "vocab_size": c.vocab_size}


def write_llama_dir(path: Path, reference, layout: str = "hub", dtype=torch.float32) -> Path:
    """Save `reference` into `path` as the hub serves SmolLM2 ("hub": its config.json, `model.`-prefixed weights in
    `dtype`, no lm_head when tied) or as transformers 5's `save_pretrained` writes it ("saved"), with a tokenizer.json
    in SmolLM2's format of the model's vocabulary size."""
    path.mkdir(parents=True, exist_ok=True)
    if layout == "saved":
        reference.save_pretrained(path)
    else:
        tensors = {k: v.detach().to(dtype).contiguous() for k, v in reference.state_dict().items()
                   if not (k == "lm_head.weight" and reference.config.tie_word_embeddings)}
        save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
        (path / "config.json").write_text(json.dumps(hub_config(reference), indent=2))
    smollm2_style_tokenizer_json(path / "tokenizer.json", reference.config.vocab_size)
    return path


def rounded_to(reference, dtype):
    """`reference` with every weight rounded to `dtype` and back: what a file of that dtype holds."""
    with torch.no_grad():
        for p in reference.parameters():
            p.copy_(p.to(dtype).float())
    return reference


def smollm2_shaped_dir(path: Path, d_model=36, seed=0) -> Path:
    """SmolLM2-135M's shape (30 layers, 9 heads sharing 3 key/value heads, 49,152 tokens, 8,192 positions, rotary
    base 100,000) at a small width (d_model 36: 4 dimensions per head), saved in bfloat16 as the hub's file is."""
    shape = SMOLLM2_SHAPE | dict(d_model=d_model, d_ff=d_model * 8 // 3)
    return write_llama_dir(path, reference_llama(**shape, seed=seed, init=0.1), dtype=torch.bfloat16)


def smollm2_hub_cache(root: Path, d_model: int = 36) -> Path:
    """A Hugging Face cache under `root` holding a SmolLM2-shaped model (random weights) where SmolLM2's files
    would be."""
    from model.hub import SMOLLM2
    cache = root / "hub"
    copy_into_hub_cache(smollm2_shaped_dir(root / "files", d_model=d_model), cache, SMOLLM2)
    return cache
