"""Every real writer's files are accepted: a writer matrix of everything installable here, each in
its common settings, retrofitted, verified clean, its data unchanged under pyarrow and the answers
of DataFusion and Spark unchanged by our index.

Writers: pyarrow (v1/v2 pages, dictionary on/off), fastparquet, DuckDB, polars, pandas through both
engines, Spark/parquet-java (defaults with INT96 timestamps and its own page index, v2 pages, and
its file without a page index as parquet-mr before 1.11 wrote it).
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pageindex
from tests.helpers import engines as E
from tests.helpers.spark import to_uri
from tests.helpers.strip import strip_page_index
from tests.helpers.writers import duckdb_writer, fastparquet_writer, polars_writer

pytestmark = pytest.mark.slow  # a file per writer, each queried by two engines

ROWS = 30_000
ROW_GROUP = 10_000
# Point and range lookups on the sorted keys, and filters on unsorted and nullable columns.
PREDICATES = (
    "id = 12345",
    "id BETWEEN 1000 AND 1200",
    "name = 'user020000'",
    "grp = 7 AND id < 5000",
    "amount > 0.95",
    "amount IS NULL AND id > 29000",
)


def _table() -> pa.Table:
    rng = np.random.default_rng(7)
    ids = np.arange(ROWS, dtype=np.int64)
    amount = rng.random(ROWS)
    start = dt.datetime(2024, 1, 1)
    return pa.table({
        "id": ids,
        "grp": pa.array((ids % 97).astype(np.int32)),
        "amount": pa.array(amount, mask=rng.random(ROWS) < 0.05),
        "name": pa.array([f"user{i:06d}" for i in ids]),
        "ts": pa.array([start + dt.timedelta(seconds=int(i)) for i in ids], pa.timestamp("us")),
        "flag": pa.array(ids % 3 == 0),
    })


def _pyarrow(**options) -> Callable[[pa.Table, Path], None]:
    def write(table: pa.Table, path: Path) -> None:
        pq.write_table(table, path, row_group_size=ROW_GROUP, data_page_size=8192, write_batch_size=1024,
                       **options)
    return write


def _pandas(engine: str) -> Callable[[pa.Table, Path], None]:
    def write(table: pa.Table, path: Path) -> None:
        table.to_pandas().to_parquet(path, engine=engine, index=False)
    return write


WRITERS: dict[str, Callable[[pa.Table, Path], None]] = {
    "pyarrow-v1-dict": _pyarrow(data_page_version="1.0", use_dictionary=True),
    "pyarrow-v1-plain": _pyarrow(data_page_version="1.0", use_dictionary=False, compression="gzip"),
    "pyarrow-v2-dict": _pyarrow(data_page_version="2.0", use_dictionary=True, compression="zstd"),
    "pyarrow-v2-plain": _pyarrow(data_page_version="2.0", use_dictionary=False, compression="lz4"),
    "fastparquet": fastparquet_writer(ROW_GROUP),
    "fastparquet-snappy": fastparquet_writer(ROW_GROUP, compression="SNAPPY"),
    "duckdb": duckdb_writer(ROW_GROUP),
    "polars": polars_writer(ROW_GROUP),
    "polars-small-pages": polars_writer(ROW_GROUP, data_page_size=8192, compression="snappy"),
    "pandas-pyarrow": _pandas("pyarrow"),
    "pandas-fastparquet": _pandas("fastparquet"),
}
SPARK_WRITERS = ("spark-default", "spark-v2-pages", "spark-no-page-index")


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return _table()


def _spark_file(spark, table: pa.Table, kind: str, directory: Path) -> Path:
    """A file Spark writes from `table` (timestamps as Spark's default INT96)."""
    from pyspark.sql import functions as F

    source = directory / f"{kind}-input.parquet"
    pq.write_table(table, source)
    out = directory / f"{kind}-spark"
    # pyarrow's zone-less timestamps read as TIMESTAMP_NTZ; Spark writes its TIMESTAMP as INT96.
    frame = spark.read.parquet(to_uri(source)).withColumn("ts", F.col("ts").cast("timestamp"))
    writer = frame.coalesce(1).write.option("parquet.block.size", 256 * 1024)
    writer = writer.option("parquet.page.size", 8192)
    if kind == "spark-v2-pages":
        writer = writer.option("parquet.writer.version", "PARQUET_2_0")
    writer.parquet(to_uri(out))
    [written] = sorted(out.glob("part-*.parquet"))
    if kind == "spark-no-page-index":
        return strip_page_index(written, directory / f"{kind}.parquet")
    return written


def _check(src: Path, tmp_path: Path, spark=None) -> None:
    out = tmp_path / "out.parquet"
    result = pageindex.retrofit(str(src), str(out))
    if result.status == "already_indexed":
        out = src
    else:
        assert result.status == "indexed", result
        original = src.read_bytes()
        assert out.read_bytes()[: len(original)] == original  # the whole file, its footer included
    report = pageindex.verify(str(out))
    assert report.ok, report.violations[:5]
    assert pq.read_table(out).equals(pq.read_table(src))
    for where in PREDICATES:
        want = E.datafusion_rows(src, where, ["id"])
        assert E.datafusion_rows(out, where, ["id"]) == want, where
        if spark is not None:
            assert E.spark_rows(spark, out, where, ["id"]) == E.spark_rows(spark, src, where, ["id"]) == want, where


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_writer_files_are_retrofitted_and_answers_unchanged(writer, table, tmp_path):
    src = tmp_path / f"{writer}.parquet"
    WRITERS[writer](table, src)
    _check(src, tmp_path)


@pytest.mark.spark
@pytest.mark.parametrize("kind", SPARK_WRITERS)
def test_spark_files_are_retrofitted_and_answers_unchanged(kind, spark, table, tmp_path):
    src = _spark_file(spark, table, kind, tmp_path)
    columns = pq.ParquetFile(src).metadata.row_group(0)
    assert columns.column(4).physical_type == "INT96", "Spark's default timestamp type changed"
    if kind == "spark-no-page-index":
        assert not columns.column(0).has_offset_index
    else:
        assert columns.column(0).has_offset_index
    _check(src, tmp_path, spark)
    if kind != "spark-no-page-index":
        assert pageindex.retrofit(str(src), dry_run=True).status == "already_indexed"
