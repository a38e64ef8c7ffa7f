"""Retrofit: read a file's footer, plan, compute each chunk's indexes, write the tail, commit.

The only module that runs the whole pipeline; each stage lives in its own module.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import __version__
from .column_order import order_for
from .commit import commit
from .errors import MalformedFileError, PageIndexError
from .footer import F, ChunkMeta, Footer, decode_footer, parse_tail
from .index_builder import Refusal, column_index, offset_index, unencoded_bytes
from .page_levels import flat_counts, flat_levels, needs_level_decoding, nested_levels
from .page_walk import walk_chunk
from .schema import PT
from .storage import Source, open_source, resolve
from .values import decode_chunk, leaf_values
from .writer import MARKER_KEY, ChunkIndexes, build_tail, marker_value

TAIL_READ = 64 << 10


@dataclass(frozen=True)
class ChunkReport:
    """What was written for one column chunk, and why anything was left out."""

    row_group: int
    column: str
    pages: int
    offset_index: bool
    column_index: bool
    reason: str = ""


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
            "chunks": [c.__dict__ for c in self.chunks],
            "bytes_read": self.bytes_read, "seconds": round(self.seconds, 6),
        }


def read_footer(source: Source) -> Footer:
    """Read and validate the footer with at most two ranged reads."""
    size = source.size
    tail = source.read(max(0, size - TAIL_READ), min(size, TAIL_READ))
    length = parse_tail(tail, size, source.path)
    if length + 8 <= len(tail):
        raw = tail[len(tail) - 8 - length : len(tail) - 8]
    else:
        raw = source.read(size - 8 - length, length)
    if source.read(0, 4) != b"PAR1":
        raise MalformedFileError("no Parquet magic at start of file", path=source.path)
    return decode_footer(raw, size, source.path)


def is_fully_indexed(footer: Footer) -> bool:
    """Every chunk has an OffsetIndex, and a ColumnIndex unless pageindex left it out on purpose."""
    ours = footer.key_value(MARKER_KEY) is not None
    return all(
        c.has_offset_index and (c.has_column_index or ours)
        for row in footer.chunks for c in row
    )


def retrofit(src: str, dst: str | None = None, *, truncate_length: int = 64, force: bool = False,
             filesystem: Any = None, dry_run: bool = False) -> RetrofitResult:
    """Give `src` a page index; write to `dst`, or replace `src` atomically when dst is None."""
    if truncate_length < 1:
        raise ValueError("truncate_length must be at least 1")
    started = time.monotonic()
    with open_source(src, filesystem) as source:
        footer = read_footer(source)
        if is_fully_indexed(footer) and not force:
            return RetrofitResult(src, None, "already_indexed", source.size, 0,
                                  len(footer.chunks), (), source.stats.bytes_read,
                                  time.monotonic() - started)
        indexes, reports = compute_indexes(source, footer, truncate_length)
        tail = build_tail(footer, indexes, marker_value(__version__, truncate_length))
        out_size = footer.footer_start + len(tail)
        if dry_run:
            return RetrofitResult(src, None, "dry_run", source.size, out_size, len(footer.chunks),
                                  tuple(reports), source.stats.bytes_read,
                                  time.monotonic() - started)
        dst_fs, dst_path = (source.fs, source.path) if dst is None else resolve(dst, filesystem)
        commit(source, footer.footer_start, tail, dst_path, dst_fs)
        return RetrofitResult(src, dst or src, "indexed", source.size, out_size,
                              len(footer.chunks), tuple(reports), source.stats.bytes_read,
                              time.monotonic() - started)


def compute_indexes(source: Source, footer: Footer, truncate_length: int
                    ) -> tuple[list[list[ChunkIndexes]], list[ChunkReport]]:
    orders = footer.metadata.get(F.FMD_COLUMN_ORDERS)
    declared = orders.items if orders is not None else None
    if declared is not None and len(declared) != len(footer.leaves):
        raise MalformedFileError(
            f"{len(declared)} column orders for {len(footer.leaves)} columns", path=source.path)
    created_by = footer.metadata.get(F.FMD_CREATED_BY)
    indexes, reports = [], []
    for rg, row in enumerate(footer.chunks):
        out_row = []
        for chunk in row:
            order = order_for(chunk.leaf, declared[chunk.column] if declared is not None else None)
            try:
                result, report = _chunk_indexes(source, footer, chunk, order, truncate_length,
                                                created_by)
            except PageIndexError as err:
                raise err.located(path=source.path, row_group=rg, column=chunk.leaf.dotted) from None
            out_row.append(result)
            reports.append(report)
        indexes.append(out_row)
    return indexes, reports


def _chunk_indexes(source: Source, footer: Footer, chunk: ChunkMeta, order, truncate_length: int,
                   created_by: bytes | None) -> tuple[ChunkIndexes, ChunkReport]:
    leaf = chunk.leaf
    pages = walk_chunk(source, chunk, footer.footer_start)
    nested = needs_level_decoding(chunk)
    levels = nested_levels(chunk, pages) if nested else flat_levels(pages)
    report = lambda oi, ci, why: ChunkReport(chunk.row_group, leaf.dotted, len(pages.pages), oi, ci, why)  # noqa: E731
    if levels.split_record_page is not None:
        why = (f"page {levels.split_record_page} does not start at a row boundary "
               "(a record is split across pages), so no index can be valid")
        return ChunkIndexes(None, None), report(False, False, why)
    rows = int(levels.rows.sum())
    if rows != footer.row_group_rows[chunk.row_group]:
        raise MalformedFileError(
            f"pages hold {rows} rows but the row group has {footer.row_group_rows[chunk.row_group]}")
    is_byte_array = leaf.physical_type == PT.BYTE_ARRAY
    if not order.indexable and not is_byte_array:
        return ChunkIndexes(None, offset_index(pages, levels, None)), report(True, False, order.reason)
    array = decode_chunk(chunk, pages, rows, created_by)
    if not nested:
        levels = flat_counts(levels, array, leaf.max_def)
    values = leaf_values(array)
    if len(values) != int(levels.defined.sum()):
        raise MalformedFileError(
            f"decoded {len(values)} values but the levels define {int(levels.defined.sum())}")
    unencoded = unencoded_bytes(values, levels.defined) if is_byte_array else None
    oi = offset_index(pages, levels, unencoded)
    if not order.indexable:
        return ChunkIndexes(None, oi), report(True, False, order.reason)
    ci = column_index(leaf, order, levels, values, truncate_length)
    if isinstance(ci, Refusal):
        return ChunkIndexes(None, oi), report(True, False, ci.reason)
    return ChunkIndexes(ci, oi), report(True, True, "")
