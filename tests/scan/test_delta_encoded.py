"""DELTA_BINARY_PACKED, DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY and BYTE_STREAM_SPLIT pages bounded
from their encoded bytes (scan/delta_kernels.pyx, scan/delta_values.py): the kernels against pyarrow's
decode and a test encoder, whole files to the Arrow path's index bytes, damaged pages to its outcome."""
from __future__ import annotations

import decimal
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex.errors import PageIndexError
from pageindex.format.footer import read_footer
from pageindex.format.parquet_thrift import Encoding
from pageindex.index.plan import plan_chunks
from pageindex.io.storage import open_source
from pageindex.scan import chunk_scan, delta_values, encoded
from pageindex.scan.page_walk import walk_chunk
from tests.helpers.both_paths import indexes, same_on_both_paths, scan_kernel
from tests.helpers.corpus import corpus_path
from tests.helpers.fuzz_mutations import varint
from tests.helpers.writers import pyarrow_each

dk = pytest.importorskip("pageindex.scan.delta_kernels")

ROWS = 3000
DBP, DLBA, DBA, BSS = "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY", "BYTE_STREAM_SPLIT"


def _zigzag(v: int) -> int:
    return (v << 1) ^ (v >> 63) if v < 0 else v << 1


def encode_dbp(values: list[int], bits: int, block: int = 128, minis: int = 4, widths: dict | None = None) -> bytes:
    """A test DELTA_BINARY_PACKED encoder (deltas mod 2**bits); `widths` forces a miniblock's bit width."""
    mod = 1 << bits
    signed = lambda x: x - mod if x >= mod >> 1 else x  # noqa: E731
    out = bytearray(varint(block) + varint(minis) + varint(len(values)) + varint(_zigzag(signed(values[0] % mod))))
    deltas = [signed((b - a) % mod) for a, b in zip(values, values[1:])]
    per = block // minis
    for start in range(0, len(deltas), block):
        chunk = deltas[start:start + block]
        low = min(chunk)
        out += varint(_zigzag(low))
        packed = [(d - low) % mod for d in chunk]
        used = -(-len(chunk) // per)
        ws = [max(packed[m * per:(m + 1) * per]).bit_length() if m < used else 0 for m in range(minis)]
        for m, w in (widths or {}).items():
            ws[m] = w
        out += bytes(ws)
        for m in range(used):
            field = packed[m * per:(m + 1) * per] + [0] * per
            acc = sum(v << (i * ws[m]) for i, v in enumerate(field[:per]))
            out += acc.to_bytes(per * ws[m] // 8, "little")
    return bytes(out)


def _decode(stream: bytes, count: int, bits: int) -> tuple[int, np.ndarray]:
    out = np.empty(count, np.uint32 if bits == 32 else np.uint64)
    end = dk.delta_binary(np.frombuffer(stream, np.uint8), 0, len(stream), out, bits)
    return end, out


@pytest.mark.parametrize("bits", [32, 64])
def test_every_bit_width_against_the_test_encoder(bits):
    """Each miniblock width 0..bits (deltas needing exactly that width), last miniblock partial, a
    block holding one value. Mutation caught: a window read for widths above 56 (loses high bits)."""
    rng = np.random.default_rng(3)
    for width in range(bits + 1):
        for count in (1, 2, 33, 129, 300):
            top = (1 << width) - 1
            deltas = [int(x) for x in rng.integers(0, 1 << min(width, 62), count)] if width else [0] * count
            if width and count > 2:
                deltas[1], deltas[2] = top, 0  # the block's deltas span exactly `width` bits
            values, v = [], 12345
            for d in deltas:
                v = (v + d) % (1 << bits)
                values.append(v)
            stream = encode_dbp(values, bits)
            end, out = _decode(stream + b"\0" * 3, count, bits)
            assert end == len(stream), (width, count)
            assert out.tolist() == values, (width, count)


@pytest.mark.parametrize("layout", [(128, 1), (128, 4), (256, 8), (1024, 32), (384, 3)])
def test_miniblock_layouts_and_zero_width(layout):
    """Layouts of blocks and miniblocks, a constant run (zero-width miniblocks), an unused miniblock
    of any width. Mutation caught: unused miniblocks' widths checked (Arrow reads any)."""
    block, minis = layout
    values = [7] * 200 + list(range(200, 0, -1)) + [2**40, -2**40 % 2**64]
    stream = encode_dbp(values, 64, block, minis)
    end, out = _decode(stream, len(values), 64)
    assert end == len(stream) and out.tolist() == values
    short = [1, 2, 3]
    stream = encode_dbp(short, 64, block, minis, widths={minis - 1: 200} if minis > 1 else None)
    end, out = _decode(stream, 3, 64)
    assert end == len(stream) and out.tolist() == short


def test_refusals():
    """Cut off at every byte, a width above the integer's, a count other than the page's, a bad
    block size, a varint wider than 32 bits: BAD. Mutation caught: `total != n` dropped."""
    values = list(range(0, 5000, 7))
    stream = encode_dbp(values, 32)
    for cut in range(len(stream)):
        assert _decode(stream[:cut], len(values), 32)[0] < 0, cut
    assert _decode(stream, len(values) - 1, 32)[0] < 0
    assert _decode(stream, len(values) + 1, 32)[0] < 0
    wide = encode_dbp(values, 64, widths={0: 33})
    assert _decode(wide, len(values), 32)[0] < 0
    assert _decode(varint(100) + stream[2:], len(values), 32)[0] < 0  # block size 100
    assert _decode(stream[:3] + varint(1 << 33) + stream[3 + len(varint(0)):], len(values), 32)[0] < 0


@pytest.mark.parametrize("dtype", ["<u4", "<u8"])
def test_byte_streams_against_numpy(dtype):
    """Streams made by numpy's transposition, put back by the kernel (1, 2 and 1000 values)."""
    rng = np.random.default_rng(6)
    for count in (1, 2, 1000):
        values = rng.integers(0, np.iinfo(dtype).max, count, dtype=np.uint64).astype(dtype)
        streams = np.ascontiguousarray(values.view(np.uint8).reshape(count, -1).T).reshape(-1)
        out = np.empty(count, dtype)
        dk.byte_streams(streams, out)
        assert out.tolist() == values.tolist()


@pytest.mark.parametrize("dtype", ["<u4", "<u8"])
def test_byte_streams_other_sizes(dtype):
    """Fewer streams than the word has bytes, more, and a cut-off one (the caller refuses such
    pages; the kernel puts back the whole streams there are, bytes past the word shifted out)."""
    rng = np.random.default_rng(12)
    count = 37
    for streams in range(9):
        for extra in (0, 5):
            buf = rng.integers(0, 256, count * streams + extra, dtype=np.uint64).astype(np.uint8)
            expected = np.zeros(count, np.uint64)
            for k in range(min(streams, np.dtype(dtype).itemsize)):
                expected |= buf[k * count:(k + 1) * count].astype(np.uint64) << np.uint64(8 * k)
            out = np.full(count, 7, dtype)
            dk.byte_streams(buf, out)
            assert out.tolist() == expected.astype(dtype).tolist(), (streams, extra)


def _byte_values(rng: np.random.Generator) -> list[bytes]:
    """Values tied wherever the kernels compare: equal ones, one a prefix of another, ones equal
    in their first 8 or 16 bytes, the empty value, bytes 0x00 and 0xFF; then short random ones."""
    eight = b"abcdefgh"
    values = [b"", b"\x00", b"\xff", b"a", b"a\x00", eight, eight + b"\x00", eight + b"i", eight * 2 + b"x",
              eight * 2 + b"y", eight * 3, b"\xff" * 20, b"\xff" * 20 + b"\x00", b"a"]
    return values + [bytes((rng.integers(0, 3, int(n)) + 0x61).astype(np.uint8)) for n in rng.integers(0, 20, 300)]


def _orders(values: list[bytes], rng: np.random.Generator) -> list[list[bytes]]:
    return [sorted(values), sorted(values, reverse=True)] + [list(rng.permutation(np.array(values, object)))
                                                               for _ in range(4)]


def test_span_bounds_against_python():
    """DELTA_LENGTH_BYTE_ARRAY's values laid end to end: the least and greatest (the first of
    equal ones), to Python's byte order; a negative length and values past the end refused."""
    rng = np.random.default_rng(13)
    for values in _orders(_byte_values(rng), rng):
        buf = np.frombuffer(b"pad" + b"".join(values) + b"tail!", np.uint8)
        lengths = np.array([len(v) for v in values], np.int32)
        starts = [3 + sum(map(len, values[:i])) for i in range(len(values))]
        least, most = values.index(min(values)), values.index(max(values))
        expected = (starts[least], len(values[least]), starts[most], len(values[most]), int(lengths.sum()), 0)
        assert dk.span_bounds(buf, 3, len(buf) - 5, lengths) == expected
        assert dk.span_bounds(buf, 3, len(buf) - 6, lengths)[-1] < 0  # the last value runs past the end
        bad = lengths.copy()
        bad[len(bad) // 2] = -1
        assert dk.span_bounds(buf, 3, len(buf) - 5, bad)[-1] < 0


def _front_coded(values: list[bytes], rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """DELTA_BYTE_ARRAY's parts of `values`: prefix lengths (any shared prefix, not only the
    longest), suffix lengths, and the suffixes end to end between 3 and 5 bytes of padding."""
    prefixes, suffixes, before = [], [], b""
    for v in values:
        common = next((k for k, (x, y) in enumerate(zip(before, v)) if x != y), min(len(before), len(v)))
        keep = int(rng.integers(0, common + 1))
        prefixes.append(keep)
        suffixes.append(v[keep:])
        before = v
    buf = np.frombuffer(b"pad" + b"".join(suffixes) + b"tail!", np.uint8)
    return np.array(prefixes, np.int32), np.array([len(x) for x in suffixes], np.int32), buf


def test_front_coded_against_python():
    """DELTA_BYTE_ARRAY's values rebuilt from prefixes and suffixes: the least and greatest to
    Python's byte order and the total length; each refusal (a negative length, a prefix longer
    than the value before, suffixes past the end, a value over `longest`) gives BAD."""
    rng = np.random.default_rng(14)
    for values in _orders(_byte_values(rng), rng):
        prefixes, lengths, buf = _front_coded(values, rng)
        longest, end = max(map(len, values)), len(buf) - 5
        least, most, total, status = dk.front_coded(buf, 3, end, prefixes, lengths, longest)
        assert (least.tobytes(), most.tobytes(), total, status) == (min(values), max(values), sum(map(len, values)), 0)
        i = int(np.argmax(prefixes > 0))  # a value sharing a prefix with the one before
        refused = [(prefixes, lengths, end - 1, longest), (prefixes, lengths, end, longest - 1)]
        for array, at, change in ((prefixes, i, -prefixes[i] - 1), (lengths, i, -lengths[i] - 1),
                                  (prefixes, i, len(values[i - 1]) - prefixes[i] + 1)):
            changed = array.copy()
            changed[at] += change
            refused.append((changed, lengths, end, longest) if array is prefixes else (prefixes, changed, end, longest))
        for p, s, stop, most_bytes in refused:
            least, most, _, status = dk.front_coded(buf, 3, stop, p, s, most_bytes)
            assert status < 0 and len(least) == len(most) == 0


def _sections(path: Path, column: int = 0) -> list[tuple[np.ndarray, int]]:
    """Each page's values section (a copy) and defined values, of the file's first chunk of `column`."""
    with scan_kernel(encoded.COMPILED):
        source = open_source(str(path))
        footer = read_footer(source)
        planned = plan_chunks(footer, trust_page_stats=False)[0][column]
        pages = walk_chunk(source, planned.chunk, footer.footer_start)
        scanner = encoded.Scanner(encoded.kernels(), planned.chunk, planned.order, pages)
        out = []
        for page in pages.pages:
            values, nulls = scanner._sections(page)
            out.append((np.array(np.frombuffer(values, np.uint8)), page.num_values - nulls))
        source.close()
    return out


@pytest.mark.parametrize("kind", ["int32", "int64"])
def test_kernel_against_pyarrow_decode(tmp_path, kind):
    """pyarrow's pages at every bit width (int32 wrapping deltas included) decode to pyarrow's values,
    bounded as signed and unsigned. Mutation caught: int32 keys compared on 64 bits (`keep` dropped)."""
    rng = np.random.default_rng(5)
    bits = 32 if kind == "int32" else 64
    info = np.iinfo(kind)
    for width in range(bits + 1):
        for count in (1, 5, 1000):
            d = rng.integers(0, 2 ** min(width, 62), count, dtype=np.uint64) if width else np.zeros(count, np.uint64)
            values = np.cumsum(d.astype(np.uint64), dtype=np.uint64)
            if width >= bits - 1 and count > 2:
                values[1:3] = [info.max, info.min & (2**64 - 1)]
            column = pa.array(values.astype(f"u{bits // 8}").view(kind))
            path = tmp_path / f"{kind}-{width}-{count}.parquet"
            pq.write_table(pa.table({"v": column}), path, use_dictionary=False, column_encoding={"v": DBP},
                           compression="none", write_page_index=False)
            (section, defined), = _sections(path)
            expected = column.to_numpy()
            end, out = _decode(section.tobytes(), defined, bits)
            assert end > 0 and out.view(kind).tolist() == expected.tolist(), (width, count)
            for signed in (kind, f"u{kind}"):  # the same bits bounded as signed and as unsigned
                values = expected.view(signed)
                plain = delta_values.numbers(Encoding.DELTA_BINARY_PACKED, section, defined, np.dtype(signed))
                assert plain.view(signed).tolist() == [values.min(), values.max()], (width, count, signed)


def _with_nulls(values: list, every: int) -> list:
    out = [None if i % every == 0 else v for i, v in enumerate(values)]
    out[1000:1400] = [None] * 400  # an all-null page
    return out


def _table(rng: np.random.Generator) -> tuple[pa.Table, dict[str, str]]:
    i32 = rng.integers(-2**31, 2**31, ROWS, dtype=np.int64).astype(np.int32)
    i32[:2] = [np.iinfo(np.int32).min, np.iinfo(np.int32).max]
    i64 = rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, ROWS, dtype=np.int64)
    i64[5:7] = [np.iinfo(np.int64).min, np.iinfo(np.int64).max]
    u64 = rng.integers(0, np.iinfo(np.uint64).max, ROWS, dtype=np.uint64)
    u64[3] = np.iinfo(np.uint64).max
    zeros = rng.choice([-0.0, 0.0, 1.5, -2.5], ROWS)
    doubles = rng.normal(size=ROWS)
    doubles[7:9] = [math.inf, -math.inf]
    urls = sorted(f"https://h{h}.example/{p}/{n}" for h, p, n in zip(rng.integers(0, 9, ROWS), rng.integers(0, 4, ROWS),
                                                                     rng.integers(0, 10**6, ROWS)))
    words = [("w%03d" % v) * (v % 30) for v in rng.integers(0, 400, ROWS)]
    long = [bytes([0xFF] * 70) if i % 97 == 0 else ("é" * 40 + str(i)).encode() for i in range(ROWS)]
    columns = {
        "i32": (pa.array(i32), DBP),
        "i32_opt": (pa.array(_with_nulls(i32.tolist(), 7), pa.int32()), DBP),
        "i64": (pa.array(i64), DBP),
        "sorted": (pa.array(np.arange(ROWS, dtype=np.int64) * 3 - 7), DBP),
        "u32": (pa.array(rng.integers(0, 2**32, ROWS, dtype=np.uint64).astype(np.uint32)), DBP),
        "u64_opt": (pa.array(_with_nulls(u64.tolist(), 5), pa.uint64()), DBP),
        "u8": (pa.array(rng.integers(0, 256, ROWS).astype(np.uint8)), DBP),
        "dec9": (pa.array([decimal.Decimal(int(v)).scaleb(-2) for v in rng.integers(-10**8, 10**8, ROWS)],
                          pa.decimal128(9, 2)), DBP),
        "dec18": (pa.array(_with_nulls([decimal.Decimal(int(v)).scaleb(-4) for v in i64 // 1000], 13),
                           pa.decimal128(18, 4)), DBP),
        "ts": (pa.array(rng.integers(-2**50, 2**50, ROWS), pa.int64()).cast(pa.timestamp("us", "UTC")), DBP),
        "all_null": (pa.array([None] * ROWS, pa.int64()), DBP),
        "f32": (pa.array(rng.normal(size=ROWS).astype(np.float32)), BSS),
        "zeros": (pa.array(_with_nulls(zeros.tolist(), 11), pa.float64()), BSS),
        "f64": (pa.array(doubles), BSS),
        "bss_i32": (pa.array(_with_nulls(i32.tolist(), 3), pa.int32()), BSS),
        "bss_i64": (pa.array(i64), BSS),
        "bss_u64": (pa.array(u64), BSS),
        "dlba_words": (pa.array(_with_nulls(words, 9), pa.string()), DLBA),
        "dlba_long": (pa.array(long, pa.binary()), DLBA),
        "dba_urls": (pa.array(_with_nulls(urls, 4), pa.string()), DBA),
        "dba_words": (pa.array(words, pa.string()), DBA),
        "dba_long": (pa.array(long, pa.binary()), DBA),
    }
    table = pa.table({name: array for name, (array, _) in columns.items()})
    return table, {name: encoding for name, (_, encoding) in columns.items()}


WRITES = {f"v{v[0]}-{codec}": dict(data_page_version=v, compression=codec)
          for v in ("1.0", "2.0") for codec in ("none", "snappy", "zstd", "gzip")}
COLUMNS = 22


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, Path]:
    table, encodings = _table(np.random.default_rng(41))
    return pyarrow_each(tmp_path_factory.mktemp("delta"), table, WRITES, row_group_size=2000, data_page_size=512,
                        write_batch_size=50, write_page_index=False, use_dictionary=False,
                        column_encoding=encodings, store_decimal_as_integer=True)



@pytest.mark.parametrize("name", sorted(WRITES))
def test_same_index_bytes(written, name):
    """Mutation caught: BYTE_STREAM_SPLIT's streams read as interleaved values (byte_streams' `at = k`)."""
    both = same_on_both_paths(written[name])
    assert both.planned == both.read_encoded == 2 * COLUMNS
    same_on_both_paths(written[name], truncate_length=3)


def test_delta_pages_never_reach_arrow(written, monkeypatch):
    """Every chunk of these encodings is bounded from its pages: Arrow's decode is never called."""
    path = str(written["v2-snappy"])
    reference = indexes(path, encoded.ARROW)

    def refuse(*args, **kwargs):
        raise AssertionError("a DELTA or BYTE_STREAM_SPLIT chunk was decoded by Arrow")

    monkeypatch.setattr(chunk_scan, "decode_sections", refuse)
    monkeypatch.setattr(chunk_scan, "decode", refuse)
    assert indexes(path, encoded.COMPILED) == reference
    assert indexes(path, encoded.COMPILED, threads=2) == reference  # the kernels release the GIL


def test_nan_and_signed_zeros(tmp_path):
    """A NaN page refuses the column index on both paths; ±0 bounds as the Arrow path's."""
    path = tmp_path / "nan.parquet"
    values = np.tile([0.0, -0.0, 1.0, math.nan, -0.0], 1000)
    pq.write_table(pa.table({"f": values, "g": values.astype(np.float32), "z": np.tile([-0.0, 0.0], 2500)}), path,
                   use_dictionary=False, column_encoding=BSS, data_page_size=512, write_page_index=False)
    both = same_on_both_paths(path)
    assert both.read_encoded == 3
    assert [r.column_index for _, _, r in both.kernels] == [False, False, True]


def _outcome(path: Path, choice: str):
    try:
        return indexes(str(path), choice)
    except PageIndexError as err:
        return f"{type(err).__name__}: {err}"


@pytest.mark.parametrize("column", ["i64", "dlba_words", "dba_urls", "u32"])
def test_damaged_pages_same_outcome(tmp_path, column):
    """Bytes changed in the values sections (headers, widths, lengths, prefixes): both paths give the
    same index bytes or the same error. Mutation caught: a DLBA length's sign unchecked."""
    table, encodings = _table(np.random.default_rng(42))
    base = tmp_path / "base.parquet"
    pq.write_table(table.select([column]), base, use_dictionary=False, column_encoding={column: encodings[column]},
                   compression="none", data_page_size=4096, write_page_index=False, data_page_version="2.0")
    data = base.read_bytes()
    source = open_source(str(base))
    footer = read_footer(source)
    starts = [p.offset + p.header_size + p.def_levels_size for chunk in footer.chunks[0]
              for p in walk_chunk(source, chunk, footer.footer_start).pages]
    source.close()
    rng = np.random.default_rng(8)
    differ = 0
    for trial in range(30):
        damaged = bytearray(data)
        for _ in range(2):
            at = int(rng.choice(starts)) + int(rng.integers(0, 40))
            damaged[at] = int(rng.integers(0, 256))
        path = tmp_path / f"damaged{trial}.parquet"
        path.write_bytes(bytes(damaged))
        kernels, arrow = _outcome(path, encoded.COMPILED), _outcome(path, encoded.ARROW)
        assert kernels == arrow, trial
        differ += kernels != _outcome(base, encoded.ARROW)
    assert differ > 5


def test_bad_width_goes_to_arrow(tmp_path):
    """A miniblock width of 65 in an INT64 page: the chunk goes to Arrow, whose error is reported."""
    path = tmp_path / "w.parquet"
    pq.write_table(pa.table({"v": np.arange(1000, dtype=np.int64) * 1000}), path, use_dictionary=False,
                   column_encoding={"v": DBP}, compression="none", write_page_index=False)
    (section, _), = _sections(path)
    data = path.read_bytes()
    at = data.index(section.tobytes())
    header = len(varint(128) + varint(4) + varint(1000) + varint(0) + varint(_zigzag(1000)))
    assert data[at + header] <= 64
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(data[:at + header] + bytes([65]) + data[at + header + 1:])
    both_outcomes = _outcome(bad, encoded.COMPILED), _outcome(bad, encoded.ARROW)
    assert both_outcomes[0] == both_outcomes[1]
    (section, defined), = _sections(bad)
    assert delta_values.numbers(Encoding.DELTA_BINARY_PACKED, section, defined, np.dtype("<i8")) is None


def test_nested_leaves(tmp_path):
    """Lists and structs of these encodings go through the nested scan's levels, then these values."""
    rng = np.random.default_rng(9)
    ints = [None if i % 11 == 0 else [int(x) for x in rng.integers(-2**62, 2**62, i % 4)] for i in range(ROWS)]
    words = [None if i % 7 == 0 else ["u%d" % x for x in rng.integers(0, 10**6, i % 3)] for i in range(ROWS)]
    floats = [None if i % 5 == 0 else {"x": float(rng.normal()) if i % 3 else None} for i in range(ROWS)]
    table = pa.table({"li": pa.array(ints, pa.list_(pa.int64())), "lw": pa.array(words, pa.list_(pa.string())),
                      "lb": pa.array(words, pa.list_(pa.string())),
                      "st": pa.array(floats, pa.struct([("x", pa.float64())]))})
    for version in ("1.0", "2.0"):
        path = tmp_path / f"nested{version}.parquet"
        pq.write_table(table, path, use_dictionary=False, data_page_size=512, data_page_version=version,
                       column_encoding={"li.list.element": DBP, "lw.list.element": DLBA, "lb.list.element": DBA,
                                        "st.x": BSS}, write_page_index=False, compression="snappy")
        both = same_on_both_paths(path)
        assert both.planned == both.read_encoded == 4


@pytest.mark.parametrize("name", ["byte_stream_split.zstd", "byte_stream_split_extended.gzip", "delta_binary_packed",
                                  "delta_byte_array", "delta_encoding_optional_column",
                                  "delta_encoding_required_column", "delta_length_byte_array"])
def test_other_writers_files(name):
    """parquet-testing's files of these encodings (parquet-mr and Arrow C++ writers, every bit
    width in delta_binary_packed): all read from their pages, to the Arrow path's bytes."""
    both = same_on_both_paths(corpus_path(f"parquet-testing/data/{name}.parquet"))
    assert both.planned == both.read_encoded > 0
