"""explorer/memory.py: glibc's knobs work here (Linux) and never break anything."""
import sys

import pytest

from explorer import memory


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt exists on Linux only")
def test_the_arena_limit_takes_effect_on_linux():
    assert memory.limit_arenas(2) is True


def test_giving_back_freed_memory_is_safe_to_call_any_time():
    block = bytearray(50 * 2**20)
    del block
    assert memory.give_back_freed() is None
