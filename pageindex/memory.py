"""Memory: hand memory that decoding freed back to the operating system.

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
TRIM_AFTER_BYTES = 1 << 20


def trim_heap() -> None:
    """Return the C heap's free pages, including holes between live allocations (a big numpy or
    Arrow allocation is mapped apart and never reuses them)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def release_memory(chunk_bytes: int) -> None:
    """After a chunk of `chunk_bytes` (compressed) is done: Arrow's pool always; the C heap after
    chunks big enough to leave holes there (so peak memory stays one chunk's worth)."""
    pa.default_memory_pool().release_unused()
    if chunk_bytes >= TRIM_AFTER_BYTES:
        trim_heap()
