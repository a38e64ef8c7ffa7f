"""Which files are already complete, decided from the footer alone (index/marker.is_fully_indexed).

A file is complete when every chunk has an OffsetIndex and every missing ColumnIndex is one no
valid index could have (a column without a defined order: INT96, INTERVAL, geospatial). Spark
writes timestamps as INT96 by default, so a Spark-written lake must not be copied for nothing.
"""
from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pageindex
from pageindex.format.footer import TAIL_READ
from tests.helpers.strip import rewrite_page_index


def _int96_table(n: int = 20_000) -> pa.Table:
    start = dt.datetime(2024, 1, 1)
    return pa.table({
        "id": pa.array(range(n), pa.int64()),
        "ts": pa.array([start + dt.timedelta(seconds=i) for i in range(n)], pa.timestamp("us")),
    })


def _assert_skipped_untouched(path, result):
    assert result.status == "already_indexed"
    # The head magic and one tail read: no index block, no page.
    assert result.bytes_read <= TAIL_READ + 4


def test_int96_file_with_a_page_index_is_complete(tmp_path):
    path = tmp_path / "int96.parquet"
    pq.write_table(_int96_table(), path, use_deprecated_int96_timestamps=True, write_page_index=True,
                   data_page_size=4096)
    md = pq.ParquetFile(path).metadata.row_group(0)
    assert md.column(1).physical_type == "INT96" and not md.column(1).has_column_index
    before = (path.read_bytes(), os.stat(path).st_mtime_ns)
    result = pageindex.retrofit(str(path))
    _assert_skipped_untouched(path, result)
    assert (path.read_bytes(), os.stat(path).st_mtime_ns) == before


def test_missing_offset_index_or_indexable_column_index_is_incomplete(tmp_path):
    src = tmp_path / "full.parquet"
    pq.write_table(_int96_table(), src, use_deprecated_int96_timestamps=True, write_page_index=True,
                   data_page_size=4096)
    no_ci = rewrite_page_index(src, tmp_path / "no_ci.parquet",
                               lambda rg, col, ci, oi: (None if col == 0 else ci, oi))
    no_oi = rewrite_page_index(src, tmp_path / "no_oi.parquet",
                               lambda rg, col, ci, oi: (ci, None if col == 1 else oi))
    for path in (no_ci, no_oi):
        assert pageindex.retrofit(str(path), dry_run=True).status == "dry_run", path.name


@pytest.mark.spark
def test_spark_file_with_default_int96_timestamps_is_complete(spark, tmp_path):
    out = tmp_path / "spark_out"
    (spark.range(0, 50_000).selectExpr("id", "timestamp_seconds(id) AS ts")
     .coalesce(1).write.parquet(str(out)))
    [path] = sorted(out.glob("part-*.parquet"))
    md = pq.ParquetFile(path).metadata.row_group(0)
    assert md.column(1).physical_type == "INT96", "Spark's default output type changed"
    assert md.column(0).has_offset_index and md.column(1).has_offset_index
    before = (path.read_bytes(), os.stat(path).st_mtime_ns)
    result = pageindex.retrofit(str(path))
    _assert_skipped_untouched(path, result)
    assert (path.read_bytes(), os.stat(path).st_mtime_ns) == before
