# cython: language_level=3
"""The encoded-page scan's compiled reads of RLE/bit-packed hybrid streams: a flat page's nulls from
its definition levels, and the least and greatest entry its dictionary indices refer to.

Every kernel returns a negative status (BAD) on input it does not accept; the caller then leaves the
chunk to Arrow. The loops run without the GIL, so chunks can be scanned on threads in parallel.
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t, uint8_t
from libc.string cimport memcpy

from pageindex.scan._bits cimport BAD as _BAD, base as _at, le_window, less, popcount8, popcount64, uleb

# The stream does not hold what it should: Arrow decides what that means.
BAD = _BAD

# The numbers dictionary entries hold, by numpy's kind and item size.
ctypedef fused number:
    int32_t
    uint32_t
    int64_t
    uint64_t
    float
    double


cdef inline number _load(const char* base, int64_t i, number kind) noexcept nogil:
    """Item i of an array of `number`s at base, which may lie at any address (a dictionary's
    entries as numpy holds them, at any offset of their page): memcpy, which the compiler makes one load."""
    cdef number x
    memcpy(&x, base + i * <int64_t>sizeof(number), sizeof(number))
    return x


# The hybrid stream's reading, shared by the kernels below; inline, so sharing it costs no
# call per index.

cdef inline (int64_t, uint64_t, int64_t, int64_t) _bit_width(const uint8_t* buf, int64_t p,
                                                             int64_t end) noexcept nogil:
    """The bit-width byte at p, its mask, the bytes of an RLE run's value and the position after
    it; the width is above 32 when the byte is missing or bad (the caller checks)."""
    cdef int64_t width
    if p >= end:
        return 33, 0, 0, p
    width = buf[p]
    if width > 32:
        return width, 0, 0, p + 1
    return width, (<uint64_t>1 << width) - 1, (width + 7) >> 3, p + 1


cdef inline (bint, int64_t, int64_t, int64_t) _run_header(const uint8_t* buf, int64_t p, int64_t end,
                                                          int64_t left, int64_t width,
                                                          int64_t value_bytes) noexcept nogil:
    """The run whose header is at p, of at most `left` values: whether it is bit-packed, how many
    values it holds, where its data starts and where the next run starts (BAD when cut off, or an
    RLE run of none)."""
    cdef int64_t header, groups, n
    header, p = uleb(buf, p, end)
    if p < 0:
        return False, 0, p, p
    if header & 1:
        groups = header >> 1
        if p + groups * width > end:
            return True, 0, p, _BAD
        return True, min(groups * 8, left), p, p + groups * width
    n = min(header >> 1, left)
    if n == 0 or p + value_bytes > end:
        return False, n, p, _BAD
    return False, n, p, p + value_bytes


cdef inline int64_t _rle_value(const uint8_t* buf, int64_t p, int64_t value_bytes) noexcept nogil:
    """An RLE run's value: `value_bytes` little-endian bytes at p."""
    cdef int64_t value = 0, k
    for k in range(value_bytes):
        value |= (<int64_t>buf[p + k]) << (8 * k)
    return value


cdef inline int64_t _packed_at(const uint8_t* buf, int64_t q, int64_t i, int64_t width,
                               uint64_t mask) noexcept nogil:
    """Value i of the bit-packed run whose data starts at q: a window at bit i * width, no state
    carried from value to value (so the loop pipelines); the window must lie in buf."""
    cdef uint64_t bit = <uint64_t>i * <uint64_t>width
    return <int64_t>((le_window(buf, q + <int64_t>(bit >> 3)) >> (bit & 7)) & mask)


cdef inline int64_t _packed_tail(const uint8_t* buf, int64_t size, int64_t q, int64_t i, int64_t width,
                                 uint64_t mask) noexcept nogil:
    """_packed_at for a value whose window would run past the buffer (of `size` bytes): byte by byte."""
    cdef int64_t bit = i * width
    cdef int64_t at = q + (bit >> 3)
    cdef uint64_t acc = 0
    cdef int64_t k
    for k in range(min(8, size - at)):
        acc |= (<uint64_t>buf[at + k]) << (8 * k)
    return <int64_t>((acc >> (bit & 7)) & mask)


cdef inline int64_t _windowed(int64_t size, int64_t q, int64_t n, int64_t width) noexcept nogil:
    """How many of a bit-packed run's n values (from q on) have their 8-byte window in the buffer."""
    cdef int64_t room = size - 8 - q
    if room < 0:
        return 0
    if width == 0:
        return n
    return min(n, (room * 8 + 7) // width + 1)  # room >= 0: C's division is the floor


def level_zeros(const uint8_t[::1] buf, int64_t p, int64_t end, int64_t count):
    """Of `count` one-bit levels (maximum level 1) in the hybrid stream buf[p:end], how many
    are 0 (the nulls of a flat optional leaf); BAD if the stream is shorter or holds a level
    above 1."""
    cdef int64_t zeros
    with nogil:
        zeros = _level_zeros(_at(buf), p, end, count)
    return zeros


cdef int64_t _level_zeros(const uint8_t* b, int64_t p, int64_t end, int64_t count) noexcept nogil:
    cdef int64_t left = count, ones = 0, n, q, full, rest
    cdef bint packed
    while left > 0:
        packed, n, q, p = _run_header(b, p, end, left, 1, 1)
        if p < 0:
            return _BAD
        if packed:
            # one bit a level: eight bytes' ones at a time rather than one level at a time
            full = n >> 3
            ones += pageindex_ones_hw(b + q, full) if _HW_POPCOUNT else _ones(b + q, full)
            rest = n & 7
            if rest:
                ones += popcount8(b[q + full] & ((1 << rest) - 1))
        else:
            if b[q] > 1:
                return _BAD
            if b[q] == 1:
                ones += n
        left -= n
    return count - ones


cdef inline int64_t _ones(const uint8_t* b, int64_t n) noexcept nogil:
    """The one bits of b[0:n]: eight bytes at a time, then the rest a byte at a time."""
    cdef int64_t total = 0, i, words = n >> 3
    for i in range(words):
        total += popcount64(le_window(b, 8 * i))
    for i in range(words * 8, n):
        total += popcount8(b[i])
    return total


# _ones by the CPU's popcount instruction where it has one: not in the portable x86-64 baseline, so
# built for it apart and taken when the CPU says it has it (a bit-packed run of levels then costs
# an instruction per 64 levels, as numba's code for the host CPU does).
cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #if defined(__GNUC__) && (defined(__x86_64__) || defined(__aarch64__))
    #if defined(__x86_64__)
    __attribute__((target("popcnt")))
    #endif
    static int64_t pageindex_ones_hw(const uint8_t* b, int64_t n) {
        int64_t total = 0, i;
        uint64_t x;
        for (i = 0; i + 8 <= n; i += 8) {
            memcpy(&x, b + i, 8);
            total += __builtin_popcountll(x);
        }
        for (; i < n; i++)
            total += __builtin_popcount(b[i]);
        return total;
    }
    #if defined(__x86_64__)
    static int pageindex_hw_popcount(void) { __builtin_cpu_init(); return __builtin_cpu_supports("popcnt"); }
    #else
    static int pageindex_hw_popcount(void) { return 1; }
    #endif
    #else
    static int64_t pageindex_ones_hw(const uint8_t* b, int64_t n) { (void)b; (void)n; return 0; }
    static int pageindex_hw_popcount(void) { return 0; }
    #endif
    """
    int64_t pageindex_ones_hw(const uint8_t* b, int64_t n) noexcept nogil
    bint pageindex_hw_popcount() noexcept nogil

cdef bint _HW_POPCOUNT = pageindex_hw_popcount()


def index_ranks(const uint8_t[::1] buf, int64_t p, int64_t end, int64_t count, const int64_t[::1] rank,
                const int64_t[::1] lengths):
    """Over `count` dictionary indices (a bit-width byte, then the hybrid stream) in buf[p:end]:
    the least and greatest rank[index], and the sum of lengths[index] (an empty `lengths`:
    no sum). The status is BAD for a short stream, a width above 32 or an index outside
    the dictionary."""
    cdef int64_t size = rank.shape[0]
    cdef int64_t low = size, high = -1, total = 0, status
    cdef const int64_t* ranks = &rank[0] if size > 0 else NULL
    cdef const int64_t* lens = &lengths[0] if lengths.shape[0] > 0 else NULL
    if 0 < lengths.shape[0] < size:
        raise ValueError("index_ranks needs a length for each rank, or none")
    with nogil:
        status = _index_ranks(_at(buf), buf.shape[0], p, end, count, ranks, size, lens, &low, &high, &total)
    return low, high, total, status


cdef int64_t _index_ranks(const uint8_t* b, int64_t buf_size, int64_t p, int64_t end, int64_t count,
                          const int64_t* ranks, int64_t size, const int64_t* lens, int64_t* low_out,
                          int64_t* high_out, int64_t* total_out) noexcept nogil:
    """index_ranks' loop (lens NULL: no sum): the status; the rest through the pointers."""
    cdef int64_t last = size - 1
    cdef bint with_lengths = lens != NULL
    cdef int64_t low = size, high = -1, total = 0
    cdef int64_t width, value_bytes, left, seen, n, q, fast, i, index, r, status = 0
    cdef uint64_t mask
    cdef bint packed
    width, mask, value_bytes, p = _bit_width(b, p, end)
    if width > 32 or size == 0:
        return _BAD
    left = count
    seen = 0  # the greatest index read: one check per run, none per value
    while left > 0:
        packed, n, q, p = _run_header(b, p, end, left, width, value_bytes)
        if p < 0:
            status = _BAD
            break
        if packed:
            fast = _windowed(buf_size, q, n, width)
            if with_lengths:
                for i in range(fast):
                    index = _packed_at(b, q, i, width, mask)
                    seen = max(seen, index)
                    index = min(index, last)
                    r = ranks[index]
                    low = min(low, r)
                    high = max(high, r)
                    total += lens[index]
            else:
                for i in range(fast):
                    index = _packed_at(b, q, i, width, mask)
                    seen = max(seen, index)
                    r = ranks[min(index, last)]
                    low = min(low, r)
                    high = max(high, r)
            for i in range(fast, n):
                index = _packed_tail(b, buf_size, q, i, width, mask)
                seen = max(seen, index)
                index = min(index, last)
                r = ranks[index]
                low = min(low, r)
                high = max(high, r)
                if with_lengths:
                    total += lens[index]
        else:
            index = _rle_value(b, q, value_bytes)
            seen = max(seen, index)
            index = min(index, last)
            r = ranks[index]
            low = min(low, r)
            high = max(high, r)
            if with_lengths:
                total += lens[index] * n
        if seen > last:
            status = _BAD
            break
        left -= n
    low_out[0], high_out[0], total_out[0] = low, high, total
    return status


cdef inline int64_t _widen(const char* entries, int64_t last, int64_t index, int64_t seen, number* low,
                           number* high, bint* nan) noexcept nogil:
    """index_values' reduction after one more index: the least, greatest and NaN of the entries
    (the index clamped: the caller checks the greatest index seen per run), and that index."""
    cdef number x = _load(entries, min(index, last), low[0])
    # Branches, not selects: a new least or greatest is rare, so they cost no chain of dependent
    # compares; strict and in stream order, so of 0.0 and -0.0 the first stays.
    if x < low[0]:
        low[0] = x
    elif x > high[0]:
        high[0] = x
    elif (number is float or number is double) and x != x:
        nan[0] = True
    return max(seen, index)


cdef int64_t _index_values(const uint8_t* buf, int64_t buf_size, int64_t p, int64_t end, int64_t count,
                           const char* entries, int64_t size, number* low, number* high,
                           bint* nan) noexcept nogil:
    """index_values for entries of one type: the status; the extrema and NaN through the pointers."""
    cdef int64_t last = size - 1
    cdef int64_t width, value_bytes, left, seen, n, q, fast, i, first
    cdef uint64_t mask
    cdef bint packed
    if size > 0:
        low[0] = high[0] = _load(entries, 0, low[0])
    width, mask, value_bytes, p = _bit_width(buf, p, end)
    if width > 32 or size == 0:
        return _BAD
    left = count
    seen = -1  # the greatest index read (-1: none yet)
    while left > 0:
        packed, n, q, p = _run_header(buf, p, end, left, width, value_bytes)
        if p < 0:
            return _BAD
        fast = _windowed(buf_size, q, n, width) if packed else 0
        if seen < 0:  # the first entry referred to
            first = _packed_tail(buf, buf_size, q, 0, width, mask) if packed else _rle_value(buf, q, value_bytes)
            low[0] = high[0] = _load(entries, min(first, last), low[0])
        if not packed:
            seen = _widen(entries, last, _rle_value(buf, q, value_bytes), seen, low, high, nan)
        else:
            for i in range(fast):
                seen = _widen(entries, last, _packed_at(buf, q, i, width, mask), seen, low, high, nan)
            for i in range(fast, n):
                seen = _widen(entries, last, _packed_tail(buf, buf_size, q, i, width, mask), seen, low, high, nan)
        if seen > last:
            return _BAD
        left -= n
    return 0


def index_values(const uint8_t[::1] buf, int64_t p, int64_t end, int64_t count, entries):
    """Over `count` dictionary indices (as index_ranks reads them) into numeric `entries` (int32,
    uint32, int64, uint64, float32 or float64): the least and greatest entry referred to, whether
    one is NaN (then those two are undefined), and the status. No ranking: the entries' own order
    is the column's."""
    cdef Py_buffer view
    cdef const uint8_t* b = _at(buf)
    cdef int64_t buf_size = buf.shape[0]
    cdef bint nan = False
    cdef int64_t status, size
    cdef int32_t i32_low = 0, i32_high = 0
    cdef uint32_t u32_low = 0, u32_high = 0
    cdef int64_t i64_low = 0, i64_high = 0
    cdef uint64_t u64_low = 0, u64_high = 0
    cdef float f32_low = 0, f32_high = 0
    cdef double f64_low = 0, f64_high = 0
    dtype = entries.dtype
    cdef str kind = dtype.kind
    cdef int64_t itemsize = dtype.itemsize
    # The bytes as they lie (any dtype, any alignment), held while the loop reads them without the GIL.
    PyObject_GetBuffer(entries, &view, PyBUF_SIMPLE)
    cdef const char* e = <const char*>view.buf
    size = view.len // itemsize
    try:
        if kind == "f" and itemsize == 8:
            with nogil:
                status = _index_values(b, buf_size, p, end, count, e, size, &f64_low, &f64_high, &nan)
            return f64_low, f64_high, nan, status
        if kind == "i" and itemsize == 8:
            with nogil:
                status = _index_values(b, buf_size, p, end, count, e, size, &i64_low, &i64_high, &nan)
            return i64_low, i64_high, nan, status
        if kind == "i" and itemsize == 4:
            with nogil:
                status = _index_values(b, buf_size, p, end, count, e, size, &i32_low, &i32_high, &nan)
            return i32_low, i32_high, nan, status
        if kind == "f" and itemsize == 4:
            with nogil:
                status = _index_values(b, buf_size, p, end, count, e, size, &f32_low, &f32_high, &nan)
            return f32_low, f32_high, nan, status
        if kind == "u" and itemsize == 8:
            with nogil:
                status = _index_values(b, buf_size, p, end, count, e, size, &u64_low, &u64_high, &nan)
            return u64_low, u64_high, nan, status
        if kind == "u" and itemsize == 4:
            with nogil:
                status = _index_values(b, buf_size, p, end, count, e, size, &u32_low, &u32_high, &nan)
            return u32_low, u32_high, nan, status
    finally:
        PyBuffer_Release(&view)
    raise TypeError(f"index_values reads int32, uint32, int64, uint64, float32 or float64 entries, not {entries.dtype}")



def index_bytes(const uint8_t[::1] buf, int64_t p, int64_t end, int64_t count, const uint8_t[::1] entries,
                const int64_t[::1] starts, const int64_t[::1] lengths):
    """Over `count` dictionary indices (as index_ranks reads them) into byte-array entries (each
    entries[starts[i] : starts[i] + lengths[i]]): the least and greatest entry referred to
    (their indices), the sum of their lengths, and the status. For a dictionary too big to rank."""
    cdef int64_t size = starts.shape[0]
    cdef int64_t found[3]
    cdef int64_t status
    cdef const int64_t* at = &starts[0] if size > 0 else NULL
    cdef const int64_t* lens = &lengths[0] if size > 0 else NULL
    if lengths.shape[0] < size:
        raise ValueError("index_bytes needs a length for each start")
    with nogil:
        status = _index_bytes(_at(buf), buf.shape[0], p, end, count, _at(entries), at, lens, size, found)
    return found[0], found[1], found[2], status


cdef int64_t _index_bytes(const uint8_t* b, int64_t buf_size, int64_t p, int64_t end, int64_t count,
                          const uint8_t* body, const int64_t* at, const int64_t* lens, int64_t size,
                          int64_t* found) noexcept nogil:
    """index_bytes' loop: the status; low, high and total into found[0:3]."""
    cdef int64_t last = size - 1
    cdef int64_t low = -1, high = -1, total = 0, status = 0
    cdef int64_t width, value_bytes, left, seen, n, q, fast, i, index
    cdef uint64_t mask
    cdef bint packed
    found[0], found[1], found[2] = low, high, total
    width, mask, value_bytes, p = _bit_width(b, p, end)
    if width > 32 or size == 0:
        return _BAD
    left = count
    seen = 0
    while left > 0:
        packed, n, q, p = _run_header(b, p, end, left, width, value_bytes)
        if p < 0:
            status = _BAD
            break
        fast = _windowed(buf_size, q, n, width) if packed else 0
        for i in range(n if packed else 1):
            if not packed:
                index = _rle_value(b, q, value_bytes)
            elif i < fast:
                index = _packed_at(b, q, i, width, mask)
            else:
                index = _packed_tail(b, buf_size, q, i, width, mask)
            seen = max(seen, index)
            index = min(index, last)
            total += lens[index] * (1 if packed else n)
            if low < 0:
                low = high = index
            elif index != low and index != high:
                if less(body, at[index], lens[index], at[low], lens[low], 0):
                    low = index
                elif less(body, at[high], lens[high], at[index], lens[index], 0):
                    high = index
        if seen > last:
            status = _BAD
            break
        left -= n
    found[0], found[1], found[2] = low, high, total
    return status
