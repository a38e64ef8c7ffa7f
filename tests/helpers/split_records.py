"""A Parquet file whose list column has a record split across two v1 data pages.

Old writers (parquet-mr before 1.11 for v1 pages) cut pages by size alone, so a page could
start in the middle of a record; Arrow no longer writes such files. The file is pyarrow's own
for `ROWS`, with its one data page replaced by two hand-encoded pages (uncompressed, PLAIN
values, RLE levels, header statistics) split after the first SPLIT_AT level entries. Only
pageindex.format.thrift is used to build it.
"""
from __future__ import annotations

import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pageindex.format.thrift import Field, Struct, T, TList, decode_struct, encode_struct

ROWS = [[1, 2, 3], [4, 5], [6]]
SPLIT_AT = 2  # the second page starts at the 3rd value of the first record (repetition level 1)
_REP = [0, 1, 1, 0, 1, 0]
_MAX_DEF = 3  # optional list, repeated group, optional element: every value here is defined
_DATA_PAGE, _PLAIN, _RLE = 0, 0, 3


def _rle(levels: list[int]) -> bytes:
    """Levels as RLE runs only (bit width <= 8, so one byte per run value), length-prefixed."""
    out = bytearray()
    i = 0
    while i < len(levels):
        j = i
        while j < len(levels) and levels[j] == levels[i]:
            j += 1
        out += bytes(((j - i) << 1,)) + bytes((levels[i],))
        i = j
    return struct.pack("<I", len(out)) + bytes(out)


def _page(rep: list[int], values: list[int]) -> bytes:
    body = _rle(rep) + _rle([_MAX_DEF] * len(rep)) + struct.pack(f"<{len(values)}i", *values)
    stats = Struct((Field(3, T.I64, 0), Field(5, T.BINARY, struct.pack("<i", max(values))),
                    Field(6, T.BINARY, struct.pack("<i", min(values)))))
    header = Struct((
        Field(1, T.I32, _DATA_PAGE), Field(2, T.I32, len(body)), Field(3, T.I32, len(body)),
        Field(5, T.STRUCT, Struct((Field(1, T.I32, len(rep)), Field(2, T.I32, _PLAIN),
                                   Field(3, T.I32, _RLE), Field(4, T.I32, _RLE), Field(5, T.STRUCT, stats)))),
    ))
    return encode_struct(header) + body


def write_split_record_file(path: Path) -> Path:
    base = path.with_suffix(".base.parquet")
    pq.write_table(pa.table({"l": pa.array(ROWS, pa.list_(pa.int32()))}), base, compression="none",
                   use_dictionary=False, data_page_version="1.0", write_page_index=False)
    data = base.read_bytes()
    base.unlink()
    (length,) = struct.unpack("<I", data[-8:-4])
    metadata, _ = decode_struct(data[-8 - length : -8])
    values = [v for row in ROWS for v in row]
    chunk = _page(_REP[:SPLIT_AT], values[:SPLIT_AT]) + _page(_REP[SPLIT_AT:], values[SPLIT_AT:])
    (group,) = metadata.get(4).items
    (column,) = group.get(1).items
    meta = (column.get(3).without(11).set(9, T.I64, 4)
            .set(6, T.I64, len(chunk)).set(7, T.I64, len(chunk)))
    column = column.set(2, T.I64, 4).set(3, T.STRUCT, meta)
    group = group.set(1, T.LIST, TList(T.STRUCT, (column,))).set(2, T.I64, len(chunk))
    footer = encode_struct(metadata.set(4, T.LIST, TList(T.STRUCT, (group,))))
    path.write_bytes(b"PAR1" + chunk + footer + struct.pack("<I", len(footer)) + b"PAR1")
    return path
