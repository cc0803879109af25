"""Two replicas sharing one class through Redis: a real `redis-server` on a free port and two replica processes,
each its own Python process with `CLASS_STORE_URL=redis://...` running the app through AppTest, as two Streamlit
servers behind a proxy with session affinity would (a session stays on its replica; only the class is shared).
The teacher and `per_replica` students are on replica 1, `per_replica` students on replica 2.

Why AppTest processes rather than two `streamlit run` servers: a follow is then measured as the rest of the
classroom bench measures it (each student's poll and the full run it asks for, by CPU time, queued on its own
replica), 60 browsers are not needed, and the two processes still share only Redis (the replicas' store clients,
Lua scripts and expiry are the real ones). What they do not measure: the websocket and the proxy.

    python -m bench.replica --students 30 [--code CODE]     one replica (the teacher's when --code is missing);
                                                             it reads commands as JSON lines on stdin
"""
import argparse
import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

from .live import ROOT, rss_mb
from .report import Report
from .timing import p95

AREA = "classroom"
SAY = "@@ "                         # the replica's answers on stdout (Streamlit may print other lines)


# --- the orchestra: redis-server, two replica processes ------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def redis_server():
    """A throwaway redis-server on a free port, without persistence (Debian's `redis-server`): its URL."""
    import redis

    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    port = free_port()
    server = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client, deadline = redis.Redis.from_url(url), time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)
        yield url
    finally:
        server.terminate()
        server.wait(10)


class Replica:
    """One replica process, driven by JSON lines."""

    def __init__(self, url: str, students: int, code: str | None = None):
        command = [sys.executable, "-m", "bench.replica", "--students", str(students)]
        command += ["--code", code] if code else []
        self.process = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "CLASS_STORE_URL": url},
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True, bufsize=1)

    def send(self, **command) -> None:
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def hear(self) -> dict:
        for line in self.process.stdout:
            if line.startswith(SAY):
                message = json.loads(line[len(SAY):])
                if "error" in message:
                    raise RuntimeError(f"a replica failed: {message['error']}")
                return message
        raise RuntimeError(f"a replica stopped (exit status {self.process.wait(10)})")

    def ask(self, **command) -> dict:
        self.send(**command)
        return self.hear()

    def close(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.send(do="quit")
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def both(replicas: list[Replica], **command) -> list[dict]:
    """The same command to every replica at once (they run in parallel), then their answers."""
    for r in replicas:
        r.send(**command)
    return [r.hear() for r in replicas]


def run_two(per_replica: int, moves: int = 3) -> dict:
    """The teacher and `per_replica` students on replica 1, `per_replica` on replica 2; `moves` Nexts; then
    every student answers twice at once (a second click changes nothing). What each replica measured."""
    import redis

    from explorer.classroom import open_store

    from .classroom import QUESTION

    with redis_server() as url:
        first = Replica(url, per_replica)
        replicas = [first]
        try:
            code = first.hear()["code"]
            replicas.append(Replica(url, per_replica, code))
            replicas[1].hear()
            waits, cpus, full_runs = [[], []], [[], []], [[], []]
            for step in range(1, moves + 1):
                teacher_cpu = first.ask(do="next")["teacher_cpu"]
                # replica 1's students queue behind the teacher's run; replica 2 runs on its own cores
                for r, cpu in zip(replicas, (teacher_cpu, 0.0)):
                    r.send(do="follow", step=step, teacher_cpu=cpu)
                for n, r in enumerate(replicas):
                    heard = r.hear()
                    waits[n] += heard["waits"]
                    cpus[n] += heard["cpus"]
                    full_runs[n] += heard["full_runs"]
            accepted = sum(m["accepted"] for m in both(replicas, do="answer", step=QUESTION, times=2))
            store = open_store(url)
            counted = store.tally(code, QUESTION)
            present = store.present(code)
            memory = [m["memory_mb"] for m in both(replicas, do="memory")]
            keys = len(redis.Redis.from_url(url).keys(f"class:{code}*"))
        finally:
            for r in replicas:
                r.close()
    return {"code": code, "waits": waits, "cpus": cpus, "full_runs": full_runs, "accepted": accepted,
            "counted": counted, "present": present, "memory_mb": memory, "redis_keys": keys}


def two_replicas(report: Report, per_replica: int = 30, moves: int = 3) -> dict:
    out = run_two(per_replica, moves)
    students = 2 * per_replica
    for n in range(2):
        who = "the teacher and " if n == 0 else ""
        report.line(AREA, f"replica {n + 1} ({who}{per_replica} students, Redis-shared class): follow median "
                          f"{statistics.median(out['waits'][n]):.2f} s, p95 {p95(out['waits'][n]):.2f} s, slowest "
                          f"{max(out['waits'][n]):.2f} s; a follow {statistics.median(out['cpus'][n]) * 1000:.1f} ms "
                          f"of CPU; {max(out['full_runs'][n])} full run per follow; memory {out['memory_mb'][n]:,.0f} MB")
    counted = sum(out["counted"].values())
    report.line(AREA, f"two replicas: {students} students present in Redis: {out['present']}; each answered twice at "
                      f"once: {out['accepted']} accepted, {counted} counted (one per student)")
    report.record("classroom.replica_follow_p95_s", max(p95(w) for w in out["waits"]))
    report.record("classroom.replica_answers_counted", counted == students == out["present"]
                  and out["accepted"] == 2 * students)
    report.record("classroom.replica_memory_mb", max(out["memory_mb"]))
    return out


# --- one replica ---------------------------------------------------------------------------------------------


def say(**message) -> None:
    print(SAY + json.dumps(message), flush=True)


def replica(students: int, code: str | None) -> None:
    """The teacher (when `code` is None) and `students` students, in this process; then commands from stdin."""
    import concurrent.futures

    from explorer.app import classroom
    from . import classroom as bench_classroom

    teacher = None
    if code is None:
        teacher = bench_classroom.teacher_of()
        code = teacher.session_state[classroom.CODE]
    crowd = bench_classroom.join(code, students, prefix="student" if teacher else "student on replica 2")
    polls = [bench_classroom.poll_of(at) for at in crowd]
    seats = [at.session_state[classroom.SEAT] for at in crowd]
    say(code=code, memory_mb=rss_mb(os.getpid()))
    for line in sys.stdin:
        command = json.loads(line)
        do = command["do"]
        if do == "next":
            say(teacher_cpu=bench_classroom.next_step(teacher))
        elif do == "follow":
            say(**bench_classroom.follow(crowd, polls, command["step"], command["teacher_cpu"]))
        elif do == "answer":
            store = classroom.store()
            with concurrent.futures.ThreadPoolExecutor(16) as pool:
                sent = [pool.submit(store.answer, code, seat, command["step"], "it")
                        for _ in range(command.get("times", 1)) for seat in seats]
                say(accepted=sum(f.result() for f in sent))
        elif do == "memory":
            say(memory_mb=rss_mb(os.getpid()))
        elif do == "quit":
            break


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.replica", description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--code", default=None, help="the class to join (none: this replica holds the teacher)")
    args = parser.parse_args(argv)
    from .apptest import compiled_once

    try:
        with compiled_once():
            replica(args.students, args.code)
    except Exception as error:                 # the orchestra hears it instead of waiting
        say(error=f"{type(error).__name__}: {error}"[:300])
        raise


if __name__ == "__main__":
    main()
