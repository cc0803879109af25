"""Results worth computing once, asked for without Streamlit.

The pure modules (explorer/steps/, explorer/lab/, explorer/discoveries.py) ask here for a trace or for what a
builder makes of one; the web app's caches (explorer/app/cache.py) answer once imported, so in the app each is
computed once per server. Anywhere else (a test, a notebook) `Caches()` answers: each call computes its value, so
every builder can be used and tested without Streamlit.

    per_view(builder, view, *args)      builder(view, view.trace, *args): a figure, a search, a beam
    trace(view, experiment, ids)        the view's sentence (or `ids`) through its model, `experiment` applied
    per_model(compute, name, bundle)    compute(bundle), once per model
    per_key(compute, *key)              compute(*key), once per key (a tokenizer built from a corpus, ...)
    per_input(compute, view, *args)     compute(view's model, *args, progress=...), once per model and args
                                        (a patching grid per sentence pair)
"""
from collections.abc import Callable
from dataclasses import dataclass

from model.seq2seq import EncoderDecoder, greedy
from model.transformer import Trace


def compute_trace(view, experiment=None, ids=None) -> Trace:
    """The trace of the view's sentence (or `ids`) through its model, with what-if `experiment` applied if given.
    An encoder-decoder reads the source and, in its decoder, the target it writes greedily (edits at every step)."""
    ids = list(view.ids if ids is None else ids)
    model = view.bundle.model
    if isinstance(model, EncoderDecoder):
        edits = experiment.edits(model.cfg) if experiment is not None else None
        return model.run(ids, [model.bos_id, *greedy(model, ids, edits=edits)], edits=edits)
    if experiment is None:
        return model.run(ids)
    return model.run(ids, edits=experiment.edits(model.cfg), causal=experiment.causal)


@dataclass(frozen=True)
class Caches:
    """What the pure modules may ask to have remembered (the module's docstring says what each is); these defaults
    remember nothing."""
    per_view: Callable = lambda builder, view, *args: builder(view, view.trace, *args)
    trace: Callable = compute_trace
    per_model: Callable = lambda compute, name, bundle: compute(bundle)
    per_key: Callable = lambda compute, *key: compute(*key)
    per_input: Callable = lambda compute, view, *args, progress=None: compute(view.bundle.model, *args,
                                                                               progress=progress)


_caches = Caches()


def use(caches: Caches) -> None:
    """Answer every request from now on with `caches` (the web app's, at its start)."""
    global _caches
    _caches = caches


def per_view(builder: Callable, view, *args):
    """`builder(view, view.trace, *args)`, remembered per model, sentence, presenter mode, phone and args in the
    app."""
    return _caches.per_view(builder, view, *args)


def trace(view, experiment=None, ids=None) -> Trace:
    """The view's sentence (or `ids`) through its model with `experiment` applied, remembered in the app."""
    return _caches.trace(view, experiment, ids)


def per_model(compute: Callable, name: str, bundle):
    """`compute(bundle)`, remembered once per model in the app."""
    return _caches.per_model(compute, name, bundle)


def per_key(compute: Callable, *key):
    """`compute(*key)`, remembered once per key in the app (the key must be hashable)."""
    return _caches.per_key(compute, *key)


def per_input(compute: Callable, view, *args, progress=None):
    """`compute(model, *args, progress=progress)` for the view's model, remembered per model and `args` in the app
    (`progress(done, total)` is called only when it is computed)."""
    return _caches.per_input(compute, view, *args, progress=progress)
