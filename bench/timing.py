"""Timing helpers shared by the areas."""
import contextlib
import statistics
import time

import torch

DEFAULT_THREADS = torch.get_num_threads()      # before the app (AppTest runs it in-process) sets one thread


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


def p95(values) -> float:
    values = sorted(values)
    return values[max(0, int(round(0.95 * len(values))) - 1)]


@contextlib.contextmanager
def torch_threads(n: int):
    """Compute with `n` torch threads inside the block (the app's server uses 1)."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
