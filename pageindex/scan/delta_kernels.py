"""DELTA_* and BYTE_STREAM_SPLIT streams read by numba kernels: DELTA_BINARY_PACKED integers, the
extrema of DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY values, BYTE_STREAM_SPLIT values put back.

Imported by pageindex.scan.delta_values only when numba imports. Each kernel reads only what the
format allows as Arrow's reader does and returns BAD on anything else; the chunk then goes to Arrow.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from pageindex.scan.kernels import BAD, be_prefix, le_window

_JIT = {"cache": True, "nogil": True}  # as pageindex.scan.kernels: kept compiled, run on threads
_INLINE = {**_JIT, "inline": "always"}


@njit(**_INLINE)
def _varint(buf, p, end, bits):
    """The ULEB128 varint at p holding at most `bits` bits (32 or 64), and the position after
    it; the position is BAD when cut off or wider (Arrow reads these into a `bits`-bit integer)."""
    value = np.uint64(0)
    shift = 0
    while p < end and shift < bits:
        b = np.uint64(buf[p])
        p += 1
        if bits - shift < 7 and (b & np.uint64(0x7F)) >> np.uint64(bits - shift):
            return np.uint64(0), np.int64(BAD)  # more bits than the integer has
        value |= (b & np.uint64(0x7F)) << np.uint64(shift)
        if b < np.uint64(0x80):
            return value, np.int64(p)
        shift += 7
    return np.uint64(0), np.int64(BAD)


@njit(**_INLINE)
def _zigzag(v):
    """A zigzag varint's value as 64 bits (two's complement; 32-bit ones stay right mod 2**32)."""
    return (v >> np.uint64(1)) ^ (np.uint64(0) - (v & np.uint64(1)))


@njit(**_INLINE)
def _slow_bits(buf, at, shift, width, mask):
    """The `width`-bit field at byte `at`, bit `shift`, read byte by byte (near the buffer's end)."""
    low = np.uint64(0)
    for k in range(min(8, buf.shape[0] - at)):
        low |= np.uint64(buf[at + k]) << np.uint64(8 * k)
    low >>= np.uint64(shift)
    if shift + width > 64 and at + 8 < buf.shape[0]:
        low |= np.uint64(buf[at + 8]) << np.uint64(64 - shift)
    return low & mask


@njit(**_JIT)
def delta_binary(buf, p, end, out, bits):
    """Decode the DELTA_BINARY_PACKED stream at buf[p:end] into `out` (uint32 or uint64: values
    wrap as the format says), whose length its header must state; the position after its last
    miniblock holding values, or BAD (a bad header, a bit width above `bits`, a cut-off stream)."""
    return _delta(buf, p, end, out.shape[0], out, bits, np.uint64(0), True)[0]


@njit(**_JIT)
def delta_extrema(buf, p, end, count, bits, flip):
    """delta_binary's reading of `count` values, kept as none but the least and greatest key
    (a value's low `bits` bits XOR `flip`: the sign bit for signed types, so keys order as the
    values do): the position after the stream (or BAD) and the two keys."""
    return _delta(buf, p, end, count, np.empty(0, np.uint64), bits, flip, False)


@njit(**_INLINE)
def _delta(buf, p, end, n, out, bits, flip, write):
    """The DELTA_BINARY_PACKED reading itself: the end position, least and greatest key."""
    keep = np.uint64(0xFFFFFFFF) if bits == 32 else np.uint64(0xFFFFFFFFFFFFFFFF)
    low = np.uint64(0xFFFFFFFFFFFFFFFF)
    high = np.uint64(0)
    block, p = _varint(buf, p, end, 32)
    if p < 0:
        return BAD, low, high
    minis, p = _varint(buf, p, end, 32)
    if p < 0:
        return BAD, low, high
    total, p = _varint(buf, p, end, 32)
    if p < 0:
        return BAD, low, high
    first, p = _varint(buf, p, end, bits)
    if p < 0 or total != n or n == 0:
        return BAD, low, high
    if block == 0 or block % 128 != 0 or minis == 0 or block % minis != 0 or (block // minis) % 32 != 0:
        return BAD, low, high
    per_mini = np.int64(block // minis)
    minis = np.int64(minis)
    value = _zigzag(first)
    low = high = (value & keep) ^ flip
    if write:
        out[0] = value
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
            width = np.int64(buf[widths + m])
            if width > bits:
                return BAD, low, high
            size = per_mini * width // 8
            if p + size > end:
                return BAD, low, high
            take = min(per_mini, n - i)
            mask = np.uint64(0xFFFFFFFFFFFFFFFF) if width == 64 else (np.uint64(1) << np.uint64(width)) - np.uint64(1)
            # every field in one 8-byte window that lies in buf: no state between values
            windowed = p + size + 8 <= buf.shape[0] and width <= 56
            for j in range(take):
                if width == 0:
                    field = np.uint64(0)
                elif windowed:
                    bit = np.uint64(j * width)
                    field = (le_window(buf, np.uint64(p) + (bit >> np.uint64(3))) >> (bit & np.uint64(7))) & mask
                else:
                    bit = j * width
                    field = _slow_bits(buf, p + (bit >> 3), bit & 7, width, mask)
                value += min_delta + field
                key = (value & keep) ^ flip
                low = min(low, key)
                high = max(high, key)
                if write:
                    out[i + j] = value
            i += take
            p += size
    return p, low, high


@njit(**_INLINE)
def _swapped(x):
    """A little-endian word read as big-endian: words then order as their bytes do."""
    x = ((x & np.uint64(0x00FF00FF00FF00FF)) << np.uint64(8)) | ((x >> np.uint64(8)) & np.uint64(0x00FF00FF00FF00FF))
    x = ((x & np.uint64(0x0000FFFF0000FFFF)) << np.uint64(16)) | ((x >> np.uint64(16)) & np.uint64(0x0000FFFF0000FFFF))
    return (x << np.uint64(32)) | (x >> np.uint64(32))


@njit(**_INLINE)
def _less(buf, a, a_len, b, b_len, start):
    """buf[a:a+a_len] < buf[b:b+b_len] (unsigned byte-wise, a prefix first), their first `start`
    bytes known equal: equal 8-byte words skipped a load each, the first unequal one ordered as
    big-endian (URLs share long prefixes: byte steps cost 6x on them), the rest byte by byte."""
    k = start
    common = min(a_len, b_len)
    while k + 8 <= common:
        x = le_window(buf, a + k)
        y = le_window(buf, b + k)
        if x != y:
            return _swapped(x) < _swapped(y)
        k += 8
    for i in range(k, common):
        if buf[a + i] != buf[b + i]:
            return buf[a + i] < buf[b + i]
    return a_len < b_len


@njit(**_JIT)
def span_bounds(buf, p, end, lengths):
    """Values laid end to end from buf[p] on, lengths[i] bytes each (DELTA_LENGTH_BYTE_ARRAY's
    data): where the least and greatest start, their lengths, the total length, and the status
    (BAD for a negative length or values running past `end`)."""
    low = high = np.int64(-1)
    low_len = high_len = np.int64(0)
    low_key = high_key = np.uint64(0)
    total = np.int64(0)
    for i in range(lengths.shape[0]):
        n = np.int64(lengths[i])
        if n < 0 or p + n > end:
            return low, low_len, high, high_len, total, BAD
        total += n
        key = be_prefix(buf, p, n)
        # as kernels.plain_bytes: an 8-byte big-endian key first, the bytes only on a tie; the
        # greatest first, as these encodings mostly hold sorted values (a new greatest is no least)
        if low < 0:
            low, low_len, high, high_len, low_key, high_key = p, n, p, n, key, key
        elif key > high_key or (key == high_key and _less(buf, high, high_len, p, n, 8)):
            high, high_len, high_key = p, n, key
        elif key < low_key or (key == low_key and _less(buf, p, n, low, low_len, 8)):
            low, low_len, low_key = p, n, key
        p += n
    return low, low_len, high, high_len, total, 0


@njit(**_INLINE)
def _before(x, x_len, y, y_len, start):
    """x[:x_len] < y[:y_len] (two buffers), their first `start` bytes known equal: as _less."""
    k = start
    common = min(x_len, y_len)
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


@njit(**_JIT)
def front_coded(buf, p, end, prefixes, suffixes, longest):
    """DELTA_BYTE_ARRAY's least and greatest value, their total length and the status: value i
    is value i - 1's first prefixes[i] bytes, then suffixes[i] bytes from buf[p:end] on (BAD for
    a negative length, a prefix longer than the value before, suffixes past `end`, a value over
    `longest`). One value at a time, in place over the one before: only suffixes are copied."""
    value = np.zeros(longest + 8, np.uint8)
    least = np.zeros(longest + 8, np.uint8)
    most = np.zeros(longest + 8, np.uint8)
    last_len = low_len = high_len = total = np.int64(0)
    low_last = high_last = False  # the least or greatest is the value before
    for i in range(prefixes.shape[0]):
        keep = np.int64(prefixes[i])
        n = np.int64(suffixes[i])
        length = keep + n
        if keep < 0 or n < 0 or keep > last_len or p + n > end or length > longest:
            return least[:0], most[:0], total, BAD
        value[keep:length] = buf[p:p + n]
        p += n
        total += length
        # The value before's first `keep` bytes are this one's: where it is the least or the
        # greatest, compared and copied from there on.
        high_from = keep if high_last else 0
        low_from = keep if low_last else 0
        if i == 0:
            most[:length] = value[:length]
            least[:length] = value[:length]
            high_len, low_len, high_last, low_last = length, length, True, True
        elif _before(most, high_len, value, length, high_from):
            most[high_from:length] = value[high_from:length]
            high_len, high_last, low_last = length, True, False
        elif _before(value, length, least, low_len, low_from):
            least[low_from:length] = value[low_from:length]
            low_len, low_last, high_last = length, True, False
        else:
            low_last = high_last = False
        last_len = length
    return least[:low_len], most[:high_len], total, 0


@njit(**_JIT)
def byte_streams(buf, out):
    """BYTE_STREAM_SPLIT's streams (stream k: byte k of every value; buf exactly their size) put
    back together into `out` (uint32 or uint64, one a value): a stream a pass, so the loop is
    over contiguous bytes and vectorizes."""
    n = out.shape[0]
    out[:] = 0
    for k in range(buf.shape[0] // n if n else 0):
        shift = np.uint64(8 * k)
        at = k * n
        for i in range(n):
            out[i] |= np.uint64(buf[at + i]) << shift
