"""Every page's server-side script run (AppTest, in this process), as a visitor's rerun costs the server:
the walk-through, discoveries and the lab with tinytales and a 12-word sentence, the encoder-decoder page with
translate and sort; an empty page's run in the same loop says what any script run costs. Then the temperature
slider, which must re-shape cached logits and never run the model again."""
import statistics
import tempfile
import time

from .apptest import empty_page, open_app, raised
from .live import PAGE_SENTENCE
from .report import Report
from .timing import interleaved

AREA = "pages"
TRANSLATE_SENTENCE = "the red cat sees a green mouse"
SORT_LIST = "7 3 9 1 4 2"


def run(report: Report, reps: int = 10) -> None:
    from explorer.registry import DISCOVER, ENCODER_DECODER, LAB, STEPS

    views = {step.slug: (step.file, "tinytales", PAGE_SENTENCE) for step in [*STEPS, DISCOVER, LAB]}
    views[ENCODER_DECODER.slug] = (ENCODER_DECODER.file, "translate", TRANSLATE_SENTENCE)
    views["encoder-decoder (sort)"] = (ENCODER_DECODER.file, "sort", SORT_LIST)
    with tempfile.TemporaryDirectory() as folder:
        apps = {"(empty page)": empty_page(folder)}
        apps["(empty page)"].run()
        for name, (file, model, text) in views.items():      # the first run loads the model, fills the caches
            apps[name] = open_app(None if name == "home" else file, model=model, text=text)
        t = interleaved({name: at.run for name, at in apps.items()}, reps=reps, warmup=2)
    base = t.pop("(empty page)") * 1e3
    report.line(AREA, f"script run per page, median of {reps}, tinytales with {len(PAGE_SENTENCE.split())} words "
                      f"(translate and sort on the encoder-decoder page); an empty page takes {base:.1f} ms")
    walk, pair = {}, {}
    for name, seconds in t.items():
        ms = seconds * 1e3
        problem = raised(apps[name])
        (pair if name.startswith("encoder-decoder") else walk)[name] = None if problem else ms
        verdict = f"  NOT MEASURED: the page raised {problem!r}" if problem else ""
        report.line(AREA, f"  {name:<22} {ms:7.1f} ms  ({ms - base:6.1f} ms above the empty page){verdict}")
    for key, measured in (("pages.slowest_ms", walk), ("pages.encoder_decoder_ms", pair)):
        broken = [name for name, ms in measured.items() if ms is None]
        if broken:
            report.not_measured(key, f"{', '.join(broken)} raised")
        else:
            report.record(key, max(measured.values()))
    slider(report, apps["prediction"], reps)


def slider(report: Report, at, reps: int) -> None:
    """Moving the temperature slider on the prediction page: reruns, and how often the model ran."""
    from model.transformer import TransformerLM

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
    problem = raised(at)
    if problem:
        report.not_measured("pages.slider_model_runs", f"the page raised {problem!r}")
    else:
        report.record("pages.slider_model_runs", sum(calls.values()))
    report.line(AREA, f"temperature slider on the prediction page: {reps} moves, "
                      f"{statistics.median(times) * 1e3:.1f} ms per rerun, model.run called {calls['run']}x, "
                      f"model.predict {calls['predict']}x")
