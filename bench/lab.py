"""The training lab, one torch thread as on the server: its ticks against a plain PyTorch loop on the same
model, roses with the page's defaults to validation loss 0.05, and the sort preset to 99% held-out exact match."""
import statistics
import time
from dataclasses import replace

import torch
import torch.nn.functional as F

from .report import Report
from .timing import torch_threads

AREA = "lab"


def run(report: Report) -> None:
    with torch_threads(1):
        ticks(report)
        roses(report)
        sort(report)


def ticks(report: Report, rounds: int = 6) -> None:
    """Steps per second in the lab's ticks (with each tick's validation, sample and attention snapshot) and
    in a plain loop given the same wall time per tick."""
    from explorer.lab.training import TICK_SECONDS, LabSetup, new_run
    from model.trainer import make_batch
    from model.transformer import TransformerLM

    setup = LabSetup()
    long = replace(setup, train=replace(setup.train, steps=5000))   # a budget the bench does not finish
    lab_run = new_run(long, "bench")
    cfg, recipe = lab_run.model.cfg, setup.train
    torch.manual_seed(0)
    plain_model = TransformerLM(cfg).train()
    optimizer = torch.optim.AdamW(plain_model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay)
    rng = torch.Generator().manual_seed(0)
    train_ids = lab_run.trainer.train_ids

    def plain_tick():
        start, steps = time.perf_counter(), 0
        while time.perf_counter() - start < TICK_SECONDS:
            x, y = make_batch(train_ids, recipe.batch_size, cfg.max_len, rng)
            loss = F.cross_entropy(plain_model(x).flatten(0, 1), y.flatten())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            steps += 1
        return steps, time.perf_counter() - start

    def lab_tick():
        before, start = lab_run.steps_done, time.perf_counter()
        lab_run.tick()
        return lab_run.steps_done - before, time.perf_counter() - start

    plain_rate, lab_rate = [], []
    for _ in range(rounds):
        for fn, rates in ((plain_tick, plain_rate), (lab_tick, lab_rate)):
            steps, seconds = fn()
            rates.append(steps / seconds)
    plain, lab = statistics.median(plain_rate), statistics.median(lab_rate)
    ratio = report.record("lab.tick_ratio", lab / plain)
    report.line(AREA, f"ticks: {lab:.0f} steps/s vs plain loop {plain:.0f} steps/s = {ratio:.2f}x "
                      "(each tick includes its validation, sample and attention snapshot)")


def roses(report: Report, target_loss: float = 0.05) -> None:
    """Roses with the lab's default settings, tick after tick, to validation loss `target_loss`."""
    from explorer.lab.training import LabSetup, new_run

    start = time.perf_counter()
    lab_run = new_run(LabSetup(), "roses")
    while not lab_run.evals or lab_run.evals[-1]["val_loss"] > target_loss:
        lab_run.tick()
        if lab_run.finished:
            break
    seconds = time.perf_counter() - start
    loss = lab_run.evals[-1]["val_loss"]
    report.record("lab.roses_s", seconds if loss <= target_loss else float("inf"))                # inf: never
    report.line(AREA, f"roses with the page's defaults: validation loss {loss:.4f} after {lab_run.steps_done} steps "
                      f"in {seconds:.1f} s")


def sort(report: Report, exact: float = 0.99) -> None:
    """The lab's sort preset (encoder-decoder), tick after tick, to `exact` held-out exact match."""
    from explorer.lab.training import PRESETS, new_run

    lab_run = new_run(PRESETS["sort (encoder-decoder)"][1], "bench")
    start = time.perf_counter()
    while not lab_run.finished and not (lab_run.evals and lab_run.evals[-1]["exact_match"] >= exact):
        lab_run.tick()
    seconds = time.perf_counter() - start
    reached = lab_run.evals and lab_run.evals[-1]["exact_match"] >= exact
    report.record("lab.sort_s", seconds if reached else float("inf"))                             # inf: never
    report.line(AREA, f"sort run to {exact:.0%} held-out exact match: step {lab_run.steps_done}, {seconds:.1f} s of "
                      f"ticks on {torch.get_num_threads()} thread")
