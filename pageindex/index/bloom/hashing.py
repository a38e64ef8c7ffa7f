"""XXH64 with seed 0, vectorized in numpy over many values at once.

Fixed-width values hash as whole words; variable-length ones run in lockstep with masks.
"""
from __future__ import annotations

import numpy as np

P1 = np.uint64(0x9E3779B185EBCA87)
P2 = np.uint64(0xC2B2AE3D27D4EB4F)
P3 = np.uint64(0x165667B19E3779F9)
P4 = np.uint64(0x85EBCA77C2B2AE63)
P5 = np.uint64(0x27D4EB2F165667C5)
STRIPE = 32
# The four accumulators' seeds for seed 0, wrapped to 64 bits in Python (numpy scalars warn).
_SEEDS = tuple(np.uint64(v % (1 << 64)) for v in (int(P1) + int(P2), int(P2), 0, -int(P1)))
_U64 = np.dtype("<u8")
_U32 = np.dtype("<u4")


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    """x rotated left by r bits, in place (x must be a fresh array)."""
    high = x >> np.uint64(64 - r)
    x <<= np.uint64(r)
    x |= high
    return x


def _round(acc: np.ndarray, lane: np.ndarray) -> np.ndarray:
    """XXH64's round, into a new array."""
    x = lane * P2
    x += acc
    _rotl(x, 31)
    x *= P1
    return x


def _lane8(h: np.ndarray, lane: np.ndarray) -> np.ndarray:
    """Mix one 8-byte word into h, in place."""
    x = lane * P2
    _rotl(x, 31)
    x *= P1
    h ^= x
    _rotl(h, 27)
    h *= P1
    h += P4
    return h


def _lane4(h: np.ndarray, word: np.ndarray) -> np.ndarray:
    """Mix one 4-byte word into h, in place."""
    x = word.astype(np.uint64)
    x *= P1
    h ^= x
    _rotl(h, 23)
    h *= P2
    h += P3
    return h


def _byte(h: np.ndarray, byte: np.ndarray) -> np.ndarray:
    """Mix one byte into h, in place."""
    x = byte.astype(np.uint64)
    x *= P5
    h ^= x
    _rotl(h, 11)
    h *= P1
    return h


def _avalanche(h: np.ndarray) -> np.ndarray:
    """XXH64's final mix, in place."""
    h ^= h >> np.uint64(33)
    h *= P2
    h ^= h >> np.uint64(29)
    h *= P3
    h ^= h >> np.uint64(32)
    return h


def xxh64_u32(words: np.ndarray) -> np.ndarray:
    """XXH64 of each 4-byte little-endian value (INT32 and FLOAT bit patterns)."""
    words = np.asarray(words).view(_U32)
    return _avalanche(_lane4(np.full(len(words), P5 + np.uint64(4)), words))


def xxh64_u64(words: np.ndarray) -> np.ndarray:
    """XXH64 of each 8-byte little-endian value (INT64 and DOUBLE bit patterns)."""
    words = np.asarray(words).view(_U64)
    return _avalanche(_lane8(np.full(len(words), P5 + np.uint64(8)), words))


def xxh64_fixed(data: np.ndarray, width: int) -> np.ndarray:
    """XXH64 of each `width`-byte value of a contiguous byte buffer (FIXED_LEN_BYTE_ARRAY)."""
    count = len(data) // width if width else 0
    starts = np.arange(count, dtype=np.int64) * width
    return xxh64_binary(data, starts, np.full(count, width, dtype=np.int64))


def xxh64_binary(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """XXH64 of the values data[starts[i] : starts[i] + lengths[i]] (BYTE_ARRAY without length
    prefixes). Every value takes the same steps in lockstep; masks pick the values a step applies
    to, and words are read unaligned in place, so the data is never copied."""
    data = np.ascontiguousarray(data, dtype=np.uint8)
    if len(data) < 8:
        data = np.concatenate([data, np.zeros(8 - len(data), np.uint8)])
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    # Views whose element i is the word starting at byte i (stride 1: unaligned loads).
    u64 = np.ndarray((len(data) - 7,), _U64, buffer=data, strides=(1,))
    u32 = np.ndarray((len(data) - 3,), _U32, buffer=data, strides=(1,))
    h = np.full(len(starts), P5, dtype=np.uint64)
    long = np.flatnonzero(lengths >= STRIPE)
    if len(long):
        h[long] = _stripes(u64, starts[long], lengths[long] // STRIPE)
    h += lengths.astype(np.uint64)
    tail = lengths % STRIPE
    pos = starts + lengths - tail
    for lane in range(3):
        rows = np.flatnonzero(tail >= 8 * (lane + 1))
        h[rows] = _lane8(h[rows], u64[pos[rows] + 8 * lane])
    rest = tail % 8
    pos = pos + tail - rest
    rows = np.flatnonzero(rest >= 4)
    h[rows] = _lane4(h[rows], u32[pos[rows]])
    pos = pos + (rest & 4)
    for i in range(3):
        rows = np.flatnonzero((rest & 3) > i)
        h[rows] = _byte(h[rows], data[pos[rows] + i])
    return _avalanche(h)


def _stripes(u64: np.ndarray, starts: np.ndarray, stripes: np.ndarray) -> np.ndarray:
    """The four-accumulator phase for values of 32 bytes or more, merged into one word each.
    Values are ordered shortest first, so those still running are always a suffix."""
    # Stable sorts of 16-bit keys are radix sorts.
    keys = stripes.astype(np.uint16) if stripes.max() <= np.iinfo(np.uint16).max else stripes
    order = np.argsort(keys, kind="stable")
    starts, stripes = starts[order], stripes[order]
    acc = [np.full(len(starts), seed, dtype=np.uint64) for seed in _SEEDS]
    for stripe in range(int(stripes[-1])):
        first = int(np.searchsorted(stripes, stripe, side="right"))
        base = starts[first:] + STRIPE * stripe
        for k in range(4):
            acc[k][first:] = _round(acc[k][first:], u64[base + 8 * k])
    h = sum(_rotl(a.copy(), r) for a, r in zip(acc, (1, 7, 12, 18)))
    for a in acc:
        h ^= _round(np.uint64(0), a)
        h *= P1
        h += P4
    out = np.empty(len(h), dtype=np.uint64)
    out[order] = h
    return out
