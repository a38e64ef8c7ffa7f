"""Parallel compute: a file's chunk scans on a pool of threads, their results taken in the order
one thread would have computed them, so the output and the error raised are one thread's.

The scans hold the GIL only between compiled calls (kernels, decompression, Arrow's decode).
"""
from __future__ import annotations

import heapq
import itertools
import os
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

# Chunks smaller than this are scanned together as one task, up to this many bytes (compressed):
# a wide row group's hundreds of small chunks would otherwise cost a hand-off each, and lose the
# grouping of small chunks into one Arrow read (scan.chunk_scan.GROUP_BYTES).
SEGMENT_BYTES = 1 << 20
# At most this many chunks in one task (scan.chunk_scan.GROUP_CHUNKS: one Arrow read's).
SEGMENT_CHUNKS = 256
# Threads are used for a file whose chunks average at least this many bytes (compressed): below
# it a chunk's Python outweighs its compiled work and two threads taking turns on the GIL ran
# slower than one (a 500-column file of ~13 KiB chunks: 0.68x; bench/RESULTS-scan.md).
MIN_MEAN_CHUNK_BYTES = 256 << 10
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


def worth_threads(threads: int, sizes: Sequence[int]) -> int:
    """The threads to use for chunks of these compressed sizes: `threads`, or 1 when there is
    only one chunk or they are too small on average to gain (MIN_MEAN_CHUNK_BYTES)."""
    if threads <= 1 or len(sizes) < 2 or sum(sizes) < MIN_MEAN_CHUNK_BYTES * len(sizes):
        return 1
    return threads


def segments(items: Sequence[Item], size: Callable[[Item], int]) -> list[list[Item]]:
    """`items` in order, cut into runs scanned as one task each: small items are gathered until
    a run holds SEGMENT_BYTES or SEGMENT_CHUNKS; an item of SEGMENT_BYTES or more is a run of its
    own (gathered with small ones it would make the longest task longer still)."""
    runs: list[list[Item]] = []
    run: list[Item] = []
    held = 0
    for item in items:
        if size(item) >= SEGMENT_BYTES and run:
            runs.append(run)
            run, held = [], 0
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
    chunks' bytes are held: each task reads its own), the queued task of least `priority`
    first. Closing cancels the tasks not started and waits for those running: no thread
    outlives the pool."""

    def __init__(self, threads: int) -> None:
        self._queue: list[tuple[Any, int, Future, Callable[[], Any]]] = []
        self._ready = threading.Condition()
        self._closed = False
        self._count = itertools.count()  # ties in priority go in submission order
        self._threads = [threading.Thread(target=self._work, name=f"pageindex-scan-{i}", daemon=True)
                         for i in range(threads)]
        for thread in self._threads:
            thread.start()

    def submit(self, task: Callable[[], list[Result]], count: int, priority: Any = 0) -> list[Slot]:
        """Queue `task` (which returns `count` results); a slot for each of its results."""
        future: Future = Future()
        with self._ready:
            heapq.heappush(self._queue, (priority, next(self._count), future, task))
            self._ready.notify()
        return [Slot(future, i) for i in range(count)]

    @staticmethod
    def failed(err: BaseException) -> Slot:
        """A slot whose result raises `err`: a failure on the calling thread, taken in its turn."""
        future: Future = Future()
        future.set_exception(err)
        return Slot(future, 0)

    def _work(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self._closed:
                    self._ready.wait()
                if not self._queue:
                    return
                *_, future, task = heapq.heappop(self._queue)
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(task())
            except BaseException as err:  # noqa: BLE001 - handed to whoever takes the result
                future.set_exception(err)
            del future, task  # a finished task's results are the future's holder's alone

    def close(self) -> None:
        with self._ready:
            self._closed = True
            for *_, future, _task in self._queue:
                future.cancel()
            self._queue.clear()
            self._ready.notify_all()
        for thread in self._threads:
            thread.join()

    def __enter__(self) -> "ScanPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
