"""Index computation: each planned chunk's ColumnIndex and OffsetIndex, and a report of what was left out.

From trusted page-header statistics where the plan allows it, else from the chunk's scanned values.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
from typing import Any, Callable, Generator, Iterator

import numpy as np

from pageindex.errors import PageIndexError
from pageindex.format.footer import Footer
from pageindex.format.parquet_thrift import BoundaryOrder, ColumnIndex, Type
from pageindex.format.thrift import decode_struct
from pageindex.index import page_stats
from pageindex.index.bloom.blob import build_filter
from pageindex.index.bloom.options import AUTO_MIN_ORDERED_PAGES, auto_keeps
from pageindex.index.builder import Refusal, column_index, column_index_of_extrema, offset_index, unencoded_bytes
from pageindex.index.fallback import Fallback
from pageindex.index.parallel import ScanPool, Slot, segments, worth_threads
from pageindex.index.plan import ChunkPlan
from pageindex.index.tail_writer import ChunkIndexes
from pageindex.io.storage import Source
from pageindex.scan.chunk_scan import ChunkScan, scan_chunks
from pageindex.scan.memory import release_memory
from pageindex.scan.page_levels import PageLevels

# ChunkReport.source: where a chunk's bounds came from.
EXACT, PAGE_STATS = "exact", "page_stats"


@dataclass(frozen=True)
class ChunkReport:
    """What was written for one column chunk, and why anything was left out."""

    row_group: int
    column: str
    pages: int
    offset_index: bool
    column_index: bool
    reason: str = ""
    source: str = EXACT  # EXACT: decoded values; PAGE_STATS: page-header statistics
    bloom_filter: int = 0  # bytes of the bloom filter written (header + bitset), 0 for none
    bloom_ndv: int = 0  # distinct values inserted into it, estimated from its set bits before folding
    fallback: str = ""  # why it was decoded exactly though page-header statistics were trusted (a Fallback)
    statistics: str = ""  # chunk statistics changed in the new footer: "copied", "filled", "replaced" (index.chunk_stats)


Computed = tuple[ChunkIndexes, ChunkReport]


def compute_indexes(source: Source, footer: Footer, plan: tuple[tuple[ChunkPlan, ...], ...],
                    truncate_length: int, threads: int = 1
                    ) -> tuple[list[list[ChunkIndexes]], list[ChunkReport]]:
    """The indexes of every chunk, a list per row group, and a report per chunk in file order.
    `threads` above 1 scans chunks on that many threads (the same results, and the same error)."""
    indexes: list[list[ChunkIndexes]] = []
    reports: list[ChunkReport] = []
    # On an object store, in either mode: one plan for the whole file, so the next row group is
    # fetched while this one is computed (within the read-ahead bound), and each row group's
    # bytes are dropped once it is done. A trusted chunk is fetched whole too: a request costs
    # what reading megabytes does, so its headers come from its bytes, not a request each.
    source.prefetch([_span(planned) for row in plan for planned in row])
    # No pool for a file of one chunk, or of chunks too small to gain from one.
    threads = worth_threads(threads, [p.chunk.total_compressed_size for row in plan for p in row])
    rows: Generator[list[Computed], None, None] = (
        _threaded(source, footer, plan, truncate_length, threads) if threads > 1
        else (_row_group(source, footer, row, truncate_length) for row in plan))
    try:
        for row, done in zip(plan, rows):
            if row:
                source.release_prefetched_before(max(p.chunk.start + p.chunk.total_compressed_size for p in row))
            indexes.append([computed[0] for computed in done])
            reports.extend(computed[1] for computed in done)
    finally:
        rows.close()  # whatever stops the loop, the pool's threads end here, not when a traceback goes
    source.release_prefetch()
    return indexes, reports


# A chunk to scan, with why header statistics were not used for it (if they were trusted).
Held = tuple[ChunkPlan, str]


def _row_group(source: Source, footer: Footer, row: tuple[ChunkPlan, ...], truncate_length: int
               ) -> list[Computed]:
    """The row group's chunks in file order: header statistics where planned, the other chunks
    scanned together (_walk_row)."""
    done: dict[int, Computed] = {}

    def scan(held_back: list[Held]) -> None:
        scanned = _from_scans(source, footer, [planned for planned, _ in held_back], truncate_length)
        for (planned, fallback), computed in zip(held_back, scanned):
            done[id(planned)] = _fell_back(computed, fallback)

    _walk_row(source, footer, row, truncate_length, scan, done)
    return [done[id(planned)] for planned in row]


def _walk_row(source: Source, footer: Footer, row: tuple[ChunkPlan, ...], truncate_length: int,
              scan: Callable[[list[Held]], None], done: dict[int, Any]) -> None:
    """The row group's chunks in file order: those planned for header statistics computed into
    `done`, the others handed to `scan` a batch at a time. Reads stay in file order but for the
    scans held back, at most one merged request's bytes (scanned before any more is read)."""
    held_back: list[Held] = []
    held_bytes = 0  # compressed bytes of the scans held back (a running total: a wide row group holds hundreds)
    for planned in sorted(row, key=lambda p: p.chunk.start):
        fallback: str = planned.fallback
        if planned.from_headers:
            computed = _from_page_stats(source, footer, planned, truncate_length)
            if not isinstance(computed, str):
                source.release_prefetched(*_span(planned))  # its page bodies are not read
                done[id(planned)] = computed
                continue
            fallback = computed
        held_back.append((planned, fallback))
        held_bytes += planned.chunk.total_compressed_size
        if held_bytes >= source.read_options.range_cap:
            scan(held_back)
            held_back, held_bytes = [], 0
    scan(held_back)


def _fell_back(computed: Computed, fallback: str) -> Computed:
    """An exact scan's result, with why header statistics were not used for it (if they were trusted)."""
    return (computed[0], replace(computed[1], fallback=fallback)) if fallback else computed


# The threads take the next row group's chunks while the last of this one's finish: scans of
# this many row groups ahead are queued (each task holds its chunks' bytes only while it runs).
ROWS_AHEAD = 1


@dataclass(frozen=True)
class _Queued:
    """A chunk's scan on the pool, and why header statistics were not used for it."""

    slot: Slot
    fallback: str


@dataclass(frozen=True)
class _QueuedRow:
    done: list[Computed | _Queued]  # per chunk in row order (incomplete once a failure stopped it)
    order: list[Slot]  # the scans and any failure, in the order _row_group meets them
    stopped: bool  # a step failed: nothing after it is computed, as _row_group would not


def _threaded(source: Source, footer: Footer, plan: tuple[tuple[ChunkPlan, ...], ...], truncate_length: int,
              threads: int) -> Iterator[list[Computed]]:
    """_row_group of each row group in turn, its scans on a pool of `threads` threads. A row
    group's results are taken once the next one's scans are queued, so the threads do not idle
    at its end; taken in the order one thread computes them, they raise its first error."""
    with ScanPool(threads) as pool:
        queued: deque[_QueuedRow] = deque()
        for row in plan:
            queued.append(_queued_row_group(source, footer, row, truncate_length, pool))
            if queued[-1].stopped:
                break
            if len(queued) > ROWS_AHEAD:
                yield _taken(queued.popleft())
        while queued:
            yield _taken(queued.popleft())


def _taken(row: _QueuedRow) -> list[Computed]:
    for slot in row.order:
        slot.result()  # the first failure one thread would have met is raised, as it raised it
    return [_fell_back(entry.slot.result(), entry.fallback) if isinstance(entry, _Queued) else entry
            for entry in row.done]


def _queued_row_group(source: Source, footer: Footer, row: tuple[ChunkPlan, ...], truncate_length: int,
                      pool: ScanPool) -> _QueuedRow:
    """_row_group with its scans queued on `pool` in runs (parallel.segments): header statistics
    are read here, in the same order; a failure among them is kept for its turn."""
    done: dict[int, Computed | _Queued] = {}
    order: list[Slot] = []

    def scan(held_back: list[Held]) -> None:
        for run in segments(held_back, lambda held: held[0].chunk.total_compressed_size):
            chunks = [planned for planned, _ in run]
            # A local file's longest scans first, so that none is left to run alone at the end;
            # an object store's in file order, as its reads are fetched ahead.
            priority = -sum(p.chunk.total_compressed_size for p in chunks) if source.local else 0
            slots = pool.submit(lambda chunks=chunks: list(_from_scans(source, footer, chunks, truncate_length)),
                                len(chunks), priority)
            order.extend(slots)
            for (planned, fallback), slot in zip(run, slots):
                done[id(planned)] = _Queued(slot, fallback)

    try:
        _walk_row(source, footer, row, truncate_length, scan, done)
    except Exception as err:  # noqa: BLE001 - raised in its turn, after the scans queued before it
        order.append(pool.failed(err))
        return _QueuedRow([], order, True)
    return _QueuedRow([done[id(planned)] for planned in row], order, False)


def _span(planned: ChunkPlan) -> tuple[int, int]:
    return planned.chunk.start, planned.chunk.total_compressed_size


# A local file's small chunks are read a run at a time, in one request (Source.holding): a wide
# row group of small chunks pays a read per run, not per chunk. A run spans at most
# HOLD_RUN_BYTES (held while its chunks are scanned) and skips gaps of at most HOLD_GAP_BYTES.
HOLD_CHUNK_BYTES = 1 << 20
HOLD_RUN_BYTES = 8 << 20
HOLD_GAP_BYTES = 64 << 10


def _held_runs(row: list[ChunkPlan]) -> Iterator[list[ChunkPlan]]:
    """The chunks (in file order) as runs to read at once; a big chunk (or one whose metadata
    places it nowhere: its walk says so) is a run of its own."""
    run: list[ChunkPlan] = []
    first = end = 0  # the run's span in the file
    for planned in row:
        start, size = _span(planned)
        small = start >= 0 and 0 <= size < HOLD_CHUNK_BYTES
        if run and (not small or not 0 <= start - end <= HOLD_GAP_BYTES or start + size - first > HOLD_RUN_BYTES):
            yield run
            run = []
        if not run:
            first = start
        run.append(planned)
        end = start + size
        if not small:
            yield run
            run = []
    if run:
        yield run


def _from_scans(source: Source, footer: Footer, row: list[ChunkPlan], truncate_length: int) -> Iterator[Computed]:
    for run in _held_runs(row):
        if len(run) == 1:
            yield from _scanned(source, footer, run, truncate_length)
            continue
        (first, _), (last, size) = _span(run[0]), _span(run[-1])
        with source.holding(first, last + size - first):
            yield from _scanned(source, footer, run, truncate_length)


def _scanned(source: Source, footer: Footer, row: list[ChunkPlan], truncate_length: int) -> Iterator[Computed]:
    scans = scan_chunks(source, footer, [(planned.chunk, planned.with_values, planned.encoded_order)
                                         for planned in row])
    for planned in row:
        # Not zip(row, scans): zip's reused result tuple would keep this scan alive while the
        # next chunk decodes.
        scan = next(scans)
        computed = _from_scan(planned, scan, truncate_length)
        decoded = scan.extrema is None  # an encoded scan holds only buffers kept for the next chunk
        del scan
        if decoded:
            release_memory(planned.chunk.total_compressed_size)
        yield computed


def _from_page_stats(source: Source, footer: Footer, planned: ChunkPlan, truncate_length: int
                     ) -> Computed | Fallback:
    """The chunk's indexes from page-header statistics, or why it is decoded exactly."""
    chunk, order = planned.chunk, planned.order
    try:
        headers = page_stats.read_headers(source, chunk, footer.chunk_end(chunk), footer.row_group_rows[chunk.row_group],
                                          footer.max_page_bytes)
    except PageIndexError as err:
        raise err.located(path=source.path, row_group=chunk.row_group, column=chunk.leaf.dotted) from None
    levels = headers.levels
    # Anything short of a clean chunk (pages no index can describe, rows that do not add up) is
    # decoded exactly, which explains it in the report or the error.
    if not isinstance(levels, PageLevels):
        return levels
    if _no_valid_index(levels) is not None or int(levels.rows.sum()) != footer.row_group_rows[chunk.row_group]:
        return Fallback.UNINDEXABLE_PAGES
    ci = page_stats.column_index_from_headers(chunk, order, headers.stats, levels, truncate_length)
    if not isinstance(ci, bytes):
        return ci
    oi = offset_index(headers.pages, levels, None)
    report = ChunkReport(chunk.row_group, chunk.leaf.dotted, len(headers.pages.pages), True, True,
                         source=PAGE_STATS)
    return ChunkIndexes(ci, oi), report


def _no_valid_index(levels: PageLevels) -> str | None:
    """Why no index can describe these pages, if none can."""
    if levels.split_record_page is not None:
        return (f"page {levels.split_record_page} does not start at a row boundary "
                "(a record is split across pages), so no index can be valid")
    empty = np.flatnonzero(levels.rows == 0)  # not a Python step per page: it would hold the GIL
    if len(empty):
        return (f"page {int(empty[0])} holds no rows: first_row_index could not increase strictly, "
                "so no index can be valid")
    return None


def _from_scan(planned: ChunkPlan, scan: ChunkScan, truncate_length: int) -> Computed:
    """The chunk's indexes and planned bloom filter from its walked pages, levels and (when
    decoded) values: the values are hashed while in memory, never decoded twice."""
    indexes, report = _indexes_from_scan(planned, scan, truncate_length)
    if planned.bloom is None or scan.values is None:
        return indexes, report
    bloom = build_filter(scan.values, planned.chunk.leaf.physical_type, planned.bloom.fpp, planned.bloom.max_bytes)
    if planned.bloom.auto and not auto_keeps(bloom.ndv, len(scan.values), _ordered(indexes.column_index)):
        return indexes, report
    blob = bloom.to_bytes()
    return replace(indexes, bloom_filter=blob), replace(report, bloom_filter=len(blob), bloom_ndv=bloom.ndv)


def _ordered(raw: bytes | None) -> bool:
    """The pages' bounds are sorted, over enough pages that chance is unlikely to have sorted them."""
    if raw is None:
        return False
    ci = decode_struct(raw)[0]  # read back: the index is built as bytes
    return (len(ci.get(ColumnIndex.MIN_VALUES).items) >= AUTO_MIN_ORDERED_PAGES
            and ci.get(ColumnIndex.BOUNDARY_ORDER) != BoundaryOrder.UNORDERED)


def _indexes_from_scan(planned: ChunkPlan, scan: ChunkScan, truncate_length: int) -> Computed:
    """The chunk's indexes from its walked pages, levels and (when decoded) values."""
    chunk, order = planned.chunk, planned.order
    leaf = chunk.leaf
    pages, levels = scan.pages, scan.levels

    def report(oi: bool, ci: bool, why: str = "") -> ChunkReport:
        return ChunkReport(chunk.row_group, leaf.dotted, len(pages.pages), oi, ci, why)

    why = _no_valid_index(levels)
    if why is not None:
        return ChunkIndexes(None, None), report(False, False, why)
    if scan.extrema is not None:
        oi = offset_index(pages, levels, scan.extrema.unencoded)
        ci = column_index_of_extrema(leaf, order, levels, scan.extrema, truncate_length)
        if isinstance(ci, Refusal):
            return ChunkIndexes(None, oi), report(True, False, ci.reason)
        return ChunkIndexes(ci, oi), report(True, True)
    if scan.values is None:
        return ChunkIndexes(None, offset_index(pages, levels, None)), report(True, False, order.reason)
    unencoded = unencoded_bytes(scan.values, levels.defined) if leaf.physical_type == Type.BYTE_ARRAY else None
    oi = offset_index(pages, levels, unencoded)
    if not order.indexable:
        return ChunkIndexes(None, oi), report(True, False, order.reason)
    ci = column_index(leaf, order, levels, scan.values, truncate_length)
    if isinstance(ci, Refusal):
        return ChunkIndexes(None, oi), report(True, False, ci.reason)
    return ChunkIndexes(ci, oi), report(True, True)
