"""Verify: check an existing page index (any writer's) against the data: page locations, row
boundaries, bounds holding every value, exact null counts, boundary order; bloom filters consistent
and holding every value; the chunk's min_value/max_value holding every value.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from pageindex.errors import PageIndexError
from pageindex.format.collector import collector_paused
from pageindex.format.column_order import Order, order_for
from pageindex.format.footer import DEFAULT_MAX_PAGE_BYTES, ChunkMeta, Footer, read_footer
from pageindex.format.parquet_thrift import ColumnChunk, ColumnMetaData, FileMetaData, RowGroup, Statistics, Type
from pageindex.format.thrift import Struct
from pageindex.index.bloom.blob import BloomFilter
from pageindex.index.bloom.chunk_hashes import chunk_hashes, eligible
from pageindex.index.builder import Refusal, page_bounds, unencoded_bytes
from pageindex.index.kinds import comparable
from pageindex.index.reader import (
    ColumnIndexView,
    IndexBytes,
    OffsetIndexView,
    read_bloom_filter,
    read_index_bytes,
    read_page_indexes,
)
from pageindex.index.parallel import ScanPool, threads_option, worth_threads
from pageindex.index.soundness import Violation, check_boundary_order
from pageindex.io.storage import Source, open_source
from pageindex.scan.chunk_scan import ChunkScan, needs_values, scan_chunk
from pageindex.scan.memory import release_memory

NO_TRUNCATION = 1 << 62
# The check a wrong chunk min_value/max_value is reported under (retrofit's repair rewrites them).
CHUNK_STATISTICS = "chunk statistics"


@dataclass(frozen=True)
class VerifyResult:
    path: str
    chunks: int
    chunks_with_offset_index: int
    chunks_with_column_index: int
    pages_checked: int
    violations: tuple[Violation, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path, "ok": self.ok, "chunks": self.chunks,
            "chunks_with_offset_index": self.chunks_with_offset_index,
            "chunks_with_column_index": self.chunks_with_column_index,
            "pages_checked": self.pages_checked,
            "violations": [v.__dict__ for v in self.violations],
        }


def verify(path: str, filesystem: Any = None, threads: int | str = 1,
           max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES) -> VerifyResult:
    """Check the file's page indexes and bloom filters against its data; `threads` chunks at a
    time, as retrofit's `threads` (the same result for any value); a page above
    `max_page_bytes` is refused, as retrofit refuses it."""
    count = threads_option(threads)
    with open_source(path, filesystem) as source, collector_paused():
        return verify_source(source, replace(read_footer(source), max_page_bytes=max_page_bytes), count)


def verify_source(source: Source, footer: Footer, threads: int = 1) -> VerifyResult:
    """verify on an open file whose footer is read (retrofit's --verify-existing)."""
    violations: list[Violation] = []
    pages = with_oi = with_ci = 0
    # The filters come in the same read as the index blocks (on an object store, one request).
    held = read_index_bytes(source, footer, bloom_filters=True)
    indexes = read_page_indexes(source, (chunk for row in footer.chunks for chunk in row), held)
    threads = worth_threads(threads, [chunk.total_compressed_size for row in footer.chunks for chunk in row])
    with ScanPool(threads) if threads > 1 else contextlib.nullcontext() as pool:
        for row in footer.chunks:
            checked_here = [chunk for chunk in row if indexes[chunk.row_group, chunk.column] != (None, None)
                            or chunk.bloom_filter is not None]
            # On an object store: the row group's checked chunks in a few merged requests.
            source.prefetch([(chunk.start, chunk.total_compressed_size) for chunk in checked_here])

            def check(chunk: ChunkMeta) -> tuple[list[Violation], int]:
                oi, ci = indexes[chunk.row_group, chunk.column]
                order = order_for(chunk.leaf, footer.declared_order(chunk.column))
                checked = _verify_chunk(source, footer, chunk, order, oi, ci, held)
                release_memory(chunk.total_compressed_size)
                return checked

            # On a pool: the row group's chunks at once, their results (and the first error)
            # taken in file order.
            results = (map(check, checked_here) if pool is None else
                       [pool.submit(lambda chunk=chunk: [check(chunk)], 1)[0] for chunk in checked_here])
            for chunk, result in zip(checked_here, results):
                found, checked = result if pool is None else result.result()
                oi, ci = indexes[chunk.row_group, chunk.column]
                with_oi += oi is not None
                with_ci += ci is not None
                violations += found
                pages += checked
    source.release_prefetch()
    return VerifyResult(source.path, sum(len(r) for r in footer.chunks), with_oi, with_ci,
                        pages, tuple(violations))


def _verify_chunk(source: Source, footer: Footer, chunk: ChunkMeta, order: Order,
                  oi: OffsetIndexView | None, ci: ColumnIndexView | None, held: IndexBytes | None = None
                  ) -> tuple[list[Violation], int]:
    out: list[Violation] = []

    def fail(page: int | None, check: str, detail: str) -> None:
        out.append(Violation(chunk.row_group, chunk.leaf.dotted, page, check, detail))

    bloom = _read_bloom(source, chunk, held, fail)
    checks_values = ci is not None or (oi is not None and oi.unencoded_byte_array_data_bytes is not None)
    scan = scan_chunk(source, footer, chunk,
                      with_values=bloom is not None or (checks_values and needs_values(chunk, order)))
    split = scan.levels.split_record_page
    if split is not None:
        fail(split, "row boundary", "page does not start at a row boundary (record split across pages)")
    if oi is not None:
        _check_offset_index(scan, oi, fail)
    if ci is not None:
        if len(ci) != len(scan.pages.pages):
            fail(None, "page count", f"ColumnIndex lists {len(ci)} pages, the chunk has {len(scan.pages.pages)}")
        elif not order.indexable:
            fail(None, "column order", f"ColumnIndex present but {order.reason}")
        elif scan.values is not None:
            _check_column_index(chunk, order, scan, ci, fail, _statistics(footer, chunk))
    if bloom is not None and scan.values is not None:
        _check_bloom(chunk, scan.values, bloom, fail)
    return out, len(scan.pages.pages)


def _read_bloom(source: Source, chunk: ChunkMeta, held: IndexBytes | None, fail) -> BloomFilter | None:
    """The chunk's bloom filter, its header and length checked (field 15 = header + bitset)."""
    try:
        return read_bloom_filter(source, chunk, held)
    except PageIndexError as err:
        fail(None, "bloom filter", err.message(with_path=False))
        return None


def _check_bloom(chunk: ChunkMeta, values, bloom: BloomFilter, fail) -> None:
    """No false negative: every non-null value's own bytes must find all their bits set."""
    if not eligible(chunk.leaf.physical_type):
        fail(None, "bloom filter", f"a filter on a {Type.name(chunk.leaf.physical_type)} column, which has none")
        return
    hashes = chunk_hashes(values, chunk.leaf.physical_type, float_extras=False).hashes
    missing = int((~bloom.might_contain_hashes(hashes)).sum())
    if missing:
        fail(None, "bloom filter", f"{missing} of {len(hashes)} values are not in the filter")


def _check_offset_index(scan: ChunkScan, oi: OffsetIndexView, fail) -> None:
    walked = scan.pages.pages
    if len(oi.pages) != len(walked):
        fail(None, "page locations", f"OffsetIndex lists {len(oi.pages)} pages, the walk found {len(walked)}")
        return
    said = [loc.first_row_index for loc in oi.pages]
    if said and said[0] != 0:
        fail(0, "first_row_index", f"first page starts at row {said[0]}, not 0")
    for i, (a, b) in enumerate(zip(said, said[1:]), start=1):
        if b <= a:
            fail(i, "first_row_index", f"{b} does not increase strictly after {a}")
    for i, (loc, page, first) in enumerate(zip(oi.pages, walked, scan.levels.first_rows)):
        if loc.offset != page.offset or loc.compressed_page_size != page.size:
            fail(i, "page location", f"index says offset {loc.offset} size {loc.compressed_page_size}, "
                 f"page is at {page.offset} size {page.size}")
        if loc.first_row_index != int(first):
            fail(i, "first_row_index", f"index says {loc.first_row_index}, data says {int(first)}")
    unencoded = oi.unencoded_byte_array_data_bytes
    if unencoded is not None and scan.values is not None and scan.levels.defined is not None:
        actual = unencoded_bytes(scan.values, scan.levels.defined)
        for i, (said, real) in enumerate(zip(unencoded, actual)):
            if said != int(real):
                fail(i, "unencoded_byte_array_data_bytes", f"index says {said}, data has {int(real)}")


def _statistics(footer: Footer, chunk: ChunkMeta) -> Struct | None:
    cc = footer.metadata.get(FileMetaData.ROW_GROUPS).items[chunk.row_group].get(RowGroup.COLUMNS).items[chunk.column]
    stats = cc.get(ColumnChunk.META_DATA).get(ColumnMetaData.STATISTICS)
    return stats if isinstance(stats, Struct) else None


def _check_chunk_bounds(chunk: ChunkMeta, order: Order, stats: Struct | None, keys_min: tuple, keys_max: tuple,
                        fail) -> None:
    """The chunk's min_value/max_value, which readers prune row groups on, hold every value (a
    bound they cannot decode, or NaN, readers ignore: not checked)."""
    lows, highs = [k for k in keys_min if k is not None], [k for k in keys_max if k is not None]
    if stats is None or not lows:
        return
    for field_id, name, want, wrong in ((Statistics.MIN_VALUE, "min_value", min(lows), lambda k, w: k > w),
                                        (Statistics.MAX_VALUE, "max_value", max(highs), lambda k, w: k < w)):
        raw = stats.get(field_id)
        key = comparable(chunk.leaf, order, raw) if isinstance(raw, bytes) else None
        if key is not None and not _nan(key) and wrong(key, want):
            side = "above the chunk's smallest" if name == "min_value" else "below the chunk's largest"
            fail(None, CHUNK_STATISTICS, f"{name} is {side} value")


def _check_column_index(chunk: ChunkMeta, order: Order, scan: ChunkScan, ci: ColumnIndexView, fail,
                        stats: Struct | None = None) -> None:
    leaf, levels = chunk.leaf, scan.levels
    for i, (is_null, defined) in enumerate(zip(ci.null_pages, levels.defined)):
        if bool(is_null) != (defined == 0):
            fail(i, "null_pages", f"index says {'null' if is_null else 'not null'}, page has {int(defined)} values")
    if ci.null_counts is not None:
        for i, (said, real) in enumerate(zip(ci.null_counts, levels.nulls)):
            if said != int(real):
                fail(i, "null_counts", f"index says {said}, page has {int(real)}")
            if ci.null_pages[i] and said == 0:
                fail(i, "null_pages", "a null page with null count 0 (parquet-java rejects it)")
    _check_histogram(ci.definition_level_histograms, levels.def_histograms, "definition_level_histograms", fail)
    _check_histogram(ci.repetition_level_histograms, levels.rep_histograms, "repetition_level_histograms", fail)
    actual = page_bounds(leaf, order, scan.values, levels.defined, NO_TRUNCATION)
    if isinstance(actual, Refusal):
        fail(None, "NaN", f"ColumnIndex present but {actual.reason}")
        return
    _check_chunk_bounds(chunk, order, stats, actual.keys_min, actual.keys_max, fail)
    if actual.nan_counts is not None and ci.nan_counts is not None and tuple(ci.nan_counts) != actual.nan_counts:
        fail(None, "nan_counts", f"index says {list(ci.nan_counts)}, data has {list(actual.nan_counts)}")
    keyed = []
    for i, (lo_raw, hi_raw, want_lo, want_hi) in enumerate(zip(ci.min_values, ci.max_values, actual.keys_min,
                                                               actual.keys_max)):
        if want_lo is None or ci.null_pages[i]:
            continue
        lo, hi = comparable(leaf, order, lo_raw), comparable(leaf, order, hi_raw)
        if lo is None or hi is None:
            fail(i, "bounds", "stored min or max cannot be decoded for this column type")
            continue
        if _nan(lo) or _nan(hi):
            fail(i, "bounds", "stored bound is NaN under TYPE_ORDER")
            continue
        if lo > want_lo:
            fail(i, "min", "stored min is above the page's smallest value")
        if hi < want_hi:
            fail(i, "max", "stored max is below the page's largest value")
        keyed.append((i, lo, hi))
    check_boundary_order(ci.boundary_order, keyed, fail)


def _nan(value: Any) -> bool:
    return isinstance(value, float) and value != value


def _check_histogram(said: tuple[int, ...] | None, real: np.ndarray | None, name: str, fail) -> None:
    if said is None or real is None:
        return
    if tuple(said) != tuple(int(x) for x in real.ravel()):
        fail(None, name, "histogram differs from the levels in the pages")
