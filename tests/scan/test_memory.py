"""pageindex.scan.memory: freed heap space goes back to the operating system when asked."""
from __future__ import annotations

import gc
import os
import threading

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


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_collector_is_paused_inside_and_restored_after(collector_on):
    with memory.collector_paused():
        assert not gc.isenabled()
        with memory.collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still runs
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with memory.collector_paused():
            raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_the_caller_turned_off_stays_off(collector_on):
    gc.disable()
    with memory.collector_paused():
        pass
    assert not gc.isenabled()


def test_overlapping_pauses_in_threads_restore_the_collector_when_the_last_ends(collector_on):
    # Thread A pauses, B pauses, A ends (B still runs: still paused), B ends: back on.
    a_in, b_in, a_out, b_may_end = (threading.Event() for _ in range(4))
    seen = {}

    def a():
        with memory.collector_paused():
            a_in.set()
            b_in.wait(5)
        a_out.set()

    def b():
        a_in.wait(5)
        with memory.collector_paused():
            b_in.set()
            a_out.wait(5)
            seen["after A ended"] = gc.isenabled()
            b_may_end.wait(5)

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    a_out.wait(5)
    b_may_end.set()
    for t in threads:
        t.join(5)
    assert seen == {"after A ended": False}
    assert gc.isenabled()
