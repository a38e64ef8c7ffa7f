"""A chunk's page headers walked by compiled code (numba): the Thrift compact PageHeader fields the
scan needs, for every page of a chunk in one call, as rows of an int64 array.

Only the plain case is read: anything the Python walker (pageindex.scan.page_walk) might read
differently or reject (a field of an unexpected type, a repeated field, a container in an unknown
field, an index page, a header or page cut off by the bytes given, a value out of its range, a
count of values other than the chunk's) returns FALLBACK, and that walker then reads the chunk.
"""
from __future__ import annotations

import numpy as np
from numba import njit

_JIT = {"cache": True, "nogil": True}

FALLBACK = -1  # status: the Python walker reads this chunk
FULL = -2  # status: more pages than rows in `out`; call again with a bigger one

# Columns of a page's row in `out`.
OFFSET, HEADER_SIZE, KIND, COMPRESSED, UNCOMPRESSED, NUM_VALUES, NUM_ROWS, NUM_NULLS, DEF_SIZE, \
    REP_SIZE, IS_COMPRESSED, ENCODING, DEF_ENCODING, REP_ENCODING, CRC, PRESENT = range(16)
COLUMNS = 16
# PRESENT bits: which optional fields the header holds.
HAS_ENCODING, HAS_DEF_ENCODING, HAS_REP_ENCODING, HAS_CRC = 1, 2, 4, 8

_MAX_PAGE_BYTES = 1 << 31  # as page_walk.MAX_PAGE_BYTES
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
# Compact-protocol type ids.
_TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _STRUCT, _UUID = 1, 2, 3, 4, 5, 6, 7, 8, 12, 13
_BAD = np.int64(-1)


@njit(**_JIT)
def _varint(buf, p, end, max_bytes):
    """The unsigned varint at p (at most max_bytes long) and the position after it; -1 if it is
    cut off or longer (the Python decoder's errors, or a read of more bytes: its call)."""
    value = np.uint64(0)
    shift = np.uint64(0)
    stop = min(p + max_bytes, end)
    while p < stop:
        b = np.uint64(buf[p])
        p += 1
        value |= (b & np.uint64(0x7F)) << shift
        if b < 0x80:
            return value, p
        shift += np.uint64(7)
    return value, _BAD


@njit(**_JIT)
def _zigzag(buf, p, end, max_bytes, lo, hi):
    """A zigzag varint in [lo, hi] and the position after it; -1 otherwise."""
    n, q = _varint(buf, p, end, max_bytes)
    if q < 0:
        return np.int64(0), _BAD
    value = np.int64(n >> np.uint64(1)) ^ -np.int64(n & np.uint64(1))
    if value < lo or value > hi:
        return np.int64(0), _BAD
    return value, q


@njit(**_JIT)
def _skip(buf, p, end, ftype):
    """The position after a value of a simple type the scan does not use; -1 for a container
    (or anything else) the Python decoder might treat otherwise."""
    if ftype == _TRUE or ftype == _FALSE:
        return p
    if ftype == _BYTE:
        return p + 1 if p < end else _BAD
    if ftype == _I16:
        return _zigzag(buf, p, end, 3, -(1 << 15), (1 << 15) - 1)[1]
    if ftype == _I32:
        return _zigzag(buf, p, end, 5, _I32_MIN, _I32_MAX)[1]
    if ftype == _I64:
        # 9 bytes hold 63 bits: a tenth is rare enough to leave to the Python decoder's range check.
        return _zigzag(buf, p, end, 9, -(1 << 62) * 2, (1 << 62) - 1 + (1 << 62))[1]
    if ftype == _DOUBLE:
        return p + 8 if p + 8 <= end else _BAD
    if ftype == _UUID:
        return p + 16 if p + 16 <= end else _BAD
    if ftype == _BINARY:
        n, q = _varint(buf, p, end, 5)
        if q < 0 or np.int64(n) > end - q:
            return _BAD
        return q + np.int64(n)
    return _BAD


@njit(**_JIT)
def _field(buf, p, end, last_id):
    """A field header at p: (type, id, position after it); type 0 is the struct's stop, -1 bad."""
    if p >= end:
        return np.int64(-1), np.int64(0), _BAD
    header = np.int64(buf[p])
    p += 1
    ftype = header & 0x0F
    if ftype == 0:
        return np.int64(0), np.int64(0), p
    delta = header >> 4
    if delta:
        return ftype, last_id + delta, p
    field_id, p = _zigzag(buf, p, end, 3, -(1 << 15), (1 << 15) - 1)
    return ftype, field_id, p


@njit(**_JIT)
def _sub_header(buf, p, end, int_ids, bool_id, stats_id, values, present):
    """A sub-header struct: its I32 fields `int_ids` and its bool field `bool_id` (1 or 0) go to
    `values` and `present` (the bool last); its Statistics (`stats_id`) is skipped field by
    field. Returns the position after the struct, -1 to fall back."""
    last_id = np.int64(0)
    n = len(int_ids)
    while True:
        ftype, field_id, p = _field(buf, p, end, last_id)
        if p < 0 or ftype < 0:
            return _BAD
        if ftype == 0:
            return p
        last_id = field_id
        slot = -1
        for i in range(n):
            if int_ids[i] == field_id:
                slot = i
        if slot >= 0:
            if ftype != _I32 or present[slot]:
                return _BAD  # another type, or a repeated field (the decoder's first wins): its call
            values[slot], p = _zigzag(buf, p, end, 5, _I32_MIN, _I32_MAX)
            present[slot] = True
        elif field_id == bool_id:
            if (ftype != _TRUE and ftype != _FALSE) or present[n]:
                return _BAD
            values[n] = 1 if ftype == _TRUE else 0
            present[n] = True
        elif field_id == stats_id and ftype == _STRUCT:
            p = _statistics(buf, p, end)
        else:
            p = _skip(buf, p, end, ftype)
        if p < 0:
            return _BAD


@njit(**_JIT)
def _statistics(buf, p, end):
    """The position after a Statistics struct whose fields are all of simple types."""
    last_id = np.int64(0)
    while True:
        ftype, field_id, p = _field(buf, p, end, last_id)
        if p < 0 or ftype < 0:
            return _BAD
        if ftype == 0:
            return p
        last_id = field_id
        p = _skip(buf, p, end, ftype)
        if p < 0:
            return _BAD


# Sub-headers' I32 field ids, in the order of their values (parquet.thrift; page_walk's names):
# DataPageHeader: num_values, encoding, definition and repetition level encodings (statistics 5);
# DataPageHeaderV2: num_values, num_nulls, num_rows, encoding, level byte lengths (is_compressed 7,
# statistics 8); DictionaryPageHeader: num_values, encoding (is_sorted 3).
_V1_IDS = np.array([1, 2, 3, 4], np.int64)
_V2_IDS = np.array([1, 2, 3, 4, 5, 6], np.int64)
_DICT_IDS = np.array([1, 2], np.int64)


@njit(**_JIT)
def _page(buf, p, end, row, v1_ids, v2_ids, dict_ids):
    """One PageHeader at p into `row`; the position after the header, -1 to fall back."""
    start = p
    top = np.zeros(4, np.int64)  # type, uncompressed, compressed, crc
    seen = np.zeros(4, np.bool_)
    subs = 0
    v1 = np.zeros(5, np.int64)
    v1_seen = np.zeros(5, np.bool_)
    v2 = np.zeros(7, np.int64)
    v2_seen = np.zeros(7, np.bool_)
    dv = np.zeros(3, np.int64)
    dv_seen = np.zeros(3, np.bool_)
    last_id = np.int64(0)
    while True:
        ftype, field_id, p = _field(buf, p, end, last_id)
        if p < 0 or ftype < 0:
            return _BAD
        if ftype == 0:
            break
        last_id = field_id
        if 1 <= field_id <= 4:
            if ftype != _I32 or seen[field_id - 1]:
                return _BAD
            top[field_id - 1], p = _zigzag(buf, p, end, 5, _I32_MIN, _I32_MAX)
            seen[field_id - 1] = True
        elif field_id == 5 or field_id == 7 or field_id == 8 or field_id == 6:
            if ftype != _STRUCT or subs or field_id == 6:
                return _BAD  # two sub-headers, or an index page's: the Python walker's
            subs = field_id
            if field_id == 5:
                p = _sub_header(buf, p, end, v1_ids, -1, 5, v1, v1_seen)
            elif field_id == 8:
                p = _sub_header(buf, p, end, v2_ids, 7, 8, v2, v2_seen)
            else:
                p = _sub_header(buf, p, end, dict_ids, 3, -1, dv, dv_seen)
        else:
            p = _skip(buf, p, end, ftype)
        if p < 0:
            return _BAD
    if not (seen[0] and seen[1] and seen[2]):
        return _BAD
    kind, uncompressed, compressed = top[0], top[1], top[2]
    if not (0 <= uncompressed <= _MAX_PAGE_BYTES and 0 <= compressed <= _MAX_PAGE_BYTES):
        return _BAD
    row[:] = 0
    row[OFFSET] = start
    row[HEADER_SIZE] = p - start
    row[KIND] = kind
    row[COMPRESSED] = compressed
    row[UNCOMPRESSED] = uncompressed
    row[NUM_ROWS] = -1
    row[NUM_NULLS] = -1
    row[IS_COMPRESSED] = 1
    present = np.int64(0)
    if seen[3]:
        row[CRC] = top[3]
        present |= HAS_CRC
    if kind == 0:
        if subs != 5 or not v1_seen[0] or v1[0] < 0:
            return _BAD
        row[NUM_VALUES] = v1[0]
        if v1_seen[1]:
            row[ENCODING] = v1[1]
            present |= HAS_ENCODING
        if v1_seen[2]:
            row[DEF_ENCODING] = v1[2]
            present |= HAS_DEF_ENCODING
        if v1_seen[3]:
            row[REP_ENCODING] = v1[3]
            present |= HAS_REP_ENCODING
    elif kind == 3:
        if subs != 8 or not (v2_seen[0] and v2_seen[1] and v2_seen[2] and v2_seen[4] and v2_seen[5]):
            return _BAD
        num_values, nulls, rows, def_size, rep_size = v2[0], v2[1], v2[2], v2[4], v2[5]
        if not (0 <= num_values and 0 <= nulls <= num_values and 0 <= rows <= num_values):
            return _BAD
        if not (0 <= def_size <= _MAX_PAGE_BYTES and 0 <= rep_size <= _MAX_PAGE_BYTES) \
                or def_size + rep_size > compressed:
            return _BAD
        row[NUM_VALUES], row[NUM_NULLS], row[NUM_ROWS] = num_values, nulls, rows
        row[DEF_SIZE], row[REP_SIZE] = def_size, rep_size
        row[IS_COMPRESSED] = 0 if v2_seen[6] and v2[6] == 0 else 1
        if v2_seen[3]:
            row[ENCODING] = v2[3]
            present |= HAS_ENCODING
    elif kind == 2:
        if subs != 7 or not dv_seen[0] or dv[0] < 0:
            return _BAD
        row[NUM_VALUES] = dv[0]
        if dv_seen[1]:
            row[ENCODING] = dv[1]
            present |= HAS_ENCODING
    else:
        return _BAD  # index pages (1) and unknown kinds: the Python walker's
    row[PRESENT] = present
    return p


@njit(**_JIT)
def walk(buf, want, out):
    """The pages from buf[0] until their data pages hold `want` values, into the rows of `out`
    (int64, COLUMNS wide); a dictionary page only first. Returns (pages, position after the
    last, status 0 | FALLBACK | FULL)."""
    end = len(buf)
    p = np.int64(0)
    n = 0
    values = np.int64(0)
    while values < want:
        if n >= out.shape[0]:
            return n, p, FULL
        row = out[n]
        q = _page(buf, p, end, row, _V1_IDS, _V2_IDS, _DICT_IDS)
        if q < 0 or q + row[COMPRESSED] > end:
            return n, p, FALLBACK
        if row[KIND] == 2:
            if n:
                return n, p, FALLBACK  # a dictionary page after the first: the walker's error
        else:
            values += row[NUM_VALUES]
        p = q + row[COMPRESSED]
        n += 1
    if values != want:
        return n, p, FALLBACK
    return n, p, 0
