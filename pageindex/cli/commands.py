"""The command line's commands: `retrofit`, `inspect`, `verify`, `lookup` and `report`, each run
on the parsed arguments (pageindex.cli.arguments) and returning its exit code.
"""
from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from typing import Any, Callable, Iterator

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
    EXIT_OK,
    EXIT_PERMANENT,
    NotParquetError,
    PageIndexError,
    UsageError,
    combined_exit_code,
    exit_code,
    failures_exit_code,
)
from pageindex.index.parallel import auto_threads
from pageindex.inspection import format_text, inspect_file
from pageindex.io.storage import resolve, storage_errors
from pageindex.job.process import JobOptions, failed_record, index_options, process_task, process_to
from pageindex.job import kernel_probe
from pageindex.job.preflight import check_report_path, normalised
from pageindex.job.report import FALLBACK_DOCS, summary, write_report
from pageindex.job.report_summary import read_report, report_urls, summarise
from pageindex.job.state import RunState
from pageindex.query.lookup import lookup
from pageindex.retrofit import Status
from pageindex.verify import verify


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

def run_retrofit(args: argparse.Namespace) -> int:
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


def run_report(args: argparse.Namespace) -> int:
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


def run_inspect(args: argparse.Namespace) -> int:
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


def run_verify(args: argparse.Namespace) -> int:
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


def run_lookup(args: argparse.Namespace) -> int:
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

