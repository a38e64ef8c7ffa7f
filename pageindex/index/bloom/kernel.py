"""The bloom filter's hot loops compiled with numba: XXH64, the SBBF insert, the set-bit counts.

Same names as pageindex.index.bloom.hashing; imported by pageindex.index.bloom.path on the first filter.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from pageindex.index.bloom.hashing import P1, P2, P3, P4, P5

# Numba freezes module globals (these and the XXH64 primes) into the compiled code as constants;
# unsigned ones keep every step in uint64 (a signed operand would promote the arithmetic to float64).
SEED1 = np.uint64((int(P1) + int(P2)) % (1 << 64))
SEED4 = np.uint64(-int(P1) % (1 << 64))
ZERO = np.uint64(0)
U32_27 = np.uint32(27)
# Popcount by halves (SWAR), which LLVM turns into the popcnt instruction.
M1, M2, M4, H01 = np.uint32(0x55555555), np.uint32(0x33333333), np.uint32(0x0F0F0F0F), np.uint32(0x01010101)
U64_32 = np.uint64(32)
U64_MASK32 = np.uint64(0xFFFFFFFF)

# cache: compiled machine code is kept in __pycache__ beside this file, or in the user's cache
# directory when that is read-only (NUMBA_CACHE_DIR overrides both), so a process after the first
# loads it instead of compiling. nogil: thread pools that build filters run them in parallel.
_JIT = {"cache": True, "nogil": True}


@njit(inline="always", **_JIT)
def _rotl(x, r):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit(inline="always", **_JIT)
def _round(acc, lane):
    return _rotl(acc + lane * P2, 31) * P1


@njit(inline="always", **_JIT)
def _lane8(h, lane):
    return _rotl(h ^ _round(ZERO, lane), 27) * P1 + P4


@njit(inline="always", **_JIT)
def _lane4(h, word):
    return _rotl(h ^ (np.uint64(word) * P1), 23) * P2 + P3


@njit(inline="always", **_JIT)
def _avalanche(h):
    h ^= h >> np.uint64(33)
    h *= P2
    h ^= h >> np.uint64(29)
    h *= P3
    return h ^ (h >> np.uint64(32))


@njit(inline="always", **_JIT)
def _read(data, pos, width):
    """The little-endian word of `width` bytes at any byte position (LLVM merges the loads)."""
    out = ZERO
    for i in range(width):
        out |= np.uint64(data[pos + i]) << np.uint64(8 * i)
    return out


# Inlined into each caller's loop: a call per value cost as much as hashing a short string.
@njit(inline="always", **_JIT)
def _xxh64_bytes(data, start, length):
    """XXH64 (seed 0) of data[start : start + length]."""
    pos = start
    end = start + length
    if length >= 32:
        v1, v2, v3, v4 = SEED1, P2, ZERO, SEED4
        while pos + 32 <= end:
            v1 = _round(v1, _read(data, pos, 8))
            v2 = _round(v2, _read(data, pos + 8, 8))
            v3 = _round(v3, _read(data, pos + 16, 8))
            v4 = _round(v4, _read(data, pos + 24, 8))
            pos += 32
        h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
        for v in (v1, v2, v3, v4):
            h = (h ^ _round(ZERO, v)) * P1 + P4
    else:
        h = P5
    h += np.uint64(length)
    while pos + 8 <= end:
        h = _lane8(h, _read(data, pos, 8))
        pos += 8
    if pos + 4 <= end:
        h = _lane4(h, _read(data, pos, 4))
        pos += 4
    while pos < end:
        h = _rotl(h ^ (np.uint64(data[pos]) * P5), 11) * P1
        pos += 1
    return _avalanche(h)


def xxh64_u32(words: np.ndarray) -> np.ndarray:
    """XXH64 of each 4-byte little-endian value (INT32 and FLOAT bit patterns)."""
    return _xxh64_words(np.asarray(words).view(np.uint32))


def xxh64_u64(words: np.ndarray) -> np.ndarray:
    """XXH64 of each 8-byte little-endian value (INT64 and DOUBLE bit patterns)."""
    return _xxh64_words(np.asarray(words).view(np.uint64))


@njit(**_JIT)
def _xxh64_words(words):
    """XXH64 of each word, of the words' width (compiled once per width, the branch folded away)."""
    out = np.empty(len(words), dtype=np.uint64)
    seed = P5 + np.uint64(words.itemsize)
    for i in range(len(words)):
        out[i] = _avalanche(_lane4(seed, words[i]) if words.itemsize == 4 else _lane8(seed, words[i]))
    return out


@njit(**_JIT)
def xxh64_fixed(data, width):
    """XXH64 of each `width`-byte value of a contiguous byte buffer (FIXED_LEN_BYTE_ARRAY)."""
    count = len(data) // width if width else 0
    out = np.empty(count, dtype=np.uint64)
    for i in range(count):
        out[i] = _xxh64_bytes(data, i * width, width)
    return out


@njit(**_JIT)
def xxh64_offsets(data, offsets):
    """XXH64 of each value data[offsets[i] : offsets[i + 1]] (Arrow's offsets and data buffers)."""
    out = np.empty(len(offsets) - 1, dtype=np.uint64)
    for i in range(len(out)):
        out[i] = _xxh64_bytes(data, offsets[i], offsets[i + 1] - offsets[i])
    return out


# Hashes whose bit masks are computed together: the mask loop runs over a batch's keys, one salt at
# a time, which LLVM vectorizes (32-bit multiply and shift across lanes); fixed scratch, 16 KiB.
BATCH = 512


@njit(**_JIT)
def insert(hashes, nblocks, salt):
    """The bitset (eight uint32 words a block) holding `hashes`: the top 32 bits pick the block,
    ((h >> 32) * nblocks) >> 32, and the low 32 bits times each word's salt (sbbf.SALT) its bit,
    (key * salt) mod 2^32 >> 27. Built as little-endian uint64 pairs of words (half the
    read-modify-writes into the block), viewed as uint32 at the end."""
    pairs = np.zeros(nblocks * 4, dtype=np.uint64)
    n = np.uint64(nblocks)
    keys = np.empty(BATCH, dtype=np.uint32)
    masks = np.empty((4, BATCH), dtype=np.uint64)
    for start in range(0, len(hashes), BATCH):
        count = min(BATCH, len(hashes) - start)
        for j in range(count):
            keys[j] = np.uint32(hashes[start + j] & U64_MASK32)
        for i in range(4):
            low, high = salt[2 * i], salt[2 * i + 1]
            for j in range(count):
                # np.uint32(...) keeps the product's low 32 bits, as the spec's uint32 multiply.
                masks[i, j] = (np.uint64(np.uint32(1) << (np.uint32(keys[j] * low) >> U32_27))
                               | (np.uint64(np.uint32(1) << (np.uint32(keys[j] * high) >> U32_27)) << U64_32))
        for j in range(count):
            base = 4 * np.int64(((hashes[start + j] >> U64_32) * n) >> U64_32)
            for i in range(4):
                pairs[base + i] |= masks[i, j]
    return pairs.view(np.uint32)


@njit(**_JIT)
def set_bit_counts(words):
    """How many of the uint32 words have each number of bits set, 0 to 32."""
    counts = np.zeros(33, dtype=np.int64)
    for w in words:
        x = np.uint32(w - ((w >> np.uint32(1)) & M1))
        x = np.uint32((x & M2) + ((x >> np.uint32(2)) & M2))
        x = np.uint32((x + (x >> np.uint32(4))) & M4)
        counts[np.uint32(x * H01) >> np.uint32(24)] += 1
    return counts


def warm() -> None:
    """Compile (or load from numba's cache) every kernel with the argument types the callers
    pass, on empty inputs. Run once when the module is taken into use, so that a cache numba
    cannot write shows as an OSError there, not in the middle of a file."""
    salt = np.zeros(8, dtype=np.uint32)
    xxh64_u32(np.zeros(0, dtype=np.uint32))
    xxh64_u64(np.zeros(0, dtype=np.uint64))
    xxh64_fixed(np.zeros(0, dtype=np.uint8), 4)
    for offsets in (np.int32, np.int64):  # binary and large_binary arrays
        xxh64_offsets(np.zeros(0, dtype=np.uint8), np.zeros(1, dtype=offsets))
    set_bit_counts(insert(np.zeros(0, dtype=np.uint64), 1, salt))
