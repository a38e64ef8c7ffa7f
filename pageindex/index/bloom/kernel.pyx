# cython: language_level=3
"""The bloom filter's hot loops, compiled: XXH64, the SBBF insert, the set-bit counts.

Same names as pageindex.index.bloom.hashing; imported by pageindex.index.bloom.path on the first filter.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

import numpy as np

# XXH64's primes (pageindex.index.bloom.hashing's P1..P5) and steps as C, so the primes are immediate
# operands. Three loops are C too, compiled twice where GCC and glibc allow (target_clones, one
# picked by the CPU when the module loads): the wheel is built for any x86-64 (SSE2 only), and
# these loops run 1.3-2.5x faster with AVX2's lane-wise 32/64-bit multiplies and shifts or with
# the popcnt instruction. Elsewhere (other compilers, musl, aarch64) they are built once, as is.
cdef extern from *:
    """
    #include <stdint.h>
    #if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__GLIBC__)
    #define PAGEINDEX_CLONES(...) __attribute__((target_clones(__VA_ARGS__)))
    #else
    #define PAGEINDEX_CLONES(...)
    #endif
    #define PAGEINDEX_P1 0x9E3779B185EBCA87ULL
    #define PAGEINDEX_P2 0xC2B2AE3D27D4EB4FULL
    #define PAGEINDEX_P3 0x165667B19E3779F9ULL
    #define PAGEINDEX_P4 0x85EBCA77C2B2AE63ULL
    #define PAGEINDEX_P5 0x27D4EB2F165667C5ULL
    #define PAGEINDEX_SEED1 (PAGEINDEX_P1 + PAGEINDEX_P2)
    #define PAGEINDEX_SEED4 (0ULL - PAGEINDEX_P1)
    #define PAGEINDEX_BATCH 512

    static inline uint64_t pageindex_rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
    static inline uint64_t pageindex_round(uint64_t acc, uint64_t lane) {
        return pageindex_rotl(acc + lane * PAGEINDEX_P2, 31) * PAGEINDEX_P1;
    }
    static inline uint64_t pageindex_lane8(uint64_t h, uint64_t lane) {
        return pageindex_rotl(h ^ pageindex_round(0, lane), 27) * PAGEINDEX_P1 + PAGEINDEX_P4;
    }
    static inline uint64_t pageindex_lane4(uint64_t h, uint64_t word) {
        return pageindex_rotl(h ^ (word * PAGEINDEX_P1), 23) * PAGEINDEX_P2 + PAGEINDEX_P3;
    }
    static inline uint64_t pageindex_avalanche(uint64_t h) {
        h ^= h >> 33;
        h *= PAGEINDEX_P2;
        h ^= h >> 29;
        h *= PAGEINDEX_P3;
        return h ^ (h >> 32);
    }

    /* XXH64 of each 4-byte word. */
    PAGEINDEX_CLONES("avx2", "default")
    static void pageindex_xxh64_u32(const uint32_t* words, int64_t count, uint64_t* out) {
        for (int64_t i = 0; i < count; i++)
            out[i] = pageindex_avalanche(pageindex_lane4(PAGEINDEX_P5 + 4, words[i]));
    }

    /* The bit masks of `count` hashes (at most a batch): masks[i * BATCH + j] is hash j's pair of
       words i (2i low, 2i + 1 high), one bit each: (key * salt) mod 2^32 >> 27, key the hash's low
       32 bits. Salt by salt over the batch, so the loop runs across lanes. */
    PAGEINDEX_CLONES("avx2", "default")
    static void pageindex_sbbf_masks(const uint64_t* hashes, int64_t count, const uint32_t* salt, uint64_t* masks) {
        uint32_t keys[PAGEINDEX_BATCH];
        for (int64_t j = 0; j < count; j++)
            keys[j] = (uint32_t)hashes[j];
        for (int i = 0; i < 4; i++) {
            uint32_t low = salt[2 * i], high = salt[2 * i + 1];
            for (int64_t j = 0; j < count; j++)
                masks[i * PAGEINDEX_BATCH + j] = (uint64_t)((uint32_t)1 << ((uint32_t)(keys[j] * low) >> 27))
                    | ((uint64_t)((uint32_t)1 << ((uint32_t)(keys[j] * high) >> 27)) << 32);
        }
    }

    /* How many words have each number of bits set (33 counts). The popcount by halves, which
       GCC turns into the popcnt instruction where it has it; four tables, one a word of four in a
       row, as neighbouring words mostly have the same count and one table would make each
       increment wait for the one before. */
    static inline uint32_t pageindex_popcount(uint32_t w) {
        uint32_t x = w - ((w >> 1) & 0x55555555u);
        x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
        x = (x + (x >> 4)) & 0x0F0F0F0Fu;
        return (x * 0x01010101u) >> 24;
    }
    PAGEINDEX_CLONES("popcnt", "default")
    static void pageindex_set_bit_counts(const uint32_t* words, int64_t size, int64_t* counts) {
        int64_t t0[33] = {0}, t1[33] = {0}, t2[33] = {0}, t3[33] = {0};
        int64_t i = 0;
        for (; i + 4 <= size; i += 4) {
            t0[pageindex_popcount(words[i])]++;
            t1[pageindex_popcount(words[i + 1])]++;
            t2[pageindex_popcount(words[i + 2])]++;
            t3[pageindex_popcount(words[i + 3])]++;
        }
        for (; i < size; i++)
            t0[pageindex_popcount(words[i])]++;
        for (int k = 0; k < 33; k++)
            counts[k] = t0[k] + t1[k] + t2[k] + t3[k];
    }
    """
    const uint64_t P1 "PAGEINDEX_P1"
    const uint64_t P2 "PAGEINDEX_P2"
    const uint64_t P4 "PAGEINDEX_P4"
    const uint64_t P5 "PAGEINDEX_P5"
    # XXH64's first and fourth accumulators' seeds for seed 0.
    const uint64_t SEED1 "PAGEINDEX_SEED1"
    const uint64_t SEED4 "PAGEINDEX_SEED4"
    # Hashes whose bit masks are computed together: 16 KiB of masks on the stack.
    enum: BATCH "PAGEINDEX_BATCH"
    uint64_t _rotl "pageindex_rotl" (uint64_t x, int r) noexcept nogil
    uint64_t _round "pageindex_round" (uint64_t acc, uint64_t lane) noexcept nogil
    uint64_t _lane8 "pageindex_lane8" (uint64_t h, uint64_t lane) noexcept nogil
    uint64_t _lane4 "pageindex_lane4" (uint64_t h, uint64_t word) noexcept nogil
    uint64_t _avalanche "pageindex_avalanche" (uint64_t h) noexcept nogil
    void _xxh64_u32 "pageindex_xxh64_u32" (const uint32_t* words, int64_t count, uint64_t* out) noexcept nogil
    void _sbbf_masks "pageindex_sbbf_masks" (const uint64_t* hashes, int64_t count, const uint32_t* salt,
                                             uint64_t* masks) noexcept nogil
    void _set_bit_counts "pageindex_set_bit_counts" (const uint32_t* words, int64_t size,
                                                     int64_t* counts) noexcept nogil

# Arrow's offsets of binary (int32) and large_binary (int64) arrays.
ctypedef fused offset_t:
    int32_t
    int64_t


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
    with nogil:
        _xxh64_u32(&w[0], w.shape[0], &o[0])
    return out


def xxh64_u64(words):
    """XXH64 of each 8-byte little-endian value (INT64 and DOUBLE bit patterns)."""
    cdef const uint64_t[::1] w = np.ascontiguousarray(np.asarray(words).view(np.uint64))
    out = np.empty(w.shape[0], dtype=np.uint64)
    cdef uint64_t[::1] o_view = out
    cdef const uint64_t* words_p = &w[0]
    cdef uint64_t* o = &o_view[0]
    cdef int64_t i
    with nogil:
        for i in range(w.shape[0]):
            o[i] = _avalanche(_lane8(P5 + 8, words_p[i]))
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
    cdef const uint64_t* hs = &h[0]
    cdef uint64_t n = <uint64_t>nblocks
    cdef uint64_t masks[4 * BATCH]
    cdef int64_t start = 0, count, i, j, base, total = h.shape[0]
    with nogil:
        while start < total:
            count = min(<int64_t>BATCH, total - start)
            _sbbf_masks(hs + start, count, &salt[0], masks)
            for j in range(count):
                base = 4 * <int64_t>(((hs[start + j] >> 32) * n) >> 32)
                for i in range(4):
                    pairs[base + i] |= masks[i * BATCH + j]
            start += count
    return pairs_array.view(np.uint32)


def set_bit_counts(words):
    """How many of the uint32 words have each number of bits set, 0 to 32."""
    cdef const uint32_t[::1] w = np.ascontiguousarray(words)
    counts = np.zeros(33, dtype=np.int64)
    cdef int64_t[::1] c = counts
    with nogil:
        _set_bit_counts(&w[0], w.shape[0], &c[0])
    return counts

