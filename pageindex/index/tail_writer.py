"""Tail writer: serialize ColumnIndex and OffsetIndex blocks and the new footer into the file's tail.

Layout (as parquet-java writes it): all ColumnIndexes, then all OffsetIndexes, then the footer.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from pageindex.format.footer import MAGIC, F, Footer
from pageindex.format.thrift import Field, Struct, T, TList, encode_struct
from pageindex.index.marker import MARKER_KEY

TYPE_ORDER = Struct((Field(1, T.STRUCT, Struct()),))


@dataclass(frozen=True)
class ChunkIndexes:
    """The indexes to write for one chunk; None means that index is omitted."""

    column_index: Struct | None
    offset_index: Struct | None


def build_tail(footer: Footer, indexes: list[list[ChunkIndexes]], marker: str) -> bytes:
    """Everything that follows the kept prefix [0, footer_start)."""
    base = footer.footer_start
    blobs: list[bytes] = []
    pos = base
    ci_loc: dict[tuple[int, int], tuple[int, int]] = {}
    oi_loc: dict[tuple[int, int], tuple[int, int]] = {}
    for attr, locations in (("column_index", ci_loc), ("offset_index", oi_loc)):
        for rg, row in enumerate(indexes):
            for col, chunk in enumerate(row):
                block = getattr(chunk, attr)
                if block is None:
                    continue
                raw = encode_struct(block)
                locations[(rg, col)] = (pos, len(raw))
                blobs.append(raw)
                pos += len(raw)
    metadata = _new_metadata(footer, ci_loc, oi_loc, marker)
    raw_footer = encode_struct(metadata)
    blobs += [raw_footer, struct.pack("<I", len(raw_footer)), MAGIC]
    return b"".join(blobs)


def _new_metadata(footer: Footer, ci_loc: dict, oi_loc: dict, marker: str) -> Struct:
    meta = footer.metadata
    groups = []
    for rg_index, rg in enumerate(meta.get(F.FMD_ROW_GROUPS).items):
        chunks = []
        for col, cc in enumerate(rg.get(F.RG_COLUMNS).items):
            cc = cc.without(F.CC_OI_OFFSET, F.CC_OI_LENGTH, F.CC_CI_OFFSET, F.CC_CI_LENGTH)
            if (rg_index, col) in oi_loc:
                off, length = oi_loc[(rg_index, col)]
                cc = cc.set(F.CC_OI_OFFSET, T.I64, off).set(F.CC_OI_LENGTH, T.I32, length)
            if (rg_index, col) in ci_loc:
                off, length = ci_loc[(rg_index, col)]
                cc = cc.set(F.CC_CI_OFFSET, T.I64, off).set(F.CC_CI_LENGTH, T.I32, length)
            chunks.append(cc)
        groups.append(rg.set(F.RG_COLUMNS, T.LIST, TList(T.STRUCT, tuple(chunks))))
    meta = meta.set(F.FMD_ROW_GROUPS, T.LIST, TList(T.STRUCT, tuple(groups)))
    if not meta.has(F.FMD_COLUMN_ORDERS):
        orders = TList(T.STRUCT, (TYPE_ORDER,) * len(footer.leaves))
        meta = meta.set(F.FMD_COLUMN_ORDERS, T.LIST, orders)
    return meta.set(F.FMD_KV, T.LIST, _with_marker(meta.get(F.FMD_KV), marker))


def _with_marker(kvs: TList | None, marker: str) -> TList:
    entry = Struct((Field(F.KV_KEY, T.BINARY, MARKER_KEY.encode()),
                    Field(F.KV_VALUE, T.BINARY, marker.encode())))
    items = list(kvs.items) if kvs is not None else []
    for i, kv in enumerate(items):
        if kv.get(F.KV_KEY) == MARKER_KEY.encode():
            items[i] = entry
            break
    else:
        items.append(entry)
    return TList(T.STRUCT, tuple(items))
