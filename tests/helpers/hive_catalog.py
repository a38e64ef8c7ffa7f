"""A Hive-catalog table on a Derby metastore in a temp dir, built and read in its own process.

`python -m tests.helpers.hive_catalog setup|read DIR` (one JVM per Derby database at a time: the
test suite's shared Spark session is not Hive-enabled). pyspark's own Hive 2.3 jars, offline.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

TABLE = "db.events"
ROWS = 6_000
DAYS = {1: "inside", 2: "inside", 3: "external"}  # day=3's partition lives outside the table root


def conf(tmp: Path) -> list[tuple[str, str]]:
    """The settings that make a session use this directory's metastore (as pageindex-job --conf)."""
    return [
        ("spark.sql.catalogImplementation", "hive"),
        ("spark.hadoop.javax.jdo.option.ConnectionURL",
         f"jdbc:derby:;databaseName={tmp}/metastore_db;create=true"),
        ("spark.sql.warehouse.dir", str(tmp / "wh")),
        ("spark.hadoop.hive.exec.scratchdir", str(tmp / "scratch")),
    ]


def conf_args(tmp: Path) -> list[str]:
    return [arg for key, value in conf(tmp) for arg in ("--conf", f"{key}={value}")]


def table_root(tmp: Path) -> Path:
    return tmp / "wh" / "db.db" / "events"


def external_dir(tmp: Path) -> Path:
    return tmp / "elsewhere" / "events-day3"


def partition_files(tmp: Path) -> dict[int, list[Path]]:
    """The files of each partition (two each), in the layout setup writes."""
    out = {}
    for day, where in DAYS.items():
        folder = table_root(tmp) / f"day={day}" if where == "inside" else external_dir(tmp)
        out[day] = [folder / f"part-{i:05d}.parquet" for i in range(2)]
    return out


def data_files(tmp: Path) -> list[Path]:
    return [f for files in partition_files(tmp).values() for f in files]


def _session(tmp: Path):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[1]").appName("hive-catalog-test")
               .config("spark.ui.enabled", "false").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.host", "127.0.0.1"))
    for key, value in conf(tmp):
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def setup(tmp: Path) -> None:
    """db.events, a Hive (STORED AS PARQUET) table partitioned by day: days 1 and 2 below its
    root, day 3 added with a LOCATION elsewhere; pyarrow files without a page index, and one
    more folder below the root (day=9) that is no registered partition."""
    spark = _session(tmp)
    spark.sql("CREATE DATABASE IF NOT EXISTS db")
    spark.sql(f"CREATE TABLE {TABLE} (k BIGINT, v DOUBLE, s STRING) PARTITIONED BY (day INT) STORED AS PARQUET")
    files = data_files(tmp)
    for n, path in enumerate([*files, table_root(tmp) / "day=9" / "part-00000.parquet"]):
        path.parent.mkdir(parents=True, exist_ok=True)
        k = np.arange(n * ROWS, (n + 1) * ROWS, dtype=np.int64)
        pq.write_table(pa.table({"k": k, "v": k / 7.0, "s": [f"s{i % 101}" for i in k]}), path,
                       row_group_size=ROWS // 2, data_page_size=1024)
    for day, where in DAYS.items():
        location = f" LOCATION '{external_dir(tmp)}'" if where == "external" else ""
        spark.sql(f"ALTER TABLE {TABLE} ADD PARTITION (day={day}){location}")
    spark.stop()


def read(tmp: Path) -> None:
    """What Spark reads of db.events, as JSON on stdout: rows and key sum per day."""
    spark = _session(tmp)
    rows = spark.sql(f"SELECT day, count(*) AS n, sum(k) AS total FROM {TABLE} GROUP BY day ORDER BY day").collect()
    print(json.dumps({str(r["day"]): [r["n"], r["total"]] for r in rows}))
    spark.stop()


if __name__ == "__main__":
    {"setup": setup, "read": read}[sys.argv[1]](Path(sys.argv[2]))
