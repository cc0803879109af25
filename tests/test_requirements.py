"""What gets installed: pinned versions and a CPU-only PyTorch, with no CUDA packages."""
import platform
import re
import sys
from importlib import metadata
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def requirement_lines(name: str) -> list[str]:
    lines = [line.split("#")[0].strip() for line in (ROOT / name).read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("-")]


def test_every_requirement_is_pinned():
    for name in ("requirements.txt", "requirements-dev.txt"):
        for line in requirement_lines(name):
            assert re.match(r"^[A-Za-z0-9_.\-\[\]]+==[\w.+]+( *;.*)?$", line), f"{name}: {line!r} is not pinned"


def test_torch_is_the_cpu_build_and_no_cuda_packages_are_installed():
    names = {dist.metadata["Name"].lower() for dist in metadata.distributions()}
    assert not {n for n in names if n.startswith("nvidia") or n.startswith("triton")}
    assert not torch.cuda.is_available() and torch.version.cuda is None
    if sys.platform == "linux" and platform.machine() == "x86_64":
        assert torch.__version__ == "2.13.0+cpu"


def test_test_only_packages_stay_out_of_the_app_requirements():
    app = " ".join(requirement_lines("requirements.txt"))
    assert "pytest" not in app and "hypothesis" not in app and "transformers" not in app
    assert "-r requirements.txt" in (ROOT / "requirements-dev.txt").read_text()
