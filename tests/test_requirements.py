"""What gets installed: two compiled locks (requirements.txt, requirements-dev.txt) that agree with what we name
(requirements.in, requirements-dev.in), every line pinned, a CPU-only PyTorch and no CUDA package on Linux x86_64.
All checked offline: from the files, and from the installed environment's own package metadata."""
import platform
import re
import sys
from importlib import metadata
from pathlib import Path

import torch
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
APP, DEV = ("requirements.in", "requirements.txt"), ("requirements-dev.in", "requirements-dev.txt")
TORCH_PAGE = "--find-links https://download.pytorch.org/whl/cpu/torch/"
# Where the app is installed: Community Cloud (Linux x86_64), laptops, Linux on ARM; each Python it supports.
PLATFORMS = [("linux", "Linux", "x86_64", "posix"), ("linux", "Linux", "aarch64", "posix"),
             ("darwin", "Darwin", "arm64", "posix"), ("darwin", "Darwin", "x86_64", "posix"),
             ("win32", "Windows", "AMD64", "nt")]
PYTHONS = ["3.11.2", "3.11.9", "3.12.1", "3.13.0"]
ENVIRONMENTS = [default_environment() | {"sys_platform": s, "platform_system": system, "platform_machine": machine,
                                         "os_name": os_name, "python_full_version": full,
                                         "python_version": full.rsplit(".", 1)[0]}
                for s, system, machine, os_name in PLATFORMS for full in PYTHONS]
CLOUD = next(env for env in ENVIRONMENTS if env["platform_machine"] == "x86_64" and env["sys_platform"] == "linux")


def requirements(name: str) -> list[Requirement]:
    """Every requirement of a requirements file, those of the files it includes with -r too (-c lines are not
    requirements)."""
    found = []
    for line in (ROOT / name).read_text().splitlines():
        line = line.split(" #")[0].strip()
        if line.startswith("-r "):
            found += requirements(line[3:].strip())
        elif line and not line.startswith(("#", "-")):
            found.append(Requirement(line))
    return found


def pins(name: str, env: dict) -> dict[str, str]:
    """Package -> pinned version, of the lines of `name` that apply in `env` (a marker environment)."""
    chosen = {}
    for req in requirements(name):
        if req.marker is None or req.marker.evaluate(env | {"extra": ""}):
            [spec] = req.specifier
            assert canonicalize_name(req.name) not in chosen, f"{name}: two lines for {req.name} in {env}"
            chosen[canonicalize_name(req.name)] = spec.version
    return chosen


def test_every_line_of_every_requirements_file_is_pinned_with_two_equals_signs():
    for name in (*APP, *DEV):
        for req in requirements(name):
            assert [spec.operator for spec in req.specifier] == ["=="], f"{name}: {req} is not pinned"
            assert not req.url and not req.extras, f"{name}: {req}"


def test_every_pin_we_name_is_in_its_lock_unchanged_on_every_platform_and_python():
    for source, lock in (APP, DEV):
        for env in ENVIRONMENTS:
            named, locked = pins(source, env), pins(lock, env)
            assert named == {name: locked.get(name) for name in named}, \
                f"{lock} disagrees with {source} on {env['sys_platform']} {env['platform_machine']} " \
                f"Python {env['python_full_version']}: run python3 scripts/lock.py"


def test_the_dev_lock_holds_the_app_lock_unchanged():
    for env in ENVIRONMENTS:
        app, dev = pins("requirements.txt", env), pins("requirements-dev.txt", env)
        assert app == {name: dev.get(name) for name in app}, env


def test_both_locks_read_pytorchs_cpu_page_and_pick_its_cpu_wheel_with_no_cuda_package_on_community_cloud():
    for lock in ("requirements.in", "requirements.txt", "requirements-dev.txt"):
        links = [line for line in (ROOT / lock).read_text().splitlines() if line.startswith("--find-links")]
        assert links == [TORCH_PAGE], lock
        cloud = pins(lock, CLOUD)
        assert cloud["torch"] == "2.13.0+cpu"
        assert not [name for name in cloud if name.startswith(("nvidia", "triton", "cuda"))], lock
        assert pins(lock, ENVIRONMENTS[-1])["torch"] == "2.13.0"             # Windows: PyPI's own (CPU) wheel


def closure(names: set[str]) -> dict[str, str]:
    """The installed packages `names` need, and all they need in turn (this machine's markers, no extras):
    name -> installed version."""
    found, todo = {}, list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in found:
            continue
        found[name] = metadata.version(name)
        for line in metadata.requires(name) or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return found


def test_the_installed_closure_of_what_we_name_is_exactly_the_lock_for_this_machine():
    here = default_environment()
    for source, lock in (APP, DEV):
        assert closure(set(pins(source, here))) == pins(lock, here), \
            f"{lock} is not what {source}'s packages pull in here (or .venv is not installed from it)"


def test_torch_is_the_cpu_build_and_no_cuda_packages_are_installed():
    names = {dist.metadata["Name"].lower() for dist in metadata.distributions()}
    assert not {n for n in names if n.startswith("nvidia") or n.startswith("triton")}
    assert not torch.cuda.is_available() and torch.version.cuda is None
    if sys.platform == "linux" and platform.machine() == "x86_64":
        assert torch.__version__ == "2.13.0+cpu"


def test_test_only_packages_stay_out_of_the_app_requirements():
    app = set(pins("requirements.txt", CLOUD))
    assert not {"pytest", "hypothesis", "transformers", "playwright"} & app
    assert "-r requirements.in" in (ROOT / "requirements-dev.in").read_text().splitlines()

