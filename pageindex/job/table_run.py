"""A Delta or Iceberg table run on Spark: the planned files processed by parallel tasks whose records
reach the driver task by task, committed in batches as they arrive; the report written in parts.
"""
from __future__ import annotations

import collections
import contextlib
import logging
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from pageindex.errors import PageIndexError
from pageindex.io.discovery import InputFile
from pageindex.io.storage import storage_errors
from pageindex.job import lake, parts
from pageindex.job.config import JobConfig
from pageindex.job.pipeline import Watch, processed
from pageindex.job.process import JobOptions
from pageindex.job.report import Tally, write_report
from pageindex.job.tasks import pack

log = logging.getLogger("pageindex.job.table_run")

# Files per task at most. A task's records (under a kilobyte a file) reach the driver as the
# result of a Spark job of its own, which spark.driver.maxResultSize bounds (1m at least).
TASK_FILES = 500
# Spark jobs in flight at once, each on its own driver thread: their tasks are 2 per core (a
# job takes several tasks on a large cluster), so every core has a task and the next one waiting.
MAX_JOBS = 32
# Records of files with no copy to commit (failed, already indexed, a dry run's) per report part
# at most: a table of such files is reported part by part too.
PART_ROWS = 65_536
# Written to a report part: (kind, the records).
Sink = Callable[[str, list[dict[str, Any]]], None]


@dataclass(frozen=True)
class Outcome:
    """What the driver says of a table run: the Tally of every record, the commits' summary lines,
    the report (None: none asked for, or it could not be written) and why it could not be."""

    totals: Tally
    commits: str
    report: str | None
    report_error: PageIndexError | None


def run(spark: Any, planned: lake.TableRun, config: JobConfig, watch: Watch) -> Outcome:
    """Process the planned files on Spark and commit their copies `--commit-batch-files` at a
    time as their records arrive; the report's parts written as the batches are committed."""
    report = ReportParts(config.report, config.storage_options)
    report.prepare()
    records = task_records(spark.sparkContext, list(planned.files), planned.options, config.target_task_bytes,
                           watch)
    with contextlib.closing(records):  # on an error: this run's jobs still running are cancelled
        totals, commits, settled = commit_stream(planned, records, config.commit_batch_files, report.write)
    lake.remember(planned, settled)
    report.finish()
    return Outcome(totals, commits.summary(planned, totals), config.report if report.error is None else None,
                   report.error)


def commit_stream(planned: lake.TableRun, records: Iterable[dict[str, Any]], batch_files: int,
                  sink: Sink) -> tuple[Tally, lake.Commits, bool]:
    """Read `records` once, committing each `batch_files` indexed copies as soon as they have
    arrived (the rest at the end), and hand each batch's records, `table_version` filled in, to
    `sink`; the plan's skipped files first, as a part of their own. Only the batch is held.
    Returns the Tally of every record, the commits and whether every file was settled (none
    failed, none changed: what lake.remember asks)."""
    totals, commits, settled = Tally(), lake.Commits(), True
    batch: list[dict[str, Any]] = []  # copies to commit
    others: list[dict[str, Any]] = []  # records of files with no copy, since the last part

    def flush() -> None:
        nonlocal settled, batch, others
        done = [*batch, *others]
        lake.commit_batch(planned, done, commits)
        for r in done:
            totals.add(r)
            settled = settled and lake.settles(r)
        sink("batch", done)
        batch, others = [], []

    if planned.skipped:
        skipped = [{**r, "table_version": None} for r in planned.skipped]
        for r in skipped:
            totals.add(r)
        sink("plan", skipped)
    for record in records:
        (batch if lake.to_commit(record) else others).append(record)
        if len(batch) >= batch_files or len(others) >= PART_ROWS:
            flush()
    if batch or others:
        flush()
    return totals, commits, settled


def task_records(sc: Any, files: list[InputFile], options: JobOptions, target: int,
                 watch: Watch) -> Iterator[dict[str, Any]]:
    """The files processed on Spark, their records yielded task by task (in task order, each
    task's by path) as the Spark job of each task ends.

    Why jobs of their own: one collect() sends every record through the driver at once (past
    spark.driver.maxResultSize for a large table) and returns only when every task has ended;
    toLocalIterator runs one partition at a time. Here up to MAX_JOBS jobs run at once from a
    pool of driver threads (Spark schedules jobs of several threads side by side, FIFO): every
    core keeps a task while the driver commits, and the driver holds the records of the tasks
    ended but not yet read, at most two per core, each of at most TASK_FILES files. Closing the
    generator cancels this run's jobs still running."""
    if not files:
        return
    cores = max(1, sc.defaultParallelism)
    spread = -(-sum(f.size for f in files) // cores)  # a small table still spreads over every core
    tasks = [group[i:i + TASK_FILES] for group in pack(files, max(1, min(target, spread)))
             for i in range(0, len(group), TASK_FILES)]
    per_job = -(-2 * cores // MAX_JOBS)
    jobs = [list(range(i, min(i + per_job, len(tasks)))) for i in range(0, len(tasks), per_job)]
    description = f"pageindex: {len(files)} files in {len(tasks)} tasks"
    group = f"pageindex-table-{uuid.uuid4().hex}"
    done, done_bytes = sc.accumulator(0), sc.accumulator(0)
    rdd = sc.parallelize(tasks, len(tasks))  # one partition per task
    process = _run_tasks(options, done, done_bytes)

    def fetch(partitions: list[int]) -> list[dict[str, Any]]:
        sc.setJobGroup(group, description)  # this thread's jobs, cancelled together
        return sc.runJob(rdd, process, partitions)

    workers = min(len(jobs), -(-2 * cores // per_job))
    pool = ThreadPoolExecutor(workers, thread_name_prefix="pageindex-table")
    pending: collections.deque[Future] = collections.deque()
    todo = iter(jobs)
    try:
        with watch(done, done_bytes, len(files), sum(f.size for f in files)):
            for partitions in todo:
                pending.append(pool.submit(fetch, partitions))
                if len(pending) == workers:
                    break
            while pending:
                records = pending.popleft().result()
                more = next(todo, None)
                if more is not None:  # before the records are committed: the cores stay busy
                    pending.append(pool.submit(fetch, more))
                yield from records
                del records
    finally:
        if pending:
            _cancel(sc, group)
        pool.shutdown(wait=False, cancel_futures=True)


def _run_tasks(options: JobOptions, done: Any, done_bytes: Any) -> Callable[[Iterable], Iterator[dict[str, Any]]]:
    def run_tasks(tasks: Iterable[list[InputFile]]) -> Iterator[dict[str, Any]]:
        for task in tasks:
            yield from sorted(processed(task, options, done, done_bytes)[1], key=lambda r: r["path"])
    return run_tasks


def _cancel(sc: Any, group: str) -> None:
    try:
        sc.cancelJobGroup(group)
    except Exception:  # noqa: BLE001 - a session going away (Ctrl-C stops it next): nothing to cancel
        log.debug("cancelling the table run's jobs", exc_info=True)


class ReportParts:
    """A table run's report folder, written a part at a time (parts' naming: one run, a part per
    batch); after a failure to write it, no more parts, and the error kept for the summary."""

    def __init__(self, url: str | None, storage_options: dict[str, Any]) -> None:
        self.url, self.storage = url, storage_options
        self.run, self.written = parts.new_run(), 0
        self.error: PageIndexError | None = None

    def prepare(self) -> None:
        """The folder made and emptied of earlier runs' parts (a report is one run's)."""
        if self.url is not None:
            self._safely(lambda: (parts.make_folder(self.url, self.storage),
                                  parts.remove([p.url for p in parts.list_parts(self.url, self.storage)],
                                               self.storage)))

    def write(self, kind: str, records: list[dict[str, Any]]) -> None:
        """One part of the records, by path."""
        if self.url is None or self.error is not None:
            return
        url = parts.part_url(self.url, self.run, kind, self.written, parts.extension(self.url))
        self._safely(lambda: write_report(sorted(records, key=lambda r: r["path"]), url, self.storage))
        self.written += 1

    def finish(self) -> None:
        """An empty part when none was written, so that the report reads as a table of no rows."""
        if self.written == 0:
            self.write("batch", [])

    def _safely(self, step: Callable[[], Any]) -> None:
        if self.error is not None:
            return
        try:
            with storage_errors("write the report", self.url):
                step()
        except PageIndexError as err:
            self.error = err
