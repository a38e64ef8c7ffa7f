"""One query on one file in each engine of bench.engines, with what that engine reports reading.

Spark: the scan's numOutputRows; DataFusion: its parquet scan's metrics (bytes_scanned, pages and
row groups pruned); DuckDB: its JSON profile (bytes read, row groups scanned); pyarrow.dataset and
polars report nothing, so the bytes they read are this process's read() bytes (/proc/self/io
rchar: both read local files with pread); pageindex lookup: its own I/O statistics. Every engine
answers the same aggregate, so results compare exactly.
"""
from __future__ import annotations

import datetime as dt
import json
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from bench.engine_lake import Condition, Query
from tests.helpers.datafusion import datafusion_scan
from tests.helpers.engines import SPARK_SQL_CONF
from tests.helpers.spark import find_scan_nodes, plan_metric, spark_conf, to_uri

ENGINES = ("spark", "datafusion", "duckdb", "pyarrow.dataset", "polars", "lookup")
# The aggregate every engine answers: (rows, sum event_id, sum user_id, min amount, max amount).
AGGREGATE = "count(*) AS n, sum(event_id) AS ids, sum(user_id) AS users, min(amount) AS lo, max(amount) AS hi"
COLUMNS = ("event_id", "user_id", "amount")


# ---- predicates as each engine takes them ----------------------------------------------------

def _sql_literal(value: Any, engine: str) -> str:
    if isinstance(value, dt.datetime):
        text = value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S+00:00")
        return f"TIMESTAMPTZ '{text}'" if engine == "duckdb" else f"TIMESTAMP '{text}'"
    if isinstance(value, str):
        return f"'{value}'"
    return str(value)


def where_sql(query: Query, engine: str) -> str:
    """The query's filter as SQL for spark, datafusion, duckdb or lookup (pageindex's where)."""
    if engine == "lookup":
        return " AND ".join(f"{c.column} {c.op} " + (f"'{c.value.isoformat()}'" if isinstance(c.value, dt.datetime)
                                                      else _sql_literal(c.value, engine)) for c in query.conditions)
    return " AND ".join(f"{c.column} {c.op} {_sql_literal(c.value, engine)}" for c in query.conditions)


_ARROW_OPS: dict[str, Callable] = {"=": pc.equal, ">=": pc.greater_equal, "<": pc.less}


def _arrow_condition(c: Condition) -> pc.Expression:
    value = pa.scalar(c.value, pa.timestamp("us", tz="UTC")) if isinstance(c.value, dt.datetime) else c.value
    return _ARROW_OPS[c.op](pc.field(c.column), value)


def arrow_filter(query: Query) -> pc.Expression:
    """The query's filter as a pyarrow expression."""
    expr = _arrow_condition(query.conditions[0])
    for c in query.conditions[1:]:
        expr = expr & _arrow_condition(c)
    return expr


def _polars_condition(c: Condition):
    import polars as pl

    col = pl.col(c.column)
    return {"=": col == c.value, ">=": col >= c.value, "<": col < c.value}[c.op]


def polars_filter(query: Query):
    """The query's filter as a polars expression."""
    expr = _polars_condition(query.conditions[0])
    for c in query.conditions[1:]:
        expr = expr & _polars_condition(c)
    return expr


def answer(table: pa.Table) -> list:
    """The aggregate of a table holding the query's rows (COLUMNS at least)."""
    if table.num_rows == 0:
        return [0, None, None, None, None]
    return [table.num_rows, pc.sum(table["event_id"]).as_py(), pc.sum(table["user_id"]).as_py(),
            pc.min(table["amount"]).as_py(), pc.max(table["amount"]).as_py()]


def _row(values) -> list:
    """An engine's one aggregate row as plain values (None sums of empty results kept)."""
    return [v.as_py() if hasattr(v, "as_py") else v for v in values]


# ---- engines ---------------------------------------------------------------------------------

def rchar() -> int:
    """Bytes this process has read through read()/pread() so far (page cache hits included)."""
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise RuntimeError("/proc/self/io has no rchar")


def spark_probe(spark, path: Path, query: Query) -> dict:
    with spark_conf(spark, **SPARK_SQL_CONF):
        spark.read.parquet(to_uri(path)).createOrReplaceTempView("t")
        df = spark.sql(f"SELECT {AGGREGATE} FROM t WHERE {where_sql(query, 'spark')}")
        (row,) = df.collect()
    scans = find_scan_nodes(df._jdf.queryExecution().executedPlan())
    return {"result": _row(row), "rows_scanned": sum(plan_metric(s, "numOutputRows") for s in scans)}


def datafusion_probe(path: Path, query: Query) -> dict:
    batches, m = datafusion_scan(path, f"SELECT {AGGREGATE} FROM t WHERE {where_sql(query, 'datafusion')}")
    (row,) = pa.Table.from_batches(batches).to_pylist()
    keep = ("bytes_scanned", "page_index_pages_pruned", "page_index_pages_pruned_total", "page_index_rows_pruned",
            "page_index_rows_pruned_total", "row_groups_pruned_statistics", "row_groups_pruned_statistics_total",
            "row_groups_pruned_bloom_filter", "row_groups_pruned_bloom_filter_total")
    return {"result": list(row.values()), **{k: m[k] for k in keep if k in m}}


def duckdb_probe(path: Path, query: Query) -> dict:
    import duckdb

    with tempfile.TemporaryDirectory() as tmp:
        profile = Path(tmp) / "profile.json"
        con = duckdb.connect()
        try:
            con.execute("SET threads = 1")
            con.execute("SET TimeZone = 'UTC'")
            con.execute("PRAGMA enable_profiling = 'json'")
            con.execute(f"PRAGMA profiling_output = '{profile}'")
            row = con.execute(f"SELECT {AGGREGATE} FROM read_parquet('{path}') "
                              f"WHERE {where_sql(query, 'duckdb')}").fetchone()
        finally:
            con.close()
        report = json.loads(profile.read_text())
    q = report.get("query", {})
    return {"result": list(row), "bytes_read": report.get("io", {}).get("total_bytes_read"),
            "row_groups_scanned": q.get("total_row_groups_scanned"),
            "row_groups_total": q.get("total_row_groups_to_scan")}


def pyarrow_probe(path: Path, query: Query) -> dict:
    import pyarrow.dataset as ds

    before = rchar()
    table = ds.dataset(path, format="parquet").to_table(columns=list(COLUMNS), filter=arrow_filter(query),
                                                        use_threads=False)
    return {"result": answer(table), "bytes_read": rchar() - before}


def polars_probe(path: Path, query: Query) -> dict:
    import polars as pl

    before = rchar()
    frame = pl.scan_parquet(path).filter(polars_filter(query)).select(list(COLUMNS)).collect()
    return {"result": answer(frame.to_arrow()), "bytes_read": rchar() - before}


def lookup_probe(path: Path, query: Query) -> dict:
    from pageindex.query.lookup import lookup

    table, stats = lookup(str(path), where_sql(query, "lookup"), columns=list(COLUMNS))
    return {"result": answer(table), "bytes_read": stats.bytes_read,
            "row_groups_read": stats.row_groups_read, "row_groups_total": stats.row_groups,
            "row_groups_pruned_bloom_filter": stats.row_groups_pruned_by_bloom_filter}


def probe(engine: str, path: Path, query: Query, spark=None) -> dict:
    """`engine`'s answer and counts for `query` on `path`, with its wall seconds (indicative)."""
    started = time.perf_counter()
    if engine == "spark":
        out = spark_probe(spark, path, query)
    else:
        out = {"datafusion": datafusion_probe, "duckdb": duckdb_probe, "pyarrow.dataset": pyarrow_probe,
               "polars": polars_probe, "lookup": lookup_probe}[engine](path, query)
    return out | {"seconds": time.perf_counter() - started}


def versions() -> dict[str, str]:
    """Each engine's version, as measured."""
    import datafusion
    import duckdb
    import polars
    import pyspark

    import pageindex
    return {"spark": pyspark.__version__, "datafusion": datafusion.__version__, "duckdb": duckdb.__version__,
            "pyarrow": pa.__version__, "polars": polars.__version__, "pageindex": pageindex.__version__}
