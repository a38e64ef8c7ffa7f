# cython: language_level=3
"""A nested leaf's repetition and definition level streams (RLE/bit-packed hybrid) counted,
compiled: per page, how many levels have each value, and the first level, in one pass.

The kernel returns BAD on a stream it does not accept; the caller then leaves the chunk to Arrow.
It runs without the GIL, so chunks can be counted on threads in parallel.
"""
from libc.stdint cimport int64_t, uint64_t, uint8_t

# The hybrid stream's varints and bit counts as the flat leaves' kernels read them.
from pageindex.scan._bits cimport BAD as _BAD, le_window, popcount8, popcount64, uleb

BAD = _BAD

cdef inline bint _count_narrow(const uint8_t* buf, int64_t q, int64_t n, int64_t width, int64_t max_level,
                               int64_t* hist) noexcept nogil:
    """Add a bit-packed run's `n` levels of width 1 or 2 at buf[q:] to hist, eight bytes (64 or
    32 levels) at a time, then a byte at a time; False when one is above max_level."""
    cdef int64_t per_byte = 8 // width
    cdef int64_t full = n // per_byte
    cdef int64_t rest = n - full * per_byte
    cdef int64_t c1 = 0, c2 = 0, c3 = 0, w, i, b, lo8, hi8
    cdef int64_t words = full >> 3
    cdef uint64_t x, hi, lo
    for w in range(words):
        x = le_window(buf, q + 8 * w)  # little-endian, as the levels are packed
        if width == 1:
            c1 += popcount64(x)
        else:
            hi = (x >> 1) & 0x5555555555555555ULL  # the high bit of each two-bit level
            lo = x & 0x5555555555555555ULL
            c3 += popcount64(hi & lo)
            c2 += popcount64(hi & ~lo)
            c1 += popcount64(lo & ~hi)
    for i in range(words * 8, full + (1 if rest else 0)):
        b = buf[q + i]
        if i == full:
            b &= ((<int64_t>1) << (rest * width)) - 1  # the levels past the run's end read as 0
        if width == 1:
            c1 += popcount8(b)
        else:
            hi8 = (b >> 1) & 0x55
            lo8 = b & 0x55
            c3 += popcount8(hi8 & lo8)
            c2 += popcount8(hi8 & ~lo8)
            c1 += popcount8(lo8 & ~hi8)
    if (c3 and max_level < 3) or (c2 and max_level < 2):
        return False
    hist[0] += n - c1 - c2 - c3
    hist[1] += c1
    if max_level >= 2:
        hist[2] += c2
    if max_level >= 3:
        hist[3] += c3
    return True


cdef int64_t _level_histogram(const uint8_t* buf, int64_t p, int64_t end, int64_t count, int64_t max_level,
                              int64_t* hist) noexcept nogil:
    cdef int64_t width = 0, mask, value_bytes, first = -1, left = count
    cdef int64_t header, groups, n, q, low, acc, bits, level, k, j
    while ((<int64_t>1) << width) <= max_level:
        width += 1
    mask = ((<int64_t>1) << width) - 1
    value_bytes = (width + 7) >> 3
    while left > 0:
        header, p = uleb(buf, p, end)
        if p < 0:
            return _BAD
        if header & 1:
            groups = header >> 1
            n = min(groups * 8, left)
            q = p
            p = p + groups * width
            if n == 0 or p > end:
                return _BAD
            if width == 0:
                # No bits a level (a maximum of 0, which callers count without the stream): all 0.
                hist[0] += n
                first = max(first, 0)
                left -= n
                continue
            if first < 0:
                low = buf[q] | (((<int64_t>buf[q + 1]) << 8) if width > 8 else 0)
                first = low & mask  # the run's first level: its lowest bits (a run holds width bytes or more)
            if width <= 2:
                # One and two bits a level (most nested leaves): whole bytes at a time.
                if not _count_narrow(buf, q, n, width, max_level, hist):
                    return _BAD
                left -= n
                continue
            acc = 0
            bits = 0
            for j in range(n):
                while bits < width:
                    acc |= (<int64_t>buf[q]) << bits
                    q += 1
                    bits += 8
                level = acc & mask
                acc >>= width
                bits -= width
                if level > max_level:
                    return _BAD
                hist[level] += 1
        else:
            n = min(header >> 1, left)
            if n == 0 or p + value_bytes > end:
                return _BAD
            level = 0
            for k in range(value_bytes):
                level |= (<int64_t>buf[p + k]) << (8 * k)
            p += value_bytes
            if level > max_level:
                return _BAD
            hist[level] += n
            if first < 0:
                first = level
        left -= n
    return max(first, 0)


def level_histogram(const uint8_t[::1] buf, int64_t p, int64_t end, int64_t count, int64_t max_level,
                    int64_t[::1] hist):
    """Count `count` levels of the hybrid stream buf[p:end] (bit width that of `max_level`, no
    width byte) into hist[0..max_level] (zeroed here). Returns the first level (0 when there is
    none), or BAD for a stream shorter than `count` levels, an RLE run of none, or a level above
    `max_level`. Levels past `count` are never read, as in Arrow."""
    cdef int64_t first, i
    if max_level < 0 or hist.shape[0] <= max_level:
        raise ValueError(f"level_histogram needs a count for each level 0..{max_level}, not {hist.shape[0]}")
    with nogil:
        for i in range(hist.shape[0]):
            hist[i] = 0
        first = _level_histogram(&buf[0], p, end, count, max_level, &hist[0])
    return first
