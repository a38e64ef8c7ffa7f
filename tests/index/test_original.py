"""The original file is kept whole (index/original.py): its first old-length bytes are the old
file, readers that learned the old length go on reading it, and reruns replace only what a
retrofit appended, so a file never grows run after run."""
from __future__ import annotations

import io
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import pageindex
from pageindex.format.footer import read_footer
from pageindex.index.compute import compute_indexes
from pageindex.index.marker import MARKER_KEY, marker_value, recorded_original_length
from pageindex.index.original import kept_prefix
from pageindex.index.plan import plan_chunks
from pageindex.index.tail_writer import build_tail
from pageindex.io.storage import open_source
from pageindex.verify import verify
from tests.helpers import s3 as s3h
from tests.helpers.files import corrupt_first_page_min
from tests.helpers.strip import strip_page_index
from tests.helpers.writers import duckdb_writer, fastparquet_writer, polars_writer

ROWS, GROUP = 20_000, 5_000


def _table() -> pa.Table:
    ids = np.arange(ROWS, dtype=np.int64)
    return pa.table({"id": ids, "name": pa.array([f"user{i:06d}" for i in ids]),
                     "amount": pa.array(np.random.default_rng(38).random(ROWS))})


def _pyarrow(**options) -> Callable[[pa.Table, Path], None]:
    def write(table: pa.Table, path: Path) -> None:
        pq.write_table(table, path, row_group_size=GROUP, data_page_size=2048, write_page_index=False, **options)
    return write


def _polars(table: pa.Table, path: Path) -> None:
    written = path.with_suffix(".polars")
    polars_writer(GROUP, data_page_size=2048)(table, written)
    strip_page_index(written, path)  # polars writes a page index: the file as it was without one


WRITERS = {"pyarrow": _pyarrow(), "pyarrow-no-statistics": _pyarrow(write_statistics=False),
           "fastparquet": fastparquet_writer(GROUP), "duckdb": duckdb_writer(GROUP), "polars": _polars}


def _write(tmp_path: Path, writer: str = "pyarrow") -> Path:
    path = tmp_path / f"{writer}.parquet"
    WRITERS[writer](_table(), path)
    return path


def _identity(path: Path) -> tuple[bytes, int, int]:
    st = os.stat(path)
    return path.read_bytes(), st.st_ino, st.st_mtime_ns


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_the_first_old_length_bytes_read_as_the_old_file(writer, tmp_path):
    path = _write(tmp_path, writer)
    old = path.read_bytes()
    result = pageindex.retrofit(str(path))
    assert result.status == "indexed" and result.bytes_out == path.stat().st_size > len(old)
    new = path.read_bytes()
    assert new[:len(old)] == old
    # What a reader holding the old length sees: the old file, its table and its metadata.
    stale = pq.ParquetFile(io.BytesIO(new[:len(old)]))
    assert stale.read().equals(pq.read_table(io.BytesIO(old)))
    assert stale.metadata.to_dict() == pq.ParquetFile(io.BytesIO(old)).metadata.to_dict()
    assert not stale.metadata.row_group(0).column(0).has_offset_index
    # What a fresh reader sees: the index, over the same data.
    assert pq.ParquetFile(path).metadata.row_group(0).column(0).has_offset_index
    assert pq.read_table(path).equals(pq.read_table(io.BytesIO(old)))
    assert verify(str(path)).ok


def test_a_force_rerun_writes_the_first_run_s_bytes(tmp_path):
    path = _write(tmp_path)
    original = path.read_bytes()
    pageindex.retrofit(str(path))
    first = path.read_bytes()
    assert pageindex.retrofit(str(path), force=True).bytes_out == len(first)
    assert path.read_bytes() == first
    # Other options replace the appended part too: the original stays, nothing accumulates.
    pageindex.retrofit(str(path), force=True, truncate_length=8, trust_page_stats=True)
    assert path.read_bytes()[:len(original)] == original
    assert recorded_original_length(_footer(path)) == len(original)
    pageindex.retrofit(str(path), force=True)
    assert path.read_bytes() == first


def test_a_rerun_over_an_indexed_file_changes_nothing(tmp_path):
    path = _write(tmp_path)
    pageindex.retrofit(str(path))
    before = _identity(path)
    for options in ({}, {"verify_existing": True}):
        assert pageindex.retrofit(str(path), **options).status == "already_indexed"
        assert _identity(path) == before


def test_a_repair_restores_the_first_run_s_bytes(tmp_path):
    # The corruption lies in what the retrofit appended: the repair replaces exactly that.
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"k": np.arange(4096, dtype=np.int64) + 0x1122334455667788}), plain,
                   write_page_index=False, compression="none", use_dictionary=False, data_page_size=1024,
                   write_batch_size=512)
    good = tmp_path / "good.parquet"
    pageindex.retrofit(str(plain), str(good))
    bad = corrupt_first_page_min(good, tmp_path / "bad.parquet", 0x1122334455667788)
    assert pageindex.retrofit(str(bad), verify_existing=True).status == "repaired"
    assert bad.read_bytes() == good.read_bytes()


def _footer(path: Path):
    with open_source(str(path)) as source:
        return read_footer(source)


def _older_layout(src: Path, dst: Path) -> bytes:
    """What pageindex wrote before it kept the original footer: the index blocks where the old
    footer was, a marker without original_length."""
    with open_source(str(src)) as source:
        footer = read_footer(source)
        indexes, _ = compute_indexes(source, footer, plan_chunks(footer, False), 64)
    data = src.read_bytes()[:footer.footer_start] + build_tail(footer, indexes, marker_value("0.0.9", 64),
                                                                  footer.footer_start)
    dst.write_bytes(data)
    return data


@pytest.mark.parametrize("how", ["older pageindex", "another writer"])
def test_files_indexed_elsewhere_are_kept_whole(how, tmp_path):
    """A file whose index an older pageindex or another writer wrote: a forced run keeps it whole
    (a reader may hold its length), then reruns stop growing it."""
    path = tmp_path / "indexed.parquet"
    if how == "older pageindex":
        before = _older_layout(_write(tmp_path), path)
    else:
        pq.write_table(_table(), path, row_group_size=GROUP, data_page_size=2048, write_page_index=True)
        before = path.read_bytes()
    assert verify(str(path)).ok
    assert pageindex.retrofit(str(path)).status == "already_indexed"
    assert path.read_bytes() == before
    pageindex.retrofit(str(path), force=True)
    once = path.read_bytes()
    assert once[:len(before)] == before and len(once) > len(before)
    assert recorded_original_length(_footer(path)) == len(before)
    assert verify(str(path)).ok and pq.read_table(path).equals(_table())
    pageindex.retrofit(str(path), force=True)
    assert path.read_bytes() == once


def test_a_copied_marker_cuts_nothing(tmp_path):
    """A file rewritten from an indexed one by a tool that copies key-value metadata carries
    its marker, with an original_length that means nothing here: the whole file is kept."""
    indexed = _write(tmp_path)
    pageindex.retrofit(str(indexed))
    rewritten = tmp_path / "rewritten.parquet"
    copied = {k: v for k, v in pq.read_metadata(indexed).metadata.items() if k != b"ARROW:schema"}
    table = pq.read_table(indexed).replace_schema_metadata(copied)
    pq.write_table(table, rewritten, row_group_size=GROUP // 2, data_page_size=2048, write_page_index=False)
    footer = _footer(rewritten)
    assert footer.key_value(MARKER_KEY) is not None and recorded_original_length(footer) is not None
    with open_source(str(rewritten)) as source:
        assert kept_prefix(source, footer, plan_chunks(footer, False)).length == footer.file_size
    before = rewritten.read_bytes()
    pageindex.retrofit(str(rewritten), force=True)
    assert rewritten.read_bytes()[:len(before)] == before
    assert recorded_original_length(_footer(rewritten)) == len(before)
    assert verify(str(rewritten)).ok and pq.read_table(rewritten).equals(_table())


def test_a_marker_pointing_at_no_footer_cuts_nothing(tmp_path):
    """An original_length where no footer of the same file ends (out of range, inside the data,
    its magic overwritten) keeps the whole file."""
    path = _write(tmp_path)
    pageindex.retrofit(str(path))
    original = recorded_original_length(_footer(path))
    data = bytearray(path.read_bytes())
    data[original - 4:original] = b"XXXX"  # the original's trailing magic
    path.write_bytes(bytes(data))
    assert verify(str(path)).ok
    lengths = {"0": 0, "11": 11, "inside the data": original // 2, "past the footer": 10 ** 12, "not a number": "x1"}
    for what, length in lengths.items():
        other = tmp_path / "marked.parquet"
        pq.write_table(_table().replace_schema_metadata({"pageindex": f"version=0.0.9;original_length={length}"}),
                       other, row_group_size=GROUP, write_page_index=False)
        for case in (path, other):
            footer = _footer(case)
            with open_source(str(case)) as source:
                assert kept_prefix(source, footer, plan_chunks(footer, False)).length == footer.file_size, what


def test_bloom_filters_written_by_an_earlier_run_move_with_the_tail(tmp_path):
    """A kept filter lies in the part a rerun replaces: it is written again in the new tail."""
    path = _write(tmp_path)
    original = path.read_bytes()
    pageindex.retrofit(str(path), bloom_filter=["id"])
    filters = {(c.row_group, c.column): c.bloom_filter for row in _footer(path).chunks for c in row if c.bloom_filter}
    with_filters = path.read_bytes()
    assert len(filters) == ROWS // GROUP and all(offset >= len(original) for offset, _ in filters.values())
    pageindex.retrofit(str(path), force=True)  # no filter asked for: the existing ones are kept
    kept = {(c.row_group, c.column): c.bloom_filter for row in _footer(path).chunks for c in row if c.bloom_filter}
    assert sorted(kept) == sorted(filters)
    data = path.read_bytes()
    assert data[:len(original)] == original
    for key, (offset, length) in kept.items():
        old_offset, old_length = filters[key]
        assert data[offset:offset + length] == with_filters[old_offset:old_offset + old_length]
    assert verify(str(path)).ok
    assert pq.read_table(path, filters=[("id", "=", 7)]).num_rows == 1
    pageindex.retrofit(str(path), force=True)
    assert path.read_bytes() == data


@pytest.mark.s3
def test_a_dataset_listed_before_an_in_place_retrofit_still_reads(s3_server, s3_bucket):
    """pyarrow's S3 dataset keeps each file's size from its listing and reads the footer from
    there: after the object is replaced, that size must still end in a footer."""
    client, fs = s3h.boto3_client(s3_server), s3h.make_s3fs(s3_server)
    table = _table()
    for i in range(2):
        buf = io.BytesIO()
        pq.write_table(table, buf, row_group_size=GROUP, data_page_size=2048, write_page_index=False)
        client.put_object(Bucket=s3_bucket, Key=f"lake/part-{i}.parquet", Body=buf.getvalue())
    dataset = ds.dataset(f"{s3_bucket}/lake", filesystem=s3h.pyarrow_s3fs(s3_server), format="parquet")
    for i in range(2):
        assert pageindex.retrofit(f"s3://{s3_bucket}/lake/part-{i}.parquet", filesystem=fs).status == "indexed"
    assert dataset.to_table().equals(pa.concat_tables([table, table]))
    fresh = ds.dataset(f"{s3_bucket}/lake", filesystem=s3h.pyarrow_s3fs(s3_server), format="parquet")
    assert fresh.to_table().equals(pa.concat_tables([table, table]))


@pytest.mark.spark
def test_a_spark_dataframe_created_before_an_in_place_retrofit_still_reads(spark, tmp_path):
    """A DataFrame listed before the swap reads the same rows after it. (Spark 4 in local mode
    stats each file again when it reads its footer, so this holds on the old layout too: a guard
    for engines' file-status caches, not the proof; the S3 dataset test above is.)"""
    from tests.helpers.spark import to_uri

    lake = tmp_path / "lake"
    lake.mkdir()
    for i in range(2):
        _pyarrow()(_table(), lake / f"part-{i}.parquet")
    frame = spark.read.parquet(to_uri(lake))
    want = sorted(frame.select("id").collect())
    for i in range(2):
        assert pageindex.retrofit(str(lake / f"part-{i}.parquet")).status == "indexed"
    assert sorted(frame.select("id").collect()) == want
    assert frame.count() == 2 * ROWS
    shutil.rmtree(lake)
