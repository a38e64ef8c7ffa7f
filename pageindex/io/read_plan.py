"""Read planning: the byte ranges a run will need, merged into few requests and fetched ahead with
bounded concurrency and memory; reads of any part of them are then served from the fetched bytes.

On an object store every ranged read is a request with tens of milliseconds of first-byte latency
and a price, while reading a few more kilobytes costs next to nothing: neighbours are read as one.
"""
from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Iterable

Span = tuple[int, int]  # offset, length


@dataclass(frozen=True)
class ReadOptions:
    """How a ReadPlan merges and fetches.

    hole_limit: neighbours this close are read as one request (the hole's bytes are read and
        dropped). Arrow's ReadRangeCache default: at 8 KiB a hole costs far less than a request.
    range_cap: a merged request grows no longer than this (a single range longer than it stays
        one request). Arrow's default; it is also the unit of memory a fetch holds at once.
    max_concurrency: requests in flight at once. Enough to hide per-request latency behind
        transfer on one connection pool without tripping S3's per-prefix request-rate throttling.
    max_ahead_bytes: bytes fetched (or being fetched) and not yet read, at most; the read-ahead
        counts against the memory target (largest decoded chunk + 200 MiB), and at two range caps
        a second merged request can be in flight while the first is consumed.
    tail_bytes: the first read of a remote file's footer takes this much of its end: reading a
        MiB costs less than a request, and a footer longer than the guess (a wide file's), or the
        index blocks before it, would each cost a request of their own. The bytes are kept and
        serve later reads of the file's end.
    """

    hole_limit: int = 8 << 10
    range_cap: int = 32 << 20
    max_concurrency: int = 8
    max_ahead_bytes: int = 64 << 20
    tail_bytes: int = 1 << 20

    def __post_init__(self) -> None:
        if self.hole_limit < 0 or self.range_cap < 1 or self.max_concurrency < 1 or self.tail_bytes < 8:
            raise ValueError(f"invalid read options: {self}")
        if self.max_ahead_bytes < self.range_cap:
            raise ValueError("max_ahead_bytes must hold at least one range_cap")


def merge_ranges(ranges: Iterable[Span], hole_limit: int, range_cap: int) -> list[Span]:
    """`ranges` (any order, overlapping or not) as sorted, disjoint requests: overlapping ranges
    are always one; ranges at most `hole_limit` apart join while the request stays within
    `range_cap`. Empty ranges are dropped."""
    merged: list[list[int]] = []
    for offset, length in sorted((o, n) for o, n in ranges if n > 0):
        end = offset + length
        if merged:
            last = merged[-1]
            if offset < last[1] or (offset - last[1] <= hole_limit and end - last[0] <= range_cap):
                last[1] = max(last[1], end)
                continue
        merged.append([offset, end])
    return [(start, end - start) for start, end in merged]


@dataclass
class _Block:
    """One merged request: its bytes once fetched, and the parts of it still to be read (sorted,
    disjoint: a read finds the parts it covers by bisection, as a wide file plans hundreds)."""

    offset: int
    length: int
    unread: list[Span]
    future: Future | None = None
    dropped: bool = False

    @property
    def end(self) -> int:
        return self.offset + self.length


@dataclass
class ReadPlan:
    """Fetches merged `ranges` through `fetch(offset, length) -> bytes` on its own threads, in
    offset order, ahead of the reads within `options.max_ahead_bytes`. A block is dropped once
    every range planned in it was read; bytes not planned (or dropped) are the caller's to read.
    A fetch's error is raised by the read that needs its bytes, as `fetch` raised it."""

    fetch: Callable[[int, int], bytes]
    ranges: Iterable[Span]
    options: ReadOptions = field(default_factory=ReadOptions)

    def __post_init__(self) -> None:
        self.ranges = tuple(self.ranges)
        self._blocks: list[_Block] = []
        for offset, length in merge_ranges(self.ranges, self.options.hole_limit, self.options.range_cap):
            self._blocks.append(_Block(offset, length, []))
        self._starts = [block.offset for block in self._blocks]
        for offset, length in self.ranges:
            self._note_planned(offset, offset + length)
        for block in self._blocks:  # the same bytes, as sorted disjoint spans
            joined = merge_ranges([(lo, hi - lo) for lo, hi in block.unread], 0, block.length)
            block.unread = [(offset, offset + length) for offset, length in joined]
        self._lock = threading.Lock()
        self._held = 0  # bytes of blocks started and not dropped
        self._next = 0  # first block not started yet, in offset order
        self._pool = ThreadPoolExecutor(self.options.max_concurrency, thread_name_prefix="pageindex-read")
        with self._lock:
            self._pump()

    @property
    def held_bytes(self) -> int:
        """Bytes fetched or in flight and not yet dropped (the read-ahead's memory)."""
        return self._held

    @property
    def requests(self) -> list[Span]:
        return [(b.offset, b.length) for b in self._blocks]

    def read(self, offset: int, length: int) -> memoryview | None:
        """The `length` bytes at `offset` if planned blocks hold all of them (fetched first if
        they are not yet), else None. Waits only for the blocks it needs."""
        end = offset + length
        with self._lock:
            blocks = self._covering(offset, end)
            if blocks is None:
                return None
            for block in blocks:
                if block.future is None:
                    self._start(block)  # read out of order: fetched now, whatever is ahead
            futures = [block.future for block in blocks]
        parts = [future.result() for future in futures]  # type: ignore[union-attr]
        with self._lock:
            for block in blocks:
                self._consume(block, offset, end)
            self._pump()
        first = blocks[0].offset
        joined = parts[0] if len(parts) == 1 else b"".join(parts)
        return memoryview(joined)[offset - first : end - first]

    def drop_before(self, offset: int) -> None:
        """Drop the blocks that end at or before `offset`, read or not: a caller done with that
        part of the file frees what its reads left planned and unread, and lets read-ahead go on."""
        with self._lock:
            for block in self._blocks:
                if block.end > offset:
                    break
                if not block.dropped:
                    if block.future is not None:
                        self._held -= block.length
                    block.dropped, block.future = True, None
            self._pump()

    def discard(self, offset: int, length: int) -> None:
        """Count [offset, offset+length) as read without reading it: a caller that needed only
        part of a planned range lets its blocks drop (or never be fetched) once nothing else
        planned in them is left."""
        end = offset + length
        with self._lock:
            for block in self._blocks[max(0, bisect_right(self._starts, offset) - 1):]:
                if block.offset >= end:
                    break
                self._consume(block, offset, end)
            self._pump()

    def close(self) -> None:
        """Drop every block and cancel fetches not started (those in flight finish unread)."""
        with self._lock:
            for block in self._blocks:
                block.dropped, block.future = True, None
            self._held = 0
            self._next = len(self._blocks)
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------ under the lock

    def _note_planned(self, start: int, end: int) -> None:
        if start < end:  # merging put all of a range in one block
            self._blocks[bisect_right(self._starts, start) - 1].unread.append((start, end))

    def _covering(self, start: int, end: int) -> list[_Block] | None:
        """The live blocks that hold [start, end) together, or None."""
        found, pos = [], start
        for block in self._blocks[max(0, bisect_right(self._starts, start) - 1):]:
            if block.end <= pos:
                continue
            if block.offset > pos or block.dropped:
                return None
            found.append(block)
            pos = block.end
            if pos >= end:
                return found
        return None

    def _start(self, block: _Block) -> None:
        block.future = self._pool.submit(self.fetch, block.offset, block.length)
        self._held += block.length

    def _pump(self) -> None:
        """Start blocks in order while the read-ahead has room (always one, if none is held)."""
        while self._next < len(self._blocks):
            block = self._blocks[self._next]
            if block.future is None and not block.dropped:
                if self._held and self._held + block.length > self.options.max_ahead_bytes:
                    return
                self._start(block)
            self._next += 1

    def _consume(self, block: _Block, start: int, end: int) -> None:
        if block.dropped:
            return
        unread = block.unread
        first = bisect_right(unread, start, key=lambda span: span[1])  # the first part ending after start
        last = bisect_left(unread, end, key=lambda span: span[0])  # the first part from end on
        if first < last:
            lo, hi = unread[first][0], unread[last - 1][1]
            unread[first:last] = [span for span in ((lo, start), (end, hi)) if span[0] < span[1]]
        if not unread:
            if block.future is not None:
                self._held -= block.length
            block.dropped, block.future = True, None
