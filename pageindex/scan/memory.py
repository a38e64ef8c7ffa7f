"""Memory: hand memory that decoding freed back to the operating system, and keep Python's
cycle collector from rescanning a footer's objects while a file is processed.

Page bytes are Python bytes objects on glibc's heap and decoded values sit in Arrow's pool; both
keep freed space for reuse unless asked, so without this peak memory would grow chunk by chunk.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

import pyarrow as pa

try:
    _MALLOC_TRIM: Callable[[int], int] | None = ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim
except (OSError, AttributeError, TypeError):
    _MALLOC_TRIM = None
# Memory is handed back after chunks of this size and up. Smaller ones keep it for the next ones:
# handing it back after each of a wide table's thousands of chunks would make every chunk fault
# its memory in afresh (see bench/RESULTS.md, wide-200MB) for no lower peak, as a group of small
# chunks (chunk_scan.GROUP_BYTES) needs no more than a big chunk.
RELEASE_AFTER_BYTES = 1 << 20


def trim_heap() -> None:
    """Return the C heap's free pages, including holes between live allocations (a big numpy or
    Arrow allocation is mapped apart and never reuses them)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def release_memory(chunk_bytes: int) -> None:
    """After a chunk of `chunk_bytes` (compressed) is done: Arrow's pool and the C heap, when the
    chunk was big (so peak memory stays one chunk's worth)."""
    if chunk_bytes >= RELEASE_AFTER_BYTES:
        pa.default_memory_pool().release_unused()
        trim_heap()


_pause_lock = threading.Lock()
_pauses = 0
_was_enabled = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector off while the block runs. A decoded footer is hundreds of
    thousands of small objects alive for the whole run, and every full collection walks them
    again, a cost that grows with the footer (see bench/RESULTS.md, wide tables); pageindex makes
    no cyclic garbage for it to find. Pauses may nest and overlap across threads: the collector is restored, to what
    it was before the first, when the last one ends."""
    global _pauses, _was_enabled
    with _pause_lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0 and _was_enabled:
                gc.enable()
