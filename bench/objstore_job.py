"""The object-store bench's Spark job part: files per second and requests of the Spark job over a
directory of small files on the S3 server, behind the bench's latency proxy.

Called by bench/objstore.py with its moto server and proxy running. One local[2] Spark session
serves every run (its start-up is not timed). Each round runs the job as a dry run, in place on a
fresh copy of the directory (made on the server, not counted) with a run state (--state), again
over that indexed copy (the footer-only skip), and again with the state (no file opened).
Requests include the driver's listing of the directory and the state's own reads and writes;
"naming a file" counts only the requests for the files' objects.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from bench.job_overlap import write_files
from bench.spark_worker import session_builder
from pageindex.job.spark import WORKER_SAFE_PATH
from pageindex.job.spark import main as job_main
from tests.helpers import s3 as s3h
from tests.helpers.fault_proxy import FaultProxy

ROOT = Path(__file__).resolve().parent.parent
MODES = ("dry run", "in place", "already indexed", "already indexed, --state")
SPARK_MASTER = "local[2]"


def _session() -> Any:
    # Spark's Python workers must import this tree's pageindex, and reach moto with the fake
    # credentials moto_s3_server put in this process's environment: both come from the JVM's env.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    spark = session_builder(SPARK_MASTER).config(WORKER_SAFE_PATH, "1").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _job(spark: Any, proxy: FaultProxy, url: str, report: Path, dry_run: bool, state: str | None = None) -> dict:
    argv = ["--input", url, "--in-place", "--s3-endpoint-url", proxy.endpoint, "--report", str(report)]
    proxy.reset()
    started = time.perf_counter()
    code = job_main(argv + (["--dry-run"] if dry_run else []) + (["--state", state] if state else []), spark=spark)
    seconds = time.perf_counter() - started
    if code != 0:
        raise RuntimeError(f"the Spark job over {url} exited with {code}")
    records = [json.loads(line) for line in report.read_text().splitlines()]
    statuses = Counter(r["status"] for r in records)
    # The requests whose path is one of the files' objects (path-style: /bucket/key).
    objects = {"/" + r["path"].removeprefix("s3://") for r in records}
    naming = sum(unquote(r.path.split("?", 1)[0]) in objects for r in proxy.stats.log)
    return {"seconds": seconds, "requests": proxy.stats.by_operation(), "statuses": dict(statuses),
            "file_requests": naming}


def run(upstream: str, proxy: FaultProxy, files: int, rounds: int) -> dict:
    """The job's runs over `files` small files, `rounds` times each mode: the median run of each."""
    client = s3h.boto3_client(upstream)
    bucket = s3h.create_bucket(upstream, "job")
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_files(Path(tmp), files, with_index=False)
        for path in paths:
            client.upload_file(str(path), bucket, f"plain/{path.name}")
        size = paths[0].stat().st_size
        report = Path(tmp) / "report.jsonl"
        spark = _session()
        try:
            _job(spark, proxy, f"s3://{bucket}/plain", report, dry_run=True)  # warm up: workers, clients
            runs: dict[str, list[dict]] = {mode: [] for mode in MODES}
            for round_ in range(rounds):
                copy = f"round-{round_}"
                for path in paths:
                    client.copy_object(Bucket=bucket, Key=f"{copy}/{path.name}",
                                       CopySource={"Bucket": bucket, "Key": f"plain/{path.name}"})
                runs["dry run"].append(_job(spark, proxy, f"s3://{bucket}/plain", report, dry_run=True))
                state = f"s3://{bucket}/state/{copy}.parquet"
                runs["in place"].append(_job(spark, proxy, f"s3://{bucket}/{copy}", report, False, state))
                runs["already indexed"].append(_job(spark, proxy, f"s3://{bucket}/{copy}", report, dry_run=False))
                runs["already indexed, --state"].append(
                    _job(spark, proxy, f"s3://{bucket}/{copy}", report, False, state))
        finally:
            spark.stop()
    return {"files": files, "file_bytes": size, "master": SPARK_MASTER, "rounds": rounds,
            "runs": {mode: sorted(rs, key=lambda r: r["seconds"])[len(rs) // 2] for mode, rs in runs.items()},
            "spread": {mode: [min(r["seconds"] for r in rs), max(r["seconds"] for r in rs)]
                       for mode, rs in runs.items()}}
