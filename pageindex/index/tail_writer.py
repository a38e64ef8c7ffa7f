"""Tail writer: serialize bloom filters, ColumnIndex and OffsetIndex blocks and the new footer into the file's tail.

After the kept original file, in Arrow C++'s order: all bloom filters, ColumnIndexes, OffsetIndexes, the footer.
"""
from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

from pageindex.format.footer import MAGIC, Footer
from pageindex.format.parquet_thrift import (
    ColumnChunk,
    ColumnMetaData,
    ColumnOrder,
    FileMetaData,
    KeyValue,
    RowGroup,
)
from pageindex.format.thrift import Struct, T, TList, encode_struct
from pageindex.index.marker import MARKER_KEY

TYPE_ORDER = ColumnOrder.make(TYPE_ORDER=Struct())
_INDEX_LOCATION = (ColumnChunk.OFFSET_INDEX_OFFSET, ColumnChunk.OFFSET_INDEX_LENGTH,
                   ColumnChunk.COLUMN_INDEX_OFFSET, ColumnChunk.COLUMN_INDEX_LENGTH)


@dataclass(frozen=True)
class ChunkIndexes:
    """The encoded indexes to write for one chunk; None means that index is omitted."""

    column_index: bytes | None
    offset_index: bytes | None
    bloom_filter: bytes | None = None  # header + bitset; None keeps the chunk's filter, if any


def build_tail(footer: Footer, indexes: list[list[ChunkIndexes]], marker: str, start: int,
               statistics: Mapping[tuple[int, int], Struct] | None = None) -> bytes:
    """Everything that follows the kept prefix [0, start): the original file, its footer included
    (index.original). statistics: the chunks' new Statistics, by (row group, column) (index.chunk_stats)."""
    blobs: list[bytes] = []
    pos = start
    bloom_loc: dict[tuple[int, int], tuple[int, int]] = {}
    ci_loc: dict[tuple[int, int], tuple[int, int]] = {}
    oi_loc: dict[tuple[int, int], tuple[int, int]] = {}
    for attr, locations in (("bloom_filter", bloom_loc), ("column_index", ci_loc), ("offset_index", oi_loc)):
        for rg, row in enumerate(indexes):
            for col, chunk in enumerate(row):
                raw = getattr(chunk, attr)
                if raw is None:
                    continue
                locations[(rg, col)] = (pos, len(raw))
                blobs.append(raw)
                pos += len(raw)
    metadata = _new_metadata(footer, bloom_loc, ci_loc, oi_loc, marker, statistics or {})
    raw_footer = encode_struct(metadata)
    blobs += [raw_footer, struct.pack("<I", len(raw_footer)), MAGIC]
    return b"".join(blobs)


def _new_metadata(footer: Footer, bloom_loc: dict, ci_loc: dict, oi_loc: dict, marker: str,
                  statistics: Mapping[tuple[int, int], Struct]) -> Struct:
    meta = footer.metadata
    adds_orders = not meta.has(FileMetaData.COLUMN_ORDERS)
    groups = []
    for rg_index, rg in enumerate(meta.get(FileMetaData.ROW_GROUPS).items):
        chunks = []
        for col, cc in enumerate(rg.get(RowGroup.COLUMNS).items):
            if (rg_index, col) in statistics:
                meta_data = ColumnMetaData.set(cc.get(ColumnChunk.META_DATA), ColumnMetaData.STATISTICS,
                                               statistics[(rg_index, col)])
                cc = ColumnChunk.set(cc, ColumnChunk.META_DATA, meta_data)
            if (rg_index, col) in bloom_loc:
                cc = _with_bloom_location(cc, *bloom_loc[(rg_index, col)])
            chunks.append(_with_index_locations(cc, oi_loc.get((rg_index, col)), ci_loc.get((rg_index, col))))
        groups.append(RowGroup.set(rg, RowGroup.COLUMNS, TList(T.STRUCT, tuple(chunks))))
    meta = FileMetaData.set(meta, FileMetaData.ROW_GROUPS, TList(T.STRUCT, tuple(groups)))
    if adds_orders:
        orders = TList(T.STRUCT, (TYPE_ORDER,) * len(footer.leaves))
        meta = FileMetaData.set(meta, FileMetaData.COLUMN_ORDERS, orders)
    kvs = _with_marker(meta.get(FileMetaData.KEY_VALUE_METADATA), marker)
    return FileMetaData.set(meta, FileMetaData.KEY_VALUE_METADATA, kvs)


def _with_index_locations(cc: Struct, oi: tuple[int, int] | None, ci: tuple[int, int] | None) -> Struct:
    """The chunk with its index locations (fields 4-7) replaced by these: in one pass, inserted where
    Struct.set would put them one after the other (before the first field of a larger id)."""
    kept = [f for f in cc.fields if f.id not in _INDEX_LOCATION]
    new = []
    if oi is not None:
        new += [ColumnChunk.field(ColumnChunk.OFFSET_INDEX_OFFSET, oi[0]),
                ColumnChunk.field(ColumnChunk.OFFSET_INDEX_LENGTH, oi[1])]
    if ci is not None:
        new += [ColumnChunk.field(ColumnChunk.COLUMN_INDEX_OFFSET, ci[0]),
                ColumnChunk.field(ColumnChunk.COLUMN_INDEX_LENGTH, ci[1])]
    if len(kept) == len(cc.fields) and not new:
        return cc  # unchanged: its bytes are reused
    at = next((i for i, f in enumerate(kept) if f.id > ColumnChunk.OFFSET_INDEX_OFFSET), len(kept))
    return Struct(tuple(kept[:at] + new + kept[at:]))


def _with_bloom_location(cc: Struct, offset: int, length: int) -> Struct:
    """The chunk with ColumnMetaData fields 14 and 15 pointing at its new filter."""
    meta = ColumnMetaData.set(cc.get(ColumnChunk.META_DATA), ColumnMetaData.BLOOM_FILTER_OFFSET, offset)
    meta = ColumnMetaData.set(meta, ColumnMetaData.BLOOM_FILTER_LENGTH, length)
    return ColumnChunk.set(cc, ColumnChunk.META_DATA, meta)


def _with_marker(kvs: TList | None, marker: str) -> TList:
    entry = KeyValue.make(KEY=MARKER_KEY.encode(), VALUE=marker.encode())
    items = list(kvs.items) if kvs is not None else []
    for i, kv in enumerate(items):
        if kv.get(KeyValue.KEY) == MARKER_KEY.encode():
            items[i] = entry
            break
    else:
        items.append(entry)
    return TList(T.STRUCT, tuple(items))
