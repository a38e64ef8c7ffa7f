"""Chunk scan: walk a column chunk's pages, count rows and nulls per page, decode its values.

The shared first half of retrofit and verify: everything that is learned by reading the data.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from .column_order import Order
from .errors import MalformedFileError, PageIndexError
from .footer import ChunkMeta, Footer
from .page_levels import PageLevels, flat_counts, flat_levels, needs_level_decoding, nested_levels
from .page_walk import ChunkPages, walk_chunk
from .schema import PT
from .storage import Source
from .values import decode_chunk, leaf_values


@dataclass(frozen=True)
class ChunkScan:
    pages: ChunkPages
    levels: PageLevels
    values: pa.ChunkedArray | None  # defined leaf values, when decoded

    @property
    def rows(self) -> int:
        return int(self.levels.rows.sum())


def needs_values(chunk: ChunkMeta, order: Order) -> bool:
    """Values are decoded for a ColumnIndex, and for BYTE_ARRAY's unencoded sizes in the
    OffsetIndex; other chunks are only walked and counted."""
    return order.indexable or chunk.leaf.physical_type == PT.BYTE_ARRAY


def scan_chunk(source: Source, footer: Footer, chunk: ChunkMeta, decode: bool) -> ChunkScan:
    """Walk and count; decode values too when `decode` (and the chunk allows an index)."""
    try:
        return _scan(source, footer, chunk, decode)
    except PageIndexError as err:
        raise err.located(path=source.path, row_group=chunk.row_group, column=chunk.leaf.dotted) from None


def _scan(source: Source, footer: Footer, chunk: ChunkMeta, decode: bool) -> ChunkScan:
    pages = walk_chunk(source, chunk, footer.footer_start)
    nested = needs_level_decoding(chunk)
    levels = nested_levels(chunk, pages) if nested else flat_levels(pages)
    rows = int(levels.rows.sum())
    expected = footer.row_group_rows[chunk.row_group]
    if rows != expected:
        raise MalformedFileError(f"pages hold {rows} rows but the row group has {expected}")
    if not decode or levels.split_record_page is not None:
        return ChunkScan(pages, levels, None)
    created_by = footer.created_by_raw
    array = decode_chunk(chunk, pages, rows, created_by)
    if not nested:
        levels = flat_counts(levels, array, chunk.leaf.max_def)
    values = leaf_values(array)
    if len(values) != int(levels.defined.sum()):
        raise MalformedFileError(
            f"decoded {len(values)} values but the levels define {int(levels.defined.sum())}")
    return ChunkScan(pages, levels, values)
