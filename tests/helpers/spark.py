"""Spark / parquet-java oracles: a local SparkSession, ColumnIndexValidator and scan row metrics."""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def make_spark_session(warehouse_dir: str | Path | None = None, app_name: str = "pageindex-tests"):
    """A small local SparkSession (local[2], no UI, UTC, 2 shuffle partitions, 2g driver)."""
    # Executors (python UDF workers) must use this interpreter, not whatever python3 is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
    )
    if warehouse_dir is not None:
        builder = builder.config("spark.sql.warehouse.dir", str(warehouse_dir))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def to_uri(path: str | Path) -> str:
    """A Hadoop-friendly URI: local paths become absolute file:// URIs, URIs pass through."""
    s = str(path)
    if "://" in s:
        return s
    return Path(s).resolve().as_uri()


def column_index_violations(spark, path: str | Path) -> list[str]:
    """parquet-java's own check of every ColumnIndex in ``path`` against the page data.

    Calls ``org.apache.parquet.hadoop.ColumnIndexValidator.checkContractViolations(InputFile)``
    (parquet-hadoop 1.17.0, shipped inside pyspark) on
    ``HadoopInputFile.fromPath(new Path(uri), hadoopConf)`` and returns each
    ``ContractViolation.toString()``.  It decodes every page and checks min/max bounds,
    null counts, null pages and boundary order.

    NOTE: a column chunk without a ColumnIndex is silently skipped, so a file with no page
    index at all yields ``[]``.  Check for the presence of the index separately.
    """
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    hpath = jvm.org.apache.hadoop.fs.Path(to_uri(path))
    input_file = jvm.org.apache.parquet.hadoop.util.HadoopInputFile.fromPath(hpath, conf)
    violations = jvm.org.apache.parquet.hadoop.ColumnIndexValidator.checkContractViolations(input_file)
    return [str(v.toString()) for v in violations]


_UNWRAP_ONE = {
    # Adaptive execution wraps the real plan; query stages wrap their sub-plan.
    "org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec": "executedPlan",
    "org.apache.spark.sql.execution.adaptive.ShuffleQueryStageExec": "plan",
    "org.apache.spark.sql.execution.adaptive.BroadcastQueryStageExec": "plan",
    "org.apache.spark.sql.execution.adaptive.TableCacheQueryStageExec": "plan",
    "org.apache.spark.sql.execution.adaptive.ResultQueryStageExec": "plan",
}


def _iter_seq(jseq) -> Iterator:
    it = jseq.iterator()
    while it.hasNext():
        yield it.next()


def find_scan_nodes(plan) -> list:
    """All FileSourceScanExec nodes under a physical plan, looking through AQE and query stages.

    WholeStageCodegenExec / InputAdapter / ColumnarToRow are ordinary parents, so walking
    ``children()`` reaches the scan; AdaptiveSparkPlanExec and *QueryStageExec are leaves
    that hide their plan, so they are unwrapped explicitly.
    """
    found = []
    stack = [plan]
    while stack:
        node = stack.pop()
        cls = node.getClass().getName()
        if cls.endswith("FileSourceScanExec"):
            found.append(node)
            continue
        if cls in _UNWRAP_ONE:
            stack.append(getattr(node, _UNWRAP_ONE[cls])())
            continue
        if cls.endswith("ReusedExchangeExec"):
            stack.append(node.child())
            continue
        stack.extend(_iter_seq(node.children()))
    return found


def plan_metric(node, name: str) -> int:
    """Value of one SQLMetric (e.g. 'numOutputRows', 'numFiles', 'filesSize') of a plan node."""
    metrics = node.metrics()
    if not metrics.contains(name):
        raise KeyError(f"{node.nodeName()} has no metric {name!r}: {[str(k) for k in _iter_seq(metrics.keys())]}")
    return int(metrics.apply(name).value())


@contextmanager
def spark_conf(spark, **settings: str | None) -> Iterator[None]:
    """Temporarily set SQL confs (``None`` leaves a key untouched); dotted keys via ``**{'a.b': 'x'}``."""
    old = {}
    try:
        for key, value in settings.items():
            if value is None:
                continue
            old[key] = spark.conf.get(key, None)
            spark.conf.set(key, value)
        yield
    finally:
        for key, value in old.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def scan_output_rows(
    spark,
    path: str | Path,
    predicate_sql: str,
    *,
    vectorized: bool | None = None,
    columns: list[str] | None = None,
) -> int:
    """Rows the Parquet scan handed to Spark for ``spark.read.parquet(path).where(predicate_sql)``.

    Runs ``collect()`` and then reads the ``numOutputRows`` SQL metric of the executed plan's
    ``FileSourceScanExec`` ("Scan parquet" node), summed over scan nodes (normally one).  Since
    Spark's record-level Parquet filtering is off by default, this is the number of rows in the
    row groups / page ranges that survived row-group statistics and ColumnIndex filtering,
    *before* Spark's own Filter: a point lookup on an indexed, sorted column reads about one
    page's worth of rows; without a page index it reads the whole row group.

    ``vectorized`` forces ``spark.sql.parquet.enableVectorizedReader`` for this query (both
    readers honour column-index filtering in Spark 4.x).
    """
    conf = {}
    if vectorized is not None:
        conf["spark.sql.parquet.enableVectorizedReader"] = "true" if vectorized else "false"
    with spark_conf(spark, **conf):
        df = spark.read.parquet(to_uri(path))
        if columns is not None:
            df = df.select(*columns)
        return collected_scan_rows(df.where(predicate_sql))


def collected_scan_rows(df) -> int:
    """Run `df` and sum numOutputRows over the "Scan parquet" nodes of its executed plan."""
    df.collect()
    plan = df._jdf.queryExecution().executedPlan()
    scans = find_scan_nodes(plan)
    if not scans:
        raise AssertionError(f"no FileSourceScanExec in executed plan:\n{plan.toString()}")
    return sum(plan_metric(s, "numOutputRows") for s in scans)
