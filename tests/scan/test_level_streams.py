"""Tests for pageindex.scan.level_streams against independent references.

References: a pure-Python encoder and per-value decoder written here, and pages written by pyarrow.
"""
from __future__ import annotations

import io
import random
import struct

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex.errors import MalformedFileError
from pageindex.scan import level_streams as levels
from pageindex.scan.level_streams import MAX_LEVEL, decode_hybrid, v1_bit_packed_levels, v1_hybrid_block
from tests.helpers.fuzz_mutations import varint
from tests.helpers.page_reader import DATA_PAGE, DATA_PAGE_V2, chunk_pages

# --- reference encoder / decoder -------------------------------------------------------


def rle_run(value: int, repeats: int, bit_width: int) -> bytes:
    return varint(repeats << 1) + value.to_bytes((bit_width + 7) // 8, "little")


def packed_run(values: list[int], bit_width: int) -> bytes:
    """Bit-packed run; values are padded with zeros to whole groups of eight."""
    values = list(values) + [0] * (-len(values) % 8)
    bits = 0
    for i, value in enumerate(values):
        bits |= value << (i * bit_width)
    return varint((len(values) // 8) << 1 | 1) + bits.to_bytes(len(values) * bit_width // 8, "little")


def reference_decode(data: bytes, bit_width: int, count: int, strict: bool = True) -> list[int] | None:
    """One value at a time, one bit at a time; None where the stream is invalid.

    Zero-length runs and run lengths of 2**31 or more are invalid (parquet-java reads lengths
    as an int; Arrow refuses both). strict: every bit-packed run must hold all its groups' bytes;
    otherwise only the bytes of the values used (readers differ on a cut-short last run).
    """
    out: list[int] = []
    pos = 0
    while len(out) < count:
        header = 0
        for i in range(6):
            if i == 5 or pos >= len(data):
                return None
            byte = data[pos]
            pos += 1
            header |= (byte & 0x7F) << (7 * i)
            if byte < 0x80:
                break
        if header >> 1 == 0 or header >> 1 >= 1 << 31:
            return None
        if header & 1:
            groups = header >> 1
            if strict and pos + groups * bit_width > len(data):
                return None
            for i in range(min(groups * 8, count - len(out))):
                value = 0
                for j in range(bit_width):
                    bit = i * bit_width + j
                    if pos + bit // 8 >= len(data):
                        return None
                    value |= ((data[pos + bit // 8] >> (bit % 8)) & 1) << j
                out.append(value)
            pos += groups * bit_width
        else:
            width = (bit_width + 7) // 8
            if pos + width > len(data):
                return None
            value = int.from_bytes(data[pos : pos + width], "little")
            if value >= 1 << bit_width:
                return None
            pos += width
            out.extend([value] * min(header >> 1, count - len(out)))
    return out


def decode_one(data: bytes | memoryview, bit_width: int, count: int) -> np.ndarray:
    """One stream whose levels may take every value of its bit width."""
    return decode_hybrid([(data, count)], (1 << bit_width) - 1)


def random_stream(rng: random.Random, bit_width: int) -> tuple[bytes, list[int]]:
    """A random mix of RLE and bit-packed runs (some with 2-byte headers)."""
    data = bytearray()
    values: list[int] = []
    top = (1 << bit_width) - 1
    for _ in range(rng.randint(1, 12)):
        if rng.random() < 0.5:
            value, repeats = rng.randint(0, top), rng.choice([1, 7, 8, 63, 64, 300])
            data += rle_run(value, repeats, bit_width)
            values += [value] * repeats
        else:
            run = [rng.randint(0, top) for _ in range(8 * rng.choice([1, 2, 64, 65]))]
            data += packed_run(run, bit_width)
            values += run
    return bytes(data), values


# --- synthetic streams ---------------------------------------------------------------


@pytest.mark.parametrize("bit_width", [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15])
def test_random_streams_match_encoder_and_reference(bit_width: int) -> None:
    rng = random.Random(bit_width)
    for _ in range(40):
        data, values = random_stream(rng, bit_width)
        count = rng.randint(0, len(values))
        decoded = decode_one(data, bit_width, count)
        assert decoded.dtype == np.int16
        assert decoded.tolist() == values[:count]
        assert decoded.tolist() == reference_decode(data, bit_width, count)


@pytest.mark.parametrize("bit_width", [1, 2, 8, 9, 15])
def test_single_runs_are_repeated_without_arrow(monkeypatch, bit_width: int) -> None:
    """Streams that are one RLE run of exactly their count (bytes after it unread, as Arrow leaves
    them) are decoded without Arrow, and equal the reference; any other stream goes to Arrow."""
    top = (1 << bit_width) - 1
    streams = [(rle_run(top, 5, bit_width), 5), (rle_run(0, 300, bit_width) + b"\xff\x07", 300),
               (rle_run(top // 2, 1, bit_width), 1), (rle_run(1, 0, bit_width), 0)]
    expected = sum((reference_decode(data, bit_width, count) for data, count in streams), [])
    to_arrow = [(rle_run(1, 6, bit_width), 5), (packed_run([1] * 8, bit_width), 8),
                (rle_run(1, 2, bit_width) + rle_run(1, 3, bit_width), 5)]
    with_arrow = decode_hybrid(streams + to_arrow, top).tolist()
    monkeypatch.setattr(levels.pq, "ParquetFile", None)
    assert decode_hybrid(streams, top).tolist() == expected == with_arrow[: len(expected)]
    for stream in to_arrow:
        with pytest.raises(TypeError):
            decode_hybrid([stream], top)


def test_streams_decoded_together_equal_each_alone() -> None:
    rng = random.Random(8)
    streams, expected = [], []
    for _ in range(30):
        data, values = random_stream(rng, 2)
        count = rng.choice([0, len(values), rng.randint(0, len(values))])
        streams.append((data, count))
        expected += values[:count]
    assert decode_hybrid(streams, 3).tolist() == expected
    assert decode_hybrid([(b"", 0), (b"", 0)], 3).tolist() == []


def test_full_int16_level_range() -> None:
    values = [0, 1, 255, 256, 32767, 12345, 7, 32766]
    data = packed_run(values, 15) + rle_run(32767, 5, 15)
    assert decode_hybrid([(data, 13)], MAX_LEVEL).tolist() == values + [32767] * 5
    with pytest.raises(MalformedFileError):
        decode_hybrid([(data, 13)], MAX_LEVEL + 1)
    with pytest.raises(MalformedFileError):
        decode_hybrid([(data, 13)], 0)


def test_levels_above_the_maximum_are_rejected() -> None:
    assert decode_hybrid([(rle_run(5, 3, 3), 3)], 5).tolist() == [5, 5, 5]
    with pytest.raises(MalformedFileError):
        decode_hybrid([(rle_run(6, 3, 3), 3)], 5)
    with pytest.raises(MalformedFileError):
        decode_hybrid([(packed_run([1, 6], 3), 2)], 5)
    with pytest.raises(MalformedFileError):  # in the second stream only
        decode_hybrid([(rle_run(1, 3, 3), 3), (packed_run([1, 7], 3), 2)], 5)


def test_padding_in_last_packed_run_is_ignored() -> None:
    data = packed_run([1, 0, 1], 1)  # one group: five padding values
    assert decode_one(data, 1, 3).tolist() == [1, 0, 1]


def test_run_longer_than_needed_is_truncated() -> None:
    assert decode_one(rle_run(1, 1_000_000, 1), 1, 3).tolist() == [1, 1, 1]


def test_huge_run_headers_do_not_allocate() -> None:
    huge = (1 << 31) - 1
    assert decode_one(varint(huge << 1) + b"\x02", 2, 1000).tolist() == [2] * 1000
    with pytest.raises(MalformedFileError):
        decode_one(varint((huge + 1) << 1) + b"\x02", 2, 1000)
    with pytest.raises(MalformedFileError):  # 2**28 groups promised, two bytes there
        decode_one(varint((1 << 28) << 1 | 1) + b"\xff" * 2, 1, 16)


def test_zero_length_runs_are_malformed() -> None:
    # parquet-java would read a value out of an empty run; Arrow refuses the stream.
    for data in (b"\x01" + rle_run(1, 4, 1), b"\x00\x01" + rle_run(1, 4, 1)):
        assert reference_decode(data, 1, 4) is None
        with pytest.raises(MalformedFileError):
            decode_one(data, 1, 4)


def test_negative_count_is_malformed() -> None:
    # A fuzzed page header can carry a negative num_values.
    with pytest.raises(MalformedFileError):
        decode_one(b"\x02\x01", 1, -1)


@pytest.mark.parametrize(
    "data, bit_width, count",
    [
        (b"", 1, 1),  # no data at all
        (rle_run(1, 5, 1), 1, 6),  # too few values
        (rle_run(1, 5, 1)[:-1], 1, 1),  # RLE value missing
        (rle_run(300, 5, 9)[:-1], 9, 1),  # two-byte RLE value cut in half
        (packed_run([1] * 16, 1)[:-1], 1, 16),  # bit-packed bytes missing
        (b"\x80\x80\x80\x80\x80\x00", 1, 1),  # six-byte header
        (b"\x80\x80", 1, 1),  # header cut off
        (rle_run(2, 3, 1), 1, 3),  # RLE value wider than the bit width
    ],
)
def test_malformed_streams(data: bytes, bit_width: int, count: int) -> None:
    assert reference_decode(data, bit_width, count, strict=False) is None
    with pytest.raises(MalformedFileError):
        decode_one(data, bit_width, count)


def test_random_bytes_agree_with_reference() -> None:
    """Valid under the strict reference: decoded alike. Invalid even under the lenient one:
    refused. In between (a last run cut short): refused or decoded alike."""
    rng = random.Random(7)
    seen = {"valid": 0, "invalid": 0}
    for _ in range(3000):
        bit_width = rng.randint(1, 9)
        count = rng.randint(1, 60)
        data = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 30)))
        strict = reference_decode(data, bit_width, count)
        lenient = reference_decode(data, bit_width, count, strict=False)
        try:
            decoded = decode_one(data, bit_width, count).tolist()
        except MalformedFileError:
            decoded = None
        if strict is not None:
            seen["valid"] += 1
            assert decoded == strict
        elif lenient is None:
            seen["invalid"] += 1
            assert decoded is None
        else:
            assert decoded in (None, lenient)
    assert min(seen.values()) > 100


def test_large_stream_of_many_runs() -> None:
    rng = np.random.default_rng(3)
    values = (rng.random(200_000) < 0.9).astype(int).tolist()
    data = bytearray()
    i = 0
    while i < len(values):  # greedy: RLE for 8+ repeats, else one bit-packed group
        j = i
        while j < len(values) and values[j] == values[i]:
            j += 1
        if j - i >= 8:
            data += rle_run(values[i], j - i, 1)
            i = j
        else:
            data += packed_run(values[i : i + 8], 1)
            i += 8
    assert decode_one(bytes(data), 1, len(values)).tolist() == values


def test_memoryview_input() -> None:
    data = b"xx" + rle_run(3, 4, 2)
    assert decode_one(memoryview(data)[2:], 2, 4).tolist() == [3] * 4


# --- page level sections ---------------------------------------------------------------


def test_v1_block_position() -> None:
    rep = rle_run(0, 1, 1) + rle_run(1, 3, 1)
    dfn = packed_run([2, 1, 0, 2], 2)
    body = b"junk" + struct.pack("<I", len(rep)) + rep + struct.pack("<I", len(dfn)) + dfn + b"values"
    stream, pos = v1_hybrid_block(body, 4)
    assert decode_hybrid([(stream, 4)], 1).tolist() == [0, 1, 1, 1]
    stream, pos = v1_hybrid_block(body, pos)
    assert decode_hybrid([(stream, 4)], 2).tolist() == [2, 1, 0, 2]
    assert body[pos:] == b"values"


@pytest.mark.parametrize("body", [b"", b"\x02\x00\x00", b"\x09\x00\x00\x00\x08\x01"])
def test_v1_bad_length_prefix(body: bytes) -> None:
    with pytest.raises(MalformedFileError):
        v1_hybrid_block(body, 0)


def test_v1_bit_packed_levels() -> None:
    values = [2, 1, 0, 2, 1, 1, 0, 2, 2]  # two bits each, most significant first
    bits = "".join(format(v, "02b") for v in values)
    packed = int(bits.ljust(24, "0"), 2).to_bytes(3, "big")
    levels, pos = v1_bit_packed_levels(b"x" + packed + b"rest", 1, 2, len(values))
    assert (levels.tolist(), pos) == (values, 4)
    with pytest.raises(MalformedFileError):  # 3 > max level 2
        v1_bit_packed_levels(b"\xff\xff\xff", 0, 2, 9)
    with pytest.raises(MalformedFileError):
        v1_bit_packed_levels(packed[:2], 0, 2, 9)


# --- pages written by pyarrow ----------------------------------------------------------


def data_pages(raw: bytes, chunk: pq.ColumnChunkMetaData):
    """(header, body) of each data page of an uncompressed column chunk."""
    for header, _, body in chunk_pages(raw, chunk):
        if header[1] in (DATA_PAGE, DATA_PAGE_V2):
            yield header, body


def page_levels(header: dict, body: bytes, max_rep: int, max_def: int) -> tuple[np.ndarray, np.ndarray]:
    def levels(stream: bytes | memoryview, max_level: int) -> np.ndarray:
        return decode_hybrid([(stream, count)], max_level) if max_level else np.zeros(count, np.int16)

    if header[1] == 0:
        count = header[5][1]
        rep, pos = v1_hybrid_block(body, 0) if max_rep else (b"", 0)
        dfn, _ = v1_hybrid_block(body, pos) if max_def else (b"", pos)
        return levels(rep, max_rep), levels(dfn, max_def)
    v2 = header[8]
    count, def_len, rep_len = v2[1], v2[5], v2[6]
    return levels(body[:rep_len], max_rep), levels(memoryview(body)[rep_len : rep_len + def_len], max_def)


# Schema nodes for a Dremel shredder: ("prim", nullable), ("list", nullable, element),
# ("struct", nullable, {name: node}).
def shred(value, node, path, d: int, r: int, depth: int, out: list) -> None:
    """Append (repetition, definition) pairs of one leaf for one value."""
    kind, nullable = node[0], node[1]
    if nullable:
        if value is None:
            out.append((r, d))
            return
        d += 1
    if kind == "prim":
        out.append((r, d))
    elif kind == "struct":
        if isinstance(value, tuple):  # a map entry
            value = dict(zip(("key", "value"), value))
        shred(value[path[0]], node[2][path[0]], path[1:], d, r, depth, out)
    elif not value:
        out.append((r, d))
    else:
        for i, item in enumerate(value):
            shred(item, node[2], path, d + 1, r if i == 0 else depth + 1, depth + 1, out)


def nested_table(rows: int) -> tuple[pa.Table, dict[str, tuple]]:
    rng = random.Random(11)

    def maybe(make, p_null=0.2):
        return None if rng.random() < p_null else make()

    def small_list(make):
        return [make() for _ in range(rng.choice([0, 1, 2, 3, 5]))]

    def num():
        return maybe(lambda: rng.randint(-50, 50))

    data = {
        "flat": [num() for _ in range(rows)],
        "lists": [maybe(lambda: small_list(lambda: maybe(lambda: small_list(num)))) for _ in range(rows)],
        "record": [maybe(lambda: {"a": num(), "b": maybe(lambda: small_list(num))}) for _ in range(rows)],
        "mapping": [
            maybe(lambda: [(f"k{i}", num()) for i in range(rng.choice([0, 1, 3]))]) for _ in range(rows)
        ],
    }
    types = {
        "flat": pa.int32(),
        "lists": pa.list_(pa.list_(pa.int32())),
        "record": pa.struct([("a", pa.int32()), ("b", pa.list_(pa.int32()))]),
        "mapping": pa.map_(pa.string(), pa.int32()),
    }
    prim = ("prim", True)
    nodes = {
        "flat": prim,
        "lists": ("list", True, ("list", True, prim)),
        "record": ("struct", True, {"a": prim, "b": ("list", True, prim)}),
        "mapping": ("list", True, ("struct", False, {"key": ("prim", False), "value": prim})),
    }
    table = pa.table({name: pa.array(values, types[name]) for name, values in data.items()})
    return table, nodes


# Leaf column paths as pyarrow names them, with the struct fields each one passes through.
LEAVES = {
    "flat": ("flat", []),
    "lists.list.element.list.element": ("lists", []),
    "record.a": ("record", ["a"]),
    "record.b.list.element": ("record", ["b"]),
    "mapping.key_value.key": ("mapping", ["key"]),
    "mapping.key_value.value": ("mapping", ["value"]),
}


@pytest.mark.parametrize("page_version", ["1.0", "2.0"])
def test_levels_of_pyarrow_pages_match_shredded_data(page_version: str) -> None:
    table, nodes = nested_table(3000)
    sink = io.BytesIO()
    pq.write_table(
        table, sink, compression="none", use_dictionary=False,
        data_page_version=page_version, max_rows_per_page=700,
    )
    raw = sink.getvalue()
    metadata = pq.ParquetFile(io.BytesIO(raw)).metadata
    checked = set()
    for i in range(metadata.num_columns):
        column = metadata.schema.column(i)
        chunk = metadata.row_group(0).column(i)
        top, path = LEAVES[column.path]
        expected: list = []
        for value in table.column(top).to_pylist():
            shred(value, nodes[top], path, 0, 0, 0, expected)
        pages = [
            page_levels(h, b, column.max_repetition_level, column.max_definition_level)
            for h, b in data_pages(raw, chunk)
        ]
        assert len(pages) > 1
        rep = np.concatenate([p[0] for p in pages])
        dfn = np.concatenate([p[1] for p in pages])
        assert list(zip(rep.tolist(), dfn.tolist())) == expected
        # pyarrow's own count of non-null leaf values
        assert int((dfn == column.max_definition_level).sum()) == chunk.statistics.num_values
        checked.add(column.path)
    assert checked == set(LEAVES)


def test_pyarrow_v1_page_many_random_nulls() -> None:
    rng = np.random.default_rng(5)
    count = 100_000
    valid = rng.random(count) > 0.1
    table = pa.table({"x": pa.array(np.arange(count, dtype=np.int64), mask=~valid)})
    sink = io.BytesIO()
    pq.write_table(
        table, sink, compression="none", use_dictionary=False,
        data_page_version="1.0", data_page_size=1 << 30, max_rows_per_page=count,
        write_batch_size=count,
    )
    raw = sink.getvalue()
    chunk = pq.ParquetFile(io.BytesIO(raw)).metadata.row_group(0).column(0)
    (header, body), = data_pages(raw, chunk)
    stream, pos = v1_hybrid_block(body, 0)
    levels = decode_hybrid([(stream, header[5][1])], 1)
    assert np.array_equal(levels, valid.astype(np.int16))
    assert int(levels.sum()) == chunk.statistics.num_values
    assert len(body) - pos == 8 * int(valid.sum())  # exactly the PLAIN int64 values remain
