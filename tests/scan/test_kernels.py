"""The encoded-page kernels on hand-built streams: hybrid runs of every bit width, against what the
streams hold; and the negative status on every kind of cut-off or out-of-range input."""
from __future__ import annotations

import numpy as np
import pytest


from pageindex.scan import hybrid_kernels as hk, plain_kernels as pk
from tests.helpers.fuzz_mutations import varint


def _bit_packed(values: list[int], width: int, pad: int = 0) -> bytes:
    """One bit-packed run of the values, padded with `pad` to a multiple of 8 values."""
    groups = -(-len(values) // 8)
    acc = 0
    for i, v in enumerate(values + [pad] * (groups * 8 - len(values))):
        acc |= v << (i * width)
    return varint(groups << 1 | 1) + acc.to_bytes(groups * width, "little")


def _rle(value: int, count: int, width: int) -> bytes:
    return varint(count << 1) + value.to_bytes((width + 7) // 8, "little")


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


@pytest.mark.parametrize("width", range(33))
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
    low, high, total, status = hk.index_ranks(buf, 0, len(buf), count, rank, lengths)
    assert status == 0
    assert (low, high) == (rank[indices].min(), rank[indices].max())
    assert total == lengths[indices].sum()
    low, high, nan, status = hk.index_values(buf, 0, len(buf), count, entries)
    assert status == 0 and not nan
    assert (low, high) == (entries[indices].min(), entries[indices].max())
    body = rng.integers(0, 256, 64 * size, dtype=np.uint8)
    starts = np.arange(size, dtype=np.int64) * 64
    low, high, total, status = hk.index_bytes(buf, 0, len(buf), count, body, starts, lengths)
    as_bytes = [bytes(body[s:s + n]) for s, n in zip(starts, lengths)]
    referred = [as_bytes[i] for i in indices]
    assert status == 0 and total == lengths[indices].sum()
    assert (as_bytes[low], as_bytes[high]) == (min(referred), max(referred))


def test_index_values_sees_nan_and_unsigned():
    entries = np.array([1.0, np.nan, -3.0])
    buf = np.frombuffer(bytes([2]) + _bit_packed([0, 2, 1, 0], 2), np.uint8)
    low, high, nan, status = hk.index_values(buf, 0, len(buf), 4, entries)
    assert status == 0 and nan and low == -3.0
    unsigned = np.array([1, 2**64 - 1, 5], np.uint64)
    low, high, nan, status = hk.index_values(buf, 0, len(buf), 4, unsigned)
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
    assert hk.index_ranks(buf, 0, len(buf), count, rank, rank)[-1] == hk.BAD
    assert hk.index_values(buf, 0, len(buf), count, rank.astype(np.float64))[-1] == hk.BAD
    assert hk.index_bytes(buf, 0, len(buf), count, np.zeros(7, np.uint8), rank, np.ones(7, np.int64))[-1] == hk.BAD


def test_level_zeros():
    rng = np.random.default_rng(1)
    levels = [int(v) for v in rng.integers(0, 2, 1001)]
    levels[10:400] = [0] * 390
    buf = np.frombuffer(b"xx" + _stream(levels, 1, rng) + b"yy", np.uint8)
    assert hk.level_zeros(buf, 2, len(buf) - 2, len(levels)) == levels.count(0)
    for bad in (_rle(2, 5, 1), _bit_packed([1] * 8, 1)[:-1], _rle(1, 0, 1)):
        buf = np.frombuffer(bad, np.uint8)
        assert hk.level_zeros(buf, 0, len(buf), 5) == hk.BAD


def test_plain_bytes_and_dictionary():
    values = [b"b", b"", b"\xff", b"ba", b"a" * 300]
    page = b"".join(len(v).to_bytes(4, "little") + v for v in values)
    buf = np.frombuffer(page, np.uint8)
    low, low_len, high, high_len, total, status = pk.plain_bytes(buf, 0, len(buf), len(values))
    assert status == 0 and total == sum(map(len, values))
    assert (bytes(buf[low:low + low_len]), bytes(buf[high:high + high_len])) == (b"", b"\xff")
    assert pk.plain_bytes(buf, 0, len(buf) - 1, len(values))[-1] == pk.BAD
    starts, lengths, status = pk.entry_spans(buf, len(values))
    assert status == 0 and [bytes(buf[s:s + n]) for s, n in zip(starts, lengths)] == values
    assert pk.entry_spans(buf, len(values) + 1)[-1] == pk.BAD


def _three(buf: np.ndarray, count: int, size: int) -> list[int]:
    """The status of each index kernel over the stream, for a dictionary of `size` entries."""
    rank = np.arange(size, dtype=np.int64)
    starts = np.arange(size, dtype=np.int64)
    return [hk.index_ranks(buf, 0, len(buf), count, rank, rank)[-1],
            hk.index_ranks(buf, 0, len(buf), count, rank, np.zeros(0, np.int64))[-1],
            hk.index_values(buf, 0, len(buf), count, rank.astype(np.float64))[-1],
            hk.index_bytes(buf, 0, len(buf), count, np.arange(size, dtype=np.uint8), starts,
                          np.ones(size, np.int64))[-1]]


@pytest.mark.parametrize("width", [1, 3, 8, 12, 25, 32])
def test_index_kernels_ignore_the_padding_past_count(width):
    # The last group's padding holds the greatest index the width can: past the dictionary, but
    # past `count` too, so not a value.
    size = min((1 << width) - 1, 5000)
    values = [size - 1, 0, size // 2, size - 1, 0]
    pad = (1 << width) - 1
    buf = np.frombuffer(bytes([width]) + _rle(0, 3, width) + _bit_packed(values, width, pad=pad), np.uint8)
    assert _three(buf, 8, size) == [0, 0, 0, 0]
    assert hk.index_ranks(buf, 0, len(buf), 8, np.arange(size, dtype=np.int64), np.zeros(0, np.int64))[:2] == (0, size - 1)
    assert set(_three(buf, 9, size)) == {hk.BAD}  # the padding is read as a value: past the dictionary


@pytest.mark.parametrize("width", [1, 2, 5, 8, 11, 16, 23, 29, 32])
@pytest.mark.parametrize("where", [0, 7, 200, 1000, 1006, 1007])
def test_index_kernels_refuse_an_index_past_the_dictionary(width, where):
    # One index past the dictionary, early in a long run (read by 8-byte windows) or in its last
    # values (read byte by byte where the window would pass the buffer's end), or an RLE run's.
    rng = np.random.default_rng(width * 7919 + where)
    size = max(1, min((1 << width) // 3, 5000))
    values = [int(v) for v in rng.integers(0, size, 1008)]
    good = bytes([width]) + _bit_packed(values, width) + _rle(size - 1, 5, width)
    assert _three(np.frombuffer(good, np.uint8), 1013, size) == [0, 0, 0, 0]
    values[where] = size + int(rng.integers(0, (1 << width) - size))
    packed = bytes([width]) + _bit_packed(values, width) + _rle(size - 1, 5, width)
    assert set(_three(np.frombuffer(packed, np.uint8), 1013, size)) == {hk.BAD}
    before = values[:where] or [0]
    rle = bytes([width]) + _bit_packed(before, width) + _rle(size, 3, width)
    assert set(_three(np.frombuffer(rle, np.uint8), -(-len(before) // 8) * 8 + 3, size)) == {hk.BAD}


@pytest.mark.parametrize("width", [0, 1, 4, 9, 17, 32])
def test_index_kernels_refuse_cut_off_streams(width):
    rng = np.random.default_rng(width)
    size = 1 << min(width, 12)
    values = [int(v) for v in rng.integers(0, size, 100)]
    whole = bytes([width]) + _rle(values[0], 20, width) + _bit_packed(values, width) + _rle(0, 10, width)
    assert _three(np.frombuffer(whole, np.uint8), 130, size) == [0, 0, 0, 0]
    runs = len(bytes([width]) + _rle(values[0], 20, width))
    # cut in the RLE run's value (widths above 0 have one), the bit-packed run's data, the last run
    cuts = [runs + 1, len(whole) - len(_rle(0, 10, width)) - 1, len(whole) - 1][0 if width else 1:]
    for cut in cuts:
        assert set(_three(np.frombuffer(whole[:cut], np.uint8), 130, size)) == {hk.BAD}, cut


def test_index_values_keeps_the_first_of_equal_entries():
    # 0.0 and -0.0 compare equal: the page's bounds are the first of them referred to, as before.
    entries = np.array([0.0, -0.0, 1.0])
    for first in (0, 1):
        buf = np.frombuffer(bytes([2]) + _bit_packed([first, 1 - first, 2, 1 - first], 2), np.uint8)
        low, high, nan, status = hk.index_values(buf, 0, len(buf), 4, entries)
        assert status == 0 and not nan and high == 1.0
        assert np.signbit(low) == bool(first)


def _page(values: list[bytes]) -> bytes:
    return b"".join(len(v).to_bytes(4, "little") + v for v in values)


def _strings(rng: np.random.Generator, n: int) -> list[bytes]:
    """Byte strings that tie on their first 8 bytes, are prefixes of each other, are empty, and
    hold bytes from 0x80 up (unsigned order), in random order."""
    stem = bytes(rng.integers(0, 256, 40, dtype=np.uint8))
    out = []
    for _ in range(n):
        kind = int(rng.integers(0, 5))
        if kind == 0:
            out.append(stem[:int(rng.integers(0, 41))])  # prefixes of each other, b"" among them
        elif kind == 1:  # the same first 8 bytes, then anything
            out.append(stem[:8] + bytes(rng.integers(0, 256, int(rng.integers(0, 12)), dtype=np.uint8)))
        elif kind == 2:  # short, from a tiny alphabet around 0x7f/0x80 and 0x00
            out.append(bytes(rng.choice([0, 1, 0x7F, 0x80, 0xFF], int(rng.integers(0, 10))).astype(np.uint8)))
        elif kind == 3:  # a shared prefix with zero bytes after it (b"ab" < b"ab\0")
            out.append(stem[:int(rng.integers(0, 10))] + b"\0" * int(rng.integers(0, 3)))
        else:
            out.append(bytes(rng.integers(0, 256, int(rng.integers(0, 20)), dtype=np.uint8)))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_plain_bytes_against_python_order(seed):
    rng = np.random.default_rng(seed)
    values = _strings(rng, int(rng.integers(1, 60)))
    page = _page(values)
    for buf, slack in ((np.frombuffer(page, np.uint8), 0), (np.frombuffer(page + b"\xff" * 9, np.uint8), 9)):
        low, low_len, high, high_len, total, status = pk.plain_bytes(buf, 0, len(buf) - slack, len(values))
        assert status == 0 and total == sum(map(len, values))
        assert bytes(buf[low:low + low_len]) == min(values)
        assert bytes(buf[high:high + high_len]) == max(values)


@pytest.mark.parametrize("seed", range(40))
def test_ranked_entries_against_python_order(seed):
    """The dictionary's order is Python's sort of the bytes (stable: equal entries in page order)."""
    rng = np.random.default_rng(seed)
    values = _strings(rng, int(rng.integers(0, 200)))
    buf = np.frombuffer(_page(values), np.uint8)
    starts, lengths, status = pk.entry_spans(buf, len(values))
    assert status == 0
    order = pk.ranked_entries(buf, starts, lengths)
    assert order.tolist() == sorted(range(len(values)), key=lambda i: values[i])


def test_plain_bytes_ties_on_eight_bytes():
    values = [b"abcdefgh\x80", b"abcdefgh", b"abcdefgh\x7f\xff", b"abcdefgh\x80\x00", b"abcdefg", b"abcdefgh\x00"]
    for order in (values, values[::-1]):
        buf = np.frombuffer(_page(order), np.uint8)
        low, low_len, high, high_len, _, status = pk.plain_bytes(buf, 0, len(buf), len(order))
        assert status == 0
        assert (bytes(buf[low:low + low_len]), bytes(buf[high:high + high_len])) == (b"abcdefg", b"abcdefgh\x80\x00")


@pytest.mark.parametrize("seed", range(5))
def test_plain_bytes_refuses_values_past_the_end(seed):
    values = _strings(np.random.default_rng(seed), 20)
    page = _page(values)
    for cut in range(len(page)):
        buf = np.frombuffer(page + b"\x01" * 16, np.uint8)  # bytes after the end: not the page's
        assert pk.plain_bytes(buf, 0, cut, len(values))[-1] == pk.BAD, cut


@pytest.mark.parametrize("width", range(1, 33))
def test_index_kernels_read_a_stream_to_its_last_byte(width):
    # A bit-packed run the buffer ends with: its last values are read byte by byte (an 8-byte
    # window would pass the end). An index past the dictionary there, with only its top bit set
    # (a read of too few bytes would see a smaller, valid index), is refused wherever it is.
    rng = np.random.default_rng(width)
    size = min(1 << (width - 1), 5000) if width > 1 else 1
    values = [int(v) for v in rng.integers(0, size, 64)]
    for where in [None, 0, *range(48, 64)]:
        held = list(values)
        if where is not None:
            held[where] = 1 << (width - 1)
        buf = np.frombuffer(bytes([width]) + _rle(0, 5, width) + _bit_packed(held, width), np.uint8)
        statuses = _three(buf, 69, size)
        assert statuses == ([0] * 4 if where is None else [hk.BAD] * 4), where
    buf = np.frombuffer(bytes([width]) + _rle(0, 5, width) + _bit_packed(values, width), np.uint8)
    rank = rng.permutation(size).astype(np.int64)
    low, high, total, status = hk.index_ranks(buf, 0, len(buf), 69, rank, np.zeros(0, np.int64))
    assert status == 0 and (low, high) == (rank[values + [0]].min(), rank[values + [0]].max())


@pytest.mark.parametrize("seed", range(20))
def test_plain_bytes_when_all_tie_on_eight_bytes(seed):
    # Every value has the same first 8 bytes: the least and greatest are decided after them.
    rng = np.random.default_rng(seed)
    stem = bytes(rng.integers(0, 256, 8, dtype=np.uint8))
    values = [stem + bytes(rng.choice([0, 1, 0x7F, 0x80, 0xFF], int(rng.integers(0, 4))).astype(np.uint8))
              for _ in range(int(rng.integers(2, 30)))]
    buf = np.frombuffer(_page(values), np.uint8)
    low, low_len, high, high_len, total, status = pk.plain_bytes(buf, 0, len(buf), len(values))
    assert status == 0 and total == sum(map(len, values))
    assert (bytes(buf[low:low + low_len]), bytes(buf[high:high + high_len])) == (min(values), max(values))


@pytest.mark.parametrize("dtype", ["<i4", "<i8", "<u4", "<u8"])
def test_plain_integers_against_numpy(dtype):
    rng = np.random.default_rng(3)
    info = np.iinfo(dtype)
    for n in (1, 2, 7, 1000):
        numbers = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        numbers[rng.integers(0, n)] = info.max if n % 2 else info.min
        unaligned = np.frombuffer(b"x" + numbers.tobytes(), np.uint8)[1:].view(dtype)  # as pages lie
        for held in (numbers, unaligned):
            low, high = pk.plain_integers(held)
            assert (int(low), int(high)) == (int(numbers.min()), int(numbers.max()))


@pytest.mark.parametrize("dtype", ["<i4", "<u4", "<i8", "<u8", "<f4", "<f8"])
def test_index_values_every_entry_type_at_any_alignment(dtype):
    # Each type the encoded path passes (a compiled loop per type), its extremes among the
    # entries, and entries lying at an odd address (a dictionary page read in place).
    rng = np.random.default_rng(len(dtype) + ord(dtype[1]))
    size = 300
    if dtype[1] == "f":
        entries = rng.normal(size=size).astype(dtype)
        entries[[3, 7]] = np.finfo(dtype).max, np.finfo(dtype).min
    else:
        info = np.iinfo(dtype)
        entries = rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True)
        entries[[3, 7]] = info.max, info.min
    indices = [int(v) for v in rng.integers(0, size, 500)] + [3, 7]
    buf = np.frombuffer(bytes([9]) + _stream(indices, 9, rng), np.uint8)
    unaligned = np.frombuffer(b"x" + entries.tobytes(), np.uint8)[1:].view(dtype)
    for held in (entries, unaligned):
        low, high, nan, status = hk.index_values(buf, 0, len(buf), len(indices), held)
        assert (status, nan) == (0, False)
        assert (low, high) == (entries[indices].min(), entries[indices].max())
        assert type(low) is (float if dtype[1] == "f" else int)
    assert hk.index_values(buf, 0, len(buf) - 1, len(indices), unaligned)[-1] == hk.BAD


def test_kernels_refuse_arrays_they_do_not_read():
    buf = np.frombuffer(bytes([1]) + _rle(0, 4, 1), np.uint8)
    with pytest.raises(TypeError, match="int16"):
        hk.index_values(buf, 0, len(buf), 4, np.zeros(2, np.int16))
    with pytest.raises(TypeError, match="float64"):
        pk.plain_integers(np.zeros(2, np.float64))  # floats: numpy's min and max keep NaN
    with pytest.raises(ValueError):
        hk.index_ranks(buf, 0, len(buf), 4, np.arange(3, dtype=np.int64), np.ones(2, np.int64))
