# cython: language_level=3
"""The bloom filter's hot loops, compiled: XXH64, the SBBF insert, the set-bit counts.

Same names as pageindex.index.bloom.hashing; imported by pageindex.index.bloom.path on the first filter.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memset

import numpy as np

# XXH64's primes (pageindex.index.bloom.hashing's P1..P5) as C constants, so they are immediate
# operands; SEED1 and SEED4 are the first and fourth accumulators' seeds for seed 0.
cdef extern from *:
    """
    #define PAGEINDEX_P1 0x9E3779B185EBCA87ULL
    #define PAGEINDEX_P2 0xC2B2AE3D27D4EB4FULL
    #define PAGEINDEX_P3 0x165667B19E3779F9ULL
    #define PAGEINDEX_P4 0x85EBCA77C2B2AE63ULL
    #define PAGEINDEX_P5 0x27D4EB2F165667C5ULL
    #define PAGEINDEX_SEED1 (PAGEINDEX_P1 + PAGEINDEX_P2)
    #define PAGEINDEX_SEED4 (0ULL - PAGEINDEX_P1)
    """
    const uint64_t P1 "PAGEINDEX_P1"
    const uint64_t P2 "PAGEINDEX_P2"
    const uint64_t P3 "PAGEINDEX_P3"
    const uint64_t P4 "PAGEINDEX_P4"
    const uint64_t P5 "PAGEINDEX_P5"
    const uint64_t SEED1 "PAGEINDEX_SEED1"
    const uint64_t SEED4 "PAGEINDEX_SEED4"

# Arrow's offsets of binary (int32) and large_binary (int64) arrays.
ctypedef fused offset_t:
    int32_t
    int64_t

# Hashes whose bit masks are computed together: the mask loop runs over a batch's keys, one salt at
# a time, which the C compiler vectorizes (32-bit multiply and shift across lanes); 16 KiB of stack.
cdef enum:
    BATCH = 512
# Set-bit histograms kept apart and summed at the end: words in a row mostly have the same count,
# and one table would make each increment wait for the one before.
cdef enum:
    TABLES = 4


cdef inline uint64_t _rotl(uint64_t x, int r) noexcept nogil:
    return (x << r) | (x >> (64 - r))


cdef inline uint64_t _round(uint64_t acc, uint64_t lane) noexcept nogil:
    return _rotl(acc + lane * P2, 31) * P1


cdef inline uint64_t _lane8(uint64_t h, uint64_t lane) noexcept nogil:
    return _rotl(h ^ _round(0, lane), 27) * P1 + P4


cdef inline uint64_t _lane4(uint64_t h, uint64_t word) noexcept nogil:
    return _rotl(h ^ (word * P1), 23) * P2 + P3


cdef inline uint64_t _avalanche(uint64_t h) noexcept nogil:
    h ^= h >> 33
    h *= P2
    h ^= h >> 29
    h *= P3
    return h ^ (h >> 32)


cdef inline uint64_t _read8(const uint8_t* b) noexcept nogil:
    """The little-endian word of 8 bytes at b, any alignment (byte by byte, which the C compiler
    makes one load)."""
    return (<uint64_t>b[0] | (<uint64_t>b[1] << 8) | (<uint64_t>b[2] << 16) | (<uint64_t>b[3] << 24)
            | (<uint64_t>b[4] << 32) | (<uint64_t>b[5] << 40) | (<uint64_t>b[6] << 48)
            | (<uint64_t>b[7] << 56))


cdef inline uint64_t _read4(const uint8_t* b) noexcept nogil:
    """_read8 of 4 bytes."""
    return <uint64_t>b[0] | (<uint64_t>b[1] << 8) | (<uint64_t>b[2] << 16) | (<uint64_t>b[3] << 24)


# Inlined into each caller's loop: a call per value cost as much as hashing a short string.
cdef inline uint64_t _xxh64_bytes(const uint8_t* data, int64_t start, int64_t length) noexcept nogil:
    """XXH64 (seed 0) of data[start : start + length]."""
    cdef int64_t pos = start, end = start + length
    cdef uint64_t h, v1, v2, v3, v4
    if length >= 32:
        v1, v2, v3, v4 = SEED1, P2, 0, SEED4
        while pos + 32 <= end:
            v1 = _round(v1, _read8(data + pos))
            v2 = _round(v2, _read8(data + pos + 8))
            v3 = _round(v3, _read8(data + pos + 16))
            v4 = _round(v4, _read8(data + pos + 24))
            pos += 32
        h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
        h = (h ^ _round(0, v1)) * P1 + P4
        h = (h ^ _round(0, v2)) * P1 + P4
        h = (h ^ _round(0, v3)) * P1 + P4
        h = (h ^ _round(0, v4)) * P1 + P4
    else:
        h = P5
    h += <uint64_t>length
    while pos + 8 <= end:
        h = _lane8(h, _read8(data + pos))
        pos += 8
    if pos + 4 <= end:
        h = _lane4(h, _read4(data + pos))
        pos += 4
    while pos < end:
        h = _rotl(h ^ (<uint64_t>data[pos] * P5), 11) * P1
        pos += 1
    return _avalanche(h)


def xxh64_u32(words):
    """XXH64 of each 4-byte little-endian value (INT32 and FLOAT bit patterns)."""
    cdef const uint32_t[::1] w = np.ascontiguousarray(np.asarray(words).view(np.uint32))
    out = np.empty(w.shape[0], dtype=np.uint64)
    cdef uint64_t[::1] o = out
    cdef int64_t i
    cdef uint64_t seed = P5 + 4
    with nogil:
        for i in range(w.shape[0]):
            o[i] = _avalanche(_lane4(seed, w[i]))
    return out


def xxh64_u64(words):
    """XXH64 of each 8-byte little-endian value (INT64 and DOUBLE bit patterns)."""
    cdef const uint64_t[::1] w = np.ascontiguousarray(np.asarray(words).view(np.uint64))
    out = np.empty(w.shape[0], dtype=np.uint64)
    cdef uint64_t[::1] o = out
    cdef int64_t i
    cdef uint64_t seed = P5 + 8
    with nogil:
        for i in range(w.shape[0]):
            o[i] = _avalanche(_lane8(seed, w[i]))
    return out


def xxh64_fixed(const uint8_t[::1] data, width):
    """XXH64 of each `width`-byte value of a contiguous byte buffer (FIXED_LEN_BYTE_ARRAY)."""
    count = len(data) // width if width else 0
    out = np.empty(count, dtype=np.uint64)
    cdef uint64_t[::1] o = out
    cdef int64_t i, w = width
    cdef const uint8_t* d = &data[0]
    with nogil:
        for i in range(o.shape[0]):
            o[i] = _xxh64_bytes(d, i * w, w)
    return out


def xxh64_offsets(const uint8_t[::1] data, const offset_t[::1] offsets):
    """XXH64 of each value data[offsets[i] : offsets[i + 1]] (Arrow's offsets and data buffers)."""
    out = np.empty(offsets.shape[0] - 1, dtype=np.uint64)
    cdef uint64_t[::1] o = out
    cdef int64_t i
    cdef const uint8_t* d = &data[0]
    with nogil:
        for i in range(o.shape[0]):
            o[i] = _xxh64_bytes(d, offsets[i], <int64_t>offsets[i + 1] - offsets[i])
    return out


def insert(hashes, int64_t nblocks, const uint32_t[::1] salt):
    """The bitset (eight uint32 words a block) holding `hashes`: the top 32 bits pick the block,
    ((h >> 32) * nblocks) >> 32, and the low 32 bits times each word's salt (sbbf.SALT) its bit,
    (key * salt) mod 2^32 >> 27. Built as little-endian uint64 pairs of words (half the
    read-modify-writes into the block), viewed as uint32 at the end."""
    cdef const uint64_t[::1] h = np.ascontiguousarray(hashes)
    pairs_array = np.zeros(nblocks * 4, dtype=np.uint64)
    cdef uint64_t[::1] pairs_view = pairs_array
    cdef uint64_t* pairs = &pairs_view[0]
    cdef uint64_t n = <uint64_t>nblocks
    cdef uint32_t keys[BATCH]
    cdef uint64_t masks[4][BATCH]
    cdef uint32_t low, high
    cdef int64_t start, count, i, j, base, total = h.shape[0]
    with nogil:
        start = 0
        while start < total:
            count = min(<int64_t>BATCH, total - start)
            for j in range(count):
                keys[j] = <uint32_t>h[start + j]
            for i in range(4):
                low, high = salt[2 * i], salt[2 * i + 1]
                for j in range(count):
                    # uint32 products: the spec's multiply mod 2^32
                    masks[i][j] = ((<uint64_t>1 << (<uint32_t>(keys[j] * low) >> 27))
                                   | ((<uint64_t>1 << (<uint32_t>(keys[j] * high) >> 27)) << 32))
            for j in range(count):
                base = 4 * <int64_t>(((h[start + j] >> 32) * n) >> 32)
                for i in range(4):
                    pairs[base + i] |= masks[i][j]
            start += count
    return pairs_array.view(np.uint32)


def set_bit_counts(words):
    """How many of the uint32 words have each number of bits set, 0 to 32."""
    cdef const uint32_t[::1] w = np.ascontiguousarray(words)
    counts = np.zeros(33, dtype=np.int64)
    cdef int64_t[::1] c = counts
    cdef int64_t tables[TABLES][33]
    cdef int64_t i, t, k, size = w.shape[0], pairs = w.shape[0] // 2
    cdef uint64_t x
    with nogil:
        memset(tables, 0, sizeof(tables))
        # Two words at a time, SWAR popcount of bytes in 64 bits (the portable build has no popcnt
        # instruction); then each half's byte counts summed by one multiply, into bytes 3 and 7.
        for i in range(pairs):
            x = <uint64_t>w[2 * i] | (<uint64_t>w[2 * i + 1] << 32)
            x = x - ((x >> 1) & 0x5555555555555555ULL)
            x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL)
            x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL
            x = x * 0x01010101
            tables[(2 * i) % TABLES][(x >> 24) & 0xFF] += 1
            tables[(2 * i + 1) % TABLES][x >> 56] += 1
        if size % 2:
            x = w[size - 1]
            x = x - ((x >> 1) & 0x55555555)
            x = (x & 0x33333333) + ((x >> 2) & 0x33333333)
            x = (x + (x >> 4)) & 0x0F0F0F0F
            tables[0][((x * 0x01010101) >> 24) & 0xFF] += 1
        for k in range(33):
            for t in range(TABLES):
                c[k] += tables[t][k]
    return counts
