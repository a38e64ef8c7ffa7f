"""A long-lived local[1] Spark session that runs benchmark commands sent as JSON lines.

One JVM serves the whole run, so its start-up is measured once ("jvm_start") and every timed
job is the job alone. Commands are read from stdin; each answer is one JSON line on the
original stdout (fd 1 is pointed at stderr so JVM chatter cannot corrupt the protocol).

  {"op": "warmup", "path": P}                      rewrite a tiny file once (class loading, JIT)
  {"op": "rewrite", "src": S, "dst": D, "compression": C}
  {"op": "query", "path": P, "where": W, "columns": [..]}
  {"op": "stop"}
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time


def session_builder(master: str = "local[1]"):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(master)
        .appName("pageindex-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", master.removeprefix("local[").removesuffix("]") or "1")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.warehouse.dir", os.path.join(os.getcwd(), "bench", "out", "spark-warehouse"))
        .config("spark.driver.extraJavaOptions", "-Dderby.system.home=" + os.path.join(os.getcwd(), "bench", "out"))
    )


def _rewrite(spark, src: str, dst: str, compression: str) -> dict:
    from tests.helpers.spark import to_uri

    if os.path.exists(dst):
        shutil.rmtree(dst)
    started = time.perf_counter()
    spark.read.parquet(to_uri(src)).write.option("compression", compression).parquet(to_uri(dst))
    seconds = time.perf_counter() - started
    files = [f for f in os.listdir(dst) if f.endswith(".parquet")]
    size = sum(os.path.getsize(os.path.join(dst, f)) for f in files)
    return {"seconds": seconds, "size_after": size, "files": len(files)}


def _query(spark, path: str, where: str, columns: list[str]) -> dict:
    from tests.helpers.engines import SPARK_SQL_CONF
    from tests.helpers.spark import scan_output_rows, spark_conf

    with spark_conf(spark, **SPARK_SQL_CONF):
        started = time.perf_counter()
        rows = scan_output_rows(spark, path, where, columns=columns)
        seconds = time.perf_counter() - started
    return {"seconds": seconds, "scan_rows": rows}


def main() -> int:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(obj: dict) -> None:
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    started = time.perf_counter()
    spark = session_builder("local[1]").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    jvm_start = time.perf_counter() - started
    send({"ready": True, "jvm_start": jvm_start, "spark": spark.version, "pid": os.getpid()})
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd.pop("op")
        try:
            if op == "stop":
                send({"ok": True})
                break
            if op == "warmup":
                out = _rewrite(spark, cmd["path"], cmd["path"] + ".spark-warmup", "snappy")
                shutil.rmtree(cmd["path"] + ".spark-warmup", ignore_errors=True)
            elif op == "rewrite":
                out = _rewrite(spark, cmd["src"], cmd["dst"], cmd["compression"])
            elif op == "query":
                out = _query(spark, cmd["path"], cmd["where"], cmd["columns"])
            else:
                raise ValueError(f"unknown op {op}")
            send({"ok": True, **out})
        except Exception as err:  # noqa: BLE001 - reported to the parent, which carries on
            send({"ok": False, "error": f"{type(err).__name__}: {str(err)[:2000]}"})
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
