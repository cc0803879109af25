"""`python -m bench [--only AREA,...] [--target KEY=VALUE ...]`: run the areas, print the summary, exit 1 on a miss."""
import argparse
import dataclasses
import importlib
import os
import platform
import sys
import traceback
from collections.abc import Callable

from . import AREAS
from .report import Report
from .targets import TARGETS


def area_runner(name: str) -> Callable[[Report], None]:
    """bench/<name>.py's run(report), imported only when the area runs (a browser area needs Playwright)."""
    return lambda report: importlib.import_module(f"bench.{name}").run(report)


def parse(argv: list[str], areas: tuple[str, ...]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--only", default=",".join(areas),
                        help=f"comma-separated areas to run, of: {', '.join(areas)} (default: all)")
    parser.add_argument("--target", action="append", default=[], metavar="KEY=VALUE",
                        help="another limit for one target, for this run only (e.g. model.trace_ratio=1.1)")
    args = parser.parse_args(argv)
    args.only = [a.strip() for a in args.only.split(",") if a.strip()]
    unknown = [a for a in args.only if a not in areas]
    if unknown:
        parser.error(f"no area called {', '.join(unknown)}; the areas are {', '.join(areas)}")
    return args


def with_limits(overrides: list[str], targets=TARGETS) -> list:
    """The targets with the limits given as KEY=VALUE on the command line."""
    limits = {}
    for item in overrides:
        key, _, value = item.partition("=")
        limits[key.strip()] = float(value)
    unknown = set(limits) - {t.key for t in targets}
    if unknown:
        raise SystemExit(f"no target called {', '.join(sorted(unknown))} (see bench/targets.py)")
    return [dataclasses.replace(t, limit=limits[t.key]) if t.key in limits else t for t in targets]


def main(argv: list[str] | None = None, runners: dict[str, Callable[[Report], None]] | None = None,
         targets=TARGETS) -> int:
    """Run the chosen areas in order and return the exit status (0: every target of those areas met)."""
    runners = runners or {name: area_runner(name) for name in AREAS}
    args = parse(sys.argv[1:] if argv is None else argv, tuple(runners))
    report = Report(with_limits(args.target, targets))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}", flush=True)
    for name in [a for a in runners if a in args.only]:
        report.start(name)
        try:
            runners[name](report)
        except Exception as error:                # the area stops; the others still run
            traceback.print_exc()
            report.area_failed(name, f"{type(error).__name__}: {error}"[:120])
    print("\n" + report.summary(), flush=True)
    return report.exit_status()


if __name__ == "__main__":
    sys.exit(main())
