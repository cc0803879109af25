"""Pythia (issue 42): Pythia-70M's full shape at the 8 training steps the picker shows (random weights, different at
each step: time and memory do not depend on them), written as the Hugging Face hub's cache keeps one repository at
several revisions (blobs/, snapshots/<commit>/, refs/step<N>), float16 pytorch_model.bin files with the buffers
Pythia's carry (~160 MB each). Then: switching the training step on a page (the checkpoint on disk but not in
memory, then back to a step in memory), Watch it learn over the 8 steps the first time, and the memory of a server
with Pythia at two steps, GPT-2 small and a class of 30.

Every measure computes with one torch thread, as the app's server does. The memory is measured in a fresh process
(AppTest: every visitor's and student's script run there, as on one server), as bench/features.py does.

    python -c "from bench import pythia; pythia.run(students=3)"
"""
import contextlib
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from .live import ROOT, rss_mb
from .report import Report
from .timing import torch_threads

AREA = "pythia"
SENTENCE = ("Paris is the capital of France, and my name is Sara. I love pizza and cats, and every morning I walk "
            "to the old bakery near")
# Pythia-70M's config.json as the hub serves it (transformers 4.24's fields)
CONFIG = {"architectures": ["GPTNeoXForCausalLM"], "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "gelu",
          "hidden_size": 512, "initializer_range": 0.02, "intermediate_size": 2048, "layer_norm_eps": 1e-5,
          "max_position_embeddings": 2048, "model_type": "gpt_neox", "num_attention_heads": 8,
          "num_hidden_layers": 6, "rotary_emb_base": 10_000, "rotary_pct": 0.25, "tie_word_embeddings": False,
          "torch_dtype": "float16", "transformers_version": "4.24.0", "use_cache": True,
          "use_parallel_residual": True, "vocab_size": 50_304}
TOKENS = 50_277                              # Pythia's tokenizer: 50,254 BPE tokens (0: <|endoftext|>, 1: <|padding|>),
SPACES = tuple(" " * n for n in range(24, 1, -1))        # then runs of 24 down to 2 spaces, ids 50,254 to 50,276
SWITCH_FROM, SWITCH_TO = 1000, 8000          # the step a page shows, the step a student switches to (then back)
NEW_STEPS = (SWITCH_TO, 2000, 64)            # the steps switched to from SWITCH_FROM, each not in memory yet


def run(report: Report | None = None, students: int = 30) -> None:
    """Build the cache (Pythia-70M at hub.SHOWN_STEPS, GPT-2 small), then measure; fewer `students` only check that
    the area runs."""
    from model import hub

    from .gpt2 import gpt2_shaped_snapshot

    report = report or Report()
    with tempfile.TemporaryDirectory() as folder:
        cache = Path(folder) / "hub"
        start = time.perf_counter()
        pythia_shaped_cache(cache, hub.PYTHIA_70M, hub.SHOWN_STEPS)
        gpt2_shaped_snapshot(cache, hub.GPT2)
        os.sync()                   # on disk, as a server's downloads long are: no writeback during the measures
        size = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file() and not f.is_symlink())
        report.line(AREA, f"the prepared cache: Pythia-70M's shape at {len(hub.SHOWN_STEPS)} steps and GPT-2 small's, "
                          f"{size / 1e9:.2f} GB, written in {time.perf_counter() - start:.0f} s")
        env = {**os.environ, "EXPLORER_CACHE": str(Path(folder) / "explorer"), "HF_HUB_OFFLINE": "1"}
        report_step_switch(report, in_a_fresh_process(step_switch_in_this_process, cache, env))
        report_learn(report, in_a_fresh_process(learn_in_this_process, cache, env))
        report_memory(report, in_a_fresh_process(memory_in_this_process, cache, env, students), students)


def in_a_fresh_process(measure, cache: Path, env: dict, *args) -> dict:
    """`measure(cache, *args)` (a function of this module) in a fresh Python (nothing of Pythia in memory, the app's
    caches empty); the JSON it prints last."""
    call = ", ".join(repr(a) for a in (str(cache), *args))
    code = f"from bench import pythia; pythia.{measure.__name__}({call})"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=3600,
                         env=env)
    lines = out.stdout.strip().splitlines()
    if out.returncode or not lines:
        raise RuntimeError(f"{measure.__name__} failed: {out.stderr[-1200:]}")
    return json.loads(lines[-1])


# --- switching the training step on a page -------------------------------------------------------------------------

def step_switch_in_this_process(cache: str) -> None:
    """The attention page with Pythia-70M at SWITCH_FROM (loaded and traced), then the step picker moved to each of
    NEW_STEPS (on disk, not in memory: loaded and traced; the app keeps two steps, so each evicts the older) and after
    each back to SWITCH_FROM (in memory, its trace cached); each switch one script run (AppTest), 1 thread. Prints
    the times as JSON, and where a switch to a step not in memory goes (cProfile, step 0)."""
    import cProfile

    from explorer.app import models
    from explorer.registry import BY_SLUG

    from .apptest import compiled_once, open_app, raised

    models.CACHE_DIR = Path(cache)
    torch.set_num_threads(1)

    def switch(at, step):
        start, cpu = time.perf_counter(), time.process_time()
        at.selectbox(key="step").set_value(step).run()
        took = (time.perf_counter() - start, time.process_time() - cpu)
        if raised(at) or at.session_state["step"] != step:
            raise RuntimeError(f"the switch to step {step} failed: {raised(at) or 'the page kept its step'}")
        return took

    with compiled_once():
        start = time.perf_counter()
        at = open_app(BY_SLUG["attention"].file, timeout=300, model=models.at_step("pythia-70m", SWITCH_FROM),
                      text=SENTENCE)
        opened = time.perf_counter() - start
        first, back = [], []
        for step in NEW_STEPS:
            first.append((step, *switch(at, step)))
            back.append(switch(at, SWITCH_FROM))
        profile = cProfile.Profile()
        with profiled_script_runs(profile):
            profiled = switch(at, 0)
    print(json.dumps({"opened_s": opened, "first": first, "back": back, "profiled_s": profiled[0],
                      "profile": where_time_goes(profile)}), flush=True)


@contextlib.contextmanager
def profiled_script_runs(profile):
    """Within the block, `profile` (cProfile) records the app's script runs (AppTest runs them in a thread of their
    own, which a profile of this thread would not see)."""
    from unittest import mock

    from streamlit.runtime.scriptrunner import script_runner

    original = script_runner.ScriptRunner._run_script_thread

    def run_profiled(self):
        profile.enable()
        try:
            original(self)
        finally:
            profile.disable()

    with mock.patch.object(script_runner.ScriptRunner, "_run_script_thread", run_profiled):
        yield


def where_time_goes(profile, top: int = 8) -> list[tuple[str, float]]:
    """The model's and the pages' own functions (not the app's plumbing in explorer/app/, Streamlit's or the standard
    library's) that took the most cumulative time, with torch.load and the weights' finite check: (name, seconds)."""
    import pstats

    ours = []
    for (file, _, name), (_, _, _, cumulative, _) in pstats.Stats(profile).stats.items():
        path = Path(file)
        if str(ROOT) in file and path.parts[len(ROOT.parts)] in ("model", "explorer") and "app" not in path.parts:
            ours.append((f"{path.parent.name}/{path.name} {name}", cumulative))
        elif (name == "load" and file.endswith("torch/serialization.py")) or "isfinite" in name:
            ours.append((name.removeprefix("<built-in method ").removesuffix(">"), cumulative))
    return sorted(ours, key=lambda x: -x[1])[:top]


def report_step_switch(report: Report, measured: dict) -> None:
    """The median of the switches to a step not in memory (one alone moves with a shared machine's load), the
    slowest switch back to a step in memory."""
    first, back = measured["first"], measured["back"]
    median = report.record("pythia.step_switch_first_s", statistics.median(wall for _, wall, _ in first))
    slowest = report.record("pythia.step_switch_cached_ms", max(wall for wall, _ in back) * 1e3)
    report.line(AREA, f"attention page, Pythia-70M at step {SWITCH_FROM:,} opened (load + first trace) in "
                      f"{measured['opened_s']:.1f} s; the step picker moved to a step on disk, not in memory (load + "
                      "trace): " + ", ".join(f"{step:,} {wall:.2f} s ({cpu:.2f} s of CPU)"
                                             for step, wall, cpu in first)
                      + f", median {median:.2f} s; back to {SWITCH_FROM:,} (in memory) each time: "
                      + ", ".join(f"{wall * 1e3:.0f} ms" for wall, _ in back)
                      + f", slowest {slowest:.0f} ms (AppTest, 1 thread)")
    report.line(AREA, f"where a switch to a step not in memory goes (step 0, profiled, {measured['profiled_s']:.2f} s): "
                      + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in measured["profile"]))


# --- Watch it learn --------------------------------------------------------------------------------------------------

def learn_in_this_process(cache: str) -> None:
    """Watch it learn with Pythia-70M (its final step picked and traced first, as a student arrives from another
    page), the first time: every step's checkpoint read from disk and read on the sentence; one script run
    (AppTest), 1 thread. The page's loads and readings are timed as it runs (where its time goes). Prints the times
    as JSON."""
    from explorer.app import learning, models
    from explorer.registry import BY_SLUG
    from model import hub, pretrained

    from .apptest import compiled_once, open_app, raised

    models.CACHE_DIR = Path(cache)
    torch.set_num_threads(1)
    parts = {"loading": [], "tokenizer": [], "reading": [], "induction": []}

    def timed(part, fn):
        def call(*args, **kwargs):
            start = time.perf_counter()
            out = fn(*args, **kwargs)
            parts[part].append(time.perf_counter() - start)
            return out
        call.__wrapped__ = fn
        return call

    with compiled_once():
        at = open_app(None, timeout=300, model="pythia-70m", text=SENTENCE)
        if raised(at):
            raise RuntimeError(f"the home page raised: {raised(at)}")
        tokens = len(at.session_state["view"].ids)
        originals = [(models, "load_files", "loading"), (pretrained, "load_tokenizer_json", "tokenizer"),
                     (learning.learning, "read_checkpoint", "reading"),
                     (learning.learning, "induction_scores", "induction")]
        for module, name, part in originals:
            setattr(module, name, timed(part, getattr(module, name)))
        start, cpu = time.perf_counter(), time.process_time()
        at.switch_page(BY_SLUG["learning"].file).run(timeout=600)
        page, page_cpu = time.perf_counter() - start, time.process_time() - cpu
        for module, name, _ in originals:
            setattr(module, name, getattr(module, name).__wrapped__)
        if raised(at) or len(parts["reading"]) != len(hub.PYTHIA_70M.steps):
            raise RuntimeError(f"Watch it learn raised or did not read every step: {raised(at)}, "
                               f"{len(parts['reading'])} read")
        start = time.perf_counter()
        at.run()
        again = time.perf_counter() - start
    print(json.dumps({"page_s": page, "page_cpu_s": page_cpu, "again_s": again, "tokens": tokens,
                      "steps": len(hub.PYTHIA_70M.steps), **parts}), flush=True)


def report_learn(report: Report, measured: dict) -> None:
    page = report.record("pythia.learn_s", measured["page_s"])
    loading, reading, n = sum(measured["loading"]), sum(measured["reading"]), len(measured["reading"])
    tokenizer, induction = sum(measured["tokenizer"]), sum(measured["induction"])
    report.line(AREA, f"Watch it learn, Pythia-70M over {measured['steps']} steps, {measured['tokens']}-token sentence, "
                      f"the first time (AppTest, 1 thread): {page:.1f} s ({measured['page_cpu_s']:.1f} s of CPU); the "
                      f"page again (every step read already) {measured['again_s'] * 1e3:.0f} ms")
    report.line(AREA, f"  where it goes: loading the {n} checkpoints (models.load_files) {loading:.1f} s "
                      f"({loading / n:.2f} s a step), {tokenizer:.1f} s of it parsing tokenizer.json (the same file at "
                      f"every step); reading each (read_checkpoint) {reading:.1f} s ({reading / n:.2f} s a step), "
                      f"{induction:.1f} s of it the induction scores (the stack on the repeated tokens, no "
                      f"unembedding); the rest (figures, page) {page - loading - reading:.1f} s")


# --- memory: Pythia at two steps, GPT-2 and a class --------------------------------------------------------------

def memory_in_this_process(cache: str, students: int) -> None:
    """A visitor on Pythia-70M at SWITCH_FROM who switches to SWITCH_TO (both steps in memory: the app keeps two),
    another on GPT-2 small, the first visitor opening Watch it learn (every step's checkpoint loaded for its reading
    alone, one at a time), then a teacher and `students` following onto Pythia's attention at SWITCH_FROM
    (bench/classroom.py's class). Prints, as JSON on the last line, this process's memory after each, and its peak."""
    import resource

    from explorer import lessons
    from explorer.app import classroom, models
    from explorer.registry import BY_SLUG
    from model import hub

    from .apptest import compiled_once, open_app, raised
    from .classroom import follow, join, next_step, poll_of, teacher_of
    from .timing import p95

    models.CACHE_DIR = Path(cache)
    torch.set_num_threads(1)
    pythia = models.at_step("pythia-70m", SWITCH_FROM)
    memory = {"at the start": rss_mb(os.getpid())}
    with compiled_once():
        visitor = open_app(None, timeout=300, model=pythia, text=SENTENCE)
        visitor.selectbox(key="step").set_value(SWITCH_TO).run()
        memory[f"Pythia-70M at steps {SWITCH_FROM:,} and {SWITCH_TO:,}"] = rss_mb(os.getpid())
        other = open_app(None, timeout=300, model="gpt2", text=SENTENCE)
        if raised(visitor) or raised(other):
            raise RuntimeError(f"a visitor's page raised: {raised(visitor) or raised(other)}")
        memory["and GPT-2 small"] = rss_mb(os.getpid())
        visitor.switch_page(BY_SLUG["learning"].file).run(timeout=600)
        if raised(visitor):
            raise RuntimeError(f"Watch it learn raised: {raised(visitor)}")
        memory[f"and Watch it learn read at {len(hub.PYTHIA_70M.steps)} steps"] = rss_mb(os.getpid())
        first = json.loads(lessons.ready_lessons()["attention-in-ten-minutes"].to_json())["steps"][:1]
        step = {"page": "attention", "view": {"model": pythia, "text": SENTENCE},
                "note": f"Pythia-70M after {SWITCH_FROM:,} training steps: where does each word look?"}
        lesson = lessons.parse(json.dumps({"title": "Pythia as it learned", "steps": [*first, step]}))
        teacher = teacher_of(steps=lesson.steps)
        crowd = join(teacher.session_state[classroom.CODE], students)
        moved = follow(crowd, [poll_of(at) for at in crowd], 1, next_step(teacher))
        if any(raised(at) for at in crowd):
            raise RuntimeError(f"a student's page raised: {next(raised(at) for at in crowd if raised(at))}")
        memory[f"and a class of {students} on Pythia's step"] = rss_mb(os.getpid())
    memory["the most at any moment (peak RSS)"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"memory": memory, "follow_median_s": statistics.median(moved["waits"]),
                      "follow_p95_s": p95(moved["waits"])}), flush=True)


def report_memory(report: Report, measured: dict, students: int) -> None:
    memory = measured["memory"]
    report.record("pythia.memory_mb", max(memory.values()))
    report.line(AREA, f"{students} students follow the teacher onto Pythia-70M at step {SWITCH_FROM:,}: median "
                      f"{measured['follow_median_s']:.2f} s, p95 {measured['follow_p95_s']:.2f} s (CPU queue)")
    report.line(AREA, "memory of that fresh process (RSS): " + ", ".join(f"{mb:,.0f} MB {stage}"
                                                                        for stage, mb in memory.items()))


# --- Pythia's files, written here ------------------------------------------------------------------------------------

def pythia_shaped_cache(cache: Path, spec, steps, seed: int = 0) -> Path:
    """A Hugging Face cache under `cache` holding `spec`'s repository at each of `steps` as downloads leave it:
    blobs/<sha256>, snapshots/<commit>/<file> (a link to its blob), refs/step<N> (that commit). Each step has its
    own random weights; config.json and tokenizer.json are one blob shared by every step, as on the hub."""
    repo = cache / f"models--{spec.repo_id.replace('/', '--')}"
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    files = cache.parent / "pythia-files"
    files.mkdir(parents=True, exist_ok=True)
    (files / "config.json").write_text(json.dumps(CONFIG, indent=2))
    (files / "tokenizer.json").write_text(pythia_style_tokenizer_json(), encoding="utf-8")
    for step in steps:
        torch.save(pythia_weights(seed + step), files / "pytorch_model.bin")
        commit = hashlib.sha1(f"{spec.repo_id}@step{step}".encode()).hexdigest()
        snapshot = repo / "snapshots" / commit
        snapshot.mkdir(parents=True, exist_ok=True)
        for name in spec.files:
            blob = file_sha256(files / name)
            if not (repo / "blobs" / blob).exists():
                shutil.copy(files / name, repo / "blobs" / blob)
            os.symlink(Path("..", "..", "blobs", blob), snapshot / name)
        (repo / "refs" / f"step{step}").write_text(commit)
    shutil.rmtree(files)
    return cache


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 24), b""):
            digest.update(chunk)
    return digest.hexdigest()


def pythia_weights(seed: int) -> dict[str, torch.Tensor]:
    """Random float16 weights under Pythia's names and shapes (GPTNeoXForCausalLM, transformers 4.24), with the
    buffers Pythia's files carry in each layer (the causal mask, its fill value, the rotary frequencies)."""
    g = torch.Generator().manual_seed(seed)
    D, F, V, N = CONFIG["hidden_size"], CONFIG["intermediate_size"], CONFIG["vocab_size"], \
        CONFIG["max_position_embeddings"]
    rotary = int(D // CONFIG["num_attention_heads"] * CONFIG["rotary_pct"])

    def rand(*shape):
        return (torch.randn(*shape, generator=g) * 0.02).to(torch.float16)

    def norm(name):
        return {f"{name}.weight": torch.ones(D, dtype=torch.float16), f"{name}.bias": torch.zeros(D, dtype=torch.float16)}

    weights = {"gpt_neox.embed_in.weight": rand(V, D)}
    for i in range(CONFIG["num_hidden_layers"]):
        layer = f"gpt_neox.layers.{i}"
        weights |= norm(f"{layer}.input_layernorm") | norm(f"{layer}.post_attention_layernorm")
        weights |= {f"{layer}.attention.bias": torch.ones(1, 1, N, N, dtype=torch.bool).tril(), f"{layer}.attention.masked_bias": torch.tensor(-1e9),
                    f"{layer}.attention.rotary_emb.inv_freq": 1.0 / 10_000 ** (torch.arange(0, rotary, 2).float()
                                                                                / rotary),
                    f"{layer}.attention.query_key_value.weight": rand(3 * D, D),
                    f"{layer}.attention.query_key_value.bias": rand(3 * D),
                    f"{layer}.attention.dense.weight": rand(D, D), f"{layer}.attention.dense.bias": rand(D),
                    f"{layer}.mlp.dense_h_to_4h.weight": rand(F, D), f"{layer}.mlp.dense_h_to_4h.bias": rand(F),
                    f"{layer}.mlp.dense_4h_to_h.weight": rand(D, F), f"{layer}.mlp.dense_4h_to_h.bias": rand(D)}
    weights |= norm("gpt_neox.final_layer_norm") | {"embed_out.weight": rand(V, D)}
    return weights


def pythia_style_tokenizer_json() -> str:
    """A tokenizer.json in Pythia's format and of its size (TOKENS): an NFC normaliser, a byte-level BPE whose ids
    0 and 1 are <|endoftext|> and <|padding|>, then 50,252 BPE tokens and their merges (GPT-2's published ones, as
    bench/gpt2.py reads them: Pythia's own are of the same kind and number), then SPACES as added tokens."""
    from tokenizers import Tokenizer, normalizers

    gpt2 = json.loads(_gpt2_tokenizer_json())
    bpe_size = TOKENS - len(SPACES)
    by_id = sorted((i, t) for t, i in gpt2["model"]["vocab"].items() if t != "<|endoftext|>")
    kept = [t for _, t in by_id[:bpe_size - 2]]
    vocab = {"<|endoftext|>": 0, "<|padding|>": 1} | {t: i + 2 for i, t in enumerate(kept)}
    merges = [m for m in gpt2["model"]["merges"] if "".join(_pair(m)) in vocab and all(p in vocab for p in _pair(m))]
    specials = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
                 "special": True} for t, i in (("<|endoftext|>", 0), ("<|padding|>", 1))]
    spaces = [{"id": bpe_size + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
               "normalized": True, "special": False} for i, s in enumerate(SPACES)]
    spec = {**gpt2, "added_tokens": specials + spaces,
            "model": {**gpt2["model"], "vocab": vocab, "merges": merges}}
    tok = Tokenizer.from_str(json.dumps(spec))
    tok.normalizer = normalizers.NFC()
    out = json.loads(tok.to_str())
    out["post_processor"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    if Tokenizer.from_str(json.dumps(out)).get_vocab_size() != TOKENS:
        raise RuntimeError("the Pythia-style tokenizer does not have Pythia's size")
    return json.dumps(out)


def _pair(merge) -> tuple[str, str]:
    return tuple(merge.split(" ")) if isinstance(merge, str) else tuple(merge)


def _gpt2_tokenizer_json() -> str:
    from .gpt2 import gpt2_tokenizer_json
    return gpt2_tokenizer_json()
