"""XXH64 with seed 0, vectorized in numpy over many values at once.

Fixed-width values hash as whole words; variable-length ones in groups of one length, a block at a time.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

P1 = np.uint64(0x9E3779B185EBCA87)
P2 = np.uint64(0xC2B2AE3D27D4EB4F)
P3 = np.uint64(0x165667B19E3779F9)
P4 = np.uint64(0x85EBCA77C2B2AE63)
P5 = np.uint64(0x27D4EB2F165667C5)
STRIPE = 32
# Values hashed at a time: a block's temporaries stay in the CPU cache (and under malloc's mmap
# threshold, so they are not mapped and faulted in again for every step).
BLOCK = 8192
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
    return _whole_words(np.asarray(words).view(_U32), _lane4)


def xxh64_u64(words: np.ndarray) -> np.ndarray:
    """XXH64 of each 8-byte little-endian value (INT64 and DOUBLE bit patterns)."""
    return _whole_words(np.asarray(words).view(_U64), _lane8)


def _whole_words(words: np.ndarray, lane: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """XXH64 of each word (a value of the word's width, mixed in by `lane`), a block at a time."""
    out = np.empty(len(words), dtype=np.uint64)
    for lo in range(0, len(words), BLOCK):
        h = out[lo:lo + BLOCK]
        h.fill(P5 + np.uint64(words.itemsize))
        _avalanche(lane(h, words[lo:lo + BLOCK]))
    return out


def xxh64_fixed(data: np.ndarray, width: int) -> np.ndarray:
    """XXH64 of each `width`-byte value of a contiguous byte buffer (FIXED_LEN_BYTE_ARRAY)."""
    count = len(data) // width if width else 0
    words = _Words(data)
    return words.same_length(np.arange(count, dtype=np.int64) * width, width)


def xxh64_binary(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """XXH64 of the values data[starts[i] : starts[i] + lengths[i]] (BYTE_ARRAY without length
    prefixes). Values of one length take the same steps, so they are hashed together, a group at
    a time; words are read unaligned in place, so the data is never copied."""
    words = _Words(data)
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    if not len(lengths) or lengths.min() == lengths.max():
        return words.same_length(starts, int(lengths[0]) if len(lengths) else 0)
    # A stable sort of 16-bit keys is a radix sort.
    keys = lengths.astype(np.uint16) if lengths.max() <= np.iinfo(np.uint16).max else lengths
    order = np.argsort(keys, kind="stable")
    ordered = lengths[order]
    cuts = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    out = np.empty(len(lengths), dtype=np.uint64)
    for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), len(order)]):
        rows = order[lo:hi]
        out[rows] = words.same_length(starts[rows], int(ordered[lo]))
    return out


def xxh64_offsets(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """XXH64 of each value data[offsets[i] : offsets[i + 1]] (Arrow's offsets and data buffers)."""
    offsets = np.asarray(offsets, dtype=np.int64)
    return xxh64_binary(data, offsets[:-1], np.diff(offsets))


class _Words:
    """A byte buffer with views whose element i is the word starting at byte i (stride 1:
    unaligned loads)."""

    def __init__(self, data: np.ndarray) -> None:
        data = np.ascontiguousarray(data, dtype=np.uint8)
        if len(data) < 8:
            data = np.concatenate([data, np.zeros(8 - len(data), np.uint8)])
        self.bytes = data
        self.u64 = np.ndarray((len(data) - 7,), _U64, buffer=data, strides=(1,))
        self.u32 = np.ndarray((len(data) - 3,), _U32, buffer=data, strides=(1,))

    def same_length(self, starts: np.ndarray, length: int) -> np.ndarray:
        """XXH64 of the `length`-byte values at `starts`, a block at a time."""
        out = np.empty(len(starts), dtype=np.uint64)
        for lo in range(0, len(starts), BLOCK):
            out[lo:lo + BLOCK] = self._block(starts[lo:lo + BLOCK], length)
        return out

    def _block(self, starts: np.ndarray, length: int) -> np.ndarray:
        stripes = length // STRIPE
        h = self._stripes(starts, stripes) if stripes else np.full(len(starts), P5, dtype=np.uint64)
        h += np.uint64(length)
        pos = starts + STRIPE * stripes
        rest = length % STRIPE
        for lane in range(rest // 8):
            _lane8(h, self.u64[pos + 8 * lane])
        pos += rest - rest % 8
        if rest % 8 >= 4:
            _lane4(h, self.u32[pos])
            pos += 4
        for i in range(rest % 4):
            _byte(h, self.bytes[pos + i])
        return _avalanche(h)

    def _stripes(self, starts: np.ndarray, stripes: int) -> np.ndarray:
        """The four-accumulator phase over `stripes` 32-byte stripes, merged into one word each."""
        acc = [np.full(len(starts), seed, dtype=np.uint64) for seed in _SEEDS]
        for stripe in range(stripes):
            base = starts + STRIPE * stripe
            for k in range(4):
                acc[k] = _round(acc[k], self.u64[base + 8 * k])
        h = sum(_rotl(a.copy(), r) for a, r in zip(acc, (1, 7, 12, 18)))
        for a in acc:
            h ^= _round(np.uint64(0), a)
            h *= P1
            h += P4
        return h
