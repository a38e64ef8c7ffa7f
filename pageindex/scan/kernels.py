"""The encoded-page scan's hot loops compiled with numba: level and dictionary-index streams
(RLE/bit-packed hybrid) and PLAIN byte arrays, reduced to counts, ranks and extrema per page.

Imported by pageindex.scan.encoded only when numba imports (the `fast` extra). Every kernel
returns a negative status on input it does not accept; the caller then leaves the chunk to Arrow.
"""
from __future__ import annotations

import numpy as np
from numba import njit

# cache: compiled code is kept beside this file (or in NUMBA_CACHE_DIR), so a process after the
# first loads it instead of compiling. nogil: chunks can be scanned on threads in parallel.
_JIT = {"cache": True, "nogil": True}

BAD = -1  # the stream does not hold what it should: Arrow decides what that means


@njit(**_JIT)
def uleb(buf, p, end):
    """The ULEB128 varint at p, and the position after it (-1 when cut off or over 5 bytes)."""
    value = np.int64(0)
    shift = 0
    while p < end and shift < 35:
        b = np.int64(buf[p])
        p += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, p
        shift += 7
    return np.int64(0), np.int64(BAD)


@njit(**_JIT)
def popcount8(b):
    b = b - ((b >> 1) & 0x55)
    b = (b & 0x33) + ((b >> 2) & 0x33)
    return (b + (b >> 4)) & 0x0F


# The hybrid stream's reading, shared by the kernels below; inline="always" puts it into each
# kernel's own loop, so sharing it costs no call per index.
_INLINE = {**_JIT, "inline": "always"}


@njit(**_INLINE)
def _bit_width(buf, p, end):
    """The bit-width byte at p, its mask, the bytes of an RLE run's value and the position
    after it; the width is above 32 when the byte is missing or bad. The caller checks that
    itself, so the compiler knows the bound in the caller's loops (10% faster index_ranks)."""
    if p >= end:
        return np.int64(33), np.uint64(0), np.int64(0), p
    width = np.int64(buf[p])
    if width > 32:
        return width, np.uint64(0), np.int64(0), p + 1
    return width, (np.uint64(1) << np.uint64(width)) - np.uint64(1), (width + 7) >> 3, p + 1


@njit(**_INLINE)
def _run_header(buf, p, end, left, width, value_bytes):
    """The run whose header is at p, of at most `left` values: whether it is bit-packed, how
    many values it holds, where its data starts and where the next run starts (BAD when cut
    off, or an RLE run of none)."""
    header, p = uleb(buf, p, end)
    if p < 0:
        return False, np.int64(0), p, p
    if header & 1:
        groups = header >> 1
        if p + groups * width > end:
            return True, np.int64(0), p, np.int64(BAD)
        return True, min(groups * 8, left), p, p + groups * width
    n = min(header >> 1, left)
    if n == 0 or p + value_bytes > end:
        return False, n, p, np.int64(BAD)
    return False, n, p, p + value_bytes


@njit(**_INLINE)
def _rle_value(buf, p, value_bytes):
    """An RLE run's value: `value_bytes` little-endian bytes at p."""
    value = np.int64(0)
    for k in range(value_bytes):
        value |= np.int64(buf[p + k]) << (8 * k)
    return value


@njit(**_JIT)
def level_zeros(buf, p, end, count):
    """Of `count` one-bit levels (maximum level 1) in the hybrid stream buf[p:end], how many
    are 0 (the nulls of a flat optional leaf); BAD if the stream is shorter or holds a level
    above 1."""
    left = np.int64(count)
    ones = np.int64(0)
    while left > 0:
        packed, n, q, p = _run_header(buf, p, end, left, 1, 1)
        if p < 0:
            return BAD
        if packed:
            # one bit a level: a byte's ones at a time rather than one level at a time
            full = n >> 3
            for i in range(full):
                ones += popcount8(np.int64(buf[q + i]))
            rest = n & 7
            if rest:
                ones += popcount8(np.int64(buf[q + full]) & ((1 << rest) - 1))
        else:
            if buf[q] > 1:
                return BAD
            if buf[q] == 1:
                ones += n
        left -= n
    return count - ones


@njit(**_INLINE)
def le_window(buf, at):
    """The 8 bytes at `at` as a little-endian uint64 (the caller knows they are there); written
    byte by byte with unsigned indices so LLVM makes it one load."""
    a = np.uint64(at)
    return (np.uint64(buf[a]) | (np.uint64(buf[a + np.uint64(1)]) << np.uint64(8))
            | (np.uint64(buf[a + np.uint64(2)]) << np.uint64(16)) | (np.uint64(buf[a + np.uint64(3)]) << np.uint64(24))
            | (np.uint64(buf[a + np.uint64(4)]) << np.uint64(32)) | (np.uint64(buf[a + np.uint64(5)]) << np.uint64(40))
            | (np.uint64(buf[a + np.uint64(6)]) << np.uint64(48)) | (np.uint64(buf[a + np.uint64(7)]) << np.uint64(56)))


@njit(**_INLINE)
def _packed_at(buf, q, i, width, mask):
    """Value i of the bit-packed run whose data starts at q: a window at bit i * width, no state
    carried from value to value (so the loop pipelines); the window must lie in buf."""
    bit = np.uint64(i) * np.uint64(width)
    return np.int64((le_window(buf, np.uint64(q) + (bit >> np.uint64(3))) >> (bit & np.uint64(7))) & mask)


@njit(**_INLINE)
def _packed_tail(buf, q, i, width, mask):
    """_packed_at for a value whose window would run past the buffer: byte by byte."""
    bit = np.int64(i) * width
    at = q + (bit >> 3)
    acc = np.uint64(0)
    for k in range(min(8, buf.shape[0] - at)):
        acc |= np.uint64(buf[at + k]) << np.uint64(8 * k)
    return np.int64((acc >> np.uint64(bit & 7)) & mask)


@njit(**_INLINE)
def _windowed(buf, q, n, width):
    """How many of a bit-packed run's n values (from q on) have their 8-byte window in buf."""
    room = buf.shape[0] - 8 - q
    if room < 0:
        return np.int64(0)
    if width == 0:
        return n
    return min(n, (room * 8 + 7) // width + 1)


@njit(**_JIT)
def index_ranks(buf, p, end, count, rank, lengths):
    """Over `count` dictionary indices (a bit-width byte, then the hybrid stream) in buf[p:end]:
    the least and greatest rank[index], and the sum of lengths[index] (an empty `lengths`:
    no sum). The status is BAD for a short stream, a width above 32 or an index outside
    the dictionary."""
    size = rank.shape[0]
    last = size - 1
    with_lengths = lengths.shape[0] > 0
    low = np.int64(size)
    high = np.int64(-1)
    total = np.int64(0)
    width, mask, value_bytes, p = _bit_width(buf, p, end)
    if width > 32 or size == 0:
        return low, high, total, BAD
    left = np.int64(count)
    seen = np.int64(0)  # the greatest index read: one check per run, none per value
    while left > 0:
        packed, n, q, p = _run_header(buf, p, end, left, width, value_bytes)
        if p < 0:
            return low, high, total, BAD
        if packed:
            fast = _windowed(buf, q, n, width)
            if with_lengths:
                for i in range(fast):
                    index = _packed_at(buf, q, i, width, mask)
                    seen = max(seen, index)
                    index = min(index, last)
                    r = rank[index]
                    low = min(low, r)
                    high = max(high, r)
                    total += lengths[index]
            else:
                for i in range(fast):
                    index = _packed_at(buf, q, i, width, mask)
                    seen = max(seen, index)
                    r = rank[min(index, last)]
                    low = min(low, r)
                    high = max(high, r)
            for i in range(fast, n):
                index = _packed_tail(buf, q, i, width, mask)
                seen = max(seen, index)
                index = min(index, last)
                r = rank[index]
                low = min(low, r)
                high = max(high, r)
                if with_lengths:
                    total += lengths[index]
        else:
            index = _rle_value(buf, q, value_bytes)
            seen = max(seen, index)
            index = min(index, last)
            r = np.int64(rank[index])
            low = min(low, r)
            high = max(high, r)
            if with_lengths:
                total += lengths[index] * n
        if seen > last:
            return low, high, total, BAD
        left -= n
    return low, high, total, 0


@njit(**_INLINE)
def _widen(entries, index, seen, low, high, nan):
    """index_values' reduction after one more index: the greatest index seen, and the least,
    greatest and NaN of the entries (the index clamped: the caller checks `seen` per run)."""
    x = entries[min(index, entries.shape[0] - 1)]
    # Branches, not selects: a new least or greatest is rare, so they cost no chain of dependent
    # compares; strict and in stream order, so of 0.0 and -0.0 the first stays.
    if x < low:
        low = x
    elif x > high:
        high = x
    elif x != x:
        nan = True
    return max(seen, index), low, high, nan


@njit(**_JIT)
def index_values(buf, p, end, count, entries):
    """Over `count` dictionary indices (as index_ranks reads them) into numeric `entries`: the
    least and greatest entry referred to, whether one is NaN (then those two are undefined),
    and the status. No ranking: the entries' own order is the column's."""
    size = entries.shape[0]
    last = size - 1
    low = high = entries[0]
    nan = False
    width, mask, value_bytes, p = _bit_width(buf, p, end)
    if width > 32 or size == 0:
        return low, high, nan, BAD
    left = np.int64(count)
    seen = np.int64(-1)  # the greatest index read (-1: none yet)
    while left > 0:
        packed, n, q, p = _run_header(buf, p, end, left, width, value_bytes)
        if p < 0:
            return low, high, nan, BAD
        fast = _windowed(buf, q, n, width) if packed else np.int64(0)
        if seen < 0:  # the first entry referred to
            first = _packed_tail(buf, q, 0, width, mask) if packed else _rle_value(buf, q, value_bytes)
            low = high = entries[min(first, last)]
        if not packed:
            seen, low, high, nan = _widen(entries, _rle_value(buf, q, value_bytes), seen, low, high, nan)
        else:
            for i in range(fast):
                seen, low, high, nan = _widen(entries, _packed_at(buf, q, i, width, mask), seen, low, high, nan)
            for i in range(fast, n):
                seen, low, high, nan = _widen(entries, _packed_tail(buf, q, i, width, mask), seen, low, high, nan)
        if seen > last:
            return low, high, nan, BAD
        left -= n
    return low, high, nan, 0


@njit(**_JIT)
def plain_integers(numbers):
    """The least and greatest of a page's PLAIN integers (at least one), in one pass (numpy's
    min and max are two); floats are left to numpy, whose min and max keep NaN."""
    low = high = numbers[0]
    for i in range(1, numbers.shape[0]):
        x = numbers[i]
        low = min(low, x)
        high = max(high, x)
    return low, high


@njit(**_JIT)
def _less(buf, a, a_len, b, b_len, start=0):
    """buf[a:a+a_len] < buf[b:b+b_len], unsigned byte-wise, a prefix first; their first `start`
    bytes (of those both have) known equal."""
    for i in range(start, min(a_len, b_len)):
        x = buf[a + i]
        y = buf[b + i]
        if x != y:
            return x < y
    return a_len < b_len


@njit(**_INLINE)
def _length(buf, p):
    """The 4-byte little-endian length at p (which the caller knows is there)."""
    a = np.uint64(p)
    return np.int64(np.uint64(buf[a]) | (np.uint64(buf[a + np.uint64(1)]) << np.uint64(8))
                    | (np.uint64(buf[a + np.uint64(2)]) << np.uint64(16))
                    | (np.uint64(buf[a + np.uint64(3)]) << np.uint64(24)))


@njit(**_INLINE)
def be_prefix(buf, p, n):
    """buf[p:p+n]'s first 8 bytes as a big-endian uint64, zero-padded: a less prefix means a
    less value (unsigned byte-wise, a prefix first); equal prefixes need the bytes compared."""
    if p + 8 <= buf.shape[0]:
        a = np.uint64(p)
        key = ((np.uint64(buf[a]) << np.uint64(56)) | (np.uint64(buf[a + np.uint64(1)]) << np.uint64(48))
               | (np.uint64(buf[a + np.uint64(2)]) << np.uint64(40)) | (np.uint64(buf[a + np.uint64(3)]) << np.uint64(32))
               | (np.uint64(buf[a + np.uint64(4)]) << np.uint64(24)) | (np.uint64(buf[a + np.uint64(5)]) << np.uint64(16))
               | (np.uint64(buf[a + np.uint64(6)]) << np.uint64(8)) | np.uint64(buf[a + np.uint64(7)]))
        if n >= 8:
            return key
        if n <= 0:
            return np.uint64(0)
        return key & ~((np.uint64(1) << np.uint64(64 - 8 * n)) - np.uint64(1))
    key = np.uint64(0)  # n < 8 here: a value of 8 bytes or more has its 8 in buf
    for k in range(n):
        key |= np.uint64(buf[p + k]) << np.uint64(56 - 8 * k)
    return key


@njit(**_JIT)
def plain_bytes(buf, p, end, count):
    """Over `count` PLAIN byte arrays (4-byte little-endian length, then the bytes) in
    buf[p:end]: where the least and greatest start and their lengths, and the values' total
    length; the status is BAD when a value runs past `end`."""
    low = high = np.int64(-1)
    low_len = high_len = np.int64(0)
    low_key = high_key = np.uint64(0)
    total = np.int64(0)
    for _ in range(count):
        if p + 4 > end:
            return low, low_len, high, high_len, total, BAD
        n = _length(buf, p)
        p += 4
        if p + n > end:
            return low, low_len, high, high_len, total, BAD
        total += n
        key = be_prefix(buf, p, n)
        if low < 0:
            low, low_len, high, high_len, low_key, high_key = p, n, p, n, key, key
        elif key < low_key or (key == low_key and _less(buf, p, n, low, low_len, 8)):
            low, low_len, low_key = p, n, key
        elif key > high_key or (key == high_key and _less(buf, high, high_len, p, n, 8)):
            high, high_len, high_key = p, n, key
        p += n
    return low, low_len, high, high_len, total, 0


@njit(**_JIT)
def index_bytes(buf, p, end, count, entries, starts, lengths):
    """Over `count` dictionary indices (as index_ranks reads them) into byte-array entries (each
    entries[starts[i] : starts[i] + lengths[i]]): the least and greatest entry referred to
    (their indices), the sum of their lengths, and the status. For a dictionary too big to rank."""
    size = starts.shape[0]
    last = size - 1
    low = high = np.int64(-1)
    total = np.int64(0)
    width, mask, value_bytes, p = _bit_width(buf, p, end)
    if width > 32 or size == 0:
        return low, high, total, BAD
    left = np.int64(count)
    seen = np.int64(0)
    while left > 0:
        packed, n, q, p = _run_header(buf, p, end, left, width, value_bytes)
        if p < 0:
            return low, high, total, BAD
        fast = _windowed(buf, q, n, width) if packed else np.int64(0)
        for i in range(n if packed else 1):
            if not packed:
                index = _rle_value(buf, q, value_bytes)
            elif i < fast:
                index = _packed_at(buf, q, i, width, mask)
            else:
                index = _packed_tail(buf, q, i, width, mask)
            seen = max(seen, index)
            index = min(index, last)
            total += lengths[index] * (1 if packed else n)
            if low < 0:
                low = high = index
            elif index != low and index != high:
                if _less(entries, starts[index], lengths[index], starts[low], lengths[low]):
                    low = index
                elif _less(entries, starts[high], lengths[high], starts[index], lengths[index]):
                    high = index
        if seen > last:
            return low, high, total, BAD
        left -= n
    return low, high, total, 0


@njit(**_JIT)
def entry_spans(buf, count):
    """Where each of a PLAIN BYTE_ARRAY dictionary page's `count` entries starts, and its
    length; the status is BAD past the data."""
    starts = np.zeros(count, np.int64)
    lengths = np.zeros(count, np.int64)
    p = 0
    end = buf.shape[0]
    for i in range(count):
        if p + 4 > end:
            return starts, lengths, BAD
        n = (np.int64(buf[p]) | (np.int64(buf[p + 1]) << 8) | (np.int64(buf[p + 2]) << 16)
             | (np.int64(buf[p + 3]) << 24))
        p += 4
        if p + n > end:
            return starts, lengths, BAD
        starts[i] = p
        lengths[i] = n
        p += n
    return starts, lengths, 0


@njit(**_JIT)
def ranked_entries(buf, starts, lengths):
    """The order of a byte-array dictionary's entries (spans of `buf`), unsigned byte-wise, a
    prefix first, equal entries in their order: a stable bottom-up merge sort of their indices."""
    n = starts.shape[0]
    order = np.arange(n)
    spare = np.empty(n, np.int64)
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            a, b, q = lo, mid, lo
            while a < mid and b < hi:
                x, y = order[a], order[b]
                if _less(buf, starts[y], lengths[y], starts[x], lengths[x]):
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
        order, spare = spare, order
        width *= 2
    return order
