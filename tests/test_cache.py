"""The one cache layer (explorer/app/cache.py): one kind of store (a budget, computations in flight shared, a
background start), a key per model object, traces within a memory budget, per-view, per-model and per-input results."""
import copy
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from conftest import open_page, plotly_figures
from explorer.app import cache
from explorer.steps import whatif
from explorer.view import View, model_key
from model.checkpoint import load_bundled
from model.inputs import prepare_text

TINY = load_bundled("tinytales")


def view_of(bundle, text="the cat sat on the mat", name="tinytales") -> View:
    v = View(name=name, bundle=bundle, text=text, presenter=False)
    v.prepared = prepare_text(bundle.tokenizer, text, bundle.model.cfg.max_len)
    v.trace = cache.trace(v)
    return v


def test_a_model_keeps_its_key_and_another_object_never_shares_it():
    twin = copy.deepcopy(TINY)
    assert model_key("tinytales", TINY.model) == model_key("tinytales", TINY.model)
    assert model_key("tinytales", twin.model) != model_key("tinytales", TINY.model)    # same name, other weights


def test_a_changed_copy_under_the_same_name_gets_its_own_trace():
    v = view_of(TINY)
    twin = copy.deepcopy(TINY)
    with torch.no_grad():
        twin.model.unembed.weight.mul_(-1.0)
    w = view_of(twin)
    assert cache.trace(v) is v.trace                                 # computed once, then shared
    torch.testing.assert_close(w.trace["logits"], -v.trace["logits"])
    torch.testing.assert_close(v.trace["logits"], TINY.model.run(v.prepared.ids)["logits"])


def test_an_experiment_has_its_own_trace_and_equal_experiments_share_it():
    v = view_of(TINY)
    knocked = cache.trace(v, whatif.knock_out_head(0, 1))
    assert cache.trace(v, whatif.knock_out_head(0, 1)) is knocked                         # equal experiment, same key
    expected = TINY.model.run(v.prepared.ids, edits=whatif.knock_out_head(0, 1).edits(TINY.model.cfg))
    torch.testing.assert_close(knocked["logits"], expected["logits"])
    assert not torch.equal(knocked["logits"], v.trace["logits"])
    assert cache.trace(v, whatif.knock_out_head(0, 0)) is not knocked
    lifted = cache.trace(v, whatif.LIFT_MASK)
    assert lifted["blocks.0.attn.pattern"][0].triu(1).sum() > 0                     # the mask really lifted


def test_the_trace_store_drops_the_least_recently_used_traces_past_its_byte_budget():
    one = TINY.model.run([1, 2, 3])
    size = cache.trace_bytes(one)
    store = cache.Store(budget=int(2.5 * size), size=cache.trace_bytes)
    runs = []

    def run(ids):
        return lambda: runs.append(ids) or TINY.model.run(list(ids))

    for ids in [(1, 2, 3), (4, 5, 6), (1, 2, 3), (7, 8, 9)]:                # (4, 5, 6) is the oldest by now
        store.get(ids, run(ids))
    assert len(store) == 2 and store.used <= store.budget
    store.get((1, 2, 3), run((1, 2, 3)))
    store.get((4, 5, 6), run((4, 5, 6)))
    assert runs == [(1, 2, 3), (4, 5, 6), (7, 8, 9), (4, 5, 6)]                  # only the dropped one ran again
    assert cache.Stores().traces.budget == cache.TRACE_BUDGET_BYTES


def test_a_trace_that_overflows_is_reported_as_not_finite():
    broken = copy.deepcopy(TINY)
    with torch.no_grad():
        broken.model.embed.tok.weight.fill_(float("inf"))
    trace, finite = cache.trace_and_finite(_view(broken))
    assert not finite and not torch.isfinite(trace["logits"]).all()
    assert cache.trace_and_finite(_view(TINY))[1]


def _view(bundle, text="the cat sat") -> View:
    return View("tinytales", bundle, text, False, prepare_text(bundle.tokenizer, text, bundle.model.cfg.max_len))


def test_what_a_builder_makes_of_a_view_is_built_once_per_sentence_and_again_for_another():
    built = []

    def builder(v, trace, layer):
        built.append((v.text, layer))
        return float(trace[f"blocks.{layer}.resid_post"].sum())

    a, b = view_of(TINY, "the cat sat"), view_of(TINY, "the dog ran")
    first = cache.per_view(builder, a, 1)
    assert cache.per_view(builder, a, 1) == first and built == [("the cat sat", 1)]
    cache.per_view(builder, b, 1)
    cache.per_view(builder, a, 0)
    assert built == [("the cat sat", 1), ("the dog ran", 1), ("the cat sat", 0)]
    assert first == float(a.trace["blocks.1.resid_post"].sum())


def test_per_model_results_follow_the_model_object():
    calls = []
    compute = lambda bundle: calls.append(bundle) or bundle.model.cfg.d_model    # noqa: E731
    twin = copy.deepcopy(TINY)
    assert cache.per_model(compute, "tinytales", TINY) == TINY.model.cfg.d_model
    cache.per_model(compute, "tinytales", TINY)
    cache.per_model(compute, "tinytales", twin)
    assert [id(b) for b in calls] == [id(TINY), id(twin)]


def test_two_session_models_with_one_name_show_their_own_numbers():
    """Two visitors' uploads may share a name; each page must show its own model's trace."""
    flipped = copy.deepcopy(TINY)
    with torch.no_grad():
        flipped.model.unembed.weight.mul_(-1.0)
    seen = []
    for bundle in (copy.deepcopy(TINY), flipped):
        at = open_page("home")
        at.session_state["trained_models"] = {"upload: same.safetensors": bundle}
        at.run()
        at.selectbox(key="model").set_value("upload: same.safetensors").run()
        at.switch_page("pages/prediction.py").run()
        assert not at.exception
        seen.append(at.session_state["view"].trace["logits"])
        assert len(plotly_figures(at)) >= 1
    torch.testing.assert_close(seen[1], -seen[0])


def test_per_input_results_are_computed_once_per_model_and_input_and_report_progress_only_then():
    bundle = load_bundled("tinytales")
    text = "the cat sat"
    view = View("tinytales", bundle, text, False, prepare_text(bundle.tokenizer, text, 32))
    calls, seen = [], []

    def compute(model, a, b, progress=None):
        calls.append((a, b))
        progress(1, 1)
        return (model is bundle.model, a + b)
    assert cache.per_input(compute, view, 1, 2, progress=lambda d, t: seen.append(d)) == (True, 3)
    assert cache.per_input(compute, view, 1, 2, progress=lambda d, t: seen.append(d)) == (True, 3)
    assert cache.per_input(compute, view, 2, 2, progress=lambda d, t: seen.append(d)) == (True, 4)
    assert calls == [(1, 2), (2, 2)] and seen == [1, 1]
    store = cache.Store(2)                                     # a budget of two values
    for key in "abc":
        store.get(key, lambda key=key: key.upper())
    assert store.get("a", lambda: "again") == "again"          # the least recently used went first
    assert store.get("c", lambda: "never") == "C"


def test_many_visitors_asking_for_one_trace_at_once_compute_it_once():
    """A class following its teacher onto one sentence: one trace, every student gets the same one."""
    store = cache.Store(budget=2**30, size=cache.trace_bytes)
    runs, started, release = [], threading.Event(), threading.Event()

    def run():
        runs.append(1)
        started.set()
        release.wait(10)                 # hold the first computation until every visitor is waiting
        return TINY.model.run([1, 2, 3])

    with ThreadPoolExecutor(8) as pool:
        first = pool.submit(store.get, "same", run)
        started.wait(10)
        others = [pool.submit(store.get, "same", run) for _ in range(7)]
        release.set()
        traces = [first.result(), *(f.result() for f in others)]
    assert runs == [1] and all(t is traces[0] for t in traces) and len(store) == 1

    def broken():
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        store.get("broken", broken)
    assert "logits" in store.get("broken", lambda: TINY.model.run([1]))  # a failure is not kept; nobody waits on it


def test_a_background_computation_runs_once_and_a_reader_waits_for_it():
    """A discovery card starts a short training run as it is shown; the reveal reads it, waiting if need be."""
    store = cache.Store(8)
    runs, release = [], threading.Event()

    def slow():
        runs.append(1)
        release.wait(10)
        return "trained"

    store.start("run", slow)
    store.start("run", slow)                           # under way: not started again
    with ThreadPoolExecutor(2) as pool:
        reader = pool.submit(store.get, "run", lambda: pytest.fail("a reader computed it again"))
        release.set()
        assert reader.result(timeout=10) == "trained"
    store.start("run", slow)                           # kept: not started again
    assert runs == [1] and "run" in store

    def broken():
        raise RuntimeError("no")

    store.start("broken", broken)
    assert store.get("broken", lambda: "again") == "again"     # a failed background run is computed by its reader


def test_a_shared_figure_is_drawn_once_per_theme_and_any_other_figure_every_time():
    """explorer.app.layout.chart turns a figure into the chart's JSON and sentence: once per figure from the shared
    figure cache (a class of 30 on one view pays once), every time for a figure built in the run."""
    import gc

    import plotly.graph_objects as go

    from explorer.app import layout
    from explorer.chart_text import describe
    from explorer.steps import attention
    v = view_of(TINY, "the cat sat on the mat because")
    shared = attention.head_figure(v, 1, 2, "pattern")
    assert shared is attention.head_figure(v, 1, 2, "pattern") and shared._drawn == {}  # from the per-view store
    made = []

    def json_in(fig, theme):
        return layout.once_per_figure(fig, ("json", theme), lambda: made.append(theme) or layout.figure_json(
            fig, layout.template_json(*theme)))

    light = json_in(shared, ("light", False))
    assert json_in(shared, ("light", False)) is light and made == [("light", False)]          # made once
    dark = json_in(shared, ("dark", True))
    assert made == [("light", False), ("dark", True)] and dark != light                     # per theme
    assert light == layout.figure_json(shared, layout.template_json("light", False))         # as made afresh
    said = layout.once_per_figure(shared, ("label", None), lambda: describe(shared, None))
    assert said.startswith("Attention pattern of layer 1 head 2") and said == describe(shared, None)

    fresh = go.Figure(go.Bar(x=["a"], y=[1.0]))                                  # built in the run: not remembered
    json_in(fresh, ("light", False)), json_in(fresh, ("light", False))
    assert made[-2:] == [("light", False), ("light", False)]

    gone = go.Figure(go.Bar(x=["a"], y=[1.0]))
    gone._drawn = {}
    json_in(gone, ("light", False))
    address = id(gone)
    del gone
    gc.collect()
    again = go.Figure(go.Bar(x=["b"], y=[2.0]))      # may get the freed figure's id: must not get its JSON
    again._drawn = {}
    if id(again) == address:
        assert '"b"' in json_in(again, ("light", False))
    assert '"b"' in json_in(again, ("light", False)) and made[-1] == ("light", False)


def test_remembered_drawings_live_on_their_figure_and_go_with_it():
    """The figure cache's bound (256 figures) bounds the drawings: they are kept on the figure, and nothing else
    holds a figure or its JSON once the figure cache drops it."""
    import gc
    import weakref

    import plotly.graph_objects as go

    from explorer.app import layout

    fig = go.Figure(go.Bar(x=list(range(1000)), y=[1.0] * 1000))
    fig._drawn = {}
    made = layout.once_per_figure(fig, ("json",), lambda: layout.figure_json(fig, {}))
    assert fig._drawn == {("json",): made} and len(made) > 5000
    alive = weakref.ref(fig)
    del fig
    gc.collect()
    assert alive() is None                                     # nothing kept the figure (or its drawings) alive


def test_a_view_that_let_go_of_its_trace_holds_none_and_reads_it_again_through_the_cache():
    """Between runs a session's view holds no trace of its own (streamlit_app.py lets go after the page is drawn):
    the cache's byte budget bounds every session's traces. Read again, it is the cached one, or computed anew."""
    import gc

    v = view_of(TINY, "the dog ran to the park")
    logits = v.trace["logits"].clone()
    v.let_go_of_trace()
    assert v.trace is cache.trace(v)                                 # the cache still keeps it: the same object
    traces = cache.stores().traces                                   # the budget lets it go:
    with traces._lock:
        traces.used -= traces._entries.pop((v.key, v.ids, None))[1]
    gc.collect()
    assert v.__dict__["_trace"]() is None                            # nothing else held it
    torch.testing.assert_close(v.trace["logits"], logits)            # read again, through the cache
    assert v.trace is cache.trace(v)


def test_the_app_lets_go_of_the_trace_once_a_page_is_drawn():
    import weakref

    at = open_page("attention")
    view = at.session_state["view"]
    assert isinstance(view.__dict__["_trace"], weakref.ref)
    assert view.trace is not None and view.trace["logits"].shape[1] == len(view.tokens)


def test_no_page_keeps_the_trace_once_drawn_so_the_cache_alone_holds_traces():
    """A function a page hands a widget (a format_func, a callback) is kept with the widget until the session's next
    run, and with it every variable of the page: its trace too, unless the app lets go of the page's tensors
    (layout.let_go_of_page_tensors). On every step page: once the cache drops the trace, nothing holds it."""
    import gc
    import weakref

    from explorer.registry import STEPS

    at = open_page("home")
    for step in STEPS:
        at.switch_page(step.file).run()
        assert not at.exception, (step.slug, at.exception)
        view = at.session_state["view"]
        trace = weakref.ref(view.trace)
        logits = weakref.ref(view.trace["logits"])
        traces = cache.stores().traces
        with traces._lock:                                   # the budget lets go of it
            for key in [k for k, (found, _) in traces._entries.items() if found[0] is trace()]:
                traces.used -= traces._entries.pop(key)[1]
        gc.collect()
        assert trace() is None and logits() is None, f"after the {step.slug} page's run something still holds its trace"


def test_memory_goes_back_to_the_system_only_after_the_trace_store_dropped_a_trace(monkeypatch):
    calls = []
    monkeypatch.setattr(cache, "give_back_freed", lambda: calls.append(1))
    traces = cache.stores().traces
    cache.give_back_dropped_traces()
    before = len(calls)
    cache.give_back_dropped_traces()
    assert len(calls) == before                              # nothing dropped since: no call
    traces.dropped += 1
    cache.give_back_dropped_traces()
    cache.give_back_dropped_traces()
    assert len(calls) == before + 1                          # once per drop seen
