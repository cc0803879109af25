"""Results worth computing once, asked for without Streamlit.

The pure modules (explorer/steps/, explorer/lab/, explorer/discoveries.py) ask here for a figure, a trace or a
per-model result; the web app (explorer/app/cache.py) installs its server-wide caches at start, so in the app
each is computed once per server. Anywhere else (a test, a notebook) nothing is installed and each call simply
computes its value, so every builder can be used and tested without Streamlit.

    figure(builder, view, *args)        builder(view, view.trace, *args)
    trace(view, experiment, ids)        the view's sentence (or `ids`) through its model, `experiment` applied
    per_model(compute, name, bundle)    compute(bundle), once per model
    resource(compute, *key)             compute(*key), once per key (a tokenizer built from a corpus, ...)
    per_input(compute, view, *args)     compute(view's model, *args, progress=...), once per model and args
                                        (a patching grid per sentence pair)
"""
from collections.abc import Callable

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


_HOOKS: dict[str, Callable] = {
    "figure": lambda builder, view, *args: builder(view, view.trace, *args),
    "trace": compute_trace,
    "per_model": lambda compute, name, bundle: compute(bundle),
    "resource": lambda compute, *key: compute(*key),
    "per_input": lambda compute, view, *args, progress=None: compute(view.bundle.model, *args, progress=progress),
}


def install(**hooks: Callable) -> None:
    """Replace some of the hooks (the web app's caches): figure, trace, per_model, resource, per_input."""
    unknown = set(hooks) - set(_HOOKS)
    if unknown:
        raise ValueError(f"no hook called {', '.join(sorted(unknown))}")
    _HOOKS.update(hooks)


def figure(builder: Callable, view, *args):
    """`builder(view, view.trace, *args)`, remembered per model, sentence, presenter mode, phone and args in the app."""
    return _HOOKS["figure"](builder, view, *args)


def trace(view, experiment=None, ids=None) -> Trace:
    """The view's sentence (or `ids`) through its model with `experiment` applied, remembered in the app."""
    return _HOOKS["trace"](view, experiment, ids)


def per_model(compute: Callable, name: str, bundle):
    """`compute(bundle)`, remembered once per model in the app."""
    return _HOOKS["per_model"](compute, name, bundle)


def resource(compute: Callable, *key):
    """`compute(*key)`, remembered once per key in the app (the key must be hashable)."""
    return _HOOKS["resource"](compute, *key)


def per_input(compute: Callable, view, *args, progress=None):
    """`compute(model, *args, progress=progress)` for the view's model, remembered per model and `args` in the app
    (`progress(done, total)` is called only when it is computed)."""
    return _HOOKS["per_input"](compute, view, *args, progress=progress)
