"""Everything computed from a model is cached here, once per server, under the model's stable key. The pure
modules ask through explorer.memo, which this module wires to these caches when it is imported.

    trace(view)                       the view's sentence through its model (with its finiteness)
    trace(view, experiment, ids)      the same with a what-if experiment applied, or for other token ids
    figure(builder, view, *args)      builder(view, view.trace, *args), per (model, sentence, presenter mode, phone)
    per_model(compute, name, bundle)  compute(bundle), once per model (a vocabulary map, a search)
    per_input(compute, view, *args)   compute(model, *args), once per model and args (a patching grid per pair)

A key (explorer.view.model_key) belongs to one model object, so a bundled model, GPT-2, a lab model and an
upload are all cached the same way, and one visitor's model never answers for another's. Traces are kept
within a memory budget, oldest first out: a GPT-2 trace of 64 tokens is about 60 MB, a tiny model's a few KB.
Nothing returned from here may be changed by its caller: it is shared by every visitor.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from threading import Event, Lock
from typing import TYPE_CHECKING

import streamlit as st

from model.checkpoint import Bundle
from model.transformer import Trace

from explorer import memo
from explorer.view import View, is_finite, model_key, trace_is_finite

if TYPE_CHECKING:
    from explorer.steps.whatif import Experiment

TRACE_BUDGET_BYTES = 256 * 2**20     # about four GPT-2 traces of 64 tokens, thousands of tiny-model ones


def trace_bytes(trace: Trace) -> int:
    return sum(value.nbytes for value in trace.values())


class TraceStore:
    """Traces by key, least recently used dropped first once their total size passes `budget` bytes. A key is
    computed once even when many visitors ask at the same moment (a class following its teacher onto one
    sentence): the first computes, the others wait for its trace."""

    def __init__(self, budget: int):
        self.budget = budget
        self.used = 0
        self._entries: OrderedDict[Hashable, tuple[Trace, bool, int]] = OrderedDict()
        self._running: dict[Hashable, Event] = {}
        self._lock = Lock()

    def get(self, key: Hashable, run: Callable[[], Trace]) -> tuple[Trace, bool]:
        """(trace, whether every value is finite) for `key`, calling `run()` the first time."""
        while True:
            with self._lock:
                if key in self._entries:
                    self._entries.move_to_end(key)
                    trace, finite, _ = self._entries[key]
                    return trace, finite
                running = self._running.get(key)
                if running is None:
                    self._running[key] = Event()
                    break
            running.wait()                # another visitor computes it; then read it (or compute, had it failed)
        try:
            trace = run()                 # outside the lock: other visitors' traces are not held up
            finite, size = trace_is_finite(trace), trace_bytes(trace)
            with self._lock:
                if key not in self._entries:
                    self._entries[key] = (trace, finite, size)
                    self.used += size
                while self.used > self.budget and len(self._entries) > 1:
                    _, (_, _, dropped) = self._entries.popitem(last=False)
                    self.used -= dropped
        finally:
            with self._lock:
                self._running.pop(key).set()
        return trace, finite

    def __len__(self) -> int:
        return len(self._entries)


@st.cache_resource(show_spinner=False)
def trace_store() -> TraceStore:
    """The server's one store of traces."""
    return TraceStore(TRACE_BUDGET_BYTES)


def trace_and_finite(view: View, experiment: Experiment | None = None,
                     ids: tuple[int, ...] | list[int] | None = None) -> tuple[Trace, bool]:
    """(trace, finite) of the view's sentence (or `ids`) through its model, with `experiment` if given."""
    ids = tuple(view.ids if ids is None else ids)
    return trace_store().get((view.key, ids, experiment), lambda: memo.compute_trace(view, experiment, ids))


def trace(view: View, experiment: Experiment | None = None, ids=None) -> Trace:
    """The trace of the view's sentence (or `ids`), with `experiment` applied if given; computed once."""
    return trace_and_finite(view, experiment, ids)[0]


@st.cache_resource(max_entries=256, show_spinner=False)
def _figure(builder: str, key: str, ids: tuple, tokens: tuple, presenter: bool, phone: bool, args: tuple,
            _build: Callable):
    built = _build()
    if hasattr(built, "to_plotly_json"):
        built._drawn = {}              # shared by every visitor and never changed: drawn once (layout.chart), its
    return built                       # drawings kept on it, dropped with it


def _hashable(value):
    return tuple(_hashable(v) for v in value) if isinstance(value, (list, tuple)) else value


def figure(builder: Callable, view: View, *args):
    """`builder(view, view.trace, *args)`, built once per (model, sentence, presenter mode, phone, args)."""
    name = f"{builder.__module__}.{builder.__qualname__}"
    return _figure(name, view.key, view.ids, tuple(view.tokens), view.presenter, view.phone, _hashable(args),
                   lambda: builder(view, view.trace, *args))


@st.cache_resource(max_entries=32, show_spinner="Working this out once for this model ...")
def _per_model(what: str, key: str, _compute: Callable):
    return _compute()


def per_model(compute: Callable[[Bundle], object], name: str, bundle: Bundle):
    """`compute(bundle)`, once per model (`name` is what the picker calls it)."""
    what = f"{compute.__module__}.{compute.__qualname__}"
    return _per_model(what, model_key(name, bundle.model), lambda: compute(bundle))


def model_is_finite(name: str, bundle: Bundle) -> bool:
    """Whether every weight of the model is finite, checked once per model."""
    return per_model(lambda b: is_finite(b.model), name, bundle)


@st.cache_resource(max_entries=32, show_spinner="Working this out once for this server ...")
def _resource(what: str, key: tuple, _compute: Callable):
    return _compute()


def resource(compute: Callable, *key):
    """`compute(*key)`, once per server and key (a tokenizer built from a corpus, a count over it)."""
    return _resource(f"{compute.__module__}.{compute.__qualname__}", key, lambda: compute(*key))


class ResultStore:
    """Results by key, the `size` most recently used kept. Computed outside any st.cache_* function, so a
    computation may report progress to an element of the page (st.cache_resource would replay that element)."""

    def __init__(self, size: int):
        self.size = size
        self._entries: OrderedDict[Hashable, object] = OrderedDict()
        self._lock = Lock()

    def get(self, key: Hashable, compute: Callable[[], object]):
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        value = compute()                  # outside the lock: other visitors are not held up
        with self._lock:
            self._entries[key] = value
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return value


@st.cache_resource(show_spinner=False)
def input_store() -> ResultStore:
    """The server's one store of per-input results (patching grids per sentence pair)."""
    return ResultStore(64)


def per_input(compute: Callable, view: View, *args, progress=None):
    """`compute(view's model, *args, progress=progress)`, once per model and `args` (which must be hashable);
    the progress callback is only called when the value is computed."""
    what = f"{compute.__module__}.{compute.__qualname__}"
    return input_store().get((what, view.key, _hashable(args)),
                             lambda: compute(view.bundle.model, *args, progress=progress))


# The pure modules ask explorer.memo for these; from now on the server's caches answer.
memo.install(figure=figure, trace=trace, per_model=per_model, resource=resource, per_input=per_input)
