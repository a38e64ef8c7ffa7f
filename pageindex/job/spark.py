"""The Spark batch job: discover files on the driver, retrofit them on executors, report.

`spark-submit jobs/retrofit_job.py ...`, the `pageindex-job` console script or `python -m pageindex.job` (local[*]).
"""
from __future__ import annotations

import contextlib
import datetime
import logging
import os
import sys
import threading
import time
import warnings
from typing import Any, Iterator, NoReturn, Sequence, TextIO

from pageindex.errors import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RETRYABLE,
    EXIT_USAGE,
    PageIndexError,
    UsageError,
    combined_exit_code,
    exit_code,
)
from pageindex.io.discovery import Discovery, discover, input_root
from pageindex.io.storage import storage_errors
from pageindex.job import catalog, kernel_probe, lake, parts, pipeline, spread, table_run
from pageindex.job.config import PROG, JobConfig, parser
from pageindex.job.preflight import check_report_path
from pageindex.job.process import JobOptions
from pageindex.job.report import format_size, summary, summary_document, write_summary_json
from pageindex.job.state import root_key, run_key
from pageindex.shutdown import leave, stopping, stops_cleanly

__all__ = ["JobConfig", "UsageError", "check_modes", "console", "hide_pandas_warning", "main", "parser", "run"]

log = logging.getLogger("pageindex.job.spark")
WORKER_SAFE_PATH = "spark.executorEnv.PYTHONSAFEPATH"
INSTALL_SPARK = "pageindex-job needs pyspark: pip install 'pageindex[spark]'"
LOG_FORMAT = "[pageindex] %(message)s"


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


def _progress(sc: Any, done: Any, done_bytes: Any, total: int, total_bytes: int, every: float,
              stop: threading.Event) -> None:
    """Periodic log lines next to Spark's own progress bar (which batch logs often lose)."""
    started = time.monotonic()
    while not stop.wait(every):
        tracker = sc.statusTracker()
        stages = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
        running = sum(s.numActiveTasks for s in stages if s)
        log.warning("%s", progress_line(done.value, total, done_bytes.value, total_bytes, running,
                                        time.monotonic() - started))


def progress_line(files: int, total: int, nbytes: int, total_bytes: int, running: int, seconds: float) -> str:
    """Files and bytes done of all, tasks running, and an ETA from the bytes done so far (files
    differ in size: bytes say more than whole files); no ETA before the first file is done."""
    share = f" ({100 * nbytes / total_bytes:.0f}%)" if total_bytes else ""
    line = (f"progress: {files}/{total} files, {format_size(nbytes)} of {format_size(total_bytes)}{share} done, "
            f"{running} task(s) running")
    if 0 < nbytes < total_bytes:
        left = round(seconds * (total_bytes - nbytes) / nbytes)
        line += f", about {left // 3600}h {left // 60 % 60:02d}m {left % 60:02d}s left"
    return line


def run(config: JobConfig, spark: Any) -> int:
    """The job on `spark`: plan, process, commit (table runs), report; the exit code."""
    started = time.monotonic()
    options = config.options
    inputs, where = list(config.inputs), f"under {_count(len(config.inputs), 'input')}"
    table = catalog.describe(spark, config.table) if config.table else None
    if table is not None:
        inputs = [table.location]
    if config.iceberg_table:
        planned = lake.plan_iceberg(config.iceberg_table, config.in_place, options)
        inputs, where = [config.iceberg_table], f"in Iceberg table {config.iceberg_table}"
    else:  # a catalog table whose location is a Delta table root commits through its log too
        planned = lake.plan_input(inputs, config.table_format, config.in_place, options)
    spread_out = None
    if planned is None:  # an object store's listing stays on the executors (a local disk's: the driver's)
        if table is not None:
            check_modes(Discovery((), ()), config.in_place, (table.name, table.provider))
            spread_out = spread.list_table(spark, table, config.storage_options, config.in_place)
        else:
            spread_out = spread.list_inputs(spark, inputs, config.storage_options, config.in_place)
    if spread_out is not None:
        files = []  # listed, and kept, on the executors
    elif planned is None:
        found = _discover(config, table)
        check_modes(found, config.in_place, (table.name, table.provider) if table else None)
        files = list(found.files)
    elif config.state:
        raise UsageError(f"--state applies to plain files, not to the table at {inputs[0]}: its log "
                         "already says which files are new")
    else:
        files, options = list(planned.files), planned.options
    if table is not None:
        where = (f"in {_count(len(table.partitions), 'partition')} of table {table.name}"
                 if table.partitions is not None else f"in table {table.name}")
    count, nbytes = (spread_out.count, spread_out.nbytes) if spread_out else (len(files), sum(f.size for f in files))
    log.warning("found %s (%d bytes) %s", _count(count, "file"), nbytes, where)
    # Once the inputs are known good, before any file is opened: what the executors run.
    workers = kernel_probe.check(spark.sparkContext, config.require_compiled) if count else ()
    report, report_error = config.report, None
    if planned is None:
        plan = _plan(config, inputs, options)
        pipeline.prepare(plan)
        listing = (spread_out.files if spread_out else
                   spark.sparkContext.parallelize(files, pipeline.slices(len(files))))
        del files  # the executors hold the listing from here on
        try:
            outcome = pipeline.run_files(spark.sparkContext, listing, count, plan, config.target_task_bytes,
                                         _watch(spark.sparkContext, config.progress_seconds))
        finally:
            if spread_out:
                spread_out.release()
        totals, commits = outcome.tally, None
        try:
            with storage_errors("write the state and the report", config.state or report):
                pipeline.finish(plan)
        except PageIndexError as err:
            report, report_error = None, err
    else:
        done = table_run.run(spark, planned, config, _watch(spark.sparkContext, config.progress_seconds))
        totals, commits, report, report_error = done.totals, done.commits, done.report, done.report_error
    if table is not None and config.in_place and not options.dry_run:
        # Spark caches a table's file listing (sizes included): the files changed underneath it.
        spark.catalog.refreshTable(table.name)
    code = totals.exit_code(config.max_failures)
    if report_error is not None:
        code = combined_exit_code([code, exit_code(report_error)])
    seconds = time.monotonic() - started
    say(spark, summary(totals, seconds, report=report, fallback=kernel_probe.fallback(workers),
                       fallback_docs=kernel_probe.DOCS))
    if commits:
        say(spark, commits)
    if report_error is not None:
        say(spark, f"{PROG}: error: {report_error}", sys.stderr)
    if config.summary_json:
        try:
            with storage_errors("write the summary", config.summary_json):
                write_summary_json(summary_document(totals, seconds, code, report), config.summary_json,
                                   config.storage_options)
        except PageIndexError as err:
            say(spark, f"{PROG}: error: {err}", sys.stderr)
            code = combined_exit_code([code, exit_code(err)])
    return code


def _discover(config: JobConfig, table: catalog.CatalogTable | None) -> Discovery:
    """Local inputs, listed by the driver (whose disk they are on)."""
    if table is not None:
        return catalog.table_files(table, config.storage_options, follow_links=config.options.follow_links)
    return discover(list(config.inputs), config.storage_options, follow_links=config.options.follow_links)


def _count(n: int, noun: str) -> str:
    """"1 file", "2 files"."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _plan(config: JobConfig, inputs: list[str], options: JobOptions) -> pipeline.Plan:
    return pipeline.Plan(
        options=options, run=parts.new_run(),
        started=datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0),
        key=run_key(options), roots=tuple(root_key(input_root(raw, config.storage_options)) for raw in inputs),
        report=config.report, state=config.state,
        # --force and --verify-existing ask for every file to be opened; their outcomes are saved.
        skipping=not (options.force or options.verify_existing), saving=not options.dry_run)


def _watch(sc: Any, every: float) -> pipeline.Watch:
    """Progress lines while the processing job runs."""
    @contextlib.contextmanager
    def watch(done: Any, done_bytes: Any, files: int, nbytes: int) -> Iterator[None]:
        stop = threading.Event()
        ticker = threading.Thread(target=_progress, args=(sc, done, done_bytes, files, nbytes, every, stop),
                                  daemon=True)
        ticker.start()
        try:
            yield
        finally:
            stop.set()
            ticker.join()
    return watch


def main(argv: Sequence[str] | None = None, spark: Any = None, master: str | None = "local[*]") -> int:
    """Entry point; `spark` may be given (tests, notebooks), else one is created or reused.
    The exit code follows pageindex.errors' rule (config.EXIT_CODES)."""
    logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT)
    # On the handlers: py4j logs on the root logger and on its own (py4j.clientserver), whose
    # records reach the root's handlers without passing the root logger's filters.
    for handler in logging.getLogger().handlers:
        handler.addFilter(_not_interrupted)
    own = None
    try:
        config = JobConfig.from_argv(argv)
        parts.check_folder_path(config.report, config.storage_options, "the report")
        check_report_path(config.summary_json, config.storage_options, "the summary")
        parts.check_folder_path(config.state, config.storage_options, "the state")
        if spark is None:
            spark = own = _start_session(config, master)
        else:
            apply_conf(spark, config.spark_conf)
        if console_progress(spark):
            _log_on_fresh_lines()
        return run(config, spark)
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM/SIGHUP (shutdown.Terminated)
        return _stopped(spark, own)
    except SystemExit as exit_:  # --help
        return EXIT_OK if not exit_.code else EXIT_USAGE
    except PageIndexError as err:
        say(spark, f"{PROG}: error: {err}", sys.stderr)
        return exit_code(err)
    except ImportError as err:
        say(spark, f"{PROG}: error: a filesystem needs a package that is not installed: {err}", sys.stderr)
        return EXIT_USAGE
    except Exception as err:  # noqa: BLE001 - Spark reports executor failures as Py4J errors
        if stopping():  # py4j may turn the interrupted call into an error of its own
            return _stopped(spark, own)
        if type(err).__module__.startswith(("py4j", "pyspark")):
            # Lost executors, a failed stage, a cluster that went away: a retry may pass.
            say(spark, f"{PROG}: error: the Spark job failed: {catalog.spark_message(err)}", sys.stderr)
            return EXIT_RETRYABLE
        log.exception("internal error")
        return exit_code(err)


def say(spark: Any, text: str, file: TextIO | None = None) -> None:
    """Print one of the job's own lines (the summary, an error) at the start of a line: after
    Spark's console progress bar, where it is on, a newline first. The bar ends with a carriage
    return, not a newline, so in a captured log (2>&1) the line would otherwise continue the
    bar's, and a filter dropping the bar's lines would drop it too."""
    print(("\n" if console_progress(spark) else "") + text, file=file or sys.stdout, flush=True)


# Spark's console progress bar: the job turns it off in the session it creates (its own
# progress lines say more, on lines of their own); --conf spark.ui.showConsoleProgress=true
# or a session given or reused may keep it on.
CONSOLE_PROGRESS = "spark.ui.showConsoleProgress"


def console_progress(spark: Any) -> bool:
    """Whether `spark` (None: no session yet) may draw its console progress bar."""
    if getattr(spark, "sparkContext", None) is None:
        return False
    try:
        return spark.sparkContext.getConf().get(CONSOLE_PROGRESS, "false").strip().lower() == "true"
    except Exception:  # noqa: BLE001 - a session going away: a newline too many harms nothing
        return True


def _log_on_fresh_lines() -> None:
    """The job's log lines (found ..., progress: ...) start with a newline, as `say` does: the
    progress bar may be on the line."""
    for handler in logging.getLogger().handlers:
        if handler.formatter is not None and handler.formatter._fmt == LOG_FORMAT:
            handler.setFormatter(logging.Formatter("\n" + LOG_FORMAT))


def _not_interrupted(record: logging.LogRecord) -> bool:
    """py4j logs a traceback when Ctrl-C or SIGTERM interrupts a call to the JVM, or when its
    socket fails while that interruption unwinds; main says what happened in one line instead."""
    error = record.exc_info[1] if record.exc_info else None
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return False
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return True


def _stopped(spark: Any, own: Any) -> int:
    progress = console_progress(spark)  # asked before the session stops
    stop(spark, own)
    print(("\n" if progress else "") + f"{PROG}: stopped: files being processed were left as they were "
          "(commits in flight undone); the report holds the parts of the tasks that ended; a rerun goes on "
          "where this one stopped", file=sys.stderr)
    return EXIT_INTERRUPTED


def stop(spark: Any, own: Any) -> None:
    """After an interruption: stop the session this run started, which stops its Python workers
    (pyspark's daemon sends them SIGHUP: each undoes its commit in flight, shutdown.stops_cleanly);
    on a session given or reused, cancel this run's jobs and leave the session running."""
    try:
        if own is not None:
            own.stop()
        elif spark is not None:
            spark.sparkContext.cancelAllJobs()
    except Exception:  # noqa: BLE001 - a JVM already going away: nothing more to stop
        log.debug("stopping Spark after an interruption", exc_info=True)


def hide_pandas_warning() -> None:
    """pyspark's first JVM call imports pyspark.testing.utils (a py4j converter does), which warns
    on every run that pandas 3 is not fully supported; the job uses no pandas API."""
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas",
                            category=FutureWarning, module=r"pyspark\.testing\.utils")


def _start_session(config: JobConfig, master: str | None) -> Any:
    """A SparkSession with the job's settings and --conf. Raises UsageError when pyspark is
    missing or the JVM cannot start: no Java, a wrong SPARK_HOME, a bad --conf or master are
    configuration (exit 2), which a retry would only repeat."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise UsageError(INSTALL_SPARK) from None
    running = SparkSession.getActiveSession()
    if running is not None:  # a notebook's: reused as it is, its static settings unchanged
        apply_conf(running, config.spark_conf)
        return running
    if master and master.startswith("local"):
        # Local workers must run this interpreter, the one with pageindex's dependencies.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # Python workers start as `python -m pyspark.daemon` in the working directory, which `-m`
    # puts first on sys.path: a folder named pageindex there (a clone's parent) would shadow
    # the installed package. PYTHONSAFEPATH (Python 3.11+) leaves the directory off.
    builder = (SparkSession.builder.appName("pageindex-retrofit").config(WORKER_SAFE_PATH, "1")
               .config(CONSOLE_PROGRESS, "false"))
    if master:
        builder = builder.master(master)
    for key, value in config.spark_conf:
        builder = builder.config(key, value)
    hide_pandas_warning()
    try:
        return builder.getOrCreate()
    except Exception as err:  # noqa: BLE001 - PySparkRuntimeError, Py4JJavaError, OSError: all say "cannot start"
        raise UsageError(f"Spark could not start: {catalog.spark_message(err)}") from None


def apply_conf(spark: Any, conf: Sequence[tuple[str, str]]) -> None:
    """Each --conf on a running session: kept when it already holds, set when Spark allows it at
    runtime; otherwise UsageError (a session reused or given keeps its static settings)."""
    for key, value in conf:
        if spark.conf.get(key, None) == value:
            continue
        try:
            spark.conf.set(key, value)
        except Exception as err:  # noqa: BLE001 - Spark refuses a static or core setting
            raise UsageError(f"--conf {key}={value} cannot apply to the running Spark session "
                             f"({catalog.spark_message(err)}): set it where the session is created "
                             "(spark-submit --conf, or the builder)") from None


def console() -> NoReturn:
    """The `pageindex-job` console script: the job on a local Spark."""
    leave(stops_cleanly(main)())
