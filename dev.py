#!/usr/bin/env python3
"""Set up and run Transformer Explorer with nothing but Python 3.11+ installed.

    python3 dev.py run             create .venv if needed, install requirements.txt, start the app
    python3 dev.py test            the same with requirements-dev.txt, then run every test (pytest; what CI runs)
    python3 dev.py test --quick    every test but the real-browser and slow ones
    python3 dev.py bench           the speed benchmark (python -m bench); exits 1 when a target is missed
    python3 dev.py bench --only pages    one area of it (model, pages, lab, load, memory, browser, gpt2, classroom, cloud)

Extra arguments are passed on (`python3 dev.py test -k tokenizer`). Packages are installed again only
when the requirements files change.
"""
import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PYTHON = VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
QUICK = "not browser and not slow"       # pytest's markers (pytest.ini; tests/conftest.py marks the tests)
# Tests run in parallel, one pytest-xdist worker per core. The real-browser tests are three groups (tests/conftest.py),
# each run one test after another on one worker with its own server and browser, and handed out first. (Two workers
# per core were tried: 26.5 min, no faster than this (24.8), and a lab test's 500 ms redraw was missed on the
# overloaded machine.)
PARALLEL = ["-n", "auto", "--dist", "loadgroup"]


def requirements_digest(path: Path) -> str:
    """A hash of a requirements file and the files it includes with -r."""
    digest = hashlib.sha256()
    for line in path.read_text().splitlines():
        digest.update(line.encode())
        if line.startswith("-r "):
            digest.update(requirements_digest(path.parent / line[3:].strip()).encode())
    return digest.hexdigest()


def ensure_env(requirements: str) -> None:
    """Make .venv and install `requirements` into it, unless that exact file is installed already."""
    if sys.version_info < (3, 11):
        sys.exit(f"Transformer Explorer needs Python 3.11 or newer; this is {sys.version.split()[0]}.")
    if not PYTHON.exists():
        print("Creating a virtual environment in .venv ...", flush=True)
        try:
            venv.create(VENV, with_pip=True)
        except Exception as error:  # Debian's python3 without python3-venv lands here
            sys.exit(f"Could not create .venv ({error}). On Debian or Ubuntu: apt-get install python3-venv")
    stamp = VENV / f".installed-{requirements}"
    wanted = requirements_digest(ROOT / requirements)
    if stamp.exists() and stamp.read_text() == wanted:
        return
    print(f"Installing {requirements} into .venv (the first time takes a minute or two) ...", flush=True)
    env = {**os.environ, "PIP_RETRIES": os.environ.get("PIP_RETRIES", "1"),
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run([str(PYTHON), "-m", "pip", "install", "--quiet", "-r", str(ROOT / requirements)],
                   check=True, env=env)
    stamp.write_text(wanted)


def main(argv: list[str]) -> int:
    command, extra = (argv[0], argv[1:]) if argv else ("", [])
    if command == "run":
        ensure_env("requirements.txt")
        args = ["-m", "streamlit", "run", "streamlit_app.py", *extra]
    elif command == "test":
        ensure_env("requirements-dev.txt")
        if "--quick" in extra:
            extra = ["-m", QUICK, *[arg for arg in extra if arg != "--quick"]]
        chosen = any(arg.startswith(("-n", "--numprocesses")) for arg in extra) or "no:xdist" in extra
        args = ["-m", "pytest", *([] if chosen else PARALLEL), *extra]
    elif command == "bench":
        ensure_env("requirements-dev.txt")
        args = ["-m", "bench", *extra]
    else:
        print(__doc__)
        return 2
    return subprocess.call([str(PYTHON), *args], cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
