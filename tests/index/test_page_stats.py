"""The trust-page-stats fast path: same index as exact decoding wherever it applies, and a
fallback to exact decoding wherever header statistics cannot be trusted."""
from __future__ import annotations

import importlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pageindex
from pageindex.format.footer import read_footer
from pageindex.format.parquet_thrift import FileMetaData, Type
from pageindex.format.thrift import T
from pageindex.index import page_stats
from pageindex.index.page_stats import untrusted_writer
from pageindex.index.reader import read_column_index, read_offset_index
from pageindex.io.storage import open_source
from pageindex.scan import encoded
from tests.helpers.both_paths import scan_kernel
from tests.helpers.corpus import corpus_files, corpus_path
from tests.helpers.split_records import ROWS as SPLIT_ROWS
from tests.helpers.split_records import write_split_record_file
from tests.helpers.strip import rewrite_footer

CORPUS = corpus_files("candidate") + corpus_files("oracle")


def _indexes(path):
    with open_source(str(path)) as source:
        footer = read_footer(source)
        return {(c.row_group, c.leaf.dotted): (read_column_index(source, c), read_offset_index(source, c))
                for row in footer.chunks for c in row}


@pytest.mark.slow
@pytest.mark.parametrize("src", CORPUS, ids=[p.name for p in CORPUS])
def test_same_index_as_exact_mode(src, tmp_path):
    exact = pageindex.retrofit(str(src), str(tmp_path / "exact.parquet"), force=True)
    fast = pageindex.retrofit(str(src), str(tmp_path / "fast.parquet"), force=True, trust_page_stats=True)
    assert [(c.row_group, c.column) for c in fast.chunks] == [(c.row_group, c.column) for c in exact.chunks]
    from_stats = [c for c in fast.chunks if c.source == "page_stats"]
    want, got = _indexes(tmp_path / "exact.parquet"), _indexes(tmp_path / "fast.parquet")
    for chunk in fast.chunks:
        key = (chunk.row_group, chunk.column)
        (ci_exact, oi_exact), (ci_fast, oi_fast) = want[key], got[key]
        assert ci_fast == ci_exact, key
        if chunk.source == "page_stats":
            # Page headers cannot tell the unencoded BYTE_ARRAY sizes; that optional list is left out.
            assert oi_fast.pages == oi_exact.pages, key
            assert oi_fast.unencoded_byte_array_data_bytes is None
        else:
            assert oi_fast == oi_exact, key
    assert pageindex.verify(str(tmp_path / "fast.parquet")).ok
    assert len(from_stats) <= len(fast.chunks)


def test_reads_only_page_headers(tmp_path):
    """With realistic 1 MiB pages, the fast path reads a few KiB per page instead of the pages."""
    n = 2_000_000
    path = tmp_path / "big.parquet"
    pq.write_table(pa.table({"k": pa.array(range(n)), "s": pa.array([f"user{i % 1000:04d}" for i in range(n)])}),
                   path, use_dictionary=False, compression="none")
    with open_source(str(path)) as source:
        fast = pageindex.retrofit(str(path), dry_run=True, trust_page_stats=True)
        exact = pageindex.retrofit(str(path), dry_run=True)
        size = source.size
    assert all(c.source == "page_stats" for c in fast.chunks)
    assert exact.bytes_read >= size * 0.9
    assert fast.bytes_read < size / 20, (fast.bytes_read, size)


def test_the_fast_path_applies_somewhere():
    """Most legacy writers store page statistics: the corpus must exercise the fast path."""
    used = 0
    for src in CORPUS[:25]:
        result = pageindex.retrofit(str(src), dry_run=True, force=True, trust_page_stats=True)
        used += sum(c.source == "page_stats" for c in result.chunks)
    assert used > 20


def _file(tmp_path, table, **kw):
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, data_page_size=1024, **kw)
    return path


def test_floats_are_always_decoded(tmp_path):
    path = _file(tmp_path, pa.table({"f": pa.array([float(i) for i in range(5000)]),
                                     "i": pa.array(range(5000))}))
    result = pageindex.retrofit(str(path), str(tmp_path / "o.parquet"), trust_page_stats=True)
    sources = {c.column: c.source for c in result.chunks}
    assert sources == {"f": "exact", "i": "page_stats"}


def test_pages_without_statistics_fall_back(tmp_path):
    path = _file(tmp_path, pa.table({"i": pa.array(range(5000))}), write_statistics=False)
    result = pageindex.retrofit(str(path), str(tmp_path / "o.parquet"), trust_page_stats=True)
    assert [c.source for c in result.chunks] == ["exact"] and result.chunks[0].column_index


NESTED = pa.table({
    "l": pa.array([None if i % 11 == 0 else [] if i % 7 == 0 else [i, None, i + 1] for i in range(6000)]),
    "s": pa.array([[f"v{i:05d}"] * (i % 3) for i in range(6000)]),
    "st": pa.array([None if i % 5 == 0 else {"a": i if i % 4 else None, "b": [i]} for i in range(6000)]),
})


@pytest.mark.parametrize("version", ["1.0", "2.0"])
def test_nested_columns_take_bounds_from_headers_and_rows_from_levels(tmp_path, monkeypatch, version):
    """Nested leaves (nulls, empty lists, structs) decode their levels for rows, null counts and
    level histograms, take bounds from the headers, and never decode a value."""
    compute_mod = importlib.import_module("pageindex.index.compute")
    path = _file(tmp_path, NESTED, data_page_version=version, compression="snappy")
    pageindex.retrofit(str(path), str(tmp_path / "exact.parquet"))
    decoded = []
    real_scan = compute_mod.scan_chunks

    def scan_chunks(source, footer, requests):
        requests = list(requests)
        decoded.extend(chunk.leaf.dotted for chunk, _ in requests)
        return real_scan(source, footer, requests)

    monkeypatch.setattr(compute_mod, "scan_chunks", scan_chunks)
    fast = pageindex.retrofit(str(path), str(tmp_path / "fast.parquet"), trust_page_stats=True)
    assert decoded == [] and {c.source for c in fast.chunks} == {"page_stats"}
    assert len(fast.chunks) == 4 and all(c.pages > 3 for c in fast.chunks)
    want, got = _indexes(tmp_path / "exact.parquet"), _indexes(tmp_path / "fast.parquet")
    for key, (ci, oi) in want.items():
        assert got[key][0] == ci, key  # bounds, null counts, histograms: all of it
        assert got[key][1].pages == oi.pages, key
    assert pageindex.verify(str(tmp_path / "fast.parquet")).ok
    assert pq.read_table(tmp_path / "fast.parquet").equals(NESTED)


@pytest.mark.parametrize("version", ["1.0", "2.0"])
def test_nested_levels_are_counted_by_the_level_kernel(tmp_path, monkeypatch, version):
    """Where the level kernel is there, a trusted nested chunk's levels are counted by it, not
    decoded by Arrow: the same index bytes as the decode gives (PAGEINDEX_SCAN_KERNEL=arrow)."""
    path = _file(tmp_path, NESTED, data_page_version=version, compression="snappy")
    with scan_kernel(encoded.ARROW):
        pageindex.retrofit(str(path), str(tmp_path / "decoded.parquet"), trust_page_stats=True)

    def refuse(*args, **kwargs):
        raise AssertionError("levels decoded by Arrow")

    monkeypatch.setattr(page_stats, "nested_levels", refuse)
    with scan_kernel(encoded.COMPILED):
        fast = pageindex.retrofit(str(path), str(tmp_path / "counted.parquet"), trust_page_stats=True)
    assert {c.source for c in fast.chunks} == {"page_stats"}
    assert (tmp_path / "counted.parquet").read_bytes() == (tmp_path / "decoded.parquet").read_bytes()


def test_nested_null_counts_that_differ_from_the_levels_fall_back():
    """parquet-cpp 1.5.1 counted a list<string> page's nulls another way than its levels do:
    that chunk is decoded; the list<int64> next to it agrees and uses its headers."""
    path = corpus_path("parquet-testing/data/list_columns.parquet")
    result = pageindex.retrofit(str(path), dry_run=True, force=True, trust_page_stats=True)
    assert {c.column: c.source for c in result.chunks} == {
        "int64_list.list.item": "page_stats", "utf8_list.list.item": "exact"}


def test_a_record_split_across_pages_falls_back_and_gets_no_index(tmp_path):
    """Levels show the second page starting inside a record: trusting the headers would give an
    OffsetIndex no reader can use. Both modes leave the chunk without indexes, and say why."""
    path = write_split_record_file(tmp_path / "split.parquet")
    assert pq.read_table(path).column("l").to_pylist() == SPLIT_ROWS
    for trust in (False, True):
        result = pageindex.retrofit(str(path), str(tmp_path / f"o{trust}.parquet"), trust_page_stats=trust)
        (chunk,) = result.chunks
        assert (chunk.source, chunk.offset_index, chunk.column_index) == ("exact", False, False)
        assert "page 1 does not start at a row boundary" in chunk.reason
        assert pq.read_table(tmp_path / f"o{trust}.parquet").column("l").to_pylist() == SPLIT_ROWS


def test_marker_records_the_option(tmp_path):
    path = _file(tmp_path, pa.table({"i": pa.array(range(100))}))
    pageindex.retrofit(str(path), trust_page_stats=True)
    assert b"trust_page_stats=true" in pq.ParquetFile(path).metadata.metadata[b"pageindex"]


@pytest.mark.parametrize("created_by,ptype,bad", [
    ("parquet-mr version 1.7.0 (build x)", Type.BYTE_ARRAY, True),
    ("parquet-mr version 1.7.9", Type.FIXED_LEN_BYTE_ARRAY, True),
    ("parquet-mr version 1.7.0 (build x)", Type.INT64, False),
    ("parquet-mr version 1.8.0 (build x)", Type.BYTE_ARRAY, False),
    ("parquet-cpp-arrow version 15.0.0", Type.BYTE_ARRAY, False),
])
def test_known_bad_writers(created_by, ptype, bad):
    assert (untrusted_writer(created_by, ptype) is not None) is bad


def test_parquet_251_file_is_decoded_exactly(tmp_path):
    """A binary column written by parquet-mr 1.7 (simulated by its created_by) is decoded."""
    path = _file(tmp_path, pa.table({"s": pa.array([f"v{i:05d}" for i in range(3000)])}))
    old = tmp_path / "old.parquet"
    rewrite_footer(path, old, lambda meta: meta.set(FileMetaData.CREATED_BY, T.BINARY, b"parquet-mr version 1.7.0 (build x)"))
    result = pageindex.retrofit(str(old), str(tmp_path / "o.parquet"), trust_page_stats=True)
    assert [c.source for c in result.chunks] == ["exact"]
