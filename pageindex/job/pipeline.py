"""The plain-file run on Spark: the listing joined with the state and packed into tasks where it
lies; each task writes its records as report and state parts and sends the driver only their Tally.

Stages: listing ⋈ state (cogroup by path, one shuffle) -> per partition, skip or keep to do -> pack
-> one Spark partition per task -> process. A part is named by its run and partition: a retried task rewrites its own.
"""
from __future__ import annotations

import contextlib
import datetime
import logging
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Iterable, Iterator

from pageindex.io.discovery import InputFile
from pageindex.job import parts
from pageindex.job.process import JobOptions, output_url, process_task
from pageindex.job.report import Tally, tally, write_report
from pageindex.job.tasks import pack
from pageindex.job.state import (Entry, below, decided_entry, read_part, settles, state_key, unchanged_record,
                                 write_state)
from pageindex.retrofit import Status

log = logging.getLogger("pageindex.job.state")

# Listed files per Spark partition: of a listing the driver holds, of the listing joined with the state.
FILES_PER_SLICE = 10_000
# How the driver watches the processing job: (files done, bytes done accumulators, files, bytes).
Watch = Callable[[Any, Any, int, int], ContextManager[None]]


@dataclass(frozen=True)
class Plan:
    """What every stage needs, pickled to executors with it."""

    options: JobOptions
    run: str  # parts.new_run(): this run's parts' names
    started: datetime.datetime  # the state entries' decided_at
    key: str  # state.run_key(options)
    roots: tuple[str, ...]  # the inputs' roots: previous entries below them and not listed are dropped
    report: str | None  # the report folder
    state: str | None  # the state folder
    skipping: bool  # the state may settle files (not --force, --verify-existing)
    saving: bool  # the state is written (not --dry-run)

    @property
    def report_ext(self) -> str:
        return parts.extension(self.report) if self.report else "parquet"


@dataclass(frozen=True)
class Outcome:
    """What reaches the driver: the run's Tally, and how many files were opened."""

    tally: Tally
    opened: int
    opened_bytes: int


def slices(files: int) -> int:
    """Spark partitions for a listing of `files` the driver holds."""
    return max(1, -(-files // FILES_PER_SLICE))


def run_files(sc: Any, listing: Any, count: int, plan: Plan, target: int, watch: Watch) -> Outcome:
    """Plan and process the `count` files of `listing` (an RDD of InputFile, each URL once) on
    Spark; the report's and the state's parts are written by the tasks. Raises what Spark raises
    for a failed job."""
    from pyspark import StorageLevel

    warned = sc.accumulator({}, _Merge())
    previous = _previous(sc, plan, warned)
    if previous is None:
        joined = listing.map(lambda f: (None, ((f,), ())))
    else:  # one shuffle: each path's listed file and its state entries of every run meet
        keyed = listing.map(lambda f: (state_key(f.url), f))  # as the state names its files
        joined = keyed.cogroup(previous, max(sc.defaultParallelism, slices(count)))
    # On the executors' disks: ten million files' verdicts do not fit a small heap.
    classified = joined.mapPartitionsWithIndex(_classify(plan)).persist(StorageLevel.DISK_ONLY)
    try:
        sums = classified.filter(lambda x: x[0] == "sum").map(lambda x: x[1]).collect()
        for url, message in sorted(warned.value.items()):
            log.warning("pageindex: warning: %s: a part of the state cannot be read (%s); the files it "
                        "recorded are opened again", url, message)
        total = Tally()
        for part_tally, _, _ in sums:
            total.merge(part_tally)
        opened, opened_bytes = sum(n for _, n, _ in sums), sum(b for _, _, b in sums)
        if plan.state:
            log.warning("%d of them unchanged since the state recorded them: not opened",
                        total.counts[Status.UNCHANGED])
        if opened:
            spread = -(-opened_bytes // max(1, sc.defaultParallelism))
            total.merge(_process(sc, classified, plan, max(1, min(target, spread)), opened,
                                 opened_bytes, watch))
    finally:
        classified.unpersist()
    return Outcome(total, opened, opened_bytes)


def _previous(sc: Any, plan: Plan, warned: Any) -> Any:
    """The state's entries as an RDD (path, (run, Entry)), every part's; None: no state."""
    if plan.state is None:
        return None
    storage = plan.options.storage_options
    found = parts.list_parts(plan.state, storage) or parts.as_part(plan.state, storage)
    if not found:
        return sc.parallelize([], 1)

    def read(part: parts.Part) -> Iterator[tuple[str, tuple[str, Entry]]]:
        try:
            entries = read_part(part.url, storage)
        except Exception as err:  # noqa: BLE001 - a damaged part: its files are opened, as a damaged state's
            warned.add({part.url: f"{type(err).__name__}: {err}"})
            return
        for path, entry in entries.items():
            yield path, (part.run, entry)

    return sc.parallelize(found, len(found)).flatMap(read)


def _classify(plan: Plan) -> Callable[[int, Iterable], Iterator[tuple[str, Any]]]:
    """Per joined partition (path, (listed files, (run, Entry) of each part)): files the state
    settles get their `unchanged` record and keep their entry (the latest run's), entries of
    files no longer listed stay unless below this run's inputs; the rest are yielded to be
    processed ("file"), then one ("sum", (Tally, files, bytes)) last."""
    def classify(index: int, items: Iterable) -> Iterator[tuple[str, Any]]:
        kept: list[Entry] = []
        records: list[dict[str, Any]] = []
        files = nbytes = 0
        for path, (listed, previous) in items:
            entry = max(previous, key=lambda run_entry: run_entry[0])[1] if previous else None
            if not listed:
                if entry is not None and not any(below(path, root) for root in plan.roots):
                    kept.append(entry)
                continue
            file = next(iter(listed))
            output = output_url(file, plan.options)
            if plan.skipping and entry is not None and settles(entry, file, output, plan.key):
                records.append(unchanged_record(file, output, entry))
                kept.append(entry)
                continue
            files, nbytes = files + 1, nbytes + file.size
            yield "file", file
        _write_parts(plan, "kept", index, records, kept)
        yield "sum", (tally(records), files, nbytes)
    return classify


def _process(sc: Any, classified: Any, plan: Plan, target: int, files: int, nbytes: int,
             watch: Watch) -> Tally:
    todo = classified.filter(lambda x: x[0] == "file").map(lambda x: x[1])
    # Packed where the files lie; then one Spark partition per task (key i -> partition i).
    tasks = todo.mapPartitions(lambda group: pack(list(group), target)).zipWithIndex().map(
        lambda pair: (pair[1], pair[0])).persist()
    try:
        count = tasks.count()
        done, done_bytes = sc.accumulator(0), sc.accumulator(0)
        run_task = _run_task(plan, done, done_bytes)
        sc.setJobDescription(f"pageindex: {files} files in {count} tasks")
        with watch(done, done_bytes, files, nbytes):
            sums = tasks.partitionBy(count, lambda i: i).mapPartitionsWithIndex(run_task).collect()
    finally:
        tasks.unpersist()
    total = Tally()
    for part_tally in sums:
        total.merge(part_tally)
    return total


def processed(task: list[InputFile], options: JobOptions, done: Any, done_bytes: Any
              ) -> tuple[dict[str, tuple[InputFile, str | None]], list[dict[str, Any]]]:
    """One task's files processed, each record counted in the progress accumulators as it comes
    (its bytes as listed: what the total counts); the (file, output) pairs by URL, and the records."""
    targets = {f.url: (f, output_url(f, options)) for f in task}
    records = []
    for record in process_task(list(targets.values()), options):
        records.append(record)
        done.add(1)
        done_bytes.add(targets[record["path"]][0].size if record["path"] in targets else 0)
    return targets, records


def _run_task(plan: Plan, done: Any, done_bytes: Any) -> Callable[[int, Iterable], Iterator[Tally]]:
    def run(index: int, items: Iterable) -> Iterator[Tally]:
        for _, task in items:
            targets, records = processed(task, plan.options, done, done_bytes)
            entries = [decided_entry(*targets[r["path"]], r, plan.key, plan.started) for r in records
                       if r["path"] in targets and r["status"] != Status.UNCHANGED]
            _write_parts(plan, "task", index, records, entries)
            yield tally(records)
    return run


def _write_parts(plan: Plan, kind: str, index: int, records: list[dict[str, Any]],
                 entries: list[Entry]) -> None:
    """This partition's report part (its records by path) and state part (when saving)."""
    storage = plan.options.storage_options
    if plan.report and records:
        write_report(sorted(records, key=lambda r: r["path"]),
                     parts.part_url(plan.report, plan.run, kind, index, plan.report_ext), storage)
    if plan.state and plan.saving and entries:
        write_state(entries, parts.part_url(plan.state, plan.run, kind, index), storage)


def prepare(plan: Plan) -> None:
    """Before the run: the report folder made and emptied of earlier runs' parts (a report is
    one run's); a state kept as one file (the CLI's, or an earlier version's) becomes the
    folder's oldest part. Raises StorageError."""
    storage = plan.options.storage_options
    if plan.report:
        parts.make_folder(plan.report, storage)
        parts.remove([p.url for p in parts.list_parts(plan.report, storage)], storage)
    if plan.state and plan.saving:
        parts.fold_file(plan.state, storage, parts.part_url(plan.state, parts.OLDEST_RUN, "kept", 0))


def finish(plan: Plan) -> None:
    """After a run that ended: the state's parts of earlier runs removed (this run's parts hold
    every entry kept: the compaction); an empty report part when no task wrote one, so that the
    report reads as a table of no rows. Raises StorageError."""
    storage = plan.options.storage_options
    if plan.report and not any(p.run == plan.run for p in parts.list_parts(plan.report, storage)):
        write_report([], parts.part_url(plan.report, plan.run, "kept", 0, plan.report_ext), storage)
    if plan.state and plan.saving:
        parts.remove([p.url for p in parts.list_parts(plan.state, storage) if p.run < plan.run], storage)


class _Merge:
    """A Spark AccumulatorParam of a dict, merged key by key."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, value: dict, more: dict) -> dict:  # noqa: N802 - Spark's name
        value.update(more)
        return value


def no_watch(done: Any, done_bytes: Any, files: int, nbytes: int) -> ContextManager[None]:
    """A Watch that does nothing."""
    return contextlib.nullcontext()
