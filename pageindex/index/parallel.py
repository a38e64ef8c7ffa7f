"""Parallel compute: a file's chunk scans on a pool of threads, their results taken in the order
one thread would have computed them, so the output and the error raised are one thread's.

The scans hold the GIL only between compiled calls (kernels, decompression, Arrow's decode).
"""
from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Sequence, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

# Chunks smaller than this are scanned together as one task, up to this many bytes (compressed):
# a wide row group's hundreds of small chunks would otherwise cost a hand-off each, and lose the
# grouping of small chunks into one Arrow read (scan.chunk_scan.GROUP_BYTES).
SEGMENT_BYTES = 1 << 20
# At most this many chunks in one task (scan.chunk_scan.GROUP_CHUNKS: one Arrow read's).
SEGMENT_CHUNKS = 256
# "auto": threads for one file, at most this many (two cores is the measured case).
AUTO_THREADS = 2
AUTO = "auto"


def auto_threads() -> int:
    """The threads `auto` means: the CPUs this process may run on, at most AUTO_THREADS."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(AUTO_THREADS, cpus))


def threads_option(value: int | str) -> int:
    """A `threads` option as a count: a positive int, or `auto`; ValueError for anything else."""
    if value == AUTO:
        return auto_threads()
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"threads must be a positive number or {AUTO!r}, not {value!r}")
    return value


def segments(items: Sequence[Item], size: Callable[[Item], int]) -> list[list[Item]]:
    """`items` in order, cut into runs scanned as one task each: a run is closed once it holds
    SEGMENT_BYTES or SEGMENT_CHUNKS (so a big chunk is a run of its own)."""
    runs: list[list[Item]] = []
    run: list[Item] = []
    held = 0
    for item in items:
        run.append(item)
        held += size(item)
        if held >= SEGMENT_BYTES or len(run) >= SEGMENT_CHUNKS:
            runs.append(run)
            run, held = [], 0
    if run:
        runs.append(run)
    return runs


@dataclass(frozen=True)
class Slot:
    """One result of a task: the `index`-th of what its future gives."""

    future: Future
    index: int

    def result(self):
        return self.future.result()[self.index]


class ScanPool:
    """Tasks on `threads` threads, at most `threads` running at once (so at most that many
    chunks' bytes are held: each task reads its own). Closing cancels the tasks not started and
    waits for those running: no thread outlives the pool."""

    def __init__(self, threads: int) -> None:
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="pageindex-scan")

    def submit(self, task: Callable[[], list[Result]], count: int) -> list[Slot]:
        """Run `task` (which returns `count` results) and a slot for each of its results."""
        future = self._pool.submit(task)
        return [Slot(future, i) for i in range(count)]

    @staticmethod
    def failed(err: BaseException) -> Slot:
        """A slot whose result raises `err`: a failure on the calling thread, taken in its turn."""
        future: Future = Future()
        future.set_exception(err)
        return Slot(future, 0)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "ScanPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
