# cython: language_level=3
"""The encoded-page scan's hot loops, compiled: level and dictionary-index streams (RLE/bit-packed
hybrid) and PLAIN byte arrays, reduced to counts, ranks and extrema per page.

Every kernel returns a negative status (BAD) on input it does not accept; the caller then leaves the
chunk to Arrow. The loops run without the GIL, so chunks can be scanned on threads in parallel.
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t, uint8_t
from libc.string cimport memcpy

import numpy as np

from pageindex.scan._bits cimport BAD as _BAD, be_prefix, le_window, less, popcount8, popcount64, uleb

# The stream does not hold what it should: Arrow decides what that means.
BAD = _BAD

# The numbers entries and PLAIN pages hold, by numpy's kind and item size.
ctypedef fused number:
    int32_t
    uint32_t
    int64_t
    uint64_t
    float
    double


cdef inline const uint8_t* _at(const uint8_t[::1] buf) noexcept nogil:
    return &buf[0]  # an empty view's pointer is never read through (every read is bounded by its size)


cdef inline number _load(const char* base, int64_t i, number kind) noexcept nogil:
    """Item i of an array of `number`s at base, which may lie at any address (PLAIN values sit
    after the levels, at any offset of the page): memcpy, which the compiler makes one load."""
    cdef number x
    memcpy(&x, base + i * <int64_t>sizeof(number), sizeof(number))
    return x


# The hybrid stream's reading, shared by the index kernels below; inline, so sharing it costs no
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


# plain_integers' loop in C, so that on x86-64 with glibc it is built twice, for the baseline and for
# AVX2, and the loader picks the one the CPU runs (GCC's target_clones): the baseline (SSE2) has no
# 64-bit compare, so AVX2 reads int64 pages several times faster; the wheel still runs anywhere.
# 64-bit: four running extrema (over the array's quarters), as AVX2's 64-bit compare and blend are
# slow to chain; 32-bit: one, its vector loop unrolled (its min and max take a cycle).
cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #if defined(__x86_64__) && defined(__GNUC__) && defined(__GLIBC__) && !defined(__INTEL_COMPILER)
    #define PAGEINDEX_CLONES __attribute__((target_clones("avx2", "default")))
    #else
    #define PAGEINDEX_CLONES
    #endif
    #define PAGEINDEX_MIN_MAX_4(T, NAME) \
    PAGEINDEX_CLONES static void NAME(const char* p, int64_t n, T* low, T* high) { \
        T lo[4], hi[4], x; \
        int64_t quarter = n / 4, i, k; \
        for (k = 0; k < 4; k++) { \
            memcpy(&lo[k], p + k * quarter * (int64_t)sizeof(T), sizeof(T)); \
            hi[k] = lo[k]; \
        } \
        for (i = 0; i < quarter; i++) { \
            for (k = 0; k < 4; k++) { \
                memcpy(&x, p + (k * quarter + i) * (int64_t)sizeof(T), sizeof(T)); \
                lo[k] = x < lo[k] ? x : lo[k]; \
                hi[k] = x > hi[k] ? x : hi[k]; \
            } \
        } \
        for (i = 4 * quarter; i < n; i++) { \
            memcpy(&x, p + i * (int64_t)sizeof(T), sizeof(T)); \
            lo[0] = x < lo[0] ? x : lo[0]; \
            hi[0] = x > hi[0] ? x : hi[0]; \
        } \
        for (k = 1; k < 4; k++) { \
            lo[0] = lo[k] < lo[0] ? lo[k] : lo[0]; \
            hi[0] = hi[k] > hi[0] ? hi[k] : hi[0]; \
        } \
        *low = lo[0]; \
        *high = hi[0]; \
    }
    #define PAGEINDEX_MIN_MAX_1(T, NAME) \
    PAGEINDEX_CLONES static void NAME(const char* p, int64_t n, T* low, T* high) { \
        T lo, hi, x; \
        memcpy(&lo, p, sizeof(T)); \
        hi = lo; \
        _Pragma("GCC unroll 4") \
        for (int64_t i = 1; i < n; i++) { \
            memcpy(&x, p + i * (int64_t)sizeof(T), sizeof(T)); \
            lo = x < lo ? x : lo; \
            hi = x > hi ? x : hi; \
        } \
        *low = lo; \
        *high = hi; \
    }
    PAGEINDEX_MIN_MAX_1(int32_t, pageindex_min_max_i32)
    PAGEINDEX_MIN_MAX_1(uint32_t, pageindex_min_max_u32)
    PAGEINDEX_MIN_MAX_4(int64_t, pageindex_min_max_i64)
    PAGEINDEX_MIN_MAX_4(uint64_t, pageindex_min_max_u64)
    """
    void pageindex_min_max_i32(const char* p, int64_t n, int32_t* low, int32_t* high) noexcept nogil
    void pageindex_min_max_u32(const char* p, int64_t n, uint32_t* low, uint32_t* high) noexcept nogil
    void pageindex_min_max_i64(const char* p, int64_t n, int64_t* low, int64_t* high) noexcept nogil
    void pageindex_min_max_u64(const char* p, int64_t n, uint64_t* low, uint64_t* high) noexcept nogil


def plain_integers(numbers):
    """The least and greatest of a page's PLAIN integers (at least one; int32, uint32, int64 or
    uint64), in one pass (numpy's min and max are two); floats are left to numpy, whose min and
    max keep NaN."""
    cdef Py_buffer view
    cdef int32_t i32_low = 0, i32_high = 0
    cdef uint32_t u32_low = 0, u32_high = 0
    cdef int64_t i64_low = 0, i64_high = 0
    cdef uint64_t u64_low = 0, u64_high = 0
    dtype = numbers.dtype
    cdef str kind = dtype.kind
    cdef int64_t itemsize = dtype.itemsize
    PyObject_GetBuffer(numbers, &view, PyBUF_SIMPLE)  # as index_values holds its entries
    cdef const char* e = <const char*>view.buf
    cdef int64_t n = view.len // itemsize
    try:
        if n < 1:
            raise ValueError("plain_integers needs at least one number")
        if kind == "i" and itemsize == 8:
            with nogil:
                pageindex_min_max_i64(e, n, &i64_low, &i64_high)
            return i64_low, i64_high
        if kind == "i" and itemsize == 4:
            with nogil:
                pageindex_min_max_i32(e, n, &i32_low, &i32_high)
            return i32_low, i32_high
        if kind == "u" and itemsize == 8:
            with nogil:
                pageindex_min_max_u64(e, n, &u64_low, &u64_high)
            return u64_low, u64_high
        if kind == "u" and itemsize == 4:
            with nogil:
                pageindex_min_max_u32(e, n, &u32_low, &u32_high)
            return u32_low, u32_high
    finally:
        PyBuffer_Release(&view)
    raise TypeError(f"plain_integers reads int32, uint32, int64 or uint64 numbers, not {numbers.dtype}")


cdef inline int64_t _length(const uint8_t* buf, int64_t p) noexcept nogil:
    """The 4-byte little-endian length at p (which the caller knows is there)."""
    return <int64_t>(<uint64_t>buf[p] | (<uint64_t>buf[p + 1] << 8) | (<uint64_t>buf[p + 2] << 16)
                     | (<uint64_t>buf[p + 3] << 24))


def plain_bytes(const uint8_t[::1] buf, int64_t p, int64_t end, int64_t count):
    """Over `count` PLAIN byte arrays (4-byte little-endian length, then the bytes) in
    buf[p:end]: where the least and greatest start and their lengths, and the values' total
    length; the status is BAD when a value runs past `end`."""
    cdef int64_t found[5]
    cdef int64_t status
    with nogil:
        status = _plain_bytes(_at(buf), buf.shape[0], p, end, count, found)
    return found[0], found[1], found[2], found[3], found[4], status


cdef int64_t _plain_bytes(const uint8_t* b, int64_t size, int64_t p, int64_t end, int64_t count,
                          int64_t* found) noexcept nogil:
    """plain_bytes' loop: the status; low, low_len, high, high_len and total into found[0:5]."""
    cdef int64_t low = -1, high = -1, low_len = 0, high_len = 0, total = 0, n, i, status = 0
    cdef uint64_t low_key = 0, high_key = 0, key
    for i in range(count):
        if p + 4 > end:
            status = _BAD
            break
        n = _length(b, p)
        p += 4
        if p + n > end:
            status = _BAD
            break
        total += n
        key = be_prefix(b, size, p, n)
        if low < 0:
            low, low_len, high, high_len, low_key, high_key = p, n, p, n, key, key
        elif key < low_key or (key == low_key and less(b, p, n, low, low_len, 8)):
            low, low_len, low_key = p, n, key
        elif key > high_key or (key == high_key and less(b, high, high_len, p, n, 8)):
            high, high_len, high_key = p, n, key
        p += n
    found[0], found[1], found[2], found[3], found[4] = low, low_len, high, high_len, total
    return status


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


def entry_spans(const uint8_t[::1] buf, int64_t count):
    """Where each of a PLAIN BYTE_ARRAY dictionary page's `count` entries starts, and its
    length; the status is BAD past the data."""
    starts_array = np.zeros(count, np.int64)
    lengths_array = np.zeros(count, np.int64)
    cdef int64_t[::1] starts = starts_array
    cdef int64_t[::1] lengths = lengths_array
    cdef const uint8_t* b = _at(buf)
    cdef int64_t p = 0, end = buf.shape[0], i, n
    cdef int64_t status = 0
    with nogil:
        for i in range(count):
            if p + 4 > end:
                status = _BAD
                break
            n = _length(b, p)
            p += 4
            if p + n > end:
                status = _BAD
                break
            starts[i] = p
            lengths[i] = n
            p += n
    return starts_array, lengths_array, status


cdef void _merge_sort(const uint8_t* buf, const int64_t* starts, const int64_t* lengths, int64_t n,
                      int64_t* order, int64_t* spare, bint* in_spare) noexcept nogil:
    """Sort `order` (n indices) by their spans of buf, stably, bottom-up; in_spare says whether the
    sorted indices ended in `spare`."""
    cdef int64_t width = 1, lo, mid, hi, a, b, q, x, y
    cdef int64_t* swap
    in_spare[0] = False
    while width < n:
        lo = 0
        while lo < n:
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            a, b, q = lo, mid, lo
            while a < mid and b < hi:
                x, y = order[a], order[b]
                if less(buf, starts[y], lengths[y], starts[x], lengths[x], 0):
                    spare[q] = y
                    b += 1
                else:
                    spare[q] = x
                    a += 1
                q += 1
            while a < mid:
                spare[q] = order[a]
                a += 1
                q += 1
            while b < hi:
                spare[q] = order[b]
                b += 1
                q += 1
            lo += 2 * width
        swap = order
        order = spare
        spare = swap
        in_spare[0] = not in_spare[0]
        width *= 2


def ranked_entries(const uint8_t[::1] buf, const int64_t[::1] starts, const int64_t[::1] lengths):
    """The order of a byte-array dictionary's entries (spans of `buf`), unsigned byte-wise, a
    prefix first, equal entries in their order: a stable bottom-up merge sort of their indices."""
    cdef int64_t n = starts.shape[0]
    order_array = np.arange(n, dtype=np.int64)
    spare_array = np.empty(n, np.int64)
    if n < 2:
        return order_array
    cdef int64_t[::1] order = order_array
    cdef int64_t[::1] spare = spare_array
    cdef bint in_spare
    with nogil:
        _merge_sort(_at(buf), &starts[0], &lengths[0], n, &order[0], &spare[0], &in_spare)
    return spare_array if in_spare else order_array
