"""A Parquet file whose list column has a record split across two v1 data pages.

Old writers (parquet-mr before 1.11 for v1 pages) cut pages by size alone, so a page could
start in the middle of a record; Arrow no longer writes such files. The file is pyarrow's own
for `ROWS`, with its one data page replaced by two hand-encoded pages (uncompressed, PLAIN
values, RLE levels, header statistics) split after the first SPLIT_AT level entries
(tests/helpers/hand_pages).
"""
from __future__ import annotations

import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pageindex.format.thrift import Field, Struct, T
from tests.helpers.hand_pages import data_page, with_only_chunk

ROWS = [[1, 2, 3], [4, 5], [6]]
SPLIT_AT = 2  # the second page starts at the 3rd value of the first record (repetition level 1)
_REP = [0, 1, 1, 0, 1, 0]
_MAX_DEF = 3  # optional list, repeated group, optional element: every value here is defined


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
    return data_page(len(rep), body, stats)


def write_split_record_file(path: Path) -> Path:
    base = path.with_suffix(".base.parquet")
    pq.write_table(pa.table({"l": pa.array(ROWS, pa.list_(pa.int32()))}), base, compression="none",
                   use_dictionary=False, data_page_version="1.0", write_page_index=False)
    data = base.read_bytes()
    base.unlink()
    values = [v for row in ROWS for v in row]
    chunk = _page(_REP[:SPLIT_AT], values[:SPLIT_AT]) + _page(_REP[SPLIT_AT:], values[SPLIT_AT:])
    path.write_bytes(with_only_chunk(data, chunk))
    return path
