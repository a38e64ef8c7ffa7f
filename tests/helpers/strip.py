"""strip_page_index: a copy of a Parquet file whose footer no longer points at a page index.

Layout of the copy: the source's bytes [0, old_footer_start) unchanged, then a re-encoded
FileMetaData in which every ColumnChunk lost fields 4-7 (offset_index_offset/_length,
column_index_offset/_length), then the 4-byte footer length and PAR1.

Design choice: the old ColumnIndex/OffsetIndex blocks are KEPT as dead bytes (never cut), even
when they sit right before the footer. That way the copy's prefix is byte-identical to the
source's prefix up to the old footer start, so every page offset, bloom filter offset and
dictionary offset stays valid, and a retrofit of the copy can be compared offset-for-offset with
the original writer's index. Nothing else in the footer changes (column_orders, key-value
metadata, statistics, encoding stats, unknown fields all survive through the generic Thrift tree).

Only pageindex.format.thrift (decode/encode) is used, not pageindex.format.footer, so the helper does not
depend on the validation under test.
"""
from __future__ import annotations

import struct
from pathlib import Path

from pageindex.format.thrift import Struct, T, TList, decode_struct, encode_struct

MAGIC = b"PAR1"
FMD_ROW_GROUPS = 4
RG_COLUMNS = 1
INDEX_FIELDS = (4, 5, 6, 7)


def _split(data: bytes) -> tuple[int, bytes]:
    if len(data) < 12 or data[:4] != MAGIC or data[-4:] != MAGIC:
        raise ValueError("not a plaintext-footer Parquet file")
    (length,) = struct.unpack("<I", data[-8:-4])
    start = len(data) - 8 - length
    if start < 4:
        raise ValueError("footer length does not fit the file")
    return start, data[start : len(data) - 8]


def stripped_metadata(metadata: Struct) -> Struct:
    """FileMetaData with fields 4-7 removed from every ColumnChunk."""
    groups = metadata.get(FMD_ROW_GROUPS)
    new_groups = []
    for rg in groups.items:
        columns = rg.get(RG_COLUMNS)
        chunks = tuple(cc.without(*INDEX_FIELDS) for cc in columns.items)
        new_groups.append(rg.set(RG_COLUMNS, T.LIST, TList(columns.elem_type, chunks, columns.is_set)))
    return metadata.set(FMD_ROW_GROUPS, T.LIST, TList(groups.elem_type, tuple(new_groups), groups.is_set))


def strip_page_index(src: str | Path, dst: str | Path) -> Path:
    """Write `dst`: `src` without page index pointers (old index bytes left in place, dead)."""
    src, dst = Path(src), Path(dst)
    data = src.read_bytes()
    footer_start, raw = _split(data)
    metadata, end = decode_struct(raw)
    if end != len(raw):
        raise ValueError("trailing bytes after FileMetaData")
    footer = encode_struct(stripped_metadata(metadata))
    dst.write_bytes(data[:footer_start] + footer + struct.pack("<I", len(footer)) + MAGIC)
    return dst


def footer_start(path: str | Path) -> int:
    """Offset where the FileMetaData of `path` begins."""
    return _split(Path(path).read_bytes())[0]


def rewrite_page_index(src: str | Path, dst: str | Path, edit) -> Path:
    """Write `dst`: `src` with every chunk's ColumnIndex / OffsetIndex passed through
    ``edit(row_group, column, column_index, offset_index) -> (column_index, offset_index)``
    (Structs or None), laid out like parquet-java: [0, old footer start) unchanged (old index
    blocks become dead bytes), then all ColumnIndexes, all OffsetIndexes, the footer, length, PAR1.
    """
    src, dst = Path(src), Path(dst)
    data = src.read_bytes()
    start, raw = _split(data)
    metadata, _ = decode_struct(raw)

    def block(cc: Struct, off_id: int, len_id: int) -> Struct | None:
        if not cc.has(off_id):
            return None
        off, length = cc.get(off_id), cc.get(len_id)
        value, end = decode_struct(data, off, off + length)
        assert end == off + length
        return value

    groups = metadata.get(FMD_ROW_GROUPS).items
    edited = []
    for r, rg in enumerate(groups):
        row = []
        for c, cc in enumerate(rg.get(RG_COLUMNS).items):
            row.append(edit(r, c, block(cc, 6, 7), block(cc, 4, 5)))
        edited.append(row)
    out = bytearray(data[:start])
    where: dict[tuple[int, int, int], tuple[int, int]] = {}
    for which in (0, 1):  # all ColumnIndexes, then all OffsetIndexes
        for r, row in enumerate(edited):
            for c, pair in enumerate(row):
                if pair[which] is not None:
                    enc = encode_struct(pair[which])
                    where[(which, r, c)] = (len(out), len(enc))
                    out += enc
    new_groups = []
    for r, rg in enumerate(groups):
        chunks = []
        for c, cc in enumerate(rg.get(RG_COLUMNS).items):
            cc = cc.without(*INDEX_FIELDS)
            if (1, r, c) in where:
                cc = cc.set(4, T.I64, where[(1, r, c)][0]).set(5, T.I32, where[(1, r, c)][1])
            if (0, r, c) in where:
                cc = cc.set(6, T.I64, where[(0, r, c)][0]).set(7, T.I32, where[(0, r, c)][1])
            chunks.append(cc)
        new_groups.append(rg.set(RG_COLUMNS, T.LIST, TList(T.STRUCT, tuple(chunks))))
    metadata = metadata.set(FMD_ROW_GROUPS, T.LIST, TList(T.STRUCT, tuple(new_groups)))
    footer = encode_struct(metadata)
    dst.write_bytes(bytes(out) + footer + struct.pack("<I", len(footer)) + MAGIC)
    return dst


def rewrite_footer(src: str | Path, dst: str | Path, edit) -> Path:
    """Write `dst`: `src` with its FileMetaData passed through `edit(metadata) -> metadata`."""
    src, dst = Path(src), Path(dst)
    data = src.read_bytes()
    start, raw = _split(data)
    metadata, _ = decode_struct(raw)
    footer = encode_struct(edit(metadata))
    dst.write_bytes(data[:start] + footer + struct.pack("<I", len(footer)) + MAGIC)
    return dst
