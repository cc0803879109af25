"""SmolLM2-135M's full shape (135M parameters, random weights: time and memory do not depend on them), written in
the Hugging Face hub's layout to a disk cache (no network): every page's script run with its trace cached, then a
real server with 10 visitors exploring it, 10 more on GPT-2 small's shape beside them, and then a class of 30 led
through a lesson on the same server (bench/cloud.py's class: a teacher and 30 websocket students)."""
import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
import tempfile
import time
from pathlib import Path

import torch

from .gpt2 import SENTENCE, gpt2_shaped_snapshot, pages
from .live import launch, open_view, rss_mb, serve, step_slugs
from .report import Report

AREA = "smollm2"
CONFIG = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 49_152, "hidden_size": 576,
          "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
          "head_dim": 64, "hidden_act": "silu", "max_position_embeddings": 8192, "rope_theta": 100_000.0,
          "rms_norm_eps": 1e-5, "tie_word_embeddings": True, "attention_bias": False, "mlp_bias": False}


def run(report: Report, visitors: int = 10, students: int = 30) -> None:
    from model import hub

    with tempfile.TemporaryDirectory() as folder:
        cache = Path(folder) / "hub"
        smollm2_shaped_snapshot(cache, hub.SMOLLM2)
        gpt2_shaped_snapshot(cache, hub.GPT2)
        pages(report, cache, name="smollm2", area=AREA)
        server(report, cache, visitors, students)


def server(report: Report, cache: Path, visitors: int, students: int) -> None:
    """A real server: `visitors` Chromium tabs exploring SmolLM2 on the step pages, then as many more on GPT-2, then
    (with every tab still open) a class of `students` led from tinytales steps onto a GPT-2 step."""
    from playwright.sync_api import sync_playwright

    from .cloud import lead

    slugs = step_slugs()
    env = {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    with sync_playwright() as playwright, serve(env=env) as (base, process):
        browser = launch(playwright)
        tabs = [browser.new_context().new_page() for _ in range(2 * visitors)]
        for i, tab in enumerate(tabs[:visitors]):
            open_view(tab, base, slugs[i % len(slugs)], model="smollm2", text=f"{SENTENCE} {i}")
        alone = report.record("smollm2.server_mb", rss_mb(process.pid))
        for i, tab in enumerate(tabs[visitors:]):
            open_view(tab, base, slugs[i % len(slugs)], model="gpt2", text=f"{SENTENCE} {i}")
        both = report.record("smollm2.with_gpt2_mb", rss_mb(process.pid))
        with ThreadPoolExecutor(1) as thread:             # Playwright's loop runs in this one: the class's in its own
            out = thread.submit(asyncio.run, lead(base, students, lambda: rss_mb(process.pid))).result()
        in_class = report.record("smollm2.with_class_mb", max(out["rss_mb"], rss_mb(process.pid)))
        browser.close()
    report.line(AREA, f"server: {visitors} visitors exploring SmolLM2 {alone:.0f} MB; with {visitors} more on GPT-2 "
                      f"{both:.0f} MB (the cache keeps one pretrained model; a session that still shows the other keeps "
                      f"it too: explorer/app/models.py); and a class of {students} led onto a GPT-2 step beside them "
                      f"{in_class:.0f} MB (the largest seen)")
    if out["problems"]:
        raise RuntimeError(f"the class showed an exception: {out['problems'][:3]}")


def smollm2_shaped_snapshot(cache: Path, spec, seed: int = 0) -> Path:
    """SmolLM2's files (config.json, model.safetensors in bfloat16, tokenizer.json) with random weights at its full
    shape, where the hub's cache keeps `spec`'s snapshot; returns the snapshot's directory."""
    from safetensors.torch import save_file

    from model.pretrained import LLAMA_BLOCK

    snapshot = cache / f"models--{spec.repo_id.replace('/', '--')}" / "snapshots" / spec.revision
    snapshot.mkdir(parents=True, exist_ok=True)
    (snapshot / "config.json").write_text(json.dumps(CONFIG))
    g = torch.Generator().manual_seed(seed)
    D, F, K = CONFIG["hidden_size"], CONFIG["intermediate_size"], CONFIG["head_dim"]
    kv = CONFIG["num_key_value_heads"] * K

    def rand(*shape):
        return (torch.randn(*shape, generator=g) * 0.02).to(torch.bfloat16)

    shapes = {"input_layernorm": (D,), "self_attn.q_proj": (D, D), "self_attn.k_proj": (kv, D),
              "self_attn.v_proj": (kv, D), "self_attn.o_proj": (D, D), "post_attention_layernorm": (D,),
              "mlp.gate_proj": (F, D), "mlp.up_proj": (F, D), "mlp.down_proj": (D, F)}
    assert set(shapes) == {theirs for theirs, _ in LLAMA_BLOCK}
    weights = {"model.embed_tokens.weight": rand(CONFIG["vocab_size"], D),
               "model.norm.weight": torch.ones(D, dtype=torch.bfloat16)}
    for i in range(CONFIG["num_hidden_layers"]):
        for name, shape in shapes.items():
            weights[f"model.layers.{i}.{name}.weight"] = (torch.ones(shape, dtype=torch.bfloat16)
                                                          if "layernorm" in name else rand(*shape))
    save_file(weights, snapshot / "model.safetensors", metadata={"format": "pt"})
    (snapshot / "tokenizer.json").write_text(smollm2_style_tokenizer_json(CONFIG["vocab_size"]), encoding="utf-8")
    return snapshot


def smollm2_style_tokenizer_json(vocab_size: int) -> str:
    """A byte-level BPE in SmolLM2's format (digits split one by one) trained on the benchmark's sentence, padded
    with tokens no text reaches up to `vocab_size` (the model's vocabulary must match its tokenizer's)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([SENTENCE * 20], trainer)
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    for i in range(vocab_size - len(vocab)):
        vocab[f"<pad_{i}>"] = len(vocab)
    return json.dumps(spec)
