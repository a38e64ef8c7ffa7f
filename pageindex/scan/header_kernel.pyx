# cython: language_level=3
"""A chunk's page headers walked by compiled code (Cython): the Thrift compact PageHeader fields the
scan needs, for every page of a chunk in one call, as rows of an int64 array.

Only the plain case is read: anything the Python walker (pageindex.scan.page_walk) might read
differently or reject (a field of an unexpected type, a repeated field, a container in an unknown
field, an index page, a header or page cut off by the bytes given, a value out of its range, a
count of values other than the chunk's) returns FALLBACK, and that walker then reads the chunk.
"""
from libc.stdint cimport INT64_MAX, INT64_MIN, int64_t, uint8_t, uint64_t
from libc.string cimport memset

# Columns of a page's row in `out` (the Python names below are the same numbers).
cdef enum:
    C_OFFSET, C_HEADER_SIZE, C_KIND, C_COMPRESSED, C_UNCOMPRESSED, C_NUM_VALUES, C_NUM_ROWS, \
        C_NUM_NULLS, C_DEF_SIZE, C_REP_SIZE, C_IS_COMPRESSED, C_ENCODING, C_DEF_ENCODING, \
        C_REP_ENCODING, C_CRC, C_PRESENT, C_COLUMNS

# PRESENT bits: which optional fields the header holds.
cdef enum:
    C_HAS_ENCODING = 1
    C_HAS_DEF_ENCODING = 2
    C_HAS_REP_ENCODING = 4
    C_HAS_CRC = 8

cdef enum:
    C_FALLBACK = -1  # the Python walker reads this chunk
    C_FULL = -2  # more pages than rows in `out`; call again with a bigger one

# Compact-protocol type ids.
cdef enum:
    T_TRUE = 1
    T_FALSE = 2
    T_BYTE = 3
    T_I16 = 4
    T_I32 = 5
    T_I64 = 6
    T_DOUBLE = 7
    T_BINARY = 8
    T_STRUCT = 12
    T_UUID = 13

cdef enum:
    NO = -1  # a position: the bytes are not read here (fall back)

# Constants the C compiler sees (a cdef global is a variable it must load).
cdef enum:
    I32_MIN = -0x7FFFFFFF - 1
    I32_MAX = 0x7FFFFFFF
    I16_MIN = -0x8000
    I16_MAX = 0x7FFF
cdef extern from *:
    """
    #define HEADER_KERNEL_MAX_PAGE_BYTES (((int64_t)1) << 31)  /* as page_walk.MAX_PAGE_BYTES */
    """
    const int64_t MAX_PAGE_BYTES "HEADER_KERNEL_MAX_PAGE_BYTES"

FALLBACK, FULL = C_FALLBACK, C_FULL
(OFFSET, HEADER_SIZE, KIND, COMPRESSED, UNCOMPRESSED, NUM_VALUES, NUM_ROWS, NUM_NULLS, DEF_SIZE,
 REP_SIZE, IS_COMPRESSED, ENCODING, DEF_ENCODING, REP_ENCODING, CRC, PRESENT) = range(C_COLUMNS)
COLUMNS = C_COLUMNS
HAS_ENCODING, HAS_DEF_ENCODING, HAS_REP_ENCODING, HAS_CRC = \
    C_HAS_ENCODING, C_HAS_DEF_ENCODING, C_HAS_REP_ENCODING, C_HAS_CRC


cdef inline int64_t _varint(const uint8_t* buf, int64_t p, int64_t end, int64_t max_bytes,
                            uint64_t* value) noexcept nogil:
    """The unsigned varint at p (at most max_bytes long) into `value`; the position after it, NO
    if it is cut off or longer (the Python decoder's errors, or a read of more bytes: its call)."""
    cdef uint64_t v = 0, b
    cdef uint64_t shift = 0
    cdef int64_t stop = p + max_bytes if p + max_bytes < end else end
    while p < stop:
        b = buf[p]
        p += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            value[0] = v
            return p
        shift += 7
    return NO


cdef inline int64_t _zigzag(const uint8_t* buf, int64_t p, int64_t end, int64_t max_bytes,
                            int64_t lo, int64_t hi, int64_t* value) noexcept nogil:
    """A zigzag varint in [lo, hi] into `value` (0 when not); the position after it, NO otherwise."""
    cdef uint64_t n = 0
    cdef int64_t v
    cdef int64_t q = _varint(buf, p, end, max_bytes, &n)
    value[0] = 0
    if q < 0:
        return NO
    # n has at most 63 bits (9 bytes of 7), so n >> 1 fits an int64 as numba's np.int64 did.
    v = <int64_t>(n >> 1) ^ -<int64_t>(n & 1)
    if v < lo or v > hi:
        return NO
    value[0] = v
    return q


cdef inline int64_t _skip(const uint8_t* buf, int64_t p, int64_t end, int64_t ftype) noexcept nogil:
    """The position after a value of a simple type the scan does not use; NO for a container
    (or anything else) the Python decoder might treat otherwise."""
    cdef int64_t ignored
    cdef uint64_t n = 0
    cdef int64_t q
    if ftype == T_TRUE or ftype == T_FALSE:
        return p
    if ftype == T_BYTE:
        return p + 1 if p < end else NO
    if ftype == T_I16:
        return _zigzag(buf, p, end, 3, I16_MIN, I16_MAX, &ignored)
    if ftype == T_I32:
        return _zigzag(buf, p, end, 5, I32_MIN, I32_MAX, &ignored)
    if ftype == T_I64:
        # 9 bytes hold 63 bits: a tenth is rare enough to leave to the Python decoder's range check.
        return _zigzag(buf, p, end, 9, INT64_MIN, INT64_MAX, &ignored)
    if ftype == T_DOUBLE:
        return p + 8 if p + 8 <= end else NO
    if ftype == T_UUID:
        return p + 16 if p + 16 <= end else NO
    if ftype == T_BINARY:
        q = _varint(buf, p, end, 5, &n)
        # n < 2**35 (5 bytes of 7): no overflow in the cast or the sum.
        if q < 0 or <int64_t>n > end - q:
            return NO
        return q + <int64_t>n
    return NO


cdef inline int64_t _field(const uint8_t* buf, int64_t p, int64_t end, int64_t last_id,
                           int64_t* ftype, int64_t* field_id) noexcept nogil:
    """A field header at p into (ftype, field_id): type 0 is the struct's stop, -1 bad; the
    position after it, NO when it cannot be read."""
    cdef int64_t header, delta
    if p >= end:
        ftype[0] = -1
        field_id[0] = 0
        return NO
    header = buf[p]
    p += 1
    ftype[0] = header & 0x0F
    field_id[0] = 0
    if ftype[0] == 0:
        return p
    delta = header >> 4
    if delta:
        field_id[0] = last_id + delta
        return p
    return _zigzag(buf, p, end, 3, I16_MIN, I16_MAX, field_id)


cdef int64_t _statistics(const uint8_t* buf, int64_t p, int64_t end) noexcept nogil:
    """The position after a Statistics struct whose fields are all of simple types."""
    cdef int64_t last_id = 0, ftype, field_id
    while True:
        p = _field(buf, p, end, last_id, &ftype, &field_id)
        if p < 0 or ftype < 0:
            return NO
        if ftype == 0:
            return p
        last_id = field_id
        p = _skip(buf, p, end, ftype)
        if p < 0:
            return NO


cdef inline int64_t _sub_header(const uint8_t* buf, int64_t p, int64_t end, int64_t n, int64_t bool_id,
                                int64_t stats_id, int64_t* values, bint* present) noexcept nogil:
    """A sub-header struct: its I32 fields 1..n and its bool field `bool_id` (1 or 0) go to
    `values` and `present` (the bool last, at n); its Statistics (`stats_id`) is skipped field by
    field. Returns the position after the struct, NO to fall back. (An id of -1 matches a field
    whose long-form id is -1, as in the numba kernel, which passed -1 for "none".)"""
    cdef int64_t last_id = 0, ftype, field_id, slot
    while True:
        p = _field(buf, p, end, last_id, &ftype, &field_id)
        if p < 0 or ftype < 0:
            return NO
        if ftype == 0:
            return p
        last_id = field_id
        slot = field_id - 1 if 1 <= field_id <= n else -1
        if slot >= 0:
            if ftype != T_I32 or present[slot]:
                return NO  # another type, or a repeated field (the decoder's first wins): its call
            p = _zigzag(buf, p, end, 5, I32_MIN, I32_MAX, &values[slot])
            present[slot] = True
        elif field_id == bool_id:
            if (ftype != T_TRUE and ftype != T_FALSE) or present[n]:
                return NO
            values[n] = 1 if ftype == T_TRUE else 0
            present[n] = True
        elif field_id == stats_id and ftype == T_STRUCT:
            p = _statistics(buf, p, end)
        else:
            p = _skip(buf, p, end, ftype)
        if p < 0:
            return NO


# Sub-headers' I32 fields are ids 1..n, in the order of their values (parquet.thrift; page_walk's
# names): DataPageHeader: num_values, encoding, definition and repetition level encodings
# (statistics 5); DataPageHeaderV2: num_values, num_nulls, num_rows, encoding, level byte lengths
# (is_compressed 7, statistics 8); DictionaryPageHeader: num_values, encoding (is_sorted 3).
cdef enum:
    V1_INTS = 4
    V2_INTS = 6
    DICT_INTS = 2


cdef int64_t _page(const uint8_t* buf, int64_t p, int64_t end, int64_t* row, Py_ssize_t width
                   ) noexcept nogil:
    """One PageHeader at p into `row` (`width` columns); the position after the header, NO to
    fall back."""
    cdef int64_t start = p
    cdef int64_t top[4]  # type, uncompressed, compressed, crc
    cdef bint seen[4]
    cdef int64_t subs = 0
    cdef int64_t v1[V1_INTS + 1]
    cdef bint v1_seen[V1_INTS + 1]
    cdef int64_t v2[V2_INTS + 1]
    cdef bint v2_seen[V2_INTS + 1]
    cdef int64_t dv[DICT_INTS + 1]
    cdef bint dv_seen[DICT_INTS + 1]
    cdef int64_t last_id = 0, ftype, field_id
    cdef int64_t kind, uncompressed, compressed, num_values, nulls, rows, def_size, rep_size
    cdef int64_t present = 0
    memset(top, 0, sizeof(top))
    memset(seen, 0, sizeof(seen))
    memset(v1, 0, sizeof(v1))
    memset(v1_seen, 0, sizeof(v1_seen))
    memset(v2, 0, sizeof(v2))
    memset(v2_seen, 0, sizeof(v2_seen))
    memset(dv, 0, sizeof(dv))
    memset(dv_seen, 0, sizeof(dv_seen))
    while True:
        p = _field(buf, p, end, last_id, &ftype, &field_id)
        if p < 0 or ftype < 0:
            return NO
        if ftype == 0:
            break
        last_id = field_id
        if 1 <= field_id <= 4:
            if ftype != T_I32 or seen[field_id - 1]:
                return NO
            p = _zigzag(buf, p, end, 5, I32_MIN, I32_MAX, &top[field_id - 1])
            seen[field_id - 1] = True
        elif field_id == 5 or field_id == 7 or field_id == 8 or field_id == 6:
            if ftype != T_STRUCT or subs or field_id == 6:
                return NO  # two sub-headers, or an index page's: the Python walker's
            subs = field_id
            if field_id == 5:
                p = _sub_header(buf, p, end, V1_INTS, -1, 5, v1, v1_seen)
            elif field_id == 8:
                p = _sub_header(buf, p, end, V2_INTS, 7, 8, v2, v2_seen)
            else:
                p = _sub_header(buf, p, end, DICT_INTS, 3, -1, dv, dv_seen)
        else:
            p = _skip(buf, p, end, ftype)
        if p < 0:
            return NO
    if not (seen[0] and seen[1] and seen[2]):
        return NO
    kind, uncompressed, compressed = top[0], top[1], top[2]
    if not (0 <= uncompressed <= MAX_PAGE_BYTES and 0 <= compressed <= MAX_PAGE_BYTES):
        return NO
    memset(row, 0, width * sizeof(int64_t))
    row[C_OFFSET] = start
    row[C_HEADER_SIZE] = p - start
    row[C_KIND] = kind
    row[C_COMPRESSED] = compressed
    row[C_UNCOMPRESSED] = uncompressed
    row[C_NUM_ROWS] = -1
    row[C_NUM_NULLS] = -1
    row[C_IS_COMPRESSED] = 1
    if seen[3]:
        row[C_CRC] = top[3]
        present |= C_HAS_CRC
    if kind == 0:
        if subs != 5 or not v1_seen[0] or v1[0] < 0:
            return NO
        row[C_NUM_VALUES] = v1[0]
        if v1_seen[1]:
            row[C_ENCODING] = v1[1]
            present |= C_HAS_ENCODING
        if v1_seen[2]:
            row[C_DEF_ENCODING] = v1[2]
            present |= C_HAS_DEF_ENCODING
        if v1_seen[3]:
            row[C_REP_ENCODING] = v1[3]
            present |= C_HAS_REP_ENCODING
    elif kind == 3:
        if subs != 8 or not (v2_seen[0] and v2_seen[1] and v2_seen[2] and v2_seen[4] and v2_seen[5]):
            return NO
        num_values, nulls, rows, def_size, rep_size = v2[0], v2[1], v2[2], v2[4], v2[5]
        if not (0 <= num_values and 0 <= nulls <= num_values and 0 <= rows <= num_values):
            return NO
        if not (0 <= def_size <= MAX_PAGE_BYTES and 0 <= rep_size <= MAX_PAGE_BYTES) \
                or def_size + rep_size > compressed:
            return NO
        row[C_NUM_VALUES] = num_values
        row[C_NUM_NULLS] = nulls
        row[C_NUM_ROWS] = rows
        row[C_DEF_SIZE] = def_size
        row[C_REP_SIZE] = rep_size
        row[C_IS_COMPRESSED] = 0 if v2_seen[6] and v2[6] == 0 else 1
        if v2_seen[3]:
            row[C_ENCODING] = v2[3]
            present |= C_HAS_ENCODING
    elif kind == 2:
        if subs != 7 or not dv_seen[0] or dv[0] < 0:
            return NO
        row[C_NUM_VALUES] = dv[0]
        if dv_seen[1]:
            row[C_ENCODING] = dv[1]
            present |= C_HAS_ENCODING
    else:
        return NO  # index pages (1) and unknown kinds: the Python walker's
    row[C_PRESENT] = present
    return p


def walk(const uint8_t[::1] buf, int64_t want, int64_t[:, ::1] out):
    """The pages from buf[0] until their data pages hold `want` values, into the rows of `out`
    (int64, COLUMNS wide); a dictionary page only first. Returns (pages, position after the
    last, status 0 | FALLBACK | FULL)."""
    if out.shape[1] < C_COLUMNS:
        raise ValueError(f"out has {out.shape[1]} columns, not {C_COLUMNS}")
    cdef const uint8_t* data = &buf[0] if buf.shape[0] else NULL
    cdef int64_t end = buf.shape[0]
    cdef Py_ssize_t capacity = out.shape[0], width = out.shape[1]
    cdef int64_t p = 0, q, values = 0, n = 0, status = 0
    cdef int64_t* row
    with nogil:
        while values < want:
            if n >= capacity:
                status = C_FULL
                break
            row = &out[n, 0]
            q = _page(data, p, end, row, width)
            if q < 0 or q + row[C_COMPRESSED] > end:
                status = C_FALLBACK
                break
            if row[C_KIND] == 2:
                if n:
                    status = C_FALLBACK  # a dictionary page after the first: the walker's error
                    break
            else:
                values += row[C_NUM_VALUES]
            p = q + row[C_COMPRESSED]
            n += 1
        if status == 0 and values != want:
            status = C_FALLBACK
    return n, p, status
