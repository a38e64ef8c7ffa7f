"""An independent, minimal Thrift compact reader for page headers, used by tests as a reference.

Deliberately not pageindex.format.thrift: tests of the page walk, levels and codecs must not depend on
the code under test to find their pages. Headers come back as {field id: value} dicts.
"""
from __future__ import annotations

from typing import Iterator

import pyarrow.parquet as pq

DATA_PAGE, INDEX_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2 = 0, 1, 2, 3


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _value(buf: bytes, pos: int, ctype: int) -> tuple[object, int]:
    if ctype in (1, 2):
        return ctype == 1, pos
    if ctype == 3:
        return buf[pos], pos + 1
    if ctype in (4, 5, 6):
        raw, pos = read_varint(buf, pos)
        return (raw >> 1) ^ -(raw & 1), pos
    if ctype == 7:
        return buf[pos : pos + 8], pos + 8
    if ctype == 8:
        size, pos = read_varint(buf, pos)
        return buf[pos : pos + size], pos + size
    if ctype == 9:
        head = buf[pos]
        pos += 1
        size, etype = head >> 4, head & 0x0F
        if size == 15:
            size, pos = read_varint(buf, pos)
        items = []
        for _ in range(size):
            item, pos = (buf[pos] == 1, pos + 1) if etype in (1, 2) else _value(buf, pos, etype)
            items.append(item)
        return items, pos
    if ctype == 12:
        return read_struct(buf, pos)
    raise ValueError(f"unexpected thrift type {ctype}")


def read_struct(buf: bytes, pos: int) -> tuple[dict[int, object], int]:
    """One struct at buf[pos] as {field id: value}, and the position after it."""
    fields: dict[int, object] = {}
    last = 0
    while True:
        head = buf[pos]
        pos += 1
        if head == 0:
            return fields, pos
        if head >> 4:
            last += head >> 4
        else:
            raw, pos = read_varint(buf, pos)
            last = (raw >> 1) ^ -(raw & 1)
        fields[last], pos = _value(buf, pos, head & 0x0F)


def chunk_pages(raw: bytes, chunk: pq.ColumnChunkMetaData) -> Iterator[tuple[dict, int, bytes]]:
    """(header, header size, body) of every page of a column chunk, as pyarrow locates it."""
    start = chunk.data_page_offset
    if chunk.has_dictionary_page and chunk.dictionary_page_offset:
        start = min(start, chunk.dictionary_page_offset)
    pos, end = start, start + chunk.total_compressed_size
    while pos < end:
        header, body_start = read_struct(raw, pos)
        size = header[3]
        yield header, body_start - pos, raw[body_start : body_start + size]
        pos = body_start + size
