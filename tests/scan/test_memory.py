"""pageindex.scan.memory: freed heap space goes back to the operating system when asked."""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest

from pageindex.scan import memory


def _rss_mib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) // 1024 for line in status if line.startswith("VmRSS"))


@pytest.mark.skipif(memory._MALLOC_TRIM is None, reason="needs glibc's malloc_trim")
def test_trim_heap_returns_holes_between_live_allocations():
    # 1 MiB objects land on the heap once glibc has raised its mmap threshold (freeing a bigger
    # mapped block does that); a survivor after each keeps the freed space off the heap's top,
    # which free() would hand back by itself.
    block = os.urandom(4 << 20)
    del block
    big, keep = [], []
    for _ in range(200):
        big.append(os.urandom(1 << 20))
        keep.append(os.urandom(128 << 10))  # bigger than any earlier hole: placed after its block
    before = _rss_mib()
    del big
    after_free = _rss_mib()
    memory.trim_heap()
    assert after_free - _rss_mib() > 100, (before, after_free, _rss_mib())


def test_release_memory_hands_arrow_memory_back_after_big_chunks_only():
    def touch_and_free() -> int:
        buffers = [pa.allocate_buffer(8 << 20) for _ in range(16)]
        for buffer in buffers:
            np.frombuffer(buffer, dtype=np.uint8)[:] = 1
        del buffers, buffer
        return _rss_mib()

    after_free = touch_and_free()
    memory.release_memory(memory.RELEASE_AFTER_BYTES - 1)
    assert after_free - _rss_mib() < 32  # kept for the next small chunk
    after_free = touch_and_free()
    memory.release_memory(memory.RELEASE_AFTER_BYTES)
    assert after_free - _rss_mib() > 100
