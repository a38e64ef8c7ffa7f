# cython: language_level=3
"""DELTA_* and BYTE_STREAM_SPLIT streams read by compiled kernels: DELTA_BINARY_PACKED integers, the
extrema of DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY values, BYTE_STREAM_SPLIT values put back.

Called by pageindex.scan.delta_values. Each kernel reads only what the format allows as Arrow's
reader does and returns BAD on anything else; the chunk then goes to Arrow.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

import numpy as np

from pageindex.scan._bits cimport BAD, be_prefix, le_window

# BYTE_STREAM_SPLIT's 8-byte values put back 16 at a time by SSE2's byte, 16- and 32-bit
# interleaves (a transposition of 8 x 16 bytes), which every x86-64 has: 4-5x faster than a
# loop of shifts, which the C compiler vectorizes poorly; elsewhere that loop.
cdef extern from *:
    """
    #include <stdint.h>
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #endif
    static void pageindex_streams_u64(const uint8_t* b, int64_t n, uint64_t* out) {
        int64_t i = 0;
    #if defined(__SSE2__)
        for (; i + 16 <= n; i += 16) {
            const uint8_t* at = b + i;
            __m128i s0 = _mm_loadu_si128((const __m128i*)at), s1 = _mm_loadu_si128((const __m128i*)(at + n));
            __m128i s2 = _mm_loadu_si128((const __m128i*)(at + 2 * n)), s3 = _mm_loadu_si128((const __m128i*)(at + 3 * n));
            __m128i s4 = _mm_loadu_si128((const __m128i*)(at + 4 * n)), s5 = _mm_loadu_si128((const __m128i*)(at + 5 * n));
            __m128i s6 = _mm_loadu_si128((const __m128i*)(at + 6 * n)), s7 = _mm_loadu_si128((const __m128i*)(at + 7 * n));
            /* bytes 0-1, 2-3, 4-5, 6-7 of values 0-7 (low) and 8-15 (high) */
            __m128i a01l = _mm_unpacklo_epi8(s0, s1), a01h = _mm_unpackhi_epi8(s0, s1);
            __m128i a23l = _mm_unpacklo_epi8(s2, s3), a23h = _mm_unpackhi_epi8(s2, s3);
            __m128i a45l = _mm_unpacklo_epi8(s4, s5), a45h = _mm_unpackhi_epi8(s4, s5);
            __m128i a67l = _mm_unpacklo_epi8(s6, s7), a67h = _mm_unpackhi_epi8(s6, s7);
            /* bytes 0-3 and 4-7 of values 0-3, 4-7, 8-11, 12-15 */
            __m128i b0 = _mm_unpacklo_epi16(a01l, a23l), b1 = _mm_unpackhi_epi16(a01l, a23l);
            __m128i b2 = _mm_unpacklo_epi16(a01h, a23h), b3 = _mm_unpackhi_epi16(a01h, a23h);
            __m128i c0 = _mm_unpacklo_epi16(a45l, a67l), c1 = _mm_unpackhi_epi16(a45l, a67l);
            __m128i c2 = _mm_unpacklo_epi16(a45h, a67h), c3 = _mm_unpackhi_epi16(a45h, a67h);
            /* whole values, two a vector */
            __m128i* o = (__m128i*)(out + i);
            _mm_storeu_si128(o, _mm_unpacklo_epi32(b0, c0));
            _mm_storeu_si128(o + 1, _mm_unpackhi_epi32(b0, c0));
            _mm_storeu_si128(o + 2, _mm_unpacklo_epi32(b1, c1));
            _mm_storeu_si128(o + 3, _mm_unpackhi_epi32(b1, c1));
            _mm_storeu_si128(o + 4, _mm_unpacklo_epi32(b2, c2));
            _mm_storeu_si128(o + 5, _mm_unpackhi_epi32(b2, c2));
            _mm_storeu_si128(o + 6, _mm_unpacklo_epi32(b3, c3));
            _mm_storeu_si128(o + 7, _mm_unpackhi_epi32(b3, c3));
        }
    #endif
        for (; i < n; i++) {
            uint64_t word = 0;
            for (int k = 0; k < 8; k++)
                word |= (uint64_t)b[k * n + i] << (8 * k);
            out[i] = word;
        }
    }
    """
    void _streams_u64 "pageindex_streams_u64" (const uint8_t* b, int64_t n, uint64_t* out) noexcept nogil

# The integers a DELTA_BINARY_PACKED stream is decoded into, and BYTE_STREAM_SPLIT's words.
ctypedef fused word_t:
    uint32_t
    uint64_t

# Where _delta's values go: into an array of words, or nowhere but the least and greatest key
# (delta_extrema). Chosen at compile time, so neither loop pays for the other's work.
ctypedef struct Extrema:
    uint64_t unused
ctypedef fused sink_t:
    uint32_t
    uint64_t
    Extrema

cdef uint64_t ALL = 0xFFFFFFFFFFFFFFFFULL


cdef inline (uint64_t, int64_t) _varint(const uint8_t* buf, int64_t p, int64_t end, int64_t bits) noexcept nogil:
    """The ULEB128 varint at p holding at most `bits` bits (32 or 64), and the position after
    it; the position is BAD when cut off or wider (Arrow reads these into a `bits`-bit integer)."""
    cdef uint64_t value = 0, b
    cdef int64_t shift = 0
    while p < end and shift < bits:
        b = buf[p]
        p += 1
        if bits - shift < 7 and (b & 0x7F) >> (bits - shift):
            return 0, BAD  # more bits than the integer has
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, p
        shift += 7
    return 0, BAD


cdef inline uint64_t _zigzag(uint64_t v) noexcept nogil:
    """A zigzag varint's value as 64 bits (two's complement; 32-bit ones stay right mod 2**32)."""
    return (v >> 1) ^ (<uint64_t>0 - (v & 1))


cdef inline uint64_t _slow_bits(const uint8_t* buf, int64_t size, int64_t at, int64_t shift, int64_t width,
                                uint64_t mask) noexcept nogil:
    """The `width`-bit field at byte `at`, bit `shift`, read byte by byte (near the buffer's end,
    which holds `size` bytes)."""
    cdef uint64_t low = 0
    cdef int64_t k
    for k in range(min(8, size - at)):
        low |= <uint64_t>buf[at + k] << (8 * k)
    low >>= shift
    if shift + width > 64 and at + 8 < size:  # shift >= 1 here, as width <= 64
        low |= <uint64_t>buf[at + 8] << (64 - shift)
    return low & mask


def delta_binary(const uint8_t[::1] buf, int64_t p, int64_t end, word_t[::1] out, int64_t bits):
    """Decode the DELTA_BINARY_PACKED stream at buf[p:end] into `out` (uint32 or uint64: values
    wrap as the format says), whose length its header must state; the position after its last
    miniblock holding values, or BAD (a bad header, a bit width above `bits`, a cut-off stream)."""
    cdef int64_t at
    cdef uint64_t low, high
    with nogil:
        at, low, high = _delta(&buf[0], buf.shape[0], p, end, out.shape[0], &out[0], bits, 0)
    return at


def delta_extrema(const uint8_t[::1] buf, int64_t p, int64_t end, int64_t count, int64_t bits, uint64_t flip):
    """delta_binary's reading of `count` values, kept as none but the least and greatest key
    (a value's low `bits` bits XOR `flip`: the sign bit for signed types, so keys order as the
    values do): the position after the stream (or BAD) and the two keys."""
    cdef int64_t at
    cdef uint64_t low, high
    with nogil:
        at, low, high = _delta[Extrema](&buf[0], buf.shape[0], p, end, count, NULL, bits, flip)
    return at, low, high


cdef inline (int64_t, uint64_t, uint64_t) _delta(const uint8_t* buf, int64_t size, int64_t p, int64_t end,
                                                 int64_t n, sink_t* out, int64_t bits, uint64_t flip) noexcept nogil:
    """The DELTA_BINARY_PACKED reading itself (buf holds `size` bytes): the end position, and the
    least and greatest key for Extrema (where `out` is NULL), else the values into `out`."""
    cdef uint64_t keep = 0xFFFFFFFF if bits == 32 else ALL
    cdef uint64_t low = ALL, high = 0
    cdef uint64_t block, minis_u, total, first, raw, value, min_delta, mask, field, key, bit
    cdef int64_t per_mini, minis, i, m, j, widths, width, nbytes, take
    cdef bint windowed
    block, p = _varint(buf, p, end, 32)
    if p < 0:
        return BAD, low, high
    minis_u, p = _varint(buf, p, end, 32)
    if p < 0:
        return BAD, low, high
    total, p = _varint(buf, p, end, 32)
    if p < 0:
        return BAD, low, high
    first, p = _varint(buf, p, end, bits)
    # total < 2**32 and n >= 0: compared as numbers, as numba does
    if p < 0 or <int64_t>total != n or n == 0:
        return BAD, low, high
    if block == 0 or block % 128 != 0 or minis_u == 0 or block % minis_u != 0 or (block // minis_u) % 32 != 0:
        return BAD, low, high
    per_mini = <int64_t>(block // minis_u)
    minis = <int64_t>minis_u
    value = _zigzag(first)
    low = high = (value & keep) ^ flip
    if sink_t is not Extrema:
        out[0] = <sink_t>value
    i = 1
    while i < n:
        raw, p = _varint(buf, p, end, bits)
        if p < 0 or p + minis > end:
            return BAD, low, high
        min_delta = _zigzag(raw)
        widths = p
        p += minis
        for m in range(minis):
            if i >= n:
                break  # the last block's unused miniblocks have no bytes, and any width (as Arrow reads)
            width = buf[widths + m]
            if width > bits:
                return BAD, low, high
            nbytes = per_mini * width // 8
            if p + nbytes > end:
                return BAD, low, high
            take = min(per_mini, n - i)
            mask = ALL if width == 64 else (<uint64_t>1 << width) - 1
            # every field in one 8-byte window that lies in buf: no state between values
            windowed = p + nbytes + 8 <= size and width <= 56
            if width == 0:
                for j in range(take):
                    value += min_delta
                    if sink_t is Extrema:
                        key = (value & keep) ^ flip
                        low = min(low, key)
                        high = max(high, key)
                    else:
                        out[i + j] = <sink_t>value
            elif windowed:
                for j in range(take):
                    bit = <uint64_t>(j * width)
                    field = (le_window(buf, p + <int64_t>(bit >> 3)) >> (bit & 7)) & mask
                    value += min_delta + field
                    if sink_t is Extrema:
                        key = (value & keep) ^ flip
                        low = min(low, key)
                        high = max(high, key)
                    else:
                        out[i + j] = <sink_t>value
            else:
                for j in range(take):
                    bit = <uint64_t>(j * width)
                    field = _slow_bits(buf, size, p + <int64_t>(bit >> 3), <int64_t>(bit & 7), width, mask)
                    value += min_delta + field
                    if sink_t is Extrema:
                        key = (value & keep) ^ flip
                        low = min(low, key)
                        high = max(high, key)
                    else:
                        out[i + j] = <sink_t>value
            i += take
            p += nbytes
    return p, low, high


cdef inline uint64_t _swapped(uint64_t x) noexcept nogil:
    """A little-endian word read as big-endian: words then order as their bytes do (the C
    compiler makes it one byte-swap instruction)."""
    x = ((x & 0x00FF00FF00FF00FFULL) << 8) | ((x >> 8) & 0x00FF00FF00FF00FFULL)
    x = ((x & 0x0000FFFF0000FFFFULL) << 16) | ((x >> 16) & 0x0000FFFF0000FFFFULL)
    return (x << 32) | (x >> 32)


cdef inline bint _before(const uint8_t* x, int64_t x_len, const uint8_t* y, int64_t y_len,
                         int64_t start) noexcept nogil:
    """x[:x_len] < y[:y_len] (unsigned byte-wise, a prefix first), their first `start` bytes known
    equal: equal 8-byte words skipped a load each, the first unequal one ordered as big-endian
    (URLs share long prefixes: byte steps cost 6x on them), the rest byte by byte."""
    cdef int64_t k = start, i
    cdef int64_t common = min(x_len, y_len)
    cdef uint64_t a, b
    while k + 8 <= common:
        a = le_window(x, k)
        b = le_window(y, k)
        if a != b:
            return _swapped(a) < _swapped(b)
        k += 8
    for i in range(k, common):
        if x[i] != y[i]:
            return x[i] < y[i]
    return x_len < y_len


def span_bounds(const uint8_t[::1] buf, int64_t p, int64_t end, const int32_t[::1] lengths):
    """Values laid end to end from buf[p] on, lengths[i] bytes each (DELTA_LENGTH_BYTE_ARRAY's
    data): where the least and greatest start, their lengths, the total length, and the status
    (BAD for a negative length or values running past `end`)."""
    cdef int64_t low = -1, high = -1, low_len = 0, high_len = 0, total = 0, status = 0
    cdef int64_t i, n, size = buf.shape[0]
    cdef uint64_t key, low_key = 0, high_key = 0
    cdef const uint8_t* b = &buf[0]
    with nogil:
        for i in range(lengths.shape[0]):
            n = lengths[i]
            if n < 0 or p + n > end:
                status = BAD
                break
            total += n
            key = be_prefix(b, size, p, n)
            # as kernels.plain_bytes: an 8-byte big-endian key first, the bytes only on a tie; the
            # greatest first, as these encodings mostly hold sorted values (a new greatest is no least)
            if low < 0:
                low, low_len, high, high_len, low_key, high_key = p, n, p, n, key, key
            elif key > high_key or (key == high_key and _before(b + high, high_len, b + p, n, 8)):
                high, high_len, high_key = p, n, key
            elif key < low_key or (key == low_key and _before(b + p, n, b + low, low_len, 8)):
                low, low_len, low_key = p, n, key
            p += n
    return low, low_len, high, high_len, total, status


def front_coded(const uint8_t[::1] buf, int64_t p, int64_t end, const int32_t[::1] prefixes,
                const int32_t[::1] suffixes, int64_t longest):
    """DELTA_BYTE_ARRAY's least and greatest value, their total length and the status: value i
    is value i - 1's first prefixes[i] bytes, then suffixes[i] bytes from buf[p:end] on (BAD for
    a negative length, a prefix longer than the value before, suffixes past `end`, a value over
    `longest`). One value at a time, in place over the one before: only suffixes are copied."""
    value_array = np.zeros(longest + 8, np.uint8)
    least_array = np.zeros(longest + 8, np.uint8)
    most_array = np.zeros(longest + 8, np.uint8)
    cdef uint8_t[::1] value_view = value_array, least_view = least_array, most_view = most_array
    cdef uint8_t* value = &value_view[0]
    cdef uint8_t* least = &least_view[0]
    cdef uint8_t* most = &most_view[0]
    cdef const uint8_t* b = &buf[0]
    cdef int64_t last_len = 0, low_len = 0, high_len = 0, total = 0, status = 0
    cdef int64_t i, keep, n, length, high_from, low_from
    cdef bint low_last = False, high_last = False  # the least or greatest is the value before
    with nogil:
        for i in range(prefixes.shape[0]):
            keep = prefixes[i]
            n = suffixes[i]
            length = keep + n
            if keep < 0 or n < 0 or keep > last_len or p + n > end or length > longest:
                status = BAD
                break
            memcpy(value + keep, b + p, n)
            p += n
            total += length
            # The value before's first `keep` bytes are this one's: where it is the least or the
            # greatest, compared and copied from there on.
            high_from = keep if high_last else 0
            low_from = keep if low_last else 0
            if i == 0:
                memcpy(most, value, length)
                memcpy(least, value, length)
                high_len, low_len, high_last, low_last = length, length, True, True
            elif _before(most, high_len, value, length, high_from):
                memcpy(most + high_from, value + high_from, length - high_from)
                high_len, high_last, low_last = length, True, False
            elif _before(value, length, least, low_len, low_from):
                memcpy(least + low_from, value + low_from, length - low_from)
                low_len, low_last, high_last = length, True, False
            else:
                low_last = high_last = False
            last_len = length
    if status < 0:
        return least_array[:0], most_array[:0], total, BAD
    return least_array[:low_len], most_array[:high_len], total, 0


def byte_streams(const uint8_t[::1] buf, word_t[::1] out):
    """BYTE_STREAM_SPLIT's streams (stream k: byte k of every value; buf exactly their size) put
    back together into `out` (uint32 or uint64, one a value): each value's bytes gathered from the
    streams in one pass over them all (16 values a step), reading contiguous bytes."""
    cdef int64_t n = out.shape[0], k, i, streams
    cdef const uint8_t* b = &buf[0]
    cdef word_t* words = &out[0]
    cdef word_t word
    with nogil:
        streams = buf.shape[0] // n if n else 0
        if streams == 8 and word_t is uint64_t:
            _streams_u64(b, n, <uint64_t*>words)
        elif streams == sizeof(word_t):
            for i in range(n):
                word = 0
                for k in range(<int64_t>sizeof(word_t)):
                    word |= <word_t>b[k * n + i] << (8 * k)
                words[i] = word
        else:
            # Another size (the caller refuses such pages): the streams there are, a pass each; a
            # stream past the word's bytes would only shift its bytes out of the word.
            memset(words, 0, n * sizeof(word_t))
            for k in range(min(streams, <int64_t>sizeof(word_t))):
                for i in range(n):
                    words[i] |= <word_t>b[k * n + i] << (8 * k)
