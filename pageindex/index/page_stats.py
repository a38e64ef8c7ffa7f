"""Page statistics: a chunk's indexes from the min/max/null_count in its page headers where those
can be trusted (never floats or known-bad writers). Flat chunks: only the headers are read;
nested ones also decode their levels, for rows per page (values are never decoded).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from pageindex.format.column_order import Order
from pageindex.format.footer import ChunkMeta
from pageindex.format.parquet_thrift import DataPageHeader, DataPageHeaderV2, PageHeader, PageType, Statistics, Type
from pageindex.format.thrift import Struct
from pageindex.index.builder import column_index_block
from pageindex.index.fallback import Fallback
from pageindex.index.kinds import codec_for, comparable
from pageindex.index.kinds.base import Bounds
from pageindex.index.truncation import truncate_max, truncate_min
from pageindex.io.storage import Source
from pageindex.scan.nested_encoded import nested_levels_counted
from pageindex.scan.page_levels import PageLevels, flat_levels, needs_level_decoding, nested_levels, with_nulls
from pageindex.scan.page_walk import ChunkPages, Page, walk_chunk, walk_headers


@dataclass(frozen=True)
class HeaderFacts:
    """A chunk's pages with each data page's header statistics, and its per-page level facts."""

    pages: ChunkPages  # data is empty: bodies are not kept
    stats: tuple[Struct | None, ...]
    levels: PageLevels | Fallback  # or why the headers cannot give them


def untrusted_writer(created_by: str, leaf_physical_type: int) -> Fallback | None:
    """Why this writer's statistics for this type cannot be trusted, if it is a known case."""
    m = re.match(r"parquet-mr version (\d+)\.(\d+)\.(\d+)", created_by)
    if m and tuple(int(x) for x in m.groups()) < (1, 8, 0) and leaf_physical_type in (
            Type.BYTE_ARRAY, Type.FIXED_LEN_BYTE_ARRAY):
        return Fallback.PARQUET_251
    return None


def applicable(chunk: ChunkMeta, order: Order, created_by: str) -> str | None:
    """None when the header path may be tried for this chunk, else the reason it may not."""
    if not order.indexable:
        return order.reason
    refusal = codec_for(order).header_refusal
    return refusal if refusal is not None else untrusted_writer(created_by, chunk.leaf.physical_type)


def read_headers(source: Source, chunk: ChunkMeta, limit: int, rows: int, max_page_bytes: int) -> HeaderFacts:
    """A flat chunk's pages from their headers alone; a nested chunk's from reading it whole,
    as rows per page (and level histograms) are only known from its levels (counted by the
    compiled level kernel where it reads them cleanly and they add up to the row group's `rows`)."""
    if not needs_level_decoding(chunk):
        pages = walk_headers(source, chunk, limit, max_page_bytes)
        stats = tuple(_stats(page) for page in pages.pages)
        return HeaderFacts(pages, stats, _flat_levels(chunk.leaf.max_def, pages, stats))
    pages = walk_chunk(source, chunk, limit, max_page_bytes=max_page_bytes)
    levels = nested_levels_counted(chunk, pages, rows)
    if levels is None:
        levels, _ = nested_levels(chunk, pages)
    return HeaderFacts(pages.without_data(), tuple(_stats(page) for page in pages.pages), levels)


def _stats(page: Page) -> Struct | None:
    v1 = page.kind == PageType.DATA_PAGE
    sub = page.header.get(PageHeader.DATA_PAGE_HEADER if v1 else PageHeader.DATA_PAGE_HEADER_V2)
    st = sub.get(DataPageHeader.STATISTICS if v1 else DataPageHeaderV2.STATISTICS)
    return st if isinstance(st, Struct) else None


def _flat_levels(max_def: int, pages: ChunkPages, stats: tuple[Struct | None, ...]) -> PageLevels | Fallback:
    """A flat leaf's levels: rows as its pages count them, nulls as the headers say."""
    nulls = []
    for page, st in zip(pages.pages, stats):
        null_count = _null_count(st)
        if null_count is None:
            return Fallback.NO_NULL_COUNT
        if not 0 <= null_count <= page.num_values:
            return Fallback.NULL_COUNT_OUT_OF_RANGE
        nulls.append(null_count)
    return with_nulls(flat_levels(pages), np.array(nulls, dtype=np.int64), max_def)


def _null_count(st: Struct | None) -> int | None:
    value = None if st is None else st.get(Statistics.NULL_COUNT)
    return value if isinstance(value, int) else None


def column_index_from_headers(chunk: ChunkMeta, order: Order, stats: tuple[Struct | None, ...],
                              levels: PageLevels, truncate_length: int) -> bytes | Fallback:
    """The ColumnIndex from header bounds and the chunk's levels, or why the headers are not
    enough. Every header's null_count must match the levels: writers that count a nested
    column's nulls another way are decoded exactly."""
    leaf = chunk.leaf
    legacy = codec_for(order).legacy_bounds(order)
    mins, maxs = [], []
    for st, nulls, defined in zip(stats, levels.nulls, levels.defined):
        header_nulls = _null_count(st)
        if header_nulls is None:
            return Fallback.NO_NULL_COUNT
        if header_nulls != nulls:
            return Fallback.NULL_COUNT_DIFFERS
        lo, hi = st.get(Statistics.MIN_VALUE), st.get(Statistics.MAX_VALUE)
        if (lo is None or hi is None) and legacy:
            lo, hi = st.get(Statistics.MIN), st.get(Statistics.MAX)
        if defined == 0:
            lo = hi = None
        elif not isinstance(lo, bytes) or not isinstance(hi, bytes):
            return Fallback.NO_MIN_MAX
        mins.append(lo)
        maxs.append(hi)
    if order.truncatable:
        mins = [None if v is None else truncate_min(v, truncate_length) for v in mins]
        maxs = [None if v is None else truncate_max(v, truncate_length) for v in maxs]
    keys_lo = [None if v is None else comparable(leaf, order, v) for v in mins]
    keys_hi = [None if v is None else comparable(leaf, order, v) for v in maxs]
    if any(v is None for v, m in zip(keys_lo + keys_hi, mins + maxs) if m is not None):
        return Fallback.UNDECODABLE_BOUND
    return column_index_block(Bounds(tuple(mins), tuple(maxs), tuple(keys_lo), tuple(keys_hi), None), levels)
