"""The encoded-page kernels on hand-built streams: hybrid runs of every bit width, against what the
streams hold; and the negative status on every kind of cut-off or out-of-range input."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from pageindex.scan import kernels as k  # noqa: E402 - numba first


def _uleb(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _bit_packed(values: list[int], width: int) -> bytes:
    """One bit-packed run of the values, padded to a multiple of 8 values."""
    groups = -(-len(values) // 8)
    acc = 0
    for i, v in enumerate(values + [0] * (groups * 8 - len(values))):
        acc |= v << (i * width)
    return _uleb(groups << 1 | 1) + acc.to_bytes(groups * width, "little")


def _rle(value: int, count: int, width: int) -> bytes:
    return _uleb(count << 1) + value.to_bytes((width + 7) // 8, "little")


def _stream(values: list[int], width: int, rng: np.random.Generator) -> bytes:
    """The values as a mix of RLE and bit-packed runs (bit-packed runs of a multiple of 8, as
    writers make them, but the last)."""
    out, i = bytearray(), 0
    while i < len(values):
        if rng.random() < 0.4:
            j = i + 1
            while j < len(values) and values[j] == values[i]:
                j += 1
            out += _rle(values[i], j - i, width)
            i = j
        else:
            n = min(len(values) - i, 8 * int(rng.integers(1, 5)))
            out += _bit_packed(values[i:i + n], width)
            i += n
    return bytes(out)


@pytest.mark.parametrize("width", [0, 1, 2, 3, 7, 8, 9, 13, 16, 17, 24, 31, 32])
def test_index_kernels_every_width(width):
    rng = np.random.default_rng(width)
    size = min(1 << width, 5000)
    count = 3000
    indices = [int(v) for v in rng.integers(0, size, count)]
    indices[100:180] = [indices[100]] * 80  # a long run
    buf = np.frombuffer(bytes([width]) + _stream(indices, width, rng), np.uint8)
    entries = rng.normal(size=size)
    rank = np.argsort(np.argsort(entries, kind="stable"), kind="stable")
    lengths = rng.integers(0, 50, size)
    low, high, total, status = k.index_ranks(buf, 0, len(buf), count, rank, lengths)
    assert status == 0
    assert (low, high) == (rank[indices].min(), rank[indices].max())
    assert total == lengths[indices].sum()
    low, high, nan, status = k.index_values(buf, 0, len(buf), count, entries)
    assert status == 0 and not nan
    assert (low, high) == (entries[indices].min(), entries[indices].max())
    body = rng.integers(0, 256, 64 * size, dtype=np.uint8)
    starts = np.arange(size, dtype=np.int64) * 64
    low, high, total, status = k.index_bytes(buf, 0, len(buf), count, body, starts, lengths)
    as_bytes = [bytes(body[s:s + n]) for s, n in zip(starts, lengths)]
    referred = [as_bytes[i] for i in indices]
    assert status == 0 and total == lengths[indices].sum()
    assert (as_bytes[low], as_bytes[high]) == (min(referred), max(referred))


def test_index_values_sees_nan_and_unsigned():
    entries = np.array([1.0, np.nan, -3.0])
    buf = np.frombuffer(bytes([2]) + _bit_packed([0, 2, 1, 0], 2), np.uint8)
    low, high, nan, status = k.index_values(buf, 0, len(buf), 4, entries)
    assert status == 0 and nan and low == -3.0
    unsigned = np.array([1, 2**64 - 1, 5], np.uint64)
    low, high, nan, status = k.index_values(buf, 0, len(buf), 4, unsigned)
    assert (int(low), int(high), nan, status) == (1, 2**64 - 1, False, 0)


@pytest.mark.parametrize("case", ["no width byte", "width 33", "run cut off", "index past the end",
                                  "too few values", "empty RLE run"])
def test_index_kernels_refuse_bad_streams(case):
    good = bytes([3]) + _bit_packed([1, 2, 3, 4, 5, 6, 7, 0], 3)
    data, count = {
        "no width byte": (b"", 1),
        "width 33": (bytes([33]) + _rle(1, 4, 33), 4),
        "run cut off": (good[:-1], 8),
        "index past the end": (bytes([3]) + _rle(7, 8, 3), 8),
        "too few values": (good, 9),
        "empty RLE run": (bytes([3]) + _rle(1, 0, 3) + _rle(1, 8, 3), 8),
    }[case]
    buf = np.frombuffer(data, np.uint8)
    rank = np.arange(7, dtype=np.int64)
    assert k.index_ranks(buf, 0, len(buf), count, rank, rank)[-1] == k.BAD
    assert k.index_values(buf, 0, len(buf), count, rank.astype(np.float64))[-1] == k.BAD
    assert k.index_bytes(buf, 0, len(buf), count, np.zeros(7, np.uint8), rank, np.ones(7, np.int64))[-1] == k.BAD


def test_level_zeros():
    rng = np.random.default_rng(1)
    levels = [int(v) for v in rng.integers(0, 2, 1001)]
    levels[10:400] = [0] * 390
    buf = np.frombuffer(b"xx" + _stream(levels, 1, rng) + b"yy", np.uint8)
    assert k.level_zeros(buf, 2, len(buf) - 2, len(levels)) == levels.count(0)
    for bad in (_rle(2, 5, 1), _bit_packed([1] * 8, 1)[:-1], _rle(1, 0, 1)):
        buf = np.frombuffer(bad, np.uint8)
        assert k.level_zeros(buf, 0, len(buf), 5) == k.BAD


def test_plain_bytes_and_dictionary():
    values = [b"b", b"", b"\xff", b"ba", b"a" * 300]
    page = b"".join(len(v).to_bytes(4, "little") + v for v in values)
    buf = np.frombuffer(page, np.uint8)
    low, low_len, high, high_len, total, status = k.plain_bytes(buf, 0, len(buf), len(values))
    assert status == 0 and total == sum(map(len, values))
    assert (bytes(buf[low:low + low_len]), bytes(buf[high:high + high_len])) == (b"", b"\xff")
    assert k.plain_bytes(buf, 0, len(buf) - 1, len(values))[-1] == k.BAD
    offsets, data, lengths, status = k.plain_dictionary(buf, len(values))
    assert status == 0 and bytes(data) == b"".join(values) and lengths.tolist() == list(map(len, values))
    starts, lengths, status = k.entry_spans(buf, len(values))
    assert status == 0 and [bytes(buf[s:s + n]) for s, n in zip(starts, lengths)] == values
    assert k.plain_dictionary(buf, len(values) + 1)[-1] == k.BAD
    assert k.entry_spans(buf, len(values) + 1)[-1] == k.BAD
