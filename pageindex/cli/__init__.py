"""Command line: `pageindex retrofit | inspect | verify | lookup`.

Exit codes (EXIT_CODES, pageindex.errors): 0 success, 1 retryable, 2 usage, 3 failed for good.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from typing import Any, Callable, Iterator, NoReturn, Sequence

from pageindex.cli.output import (
    NOT_DONE,
    describe,
    format_rows,
    lookup_io,
    print_error,
    print_json,
    print_json_line,
    printable,
)
from pageindex.cli.progress import Progress
from pageindex.cli.targets import Target, expand, legacy_destination, plan
from pageindex.errors import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PERMANENT,
    EXIT_USAGE,
    NotParquetError,
    PageIndexError,
    UsageError,
    combined_exit_code,
    exit_code,
    failures_exit_code,
)
from pageindex.index.parallel import AUTO, auto_threads, threads_option
from pageindex.inspection import format_text, inspect_file
from pageindex.io.storage import add_transport_argument, resolve, storage_errors, storage_options_from
from pageindex.job.process import (
    JobOptions,
    add_index_arguments,
    check_bloom_arguments,
    failed_record,
    index_options,
    process_task,
    process_to,
)
from pageindex.job import kernel_probe
from pageindex.job.preflight import check_report_path, normalised
from pageindex.job.report import FALLBACK_DOCS, summary, write_report
from pageindex.job.report_summary import read_report, report_urls, summarise
from pageindex.job.state import RunState, add_state_argument
from pageindex.query.lookup import lookup
from pageindex.retrofit import Status
from pageindex.shutdown import leave, stops_cleanly
from pageindex.verify import verify
from pageindex.version import __version__

# S3 and other stores are configured the usual way (environment, ~/.aws): no options of our own.


def _processed(targets: list[Target], options: JobOptions, jobs: int) -> Iterator[tuple[Target, dict]]:
    """Each target with its record, as files finish; `jobs` worker processes when above 1."""
    if jobs == 1 or len(targets) < 2:
        yield from zip(targets, process_task([(t.file, t.output) for t in targets], options))
        return
    # Spawned, not forked: a child forked from a process running Arrow or fsspec threads can
    # inherit a lock one of them held, and hang.
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(targets)), mp_context=get_context("spawn"))
    try:
        futures = {pool.submit(process_to, t.file, t.output, options): t for t in targets}
        for future in as_completed(futures):
            t = futures[future]
            try:
                record = future.result()
            except BrokenProcessPool as err:
                record = failed_record(t.file, None, f"internal error: a worker process died ({err})")
                # killed from outside (out of memory, a signal): another try may pass
                record["retryable"] = True
            yield t, record
    finally:
        # Interrupted (Ctrl-C, a closed pipe): files not started are not started.
        pool.shutdown(wait=True, cancel_futures=True)


def _threads(threads: int | None, jobs: int, files: int) -> int:
    """Threads per file: as given, else `auto` in one process and one per worker process (the
    processes already take the cores)."""
    if threads is not None:
        return threads
    return auto_threads() if jobs == 1 or files < 2 else 1


def _threads_argument(text: str) -> int:
    """--threads: a positive number or `auto`."""
    try:
        return threads_option(AUTO if text.strip().lower() == AUTO else int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number or {AUTO}, not {text!r}") from None


def _cmd_retrofit(args: argparse.Namespace) -> int:
    legacy = legacy_destination(args.paths, args.output, args.storage_options)
    if legacy is not None:
        raise UsageError(
            f"{legacy} does not exist. Every path is now an input, indexed in place; to write "
            f"the indexed file elsewhere use: pageindex retrofit {args.paths[0]} --output {legacy}")
    if args.overwrite and args.output is None:
        raise UsageError("--overwrite applies to --output only (in place, the file is always replaced)")
    if args.copy_unchanged and args.output is None:
        raise UsageError("--copy-unchanged applies to --output only (in place, files that need no "
                         "change stay as they are)")
    started = time.monotonic()
    here = kernel_probe.this_process()
    if args.require_compiled and kernel_probe.fallback([here]):
        raise UsageError(f"--require-compiled: {kernel_probe.fallback([here])}; see {FALLBACK_DOCS}")
    args.report, args.state = normalised(args.report), normalised(args.state)
    targets = plan(args.paths, args.output, args.overwrite, args.storage_options, args.follow_links)
    check_report_path(args.report, args.storage_options)
    check_report_path(args.state, args.storage_options, "the state")
    options = index_options(args, copy_unchanged=args.copy_unchanged, storage_options=args.storage_options,
                            threads=_threads(args.threads, args.jobs, len(targets)))
    state = RunState(args.state, args.storage_options, args.paths, options) if args.state else None
    records, targets = _unchanged(state, targets, args.json)
    progress = Progress(len(targets), sum(t.file.size for t in targets), sys.stderr,
                        enabled=len(targets) > 1)
    progress.draw()
    try:
        for target, record in _processed(targets, options, args.jobs):
            if target.named and record["status"] == Status.SKIPPED:
                record.update(status=Status.FAILED, reason=f"{NotParquetError.__name__}: {record['reason']}")
            records.append(record)
            if state is not None:
                state.decide(record)
            progress.clear()
            if record["status"] in NOT_DONE:
                print(f"pageindex: error: {describe(record)}", file=sys.stderr)
            elif not args.json:
                print(describe(record), flush=True)
            progress.advance(target.file.size)
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM: what was decided is kept for the next run
        if state is not None:
            state.checkpoint()
        raise
    progress.clear()
    records.sort(key=lambda r: r["path"])
    if args.json:
        for record in records:
            print_json_line(record)
    code = failures_exit_code(r.get("retryable", False) for r in records if r["status"] in NOT_DONE)
    if state is not None:
        try:
            state.save()
        except PageIndexError as err:
            print_error(err, False)
            code = combined_exit_code([code, exit_code(err)])
    report = None
    if args.report:  # written before the summary, which then says where it went
        try:
            with storage_errors("write the report", args.report):
                write_report(records, args.report, args.storage_options)
            report = args.report
        except PageIndexError as err:
            print_error(err, False)
            code = combined_exit_code([code, exit_code(err)])
    if len(records) != 1:
        print("\n" + summary(records, time.monotonic() - started, "pageindex retrofit", report,
                              kernel_probe.fallback([here])),
              file=sys.stderr if args.json else sys.stdout)
    elif report is not None and not args.json:
        print(f"  report {report}")
    return code


def _unchanged(state: RunState | None, targets: list[Target], as_json: bool
               ) -> tuple[list[dict], list[Target]]:
    """The records of the targets the state settles (printed unless as JSON, which comes at the
    end), and the targets left to process."""
    if state is None:
        return [], targets
    records, left = [], []
    for target in targets:
        record = state.skip(target.file, target.output)
        if record is None:
            left.append(target)
            continue
        records.append(record)
        if not as_json:
            print(describe(record))
    return records, left


def _cmd_report(args: argparse.Namespace) -> int:
    reports, codes = [], []
    for url in report_urls(args.paths, args.storage_options):
        try:
            reports.append(read_report(url, args.storage_options))
        except PageIndexError as err:  # one unreadable report is named; the others are summed
            print_error(err, False)
            codes.append(exit_code(err))
    print(summarise(reports))
    return combined_exit_code(codes)


def _each_file(args: argparse.Namespace, show: Callable[[str, Any], int]) -> int:
    """`show` for every file below `paths` (its exit code); a file that fails is reported and
    the others go on; one that is not Parquet fails if named, else is reported skipped. The
    exit codes combined (a retryable failure outranks a permanent one)."""
    codes, as_json = [EXIT_OK], args.json
    for target in expand(args.paths, args.storage_options, args.follow_links):
        try:
            codes.append(show(target.file.url, resolve(target.file.url, storage_options=args.storage_options)[0]))
        except NotParquetError as err:
            if target.named:
                print_error(err, as_json)
                codes.append(exit_code(err))
            else:
                print(f"{target.file.url}: skipped: {err.reason}", file=sys.stderr)
        except PageIndexError as err:
            print_error(err, as_json)
            codes.append(exit_code(err))
    return combined_exit_code(codes)


def _cmd_inspect(args: argparse.Namespace) -> int:
    max_pages = 1 << 62 if args.all_pages else args.max_pages
    shown = []

    def show(path: str, filesystem: Any) -> int:
        view = inspect_file(path, filesystem)
        if args.json:
            print_json_line(view.to_dict())
        else:
            print(("\n" if shown else "") + format_text(view, max_pages=max_pages, summary=args.summary))
        shown.append(path)
        return 0

    return _each_file(args, show)


def _cmd_verify(args: argparse.Namespace) -> int:
    def show(path: str, filesystem: Any) -> int:
        result = verify(path, filesystem, threads=auto_threads() if args.threads is None else args.threads)
        if args.json:
            print_json_line(result.to_dict())
            return EXIT_OK if result.ok else EXIT_PERMANENT
        print(f"{result.path}: {'OK' if result.ok else 'VIOLATIONS'} — {result.chunks} chunks, "
              f"{result.chunks_with_offset_index} with OffsetIndex, {result.chunks_with_column_index} "
              f"with ColumnIndex, {result.pages_checked} pages checked")
        for v in result.violations:
            print(f"  {v}")
        if result.chunks_with_offset_index == 0:
            print("  (the file has no page index to verify)")
        # a violation is in the file's bytes: checking again finds it again
        return EXIT_OK if result.ok else EXIT_PERMANENT

    return _each_file(args, show)


def _cmd_lookup(args: argparse.Namespace) -> int:
    columns = [c.strip() for c in args.columns.split(",")] if args.columns else None
    filesystem = resolve(args.path, storage_options=args.storage_options)[0]
    table, stats = lookup(args.path, args.where, columns=columns, filesystem=filesystem, strict=args.strict)
    for path, reason in stats.files_skipped:
        print(f"{path}: skipped: {reason}", file=sys.stderr)
    for path, err in stats.files_failed:
        print(f"pageindex: warning: {path}: skipped, its rows are not in the result: "
              f"{type(err).__name__}: {err.message(with_path=False)}", file=sys.stderr)
    # Rows were returned, but not all of them: the exit code of files no retry can mend.
    code = 3 if stats.files_failed else 0
    shown = table if args.limit is None else table.slice(0, args.limit)
    if args.json:
        print_json({"rows": printable(shown).to_pylist(), "num_rows": table.num_rows,
                     "io": stats.to_dict()})
        return code
    print(format_rows(printable(shown)))
    if args.limit is not None and table.num_rows > args.limit:
        print(f"… {table.num_rows - args.limit} more rows")
    print("\n" + lookup_io(table.num_rows, stats))
    return code


RETROFIT_HELP = """\
Every PATH is an input: a Parquet file, a directory (searched recursively;
hidden and _underscore entries are ignored, files in it that are not Parquet
are reported skipped) or a glob; local, file://, s3:// or s3a://. Without
--output each file is replaced atomically in place; a symlink stays a link and
the file it points to is replaced. With --output the inputs are never changed.

The old form `retrofit SRC DST` (DST not existing) is refused with exit code
2: write `retrofit SRC --output DST` instead."""

EXIT_CODES = """\
exit codes (every command, and pageindex-job, follow one rule):
  0  every file ended well (retrofit: indexed, already indexed, skipped, or
     left for a later run: being written, read-only; verify: every page index
     agrees with the data)
  1  a failure a retry may mend: storage errors and throttling, a worker
     process that died, a report that could not be written
  2  usage: bad arguments, a malformed --storage-option, a missing input, an
     output that would overwrite an input, an existing file or a directory, a
     --report or --state that cannot be written; nothing was written
  3  files failed for reasons no retry can mend (malformed, unsupported,
     encrypted, changed while read; verify: a page index that contradicts the
     data) and none failed for a reason a retry may mend"""


LOOKUP_HELP = """\
PATH is a Parquet file or a directory, local, file://, s3:// or s3a://. In a
directory, files are found by the job's rules (hidden and _underscore entries
ignored; links to directories followed, each file read once; a file that is
not Parquet is reported skipped) and key=value folders
are Hive partitions: returned as columns (typed as pyarrow.dataset infers them:
int32 when every value casts to int32, else string, dates included;
__HIVE_DEFAULT_PARTITION__ is null; URL escapes decoded) and filterable, and a
condition on them prunes whole files without reading a byte of them. Files
whose schemas evolved are read as one: a column missing from a file is null in
its rows, int32 and int64 become int64 (pyarrow's permissive unify_schemas);
types that cannot be unified are refused, naming the file. A file of the
directory that cannot be read (malformed, encrypted, unsupported) is left out
with a warning naming it and the exit code is 3; --strict fails instead.

Floats compare as Spark and DuckDB compare them: every NaN equals NaN and is
greater than every number, infinity included; -0.0 equals 0.0. 'NaN',
'inf' and '-inf' (any case; also 'Infinity') are float literals."""


def storage_arguments() -> argparse.ArgumentParser:
    """The options every command takes to reach an object store (as the Spark job does)."""
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument("--s3-endpoint-url", metavar="URL",
                        help="S3-compatible endpoint (MinIO, Ceph, R2, ...); the AWS_ENDPOINT_URL_S3 "
                             "environment variable does the same")
    shared.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                        help="an fsspec storage option, repeatable; a dotted KEY nests "
                             "(client_kwargs.region_name=eu-west-1), a JSON VALUE is parsed (anon=true)")
    add_transport_argument(shared)
    return shared


def _links_argument(command: argparse.ArgumentParser) -> None:
    command.add_argument("--follow-links", action="store_true",
                         help="also follow local symbolic links that lead outside an input's real path "
                              "(as find -L); by default they are skipped with a warning")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pageindex", description="Exact Parquet page indexes, appended without rewriting data.",
                                epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    storage = storage_arguments()
    p.add_argument("--version", action="version", version=f"pageindex {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("retrofit", parents=[storage], help="add a ColumnIndex and OffsetIndex to files, in place or to --output",
                       description=RETROFIT_HELP, epilog=EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("paths", nargs="+", metavar="PATH", help="files, directories or globs to index")
    r.add_argument("--output", metavar="PATH",
                   help="write the indexed files here instead of in place: the output file for one "
                        "input file, else a directory mirroring the inputs (a trailing / also asks "
                        "for a directory); refused if it is one of the inputs")
    r.add_argument("--overwrite", action="store_true",
                   help="with --output: replace output files that already exist (refused otherwise)")
    r.add_argument("--copy-unchanged", action="store_true",
                   help="with --output: also copy the files that need no change (already indexed, "
                        "not Parquet), so the output is a complete copy of the inputs (copied by the "
                        "store itself where it can)")
    r.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="index N files at a time in worker processes (default 1)")
    r.add_argument("--threads", type=_threads_argument, default=None, metavar="N|auto",
                   help="scan N column chunks of a file at a time, each on a thread (auto: 2 where "
                        "the process may use 2 CPUs, else 1); default auto, but 1 per worker "
                        "process with --jobs above 1. The output is the same for any N")
    add_index_arguments(r)
    r.add_argument("--require-compiled", action="store_true",
                   help="exit 2 before any file is touched when the compiled kernels do not load "
                        "here (by default files are indexed by the Arrow fallback, at 2-3x the CPU)")
    r.add_argument("--json", action="store_true",
                   help="print one JSON record per file (JSON lines) instead of text; the summary "
                        "goes to stderr")
    r.add_argument("--report", metavar="PATH",
                   help="also write the per-file records here: Parquet if PATH ends in .parquet, "
                        "else JSON lines (as the Spark job's --report)")
    add_state_argument(r)
    r.set_defaults(run=_cmd_retrofit, subparser=r)

    i = sub.add_parser("inspect", parents=[storage], epilog=EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="show files' page indexes page by page, or their pages, types and codecs without one")
    i.add_argument("paths", nargs="+", metavar="PATH", help="files, directories or globs to show")
    i.add_argument("--json", action="store_true", help="one JSON document per file (JSON lines)")
    i.add_argument("--max-pages", type=int, default=20, metavar="N",
                   help="pages shown per chunk (default 20)")
    i.add_argument("--all-pages", action="store_true", help="show every page of every chunk")
    i.add_argument("--summary", action="store_true",
                   help="one line per column (its chunks over all row groups taken together) instead of "
                        "chunk by chunk: for files with many row groups")
    _links_argument(i)
    i.set_defaults(run=_cmd_inspect, subparser=i)

    v = sub.add_parser("verify", parents=[storage], help="check files' page indexes against the data",
                       epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    v.add_argument("paths", nargs="+", metavar="PATH", help="files, directories or globs to check")
    v.add_argument("--json", action="store_true", help="one JSON document per file (JSON lines)")
    v.add_argument("--threads", type=_threads_argument, default=None, metavar="N|auto",
                   help="check N column chunks of a file at a time, each on a thread (default auto: 2 "
                        "where the process may use 2 CPUs, else 1)")
    _links_argument(v)
    v.set_defaults(run=_cmd_verify, subparser=v)

    lk = sub.add_parser("lookup", parents=[storage], help="read only the pages that can hold matching rows",
                        description=LOOKUP_HELP, epilog=EXIT_CODES,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    lk.add_argument("path", help="a Parquet file or a directory of them (Hive-partitioned or not)")
    lk.add_argument("--where", required=True,
                    help="e.g. \"user_id = 42 AND ts >= '2024-01-01'\" (=, !=, <, <=, >, >=, "
                         "BETWEEN, IN, IS [NOT] NULL, joined by AND; partition columns too). A quoted "
                         "number on a numeric column is that number ('42' as 42); ISO date/timestamp "
                         "text without an offset on a UTC-adjusted timestamp column is UTC; struct "
                         "leaves by dotted path (point.x = 3)")
    lk.add_argument("--columns", help="comma-separated columns to return, partition columns included "
                                      "(default: all)")
    lk.add_argument("--limit", type=int, metavar="N", help="print at most this many rows")
    lk.add_argument("--strict", action="store_true",
                    help="fail on the first file of a directory that cannot be read (malformed, encrypted, "
                         "unsupported) instead of leaving it out with a warning and exit code 3")
    lk.add_argument("--json", action="store_true", help="rows and I/O counts as one strict JSON document (NaN and infinities as "
                         "strings, binary as 0x hex, dates and timestamps as ISO text)")
    lk.set_defaults(run=_cmd_lookup, subparser=lk)

    rp = sub.add_parser("report", parents=[storage], epilog=EXIT_CODES,
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        help="summarise saved reports (--report, the job's): per night, per status, failures by reason")
    rp.add_argument("paths", nargs="+", metavar="PATH",
                    help="report files (Parquet or JSON lines) or directories of them; a run_date=DAY "
                         "directory names the night, else each file is one")
    rp.set_defaults(run=_cmd_report, subparser=rp)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    cli = parser()
    args = cli.parse_args(argv)
    if getattr(args, "truncate_length", 1) < 1:
        cli.error("--truncate-length must be at least 1")
    if getattr(args, "jobs", 1) < 1:
        cli.error("--jobs must be at least 1")
    if hasattr(args, "bloom_filter"):
        try:
            check_bloom_arguments(args)
        except ValueError as err:
            args.subparser.error(str(err))
    try:
        args.storage_options = storage_options_from(args.s3_endpoint_url, args.storage_option, args.s3_transport)
    except ValueError as err:  # one line: the usage would bury which option is wrong
        print(f"{args.subparser.prog}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return args.run(args)
    except UsageError as err:
        if err.path is None:  # how the command was spelled: the usage helps
            args.subparser.error(str(err))
        print_error(err, False)  # about a path given: one line naming it
        return exit_code(err)
    except BrokenPipeError:
        # The reader went away (`... | head`): silence the flush at exit, as the Python docs advise.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except PageIndexError as err:
        print_error(err, getattr(args, "json", False))
        return exit_code(err)


def console() -> NoReturn:
    """The `pageindex` console script."""
    leave(stops_cleanly(main)())
