"""The job's command line, parsed once at the edge into a frozen JobConfig the rest of the job receives.

Validation lives here: every check that needs no Spark and no file runs before either is touched.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any, NoReturn, Sequence

from pageindex.errors import EXIT_OK, EXIT_USAGE, UsageError
from pageindex.io.storage import add_transport_argument, resolve, storage_options_from
from pageindex.job import lake
from pageindex.job.preflight import normalised
from pageindex.job.process import JobOptions, add_index_arguments, check_bloom_arguments, index_options
from pageindex.job.state import add_state_argument
from pageindex.job.tasks import parse_size

PROG = "pageindex-job"

EXIT_CODES = """\
exit codes:
  0  every file ended well (files being written and read-only files are left
     for a later run), or no more failed than --max-failures
  1  a failure a retry may mend: storage errors and throttling, lost executors,
     a failed Spark job, a report that could not be written (retry the run)
  2  usage or configuration, found before any file was changed: bad arguments,
     a malformed --storage-option, a missing input, an unknown table, a
     --report, --summary-json or --state that cannot be written, Spark not
     installed or unable to start (no Java, a bad SPARK_HOME or --conf),
     executors that cannot import pageindex, or that cannot load the compiled
     kernels under --require-compiled
  3  more files than --max-failures failed for reasons no retry can mend
     (malformed, unsupported, encrypted) and none failed for a reason a retry
     may mend (do not retry: look at the report)
a file another writer changed while it was read is reported "changed", left
as that writer made it for the next run, and fails no run"""


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of printing the usage and exiting: the caller
    prints one line."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Give every Parquet file under the inputs a page index.",
                epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", nargs="+", metavar="PATH",
                     help="files, directories (recursive), globs; local, file://, s3://, s3a://")
    src.add_argument("--table", metavar="DB.TABLE",
                     help="a catalog table: the files of every partition the catalog lists, wherever "
                          "it lives (a table that is not partitioned: its location; a Delta table root "
                          "there: as --input); with --in-place Spark's cache of it is refreshed after")
    src.add_argument("--iceberg-table", metavar="CATALOG.NAMESPACE.TABLE",
                     help="an Iceberg table from the pyiceberg catalog configuration (.pyiceberg.yaml or "
                          "PYICEBERG_CATALOG__* variables): with --in-place, index its current snapshot's "
                          "files as new files and commit them as a new snapshot")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--in-place", action="store_true", help="replace each file atomically")
    mode.add_argument("--output", metavar="DIR", help="write indexed files here, mirroring the input tree")
    p.add_argument("--copy-unchanged", action="store_true",
                   help="with --output: also copy files that need no change")
    add_index_arguments(p)
    p.add_argument("--target-task-bytes", default="256m", metavar="SIZE",
                   help="bytes per Spark task (default 256m); larger files get a task each")
    p.add_argument("--max-failures", type=int, default=0, metavar="N",
                   help="exit 1 or 3 (see below) when more than N files fail (default 0)")
    p.add_argument("--report", metavar="PATH",
                   help="per-file report, a folder of part files the tasks write: Parquet, or JSON lines for a "
                        "name ending .jsonl or .json (checked writable before any file is touched)")
    add_state_argument(p)
    p.add_argument("--summary-json", metavar="PATH",
                   help="also write the run's summary as one JSON document for schedulers: files and bytes "
                        "per status, failures by reason, the exit code, the report's path (checked "
                        "writable before any file is touched)")
    p.add_argument("--s3-endpoint-url", metavar="URL", help="S3-compatible endpoint")
    p.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                   help="an fsspec storage option, repeatable (as the pageindex CLI's)")
    add_transport_argument(p)
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", dest="spark_conf",
                   help="a Spark setting for the session the job creates, repeatable, as spark-submit's "
                        "(spark.sql.catalogImplementation=hive, spark.executor.memory=4g, ...); on a "
                        "session already running, only settings Spark can change at runtime apply, "
                        "another differing one is a usage error")
    p.add_argument("--progress-seconds", type=float, default=30.0, metavar="N",
                   help="log a line of files done and tasks running every N seconds (default 30)")
    p.add_argument("--table-format", choices=lake.TABLE_FORMATS,
                   help="the input is a table root (detected from _delta_log/ otherwise): with "
                        "--in-place, index its snapshot's files as new files and commit them to its log")
    p.add_argument("--commit-batch-files", type=int, default=1000, metavar="N",
                   help="table inputs (Delta, --iceberg-table): files replaced per commit (default 1000)")
    p.add_argument("--require-compiled", action="store_true",
                   help="exit 2 before any file is touched when the executors' Python cannot load the "
                        "compiled kernels (by default a warning, and files are indexed by the Arrow "
                        "fallback at 2-3x the CPU)")
    p.add_argument("--stale-temp-seconds", type=float, default=3600.0, metavar="N",
                   help="remove what dead attempts left older than this (default 3600): temporaries, "
                        "before each file; S3 multipart uploads of a file in place, when it is found "
                        "already indexed (see docs/object-storage.md)")
    return p


@dataclass(frozen=True)
class JobConfig:
    """Everything the command line says, checked: what run() and the rest of the job receive."""

    inputs: tuple[str, ...]  # --input (empty with --table or --iceberg-table)
    table: str | None
    iceberg_table: str | None
    in_place: bool
    options: JobOptions  # what executors receive (output, modes, index and bloom options, storage)
    target_task_bytes: int
    max_failures: int
    report: str | None
    summary_json: str | None
    progress_seconds: float
    table_format: str | None
    commit_batch_files: int
    spark_conf: tuple[tuple[str, str], ...]  # --conf, in order
    state: str | None = None  # --state
    require_compiled: bool = False  # --require-compiled

    @property
    def storage_options(self) -> dict[str, Any]:
        return self.options.storage_options

    @classmethod
    def from_argv(cls, argv: Sequence[str] | None) -> "JobConfig":
        """Parse and check `argv` (sys.argv[1:] when None). Raises UsageError naming the
        option at fault; --help prints the help and raises SystemExit(0)."""
        args = parser().parse_args(argv)
        _check_ranges(args)
        try:
            check_bloom_arguments(args)
        except ValueError as err:
            raise UsageError(str(err)) from None
        try:
            storage = storage_options_from(args.s3_endpoint_url, args.storage_option, args.s3_transport)
        except ValueError as err:
            raise UsageError(str(err)) from None
        if args.output:
            try:  # the filesystem's package is installed, the URL names one
                resolve(args.output, storage_options=storage)
            except (ValueError, ImportError) as err:
                raise UsageError(f"--output {args.output}: {err}") from None
        _check_consistent(args)
        options = index_options(args, output=args.output, copy_unchanged=args.copy_unchanged,
                                storage_options=storage, stale_temp_seconds=args.stale_temp_seconds)
        return cls(
            inputs=tuple(args.input or ()), table=args.table, iceberg_table=args.iceberg_table,
            in_place=args.in_place, options=options,
            target_task_bytes=_size("--target-task-bytes", args.target_task_bytes),
            # Absolute: executors and the driver may not share a working directory.
            max_failures=args.max_failures, report=normalised(args.report),
            summary_json=normalised(args.summary_json),
            progress_seconds=args.progress_seconds,
            table_format=args.table_format, commit_batch_files=args.commit_batch_files,
            spark_conf=tuple(_conf_pair(pair) for pair in args.spark_conf), state=normalised(args.state),
            require_compiled=args.require_compiled,
        )


def _check_ranges(args: argparse.Namespace) -> None:
    for name, value, least in (("--truncate-length", args.truncate_length, 1),
                               ("--commit-batch-files", args.commit_batch_files, 1),
                               ("--max-failures", args.max_failures, 0)):
        if value < least:
            raise UsageError(f"{name} must be at least {least}, not {value}")
    if not 0 < args.progress_seconds < float("inf"):  # NaN fails every comparison: refused too
        raise UsageError(f"--progress-seconds must be a finite number above 0, not {args.progress_seconds}")
    if not args.stale_temp_seconds >= 0:
        raise UsageError(f"--stale-temp-seconds must be at least 0, not {args.stale_temp_seconds}")


def _check_consistent(args: argparse.Namespace) -> None:
    """Options that exclude or need each other (beyond argparse's groups)."""
    if args.copy_unchanged and not args.output:
        raise UsageError("--copy-unchanged applies to --output only (in place, unchanged files stay)")
    if args.table_format and (not args.input or len(args.input) != 1 or not args.in_place):
        raise UsageError(f"--table-format {args.table_format} takes one --input table root and --in-place "
                         "(the table's log is updated, the old files stay for time travel)")
    if args.state and (args.iceberg_table or args.table_format):
        raise UsageError("--state applies to plain files (a directory, a glob, a catalog table's "
                         "partitions); a table format's log already says which files are new")
    if args.iceberg_table and not args.in_place:
        raise UsageError("--iceberg-table takes --in-place (the table gets a new snapshot, the old "
                         "files stay for time travel)")


def _size(name: str, text: str) -> int:
    try:
        return parse_size(text)
    except (ValueError, OverflowError):
        raise UsageError(f"{name} {text!r}: not a size (a byte count, or a number with k, m, g or t, "
                         "e.g. 256m), at least one byte") from None


def _conf_pair(pair: str) -> tuple[str, str]:
    key, sep, value = pair.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"--conf {pair!r} is not KEY=VALUE")
    return key.strip(), value


def check_argv(argv: Sequence[str]) -> int:
    """0 when `argv` are valid job arguments (printing the help for --help), else one line
    `pageindex-job: error: ...` on stderr and 2. Starts no Spark and touches no file."""
    try:
        JobConfig.from_argv(list(argv))
    except SystemExit as exit_:  # --help (argparse printed it)
        return EXIT_OK if not exit_.code else EXIT_USAGE
    except UsageError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK
