"""Pythia (GPT-NeoX) for tests that cannot reach the Hugging Face hub.

    neox_style_tokenizer_json(path, ...)   a tokenizer.json in Pythia's format (NFC normaliser, byte-level BPE,
                                           <|endoftext|> id 0, <|padding|> id 1, runs of 24 down to 2 spaces added
                                           after the BPE vocabulary), trained here with `tokenizers`, with fewer
                                           tokens than the model has vocabulary rows, as Pythia's (50,277 tokens,
                                           50,304 rows)
    reference_neox(...)                    transformers' own GPTNeoXForCausalLM (a test-only reference) with random
                                           weights large enough that a wrong rotation or q/k/v interleave shows
    write_neox_dir(path, reference, ...)   a directory in the hub's layout: Pythia's config.json (transformers 4's
                                           fields) or transformers 5's, model.safetensors or pytorch_model.bin
                                           (float32 or float16, with the buffers Pythia's files carry)
    pythia_hub_cache(root, steps, ...)     a Hugging Face cache holding Pythia-70M's repository at several training
                                           steps (branches "step<N>", each its own random weights): for
                                           hub.fetch(hub.at_step(hub.PYTHIA_70M, N), cache_dir=root) offline
"""
import functools
import hashlib
import json
import os
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file

from llama_support import TEXT

SPECIALS = ["<|endoftext|>", "<|padding|>"]       # Pythia's ids 0 and 1
TOKENS = 577                                      # the tokenizer's size: 23 of the model's 600 rows are padding
# Pythia's tokenizer.json normalises text to Unicode NFC first, and after its BPE vocabulary (ids 0 to 50253) adds
# 23 tokens that are not special: runs of 24 spaces (id 50254) down to 2 spaces (id 50276), found in the text before
# the merges run. The files written here do the same (nfc=False leaves both out: a plain GPT-2-like file).
NFC = True
SPACES = tuple(" " * n for n in range(24, 1, -1))


@functools.cache
def neox_style_tokenizer_text(vocab_size: int = TOKENS, nfc: bool = NFC, corpus: str = TEXT) -> str:
    """The JSON of a tokenizer in Pythia's format: trained on `corpus` up to what it offers, then padded with tokens
    no text reaches, to `vocab_size` tokens in all; with `nfc`, Pythia's NFC normaliser and its runs of spaces
    (SPACES) as the last tokens, after the BPE vocabulary."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=True)
    spaces = SPACES if nfc else ()
    bpe_size = vocab_size - len(spaces)
    trainer = trainers.BpeTrainer(vocab_size=bpe_size, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([corpus], trainer)
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    for i in range(bpe_size - len(vocab)):
        vocab[f"<pad_{i}>"] = len(vocab)
    spec["added_tokens"] += [{"id": bpe_size + i, "content": s, "single_word": False, "lstrip": False,
                              "rstrip": False, "normalized": True, "special": False} for i, s in enumerate(spaces)]
    assert len(vocab) == bpe_size and [vocab[s] for s in SPECIALS] == [0, 1]
    return json.dumps(spec)


def neox_style_tokenizer_json(path: Path, vocab_size: int = TOKENS, nfc: bool = NFC) -> Path:
    """Write a tokenizer.json in Pythia's format with `vocab_size` tokens to `path` (a file) and return it."""
    path.write_text(neox_style_tokenizer_text(vocab_size, nfc), encoding="utf-8")
    return path


def reference_neox(n_layers=2, n_heads=4, d_model=32, d_ff=48, vocab_size=600, n_positions=64, rotary_fraction=0.25,
                   parallel=True, seed=0, init=0.3):
    """A random GPTNeoXForCausalLM; every weight, LayerNorms included, drawn with std `init` (Pythia's 0.02 would
    leave a wrong rotation or a wrong q/k/v interleave within 1e-4 of the right logits)."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    torch.manual_seed(seed)
    cfg = GPTNeoXConfig(vocab_size=vocab_size, hidden_size=d_model, num_hidden_layers=n_layers,
                        num_attention_heads=n_heads, intermediate_size=d_ff, max_position_embeddings=n_positions,
                        rope_parameters={"rope_type": "default", "rope_theta": 10_000.0,
                                         "partial_rotary_factor": rotary_fraction},
                        use_parallel_residual=parallel, hidden_act="gelu", layer_norm_eps=1e-5,
                        tie_word_embeddings=False, initializer_range=init, attention_dropout=0.0, hidden_dropout=0.0,
                        bos_token_id=0, eos_token_id=0)
    cfg._attn_implementation = "eager"                   # attention patterns come back only from "eager"
    model = GPTNeoXForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layernorm" in name or "layer_norm" in name:
                p.copy_(1.0 + init * torch.randn_like(p) if name.endswith("weight") else init * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(init * torch.randn_like(p))
    return model


def hub_config(reference) -> dict:
    """config.json as the hub serves Pythia's (written by transformers 4.24: rotary_pct, rotary_emb_base, no
    attention_bias)."""
    c = reference.config
    return {"architectures": ["GPTNeoXForCausalLM"], "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "gelu",
            "hidden_size": c.hidden_size, "initializer_range": 0.02, "intermediate_size": c.intermediate_size,
            "layer_norm_eps": c.layer_norm_eps, "max_position_embeddings": c.max_position_embeddings,
            "model_type": "gpt_neox", "num_attention_heads": c.num_attention_heads,
            "num_hidden_layers": c.num_hidden_layers, "rotary_emb_base": c.rope_parameters["rope_theta"],
            "rotary_pct": c.rope_parameters["partial_rotary_factor"], "tie_word_embeddings": False,
            "torch_dtype": "float16", "transformers_version": "4.24.0", "use_cache": True,
            "use_parallel_residual": c.use_parallel_residual, "vocab_size": c.vocab_size}


def old_buffers(reference) -> dict[str, torch.Tensor]:
    """The non-weights Pythia's files carry in each layer: the causal mask, its fill value, the rotary frequencies."""
    c, n = reference.config, reference.config.max_position_embeddings
    rotary = int(c.hidden_size // c.num_attention_heads * c.rope_parameters["partial_rotary_factor"])
    buffers = {}
    for i in range(c.num_hidden_layers):
        a = f"gpt_neox.layers.{i}.attention"
        buffers[f"{a}.bias"] = torch.ones(1, 1, n, n, dtype=torch.bool).tril()
        buffers[f"{a}.masked_bias"] = torch.tensor(-1e9)
        buffers[f"{a}.rotary_emb.inv_freq"] = 1.0 / 10_000 ** (torch.arange(0, rotary, 2).float() / rotary)
    return buffers


def write_neox_dir(path: Path, reference, weights: str = "safetensors", config_style: str = "hub",
                   dtype=torch.float32, tokens: int = TOKENS, nfc: bool = NFC) -> Path:
    """Save `reference` into `path` in the hub's layout: its weights in `dtype` as model.safetensors or
    pytorch_model.bin ("bin": with the buffers Pythia's files carry), config.json as Pythia's ("hub") or as
    transformers 5's save_pretrained writes it ("v5": rope_parameters, defaults left out), and a tokenizer.json in
    Pythia's format with `tokens` tokens. Pythia's files name the unembedding embed_out, transformers 5's lm_head."""
    path.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to(dtype).contiguous() for k, v in reference.state_dict().items()}
    if config_style == "hub":
        tensors["embed_out.weight"] = tensors.pop("lm_head.weight")
    if weights == "bin":
        torch.save(tensors | old_buffers(reference), path / "pytorch_model.bin")
    else:
        save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
    config = hub_config(reference) if config_style == "hub" else json.loads(reference.config.to_json_string())
    (path / "config.json").write_text(json.dumps(config, indent=2))
    neox_style_tokenizer_json(path / "tokenizer.json", tokens, nfc)
    return path


def fake_commit(repo_id: str, step: int) -> str:
    """A 40-digit commit id standing for the branch "step<N>" of `repo_id`."""
    return hashlib.sha1(f"{repo_id}@step{step}".encode()).hexdigest()


def pythia_hub_cache(root: Path, steps=(0, 1000, 143_000), spec=None, **shape) -> tuple[Path, dict]:
    """A Hugging Face cache under `root` holding `spec`'s repository (Pythia-70M's) at each of `steps`, as downloads
    leave it: blobs/<sha256>, snapshots/<commit>/<file> (a link to its blob), refs/step<N> (that commit). Each step's
    weights are their own (seed = the step), float16 pytorch_model.bin files as Pythia's branches hold. Returns the
    cache and each step's reference model (rounded to float16, what the files hold)."""
    from llama_support import rounded_to
    from model.hub import PYTHIA_70M
    spec = spec or PYTHIA_70M
    cache = root / "hub"
    repo = cache / f"models--{spec.repo_id.replace('/', '--')}"
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    references = {}
    for step in steps:
        reference = reference_neox(seed=step, **shape)
        files = write_neox_dir(root / "files" / f"step{step}", reference, weights="bin", dtype=torch.float16)
        commit = fake_commit(spec.repo_id, step)
        snapshot = repo / "snapshots" / commit
        snapshot.mkdir(parents=True, exist_ok=True)
        for name in spec.files:
            blob = hashlib.sha256((files / name).read_bytes()).hexdigest()
            if not (repo / "blobs" / blob).exists():
                shutil.copy(files / name, repo / "blobs" / blob)
            os.symlink(Path("..", "..", "blobs", blob), snapshot / name)
        (repo / "refs" / f"step{step}").write_text(commit)
        references[step] = rounded_to(reference, torch.float16)
    return cache, references
