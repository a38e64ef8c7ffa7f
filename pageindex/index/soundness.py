"""Soundness of an existing page index from the footer and index blocks alone: the structural
impossibilities no valid index has, and the writers whose indexes are known to be wrong.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pageindex.errors import MalformedFileError
from pageindex.format.column_order import Order, order_for
from pageindex.format.footer import ChunkMeta, Footer
from pageindex.format.parquet_thrift import BoundaryOrder
from pageindex.index.kinds import comparable
from pageindex.index.marker import MARKER_KEY
from pageindex.index.reader import (
    ColumnIndexView,
    IndexBytes,
    OffsetIndexView,
    read_column_index,
    read_index_bytes,
    read_offset_index,
)
from pageindex.io.storage import Source


@dataclass(frozen=True)
class Violation:
    row_group: int
    column: str
    page: int | None
    check: str
    detail: str

    def __str__(self) -> str:
        where = f"row group {self.row_group}, column {self.column}"
        if self.page is not None:
            where += f", page {self.page}"
        return f"{where}: {self.check}: {self.detail}"


# (pattern on created_by, why its page indexes are not trusted); sources in docs/FORMAT-RULES.md R18.
SUSPECT_WRITERS: tuple[tuple[str, str], ...] = (
    (r"parquet-mr version \S+-SNAPSHOT\b",
     "an unreleased parquet-mr build: its test writers leave every page marked null with null_count -1"),
    (r"parquet-rs version (?:[0-9]|[1-4][0-9]|5[0-2])\.",
     "parquet-rs before 53.0.0 could write an invalid ColumnIndex for row groups with null pages "
     "(arrow-rs #6310) and, in 42.0.0, an empty OffsetIndex for all-null columns (arrow-rs #4459)"),
    (r"parquet-go version latest$",
     "xitongsys/parquet-go writes OffsetIndex page sizes without the page header (parquet-go #547)"),
)


def suspect_writer(footer: Footer) -> str | None:
    """Why the file's page index must be checked against the data: its writer is a known case
    (unless pageindex built the index, on the data, whatever wrote the rest)."""
    if footer.key_value(MARKER_KEY) is not None:
        return None
    for pattern, reason in SUSPECT_WRITERS:
        if re.match(pattern, footer.created_by):
            return reason
    return None


def structural_flaws(source: Source, footer: Footer, held: IndexBytes | None = None) -> tuple[Violation, ...]:
    """What no valid index can say, found in the index blocks (all read at once where they lie
    together, unless `held` already holds them) without reading any page."""
    if held is None:
        held = read_index_bytes(source, footer)
    out: list[Violation] = []
    for row in footer.chunks:
        for chunk in row:
            try:
                oi, ci = read_offset_index(source, chunk, held), read_column_index(source, chunk, held)
            except MalformedFileError as err:
                out.append(Violation(chunk.row_group, chunk.leaf.dotted, None, "unreadable", err.reason))
                continue
            rows = footer.row_group_rows[chunk.row_group]
            out += _chunk_flaws(chunk, order_for(chunk.leaf, footer.declared_order(chunk.column)), rows, oi, ci)
    return tuple(out)


def _chunk_flaws(chunk: ChunkMeta, order: Order, rows: int, oi: OffsetIndexView | None,
                 ci: ColumnIndexView | None) -> list[Violation]:
    out: list[Violation] = []

    def fail(page: int | None, check: str, detail: str) -> None:
        out.append(Violation(chunk.row_group, chunk.leaf.dotted, page, check, detail))

    page_rows = None if oi is None else _offset_index_flaws(chunk, rows, oi, fail)
    if ci is not None:
        if oi is not None and len(ci) != len(oi.pages):
            fail(None, "page count", f"ColumnIndex lists {len(ci)} pages, OffsetIndex {len(oi.pages)}")
            page_rows = None
        _null_flaws(chunk, ci, page_rows, fail)
        if order.indexable:
            _bound_flaws(chunk, order, ci, fail)
    return out


def _offset_index_flaws(chunk: ChunkMeta, rows: int, oi: OffsetIndexView, fail) -> list[int] | None:
    """Checks the page locations; returns each page's row count when the first rows make sense."""
    start, end = chunk.start, chunk.start + chunk.total_compressed_size
    for i, loc in enumerate(oi.pages):
        if loc.compressed_page_size <= 0 or loc.offset < start or loc.offset + loc.compressed_page_size > end:
            fail(i, "page location", f"offset {loc.offset} size {loc.compressed_page_size} is outside the "
                 f"chunk's bytes [{start}, {end})")
    firsts = [loc.first_row_index for loc in oi.pages]
    sound = True
    if firsts and firsts[0] != 0:
        fail(0, "first_row_index", f"first page starts at row {firsts[0]}, not 0")
        sound = False
    for i, (a, b) in enumerate(zip(firsts, firsts[1:]), start=1):
        if b <= a:
            fail(i, "first_row_index", f"{b} does not increase strictly after {a}")
            sound = False
    if firsts and firsts[-1] >= rows > 0:
        fail(len(firsts) - 1, "first_row_index", f"{firsts[-1]} is not below the row group's {rows} rows")
        sound = False
    return [b - a for a, b in zip(firsts, [*firsts[1:], rows])] if sound else None


def _null_flaws(chunk: ChunkMeta, ci: ColumnIndexView, page_rows: list[int] | None, fail) -> None:
    counts = ci.null_counts
    if counts is None:
        return
    if len(counts) != len(ci):
        fail(None, "null_counts", f"{len(counts)} null counts for {len(ci)} pages")
        return
    flat = chunk.leaf.max_rep == 0
    for i, (null_page, nulls) in enumerate(zip(ci.null_pages, counts)):
        if nulls < 0:
            fail(i, "null_counts", f"negative null count {nulls}")
            continue
        if chunk.leaf.max_def == 0 and (nulls or null_page):
            fail(i, "null_counts", "nulls in a required column")
            continue
        if page_rows is None:
            continue
        # A flat page holds one value per row; a nested one at least one level per row.
        rows = page_rows[i]
        if null_page and (nulls != rows if flat else nulls < rows):
            fail(i, "null_pages", f"a null page of {rows} rows with null count {nulls}")
        elif not null_page and flat and nulls >= rows:
            fail(i, "null_pages", f"a page of {rows} rows with {nulls} nulls is not marked null")


def _bound_flaws(chunk: ChunkMeta, order: Order, ci: ColumnIndexView, fail) -> None:
    keyed: list[tuple[int, Any, Any]] = []
    for i, (null_page, lo_raw, hi_raw) in enumerate(zip(ci.null_pages, ci.min_values, ci.max_values)):
        if null_page:
            continue
        lo, hi = comparable(chunk.leaf, order, lo_raw), comparable(chunk.leaf, order, hi_raw)
        if lo is None or hi is None:
            fail(i, "bounds", "stored min or max cannot be decoded for this column type")
        elif lo == lo and hi == hi:  # NaN bounds are verify's to judge, against the values
            if lo > hi:
                fail(i, "bounds", "stored min is above stored max")
            keyed.append((i, lo, hi))
    check_boundary_order(ci.boundary_order, keyed, fail)


def check_boundary_order(order: int, keyed: list[tuple[int, Any, Any]], fail) -> None:
    """Reports each page that breaks the declared order, given (page, min key, max key) of the
    non-null pages."""
    if order not in (BoundaryOrder.ASCENDING, BoundaryOrder.DESCENDING):
        return
    ascending = order == BoundaryOrder.ASCENDING
    for (i, lo_a, hi_a), (j, lo_b, hi_b) in zip(keyed, keyed[1:]):
        if not ((lo_a <= lo_b and hi_a <= hi_b) if ascending else (lo_a >= lo_b and hi_a >= hi_b)):
            fail(j, "boundary_order",
                 f"index declares {BoundaryOrder.name(order)} but page {j} breaks it against page {i}")
