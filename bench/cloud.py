"""The app as Streamlit Community Cloud runs it: the real server (`streamlit run streamlit_app.py`, bench/live.py's
`serve`) in a cgroup with a CPU quota (cpu.cfs_quota_us) of 1 core, then 0.5 core, and Cloud's largest memory
limit, 2.7 GB (bench/cgroup.py). At each quota:

- a class of 30: GPT-2 loaded before class (GPT-2 small's shape, random weights, from a disk cache: bench/gpt2.py),
  a teacher leads four tinytales steps ("Attention in ten minutes") and then a GPT-2 step; how long each student
  waits from the teacher's Next to their page drawn anew on the new step, and the server's memory;
- 10 visitors exploring the walk-through in Chromium, then 2 of them training: typing a new sentence to the page
  redrawn (bench/load.py's measure, with the server under the quota).

Why the students are websocket sessions, not Chromium tabs nor AppTest. A CPU quota throttles the server's wall
time, not its CPU time, so the class must run on the real server under the quota and be timed by the clock: the
classroom area's AppTest sessions (a queue of CPU times in the benchmark's own process) would not see a quota at
all. Thirty Chromium tabs would each redraw every chart on every Next on the same 2 cores as the server, which on
Cloud happens on 30 students' own devices: their drawing, not the server, would be measured. So each student is a
`bench.websocket_session.Session`: it speaks Streamlit's own protocol to the server as the browser does (opens the
join link, polls the class box on the fragment's 1-second timer, follows the page and query string the server sets),
and the server does for it everything it does for a browser tab; a student's wait ends when the server has sent its
new page (the full run and the class box showing the new step). The teacher is a session too. The 10 visitors
typing are Chromium tabs, as in bench/load.py, since their measure is the page redrawn in the browser.

The clients and the browsers run outside the cgroup. The machine is shared (other engineers' test runs keep its 2
cores busy, load average 8-12 at times), and a server that gets a sixth of a core cannot keep up with 30 students'
polls whatever its quota: so the server's cgroup has first call on the CPU (cpu.shares at its largest) up to its
quota, which makes the quota, not the neighbours, its limit. The load average is printed beside each measure.

    python -c "from bench import cloud; cloud.run(quotas=(0.5,))"          one quota
"""
import asyncio
import contextlib
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

from .cgroup import CLOUD_MEMORY_BYTES, Cgroup, unavailable
from .live import rss_mb, serve, step_slugs
from .report import Report
from .timing import p95

AREA = "cloud"
QUOTAS = (1.0, 0.5)                 # cores: Community Cloud gives an app 0.078 to 2
TARGET_QUOTA = 1.0                  # the targets are judged at this quota; the others are reported
LESSON = "attention-in-ten-minutes"
TINY_STEPS = 4                      # the lesson's steps the class walks before its GPT-2 step
CODE = re.compile(r"\*\*Class ([A-Z0-9]{6})\*\*")          # the class box's first words: **Class K7QX2M**


def run(report: Report | None = None, quotas=QUOTAS, students: int = 30, visitors: int = 10, trainers: int = 2,
        rounds: int = 3, d_model: int = 768) -> None:
    report = report or Report()
    why = unavailable()
    if why:
        report.line(AREA, f"NOT MEASURED: {why}")
        for key in ("cloud.follow_p95_s", "cloud.typing_p95_training_s", "cloud.gpt2_class_memory_mb"):
            report.not_measured(key, why)
        return
    from model import hub

    from .gpt2 import gpt2_shaped_snapshot

    with tempfile.TemporaryDirectory() as folder:
        cache = Path(folder) / "hub"
        gpt2_shaped_snapshot(cache, hub.GPT2, d_model=d_model)
        memory = 0.0
        for cores in quotas:                    # the targets' quota first: a later one's failure leaves them measured
            memory = max(memory, a_class(report, cores, students, cache))
            report.record("cloud.gpt2_class_memory_mb", memory)
            exploring(report, cores, visitors, trainers, rounds)


def load_average() -> str:
    return "load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg()[:2])


def limits(group: Cgroup) -> str:
    return f"{group.cpu_quota_cores():g} core, {group.memory_limit_bytes() / 1e9:.1f} GB"


def a_class(report: Report, cores: float, students: int, cache: Path) -> float:
    """A class of `students` on the server under `cores` and 2.7 GB; returns its memory (MB) with them on GPT-2."""
    env = {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    with Cgroup(cores=cores, memory_bytes=CLOUD_MEMORY_BYTES, name="cloud", first_call=True) as group, \
            serve(env=env, cgroup=group, timeout=120) as (base, server):
        assert group.holds(server.pid), "the server is not in its cgroup"
        before = load_average()
        try:
            out = asyncio.run(lead(base, students, lambda: rss_mb(server.pid)))
        except Exception as error:              # say what the server was doing
            raise RuntimeError(f"{error} (server {'running' if server.poll() is None else 'ended'}, "
                               f"{rss_mb(server.pid):,.0f} MB resident, cgroup peak {group.memory_peak_mb():,.0f} "
                               f"MB, killed for memory: {group.oom_kills()})") from error
        peak, kills, (periods, throttled, seconds) = group.memory_peak_mb(), group.oom_kills(), group.throttled()
        alive = server.poll() is None
        where = f"{limits(group)}, {students} students"
    tiny = [wait for move in out["waits"][:-1] for wait in move]
    gpt2 = out["waits"][-1]
    report.line(AREA, f"[{where}] GPT-2 loaded before class in {out['gpt2_load_s']:.1f} s; {before} -> "
                      f"{load_average()}")
    report.line(AREA, f"[{where}] following {TINY_STEPS} tinytales Nexts: median {statistics.median(tiny):.2f} s, "
                      f"p95 {p95(tiny):.2f} s, slowest {max(tiny):.2f} s ({len(tiny)} follows; poll every 1 s)")
    report.line(AREA, f"[{where}] following onto the GPT-2 step: median {statistics.median(gpt2):.2f} s, "
                      f"p95 {p95(gpt2):.2f} s, slowest {max(gpt2):.2f} s")
    report.line(AREA, f"[{where}] server memory with the class on GPT-2: {out['rss_mb']:,.0f} MB resident (largest "
                      f"seen); the cgroup's peak, page cache included, {peak:,.0f} MB; killed for memory: {kills}; "
                      f"server {'alive' if alive else 'DEAD'}; CPU quota throttled {throttled} of {periods} periods "
                      f"({seconds:.1f} s); teacher's presses the server never ran (pressed again): "
                      f"{out['lost_presses']}")
    if out["problems"]:
        raise RuntimeError(f"the class showed an exception: {out['problems'][:3]}")
    if cores == TARGET_QUOTA:
        report.record("cloud.follow_p95_s", p95(tiny))
    return out["rss_mb"] if alive and not kills else float("inf")


def lesson_link() -> tuple[str, int]:
    """A lesson's link: the ready lesson's first TINY_STEPS + 1 steps, then GPT-2's attention; its number of steps."""
    from explorer import lessons

    from .classroom import gpt2_lesson
    from .gpt2 import SENTENCE

    lesson = gpt2_lesson(SENTENCE, TINY_STEPS + 1, "A class on Community Cloud")
    return lessons.as_link(lesson), len(lesson.steps)


async def lead(base: str, students: int, memory) -> dict:
    """GPT-2 opened once before class; a teacher starts a class on `lesson_link()`, `students` join, the teacher
    presses Next to the last step. Each move's waits (seconds), the largest `memory()` seen, what went wrong."""
    from urllib.parse import quote_plus

    from .gpt2 import SENTENCE
    from .websocket_session import Session

    start = time.perf_counter()
    async with Session(base, "", f"model=gpt2&text={quote_plus(SENTENCE)}") as before_class:
        await before_class.wait_for(lambda run: run.full, timeout=600)
    loaded = time.perf_counter() - start
    link, steps = lesson_link()
    async with Session(base, "class", f"lesson={link}") as teacher, contextlib.AsyncExitStack() as room:
        await teacher.wait_for(lambda run: "class_start" in run.buttons)
        pressed = await teacher.click("class_start")
        code = CODE.search((await teacher.wait_for(lambda run: CODE.search(run.text), pressed)).text)[1]
        crowd = [await room.enter_async_context(Session(base, "class", f"join={code}&seat=cloud{n}"))
                 for n in range(students)]
        await all_show(crowd, f"step 1 of {steps}", 0)
        lost = 0
        if "class_show_step" in [run for run in teacher.runs if run.full][-1].buttons:     # still on the class page
            lost += (await press(teacher, "class_show_step", f"step 1 of {steps}"))[1]
        waits, largest = [], memory()
        for step in range(2, steps + 1):
            pressed, missed = await press(teacher, "class_next", f"step {step} of {steps}")
            lost += missed
            seen = await all_show(crowd, f"step {step} of {steps}", pressed)
            waits.append([t - pressed for t in seen])
            largest = max(largest, memory())
        problems = teacher.problems() + [p for s in crowd for p in s.problems()]
    return {"waits": waits, "rss_mb": largest, "gpt2_load_s": loaded, "problems": problems, "lost_presses": lost}


async def press(teacher, key: str, text: str, tries: int = 3, patience: float = 30) -> tuple[float, int]:
    """The teacher presses a button until their page shows `text` (a press the server never ran is pressed again,
    as a teacher would); returns when the press that worked was sent, and how many were lost."""
    for lost in range(tries):
        pressed = await teacher.click(key)
        try:
            await teacher.shows(text, pressed, patience)
            return pressed, lost
        except TimeoutError:
            if any(at > pressed for at, how in teacher.full_runs() if how == "started full"):
                await teacher.shows(text, pressed, 300)       # the server ran the press: a busy server is slow
                return pressed, lost
    raise RuntimeError(f"the teacher pressed {key} {tries} times and never saw {text!r}")


async def all_show(crowd: list, text: str, after: float, timeout: float = 300) -> list[float]:
    """When each session of `crowd` showed `text` (bench.websocket_session.Session.shows); says how many did not."""
    waits = [asyncio.ensure_future(s.shows(text, after, timeout)) for s in crowd]
    done, late = await asyncio.wait(waits, timeout=timeout + 5)
    failed = [w for w in done if w.exception()]
    if late or failed:
        for w in late:
            w.cancel()
        behind = [f"{s.query}: {s.last_seen()}; {s.problems()[:2]}" for s, w in zip(crowd, waits)
                  if w in failed or w in late]
        raise RuntimeError(f"{len(crowd) - len(late) - len(failed)} of {len(crowd)} students showed {text!r} within "
                           f"{timeout:.0f} s of a press {time.perf_counter() - after:.0f} s ago; the others: {behind[:3]}")
    return [w.result() for w in waits]


def exploring(report: Report, cores: float, visitors: int, trainers: int, rounds: int) -> None:
    """bench/load.py's visitors typing in Chromium, the server under `cores` and 2.7 GB."""
    from .load import print_updates, typing_updates

    slugs = step_slugs()
    with Cgroup(cores=cores, memory_bytes=CLOUD_MEMORY_BYTES, name="cloud", first_call=True) as group:
        before = load_average()
        updates, pages = typing_updates(report, visitors, trainers, rounds, slugs, cgroup=group, area=AREA)
        report.line(AREA, f"[{limits(group)}] {visitors} visitors exploring, {trainers} of them training; {before} -> "
                          f"{load_average()}")
    print_updates(report, AREA, updates, pages, visitors, trainers, slugs)
    if cores == TARGET_QUOTA:
        report.record("cloud.typing_p95_training_s", p95(updates[f"{trainers} training"]))
