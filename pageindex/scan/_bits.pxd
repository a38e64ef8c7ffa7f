# cython: language_level=3
"""The byte-level reads the scan's compiled kernels share (pointers, varints, windows, prefixes, bit
counts), inlined into their loops: cimported by pageindex.scan's .pyx modules, never called from Python.
"""
from libc.stdint cimport int64_t, uint8_t, uint64_t

# A kernel's status for a stream that does not hold what it should: Arrow decides what that means.
cdef enum:
    BAD = -1


cdef inline const uint8_t* base(const uint8_t[::1] buf) noexcept nogil:
    return &buf[0]  # an empty view's pointer is never read through (every read is bounded by its size)


cdef inline (int64_t, int64_t) uleb(const uint8_t* buf, int64_t p, int64_t end) noexcept nogil:
    """The ULEB128 varint at p, and the position after it (BAD when cut off or over 5 bytes)."""
    cdef int64_t value = 0, b
    cdef int shift = 0
    while p < end and shift < 35:
        b = buf[p]
        p += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, p
        shift += 7
    return 0, BAD


cdef inline int64_t popcount8(int64_t b) noexcept nogil:
    b = b - ((b >> 1) & 0x55)
    b = (b & 0x33) + ((b >> 2) & 0x33)
    return (b + (b >> 4)) & 0x0F


cdef inline int64_t popcount64(uint64_t x) noexcept nogil:
    """The one bits of x, by halves (no popcnt instruction in a portable build; the compiler
    makes this one where it may)."""
    x = x - ((x >> 1) & 0x5555555555555555ULL)
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL)
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL
    return <int64_t>((x * 0x0101010101010101ULL) >> 56)


cdef inline uint64_t le_window(const uint8_t* buf, int64_t at) noexcept nogil:
    """The 8 bytes at `at` as a little-endian uint64 (the caller knows they are there); byte by
    byte, which the C compiler makes one load."""
    cdef const uint8_t* b = buf + at
    return (<uint64_t>b[0] | (<uint64_t>b[1] << 8) | (<uint64_t>b[2] << 16) | (<uint64_t>b[3] << 24)
            | (<uint64_t>b[4] << 32) | (<uint64_t>b[5] << 40) | (<uint64_t>b[6] << 48)
            | (<uint64_t>b[7] << 56))


cdef inline uint64_t be_prefix(const uint8_t* buf, int64_t size, int64_t p, int64_t n) noexcept nogil:
    """buf[p:p+n]'s first 8 bytes as a big-endian uint64, zero-padded (buf holds `size` bytes): a
    less prefix means a less value (unsigned byte-wise, a prefix first); equal prefixes need the
    bytes compared."""
    cdef const uint8_t* b = buf + p
    cdef uint64_t key = 0
    cdef int64_t k
    if p + 8 <= size:
        key = ((<uint64_t>b[0] << 56) | (<uint64_t>b[1] << 48) | (<uint64_t>b[2] << 40)
               | (<uint64_t>b[3] << 32) | (<uint64_t>b[4] << 24) | (<uint64_t>b[5] << 16)
               | (<uint64_t>b[6] << 8) | <uint64_t>b[7])
        if n >= 8:
            return key
        if n <= 0:
            return 0
        return key & ~((<uint64_t>1 << (64 - 8 * n)) - 1)
    for k in range(n):  # n < 8 here: a value of 8 bytes or more has its 8 in buf
        key |= <uint64_t>b[k] << (56 - 8 * k)
    return key


cdef inline bint less(const uint8_t* buf, int64_t a, int64_t a_len, int64_t b, int64_t b_len,
                      int64_t start) noexcept nogil:
    """buf[a:a+a_len] < buf[b:b+b_len], unsigned byte-wise, a prefix first; their first `start`
    bytes (of those both have) known equal."""
    cdef int64_t i, stop = a_len if a_len < b_len else b_len
    cdef uint8_t x, y
    for i in range(start, stop):
        x = buf[a + i]
        y = buf[b + i]
        if x != y:
            return x < y
    return a_len < b_len
