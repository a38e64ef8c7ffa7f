"""Memory: hand memory that decoding freed back to the operating system (Python's cycle
collector is paused by format.collector).

Page bytes are Python bytes objects on glibc's heap and decoded values sit in Arrow's pool; both
keep freed space for reuse unless asked, so without this peak memory would grow chunk by chunk.
"""
from __future__ import annotations

import ctypes
import ctypes.util
from typing import Callable

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
