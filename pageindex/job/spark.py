"""The Spark batch job: discover files on the driver, retrofit them on executors, report.

`spark-submit jobs/retrofit_job.py ...` or the `pageindex-job` console script (local[*]).
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
import warnings
from typing import Any, NoReturn, Sequence

from pageindex.errors import PageIndexError
from pageindex.io.discovery import Discovery, discover
from pageindex.io.storage import add_transport_argument, resolve, storage_options_from
from pageindex.job import lake
from pageindex.job.process import JobOptions, add_bloom_arguments, check_bloom_arguments, output_url, process_task
from pageindex.job.report import summary, write_report
from pageindex.job.tasks import pack, parse_size
from pageindex.retrofit import Status
from pageindex.shutdown import leave, stops_cleanly

log = logging.getLogger("pageindex.job.spark")
EXIT_OK, EXIT_FAILURES, EXIT_USAGE = 0, 1, 2
WORKER_SAFE_PATH = "spark.executorEnv.PYTHONSAFEPATH"


class UsageError(Exception):
    """A configuration problem: exit code 2, nothing processed."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="retrofit_job", description="Give every Parquet file under the inputs a page index.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", nargs="+", metavar="PATH",
                     help="files, directories (recursive), globs; local, file://, s3://, s3a://")
    src.add_argument("--table", metavar="DB.TABLE",
                     help="a catalog table; its location is used (a Delta table root there: as --input)")
    src.add_argument("--iceberg-table", metavar="CATALOG.NAMESPACE.TABLE",
                     help="an Iceberg table from the pyiceberg catalog configuration (.pyiceberg.yaml or "
                          "PYICEBERG_CATALOG__* variables): with --in-place, index its current snapshot's "
                          "files as new files and commit them as a new snapshot")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--in-place", action="store_true", help="replace each file atomically")
    mode.add_argument("--output", metavar="DIR", help="write indexed files here, mirroring the input tree")
    p.add_argument("--copy-unchanged", action="store_true",
                   help="with --output: also copy files that need no change")
    p.add_argument("--dry-run", action="store_true", help="compute and report, write nothing")
    p.add_argument("--force", action="store_true", help="rebuild indexes that already exist")
    p.add_argument("--verify-existing", action="store_true",
                   help="check existing page indexes against the data and rebuild wrong ones (status repaired)")
    p.add_argument("--truncate-length", type=int, default=64, metavar="N",
                   help="truncate BYTE_ARRAY bounds longer than N bytes (default 64)")
    p.add_argument("--trust-page-stats", action="store_true",
                   help="build bounds from page-header statistics where trustworthy (faster)")
    add_bloom_arguments(p)
    p.add_argument("--target-task-bytes", default="256m", metavar="SIZE",
                   help="bytes per Spark task (default 256m); larger files get a task each")
    p.add_argument("--max-failures", type=int, default=0, metavar="N",
                   help="exit 1 when more than N files fail (default 0)")
    p.add_argument("--report", metavar="PATH", help="per-file report: .parquet or JSON lines")
    p.add_argument("--s3-endpoint-url", metavar="URL", help="S3-compatible endpoint")
    p.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                   help="an fsspec storage option, repeatable (as the pageindex CLI's)")
    add_transport_argument(p)
    p.add_argument("--progress-seconds", type=float, default=30.0, metavar="N",
                   help="log a line of files done and tasks running every N seconds (default 30)")
    p.add_argument("--table-format", choices=lake.TABLE_FORMATS,
                   help="the input is a table root (detected from _delta_log/ otherwise): with "
                        "--in-place, index its snapshot's files as new files and commit them to its log")
    p.add_argument("--commit-batch-files", type=int, default=1000, metavar="N",
                   help="table inputs (Delta, --iceberg-table): files replaced per commit (default 1000)")
    p.add_argument("--stale-temp-seconds", type=float, default=3600.0, metavar="N",
                   help="remove what dead attempts left older than this (default 3600): temporaries, "
                        "before each file; S3 multipart uploads of a file in place, when it is found "
                        "already indexed (see the README, Object storage)")
    return p


def storage_options(args: argparse.Namespace) -> dict[str, Any]:
    try:
        return storage_options_from(args.s3_endpoint_url, args.storage_option, args.s3_transport)
    except ValueError as err:
        raise UsageError(str(err)) from None


def table_location(spark: Any, name: str) -> tuple[str, str | None]:
    """A catalog table's location and provider (e.g. parquet, hive, delta, iceberg)."""
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()
    info = {r[0].strip(): (r[1] or "").strip() for r in rows if r[0]}
    if "Location" not in info:
        raise UsageError(f"table {name} has no location in the catalog")
    return info["Location"], info.get("Provider")


def check_modes(found: Discovery, in_place: bool, table: tuple[str, str | None] | None = None) -> None:
    """Refuse a table format's files, in place or mirrored to --output (lake.refusal names the
    ways that do index the table), and an --output tree that would get two files at one path.
    `table`: a catalog table's name and provider, if any."""
    formats = list(found.table_formats)
    if table and table[1] and table[1].lower() in lake.TABLE_NAMES:
        formats.append((table[0], table[1].lower()))
    if formats:
        raise UsageError(lake.refusal(*formats[0], in_place=in_place))
    if not in_place:
        relatives = [f.relative for f in found.files]
        if len(set(relatives)) != len(relatives):
            raise UsageError("the inputs hold files with the same path below their input roots; "
                             "--output cannot mirror them into one tree (give one common parent)")


def _progress(sc: Any, done: Any, total: int, every: float, stop: threading.Event) -> None:
    """Periodic log lines next to Spark's own progress bar (which batch logs often lose)."""
    while not stop.wait(every):
        tracker = sc.statusTracker()
        stages = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
        running = sum(s.numActiveTasks for s in stages if s)
        log.warning("progress: %d/%d files done, %d task(s) running", done.value, total, running)


def run(args: argparse.Namespace, spark: Any) -> int:
    started = time.monotonic()
    options = storage_options(args)
    provider = None
    inputs = args.input
    if args.table:
        location, provider = table_location(spark, args.table)
        inputs = [location]
    job_options = JobOptions(
        output=args.output, copy_unchanged=args.copy_unchanged, dry_run=args.dry_run,
        force=args.force, truncate_length=args.truncate_length, storage_options=options,
        stale_temp_seconds=args.stale_temp_seconds, trust_page_stats=args.trust_page_stats,
        bloom_filter=args.bloom_filter, bloom_fpp=args.bloom_fpp, bloom_max_bytes=args.bloom_max_bytes,
        verify_existing=args.verify_existing,
    )
    if args.iceberg_table:
        table, inputs = lake.plan_iceberg(args.iceberg_table, args.in_place, job_options), [args.iceberg_table]
    else:  # a catalog table whose location is a Delta table root commits through its log too
        table = lake.plan_input(inputs, args.table_format, args.in_place, job_options)
    if table is None:
        found = discover(inputs, options)
        check_modes(found, args.in_place, (args.table, provider) if args.table else None)
        files = list(found.files)
    else:
        files, job_options = list(table.files), table.options
    log.warning("found %d files (%d bytes) under %d input(s)", len(files),
                sum(f.size for f in files), len(inputs))
    records = _run_on_spark(spark, files, job_options, parse_size(args.target_task_bytes),
                            args.progress_seconds) if files else []
    commits = None
    if table is not None:
        records, commits = lake.commit_run(table, records, args.commit_batch_files)
    seconds = time.monotonic() - started
    if args.report:
        write_report(records, args.report, options)
    print(summary(records, seconds), flush=True)
    if commits:
        print(commits, flush=True)
    failed = sum(r["status"] == Status.FAILED for r in records)
    return EXIT_FAILURES if failed > args.max_failures else EXIT_OK


def _run_on_spark(spark: Any, files: list, options: JobOptions, target: int,
                  progress_seconds: float) -> list[dict[str, Any]]:
    sc = spark.sparkContext
    # A small dataset still spreads over every core the cluster offers.
    spread = -(-sum(f.size for f in files) // max(1, sc.defaultParallelism))
    tasks = pack(files, max(1, min(target, spread)))
    done = sc.accumulator(0)

    def run_task(task: list) -> list[dict[str, Any]]:
        out = []
        for record in process_task([(f, output_url(f, options)) for f in task], options):
            out.append(record)
            done.add(1)
        return out

    stop = threading.Event()
    ticker = threading.Thread(target=_progress, args=(sc, done, len(files), progress_seconds, stop),
                              daemon=True)
    ticker.start()
    try:
        sc.setJobDescription(f"pageindex: {len(files)} files in {len(tasks)} tasks")
        records = sc.parallelize(tasks, len(tasks)).flatMap(run_task).collect()
    finally:
        stop.set()
    return sorted(records, key=lambda r: r["path"])


def main(argv: Sequence[str] | None = None, spark: Any = None, master: str | None = "local[*]") -> int:
    """Entry point; `spark` may be given (tests, notebooks), else one is created or reused."""
    logging.basicConfig(level=logging.WARNING, format="[pageindex] %(message)s")
    try:
        args = parser().parse_args(argv)
    except SystemExit as exit_:
        return EXIT_USAGE if exit_.code else EXIT_OK
    if args.truncate_length < 1 or args.max_failures < 0 or args.commit_batch_files < 1:
        print("error: --truncate-length and --commit-batch-files must be >= 1 and --max-failures >= 0",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        check_bloom_arguments(args)
        parse_size(args.target_task_bytes)
        if args.output:
            resolve(args.output, storage_options=storage_options(args))
    except (ValueError, OverflowError, ImportError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    if spark is None:
        from pyspark.sql import SparkSession

        if master and master.startswith("local"):
            # Local workers must run this interpreter, the one with pageindex's dependencies.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

        # Python workers start as `python -m pyspark.daemon` in the working directory, which `-m`
        # puts first on sys.path: a folder named pageindex there (a clone's parent) would shadow
        # the installed package. PYTHONSAFEPATH (Python 3.11+) leaves the directory off.
        builder = SparkSession.builder.appName("pageindex-retrofit").config(WORKER_SAFE_PATH, "1")
        if master:
            builder = builder.master(master)
        # pyspark's first JVM call imports pyspark.testing.utils (a py4j converter does), which
        # warns on every run that pandas 3 is not fully supported; the job uses no pandas API.
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas",
                                category=FutureWarning, module=r"pyspark\.testing\.utils")
        spark = builder.getOrCreate()
    try:
        return run(args, spark)
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except PageIndexError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except ImportError as err:
        print(f"error: a filesystem needs a package that is not installed: {err}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as err:  # noqa: BLE001 - Spark reports executor failures as Py4J errors
        if type(err).__module__.startswith(("py4j", "pyspark")):
            print(f"error: the Spark job failed: {str(err).strip().splitlines()[-1]}", file=sys.stderr)
            return EXIT_FAILURES
        raise


def console() -> NoReturn:
    """The `pageindex-job` console script: the job on a local Spark."""
    leave(stops_cleanly(main)())
