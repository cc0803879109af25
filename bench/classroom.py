"""A live class on one server (AppTest: every student's script runs in this process, as on one Streamlit server):
how long students wait to follow the teacher's Next, answers sent together, and the memory of a class.

A student's app polls once a second (explorer/app/classroom.py POLL_SECONDS), so a student follows the teacher
when their next poll comes (somewhere in that second) plus the full run that opens the new view, after the runs
queued before it (AppTest cannot run sessions on parallel threads, so the queue is simulated with each run's
measured CPU time: one server process runs its scripts under one interpreter lock).

`python -c "from bench import classroom; classroom.run(students=30)"` measures a smaller class.
"""
import concurrent.futures
import os
import random
import statistics
import time

from .apptest import open_app
from .live import rss_mb
from .report import Report
from .timing import p95

AREA = "classroom"


def run(report: Report | None = None, students: int = 60) -> None:
    report = report or Report()
    from explorer.app import classroom as C
    from explorer.registry import BY_SLUG

    before = rss_mb(os.getpid())
    teacher = open_app(BY_SLUG["class"].file)
    teacher.selectbox(key="class_lesson").set_value("attention-in-ten-minutes").run()
    teacher.button(key="class_start").click().run()
    code = teacher.session_state[C.CODE]
    crowd = []
    for n in range(students):
        at = open_app(BY_SLUG["class"].file, join=code)
        at.text_input(key="class_join_name").set_value(f"student {n}").run()
        at.button(key="class_join").click().run()
        crowd.append(at)
    joined = C.store().present(code)
    report.line(AREA, f"{joined} of {students} students joined class {code}; server memory "
                      f"{rss_mb(os.getpid()) - before:,.0f} MB more than before the class")
    report.record("classroom.memory_mb", rss_mb(os.getpid()))

    waits, walls, cpus = [], [], []
    for step in range(1, 4):                                      # three Nexts of the teacher
        teacher.button(key="class_next").click().run()
        # Each poll arrives at a random moment of the second after the Next; the server runs the scripts one after
        # another in arrival order (one Python process: scripts share its interpreter lock), so a student waits
        # for their poll, for the runs queued before theirs, and for their own run, each measured.
        arrivals = sorted((random.uniform(0, C.POLL_SECONDS), n) for n in range(students))
        clock = 0.0
        for arrival, n in arrivals:
            start, cpu = time.perf_counter(), time.process_time()
            crowd[n].run()
            # the server's work for this run: its CPU time (AppTest waits for the script by sleeping, which a
            # server does not do); its wall time is reported beside it
            clock = max(clock, arrival) + time.process_time() - cpu
            walls.append(time.perf_counter() - start)
            cpus.append(time.process_time() - cpu)
            waits.append(clock)
            assert crowd[n].session_state[C.STEP] == step, "a student did not follow the teacher"
    report.line(AREA, f"following the teacher's Next, {students} students, 3 moves: median {sorted(waits)[len(waits) // 2]:.2f} s, "
                      f"p95 {p95(waits):.2f} s, slowest {max(waits):.2f} s (poll every {C.POLL_SECONDS:g} s)")
    report.line(AREA, f"a student's run that follows: {statistics.median(cpus) * 1000:.0f} ms of CPU (median), "
                      f"{statistics.median(walls) * 1000:.0f} ms of wall time in AppTest")
    report.record("classroom.follow_p95_s", p95(waits))

    store = C.store()
    seats = [at.session_state[C.SEAT] for at in crowd]
    question = 4                                                  # the lesson's question (any step takes answers)
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        sent = list(pool.map(lambda seat: store.answer(code, seat, question, "it"), seats))
    took = time.perf_counter() - start
    counted = sum(store.tally(code, question).values())
    report.line(AREA, f"{students} answers sent together: {sum(sent)} accepted, {counted} counted, in {took * 1000:.0f} ms")
    report.record("classroom.answers_counted", counted == students == sum(sent))
