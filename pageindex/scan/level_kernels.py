"""A nested leaf's repetition and definition level streams (RLE/bit-packed hybrid) counted with
numba: per page, how many levels have each value, and the first level, in one pass.

Imported by pageindex.scan.nested_encoded only when numba imports (the `fast` extra). The kernel
returns BAD on a stream it does not accept; the caller then leaves the chunk to Arrow.
"""
from __future__ import annotations

import numpy as np
from numba import njit

# The hybrid stream's varints and bit counts as the flat leaves' kernels read them.
from pageindex.scan.kernels import BAD, popcount8, uleb

# As in pageindex.scan.kernels: compiled code is cached, and chunks may be counted on threads.
_JIT = {"cache": True, "nogil": True}

_ODD = np.uint64(0x5555555555555555)  # the low bit of each two-bit field


@njit(**_JIT)
def _popcount64(x):
    x = x - ((x >> np.uint64(1)) & _ODD)
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@njit(**_JIT)
def _count_narrow(buf, q, n, width, max_level, hist):
    """Add a bit-packed run's `n` levels of width 1 or 2 at buf[q:] to hist, eight bytes (64 or
    32 levels) at a time, then a byte at a time; False when one is above max_level."""
    per_byte = 8 // width
    full = n // per_byte
    rest = n - full * per_byte
    c1 = c2 = c3 = np.int64(0)
    words = full >> 3
    for w in range(words):
        x = np.uint64(0)
        for k in range(8):  # little-endian, as the levels are packed
            x |= np.uint64(buf[q + 8 * w + k]) << np.uint64(8 * k)
        if width == 1:
            c1 += _popcount64(x)
        else:
            hi = (x >> np.uint64(1)) & _ODD
            lo = x & _ODD
            c3 += _popcount64(hi & lo)
            c2 += _popcount64(hi & ~lo)
            c1 += _popcount64(lo & ~hi)
    for i in range(words * 8, full + (1 if rest else 0)):
        b = np.int64(buf[q + i])
        if i == full:
            b &= (np.int64(1) << (rest * width)) - 1  # the levels past the run's end read as 0
        if width == 1:
            c1 += popcount8(b)
        else:
            hi = (b >> 1) & 0x55
            lo = b & 0x55
            c3 += popcount8(hi & lo)
            c2 += popcount8(hi & ~lo)
            c1 += popcount8(lo & ~hi)
    if (c3 and max_level < 3) or (c2 and max_level < 2):
        return False
    hist[0] += n - c1 - c2 - c3
    hist[1] += c1
    if max_level >= 2:
        hist[2] += c2
    if max_level >= 3:
        hist[3] += c3
    return True


@njit(**_JIT)
def level_histogram(buf, p, end, count, max_level, hist):
    """Count `count` levels of the hybrid stream buf[p:end] (bit width that of `max_level`, no
    width byte) into hist[0..max_level] (zeroed here). Returns the first level (0 when there is
    none), or BAD for a stream shorter than `count` levels, an RLE run of none, or a level above
    `max_level`. Levels past `count` are never read, as in Arrow."""
    hist[:] = 0
    width = np.int64(0)
    while (np.int64(1) << width) <= max_level:
        width += 1
    mask = (np.int64(1) << width) - 1
    value_bytes = (width + 7) >> 3
    first = np.int64(-1)
    left = np.int64(count)
    while left > 0:
        header, p = uleb(buf, p, end)
        if p < 0:
            return np.int64(BAD)
        if header & 1:
            groups = header >> 1
            n = min(groups * 8, left)
            q = p
            p = p + groups * width
            if n == 0 or p > end:
                return np.int64(BAD)
            if first < 0:
                low = np.int64(buf[q]) | ((np.int64(buf[q + 1]) << 8) if width > 8 else np.int64(0))
                first = low & mask  # the run's first level: its lowest bits (a run holds width bytes or more)
            if width <= 2:
                # One and two bits a level (most nested leaves): whole bytes at a time.
                if not _count_narrow(buf, q, n, width, max_level, hist):
                    return np.int64(BAD)
                left -= n
                continue
            acc = np.int64(0)
            bits = np.int64(0)
            for _ in range(n):
                while bits < width:
                    acc |= np.int64(buf[q]) << bits
                    q += 1
                    bits += 8
                level = acc & mask
                acc >>= width
                bits -= width
                if level > max_level:
                    return np.int64(BAD)
                hist[level] += 1
        else:
            n = min(header >> 1, left)
            if n == 0 or p + value_bytes > end:
                return np.int64(BAD)
            level = np.int64(0)
            for k in range(value_bytes):
                level |= np.int64(buf[p + k]) << (8 * k)
            p += value_bytes
            if level > max_level:
                return np.int64(BAD)
            hist[level] += n
            if first < 0:
                first = level
        left -= n
    return max(first, np.int64(0))
