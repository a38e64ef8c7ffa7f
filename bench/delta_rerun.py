"""Delta rerun bench: what the Spark job's rerun of a retrofitted Delta table on S3 opens and sends
after another writer's two appends, against a rerun that opens every file.

    python -m bench.delta_rerun [--latency-ms 20] [--partitions 48] [--appended 8]

A moto S3 server runs in this process on 127.0.0.1 behind tests/helpers/fault_proxy.py, which
adds the latency to every request and counts them; deltalake writes the table and the appends
straight to moto (not counted). The job (local[2]) retrofits the table in place, reruns after two
appends of `--appended` files each, then runs once more with another --truncate-length, which
opens every file (each is found indexed from its footer): the cost of every rerun before a copy's
name carried its options. Prints a markdown table with the load average.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from bench.objstore_job import SPARK_MASTER, _session
from pageindex.job.spark import main as job_main
from pageindex.table.delta import delta_storage_options
from tests.helpers import s3 as s3h
from tests.helpers.fault_proxy import FaultProxy

ROWS_PER_FILE = 4000


def _rows(partitions: int, first: int) -> pa.Table:
    n = partitions * ROWS_PER_FILE
    return pa.table({"p": [f"p{i % partitions:03d}" for i in range(n)],
                     "id": pa.array(range(first, first + n), pa.int64()),
                     "s": [f"s{i % 97:03d}" for i in range(n)]})


def _write(root: str, upstream: str, table: pa.Table, mode: str) -> None:
    """One file per partition, without page statistics (arrow-rs then writes no ColumnIndex)."""
    from deltalake import ColumnProperties, WriterProperties, write_deltalake

    props = WriterProperties(data_page_row_count_limit=500, write_batch_size=500,
                             default_column_properties=ColumnProperties(statistics_enabled="CHUNK"))
    write_deltalake(root, table, mode=mode, partition_by=["p"], writer_properties=props,
                    storage_options=delta_storage_options(s3h.storage_options(upstream)))


def _job(spark: Any, proxy: FaultProxy, root: str, bucket: str, report: Path, *flags: str) -> dict:
    proxy.reset()
    started = time.perf_counter()
    code = job_main(["--input", root, "--in-place", "--s3-endpoint-url", proxy.endpoint,
                     "--report", str(report), *flags], spark=spark)
    seconds = time.perf_counter() - started
    if code != 0:
        raise RuntimeError(f"the job over {root} exited with {code}")
    records = [json.loads(line) for line in report.read_text().splitlines()]
    opened = {unquote(r.path) for r in proxy.log if r.operation in ("GetObject", "HeadObject")
              and r.path.endswith(".parquet") and r.path.startswith(f"/{bucket}/")}
    indexed = {"/" + r["path"].removeprefix("s3://") for r in records if r["status"] == "already_indexed"}
    return {"seconds": seconds, "files": len(records), "opened": len(opened),
            "on_indexed": sum(unquote(r.path) in indexed for r in proxy.log), "already": len(indexed),
            "requests": proxy.stats.by_operation(), "statuses": Counter(r["status"] for r in records)}


def run(latency_ms: float, partitions: int, appended: int) -> list[tuple[str, dict]]:
    runs = []
    with tempfile.TemporaryDirectory() as tmp, s3h.moto_s3_server() as upstream, \
            FaultProxy(upstream, latency=latency_ms / 1000) as proxy:
        bucket = s3h.create_bucket(upstream, "delta")
        root = f"s3://{bucket}/t"
        _write(root, upstream, _rows(partitions, 0), "overwrite")
        report = Path(tmp) / "report.jsonl"
        spark = _session()
        try:
            runs.append(("retrofit", _job(spark, proxy, root, bucket, report)))
            for n in range(2):  # another writer's two appends
                _write(root, upstream, _rows(appended, 10_000_000 * (n + 1)), "append")
            runs.append(("rerun after two appends", _job(spark, proxy, root, bucket, report)))
            runs.append(("rerun, another --truncate-length (opens every file)",
                         _job(spark, proxy, root, bucket, report, "--truncate-length", "32")))
        finally:
            spark.stop()
    return runs


def table(runs: list[tuple[str, dict]]) -> str:
    lines = ["| job run | files in table | files opened | requests | per already indexed file "
             "| by operation | statuses | seconds |", "|---|---:|---:|---:|---:|---|---|---:|"]
    for name, r in runs:
        per_indexed = f"{r['on_indexed'] / r['already']:.1f}" if r["already"] else "-"
        ops = ", ".join(f"{op} {n}" for op, n in sorted(r["requests"].items()))
        statuses = ", ".join(f"{s} {n}" for s, n in sorted(r["statuses"].items()))
        lines.append(f"| {name} | {r['files']} | {r['opened']} | {sum(r['requests'].values())} | {per_indexed} "
                     f"| {ops} | {statuses} | {r['seconds']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--partitions", type=int, default=48, help="files the table starts with")
    parser.add_argument("--appended", type=int, default=8, help="files each of the two appends adds")
    args = parser.parse_args(argv)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    runs = run(args.latency_ms, args.partitions, args.appended)
    print(f"Spark {SPARK_MASTER}, {args.latency_ms:g} ms per request in the proxy\n")
    print(table(runs))
    print(f"\nLoad average at the end of the run: {' '.join(f'{x:.2f}' for x in os.getloadavg())}.")


if __name__ == "__main__":
    main()
