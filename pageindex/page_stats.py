"""Page statistics: a chunk's indexes from the min/max/null_count in its page headers, reading
only the headers, where those can be trusted (never floats, nested columns or known-bad writers).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .bounds import comparable
from .column_order import Kind, Order
from .errors import MalformedFileError
from .footer import ChunkMeta
from .index_builder import Bounds, boundary_order
from .page_walk import DATA_PAGE, DATA_PAGE_V2, DICTIONARY_PAGE, PH, ChunkPages, decode_page_header
from .schema import PT
from .storage import Source
from .thrift import Field, Struct, T, TList
from .truncation import truncate_max, truncate_min

HEADER_WINDOW = 4 << 10
ST_MAX, ST_MIN, ST_NULLS, ST_MAX_VALUE, ST_MIN_VALUE = 1, 2, 3, 5, 6


@dataclass(frozen=True)
class HeaderPlan:
    """A chunk's pages found from headers alone, with each data page's header statistics."""

    pages: ChunkPages  # data is empty: bodies were never read
    stats: tuple[Struct | None, ...]


def untrusted_writer(created_by: str, leaf_physical_type: int) -> str | None:
    """Why this writer's statistics for this type cannot be trusted, if it is a known case."""
    m = re.match(r"parquet-mr version (\d+)\.(\d+)\.(\d+)", created_by)
    if m and tuple(int(x) for x in m.groups()) < (1, 8, 0) and leaf_physical_type in (
            PT.BYTE_ARRAY, PT.FIXED_LEN_BYTE_ARRAY):
        return "parquet-mr before 1.8.0 wrote wrong binary statistics (PARQUET-251)"
    return None


def applicable(chunk: ChunkMeta, order: Order, created_by: str) -> str | None:
    """None when the header path may be tried for this chunk, else the reason it may not."""
    leaf = chunk.leaf
    if not order.indexable:
        return order.reason
    if order.kind is Kind.FLOAT:
        return "float column: page headers cannot tell whether a page holds NaN"
    if leaf.max_rep > 0 or leaf.max_def > 1:
        return "nested column: rows and levels per page need the page data"
    return untrusted_writer(created_by, leaf.physical_type)


def walk_headers(source: Source, chunk: ChunkMeta, limit: int) -> HeaderPlan:
    """The chunk's pages from their headers, one small ranged read per header."""
    pos, values = chunk.start, 0
    dictionary, pages, stats = None, [], []
    window, window_start = b"", pos
    declared_end = min(chunk.start + chunk.total_compressed_size, limit)
    while values < chunk.num_values:
        if pos < limit and not window_start <= pos < window_start + len(window):
            # Windows stop at the chunk's declared end; a header cut off there is read on.
            end = declared_end if pos + 16 <= declared_end else limit
            window, window_start = source.read(pos, min(HEADER_WINDOW, end - pos), "header"), pos
        page, header, window = decode_page_header(source, window, window_start, pos, limit, "header")
        if page.kind == DICTIONARY_PAGE:
            dictionary = page
        elif page.kind in (DATA_PAGE, DATA_PAGE_V2):
            values += page.num_values
            pages.append(page)
            sub = header.get(PH.DATA_V1 if page.kind == DATA_PAGE else PH.DATA_V2)
            st = sub.get(PH.V1_STATS if page.kind == DATA_PAGE else PH.V2_STATS)
            stats.append(st if isinstance(st, Struct) else None)
        pos = page.offset + page.size
    if values != chunk.num_values:
        raise MalformedFileError(f"pages hold {values} values but the chunk metadata says {chunk.num_values}")
    return HeaderPlan(ChunkPages(chunk.start, b"", dictionary, tuple(pages), False), tuple(stats))


def rows_per_page(plan: HeaderPlan) -> np.ndarray:
    """Flat columns: one value per row (v2 pages state it)."""
    rows = []
    for page in plan.pages.pages:
        if page.kind == DATA_PAGE_V2 and page.num_rows != page.num_values:
            raise MalformedFileError("v2 page of a flat column has rows != values", offset=page.offset)
        rows.append(page.num_values)
    return np.array(rows, dtype=np.int64)


def column_index_from_headers(chunk: ChunkMeta, order: Order, plan: HeaderPlan,
                              truncate_length: int) -> Struct | str:
    """The ColumnIndex from header statistics, or why they are not enough."""
    leaf = chunk.leaf
    mins, maxs, nulls = [], [], []
    for page, st in zip(plan.pages.pages, plan.stats):
        if st is None or not isinstance(st.get(ST_NULLS), int):
            return "a page header has no null_count"
        null_count = st.get(ST_NULLS)
        if not 0 <= null_count <= page.num_values:
            return "a page header's null_count is out of range"
        lo, hi = st.get(ST_MIN_VALUE), st.get(ST_MAX_VALUE)
        if (lo is None or hi is None) and order.kind is Kind.SIGNED:
            lo, hi = st.get(ST_MIN), st.get(ST_MAX)
        if null_count == page.num_values:
            lo = hi = None
        elif not isinstance(lo, bytes) or not isinstance(hi, bytes):
            return "a page header has no min_value/max_value"
        nulls.append(null_count)
        mins.append(lo)
        maxs.append(hi)
    if order.truncatable:
        mins = [None if v is None else truncate_min(v, truncate_length, True) for v in mins]
        maxs = [None if v is None else truncate_max(v, truncate_length, True) for v in maxs]
    keys_lo = [None if v is None else comparable(leaf, order, v) for v in mins]
    keys_hi = [None if v is None else comparable(leaf, order, v) for v in maxs]
    if any(v is None for v, m in zip(keys_lo + keys_hi, mins + maxs) if m is not None):
        return "a page header's min or max cannot be decoded for this type"
    bounds = Bounds(tuple(mins), tuple(maxs), tuple(keys_lo), tuple(keys_hi), None)
    rows = [p.num_values for p in plan.pages.pages]
    fields = [
        Field(1, T.LIST, TList(T.TRUE, tuple(n == r for n, r in zip(nulls, rows)))),
        Field(2, T.LIST, TList(T.BINARY, tuple(m or b"" for m in mins))),
        Field(3, T.LIST, TList(T.BINARY, tuple(m or b"" for m in maxs))),
        Field(4, T.I32, boundary_order(bounds)),
        Field(5, T.LIST, TList(T.I64, tuple(nulls))),
    ]
    if leaf.max_def == 1:
        hist = []
        for n, r in zip(nulls, rows):
            hist += [n, r - n]
        fields.append(Field(7, T.LIST, TList(T.I64, tuple(hist))))
    return Struct(tuple(fields))
