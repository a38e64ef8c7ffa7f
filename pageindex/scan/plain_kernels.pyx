# cython: language_level=3
"""The encoded-page scan's compiled reads of PLAIN values: a page's least and greatest integers or
byte arrays, and a byte-array dictionary page's entries and their order.

Every kernel returns a negative status (BAD) on input it does not accept; the caller then leaves the
chunk to Arrow. The loops run without the GIL, so chunks can be scanned on threads in parallel.
"""
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t, uint8_t

import numpy as np

from pageindex.scan._bits cimport BAD as _BAD, base as _at, be_prefix, less

# The stream does not hold what it should: Arrow decides what that means.
BAD = _BAD

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
    # The bytes as they lie (any alignment), held while the loop reads them without the GIL.
    PyObject_GetBuffer(numbers, &view, PyBUF_SIMPLE)
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
