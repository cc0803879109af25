"""explorer/app/memory.py: glibc's knobs take effect on Linux and hand freed memory back to the system."""
import ctypes
import ctypes.util
import os
import sys

import pytest

from explorer.app import memory

LINUX = sys.platform.startswith("linux")
GLIBC = LINUX and hasattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), "malloc_trim")


def resident_mb() -> float:
    """This process's resident memory in MB (Linux /proc)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not LINUX, reason="glibc's mallopt exists on Linux only")
def test_the_arena_limit_takes_effect_on_linux():
    assert memory.limit_arenas(2) is True


# Run in a fresh process: in a test worker that has run other tests, the blocks may fill holes its heap already has.
HOLES = """
import os
from explorer.app import memory

def resident_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

blocks, pins = [], []
for _ in range(800):                                   # 50 MB in blocks of 64 KB, under the mmap threshold
    blocks.append(bytearray(b"\\x01") * (64 * 2**10))
    pins.append(bytearray(b"\\x01") * 1024)             # 1 KB kept between them: the heap cannot shrink
del blocks
held = resident_mb()
memory.give_back_freed()
print(held - resident_mb(), len(pins))
"""


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's")
def test_giving_back_freed_memory_returns_the_holes_a_heap_keeps():
    """Freed blocks between blocks still in use stay with the process (free() shrinks the heap only from its
    top); give_back_freed hands their pages back to the system."""
    import subprocess

    out = subprocess.run([sys.executable, "-c", HOLES], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    returned, pins = out.stdout.split()
    assert float(returned) > 25, "at least half of the 50 MB freed goes back to the system"
    assert int(pins) == 800


def test_giving_back_freed_memory_is_safe_anywhere():
    memory.give_back_freed()                               # a no-op where there is no glibc
    block = bytearray(b"\x01") * (1 << 20)
    assert block.count(1) == 1 << 20                       # memory still in use is untouched
