"""Speed benchmark: `python3 dev.py bench` (or `python -m bench` inside .venv).

Each comparison is measured side by side in one run, interleaved, so a busy machine slows both sides
alike; the ratios are what to read. Targets come from the issues:
  trace      model.run() (full trace) vs plain forward, tinytales, 32 tokens     at most 1.5x
  trainer    Trainer.step() vs a minimal PyTorch loop, same model and batch      at least 0.9x
  roses      wall time for the roses preset to reach validation loss 0.05       at most 20 s
  pages      each walk-through page's server-side script run (AppTest), tinytales,
             a 12-word sentence, next to an empty page in the same run          at most 150 ms
             and moving the temperature slider on the prediction page           no model run
"""
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from model import corpora
from model.checkpoint import load_bundled
from model.presets import PRESETS, build
from model.trainer import TrainConfig, Trainer, make_batch
from model.transformer import TransformerLM


def interleaved(fns: dict, reps: int, warmup: int = 5) -> dict[str, float]:
    """Median seconds per call of each function, calling them in turn so noise hits all alike."""
    times = {name: [] for name in fns}
    for rep in range(warmup + reps):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            if rep >= warmup:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def bench_trace() -> None:
    bundle = load_bundled("tinytales")
    model = bundle.model
    ids = bundle.tokenizer.encode(corpora.tiny_tales(20, seed=123))[:32]
    x = torch.tensor([ids])                                                   # (1, 32)
    with torch.no_grad():
        t = interleaved({"forward": lambda: model(x), "run": lambda: model.run(x)}, reps=300)
    print(f"trace    run() {t['run'] * 1e3:.3f} ms vs forward {t['forward'] * 1e3:.3f} ms "
          f"= {t['run'] / t['forward']:.2f}x (target <= 1.5x)")


def bench_trainer(steps_per_call: int = 10) -> None:
    preset = PRESETS["tinytales"]
    tokenizer, cfg, train_ids, val_ids = build(preset)
    recipe = TrainConfig(batch_size=preset.train.batch_size, lr=preset.train.lr, grad_clip=0.0)
    torch.manual_seed(0)
    ours = Trainer(TransformerLM(cfg), train_ids, val_ids, recipe)
    clipped = Trainer(TransformerLM(cfg), train_ids, val_ids, preset.train)
    torch.manual_seed(0)
    plain_model = TransformerLM(cfg).train()
    optimizer = torch.optim.AdamW(plain_model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
    x, y = make_batch(train_ids, recipe.batch_size, cfg.max_len, torch.Generator().manual_seed(0))

    def plain_steps():
        for _ in range(steps_per_call):
            logits = plain_model(x)                                           # (B, T, V)
            loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

    t = interleaved({"plain": plain_steps, "trainer": lambda: ours.step(steps_per_call),
                     "clipped": lambda: clipped.step(steps_per_call)}, reps=30, warmup=3)
    rate = {k: steps_per_call / v for k, v in t.items()}
    print(f"trainer  Trainer.step {rate['trainer']:.0f} steps/s vs plain loop {rate['plain']:.0f} steps/s "
          f"= {rate['trainer'] / rate['plain']:.2f}x (target >= 0.9x); "
          f"with the preset's gradient clipping {rate['clipped']:.0f} steps/s "
          f"({rate['clipped'] / rate['plain']:.2f}x)  [batch {recipe.batch_size} x {cfg.max_len} tokens]")


def bench_roses(target: float = 0.05) -> None:
    preset = PRESETS["roses"]
    start = time.perf_counter()
    tokenizer, cfg, train_ids, val_ids = build(preset)
    torch.manual_seed(0)
    trainer = Trainer(TransformerLM(cfg), train_ids, val_ids, preset.train)
    val_loss = float("inf")
    while val_loss > target and trainer.steps_done < preset.train.steps:
        trainer.step(10)
        val_loss, _ = trainer.evaluate()
    seconds = time.perf_counter() - start
    verdict = "reached" if val_loss <= target else "did NOT reach"
    print(f"roses    {verdict} validation loss {target} ({val_loss:.4f}) after {trainer.steps_done} steps "
          f"in {seconds:.1f} s (target <= 20 s)")


PAGE_SENTENCE = "the fat cat sat on the red mat because it was tired"      # 12 words, all known


def _pages_run_through_the_entry_point() -> None:
    """As tests/conftest.py does: AppTest's switch_page runs streamlit_app.py (with its sidebar)."""
    from streamlit.runtime import pages_manager

    original = pages_manager.PagesManager.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        pages_manager.PagesManager.uses_pages_directory = False

    pages_manager.PagesManager.__init__ = init


def bench_pages(reps: int = 10, target_ms: float = 150.0) -> None:
    """Each page's script run through the app's entry point, as a visitor's rerun costs the server."""
    from streamlit.testing.v1 import AppTest

    from explorer.steps import STEPS

    _pages_run_through_the_entry_point()
    root = Path(__file__).resolve().parent
    with tempfile.TemporaryDirectory() as folder:
        empty = Path(folder) / "empty_page.py"
        empty.write_text("import streamlit as st\n\nst.title('An empty page')\n")
        apps = {"(empty page)": AppTest.from_file(str(empty), default_timeout=60)}
        for step in STEPS:
            at = AppTest.from_file(str(root / "streamlit_app.py"), default_timeout=60)
            at.query_params["model"] = "tinytales"
            at.query_params["text"] = PAGE_SENTENCE
            apps[step.slug] = at
        for slug, at in apps.items():                     # first run: load the model, fill the caches
            at.run()
            if slug not in ("(empty page)", "home"):
                at.switch_page(next(s.file for s in STEPS if s.slug == slug)).run()
        t = interleaved({slug: at.run for slug, at in apps.items()}, reps=reps, warmup=2)
    base = t.pop("(empty page)") * 1e3
    print(f"pages    script run per page, median of {reps}, tinytales, {len(PAGE_SENTENCE.split())} words "
          f"(target <= {target_ms:.0f} ms); an empty page takes {base:.1f} ms in the same run")
    for slug, seconds in t.items():
        ms = seconds * 1e3
        verdict = "ok" if ms <= target_ms else "OVER TARGET"
        if apps[slug].exception:                          # a broken page is fast for the wrong reason
            verdict = f"NOT MEASURED: the page raised {apps[slug].exception[0].message[:80]!r}"
        print(f"pages      {slug:<13} {ms:7.1f} ms  ({ms - base:6.1f} ms above the empty page)  {verdict}")
    bench_slider(apps["prediction"], reps)


def bench_slider(at, reps: int) -> None:
    """Moving the temperature slider must re-shape the cached logits, never run the model again."""
    calls = {"run": 0, "predict": 0}
    originals = {name: getattr(TransformerLM, name) for name in calls}

    def counting(name):
        def wrapper(self, *args, **kwargs):
            calls[name] += 1
            return originals[name](self, *args, **kwargs)
        return wrapper

    slider = at.slider(key="prediction_temperature")
    times = []
    try:
        for name in calls:
            setattr(TransformerLM, name, counting(name))
        for rep in range(reps):
            slider.set_value(0.5 if rep % 2 else 1.5)
            start = time.perf_counter()
            at.run()
            times.append(time.perf_counter() - start)
    finally:
        for name, fn in originals.items():
            setattr(TransformerLM, name, fn)
    shown = at.exception[0].message if at.exception else ""
    verdict = "ok" if not any(calls.values()) and not shown else "NOT ok"
    print(f"pages    temperature slider on the prediction page: {reps} moves, {statistics.median(times) * 1e3:.1f} ms "
          f"per rerun, model.run called {calls['run']}x, model.predict {calls['predict']}x "
          f"(target: 0 model calls) {verdict}{' ' + shown if shown else ''}")


def main() -> None:
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")
    bench_roses()       # first, so it pays for the process's first optimizer creation as a visitor would
    bench_trace()
    bench_trainer()
    bench_pages()       # last: the app sets torch to one thread, as it does on the server


if __name__ == "__main__":
    main()
