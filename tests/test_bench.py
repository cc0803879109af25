"""The benchmark's verdicts (bench/): a missed target exits 1, all met exits 0; no heavy benchmark runs here."""
import ast
import importlib
import time
from pathlib import Path

import pytest

from bench import AREAS
from bench.__main__ import main
from bench.report import MET, MISSED, NOT_MEASURED, Report
from bench.targets import AT_LEAST, AT_MOST, TARGETS, Target, format_figure

ROOT = Path(__file__).resolve().parents[1]
FAKE = [Target("fast.ms", "a page's script run", 60, AT_MOST, "ms"),
        Target("fast.ratio", "ours vs a plain loop", 0.9, AT_LEAST, "x"),
        Target("other.mb", "server memory", 1500, AT_MOST, "MB")]


def areas(**figures):
    """Fake areas that record the given figures ("fast_ms" is target "fast.ms")."""
    def runner(area):
        def run(report):
            for key, value in figures.items():
                if key.startswith(area + "_"):
                    report.record(key.replace("_", ".", 1), value)
        return run
    return {"fast": runner("fast"), "other": runner("other")}


def test_all_targets_met_exits_0_and_the_summary_says_met(capsys):
    assert main([], areas(fast_ms=41.0, fast_ratio=0.97, other_mb=535), FAKE) == 0
    summary = capsys.readouterr().out.split("\n\n")[-1]
    assert "41 ms" in summary and "at most 60 ms" in summary and "0.97x" in summary and "at least 0.9x" in summary
    assert sum(line.endswith("  met") for line in summary.splitlines()) == 3 and "3 of 3 targets met" in summary


def test_one_missed_target_exits_1_and_is_named_in_the_summary(capsys):
    assert main([], areas(fast_ms=41.0, fast_ratio=0.85, other_mb=535), FAKE) == 1
    summary = capsys.readouterr().out.split("\n\n")[-1]
    [missed] = [line for line in summary.splitlines() if MISSED in line]
    assert "ours vs a plain loop" in missed and "0.85x" in missed
    assert "2 of 3 targets met; 1 missed" in summary


def test_an_area_that_raises_leaves_its_targets_not_measured_and_the_others_run(capsys):
    runners = areas(other_mb=535)
    runners["fast"] = lambda report: 1 / 0
    assert main([], runners, FAKE) == 1
    out = capsys.readouterr().out
    assert out.count(NOT_MEASURED) == 2 and "ZeroDivisionError" in out and "1 of 3 targets met" in out


def test_a_target_the_area_did_not_record_counts_as_not_measured():
    report = Report(FAKE)
    report.start("fast")
    report.record("fast.ms", 10)
    assert [o.verdict for o in report.results()] == [MET, NOT_MEASURED] and report.exit_status() == 1


def test_only_the_areas_that_ran_are_judged(capsys):
    assert main(["--only", "other"], areas(fast_ratio=0.1, other_mb=535), FAKE) == 0
    summary = capsys.readouterr().out.split("\n\n")[-1]
    assert "server memory" in summary and "plain loop" not in summary


def test_a_stricter_limit_on_the_command_line_turns_a_met_target_into_a_miss(capsys):
    assert main(["--target", "other.mb=500"], areas(fast_ms=41.0, fast_ratio=0.97, other_mb=535), FAKE) == 1
    assert "at most 500 MB" in capsys.readouterr().out


def test_an_unknown_area_or_target_is_refused():
    with pytest.raises(SystemExit):
        main(["--only", "nope"], areas(), FAKE)
    with pytest.raises(SystemExit):
        main(["--target", "fast.nope=1"], areas(), FAKE)


def test_a_page_that_raised_stays_not_measured_whatever_is_recorded_after():
    report = Report(FAKE)
    report.start("fast")
    report.not_measured("fast.ms", "the page raised")
    report.record("fast.ms", 10)
    report.record("fast.ratio", 1.0)
    assert report.results()[0].verdict == NOT_MEASURED and report.exit_status() == 1


def test_directions_and_never_reached():
    at_most, at_least = FAKE[0], FAKE[1]
    assert at_most.met(60) and not at_most.met(60.1) and at_least.met(0.9) and not at_least.met(0.89)
    assert not at_most.met(float("inf")) and format_figure(float("inf"), "s") == "never"
    assert format_figure(1264, "MB") == "1,264 MB" and format_figure(1.5, "x") == "1.5x" and format_figure(0) == "0"


def test_every_target_belongs_to_an_area_module_with_a_run_function():
    assert len({t.key for t in TARGETS}) == len(TARGETS)
    assert {t.area for t in TARGETS} == set(AREAS)
    for area in AREAS:
        assert callable(importlib.import_module(f"bench.{area}").run), area
    for t in TARGETS:
        assert t.direction in (AT_MOST, AT_LEAST), t.key


def test_the_benchmark_imports_nothing_from_the_tests():
    for path in sorted((ROOT / "bench").glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        names = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
        names += [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
        assert not [n for n in names if n.split(".")[0] in ("tests", "conftest", "browser_support", "gpt2_support")]
        assert "sys.path" not in path.read_text(), path.name


def test_a_browsers_cpu_counts_every_process_of_its_tree_and_those_that_ended():
    """The training tab's measure (bench/live.py): a child's child is in the tree, and a child that used CPU
    and exited still counts (in its parent's reaped time)."""
    import os
    import subprocess
    import sys
    from bench.live import cpu_seconds, process_tree
    sleeper = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; "
                                "subprocess.run([sys.executable, '-c', 'import time; time.sleep(30)'])"])
    try:
        deadline = time.monotonic() + 20
        while len(process_tree(sleeper.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(process_tree(sleeper.pid)) == 2 and sleeper.pid in process_tree(os.getpid())
    finally:
        for pid in process_tree(sleeper.pid) - {sleeper.pid}:
            os.kill(pid, 15)
        sleeper.wait(10)
    before = cpu_seconds({os.getpid()}, reaped=True)
    subprocess.run([sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass"])
    assert cpu_seconds({os.getpid()}, reaped=True) - before >= 0.45
    assert cpu_seconds({os.getpid()}) < cpu_seconds({os.getpid()}, reaped=True)
