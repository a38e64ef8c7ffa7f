"""Bloom filter core (issue 27): XXH64 against the xxhash package, filters byte for byte against
pyarrow's (sizing by folding included), no false negatives, the false positive rate, the header and
the float rules."""
from __future__ import annotations

import decimal
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash

from pageindex.errors import MalformedFileError
from pageindex.format.footer import read_footer
from pageindex.format.parquet_thrift import ColumnChunk, ColumnMetaData, FileMetaData, RowGroup, Type
from pageindex.index.bloom.blob import (
    BloomFilter,
    build_filter,
    might_contain,
    parse_filter,
    probe_hash,
    read_filter,
)
from pageindex.index.bloom.chunk_hashes import chunk_hashes, eligible
from pageindex.index.bloom.hashing import BLOCK, xxh64_u64
from pageindex.index.bloom.path import ENV, NUMPY, kernel
from pageindex.index.bloom.sbbf import SALT, build, expected_fpp, optimal_bytes, set_bit_counts
from pageindex.io.storage import open_source
from pageindex.scan.chunk_scan import scan_chunk

RNG = np.random.default_rng(27)
pytestmark = pytest.mark.usefixtures("bloom_path")


def reference(values: list[bytes]) -> np.ndarray:
    return np.array([xxhash.xxh64_intdigest(v) for v in values], dtype=np.uint64)


def binary_parts(values: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """The values as Arrow holds them: data buffer and offsets."""
    offsets = np.concatenate([[0], np.cumsum([len(v) for v in values])]).astype(np.int64)
    return np.frombuffer(b"".join(values), dtype=np.uint8), offsets


# ---------------------------------------------------------------- XXH64


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.float32])
def test_xxh64_four_byte_words(xxh64, dtype):
    words = RNG.integers(0, 1 << 32, 5000, dtype=np.uint64).astype(np.uint32).view(dtype)
    assert (xxh64.xxh64_u32(words) == reference([w.tobytes() for w in words])).all()


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.float64])
def test_xxh64_eight_byte_words(xxh64, dtype):
    words = RNG.integers(0, 1 << 63, 5000, dtype=np.uint64).view(dtype)
    words[:3] = np.array([0, 1 << 63, (1 << 64) - 1], dtype=np.uint64).view(dtype)
    assert (xxh64.xxh64_u64(words) == reference([w.tobytes() for w in words])).all()


@pytest.mark.parametrize("width", [1, 2, 3, 4, 5, 7, 8, 12, 16, 31, 32, 33, 64, 100])
def test_xxh64_fixed_width(xxh64, width):
    data = RNG.integers(0, 256, width * 300, dtype=np.uint8)
    expected = reference([data[i * width:(i + 1) * width].tobytes() for i in range(300)])
    assert (xxh64.xxh64_fixed(data, width) == expected).all()


def test_xxh64_strings(xxh64):
    values = [b"", b"a", "é".encode(), "日本語のテキスト".encode(), "🦆" .encode() * 9, b"x" * 31, b"y" * 32,
              b"z" * 33, RNG.bytes(5000), RNG.bytes(100_003)]
    values += [RNG.bytes(int(n)) for n in RNG.integers(0, 300, 3000)]
    order = RNG.permutation(len(values))  # long and short values interleaved
    values = [values[i] for i in order]
    assert (xxh64.xxh64_offsets(*binary_parts(values)) == reference(values)).all()


def test_xxh64_across_blocks(xxh64):
    # More values than one block (BLOCK) of each kind: blocks and length groups meet correctly.
    count = 2 * BLOCK + 3
    words = RNG.integers(0, 1 << 63, count, dtype=np.uint64)
    assert (xxh64.xxh64_u64(words) == reference([w.tobytes() for w in words])).all()
    assert (xxh64.xxh64_u32(words.astype(np.uint32)) == reference([w.tobytes() for w in words.astype(np.uint32)])).all()
    values = [RNG.bytes(int(n)) for n in RNG.choice([3, 12, 40], count)]
    assert (xxh64.xxh64_offsets(*binary_parts(values)) == reference(values)).all()


def test_xxh64_binary_tiny_buffer(xxh64):
    values = [b"", b"ab", b""]
    assert (xxh64.xxh64_offsets(*binary_parts(values)) == reference(values)).all()


def test_xxh64_read_only_buffers_and_narrow_offsets(xxh64):
    """Read-only buffers (as a file's bytes are) with int32 offsets (string and binary arrays) and
    int64 ones (their large kinds), and read-only words."""
    values = [RNG.bytes(int(n)) for n in RNG.integers(0, 70, 700)]
    array = pa.array(values, pa.binary())
    data, offsets = (np.frombuffer(array.buffers()[i].to_pybytes(), dtype) for i, dtype in ((2, np.uint8), (1, np.int32)))
    assert (xxh64.xxh64_offsets(data, offsets) == reference(values)).all()
    assert (xxh64.xxh64_offsets(data, offsets.astype(np.int64)) == reference(values)).all()
    words = np.frombuffer(RNG.bytes(8 * 300), np.uint64)
    assert (xxh64.xxh64_u64(words) == reference([w.tobytes() for w in words])).all()
    assert (xxh64.xxh64_u32(words.view(np.uint32)) == reference([w.tobytes() for w in words.view(np.uint32)])).all()


def test_set_bit_counts_against_numpy():
    """Each count 0..32 and word counts that leave 0-3 over a step of four words, read-only words
    as a parsed filter's, on the path in force."""
    words = np.array([(1 << k) - 1 for k in range(33)] * 3, np.uint64).astype(np.uint32)
    words = np.concatenate([words, RNG.integers(0, 1 << 32, 1000, dtype=np.uint64).astype(np.uint32)])
    for size in (0, 1, 2, 3, 4, 5, 7, 99, len(words)):
        part = np.frombuffer(words[:size].tobytes(), np.uint32)
        expected = np.bincount([bin(int(w)).count("1") for w in part], minlength=33)
        assert set_bit_counts(part).tolist() == expected.tolist(), size


# ---------------------------------------------------------------- against pyarrow's filters


def pyarrow_filters(path: Path) -> dict[tuple[int, str], bytes]:
    """Every filter pyarrow wrote, located by ColumnMetaData fields 14 and 15."""
    data = path.read_bytes()
    with open_source(str(path)) as source:
        footer = read_footer(source)
    out = {}
    for rg in footer.metadata.get(FileMetaData.ROW_GROUPS).items:
        for i, cc in enumerate(rg.get(RowGroup.COLUMNS).items):
            meta = cc.get(ColumnChunk.META_DATA)
            offset, length = meta.get(ColumnMetaData.BLOOM_FILTER_OFFSET), meta.get(ColumnMetaData.BLOOM_FILTER_LENGTH)
            if offset is not None:
                out[len(out) // len(footer.leaves), footer.leaves[i].dotted] = data[offset:offset + length]
    return out


def our_filters(path: Path, fpp: float) -> dict[tuple[int, str], BloomFilter]:
    """Our filter of every eligible chunk, from the values pageindex's own scan decodes."""
    out = {}
    with open_source(str(path)) as source:
        footer = read_footer(source)
        for group in footer.chunks:
            for chunk in group:
                if eligible(chunk.leaf.physical_type):
                    values = scan_chunk(source, footer, chunk, True).values
                    assert values is not None, chunk.leaf.dotted
                    bloom = build_filter(values, chunk.leaf.physical_type, fpp)
                    out[chunk.row_group, chunk.leaf.dotted] = bloom
    return out


def fold(words: np.ndarray, num_bytes: int) -> np.ndarray:
    """A bitset folded down to `num_bytes`: block i of the half takes blocks 2i and 2i+1, since
    ((h >> 32) * n/2) >> 32 == (((h >> 32) * n) >> 32) >> 1."""
    grid = words.reshape(-1, 8)
    while 32 * len(grid) > num_bytes:
        grid = grid[0::2] | grid[1::2]
    return grid.ravel()


def inserted(values: pa.Array, ptype: int = Type.INT64) -> int:
    """The count our unfolded filter is sized for: pyarrow given it as ndv starts at our size."""
    return chunk_hashes(values, ptype).inserted


def pyarrow_filter(tmp_path: Path, values: pa.Array, ndv: int, fpp: float) -> BloomFilter:
    path = tmp_path / "one.parquet"
    pq.write_table(pa.table({"x": values}), path, bloom_filter_options={"x": {"ndv": ndv, "fpp": fpp}})
    return parse_filter(pyarrow_filters(path)[0, "x"])


def typed_table(n: int) -> pa.Table:
    ints = RNG.integers(-(1 << 62), 1 << 62, n)
    cents = [decimal.Decimal(int(x)).scaleb(-2) for x in RNG.integers(-10**8, 10**8, n)]
    return pa.table({
        "i8": pa.array(RNG.integers(-128, 128, n), pa.int8()),
        "u16": pa.array(RNG.integers(0, 1 << 16, n), pa.uint16()),
        "i32": pa.array(ints % (1 << 31), pa.int32()),
        "u32": pa.array(ints % (1 << 32), pa.uint32()),
        "i64": pa.array(ints),
        "f32": pa.array(RNG.normal(size=n), pa.float32()),
        "f64": pa.array(RNG.normal(size=n)),
        "date": pa.array((ints % 30000).astype(np.int32), pa.date32()),
        "ts": pa.array(ints % (1 << 50), pa.timestamp("us")),
        "s": pa.array([None if i % 5 == 0 else f"k{x}-ü" for i, x in enumerate(RNG.integers(0, n // 3, n))]),
        "b": pa.array([RNG.bytes(int(x)) for x in RNG.integers(0, 80, n)], pa.binary()),
        "empty": pa.array([""] * n),
        "uuid": pa.array([RNG.bytes(16) for _ in range(n)], pa.binary(16)),
        "dec9": pa.array(cents, pa.decimal128(9, 2)),
        "dec18": pa.array(cents, pa.decimal128(18, 2)),
        "dec30": pa.array(cents, pa.decimal128(30, 2)),
    })


@pytest.mark.parametrize("fpp", [0.001, 0.01, 0.05, 0.3])
@pytest.mark.parametrize("as_integer", [False, True])
def test_filters_match_pyarrow(tmp_path, fpp, as_integer):
    """pyarrow given as ndv the count we start from, the non-null values (every chunk of a column
    has the same: equal row groups, every fifth string null; no float zero or NaN) inserts the same hashes and folds by the same rule:
    header and bitset byte for byte. Decimals both ways: INT32/INT64 and big-endian
    FIXED_LEN_BYTE_ARRAY."""
    table = typed_table(6000)
    path = tmp_path / "typed.parquet"
    chunk = table[:2000]
    assert all(inserted(chunk[name], ptype) == 2000 for name, ptype in [("f32", Type.FLOAT), ("f64", Type.DOUBLE)])
    options = {name: {"ndv": 2000 - chunk[name].null_count, "fpp": fpp} for name in table.column_names}
    pq.write_table(table, path, row_group_size=2000, bloom_filter_options=options,
                   store_decimal_as_integer=as_integer)
    theirs = pyarrow_filters(path)
    assert len(theirs) == 3 * table.num_columns
    ours = our_filters(path, fpp)
    assert {key: bloom.to_bytes() for key, bloom in ours.items()} == theirs


def fold_edges(values: np.ndarray, fpp: float) -> list[int]:
    """The distinct counts k at which the filter of len(values) values drawn from values[:k]
    folds once less than from k - 1 (the fold count falls as k grows: each prefix's bits are a
    subset of the next one's), found by bisection between counts that fold differently."""
    count = len(values)

    def size(k: int) -> int:
        return build_filter(pa.array(values[:k][np.arange(count) % k]), Type.INT64, fpp).num_bytes

    edges, pending = [], [(1, count)]
    while pending:
        low, high = pending.pop()
        if size(low) == size(high):
            continue
        if high == low + 1:
            edges.append(high)
            continue
        mid = (low + high) // 2
        pending += [(low, mid), (mid, high)]
    return sorted(edges)


@pytest.mark.parametrize("count, fpp", [(3000, 0.01), (1000, 0.2)])
def test_fold_edges_match_pyarrow(tmp_path, count, fpp):
    """On both sides of every distinct count where the fold count changes, found by search, the
    filter is pyarrow's byte for byte (values repeated so the row count is not the distinct
    count): the same popcount, the same double arithmetic, the same comparison."""
    values = RNG.permutation(np.unique(RNG.integers(0, 1 << 40, 2 * count)))[:count]
    edges = fold_edges(values, fpp)
    assert len(edges) >= 3, edges
    table = {}
    for k in edges:
        for side in (k - 1, k):
            table[f"k{side}"] = pa.array(values[:side][np.arange(count) % side])
    path = tmp_path / "edges.parquet"
    pq.write_table(pa.table(table), path, bloom_filter_options={c: {"ndv": count, "fpp": fpp} for c in table})
    ours = our_filters(path, fpp)
    theirs = pyarrow_filters(path)
    assert {key: bloom.to_bytes() for key, bloom in ours.items()} == theirs
    sizes = [ours[0, f"k{k}"].num_bytes for k in edges]
    assert all(ours[0, f"k{k - 1}"].num_bytes == size // 2 for k, size in zip(edges, sizes))


def test_a_capped_start_folds_by_the_same_rule(tmp_path):
    """Capped by max_bytes, we start smaller than pyarrow (it starts at the size for all the
    values, up to 128 MiB), so its fold decision can differ. What must hold: ours is pyarrow's
    filter when pyarrow starts at our capped size, and both hold the same bits, the larger
    folded to the smaller's size."""
    values = pa.array(RNG.permutation(1 << 20)[:40_000].astype(np.int64))
    cap = 4096
    ours = build_filter(values, Type.INT64, 0.01, max_bytes=cap)
    assert optimal_bytes(len(values), 0.01) > cap and ours.num_bytes == cap
    ndv_at_cap = next(n for n in range(1, len(values)) if optimal_bytes(n + 1, 0.01) > cap)
    assert optimal_bytes(ndv_at_cap, 0.01) == cap
    assert ours.to_bytes() == pyarrow_filter(tmp_path, values, ndv_at_cap, 0.01).to_bytes()
    uncapped = pyarrow_filter(tmp_path, values, len(values), 0.01)
    small, large = sorted([ours, uncapped], key=lambda f: f.num_bytes)
    assert (fold(large.words, small.num_bytes) == small.words).all()
    few = pa.array(np.arange(50, dtype=np.int64)[np.arange(len(values)) % 50])  # folds far below the cap
    assert build_filter(few, Type.INT64, 0.01, cap).to_bytes() == pyarrow_filter(tmp_path, few, ndv_at_cap, 0.01).to_bytes()


@pytest.mark.parametrize("dtype", [pa.float32(), pa.float64()])
def test_float_extras_match_pyarrow_when_already_present(tmp_path, dtype):
    """With both zeros and the canonical NaN in the data, the extras add no new bits: pyarrow's
    bytes, given as ndv the count with the extras."""
    data = np.concatenate([RNG.normal(size=3000), [0.0, -0.0, np.nan, np.nan]])
    values = pa.array(RNG.permutation(data), dtype)
    ptype = Type.FLOAT if dtype == pa.float32() else Type.DOUBLE
    assert inserted(values, ptype) == len(values) + 3  # two zeros and one NaN added
    ours = build_filter(values, ptype)
    assert ours.to_bytes() == pyarrow_filter(tmp_path, values, inserted(values, ptype), 0.01).to_bytes()


def test_signed_zero_differs_from_pyarrow_by_the_other_zero(tmp_path):
    """Not identical on purpose: pyarrow inserts -0.0 only, we insert 0.0 too (an engine probes
    `x = 0.0` with 0.0's bytes). Our bitset is pyarrow's plus exactly +0.0's bits."""
    values = pa.array(np.concatenate([RNG.normal(size=500), [-0.0]]))
    assert inserted(values, Type.DOUBLE) == 503
    theirs = pyarrow_filter(tmp_path, values, 503, 0.01)
    ours = build_filter(values, Type.DOUBLE)
    assert ours.num_bytes == theirs.num_bytes
    assert not (ours.words == theirs.words).all()
    plus_zero = build(np.array([probe_hash(0.0, Type.DOUBLE)]), theirs.num_bytes)
    assert (ours.words == (theirs.words | plus_zero)).all()


def test_dictionary_values_give_the_plain_filter():
    plain = pa.array([f"v{x}" for x in RNG.integers(0, 400, 3000)] + [None])
    encoded = pa.chunked_array([plain[:1000].dictionary_encode(), plain[1000:].dictionary_encode()])
    assert (build_filter(encoded, Type.BYTE_ARRAY).words == build_filter(plain, Type.BYTE_ARRAY).words).all()


def test_sliced_arrays_hash_their_own_values():
    strings = pa.array([f"s{i}" for i in range(100)])
    ints = pa.array(np.arange(100, dtype=np.int64))
    whole = chunk_hashes(pa.array([f"s{i}" for i in range(40, 60)]), Type.BYTE_ARRAY).hashes
    assert (chunk_hashes(strings[40:60], Type.BYTE_ARRAY).hashes == whole).all()
    expected = xxh64_u64(np.arange(40, 60, dtype=np.int64))
    assert (chunk_hashes(ints[40:60], Type.INT64).hashes == expected).all()


def insert_reference(hashes: np.ndarray, num_bytes: int) -> np.ndarray:
    """BloomFilter.md's insert, one hash at a time in Python integers."""
    words = [0] * (num_bytes // 4)
    for h in map(int, hashes):
        block = ((h >> 32) * (num_bytes // 32)) >> 32
        for i, salt in enumerate(SALT.tolist()):
            words[8 * block + i] |= 1 << ((((h & 0xFFFFFFFF) * salt) & 0xFFFFFFFF) >> 27)
    return np.array(words, dtype=np.uint32)


def test_build_sets_the_spec_bits_in_any_order():
    """Unsorted hashes with duplicates and the hash 0, on the path in force, against the spec's
    insert done by hand."""
    hashes = RNG.integers(0, 1 << 64, 3000, dtype=np.uint64, endpoint=False)
    hashes = RNG.permutation(np.concatenate([hashes, hashes[:500], np.zeros(3, np.uint64)]))
    for num_bytes in (32, 1024, 8192):
        assert (build(hashes, num_bytes) == insert_reference(hashes, num_bytes)).all()


def test_the_switch(monkeypatch, bloom_path):
    assert (kernel() is None) == (bloom_path == NUMPY)
    monkeypatch.setenv(ENV, "fortran")
    with pytest.raises(ValueError, match=ENV):
        kernel()


# ---------------------------------------------------------------- membership


@pytest.mark.parametrize("fpp", [0.01, 0.05])
def test_no_false_negatives_and_absent_rate_near_fpp(fpp):
    present = RNG.permutation(1 << 24)[:20_000].astype(np.int64)
    absent = np.arange(1 << 24, (1 << 24) + 200_000, dtype=np.int64)
    bloom = build_filter(pa.array(present), Type.INT64, fpp)
    assert bloom.might_contain_hashes(xxh64_u64(present)).all()
    rate = bloom.might_contain_hashes(xxh64_u64(absent)).mean()
    # Sizing rounds up to a power of two: the formula read backwards at the size is below fpp.
    # Blocks fill unevenly, so the measured rate sits above that estimate, but not far.
    estimate = expected_fpp(len(present), bloom.num_bytes)
    assert estimate <= fpp
    assert estimate < rate < min(fpp, 3 * estimate), (estimate, rate)


def test_might_contain_every_type():
    cases = [
        (Type.INT32, pa.array([-5, 0, 7, 2**31 - 1], pa.int32()), [-5, 7], [6, -6]),
        (Type.INT64, pa.array([-(2**63), 1, 10**15]), [-(2**63), 10**15], [2, 3]),
        (Type.FLOAT, pa.array([1.5, -2.25], pa.float32()), [1.5, -2.25], [1.25, 2.25]),
        (Type.DOUBLE, pa.array([0.1, 1e300]), [0.1, 1e300], [0.2, -1e300]),
        (Type.BYTE_ARRAY, pa.array(["", "ä", None]), ["", "ä", b""], ["a", " "]),
        (Type.FIXED_LEN_BYTE_ARRAY, pa.array([b"\x00\x01", b"\xff\xfe"], pa.binary(2)), [b"\x00\x01"], [b"\x01\x00"]),
    ]
    for ptype, values, inside, outside in cases:
        bloom = build_filter(values, ptype, 0.0001)
        assert all(might_contain(bloom, v, ptype) for v in inside), ptype
        assert not any(might_contain(bloom, v, ptype) for v in outside), ptype


@pytest.mark.parametrize("ptype, dtype, zero", [(Type.FLOAT, pa.float32(), "<f"), (Type.DOUBLE, pa.float64(), "<d")])
def test_float_zeros_and_nan(ptype, dtype, zero):
    """Either zero in the data puts both in the filter; a NaN with any payload puts the
    canonical quiet NaN in too, besides its own bits."""
    odd_nan = np.array([0x7FF0000000000123], dtype=np.uint64).view(np.float64)[0]
    if ptype == Type.FLOAT:
        odd_nan = np.array([0xFFC00123], dtype=np.uint32).view(np.float32)[0]
    for data, probes in [([-0.0, 3.0], [0.0, -0.0]), ([0.0], [-0.0]), ([odd_nan, 1.0], [float("nan"), odd_nan])]:
        bloom = build_filter(pa.array(data, dtype), ptype, 0.0001)
        assert all(might_contain(bloom, p, ptype) for p in probes), (data, probes)
    assert struct.pack(zero, float("nan")) == struct.pack(zero, np.array([np.nan], dtype=zero)[0])
    plain = build_filter(pa.array([1.0, 2.0], dtype), ptype, 0.0001)
    assert plain.ndv == 2 and not might_contain(plain, 0.0, ptype) and not might_contain(plain, float("nan"), ptype)


def test_nulls_and_booleans():
    nulls = chunk_hashes(pa.array([None, None], pa.int64()), Type.INT64)
    assert len(nulls.hashes) == 0 and nulls.inserted == 0
    for values in (pa.array([None], pa.string()), pa.array([], pa.string())):
        empty = build_filter(values, Type.BYTE_ARRAY)
        assert empty.ndv == 0 and empty.num_bytes == 32 and not empty.words.any()


def test_an_all_null_chunk_is_pyarrows_empty_filter(tmp_path):
    """pyarrow writes the 32-byte empty filter whatever ndv it was given (no bit set)."""
    values = pa.array([None] * 100, pa.int64())
    assert build_filter(values, Type.INT64).to_bytes() == pyarrow_filter(tmp_path, values, 5000, 0.01).to_bytes()
    assert not eligible(Type.BOOLEAN) and not eligible(Type.INT96)
    with pytest.raises(ValueError):
        chunk_hashes(pa.array([True]), Type.BOOLEAN)


# ---------------------------------------------------------------- sizing and serialization


def test_optimal_bytes():
    assert optimal_bytes(0, 0.01) == 32
    assert optimal_bytes(1, 0.01) == 32
    assert optimal_bytes(846, 0.01) == 1024 and optimal_bytes(847, 0.01) == 2048
    assert optimal_bytes(10**9, 0.01) == 1 << 20
    assert optimal_bytes(10**9, 0.01, max_bytes=1 << 27) == 1 << 27
    for bad in [dict(fpp=0.0), dict(fpp=1.0), dict(fpp=0.01, max_bytes=3000), dict(fpp=0.01, max_bytes=16)]:
        with pytest.raises(ValueError):
            optimal_bytes(10, **bad)


def test_header_round_trip_and_checks():
    bloom = build_filter(pa.array(np.arange(1000)), Type.INT64)
    blob = bloom.to_bytes()
    assert blob[:len(bloom.header())] == bloom.header() and len(bloom.header()) == 16
    assert (parse_filter(blob, len(blob)).words == bloom.words).all()
    with pytest.raises(MalformedFileError, match="length"):
        parse_filter(blob, len(blob) + 1)
    with pytest.raises(MalformedFileError, match="ends after"):
        parse_filter(blob[:-1])
    with pytest.raises(MalformedFileError, match="numBytes"):
        parse_filter(BloomFilter(np.zeros(12, np.uint32)).to_bytes())


def test_read_filter_from_a_file(tmp_path):
    path = tmp_path / "read.parquet"
    pq.write_table(pa.table({"x": np.arange(5000)}), path, bloom_filter_options={"x": {"ndv": 5000, "fpp": 0.01}})
    with open_source(str(path)) as source:
        meta = read_footer(source).metadata.get(FileMetaData.ROW_GROUPS).items[0].get(RowGroup.COLUMNS).items[0].get(ColumnChunk.META_DATA)
        offset, length = meta.get(ColumnMetaData.BLOOM_FILTER_OFFSET), meta.get(ColumnMetaData.BLOOM_FILTER_LENGTH)
        with_length, without = read_filter(source, offset, length), read_filter(source, offset, None)
        with pytest.raises(MalformedFileError, match="length"):
            read_filter(source, offset, length - 1)
    assert (with_length.words == without.words).all()
    assert all(might_contain(with_length, v, Type.INT64) for v in (0, 4999))
    assert not might_contain(with_length, 5000, Type.INT64) or not might_contain(with_length, -1, Type.INT64)
