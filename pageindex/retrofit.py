"""Retrofit: read a file's footer, plan, compute each chunk's indexes, write the tail, commit.

The only module that runs the whole pipeline; each stage lives in its own module.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pageindex.errors import ConcurrentModificationError, PageIndexError
from pageindex.format.column_order import Order, order_for
from pageindex.format.footer import ChunkMeta, Footer, read_footer
from pageindex.format.parquet_thrift import Type
from pageindex.format.thrift import Struct
from pageindex.index import page_stats
from pageindex.index.builder import Refusal, column_index, offset_index, unencoded_bytes
from pageindex.index.marker import is_fully_indexed, marker_value
from pageindex.index.tail_writer import ChunkIndexes, build_tail
from pageindex.io.commit import begin_commit, clean_stale_temporaries
from pageindex.io.storage import Source, current_version, open_source, resolve
from pageindex.scan.chunk_scan import ChunkScan, needs_values, scan_chunks
from pageindex.scan.memory import collector_paused, release_memory
from pageindex.scan.page_levels import PageLevels
from pageindex.version import __version__


@dataclass(frozen=True)
class ChunkReport:
    """What was written for one column chunk, and why anything was left out."""

    row_group: int
    column: str
    pages: int
    offset_index: bool
    column_index: bool
    reason: str = ""
    source: str = "exact"  # "exact": decoded values; "page_stats": page-header statistics


@dataclass(frozen=True)
class RetrofitResult:
    path: str
    output: str | None
    status: str  # "indexed" | "already_indexed" | "dry_run"
    bytes_in: int
    bytes_out: int
    row_groups: int
    chunks: tuple[ChunkReport, ...] = field(default_factory=tuple)
    bytes_read: int = 0
    seconds: float = 0.0

    @property
    def pages(self) -> int:
        return sum(c.pages for c in self.chunks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path, "output": self.output, "status": self.status,
            "bytes_in": self.bytes_in, "bytes_out": self.bytes_out,
            "row_groups": self.row_groups, "pages": self.pages,
            "chunks_with_column_index": sum(c.column_index for c in self.chunks),
            "chunks_without_column_index": sum(not c.column_index for c in self.chunks),
            "chunks_from_page_stats": sum(c.source == "page_stats" for c in self.chunks),
            "chunks": [c.__dict__ for c in self.chunks],
            "bytes_read": self.bytes_read, "seconds": round(self.seconds, 6),
        }


def retrofit(src: str, dst: str | None = None, *, truncate_length: int = 64, force: bool = False,
             filesystem: Any = None, dst_filesystem: Any = None, dry_run: bool = False,
             trust_page_stats: bool = False, stale_temp_seconds: float = 3600.0) -> RetrofitResult:
    """Give `src` a page index; write to `dst`, or replace `src` atomically when dst is None.

    filesystem: the fsspec filesystem of src, and of dst unless dst_filesystem is given (by default
    each path's own, from its URL).
    trust_page_stats: build a chunk's ColumnIndex bounds from its page-header statistics, without
    decoding values, where those can be trusted (see page_stats); other chunks are decoded exactly.
    stale_temp_seconds: temporaries (or S3 multipart uploads) that dead runs left for the
    destination are removed once older than this; younger ones may belong to a live run.
    """
    if truncate_length < 1:
        raise ValueError("truncate_length must be at least 1")
    started = time.monotonic()
    dst_fs, dst_path = resolve(src if dst is None else dst,
                                 filesystem if dst_filesystem is None else dst_filesystem)
    if not dry_run:
        clean_stale_temporaries(dst_fs, dst_path, stale_temp_seconds)
    with open_source(src, filesystem) as source, collector_paused():
        footer = read_footer(source)
        if is_fully_indexed(footer) and not force:
            return RetrofitResult(src, None, "already_indexed", source.size, 0,
                                  len(footer.chunks), (), source.stats.bytes_read,
                                  time.monotonic() - started)
        if dst is None:
            dst_fs, dst_path = source.fs, source.path
        pending = None if dry_run else begin_commit(source, footer.footer_start, dst_path, dst_fs)
        try:
            indexes, reports = compute_indexes(source, footer, truncate_length, trust_page_stats)
            tail = build_tail(footer, indexes,
                              marker_value(__version__, truncate_length, trust_page_stats))
            if pending is not None:
                pending.finish(tail)
        except BaseException as err:
            if pending is not None:
                pending.abort()
            # Bytes that stop making sense mid-run may be another writer's, not corruption.
            if isinstance(err, PageIndexError) and not isinstance(err, ConcurrentModificationError) \
                    and _changed(source):
                raise ConcurrentModificationError(
                    "file changed while it was processed; not overwritten", path=source.path) from err
            raise
        return RetrofitResult(src, None if dry_run else dst or src,
                              "dry_run" if dry_run else "indexed", source.size,
                              footer.footer_start + len(tail), len(footer.chunks), tuple(reports),
                              source.stats.bytes_read, time.monotonic() - started)


def _changed(source: Source) -> bool:
    try:
        return current_version(source) != source.version
    except PageIndexError:
        return False  # cannot tell: the original error is the one to report


def compute_indexes(source: Source, footer: Footer, truncate_length: int,
                    trust_page_stats: bool = False
                    ) -> tuple[list[list[ChunkIndexes]], list[ChunkReport]]:
    indexes, reports = [], []
    for row in footer.chunks:
        orders = [order_for(chunk.leaf, footer.declared_order(chunk.column)) for chunk in row]
        done: list[tuple[ChunkIndexes, ChunkReport] | None] = [
            _from_page_stats(source, footer, chunk, order, truncate_length) if trust_page_stats else None
            for chunk, order in zip(row, orders)]
        exact = [i for i, result in enumerate(done) if result is None]
        # On an object store: the row group's chunks in a few merged, concurrent requests.
        source.prefetch([(row[i].start, row[i].total_compressed_size) for i in exact])
        scans = scan_chunks(source, footer, [(row[i], needs_values(row[i], orders[i])) for i in exact])
        for i in exact:
            # Not zip(exact, scans): zip's reused result tuple would keep this scan alive while
            # the next chunk decodes.
            scan = next(scans)
            done[i] = _chunk_indexes(row[i], orders[i], scan, truncate_length)
            del scan
            release_memory(row[i].total_compressed_size)
        indexes.append([result[0] for result in done])
        reports.extend(result[1] for result in done)
    return indexes, reports


def _from_page_stats(source: Source, footer: Footer, chunk: ChunkMeta, order: Order,
                     truncate_length: int) -> tuple[ChunkIndexes, ChunkReport] | None:
    """The chunk's indexes from page-header statistics, or None to decode it exactly."""
    if page_stats.applicable(chunk, order, footer.created_by) is not None:
        return None
    try:
        plan = page_stats.plan_chunk(source, chunk, footer.footer_start)
    except PageIndexError as err:
        raise err.located(path=source.path, row_group=chunk.row_group, column=chunk.leaf.dotted) from None
    levels = plan.levels
    # Anything short of a clean chunk (pages no index can describe, rows that do not add up) is
    # decoded exactly, which explains it in the report or the error.
    if not isinstance(levels, PageLevels) or _no_valid_index(levels) is not None \
            or int(levels.rows.sum()) != footer.row_group_rows[chunk.row_group]:
        return None
    ci = page_stats.column_index_from_headers(chunk, order, plan.stats, levels, truncate_length)
    if not isinstance(ci, Struct):
        return None
    oi = offset_index(plan.pages, levels, None)
    report = ChunkReport(chunk.row_group, chunk.leaf.dotted, len(plan.pages.pages), True, True,
                         source="page_stats")
    return ChunkIndexes(ci, oi), report


def _no_valid_index(levels: PageLevels) -> str | None:
    """Why no index can describe these pages, if none can."""
    if levels.split_record_page is not None:
        return (f"page {levels.split_record_page} does not start at a row boundary "
                "(a record is split across pages), so no index can be valid")
    empty = [i for i, rows in enumerate(levels.rows) if rows == 0]
    if empty:
        return (f"page {empty[0]} holds no rows: first_row_index could not increase strictly, "
                "so no index can be valid")
    return None


def _chunk_indexes(chunk: ChunkMeta, order: Order, scan: ChunkScan, truncate_length: int
                   ) -> tuple[ChunkIndexes, ChunkReport]:
    leaf = chunk.leaf
    is_byte_array = leaf.physical_type == Type.BYTE_ARRAY
    pages, levels = scan.pages, scan.levels

    def report(oi: bool, ci: bool, why: str = "") -> ChunkReport:
        return ChunkReport(chunk.row_group, leaf.dotted, len(pages.pages), oi, ci, why)

    why = _no_valid_index(levels)
    if why is not None:
        return ChunkIndexes(None, None), report(False, False, why)
    if scan.values is None:
        return ChunkIndexes(None, offset_index(pages, levels, None)), report(True, False, order.reason)
    unencoded = unencoded_bytes(scan.values, levels.defined) if is_byte_array else None
    oi = offset_index(pages, levels, unencoded)
    if not order.indexable:
        return ChunkIndexes(None, oi), report(True, False, order.reason)
    ci = column_index(leaf, order, levels, scan.values, truncate_length)
    if isinstance(ci, Refusal):
        return ChunkIndexes(None, oi), report(True, False, ci.reason)
    return ChunkIndexes(ci, oi), report(True, True)
