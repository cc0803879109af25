"""Keep the server's memory down on Linux (glibc); elsewhere these do nothing.

Streamlit runs each visitor's script in its own thread, and glibc gives threads their own memory pools
(arenas, up to 8 per core), each keeping what it freed, and freed blocks under glibc's moving threshold
(up to 32 MB) leave holes in the heap. Fewer arenas and a fixed mmap threshold keep it smaller (the measured
figures are in docs/figures.md, "Measured once, behind a design choice").
"""
import ctypes
import ctypes.util
import functools
import sys

M_MMAP_THRESHOLD = -3     # mallopt parameter numbers (glibc's malloc.h)
M_ARENA_MAX = -8
MMAP_FROM = 256 * 2**10   # blocks this big get pages of their own, returned to the system when freed


@functools.cache
def _libc():
    """glibc, found once per process (find_library runs `ldconfig -p`: a process per call, in every script run)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def limit_arenas(n: int = 2) -> bool:
    """At most `n` malloc arenas from now on, and big blocks (trace tensors, tables) in pages of their own
    that go back to the system when freed instead of leaving holes in a heap; True where it took effect."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False
    return bool(libc.mallopt(M_ARENA_MAX, n)) and bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_FROM))


def give_back_freed() -> None:
    """Return freed heap memory to the system (after a big model's loading temporaries)."""
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)
