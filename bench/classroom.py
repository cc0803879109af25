"""A live class (AppTest: every student's script runs in this process, as on one Streamlit server): how long
students wait to follow the teacher's Next, what an idle poll costs, answers sent together, the memory of a
class; the same on a GPT-2-small-shaped step; and two replicas sharing one class through a real redis-server.

How a follow is measured. A student's app polls once a second: on a server the class box's fragment runs alone
(`run_every`), and when the teacher moved it asks for the full run that opens the new view. AppTest's run_every
never ticks, so `bench.apptest.run_fragment` runs the fragment alone as the server does, with whatever it asks for
(`st.switch_page`, `st.rerun`) in the same call; it counts the full runs a follow costs. The teacher presses Next
the same way (a click in the fragment). Each student's poll arrives at a random moment of the second after the
Next; one server process runs its scripts one after another (they share its interpreter lock), so a student
waits for their poll, for the teacher's run and the runs queued before theirs, and for their own run, each counted
by its CPU time (AppTest waits for a script by sleeping, which a server does not do; wall times are reported too).
As on a server, each script is compiled once (`bench.apptest.compiled_once`), not again on every AppTest run.

    python -c "from bench import classroom; classroom.run(students=30)"     a smaller class
"""
import concurrent.futures
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from .apptest import compiled_once, fragment_ids, open_app, run_fragment
from .live import rss_mb
from .report import Report
from .timing import p95, torch_threads

AREA = "classroom"
MOVES = 3                           # the teacher's Nexts measured (tinytales)
QUESTION = 4                        # the ready lesson's step with a question (any step takes answers)


def run(report: Report | None = None, students: int = 60, gpt2_students: int = 30, per_replica: int = 30,
        d_model: int = 768) -> None:
    report = report or Report()
    answering(report, load_bundled_model("tinytales"), "tinytales")
    lecture_summary(report, students)
    with compiled_once():
        one_class(report, students)
        gpt2_class(report, gpt2_students, students, d_model)
    from . import replica
    replica.two_replicas(report, per_replica)


# --- the pieces every measure uses (also bench/replica.py's, one per replica process) -------------------------


def teacher_of(lesson: str = "attention-in-ten-minutes", steps=None):
    """A teacher's app that started a class on a ready lesson (or on `steps`, a lesson built in the app)."""
    from explorer.app import classroom
    from explorer.registry import BY_SLUG

    teacher = open_app(BY_SLUG["class"].file)
    if steps is not None:
        teacher.session_state[classroom.DRAFT] = list(steps)
        teacher.session_state["lesson_title"] = "A class on GPT-2"
        teacher.run()
        lesson = "mine"
    teacher.selectbox(key="class_lesson").set_value(lesson).run()
    teacher.button(key="class_start").click().run()
    assert not teacher.exception, teacher.exception
    return teacher


def join(code: str, students: int, prefix: str = "student") -> list:
    """`students` apps that joined class `code` from its link, each with a name."""
    from explorer.registry import BY_SLUG

    crowd = []
    for n in range(students):
        at = open_app(BY_SLUG["class"].file, join=code)
        at.text_input(key="class_join_name").set_value(f"{prefix} {n}").run()
        at.button(key="class_join").click().run()
        crowd.append(at)
    return crowd


def poll_of(at) -> str:
    """The class box's fragment (the only fragment of the page a student joins on)."""
    [poll] = fragment_ids(at)
    return poll


def next_step(teacher) -> float:
    """The teacher presses Next in the class box (one full run: the buttons are outside the poll); its CPU s."""
    cpu = time.process_time()
    teacher.button(key="class_next").click().run()
    assert not teacher.exception, teacher.exception
    return time.process_time() - cpu


def follow(crowd: list, polls: list[str], step: int, teacher_cpu: float) -> dict:
    """Every student's poll in the second after the teacher's Next (random arrivals, queued by CPU time after the
    teacher's run); returns each student's wait, CPU and wall time, and the full runs each follow cost."""
    from explorer.app import classroom

    arrivals = sorted((random.uniform(0, classroom.POLL_SECONDS), n) for n in range(len(crowd)))
    clock, out = teacher_cpu, {"waits": [], "cpus": [], "walls": [], "full_runs": []}
    for arrival, n in arrivals:
        start, cpu = time.perf_counter(), time.process_time()
        runs = run_fragment(crowd[n], polls[n])
        used = time.process_time() - cpu
        clock = max(clock, arrival) + used
        out["walls"].append(time.perf_counter() - start)
        out["cpus"].append(used)
        out["waits"].append(clock)
        out["full_runs"].append(runs)
        assert crowd[n].session_state[classroom.STEP] == step, "a student did not follow the teacher"
        assert not crowd[n].exception, crowd[n].exception
    return out


def idle_polls(crowd: list, polls: list[str]) -> list[float]:
    """One poll of each student when the teacher did not move: its CPU seconds (it must not run the app)."""
    cpus = []
    for at, poll in zip(crowd, polls):
        cpu = time.process_time()
        runs = run_fragment(at, poll)
        cpus.append(time.process_time() - cpu)
        assert runs == 0, "an idle poll ran the whole app"
    return cpus


def answer_together(store, code: str, seats: list[str], step: int = QUESTION) -> int:
    """Every seat answers step `step` at once (16 threads); how many answers the store accepted."""
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        return sum(pool.map(lambda seat: store.answer(code, seat, step, "it"), seats))


def teacher_lesson_page(step: int, lesson: str = "attention-in-ten-minutes") -> str:
    from explorer import lessons
    return lessons.ready_lessons()[lesson].steps[step].page


def merged(results: list[dict]) -> dict:
    return {key: [v for r in results for v in r[key]] for key in results[0]}


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


# --- a step's question answered, and what the class got right ------------------------------------------------

LECTURE = "transformers-in-one-lecture"
GPT2_VIEWS = [({"layer": 5, "head": 3}, kind) for kind in ("next-word", "token-count", "nearest-word", "looks-at",
                                                          "lens-layer", "knockout", "biggest-push")]
QUESTIONS = 8                     # the questions a class of 60 answers


def load_bundled_model(name: str):
    from model.checkpoint import load_bundled
    return load_bundled(name)


def answering(report: Report, bundle, name: str, views=None, sentence: str = "", key: str = "classroom.question_ms",
              reps: int = 5) -> None:
    """Each question a step asks, answered from the step's trace (the page traced it already) with one torch
    thread, as the app does once per server: its median time, per kind; the slowest is the figure. `views`: (step
    view, kind) pairs on `sentence`; None: the lecture's own questions on their steps."""
    from explorer import lessons, memo, questions
    from explorer.app.state import READ_LIMIT

    if views is None:
        steps = [s for s in lessons.ready_lessons()[LECTURE].steps
                 if s.question and questions.KINDS[s.question.kind].needs_model and s.view.get("model") == name]
        asked = [(s.view, s.view["text"], s.question) for s in steps]
    else:
        asked = [(view, sentence, questions.Question(kind, text="unbelievably" if kind == "token-count" else None))
                 for view, kind in views]
    cfg, times, traced, tokens = bundle.model.cfg, {}, [], 0
    with torch_threads(1):
        for view, text, question in asked:
            reading = questions.reading(name, bundle, text, READ_LIMIT)
            start = time.perf_counter()
            memo.compute_trace(reading)                  # the trace anew (the page's run usually made it already)
            traced.append(time.perf_counter() - start)
            where = questions.place(view, cfg.n_layers, cfg.n_heads, len(reading.ids))
            tokens, once = max(tokens, len(reading.ids)), []
            for _ in range(reps):
                start = time.perf_counter()
                questions.ask(question, reading, where)
                once.append(time.perf_counter() - start)
            times[question.kind] = statistics.median(once)
    slowest = max(times, key=times.get)
    report.line(AREA, f"a step's question answered from its trace, {name} (up to {tokens} tokens), 1 "
                      "thread: " + ", ".join(f"{kind} {ms(t)}" for kind, t in times.items())
                      + f"; the step's trace, computed anew, {ms(statistics.median(traced))} (median)")
    report.record(key, times[slowest] * 1000)


def lecture_summary(report: Report, students: int, questions_asked: int = QUESTIONS) -> None:
    """A class of `students` answers the lecture's first `questions_asked` questions, each student every question,
    all at once per question (16 threads); the teacher's summary and CSV must say exactly what was sent."""
    import csv
    import io
    from collections import Counter

    from explorer import lessons, questions
    from explorer.classroom import open_store, summary

    lecture = lessons.ready_lessons()[LECTURE]
    store = open_store("")
    code, key = store.open_class(json.loads(lecture.to_json()))
    seats = [f"seat {n:02d}" for n in range(students)]
    for n, seat in enumerate(seats):
        store.join(code, seat, f"student {n}" if n % 3 else "")
    steps = [n for n, step in enumerate(lecture.steps) if step.question][:questions_asked]
    asked = {n: questions.ask(lecture.steps[n].question, *_reading_of(lecture.steps[n])) for n in steps}
    sent = {n: {seat: asked[n].options[(i + n) % len(asked[n].options)] for i, seat in enumerate(seats)}
            for n in steps}
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        for n in steps:
            accepted = sum(pool.map(lambda seat: store.answer(code, seat, n, sent[n][seat]), seats))
            assert accepted == students, f"{students - accepted} answers refused at step {n}"
            store.reveal(code, key, n)
    took = time.perf_counter() - start
    answers = {n: store.answers(code, n) for n in steps}
    table = summary.summary_table(summary.summarise(asked, answers))
    rows = list(csv.DictReader(io.StringIO(summary.csv_of(summary.answers_table(asked, answers, store.roster(code))))))
    same = (answers == sent and list(table["answered"]) == [students] * len(steps)
            and list(table["right"]) == [str(Counter(sent[n].values())[asked[n].answer]) if asked[n].answer else
                                         "(poll)" for n in steps]
            and sorted((int(r["step"]) - 1, r["answer"]) for r in rows)
            == sorted((n, a) for n in steps for a in sent[n].values()))
    kinds = len({lecture.steps[n].question.kind for n in steps})
    report.line(AREA, f"{students} students answered {len(steps)} questions ({kinds} kinds) at once per question: "
                      f"{sum(len(a) for a in answers.values())} answers kept of {students * len(steps)} sent in "
                      f"{took:.2f} s; the summary and the CSV's {len(rows)} rows {'match' if same else 'DIFFER FROM'} "
                      "the answers sent")
    report.record("classroom.lecture_summary_exact", float(same))


def _reading_of(step):
    """(the step's view as its page reads it, where its question looks) for `questions.ask` (None for a poll)."""
    from explorer import questions
    from explorer.app.state import READ_LIMIT

    if not questions.KINDS[step.question.kind].needs_model:
        return None, None
    bundle = load_bundled_model(step.view["model"])
    reading = questions.reading(step.view["model"], bundle, step.view["text"], READ_LIMIT)
    cfg = bundle.model.cfg
    return reading, questions.place(step.view, cfg.n_layers, cfg.n_heads, len(reading.ids))


# --- one class of tinytales ----------------------------------------------------------------------------------


def one_class(report: Report, students: int) -> None:
    with AnswerCounter() as asked:                      # the lesson's one question, over the whole class
        a_class(report, students)
    report.line(AREA, f"the lesson's question was answered from the model {asked.count} "
                      f"time{'s' * (asked.count != 1)} for the teacher (the class page's summary, the class box) and "
                      f"{students} students, who all followed onto its step")
    report.record("classroom.question_computations", asked.count)


def a_class(report: Report, students: int) -> None:
    """A class of `students` on the ready lesson: they join, follow the teacher's Nexts onto the step with the
    question, poll while idle, and answer it all at once."""
    from explorer.app import classroom

    before = rss_mb(os.getpid())
    teacher = teacher_of()
    code = teacher.session_state[classroom.CODE]
    crowd = join(code, students)
    polls = [poll_of(at) for at in crowd]
    report.line(AREA, f"{classroom.store().present(code)} of {students} students joined class {code}; server memory "
                      f"{rss_mb(os.getpid()) - before:,.0f} MB more than before the class")
    report.record("classroom.memory_mb", rss_mb(os.getpid()))

    idle = idle_polls(crowd, polls)
    moves = [follow(crowd, polls, step, next_step(teacher)) for step in range(1, MOVES + 1)]
    idle += idle_polls(crowd, polls)
    m = merged(moves)
    report.line(AREA, f"following the teacher's Next, {students} students, {MOVES} moves: median "
                      f"{statistics.median(m['waits']):.2f} s, p95 {p95(m['waits']):.2f} s, slowest {max(m['waits']):.2f} s "
                      f"(poll every {classroom.POLL_SECONDS:g} s)")
    report.line(AREA, f"a follow (the poll and the full run it asks for): {ms(statistics.median(m['cpus']))} of CPU "
                      f"(median), {ms(statistics.median(m['walls']))} of wall time in AppTest; full runs per follow: "
                      f"{min(m['full_runs'])}-{max(m['full_runs'])}")
    pages = [teacher_lesson_page(step) for step in range(MOVES + 1)]
    report.line(AREA, "a follow by move: " + "; ".join(
        f"{pages[n]} to {pages[n + 1]} {ms(statistics.median(move['cpus']))} of CPU, {max(move['full_runs'])} full "
        f"run{'s' * (max(move['full_runs']) > 1)}" for n, move in enumerate(moves)))
    report.line(AREA, f"an idle poll (the teacher did not move): {ms(statistics.median(idle))} of CPU (median); "
                      f"{students} students' polls take {statistics.median(idle) * students / classroom.POLL_SECONDS:.0%} "
                      f"of one core")
    report.record("classroom.follow_p95_s", p95(m["waits"]))
    report.record("classroom.follow_full_runs", max(m["full_runs"]))
    report.record("classroom.idle_poll_ms", statistics.median(idle) * 1000)

    onto = follow(crowd, polls, QUESTION, next_step(teacher))            # one more Next: the step with the question
    report.line(AREA, f"following onto the question's step: {ms(statistics.median(onto['cpus']))} of CPU (median)")

    seats = [at.session_state[classroom.SEAT] for at in crowd]
    start = time.perf_counter()
    sent = answer_together(classroom.store(), code, seats)
    took = time.perf_counter() - start
    counted = sum(classroom.store().tally(code, QUESTION).values())
    report.line(AREA, f"{students} answers sent together: {sent} accepted, {counted} counted, in {took * 1000:.0f} ms")
    report.record("classroom.answers_counted", counted == students == sent)


# --- a class on a GPT-2-small-shaped step -----------------------------------------------------------------------


def gpt2_lesson(sentence: str, tiny_steps: int = 1, title: str = "A class on GPT-2"):
    """The ready lesson's first `tiny_steps` steps (tinytales), then GPT-2's attention on `sentence`."""
    from explorer import lessons

    steps = json.loads(lessons.ready_lessons()["attention-in-ten-minutes"].to_json())["steps"][:tiny_steps]
    gpt2 = {"page": "attention", "tab": "who-looks", "view": {"model": "gpt2", "text": sentence, "layer": 5, "head": 3},
            "note": "GPT-2: which earlier word does this head read?"}
    return lessons.parse(json.dumps({"title": title, "steps": [*steps, gpt2]}))


class AnswerCounter:
    """Counts the questions answered from the model (explorer.questions.ask, through the app's cache)."""

    def __init__(self):
        from explorer import questions

        self.questions, self.original, self.count = questions, questions.ask, 0

    def __enter__(self):
        def counted(*args):
            self.count += 1
            return self.original(*args)

        self.questions.ask = counted
        return self

    def __exit__(self, *exc):
        self.questions.ask = self.original


class TraceCounter:
    """Counts the traces computed (the trace cache's misses), by (model, sentence, experiment)."""

    def __init__(self):
        from explorer import memo

        self.memo, self.original, self.keys = memo, memo.compute_trace, []

    def __enter__(self):
        def counted(view, experiment=None, ids=None):
            self.keys.append((view.key, tuple(view.ids if ids is None else ids), experiment))
            return self.original(view, experiment, ids)

        self.memo.compute_trace = counted
        return self

    def __exit__(self, *exc):
        self.memo.compute_trace = self.original


def gpt2_class(report: Report, students: int, everyone: int, d_model: int) -> None:
    """`students` follow the teacher onto a GPT-2 step (GPT-2 picked once before class, as docs/teaching.md advises);
    then `everyone` are on it, for the memory."""
    from explorer.app import classroom
    from explorer.app import models
    from model import hub
    from model.pretrained import load_pretrained

    from .gpt2 import SENTENCE, gpt2_shaped_snapshot

    with tempfile.TemporaryDirectory() as folder:
        cache = Path(folder) / "hub"
        gpt2_shaped_snapshot(cache, hub.GPT2, d_model=d_model)
        os.environ["HF_HUB_OFFLINE"] = "1"
        models.CACHE_DIR = cache
        try:
            start = time.perf_counter()
            open_app(None, timeout=180, model="gpt2", text="Before class, the teacher opens GPT-2 once.")
            loaded = time.perf_counter() - start
            teacher = teacher_of(steps=gpt2_lesson(SENTENCE).steps)
            code = teacher.session_state[classroom.CODE]
            crowd = join(code, students, prefix="gpt2 student")
            polls = [poll_of(at) for at in crowd]
            with TraceCounter() as traces:
                moved = follow(crowd, polls, 1, next_step(teacher))
            late = join(code, everyone - students, prefix="late student")
            memory = rss_mb(os.getpid())
            assert all(at.session_state[classroom.STEP] == 1 for at in late)
            answering(report, load_pretrained(hub.cached(hub.GPT2, cache)), "gpt2", GPT2_VIEWS, SENTENCE,
                      "classroom.gpt2_question_ms")
        finally:
            models.CACHE_DIR = None
    distinct = len(set(traces.keys))
    report.line(AREA, f"GPT-2 ({d_model} wide, random weights, loaded once before class in {loaded:.1f} s): {students} "
                      f"students follow onto its attention step: median {statistics.median(moved['waits']):.2f} s, "
                      f"p95 {p95(moved['waits']):.2f} s, slowest {max(moved['waits']):.2f} s; a follow "
                      f"{ms(statistics.median(moved['cpus']))} of CPU (median)")
    report.line(AREA, f"GPT-2: traces computed while the teacher and {students} students moved: {len(traces.keys)}, "
                      f"for {distinct} distinct (model, sentence, experiment)")
    report.line(AREA, f"GPT-2: server memory with {everyone} students on its step: {memory:,.0f} MB "
                      f"(this process also holds the first class)")
    report.record("classroom.gpt2_follow_p95_s", p95(moved["waits"]))
    if distinct:
        report.record("classroom.gpt2_traces_per_sentence", len(traces.keys) / distinct)
    else:
        report.not_measured("classroom.gpt2_traces_per_sentence", "no trace computed: the step was traced before")
    report.record("classroom.gpt2_memory_mb", memory)
