"""A CPU quota and a memory limit for one process and its children, as Community Cloud gives an app (0.078 to 2
cores, 690 MB to 2.7 GB): a Linux cgroup (v1) of our own, nested in the cgroup this process is in.

    with Cgroup(cores=1, memory_bytes=CLOUD_MEMORY_BYTES) as group, serve(cgroup=group) as (base, server):
        ...                                 # the server runs under the limits; group.memory_peak_mb() and friends

It needs Linux, the v1 `cpu` and `memory` hierarchies mounted at /sys/fs/cgroup/cpu and /sys/fs/cgroup/memory, and
the right to make a cgroup there (root). `unavailable()` says in words why a machine does not allow it (a cgroup v2
machine, not root, ...); `Cgroup` raises CgroupUnavailable with the same words.
"""
import os
import time
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
CLOUD_MEMORY_BYTES = 2_700_000_000          # Community Cloud's largest app: 2.7 GB
PERIOD_US = 100_000                         # the quota's period, the kernel's default
FIRST_CALL = 262_144                        # cpu.shares' largest weight (a process's own is 1,024)


class CgroupUnavailable(RuntimeError):
    """This machine cannot run a process under a cgroup of ours (the message says why)."""


def own_path(controller: str) -> str:
    """The path of this process's cgroup in a v1 hierarchy ("/" or "/some/group"), from /proc/self/cgroup."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    raise CgroupUnavailable(f"this process is in no cgroup of the v1 '{controller}' hierarchy")


def unavailable() -> str:
    """Why this machine cannot limit a process with a cgroup of ours, or "" when it can."""
    if not Path("/proc/self/cgroup").exists():
        return "not Linux: no cgroups (the server runs without a CPU quota or memory limit)"
    for controller, knob in (("cpu", "cpu.cfs_quota_us"), ("memory", "memory.limit_in_bytes")):
        if not (ROOT / controller / knob).exists():
            return (f"no cgroup v1 '{controller}' hierarchy at {ROOT / controller} (a cgroup v2 machine?): "
                    "bench/cgroup.py knows only v1, so the server cannot run under a quota here")
    if os.geteuid() != 0:
        return "making a cgroup needs root: run as root (or give this user a delegated cgroup)"
    return ""


class Cgroup:
    """A cgroup with a CPU quota of `cores` and a memory limit of `memory_bytes` (either may be None: no limit),
    made on entry and removed on exit (after its processes ended). `join` puts the calling process in it (a
    subprocess's preexec_fn: the process and all it starts are under the limits from their first instruction).
    With `first_call`, its processes get the CPU before other programs of the machine (cpu.shares at its largest),
    up to the quota: on a machine others keep busy, the quota, not their load, is then what limits it."""

    def __init__(self, cores: float | None = None, memory_bytes: int | None = None, name: str = "bench",
                 first_call: bool = False):
        self.cores, self.memory_bytes, self.first_call = cores, memory_bytes, first_call
        self.name = f"{name}-{os.getpid()}-{time.monotonic_ns()}"
        self.dirs: dict[str, Path] = {}

    def __enter__(self) -> "Cgroup":
        why = unavailable()
        if why:
            raise CgroupUnavailable(why)
        try:
            for controller in ("cpu", "memory"):
                folder = ROOT / controller / own_path(controller).lstrip("/") / self.name
                folder.mkdir()
                self.dirs[controller] = folder
            if self.cores is not None:
                self._write("cpu", "cpu.cfs_period_us", PERIOD_US)
                self._write("cpu", "cpu.cfs_quota_us", round(self.cores * PERIOD_US))
            if self.first_call:
                self._write("cpu", "cpu.shares", FIRST_CALL)
            if self.memory_bytes is not None:
                self._write("memory", "memory.limit_in_bytes", self.memory_bytes)
        except OSError as error:
            self.__exit__()
            raise CgroupUnavailable(f"could not make a cgroup ({error})") from error
        return self

    def __exit__(self, *exc) -> None:
        """Remove the cgroup once its processes have left it (the caller waited for them)."""
        deadline = time.monotonic() + 10
        for folder in self.dirs.values():
            while True:
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:                  # a process not reaped yet: the kernel still counts it
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        self.dirs = {}

    def _write(self, controller: str, knob: str, value) -> None:
        (self.dirs[controller] / knob).write_text(str(value))

    def _read(self, controller: str, knob: str) -> str:
        return (self.dirs[controller] / knob).read_text()

    def join(self) -> None:
        """Put the calling process into this cgroup (both controllers)."""
        for folder in self.dirs.values():
            (folder / "cgroup.procs").write_text(str(os.getpid()))

    def holds(self, pid: int) -> bool:
        """Whether process `pid` is in this cgroup, in both controllers."""
        return all(str(pid) in (folder / "cgroup.procs").read_text().split() for folder in self.dirs.values())

    def memory_limit_bytes(self) -> int:
        return int(self._read("memory", "memory.limit_in_bytes"))

    def cpu_quota_cores(self) -> float:
        quota = int(self._read("cpu", "cpu.cfs_quota_us"))
        return quota / int(self._read("cpu", "cpu.cfs_period_us")) if quota > 0 else float("inf")

    def memory_peak_mb(self) -> float:
        """The most memory the cgroup held at once (its processes' memory and the page cache they filled)."""
        return int(self._read("memory", "memory.max_usage_in_bytes")) / 2**20

    def oom_kills(self) -> int:
        """Processes of the cgroup the kernel killed for want of memory."""
        fields = dict(line.split() for line in self._read("memory", "memory.oom_control").splitlines())
        return int(fields.get("oom_kill", 0))

    def throttled(self) -> tuple[int, int, float]:
        """(periods, periods throttled, seconds throttled) of the CPU quota so far."""
        stat = dict(line.split() for line in self._read("cpu", "cpu.stat").splitlines())
        return int(stat["nr_periods"]), int(stat["nr_throttled"]), int(stat["throttled_time"]) / 1e9
