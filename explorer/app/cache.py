"""Every server-side cache of the app, in one module: one kind of store, and one named store for each kind of value.

    traces      a sentence through its model, with a what-if or for other ids     128 MB of tensors
    per_view    what a builder makes of a view's trace: figures, searches, beams  256 values
    per_model   a result per model: a vocabulary map, its discoveries, finiteness  32 values
    per_input   a result per model and input: a patching grid                      64 values
    per_key     a result per key: tokenizers built from a corpus                   32 values
    lessons     a lesson parsed, a class's lesson, a step's question answered      256 values
    background  a computation started now and read later: a preset's short run     8 values

Each store computes a key once, even when many visitors ask at the same moment (a class following its teacher
onto one sentence: the first computes, the others wait for its value), and drops the least recently used values
once its budget is passed. A key names the model by `explorer.view.model_key` (one key per model object), so a
bundled model, GPT-2, a lab model and an upload are cached alike and one visitor's model never answers for
another's. Nothing a store returns may be changed by its caller: it is shared by every visitor.

The pure modules ask through `explorer.memo`, which this module answers once imported. `st.cache_resource` holds
only what is loaded (the models: explorer/app/models.py), the class store (explorer/app/classroom.py) and, below,
these stores (so clearing it empties every cache at once).
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from threading import Event, Lock
from typing import TYPE_CHECKING

import streamlit as st

from model.checkpoint import Bundle
from model.transformer import Trace

from explorer import memo
from explorer.app.memory import give_back_freed
from explorer.view import View, is_finite, model_key, trace_is_finite

if TYPE_CHECKING:
    from explorer.steps.whatif import Experiment

TRACE_BUDGET_BYTES = 128 * 2**20     # four GPT-2 traces of 32 tokens (28 MB each), two of SmolLM2 (47 MB), thousands
                                     # of tiny-model ones; sessions hold none between runs (View.let_go_of_trace)


def _politely(work: Callable[[], object]) -> Callable[[], object]:
    """`work` at the lowest CPU priority of its thread (Linux), so visitors' page runs go first."""
    def run():
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        except (AttributeError, OSError):             # not Linux, or not allowed: normal priority
            pass
        return work()
    return run


_BACKGROUND = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cache-background")


class Store:
    """Values by key, each computed once; the least recently used dropped first once the total `size` of the kept
    values passes `budget` (each value counts 1 unless `size` says otherwise). A key in computation is shared: a
    second caller waits for the first's value instead of computing it again. A computation that fails is not kept."""

    def __init__(self, budget: int, size: Callable[[object], int] = lambda value: 1):
        self.budget, self.size, self.used = budget, size, 0
        self.dropped = 0                  # values dropped to keep to the budget, since the store was made
        self._entries: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._running: dict[Hashable, Event] = {}
        self._lock = Lock()

    def get(self, key: Hashable, compute: Callable[[], object]):
        """The value for `key`, calling `compute()` if no one has (or is computing it now)."""
        while True:
            with self._lock:
                if key in self._entries:
                    self._entries.move_to_end(key)
                    return self._entries[key][0]
                running = self._running.get(key)
                if running is None:
                    self._running[key] = Event()
                    break
            running.wait()                # another visitor computes it; then read it (or compute, had it failed)
        return self._fill(key, compute)

    def start(self, key: Hashable, compute: Callable[[], object]) -> None:
        """Begin computing `key` in the background (one at a time, at low priority) unless it is kept or under way;
        from now on a `get` of it waits for that value."""
        with self._lock:
            if key in self._entries or key in self._running:
                return
            self._running[key] = Event()
        _BACKGROUND.submit(self._fill, key, _politely(compute))

    def _fill(self, key: Hashable, compute: Callable[[], object]):
        """Compute `key`'s value (its computation is claimed: `self._running[key]`), keep it, wake who waits."""
        try:
            value = compute()             # outside the lock: other keys are not held up
            with self._lock:
                size = self.size(value)
                self._entries[key] = (value, size)
                self.used += size
                while self.used > self.budget and len(self._entries) > 1:
                    _, (_, dropped) = self._entries.popitem(last=False)
                    self.used -= dropped
                    self.dropped += 1
        finally:
            with self._lock:
                self._running.pop(key).set()
        return value

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)


def trace_bytes(trace: Trace) -> int:
    return sum(value.nbytes for value in trace.values())


@dataclass
class Stores:
    """The server's stores, one per kind of value (the module's docstring lists them)."""
    traces: Store = field(default_factory=lambda: Store(TRACE_BUDGET_BYTES, size=lambda found: trace_bytes(found[0])))
    per_view: Store = field(default_factory=lambda: Store(256))
    per_model: Store = field(default_factory=lambda: Store(32))
    per_input: Store = field(default_factory=lambda: Store(64))
    per_key: Store = field(default_factory=lambda: Store(32))
    lessons: Store = field(default_factory=lambda: Store(256))
    background: Store = field(default_factory=lambda: Store(8))


@st.cache_resource(show_spinner=False)
def stores() -> Stores:
    """The server's one set of stores."""
    return Stores()


_trimmed_after = [0]       # how many traces the store had dropped at the last give_back_freed


def give_back_dropped_traces() -> None:
    """Once the trace store has dropped a trace, return the freed memory to the system (after a run, when the
    trace is no longer read). A trace is hundreds of tensors smaller than glibc's mmap threshold, so it frees holes
    in the heap that the process otherwise keeps: 54 MB after 10 SmolLM2 visitors. Costs about 2 ms."""
    dropped = stores().traces.dropped
    if dropped != _trimmed_after[0]:
        _trimmed_after[0] = dropped
        give_back_freed()


def _name(function: Callable) -> str:
    return f"{function.__module__}.{function.__qualname__}"


def _hashable(value):
    return tuple(_hashable(v) for v in value) if isinstance(value, (list, tuple)) else value


def _with_spinner(words: str, compute: Callable[[], object]) -> Callable[[], object]:
    def run():
        with st.spinner(words):
            return compute()
    return run


# --- what the pages and the pure modules ask for -----------------------------------------------------------------


def trace_and_finite(view: View, experiment: Experiment | None = None,
                     ids: tuple[int, ...] | list[int] | None = None) -> tuple[Trace, bool]:
    """(trace, whether every value is finite) of the view's sentence (or `ids`) through its model, with
    `experiment` if given."""
    ids = tuple(view.ids if ids is None else ids)

    def run() -> tuple[Trace, bool]:
        trace = memo.compute_trace(view, experiment, ids)
        return trace, trace_is_finite(trace)
    return stores().traces.get((view.key, ids, experiment), run)


def trace(view: View, experiment: Experiment | None = None, ids=None) -> Trace:
    """The trace of the view's sentence (or `ids`), with `experiment` applied if given; computed once."""
    return trace_and_finite(view, experiment, ids)[0]


def per_view(builder: Callable, view: View, *args):
    """`builder(view, view.trace, *args)`, built once per (model, sentence, presenter mode, phone, args): a phone's
    diagram is laid out for its width (explorer/plot.py, `for_a_phone`). A built figure carries `_drawn`, where
    explorer.app.layout keeps what it draws from it (its JSON per theme): kept with it here."""
    key = (_name(builder), view.key, view.ids, tuple(view.tokens), view.presenter, view.phone, _hashable(args))

    def build():
        built = builder(view, view.trace, *args)
        if hasattr(built, "to_plotly_json"):
            built._drawn = {}
        return built
    return stores().per_view.get(key, build)


def per_model(compute: Callable[[Bundle], object], name: str, bundle: Bundle):
    """`compute(bundle)`, once per model (`name` is what the picker calls it)."""
    return stores().per_model.get((_name(compute), model_key(name, bundle.model)),
                                  _with_spinner("Working this out once for this model ...", lambda: compute(bundle)))


def model_is_finite(name: str, bundle: Bundle) -> bool:
    """Whether every weight of the model is finite, checked once per model (a pretrained model's loader checked
    every weight as it read them: model/pretrained.py)."""
    if bundle.facts.get("finite") is True:
        return True
    return stores().per_model.get(("finite", model_key(name, bundle.model)), lambda: is_finite(bundle.model))


def per_key(compute: Callable, *key):
    """`compute(*key)`, once per server and key (a tokenizer built from a corpus, a count over it)."""
    return stores().per_key.get((_name(compute), key),
                                _with_spinner("Working this out once for this server ...", lambda: compute(*key)))


def per_input(compute: Callable, view: View, *args, progress=None):
    """`compute(view's model, *args, progress=progress)`, once per model and `args` (which must be hashable); the
    progress callback is called only while the value is computed (it may draw on the page: nothing is replayed)."""
    return stores().per_input.get((_name(compute), view.key, _hashable(args)),
                                  lambda: compute(view.bundle.model, *args, progress=progress))


def for_the_class(key: tuple, compute: Callable[[], object]):
    """`compute()` once per `key`, for a class: a lesson parsed, a class's lesson, a step's question answered."""
    return stores().lessons.get(key, compute)


def in_background(compute: Callable, *key) -> None:
    """Start `compute(*key)` in the background (once per server and key); `from_background` reads it."""
    stores().background.start((_name(compute), key), lambda: compute(*key))


def from_background(compute: Callable, *key, waiting: str):
    """The value `in_background` started (waiting for it, with `waiting` on screen, if it is not done yet)."""
    found, name = stores().background, (_name(compute), key)
    if name in found:
        return found.get(name, lambda: compute(*key))
    with st.spinner(waiting):
        return found.get(name, lambda: compute(*key))


# The pure modules ask explorer.memo for these; from now on the server's stores answer.
memo.use(memo.Caches(per_view=per_view, trace=trace, per_model=per_model, per_key=per_key, per_input=per_input))
