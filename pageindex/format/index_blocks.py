"""Page index blocks written straight from their values: ColumnIndex and OffsetIndex bytes with no
Struct tree in between, the same bytes format.thrift encodes for the same structs.
"""
from __future__ import annotations

import functools
from typing import Sequence

from pageindex.format.parquet_thrift import ColumnIndex, OffsetIndex, PageLocation
from pageindex.format.thrift import T, binary_to, list_header_to, signed_to, varint_to

_STOP = int(T.STOP)


def _signed_list_to(out: bytearray, values: Sequence[int]) -> None:
    list_header_to(out, T.I64, len(values))
    for v in values:
        n = (v << 1) ^ (v >> 63)
        if n < 0x80:
            out.append(n)
        else:
            varint_to(out, n)


def _binary_list_to(out: bytearray, values: Sequence[bytes]) -> None:
    list_header_to(out, T.BINARY, len(values))
    for v in values:
        if len(v) < 0x80:
            out.append(len(v))
            out += v
        else:
            binary_to(out, v)


@functools.cache
def _ci_header(last_id: int, field_id: int) -> bytes:
    """A ColumnIndex field's header after field `last_id` (a few pairs occur: computed once each)."""
    out = bytearray()
    ColumnIndex.header_to(out, last_id, field_id)
    return bytes(out)


def column_index_bytes(null_pages: Sequence[bool], mins: Sequence[bytes], maxs: Sequence[bytes], boundary_order: int,
                       null_counts: Sequence[int], rep_histograms: Sequence[int] | None = None,
                       def_histograms: Sequence[int] | None = None, nan_counts: Sequence[int] | None = None) -> bytes:
    """A ColumnIndex: per page whether it holds only nulls, its bounds and null count, the pages'
    boundary order, and the optional level histograms (flattened page by page) and NaN counts."""
    out = bytearray(_ci_header(0, ColumnIndex.NULL_PAGES))
    list_header_to(out, T.TRUE, len(null_pages))
    out += bytes([1 if p else 2 for p in null_pages])
    out += _ci_header(ColumnIndex.NULL_PAGES, ColumnIndex.MIN_VALUES)
    _binary_list_to(out, mins)
    out += _ci_header(ColumnIndex.MIN_VALUES, ColumnIndex.MAX_VALUES)
    _binary_list_to(out, maxs)
    out += _ci_header(ColumnIndex.MAX_VALUES, ColumnIndex.BOUNDARY_ORDER)
    signed_to(out, boundary_order)
    last_id = ColumnIndex.BOUNDARY_ORDER
    for field_id, values in ((ColumnIndex.NULL_COUNTS, null_counts),
                             (ColumnIndex.REPETITION_LEVEL_HISTOGRAMS, rep_histograms),
                             (ColumnIndex.DEFINITION_LEVEL_HISTOGRAMS, def_histograms),
                             (ColumnIndex.NAN_COUNTS, nan_counts)):
        if values is not None:
            out += _ci_header(last_id, field_id)
            last_id = field_id
            _signed_list_to(out, values)
    out.append(_STOP)
    return bytes(out)


_OFFSET, _SIZE, _FIRST_ROW = PageLocation.headers(PageLocation.OFFSET, PageLocation.COMPRESSED_PAGE_SIZE,
                                                   PageLocation.FIRST_ROW_INDEX)


def offset_index_bytes(offsets: Sequence[int], sizes: Sequence[int], first_rows: Sequence[int],
                       unencoded: Sequence[int] | None = None) -> bytes:
    """An OffsetIndex: per page its PageLocation (file offset, compressed size with header,
    first row), and optionally its unencoded BYTE_ARRAY data bytes."""
    out = bytearray()
    OffsetIndex.header_to(out, 0, OffsetIndex.PAGE_LOCATIONS)
    list_header_to(out, T.STRUCT, len(offsets))
    for offset, size, first in zip(offsets, sizes, first_rows, strict=True):
        for header, v in ((_OFFSET, offset), (_SIZE, size), (_FIRST_ROW, first)):
            out.append(header)
            n = (v << 1) ^ (v >> 63)
            if n < 0x80:
                out.append(n)
            else:
                varint_to(out, n)
        out.append(_STOP)
    if unencoded is not None:
        OffsetIndex.header_to(out, OffsetIndex.PAGE_LOCATIONS, OffsetIndex.UNENCODED_BYTE_ARRAY_DATA_BYTES)
        _signed_list_to(out, unencoded)
    out.append(_STOP)
    return bytes(out)
