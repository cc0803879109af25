"""Features (issue 41): a sparse autoencoder (SAE) trained on tinytales, and GPT-2 small with one layer of a feature
dictionary: the features of a sentence, one pass over the bundled English text and a feature's top contexts after
it, steering with a feature, and the memory of a class with both loaded.

GPT-2 small cannot be downloaded here: its full shape is built with random weights in the hub's layout
(bench/gpt2.py; the timing does not depend on the weights), and so is its dictionary, at the published size
(SAELens' gpt2-small-res-jb, layer 8: 24,576 features reading the 768 numbers of blocks.8.resid_pre, 151 MB),
saved in SAELens' format with `save_sae` and read back with `load_sae`. Random weights would fire half of the
features at every token, which no trained dictionary does, and the pass over the text counts and bins every firing:
so each feature's threshold (b_enc) is set from the model's own stream to fire about FIRING features per token (a
trained dictionary's L0 is tens, not thousands).

Every measure computes with one torch thread, as the app's server does. The class's memory is measured in a fresh
process (AppTest: the teacher's and every student's script run there, as on one server).

    python -c "from bench import features; features.run(d_model=96, text_tokens=2000, students=3, max_steps=100)"
"""
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from .live import ROOT, rss_mb
from .report import Report
from .timing import interleaved, torch_threads

AREA = "features"
SENTENCE = ("Paris is the capital of France, and my name is Sara. I love pizza and cats, and every morning I walk "
            "to the old bakery near the river,")                  # 32 of GPT-2's tokens
TOKENS = 32
EXPANSION = 32                  # gpt2-small-res-jb: 24,576 features = 32 x GPT-2's 768
FILE_LAYER = 8                  # SAELens' layer 8 reads blocks.8.hook_resid_pre: the page's layer 7 (after block 7)
HOOK = f"blocks.{FILE_LAYER}.hook_resid_pre"
FIRING = 64                     # features firing per token in the random dictionary
TOP = 10                        # features picked per token (the sentence's view shows 10 on a desktop)
STEER_TOKENS = 20
TINYTALES_LAYER = "blocks.1.resid_pre"        # tinytales' stream between its two blocks
EV, L0 = 0.9, 16                              # the dictionary tinytales must reach, on held-out text


def run(report: Report | None = None, d_model: int = 768, text_tokens: int | None = None, students: int = 30,
        max_steps: int = 1500) -> None:
    """GPT-2 small's shape (`d_model` 768, its dictionary 32 times as wide) over the whole bundled text; a narrower
    model, a shorter text (`text_tokens`), fewer students and steps only check that the area runs."""
    from model import hub, neurons
    from model.pretrained import load_pretrained
    from model.sae import load_sae

    from .gpt2 import gpt2_shaped_snapshot

    report = report or Report()
    with torch_threads(1):
        train_tinytales(report, max_steps)
    with tempfile.TemporaryDirectory() as folder:
        cache = Path(folder) / "hub"
        bundle = load_pretrained(gpt2_shaped_snapshot(cache, hub.GPT2, d_model=d_model))
        text = neurons.own_text(bundle)                               # the bundled English text
        ids = neurons.text_ids(bundle, text)[:text_tokens]
        with torch_threads(1):
            start = time.perf_counter()
            directory = gpt2_shaped_sae(bundle, ids, sae_snapshot(cache))
            made = time.perf_counter() - start
            start = time.perf_counter()
            sae = load_sae(directory)
            loaded = time.perf_counter() - start
            size = sum((directory / f).stat().st_size for f in ("cfg.json", "sae_weights.safetensors"))
            report.line(AREA, f"GPT-2's dictionary: {sae.cfg.d_sae:,} features at {sae.cfg.hook_name}, "
                              f"{size / 1e6:.0f} MB in SAELens' format; made in {made:.1f} s, read by load_sae in "
                              f"{loaded:.2f} s")
            view = reading(bundle)
            sentence_features(report, view, sae)
            feature = top_contexts(report, view, sae, text, ids, Path(folder))
            steering(report, view, sae, feature)
        del bundle, sae, view
        class_memory(report, cache, students)


# --- tinytales: a dictionary trained on one core ---------------------------------------------------------------------

def train_tinytales(report: Report, max_steps: int = 1500, every: int = 50) -> None:
    """Each preset of model/sae.py trained on tinytales' stream between its blocks (8x its width) until, measured on
    held-out text every `every` steps, explained variance >= EV with L0 <= L0; the time includes reading the
    activations. The slower preset is the figure: a student may pick either."""
    from model.checkpoint import load_bundled
    from model.presets import corpus_texts
    from model.sae import SAE_PRESETS, SAETrainer, activations, their_name

    bundle = load_bundled("tinytales")
    train_text, held_out = corpus_texts("tinytales", 0)
    times = {}
    for name, recipe in SAE_PRESETS.items():
        start = time.perf_counter()
        x = activations(bundle.model, bundle.tokenizer.encode(train_text), TINYTALES_LAYER)          # (N, D)
        x_held_out = activations(bundle.model, bundle.tokenizer.encode(held_out), TINYTALES_LAYER)   # (M, D)
        read = time.perf_counter() - start
        trainer = SAETrainer(recipe.config(x.shape[1], their_name(TINYTALES_LAYER), "tinytales"), x, recipe.train)
        while trainer.steps_done < max_steps and trainer.stopped is None:
            trainer.step(min(every, max_steps - trainer.steps_done))
            measured = trainer.evaluate(x_held_out)
            if measured.explained_variance >= EV and measured.l0 <= L0:
                break
        took = time.perf_counter() - start
        reached = measured.explained_variance >= EV and measured.l0 <= L0
        times[name] = took if reached else float("inf")
        report.line(AREA, f"tinytales, {name} preset ({trainer.cfg.d_sae} features = {recipe.expansion} x "
                          f"{trainer.cfg.d_in}), 1 thread: {'reached' if reached else 'did NOT reach'} explained "
                          f"variance {measured.explained_variance:.3f} with L0 {measured.l0:.1f} on held-out text at "
                          f"step {trainer.steps_done} in {took:.1f} s ({read:.1f} s of it reading {len(x):,} + "
                          f"{len(x_held_out):,} tokens' activations); dead {measured.dead:.0%}")
    report.record("features.sae_train_s", max(times.values()))


# --- GPT-2 small and a dictionary of its published size ----------------------------------------------------------

def sae_snapshot(cache: Path) -> Path:
    """Where the hub's cache keeps gpt2-small-res-jb's layer FILE_LAYER (model/sae.py `gpt2_sae_spec`): the page
    finds GPT-2's dictionary there, offline, as if downloaded."""
    from model.sae import gpt2_sae_spec

    spec = gpt2_sae_spec(FILE_LAYER)
    snapshot = cache / f"models--{spec.repo_id.replace('/', '--')}" / "snapshots" / spec.revision
    return snapshot / Path(spec.files[0]).parent


def gpt2_shaped_sae(bundle, ids: list[int], directory: Path, seed: int = 0, calibration: int = 2048) -> Path:
    """A random SAE of gpt2-small-res-jb's layer-8 shape for `bundle`'s width, each feature's b_enc set so that it
    fires on about FIRING / d_sae of the first `calibration` tokens of `ids`; written by save_sae to `directory`."""
    from model.neurons import window_prefix
    from model.sae import SAEConfig, activations, from_weights, our_name, save_sae

    d_in = bundle.model.cfg.d_model
    cfg = SAEConfig(d_in=d_in, d_sae=EXPANSION * d_in, hook_name=HOOK, model_name="gpt2-small", context_size=128,
                    model_from_pretrained_kwargs={"center_writing_weights": True},
                    dataset_path="bench: random weights of the published shape")
    g = torch.Generator().manual_seed(seed)
    W_dec = torch.randn(cfg.d_sae, d_in, generator=g)                                 # (d_sae, d_in)
    W_dec /= W_dec.norm(dim=-1, keepdim=True)
    weights = {"W_enc": W_dec.T.contiguous(), "b_enc": torch.zeros(cfg.d_sae), "W_dec": W_dec,
               "b_dec": torch.zeros(d_in)}
    sae = from_weights(cfg, weights)
    x = activations(bundle.model, ids[:calibration], our_name(HOOK), window=64, prefix=window_prefix(bundle))
    with torch.no_grad():
        pre = sae.pre_activations(x - x.mean(dim=-1, keepdim=True))                   # (N, d_sae), centred as read
        rank = max(1, round(len(pre) * (1 - FIRING / cfg.d_sae)))
        sae.b_enc -= pre.kthvalue(rank, dim=0).values                                 # (d_sae,) each its threshold
    return save_sae(sae, directory)


def reading(bundle):
    """The view a page builds of SENTENCE on GPT-2 (its trace computed once, as the app caches it)."""
    from explorer import questions
    from explorer.app.state import READ_LIMIT

    view = questions.reading("gpt2", bundle, SENTENCE, READ_LIMIT)
    if len(view.ids) != TOKENS:
        raise RuntimeError(f"the sentence is {len(view.ids)} tokens, not {TOKENS}")
    return view


def sentence_features(report: Report, view, sae, reps: int = 10) -> None:
    """The features of the sentence: what the page computes from the cached trace (the tokens x features table, its
    figure and sentence: explorer/steps/dictionary.py), the same with the model's forward pass first, the bare encode
    and top TOP per token, and that from the model read only as far as the SAE's layer."""
    from explorer.steps import dictionary
    from model.dictionary import sae_features

    model, ids, trace = view.bundle.model, list(view.ids), view.trace

    def page():
        chosen = dictionary.busiest_feature(view, sae)                                # the feature it opens first
        table = dictionary.sentence_table(view, sae, chosen)
        dictionary.sentence_figure(view, table, chosen)
        dictionary.sentence_words(view, sae)

    def whole():
        view.trace = model.run(ids)                                                   # a sentence not cached yet
        page()

    with torch.no_grad():
        t = interleaved({"page": page, "whole": whole,
                         "encode": lambda: sae.encode(sae.read(trace))[0].topk(TOP, dim=-1),
                         "to layer": lambda: sae_features(model, sae, torch.tensor([ids]))[0].topk(TOP, dim=-1)},
                        reps=reps, warmup=2)
        l0 = (sae.encode(sae.read(trace))[0] > 0).sum(-1).float()                     # (T,) features per token
    report.record("features.sentence_ms", t["page"] * 1e3)
    report.line(AREA, f"features of a {len(ids)}-token sentence, {sae.cfg.d_sae:,} features (L0 {l0.median():.0f} "
                      f"median, {l0[0]:.0f} at the first token), 1 thread, median of {reps}: the page's work from the "
                      f"cached trace (table, figure, sentence) {t['page'] * 1e3:.0f} ms, with the forward pass first "
                      f"{t['whole'] * 1e3:.0f} ms; encode and top {TOP} per token alone {t['encode'] * 1e3:.0f} ms, "
                      f"from the model read only to the SAE's layer {t['to layer'] * 1e3:.0f} ms")


def top_contexts(report: Report, view, sae, text, ids: list[int], folder: Path, reps: int = 5) -> int:
    """One pass of every feature over the bundled text (model/dictionary.py `index_features`), then one feature's
    top contexts as the card shows them (explorer/steps/dictionary.py); the rest of its card and the index kept on
    disk are reported. Returns the feature (the one the page opens first: the busiest on the sentence)."""
    from safetensors.torch import load_file, save_file

    from explorer.steps import dictionary
    from model import dictionary as model_dictionary
    from model.neurons import load_index, window_prefix

    model = view.bundle.model
    windows, cpu = [], time.process_time()
    index = model_dictionary.index_features(model, sae, ids, window_prefix(view.bundle),
                                            progress=lambda done, total: windows.append(total))
    cpu = time.process_time() - cpu
    report.record("features.index_s", index.seconds)
    feature = dictionary.busiest_feature(view, sae)

    def contexts():
        table = dictionary.contexts_table(view, index, feature)
        dictionary.contexts_figure(view, table, text, feature)
        dictionary.contexts_words(view, index, table, text, feature)
        return table

    def density():
        dictionary.density_figure(view, index, feature), dictionary.density_words(index, feature, text)

    def output():
        table = dictionary.output_tokens(view, sae, feature)
        dictionary.output_figure(view, table, feature), dictionary.output_words(view, table, feature)

    t = interleaved({"contexts": contexts, "density": density, "output": output}, reps=reps, warmup=1)
    report.record("features.contexts_s", t["contexts"])
    kept = {"values": index.top.values, "positions": index.top.positions, "spans": index.top.spans,
            "fired": index.fired, "counts": index.counts}
    megabytes = sum(v.numel() * v.element_size() for v in kept.values()) / 1e6
    start = time.perf_counter()
    index.top.save(folder / "top.safetensors")
    save_file({"fired": index.fired, "counts": index.counts}, str(folder / "density.safetensors"))
    saved = time.perf_counter() - start
    start = time.perf_counter()
    load_index(folder / "top.safetensors"), load_file(str(folder / "density.safetensors"))
    read = time.perf_counter() - start
    shown = len(contexts())
    l0 = float(index.fired.sum()) / max(index.tokens, 1)
    report.line(AREA, f"one pass of {sae.cfg.d_sae:,} features over {text.name} ({index.tokens:,} tokens, "
                      f"{windows[-1] if windows else 0:,} windows), 1 thread: {index.seconds:.1f} s ({cpu:.1f} s of "
                      f"CPU); L0 {l0:.0f}, {int((index.fired > 0).sum()):,} features fire somewhere; the index holds "
                      f"{megabytes:.0f} MB")
    report.line(AREA, f"feature {feature}'s card after the pass, median of {reps}: top contexts ({shown} shown; table, "
                      f"figure, sentence) {t['contexts'] * 1e3:.0f} ms, how often it fires {t['density'] * 1e3:.0f} "
                      f"ms, what it writes {t['output'] * 1e3:.0f} ms")
    report.line(AREA, f"the index on disk (safetensors, as model/neurons.py keeps a neuron index): written in "
                      f"{saved:.2f} s, read back in {read:.2f} s")
    return feature


def steering(report: Report, view, sae, feature: int, reps: int = 3) -> None:
    """The page's steering with the feature's decoder row at the page's default strength (explorer/steps/features.py
    `steer`: 20 greedy tokens without and with it, and the next token's shift), and the two continuations alone."""
    from explorer.steps import dictionary, features
    from model.steering import steered_continuation, steering_edit

    model, ids = view.bundle.model, list(view.ids)
    layer, strength = dictionary.place_layer(sae), features.DEFAULT_STRENGTH["feature"]
    source = features.feature_source(view, sae.W_dec[feature].detach(), f"feature {feature}")
    results = []
    with torch.no_grad():
        t = interleaved({"page": lambda: results.append(features.steer(view, source, layer, strength, STEER_TOKENS)),
                         "continuations": lambda: steered_continuation(
                             model, ids, steering_edit(layer, source.direction, strength), STEER_TOKENS)},
                        reps=reps, warmup=1)
        wall, cpu = time.perf_counter(), time.process_time()
        results.append(features.steer(view, source, layer, strength, STEER_TOKENS))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if results[-1].problem:
        raise RuntimeError(f"steering failed: {results[-1].problem}")
    report.record("features.steering_s", t["page"])
    report.line(AREA, f"steering with feature {feature} after block {layer} at strength {strength:g}, {len(ids)}-token "
                      f"prompt, 1 thread, median of {reps}: {STEER_TOKENS} tokens without and with it and the next "
                      f"token's shift (the page's steer) {t['page']:.2f} s; the two continuations alone "
                      f"{t['continuations']:.2f} s; once more: {wall:.2f} s, {cpu:.2f} s of CPU")


# --- memory: GPT-2, its dictionary and a class, in a fresh process ------------------------------------------------

def class_memory(report: Report, cache: Path, students: int) -> None:
    """`class_in_this_process` in a fresh Python: its memory at each stage, and how the class followed."""
    code = f"from bench import features; features.{class_in_this_process.__name__}({str(cache)!r}, {students})"
    env = {**os.environ, "EXPLORER_CACHE": str(cache.parent / "explorer")}      # the app's files of this run only
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=3600,
                         env=env)
    lines = out.stdout.strip().splitlines()
    if out.returncode or not lines:
        raise RuntimeError(f"the class's process failed: {out.stderr[-800:]}")
    measured = json.loads(lines[-1])
    memory = measured["memory"]
    report.record("features.class_memory_mb", max(memory.values()))
    report.line(AREA, f"before class, the teacher opens GPT-2's dictionary card (layer {FILE_LAYER - 1}): the "
                      f"dictionary loaded and one pass over the text in {measured['card_s']:.0f} s, "
                      f"{measured['card_cpu_s']:.0f} s of CPU (AppTest, 1 thread)")
    report.line(AREA, f"{students} students follow the teacher onto that card: median "
                      f"{measured['follow_median_s']:.2f} s, p95 {measured['follow_p95_s']:.2f} s (CPU queue, as "
                      "bench/classroom.py measures a follow)")
    report.line(AREA, "memory of that fresh process (RSS): " + ", ".join(f"{mb:,.0f} MB {stage}"
                                                                        for stage, mb in memory.items()))


def feature_lesson():
    """The ready lesson's first step (tinytales), then GPT-2's dictionary card at layer FILE_LAYER - 1 on SENTENCE."""
    from explorer import lessons

    first = json.loads(lessons.ready_lessons()["attention-in-ten-minutes"].to_json())["steps"][:1]
    card = {"page": "features", "tab": "dictionary", "view": {"model": "gpt2", "text": SENTENCE,
                                                              "layer": FILE_LAYER - 1},
            "note": "GPT-2's dictionary: which features fire on this sentence?"}
    return lessons.parse(json.dumps({"title": "Inside GPT-2's features", "steps": [*first, card]}))


def class_in_this_process(cache: str, students: int) -> None:
    """GPT-2 picked once before class (from the disk cache `cache`), its dictionary's card opened once by the teacher
    (the dictionary loaded from the cache, one pass over the text), then a teacher and `students` following onto
    that card (bench/classroom.py's class). Prints, as JSON on the last line, this process's memory after each."""
    import statistics

    from explorer.app import classroom, models
    from explorer.app.state import section_key
    from explorer.registry import BY_SLUG

    from .apptest import compiled_once, open_app, raised
    from .classroom import follow, join, next_step, poll_of, teacher_of
    from .timing import p95

    os.environ["HF_HUB_OFFLINE"] = "1"
    models.CACHE_DIR = Path(cache)
    memory = {"at the start": rss_mb(os.getpid())}
    page = BY_SLUG["features"]
    with compiled_once():
        card = open_app(None, timeout=180, model="gpt2", text=SENTENCE, layer=FILE_LAYER - 1)
        memory["with GPT-2 loaded"] = rss_mb(os.getpid())
        start, cpu = time.perf_counter(), time.process_time()
        card.session_state[section_key(page.slug)] = page.tab("dictionary")
        card.switch_page(page.file).run(timeout=1800)
        opened, cpu = time.perf_counter() - start, time.process_time() - cpu
        if raised(card) or "features_feature" not in card.session_state:
            raise RuntimeError(f"the dictionary card did not open: {raised(card) or 'no feature chosen'}")
        memory["and its dictionary's card (the SAE loaded, one pass over the text)"] = rss_mb(os.getpid())
        teacher = teacher_of(steps=feature_lesson().steps)
        crowd = join(teacher.session_state[classroom.CODE], students)
        moved = follow(crowd, [poll_of(at) for at in crowd], 1, next_step(teacher))
        if any(raised(at) for at in crowd):
            raise RuntimeError(f"a student's card raised: {next(raised(at) for at in crowd if raised(at))}")
        memory[f"and a class of {students} on that card"] = rss_mb(os.getpid())
    print(json.dumps({"memory": memory, "card_s": opened, "card_cpu_s": cpu,
                      "follow_median_s": statistics.median(moved["waits"]), "follow_p95_s": p95(moved["waits"])}),
          flush=True)
