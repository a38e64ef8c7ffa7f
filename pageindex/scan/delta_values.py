"""A page's values in DELTA_BINARY_PACKED, DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY or
BYTE_STREAM_SPLIT turned into what scan.encoded bounds: numbers as PLAIN bytes, byte arrays' extrema.

Each function returns None for a page it does not read (a bad or cut-off stream, more or fewer
values than the page holds): scan.encoded then hands the chunk to Arrow, which judges it.
"""
from __future__ import annotations

from types import ModuleType

import numpy as np

from pageindex.format.parquet_thrift import Encoding
from pageindex.scan.compiled import compiled

DELTA_ENCODINGS = frozenset({Encoding.DELTA_BINARY_PACKED, Encoding.DELTA_LENGTH_BYTE_ARRAY,
                             Encoding.DELTA_BYTE_ARRAY, Encoding.BYTE_STREAM_SPLIT})
# A byte array's length is an INT32 in both DELTA byte-array encodings.
_LENGTH = np.dtype("<u4")


def delta_kernels() -> ModuleType | None:
    """The compiled DELTA kernels, or None (see pageindex.scan.compiled)."""
    return compiled("delta_kernels")


def numbers(encoding: int, buf: np.ndarray, defined: int, dtype: np.dtype) -> np.ndarray | None:
    """PLAIN bytes (little-endian) of `dtype` numbers bounding the page as its `defined` values
    do: from a BYTE_STREAM_SPLIT section all of them, from DELTA_BINARY_PACKED (integers) the least
    and greatest only; None if unread."""
    k = delta_kernels()
    if k is None:
        return None
    if encoding == Encoding.BYTE_STREAM_SPLIT:
        if len(buf) != defined * dtype.itemsize:
            return None  # Arrow reads the streams' stride from the size: it judges a page with more
        out = np.empty(defined, f"<u{dtype.itemsize}")
        k.byte_streams(buf, out)
        return out.view(np.uint8)
    if encoding != Encoding.DELTA_BINARY_PACKED or dtype.kind not in "iu":
        return None
    bits = 8 * dtype.itemsize
    flip = np.uint64(1 << (bits - 1) if dtype.kind == "i" else 0)
    end, low, high = k.delta_extrema(buf, 0, len(buf), defined, bits, flip)
    if end < 0:
        return None
    # the two extrema as PLAIN values: bounded by the caller as any PLAIN page's values are
    keys = np.array([low, high], np.uint64) ^ flip
    return keys.astype(f"<u{dtype.itemsize}").view(np.uint8)


def byte_arrays(encoding: int, buf: np.ndarray, defined: int) -> tuple[bytes, bytes, int] | None:
    """The least and greatest of the page's `defined` byte arrays (unsigned byte-wise) and their
    total length, from a DELTA_LENGTH_BYTE_ARRAY or DELTA_BYTE_ARRAY section; None if unread."""
    k = delta_kernels()
    if k is None or encoding not in (Encoding.DELTA_LENGTH_BYTE_ARRAY, Encoding.DELTA_BYTE_ARRAY):
        return None
    lengths = _lengths(k, buf, 0, defined)
    if lengths is None:
        return None
    if encoding == Encoding.DELTA_LENGTH_BYTE_ARRAY:
        low, low_len, high, high_len, total, status = k.span_bounds(buf, lengths[0], len(buf), lengths[1])
        return None if status < 0 else (bytes(buf[low:low + low_len]), bytes(buf[high:high + high_len]), int(total))
    prefixes, suffixes = lengths[1], _lengths(k, buf, lengths[0], defined)
    if suffixes is None or (prefixes < 0).any() or (suffixes[1] < 0).any():
        return None
    # at most the longest value's bytes are held: the kernel refuses a page whose values say otherwise
    longest = int((prefixes.astype(np.int64) + suffixes[1]).max())
    low, high, total, status = k.front_coded(buf, suffixes[0], len(buf), prefixes, suffixes[1], longest)
    return None if status < 0 else (low.tobytes(), high.tobytes(), int(total))


def _lengths(k: ModuleType, buf: np.ndarray, at: int, count: int) -> tuple[int, np.ndarray] | None:
    """The DELTA_BINARY_PACKED INT32 lengths at buf[at:] and the position after them."""
    out = np.empty(count, _LENGTH)
    end = k.delta_binary(buf, at, len(buf), out, 32)
    return None if end < 0 else (int(end), out.view(np.int32))
