"""`make run`: build a legacy Hive-partitioned dataset (pyarrow and DuckDB, no page index),
retrofit it with the Spark job in place, and show Spark's scan rows for a point lookup before/after.
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "run" / "sample" / "events"
REPORT = ROOT / "run" / "report.jsonl"
DAYS = 4
ROWS_PER_FILE = 400_000


def _table(day: int, first_id: int, rng: np.random.Generator) -> pa.Table:
    n = ROWS_PER_FILE
    countries = np.array(["DE", "FR", "US", "JP", "BR", "IN", "NG", "AU"])
    return pa.table({
        "event_id": pa.array(np.arange(first_id, first_id + n, dtype=np.int64)),
        "user_id": pa.array(rng.integers(0, 5_000_000, n)),
        "amount": pa.array(np.round(rng.gamma(2.0, 30.0, n), 2)),
        "country": pa.array(countries[rng.integers(0, len(countries), n)]),
        "ts": pa.array(np.datetime64(f"2024-01-{day + 1:02d}") + rng.integers(0, 86_400_000, n).astype("timedelta64[ms]")),
    })


def build_dataset() -> dict[str, tuple[str, int]]:
    """One pyarrow file and one DuckDB file per day partition; returns a probe key per writer."""
    shutil.rmtree(DATA, ignore_errors=True)
    rng = np.random.default_rng(7)
    probes: dict[str, tuple[str, int]] = {}
    con = duckdb.connect()
    for day in range(DAYS):
        part = DATA / f"day=2024-01-{day + 1:02d}"
        part.mkdir(parents=True)
        first = day * 2 * ROWS_PER_FILE
        arrow_file = part / "part-00000-pyarrow.parquet"
        # pyarrow with its defaults but for a smaller page size, as many legacy writers produce
        pq.write_table(_table(day, first, rng), arrow_file, row_group_size=200_000,
                       data_page_size=64 * 1024)
        duck_file = part / "part-00001-duckdb.parquet"
        con.register("t", _table(day, first + ROWS_PER_FILE, rng))
        con.execute(f"COPY (SELECT * FROM t ORDER BY event_id) TO '{duck_file}' "
                    "(FORMAT PARQUET, ROW_GROUP_SIZE 200000)")
        con.unregister("t")
        probes.setdefault("pyarrow", (str(arrow_file), first + ROWS_PER_FILE // 3))
        probes.setdefault("DuckDB", (str(duck_file), first + ROWS_PER_FILE + ROWS_PER_FILE // 3))
    return probes


def scan_rows(spark, predicate: str) -> tuple[int, int]:
    """Rows the "Scan parquet" node produced (after page skipping) and rows matched."""
    df = spark.read.parquet(str(DATA)).where(predicate)
    matched = len(df.collect())
    plan = df._jdf.queryExecution().executedPlan()
    total = 0
    for node in _nodes(plan):
        if node.nodeName().startswith("Scan parquet"):
            total += node.metrics().apply("numOutputRows").value()
    return total, matched


def _nodes(plan):
    stack = [plan]
    while stack:
        node = stack.pop()
        yield node
        if node.nodeName() == "AdaptiveSparkPlan":
            stack.append(node.executedPlan())
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))


def main() -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from pageindex.job.spark import hide_pandas_warning
    from pageindex.job.spark import main as job_main

    t0 = time.monotonic()
    probes = build_dataset()
    size = sum(p.stat().st_size for p in DATA.rglob("*.parquet"))
    print(f"== sample dataset: {DATA} ({len(list(DATA.rglob('*.parquet')))} files, "
          f"{size / 2**20:.1f} MiB, Hive-partitioned by day, sorted by event_id in each file)"
          f" built in {time.monotonic() - t0:.1f}s")
    hide_pandas_warning()
    spark = (SparkSession.builder.master("local[2]").appName("pageindex-demo")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    before = {w: scan_rows(spark, f"event_id = {key}") for w, (_, key) in probes.items()}

    print("\n== pageindex job: --input run/sample/events --in-place --report run/report.jsonl")
    code = job_main(["--input", str(DATA), "--in-place", "--report", str(REPORT)], spark=spark)
    if code != 0:
        print(f"the job failed with exit code {code}")
        return code
    after = {w: scan_rows(spark, f"event_id = {key}") for w, (_, key) in probes.items()}

    print("\n== effect on a point lookup, Spark 'Scan parquet' numOutputRows (rows decoded and "
          "handed to the filter)")
    for writer, (path, key) in probes.items():
        (b, matched), (a, _) = before[writer], after[writer]
        print(f"  event_id = {key:<9} in a {writer:<7} file: before {b:>7} rows, after {a:>7} rows"
              f"  ({b / a if a else float('inf'):.0f}x fewer), {matched} matching row")
    print("  (DuckDB writes one data page per column chunk: a page index cannot skip anything "
          "inside its row groups, so its lookup reads the same rows before and after.)")
    print(f"\nper-file report: {REPORT}")
    print(f"inspect a file:  .venv/bin/pageindex inspect {probes['pyarrow'][0]}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
