"""Nested leaves from their encoded pages (scan/nested_encoded.py, scan/level_kernels.py) against
the Arrow path: the level kernel against numpy and Arrow's level decode, and whole files (lists,
maps, structs, v1 and v2 pages, codecs, dictionary fallback) to identical index bytes."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex.errors import PageIndexError
from pageindex.format.footer import read_footer
from pageindex.format.thrift import Field, Struct, T, encode_struct
from pageindex.io.storage import open_source
from pageindex.scan import chunk_scan, encoded
from pageindex.scan.level_streams import decode_hybrid
from tests.helpers.both_paths import indexes, same_on_both_paths
from tests.helpers.corpus import corpus_path, load_catalog
from tests.helpers.fuzz_mutations import varint
from tests.helpers.hand_pages import with_only_chunk
from tests.helpers.split_records import write_split_record_file
from tests.helpers.writers import pyarrow_each

level_kernels = pytest.importorskip("pageindex.scan.level_kernels")

ROWS = 3000


def _hybrid(levels: np.ndarray, width: int, rng: np.random.Generator) -> bytes:
    """An independent encoder: the levels as a random mix of RLE runs (over runs of one level)
    and bit-packed runs (groups of 8, LSB first; the last group padded with zeros)."""
    out = bytearray()
    i = 0
    while i < len(levels):
        j = i
        while j < len(levels) and levels[j] == levels[i]:
            j += 1
        if j - i >= 2 and rng.random() < 0.6:
            out += varint((j - i) << 1) + int(levels[i]).to_bytes((width + 7) // 8, "little")
            i = j
            continue
        groups = int(rng.integers(1, 4)) if rng.random() < 0.5 else int(rng.integers(8, 40))  # long: 64-bit words
        chunk = np.zeros(groups * 8, np.int64)
        take = levels[i:i + groups * 8]
        chunk[:len(take)] = take
        bits = ((chunk[:, None] >> np.arange(width)) & 1).astype(np.uint8).ravel()
        out += varint((groups << 1) | 1) + np.packbits(bits, bitorder="little").tobytes()
        i += len(take)
    return bytes(out)


@pytest.mark.parametrize("max_level", [1, 2, 3, 4, 7, 15])
def test_level_histogram_against_numpy_and_arrow(max_level):
    rng = np.random.default_rng(max_level)
    width = max_level.bit_length()
    for trial in range(40):
        count = int(rng.integers(1, 400))
        # Long runs and noise alike, so both kinds of run occur.
        levels = np.repeat(rng.integers(0, max_level + 1, count), rng.integers(1, 12, count))[:count]
        if trial % 2:
            levels = rng.integers(0, max_level + 1, count)  # noise: long bit-packed runs
        stream = _hybrid(levels, width, rng)
        buf = np.frombuffer(b"\xAA" * 3 + stream + b"\x55", np.uint8)  # read from an offset
        hist = np.full(max_level + 1, -7, np.int64)
        first = level_kernels.level_histogram(buf, 3, 3 + len(stream), count, max_level, hist)
        assert first == levels[0]
        expected = np.bincount(levels, minlength=max_level + 1)
        assert hist.tolist() == expected.tolist()
        arrow = decode_hybrid([(stream, count)], max_level)  # the Arrow path's own decode
        assert np.bincount(arrow, minlength=max_level + 1).tolist() == expected.tolist()


def test_level_histogram_refuses_what_it_should():
    hist = np.zeros(3, np.int64)
    run = lambda data, count, max_level=2: level_kernels.level_histogram(  # noqa: E731
        np.frombuffer(data, np.uint8), 0, len(data), count, max_level, hist[:max_level + 1])
    assert run(bytes([10 << 1, 2]), 10) == 2
    assert run(bytes([10 << 1, 2]), 11) == level_kernels.BAD  # the stream is short
    assert run(bytes([10 << 1, 3]), 10) == level_kernels.BAD  # a level above the maximum
    assert run(bytes([0, 1, 4 << 1, 1]), 4) == level_kernels.BAD  # an RLE run of none
    assert run(bytes([(1 << 1) | 1, 0xFF, 0xFF]), 8) == level_kernels.BAD  # bit-packed 3s
    assert run(bytes([(2 << 1) | 1, 0x00]), 8) == level_kernels.BAD  # cut off bit-packed run
    assert run(bytes([0x80]), 1) == level_kernels.BAD  # cut off varint
    assert run(b"", 0) == 0 and hist.tolist() == [0, 0, 0]
    with pytest.raises(ValueError):  # no count for level 2: never written past the array
        level_kernels.level_histogram(np.frombuffer(bytes([10 << 1, 2]), np.uint8), 0, 2, 10, 2, hist[:2])


def _lists(i: int, rng: np.random.Generator) -> list | None:
    if i % 11 == 0:
        return None
    if i % 7 == 0:
        return []
    return [None if (i + j) % 5 == 0 else int(x) for j, x in enumerate(rng.integers(-10**12, 10**12, i % 6))]


def _table(rng: np.random.Generator) -> pa.Table:
    point = pa.struct([("x", pa.float64()), ("y", pa.struct([("z", pa.string())]))])
    return pa.table({
        "li": pa.array([_lists(i, rng) for i in range(ROWS)], pa.list_(pa.int64())),
        "ls": pa.array([None if i % 13 == 0 else [f"k{(i * j) % 40:02d}" * (1 + j % 3) for j in range(i % 4)]
                        for i in range(ROWS)], pa.list_(pa.string())),
        "lp": pa.array([[f"p{int(v)}" for v in rng.integers(0, 10**9, i % 3)] for i in range(ROWS)],
                       pa.list_(pa.binary())),
        "ll": pa.array([None if i % 9 == 0 else [[int(j), None] if j % 3 else [] for j in range(i % 4)]
                        for i in range(ROWS)], pa.list_(pa.list_(pa.int32()))),
        "m": pa.array([None if i % 8 == 0 else [(f"a{j}", i * j - 5000) for j in range(i % 3)] for i in range(ROWS)],
                      pa.map_(pa.string(), pa.int64())),
        "s": pa.array([None if i % 6 == 0 else {"x": None if i % 4 == 0 else float(rng.normal()),
                                                 "y": None if i % 10 == 1 else {"z": None if i % 5 == 0 else f"v{i}"}}
                       for i in range(ROWS)], point),
        "f": pa.array([None if i % 3 == 0 else [float(i % 17) / 4] * (i % 3) for i in range(ROWS)],
                      pa.list_(pa.float32())),
        "u": pa.array([[int(v) for v in rng.integers(0, 2**64 - 1, i % 3, dtype=np.uint64)] for i in range(ROWS)],
                      pa.list_(pa.uint64())),
    })


LEAVES = 10  # li, ls, lp, ll, m.key, m.value, s.x, s.y.z, f, u: every one nested
WRITES = {
    "v1-dict-snappy": dict(data_page_version="1.0", compression="snappy"),
    "v2-dict-zstd": dict(data_page_version="2.0", compression="zstd"),
    "v1-plain-none": dict(data_page_version="1.0", use_dictionary=False, compression="none"),
    "v2-plain-none": dict(data_page_version="2.0", use_dictionary=False, compression="none"),
    "v2-plain-snappy": dict(data_page_version="2.0", use_dictionary=False, compression="snappy"),
    # A dictionary page limit this small makes the writer fall back to PLAIN pages mid-chunk.
    "v1-fallback": dict(data_page_version="1.0", dictionary_pagesize_limit=256, compression="zstd"),
    "v2-fallback": dict(data_page_version="2.0", dictionary_pagesize_limit=256, compression="snappy"),
}


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("nested")
    table = _table(np.random.default_rng(44))
    return pyarrow_each(directory, table, WRITES, row_group_size=2000, data_page_size=512, write_batch_size=50,
                        write_page_index=False)



@pytest.mark.parametrize("name", sorted(WRITES))
def test_nested_same_index_bytes(written, name):
    both = same_on_both_paths(written[name])
    # Every leaf was bounded from its encoded pages.
    assert both.planned == both.read_encoded == 2 * LEAVES
    assert all(r.column_index and r.offset_index for _, _, r in both.kernels)
    same_on_both_paths(written[name], truncate_length=3)


def test_pages_are_many_and_mixed(written):
    """The files hold many pages per chunk, and the fallback ones dictionary and PLAIN pages in one chunk."""
    source = open_source(str(written["v2-fallback"]))
    footer = read_footer(source)
    chunk = next(c for c in footer.chunks[0] if c.leaf.dotted.startswith("lp"))
    pages = chunk_scan.walk_chunk(source, chunk, footer.footer_start).pages
    source.close()
    assert len(pages) > 5 and len({p.value_encoding for p in pages}) == 2


def test_nested_chunks_never_reach_arrow(written, monkeypatch):
    """With the kernels, no nested chunk's levels or values are decoded by Arrow."""
    path = str(written["v2-dict-zstd"])
    reference = indexes(path, encoded.ARROW)

    def refuse(*args, **kwargs):
        raise AssertionError("a nested chunk was decoded by Arrow")

    monkeypatch.setattr(chunk_scan, "nested_levels", refuse)
    monkeypatch.setattr(chunk_scan, "decode_sections", refuse)
    monkeypatch.setattr(chunk_scan, "decode", refuse)
    assert indexes(path, encoded.COMPILED) == reference


def test_split_record_falls_back(tmp_path):
    """A record split across pages: the Arrow path explains why there is no index."""
    both = same_on_both_paths(write_split_record_file(tmp_path / "split.parquet"))
    assert (both.planned, both.read_encoded) == (1, 0)
    assert "split across pages" in both.kernels[0][2].reason


def _bit_packed(levels: list[int], width: int) -> bytes:
    bits = ((np.array(levels)[:, None] >> np.arange(width - 1, -1, -1)) & 1).astype(np.uint8).ravel()
    return np.packbits(bits, bitorder="big").tobytes()


def test_bit_packed_levels_fall_back(tmp_path):
    """The deprecated BIT_PACKED level encoding is left to the Arrow path (pageindex decodes those levels itself)."""
    base = tmp_path / "base.parquet"
    rows = [[1, 2, 3], [4, 5], [6]]
    pq.write_table(pa.table({"l": pa.array(rows, pa.list_(pa.int32()))}), base, compression="none",
                   use_dictionary=False, data_page_version="1.0", write_page_index=False)
    rep, values = [0, 1, 1, 0, 1, 0], [1, 2, 3, 4, 5, 6]
    body = _bit_packed(rep, 1) + _bit_packed([3] * 6, 2) + struct.pack("<6i", *values)
    header = Struct((
        Field(1, T.I32, 0), Field(2, T.I32, len(body)), Field(3, T.I32, len(body)),
        Field(5, T.STRUCT, Struct((Field(1, T.I32, 6), Field(2, T.I32, 0), Field(3, T.I32, 4), Field(4, T.I32, 4)))),
    ))
    path = tmp_path / "bit_packed.parquet"
    path.write_bytes(with_only_chunk(base.read_bytes(), encode_struct(header) + body))
    both = same_on_both_paths(path)
    assert (both.planned, both.read_encoded) == (1, 0)
    assert both.kernels[0][2].offset_index


def _outcome(path: Path, choice: str):
    try:
        return indexes(str(path), choice)
    except PageIndexError as err:
        return f"{type(err).__name__}: {err}"


# Every corpus file with a nested leaf, fuzzed ones included (not those Arrow aborts the process on).
_NESTED = sorted(row["path"] for row in load_catalog() if row["nested"] and not row["pyarrow_abort"])


@pytest.mark.slow
@pytest.mark.parametrize("relpath", _NESTED)
def test_nested_corpus_same_index_bytes_or_same_error(relpath):
    path = corpus_path(relpath)
    assert _outcome(path, encoded.COMPILED) == _outcome(path, encoded.ARROW)


@pytest.mark.parametrize("name", ["v1-plain-none", "v2-plain-none"])
def test_damaged_level_streams_same_outcome(written, name, tmp_path):
    """Bytes changed at the start of data page bodies (where the level streams are): both paths
    give the same index bytes or the same error."""
    data = written[name].read_bytes()
    source = open_source(str(written[name]))
    footer = read_footer(source)
    starts = [p.offset + p.header_size for chunk in footer.chunks[0]
              for p in chunk_scan.walk_chunk(source, chunk, footer.footer_start).pages]
    source.close()
    rng = np.random.default_rng(7)
    differ = 0
    for trial in range(24):
        damaged = bytearray(data)
        for _ in range(3):
            at = int(rng.choice(starts)) + int(rng.integers(0, 24))
            damaged[at] = int(rng.integers(0, 256))
        path = tmp_path / f"damaged{trial}.parquet"
        path.write_bytes(bytes(damaged))
        kernels, arrow = _outcome(path, encoded.COMPILED), _outcome(path, encoded.ARROW)
        assert kernels == arrow, trial
        differ += kernels != _outcome(written[name], encoded.ARROW)
    assert differ > 5  # the damage mattered: errors or other indexes
