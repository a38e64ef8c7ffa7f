"""Decoding of Parquet repetition and definition levels (RLE/bit-packed hybrid) into numpy.

Runs are parsed in Python, values are expanded and unpacked in bulk; inputs are untrusted.
"""
from __future__ import annotations

import numpy as np

from pageindex.errors import MalformedFileError

_MAX_BIT_WIDTH = 16
_MAX_HEADER_BYTES = 5
_MAX_LEVEL = np.iinfo(np.int16).max
# Stands for a bit-packed run among run values; RLE values are never negative.
_PACKED = -1


def decode_hybrid(data: bytes | memoryview, bit_width: int, count: int) -> np.ndarray:
    """Decode exactly `count` values of the RLE/bit-packed hybrid encoding (no length prefix).

    Returns an np.int16 array.
    """
    values = _decode(data, bit_width, count)
    if bit_width == _MAX_BIT_WIDTH and count and int(values.max()) > _MAX_LEVEL:
        raise MalformedFileError(f"level value {int(values.max())} does not fit in int16")
    return values.view(np.int16)


def read_v1_levels(
    body: bytes | memoryview, pos: int, max_level: int, count: int
) -> tuple[np.ndarray, int]:
    """Data page v1 level block at body[pos:]: 4-byte little-endian length, then the hybrid stream.

    Returns (levels, position after the block). max_level == 0 -> (zeros, pos) and consumes nothing.
    """
    if max_level == 0:
        return _no_levels(count), pos
    if len(body) - pos < 4:
        raise MalformedFileError("level block length is truncated")
    length = int.from_bytes(body[pos : pos + 4], "little")
    start = pos + 4
    if length > len(body) - start:
        raise MalformedFileError(
            f"level block of {length} bytes overruns the page ({len(body) - start} bytes left)"
        )
    return _levels(body[start : start + length], max_level, count), start + length


def read_v1_bit_packed_levels(
    body: bytes | memoryview, pos: int, max_level: int, count: int
) -> tuple[np.ndarray, int]:
    """Data page v1 levels in the deprecated BIT_PACKED encoding: no length prefix, values packed
    most significant bit first in ceil(count * bit_width / 8) bytes."""
    if max_level == 0:
        return _no_levels(count), pos
    _check_count(count)
    if not 0 < max_level <= _MAX_LEVEL:
        raise MalformedFileError(f"maximum level {max_level} is out of range")
    width = max_level.bit_length()
    size = (count * width + 7) // 8
    if size > len(body) - pos:
        raise MalformedFileError(f"BIT_PACKED levels need {size} bytes, {len(body) - pos} left")
    bits = np.unpackbits(np.frombuffer(body, dtype=np.uint8, count=size, offset=pos), bitorder="big")
    bits = bits[: count * width].reshape(count, width).astype(np.int32)
    values = (bits << np.arange(width - 1, -1, -1, dtype=np.int32)).sum(axis=1)
    if count and int(values.max()) > max_level:
        raise MalformedFileError(f"level {int(values.max())} exceeds the maximum level {max_level}")
    return values.astype(np.int16), pos + size


def read_v2_levels(data: bytes | memoryview, max_level: int, count: int) -> np.ndarray:
    """Data page v2 level section: `data` is exactly the level bytes.

    Their length comes from the page header; there is no length prefix.
    """
    if max_level == 0:
        return _no_levels(count)
    return _levels(data, max_level, count)


def _no_levels(count: int) -> np.ndarray:
    """The implicit all-zero levels of a column whose maximum level is 0."""
    _check_count(count)
    return np.zeros(count, dtype=np.int16)


def _check_count(count: int) -> None:
    if count < 0:
        raise MalformedFileError(f"negative level count {count}")


def _levels(data: bytes | memoryview, max_level: int, count: int) -> np.ndarray:
    """A level stream whose values must not exceed max_level."""
    if not 0 < max_level <= _MAX_LEVEL:
        raise MalformedFileError(f"maximum level {max_level} is out of range")
    values = _decode(data, max_level.bit_length(), count)
    # Values already fit in bit_width bits: only a max_level below 2**bit_width - 1 can be exceeded.
    if count and max_level & (max_level + 1) and int(values.max()) > max_level:
        raise MalformedFileError(f"level {int(values.max())} exceeds the maximum level {max_level}")
    return values.view(np.int16)


def _decode(data: bytes | memoryview, bit_width: int, count: int) -> np.ndarray:
    """The hybrid stream as uint16; every value is below 2**bit_width."""
    if not 0 <= bit_width <= _MAX_BIT_WIDTH:
        raise MalformedFileError(f"level bit width {bit_width} is out of range")
    _check_count(count)
    if count == 0:
        return np.zeros(0, dtype=np.uint16)
    buf = bytes(data)
    kinds, lengths, offsets = _scan_runs(buf, bit_width, count)
    needed = (lengths[-1] * bit_width + 7) // 8 if kinds[-1] == _PACKED else (bit_width + 7) // 8
    if offsets[-1] + needed > len(buf):
        raise MalformedFileError("last level run is truncated")
    kind = np.array(kinds, dtype=np.int32)
    length = np.array(lengths, dtype=np.int64)
    if int(kind.max()) >= 1 << bit_width:
        raise MalformedFileError(f"RLE level value {int(kind.max())} wider than {bit_width} bits")
    packed = kind == _PACKED
    if not packed.any():
        return np.repeat(kind.astype(np.uint16), length)
    unpacked = _gather_unpack(buf, np.array(offsets)[packed], length[packed], bit_width)
    if packed.all():
        return unpacked
    out = np.repeat(np.where(packed, 0, kind).astype(np.uint16), length)
    out[np.repeat(packed, length)] = unpacked
    return out


def _scan_runs(buf: bytes, bit_width: int, count: int) -> tuple[list[int], list[int], list[int]]:
    """Walk run headers until `count` values are covered.

    Returns per run its RLE value (or _PACKED), the number of its values used and its
    payload offset. Only the last run may be cut short, and only its payload may reach
    past the data; the caller checks that. This loop is the hot path for streams with
    many short runs (random nulls), so it stays lean.
    """
    size = len(buf)
    value_bytes = (bit_width + 7) // 8
    value_mask = (1 << 8 * value_bytes) - 1
    padded = buf + b"\0\0"  # lets an RLE value be read as two bytes without a bounds check
    kinds: list[int] = []
    lengths: list[int] = []
    offsets: list[int] = []
    pos = produced = 0
    while produced < count:
        if pos >= size:
            raise MalformedFileError("level data ends before all levels were read")
        header = padded[pos]
        pos += 1
        if header >= 0x80:
            header, pos = _read_long_header(buf, pos - 1)
        offsets.append(pos)
        if header & 1:
            kinds.append(_PACKED)
            run = (header >> 1) * 8
            pos += (header >> 1) * bit_width
        else:
            kinds.append((padded[pos] | padded[pos + 1] << 8) & value_mask)
            run = header >> 1
            pos += value_bytes
        lengths.append(run)
        produced += run
    lengths[-1] -= produced - count
    return kinds, lengths, offsets


def _read_long_header(buf: bytes, pos: int) -> tuple[int, int]:
    """A ULEB128 run header of at most five bytes."""
    header = 0
    for shift in range(0, 7 * _MAX_HEADER_BYTES, 7):
        if pos >= len(buf):
            raise MalformedFileError("level data ends inside a run header")
        byte = buf[pos]
        pos += 1
        header |= (byte & 0x7F) << shift
        if byte < 0x80:
            return header, pos
    raise MalformedFileError("level run header is longer than five bytes")


def _gather_unpack(
    buf: bytes, offsets: np.ndarray, lengths: np.ndarray, bit_width: int
) -> np.ndarray:
    """Values of all bit-packed runs, in order, unpacked in one pass."""
    total = int(lengths.sum())
    if bit_width == 0:
        return np.zeros(total, dtype=np.uint16)
    # Every run but the last is whole groups, so the runs' bytes concatenate into one
    # stream of groups; the last run contributes only the bytes its used values need.
    nbytes = (lengths * bit_width + 7) // 8
    first = np.cumsum(nbytes) - nbytes
    index = np.repeat(offsets - first, nbytes) + np.arange(int(nbytes.sum()))
    return _unpack(np.frombuffer(buf, dtype=np.uint8)[index], bit_width, total)


def _unpack(raw: np.ndarray, bit_width: int, count: int) -> np.ndarray:
    """The first `count` values of LSB-first bit-packed bytes."""
    if bit_width == 8:
        return raw[:count].astype(np.uint16)
    bits = np.unpackbits(raw, count=count * bit_width, bitorder="little").reshape(count, bit_width)
    # One vectorized pass per bit position; np.packbits along rows is far slower.
    values = bits[:, 0].astype(np.uint16)
    for bit in range(1, bit_width):
        values |= bits[:, bit].astype(np.uint16) << bit
    return values
