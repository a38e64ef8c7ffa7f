"""Bloom filters written by retrofit (issue 27): options, the plan under trust_page_stats, the tail
layout (filters before the column indexes, fields 14/15 exact, the prefix untouched), existing
filters kept unless forced, and auto's rule."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex.format.footer import read_footer
from pageindex.format.parquet_thrift import ColumnChunk, ColumnMetaData, FileMetaData, RowGroup
from pageindex.format.thrift import Struct, T, TList, encode_struct
from pageindex.index.bloom.blob import BloomFilter, build_filter, might_contain, read_filter
from pageindex.index.bloom.options import bloom_options
from pageindex.index.marker import MARKER_KEY, marker_value
from pageindex.inspection import format_text, inspect_file
from pageindex.io.storage import open_source
from pageindex.retrofit import Status, retrofit
from pageindex.table.naming import indexed_name
from pageindex.verify import verify

RNG = np.random.default_rng(2727)
N = 6000
pytestmark = pytest.mark.usefixtures("bloom_path")


def unsorted_table() -> pa.Table:
    return pa.table({
        "id": pa.array(RNG.permutation(N).astype(np.int64)),
        "name": pa.array([None if i % 7 == 0 else f"user-{x}" for i, x in enumerate(RNG.integers(0, N, N))]),
        "flag": pa.array(RNG.integers(0, 2, N) == 1),
        "seq": pa.array(np.arange(N, dtype=np.int64)),
        "low": pa.array(RNG.integers(0, 3, N).astype(np.int32)),
        "f": pa.array(RNG.normal(size=N)),
    })


def write(path: Path, table: pa.Table, **options) -> Path:
    # A small dictionary page: chunks fall back to plain pages, as high-cardinality ones do.
    options = {"row_group_size": 2000, "write_page_index": False, "dictionary_pagesize_limit": 1024} | options
    pq.write_table(table, path, **options)
    return path


def filters(path: Path) -> dict[tuple[int, str], tuple[int, int | None, BloomFilter]]:
    with open_source(str(path)) as source:
        footer = read_footer(source)
        return {(c.row_group, c.leaf.dotted): (*c.bloom_filter, read_filter(source, *c.bloom_filter))
                for row in footer.chunks for c in row if c.bloom_filter is not None}


def footer_start(data: bytes) -> int:
    return len(data) - 8 - struct.unpack("<I", data[-8:-4])[0]


def test_named_columns_get_exact_filters_before_the_column_indexes(tmp_path):
    table = unsorted_table()
    src = write(tmp_path / "in.parquet", table)
    out = tmp_path / "out.parquet"
    result = retrofit(str(src), str(out), bloom_filter=["id", "name", "flag"], bloom_fpp=0.01)
    assert result.to_dict()["bloom_filters"] == 6  # flag: booleans get none
    before, after = src.read_bytes(), out.read_bytes()
    assert after[:len(before)] == before  # the original file, its footer included
    assert pq.read_table(out).equals(table)
    found = filters(out)
    assert sorted(found) == [(rg, col) for rg in range(3) for col in ("id", "name")]
    with open_source(str(out)) as source:
        footer = read_footer(source)
    first_index = min(c.column_index[0] for row in footer.chunks for c in row)
    spans = sorted((offset, length) for offset, length, _ in found.values())
    assert spans[0][0] == len(before)  # the tail starts with the filters, back to back
    assert all(a + n == b for (a, n), (b, _) in zip(spans, spans[1:]))
    assert spans[-1][0] + spans[-1][1] == first_index
    for (rg, col), (_, length, bloom) in found.items():
        values = table[col][rg * 2000:(rg + 1) * 2000]
        assert length == len(bloom.to_bytes())  # field 15 is header + bitset
        ptype = footer.leaves[table.column_names.index(col)].physical_type
        assert bloom.to_bytes() == build_filter(values, ptype, 0.01).to_bytes()
        report = next(c for c in result.chunks if (c.row_group, c.column) == (rg, col))
        exact = len(set(values.drop_null().to_pylist()))
        assert report.bloom_filter == length and abs(report.bloom_ndv - exact) <= 0.05 * exact  # an estimate
        assert all(might_contain(bloom, v, ptype) for v in values.drop_null().to_pylist())
    absent = filters(out)[(0, "id")][2]
    assert sum(might_contain(absent, v, footer.leaves[0].physical_type) for v in range(N, N + 2000)) < 100


def test_default_writes_no_filter_and_the_same_bytes(tmp_path):
    src = write(tmp_path / "in.parquet", unsorted_table())
    plain, none = tmp_path / "plain.parquet", tmp_path / "none.parquet"
    retrofit(str(src), str(plain))
    result = retrofit(str(src), str(none), bloom_filter="none")
    assert plain.read_bytes() == none.read_bytes()
    assert result.to_dict()["bloom_filters"] == 0 and not filters(none)


def test_trusted_page_stats_still_decode_the_filtered_columns(tmp_path):
    src = write(tmp_path / "in.parquet", unsorted_table())
    result = retrofit(str(src), str(tmp_path / "out.parquet"), trust_page_stats=True, bloom_filter="id")
    sources = {(c.column, c.source) for c in result.chunks}
    assert ("id", "exact") in sources and ("seq", "page_stats") in sources
    assert ("id", "page_stats") not in sources
    assert len(filters(tmp_path / "out.parquet")) == 3


def test_existing_filters_are_kept_unless_forced(tmp_path):
    table = unsorted_table()
    src = write(tmp_path / "in.parquet", table, bloom_filter_options={"id": {"ndv": 100_000, "fpp": 0.2}})
    theirs = filters(src)
    kept = tmp_path / "kept.parquet"
    retrofit(str(src), str(kept), bloom_filter=["id", "name"])
    found = filters(kept)
    assert {k: v[:2] for k, v in found.items() if k[1] == "id"} == {k: v[:2] for k, v in theirs.items()}
    assert sum(k[1] == "name" for k in found) == 3
    forced = tmp_path / "forced.parquet"
    retrofit(str(src), str(forced), bloom_filter=["id"], force=True, bloom_fpp=0.01)
    for key, (offset, _, bloom) in filters(forced).items():
        assert offset >= footer_start(src.read_bytes()) and bloom.num_bytes != theirs[key][2].num_bytes


def test_an_indexed_file_is_reopened_only_for_missing_named_filters(tmp_path):
    src = write(tmp_path / "in.parquet", unsorted_table(), write_page_index=True)
    assert retrofit(str(src), str(tmp_path / "a.parquet")).status == Status.ALREADY_INDEXED
    assert retrofit(str(src), str(tmp_path / "b.parquet"), bloom_filter="auto").status == Status.ALREADY_INDEXED
    result = retrofit(str(src), str(tmp_path / "c.parquet"), bloom_filter="id")
    assert result.status == Status.INDEXED and len(filters(tmp_path / "c.parquet")) == 3
    assert retrofit(str(tmp_path / "c.parquet"), None, bloom_filter="id").status == Status.ALREADY_INDEXED


def test_auto_picks_unsorted_leaves_with_many_distinct_values(tmp_path):
    table = unsorted_table().append_column("dict_id", pa.array(RNG.permutation(N).astype(np.int64)))
    # Values spread evenly from 3200 and 800 distinct ones: about 0.74 and 0.37 of each 2000-row
    # group's values are distinct.
    table = table.append_column("rep_hi", pa.array(RNG.integers(0, 3200, N)))
    table = table.append_column("rep_lo", pa.array(RNG.integers(0, 800, N)))
    src = write(tmp_path / "in.parquet", table, use_dictionary=["dict_id"], dictionary_pagesize_limit=1 << 20,
                data_page_size=1024, write_batch_size=64)
    out = tmp_path / "out.parquet"
    retrofit(str(src), str(out), bloom_filter="auto")
    # id, name, rep_hi: unsorted, half their values or more distinct; dict_id too, though fully
    # dictionary-encoded; seq: sorted pages; rep_lo and low (three values): too few distinct;
    # flag and f: never.
    assert {col for _, col in filters(out)} == {"id", "name", "dict_id", "rep_hi"}


def test_columns_a_file_lacks_are_noted_and_the_file_indexed(tmp_path):
    """Files of one lake differ as its schema evolved: a named column a file lacks gets no
    filter there, with a note, and the columns it has get theirs."""
    src = write(tmp_path / "in.parquet", unsorted_table())
    result = retrofit(str(src), str(tmp_path / "out.parquet"), bloom_filter="bogus,id")
    assert result.status == Status.INDEXED
    assert result.notes == ("bloom filter: column bogus not in this file",)
    assert {col for _, col in filters(tmp_path / "out.parquet")} == {"id"}
    assert verify(str(tmp_path / "out.parquet")).ok


@pytest.mark.parametrize("fpp, max_bytes", [(0.0, 1 << 20), (1.0, 1 << 20), (0.01, 1000), (0.01, 16)])
def test_bad_options_are_refused(fpp, max_bytes):
    with pytest.raises(ValueError):
        bloom_options("id", fpp, max_bytes)


def test_options_parse():
    assert bloom_options("a, b,a").columns == ("a", "b")
    assert bloom_options(["x.y"]).named == ("x.y",)
    assert bloom_options("auto").auto and bloom_options(None).columns == "none"
    with pytest.raises(ValueError):
        bloom_options(" , ")


def test_max_bytes_caps_the_filter(tmp_path):
    src = write(tmp_path / "in.parquet", unsorted_table())
    out = tmp_path / "out.parquet"
    retrofit(str(src), str(out), bloom_filter="id", bloom_max_bytes=256)
    assert {bloom.num_bytes for _, _, bloom in filters(out).values()} == {256}


def with_footer(path: Path, out: Path, change) -> Path:
    """`path` with its FileMetaData passed through `change` (the data bytes as they were)."""
    data = path.read_bytes()
    with open_source(str(path)) as source:
        footer = read_footer(source)
    raw = encode_struct(change(footer.metadata))
    out.write_bytes(data[:footer.footer_start] + raw + struct.pack("<I", len(raw)) + b"PAR1")
    return out


def set_bloom_length(metadata: Struct, delta: int) -> Struct:
    groups = []
    for rg in metadata.get(FileMetaData.ROW_GROUPS).items:
        chunks = []
        for cc in rg.get(RowGroup.COLUMNS).items:
            meta = cc.get(ColumnChunk.META_DATA)
            length = meta.get(ColumnMetaData.BLOOM_FILTER_LENGTH)
            if length is not None:
                meta = ColumnMetaData.set(meta, ColumnMetaData.BLOOM_FILTER_LENGTH, length + delta)
            chunks.append(ColumnChunk.set(cc, ColumnChunk.META_DATA, meta))
        groups.append(RowGroup.set(rg, RowGroup.COLUMNS, TList(T.STRUCT, tuple(chunks))))
    return FileMetaData.set(metadata, FileMetaData.ROW_GROUPS, TList(T.STRUCT, tuple(groups)))


def test_verify_and_inspect_see_the_filters(tmp_path):
    table = unsorted_table()
    src = write(tmp_path / "in.parquet", table)
    out = tmp_path / "out.parquet"
    retrofit(str(src), str(out), bloom_filter=["id", "name", "f"])
    assert verify(str(out)).ok
    view = inspect_file(str(out))
    shown = {(c.row_group, c.column): c.bloom_filter for c in view.chunks if c.bloom_filter is not None}
    assert len(shown) == 9
    for (rg, col), b in shown.items():
        ndv = len(set(table[col][rg * 2000:(rg + 1) * 2000].drop_null().to_pylist()))
        assert abs(b.ndv_estimate - ndv) <= 0.05 * ndv + 2 and b.fpp < 0.02 and not b.error
    assert "bloom filter: " in format_text(view)

    found = filters(out)
    offset, length, bloom = found[(1, "id")]
    data = bytearray(out.read_bytes())
    bitset = offset + length - bloom.num_bytes
    data[bitset:bitset + bloom.num_bytes] = bytes(bloom.num_bytes)  # every bit cleared
    zeroed = tmp_path / "zeroed.parquet"
    zeroed.write_bytes(bytes(data))
    problems = verify(str(zeroed)).violations
    assert [(v.row_group, v.column, v.check) for v in problems] == [(1, "id", "bloom filter")]
    assert "not in the filter" in problems[0].detail

    longer = with_footer(out, tmp_path / "longer.parquet", lambda m: set_bloom_length(m, 1))
    problems = verify(str(longer)).violations
    assert len(problems) == 9 and all("is not header" in v.detail for v in problems)
    assert all(c.bloom_filter.error for c in inspect_file(str(longer)).chunks if c.bloom_filter)


def test_the_marker_records_the_bloom_options(tmp_path):
    src = write(tmp_path / "in.parquet", unsorted_table())
    out, plain = tmp_path / "out.parquet", tmp_path / "plain.parquet"
    retrofit(str(src), str(out), bloom_filter=["id", "name"], bloom_fpp=0.02, bloom_max_bytes=1 << 16)
    retrofit(str(src), str(plain))
    assert inspect_file(str(out)).indexed_by.endswith(
        f";bloom_filter=id,name;bloom_fpp=0.02;bloom_max_bytes=65536;original_length={src.stat().st_size}")
    with open_source(str(plain)) as source:
        assert "bloom" not in read_footer(source).key_value(MARKER_KEY)


def test_marker_quotes_column_names():
    # A name holding the marker's separators cannot break its syntax.
    value = marker_value("9", 64, True, bloom_options(["a,b", "c;d=e", "x%y", "plain"], 0.001))
    assert value == ("version=9;truncate_length=64;trust_page_stats=true;"
                     "bloom_filter=a%2Cb,c%3Bd%3De,x%25y,plain;bloom_fpp=0.001;bloom_max_bytes=1048576")
    assert marker_value("9", 64, bloom=bloom_options("auto")).endswith(";bloom_filter=auto;bloom_fpp=0.01;bloom_max_bytes=1048576")


def test_table_copies_are_named_by_their_bloom_options_too():
    # A copy's name hashes what its bytes depend on: other filters, other name.
    names = {indexed_name("t/part-0.parquet", 100, 64, False, bloom_options(spec))
             for spec in ("none", "auto", ["id"], ["id", "name"])}
    assert len(names) == 4
    assert indexed_name("t/part-0.parquet", 100, 64, False) == indexed_name("t/part-0.parquet", 100, 64, False,
                                                                            bloom_options("none"))
