"""Engines read the bloom filters retrofit writes (issue 27): for absent values DataFusion, DuckDB
and Spark skip row groups by them; for present values each returns exactly the rows it returns
from the same data without filters (ints, unsigned, strings incl. empty, -0.0/0.0, NaN, decimals on
INT32/INT64 and FIXED_LEN_BYTE_ARRAY, dates, timestamps, fixed binary)."""
from __future__ import annotations

import math
from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest

from tests.helpers.bloom_files import GROUP, N, write_filtered
from tests.helpers.engines import Predicate, datafusion_metrics, datafusion_rows, spark_rows, spark_scan_rows

GROUPS = N // GROUP


@pytest.fixture(scope="module", params=[False, True], ids=["dec-flba", "dec-int"])
def files(request, tmp_path_factory):
    t, src, out, _ = write_filtered(tmp_path_factory.mktemp("bloom_engines"), request.param)
    return t, src, out


def present(t: pa.Table) -> list[Predicate]:
    picks = [("i64", 7), ("i32", 2500), ("u32", 3), ("s", 0), ("s", 1), ("f64", 9), ("dec", 10), ("date", 11),
             ("ts", 12), ("uuid", 13)]
    out = [Predicate(col, "=", (t[col][i],)) for col, i in picks]
    out += [Predicate("f64", "=", (pa.scalar(z),)) for z in (0.0, -0.0, math.nan)]
    return out


def absent(t: pa.Table) -> list[Predicate]:
    """Odd values inside every row group's range: only a filter can skip them."""
    return [Predicate("i64", "=", (pa.scalar(8001),)), Predicate("s", "=", (pa.scalar("k8001"),)),
            Predicate("dec", "=", (pa.scalar(Decimal("80.01"), t["dec"].type),))]


def test_datafusion_same_rows_with_filters(files):
    t, src, out = files
    for predicate in present(t):
        with_filters = datafusion_rows(out, predicate)
        assert with_filters == datafusion_rows(src, predicate), predicate
        assert with_filters or predicate.values[0].as_py() != predicate.values[0].as_py(), predicate  # NaN


def test_datafusion_prunes_absent_values(files):
    t, _, out = files
    for predicate in absent(t):
        metrics = datafusion_metrics(out, predicate)
        assert metrics["row_groups_pruned_bloom_filter"] >= GROUPS - 1, (predicate, metrics)
        assert metrics["output_rows"] == 0


def duckdb_rows(path, predicate: Predicate) -> list:
    return sorted(duckdb.sql(f"SELECT i64 FROM read_parquet('{path}') WHERE {predicate.sql('datafusion')}")
                  .fetchall())


def test_duckdb_same_rows_and_probe(files):
    t, src, out = files
    for predicate in present(t):
        assert duckdb_rows(out, predicate) == duckdb_rows(src, predicate), predicate
    probe = duckdb.sql(f"SELECT row_group_id, bloom_filter_excludes FROM parquet_bloom_probe('{out}', 'i64', 8001)")
    assert sum(excluded for _, excluded in probe.fetchall()) >= GROUPS - 1
    value = t["i64"][7].as_py()
    probe = duckdb.sql(f"SELECT row_group_id, bloom_filter_excludes FROM parquet_bloom_probe('{out}', 'i64', {value})")
    assert dict(probe.fetchall())[0] is False


@pytest.mark.spark
def test_spark_same_rows_and_pruning(files, spark):
    t, src, out = files
    for predicate in present(t):
        assert spark_rows(spark, out, predicate) == spark_rows(spark, src, predicate), predicate
    for predicate in absent(t):
        # numOutputRows of the scan: rows of the row groups the filters left (at most one false positive).
        assert spark_scan_rows(spark, out, predicate) <= GROUP, predicate
        assert spark_scan_rows(spark, src, predicate) == N, predicate
