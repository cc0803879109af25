#!/usr/bin/env python3
"""Compile the locks: requirements.in into requirements.txt, then requirements-dev.in into requirements-dev.txt.

    python3 scripts/lock.py --torch-wheels /opt/wheels      (our build machines; elsewhere without the option)

Each lock is `uv pip compile --universal --python-version 3.11` of its input: every package the named ones pull in,
pinned with ==, for every platform (a marker says where a line applies). The dev lock is compiled under the app's
(`-c requirements.txt` in requirements-dev.in), so every pin of requirements.txt appears in it unchanged. uv keeps
the versions a lock already has unless its input asks for others; delete a lock to take the newest of everything.
tests/test_requirements.py checks, without network, that each lock and its input agree.

PyTorch's CPU wheel comes from the page requirements.in's --find-links line names (PyTorch's own). Where that page
is unreachable (our build machines), `--torch-wheels DIR` names a folder holding the same wheel
(torch-2.13.0+cpu-*.whl) for uv to read instead; the locks still name PyTorch's page, for pip and Community Cloud.
uv is on PyPI: `python3 -m venv /tmp/uv && /tmp/uv/bin/pip install uv`, then put /tmp/uv/bin on PATH or pass --uv.
"""
import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCKS = {"requirements.in": "requirements.txt", "requirements-dev.in": "requirements-dev.txt"}   # in order
TORCH_PAGE = "--find-links https://download.pytorch.org/whl/cpu/torch/"
PYTHON = "3.11"                     # the oldest Python the app supports: markers cover the newer ones


def compile_locks(uv: str, torch_wheels: str | None) -> None:
    command = "python3 scripts/lock.py" + (f" --torch-wheels {torch_wheels}" if torch_wheels else "")
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        for name in [*LOCKS, *LOCKS.values()]:          # the existing locks too: uv keeps their versions
            if (ROOT / name).exists():
                text = (ROOT / name).read_text()
                if torch_wheels:
                    text = text.replace(TORCH_PAGE, f"--find-links {torch_wheels}")
                (work / name).write_text(text)
        for source, lock in LOCKS.items():
            subprocess.run([uv, "pip", "compile", "--universal", "--python-version", PYTHON, "--quiet",
                            "--custom-compile-command", command, source, "-o", lock], cwd=work, check=True)
            (ROOT / lock).write_text(with_torch_page((work / lock).read_text()))
            print(f"wrote {lock}: {sum(1 for line in (ROOT / lock).read_text().splitlines() if '==' in line)} "
                  "pinned lines")


def with_torch_page(lock: str) -> str:
    """uv's lock with PyTorch's page after its header (uv leaves --find-links out), for pip to find the +cpu wheel."""
    lines = lock.splitlines(keepends=True)
    header = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    page = ["# PyTorch's CPU-only wheels (requirements.in says why)\n", TORCH_PAGE + "\n"]
    return "".join(lines[:header] + page + lines[header:])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python3 scripts/lock.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch-wheels", metavar="DIR", help="a folder with torch's +cpu wheel, read instead of "
                                                               "PyTorch's page (unreachable here)")
    parser.add_argument("--uv", default=shutil.which("uv"), help="the uv program (default: uv on PATH)")
    args = parser.parse_args(argv)
    if not args.uv:
        sys.exit("uv not found: python3 -m venv /tmp/uv && /tmp/uv/bin/pip install uv, then --uv /tmp/uv/bin/uv")
    compile_locks(args.uv, args.torch_wheels)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
