"""Table runs: plan a Delta or Iceberg table's files from its snapshot, commit the copies a batch at a time.

Executors write each copy under a new name next to its original; only the driver commits.
"""
from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from typing import Any, Callable

from fsspec.implementations.local import LocalFileSystem
from urllib.parse import unquote

from pageindex.errors import PageIndexError, UsageError
from pageindex.index.marker import options_key
from pageindex.io.confinement import below, outside
from pageindex.io.discovery import InputFile
from pageindex.io.storage import resolve
from pageindex.job.process import JobOptions, failed_record
from pageindex.job.report import Tally
from pageindex.retrofit import Status
from pageindex.io.storage import storage_errors
from pageindex.table import delta, iceberg, last_run
from pageindex.table.naming import indexed_name, indexed_with, options_tag
from pageindex.table.replacement import CommitResult, Replacement

log = logging.getLogger("pageindex.job.lake")
DELTA = "delta"
ICEBERG = "iceberg"
TABLE_FORMATS = (DELTA,)
DELETION_VECTOR = "has a deletion vector, which the new file could not carry (left as is)"
KNOWN_INDEXED = "a copy pageindex indexed with these options, as its name says (not opened)"
SEEN = "in the table at {version}, which a run with these options settled (not opened)"
# The table formats discovery detects, by the name a message gives them, and how each is indexed.
TABLE_NAMES = {DELTA: "Delta", ICEBERG: "Iceberg", "hudi": "Hudi"}
TABLE_WAYS = {
    DELTA: "Index it through its log: pageindex-job --input TABLE_ROOT --in-place (indexed copies "
           "committed to the table; the old files stay for time travel)",
    ICEBERG: "Index it through its catalog: pageindex-job --iceberg-table CATALOG.NAMESPACE.TABLE "
             "--in-place (indexed copies committed as a new snapshot)",
    "hudi": "pageindex does not index Hudi tables",
}


@dataclass(frozen=True)
class TableRun:
    """What the driver planned: the files to copy and the log entries they replace."""

    format: str
    table: str  # delta: the table root; iceberg: CATALOG.NAMESPACE.TABLE
    version: int | None  # the Delta version or Iceberg snapshot id planned from
    options: JobOptions  # output = the table root: each copy's `relative` is its path below it
    files: tuple[InputFile, ...]
    planned: dict[str, tuple[Any, str]]  # old URL -> (its log entry, the path the log gets for the copy)
    skipped: tuple[dict[str, Any], ...]  # records of the files left alone, KNOWN_INDEXED copies among them


def refusal(where: str, kind: str, in_place: bool) -> str:
    """Why the files of a table found at `where` are not indexed as plain files, and what does
    index the table."""
    name = TABLE_NAMES[kind]
    table = f"{where} is (or holds) {'an' if name[0] in 'AEIOU' else 'a'} {name} table"
    if in_place:
        why = f"{table}, which records each data file's size: changing its files in place would corrupt it"
    else:  # a mirror of the directory is not the table
        why = (f"{table}: --output would mirror its directory, not the table (files the table no "
               "longer holds would come back, its log would be left out)")
    return f"{why}. {TABLE_WAYS[kind]}."


def plan_input(inputs: list[str], table_format: str | None, in_place: bool,
               options: JobOptions) -> TableRun | None:
    """A TableRun when the input is a Delta table to retrofit in place, else None (plain files)."""
    if table_format is None:
        if not in_place or len(inputs) != 1 or not delta.is_table(inputs[0], options.storage_options):
            return None
    elif not in_place or len(inputs) != 1:
        raise UsageError(f"--table-format {table_format} takes one table root and --in-place "
                         "(the table's log is updated, the old files stay for time travel)")
    elif not delta.is_table(inputs[0], options.storage_options):
        raise UsageError(f"no {delta.LOG_DIR}/ here: not a Delta table root", path=inputs[0])
    return plan(inputs[0], options)


def plan(root: str, options: JobOptions) -> TableRun:
    table = delta.open_table(root, options.storage_options)
    delta.check_writable(table, root)
    snap = delta.snapshot(table, root, options.storage_options)
    since, new = _changes(root, options, lambda since: last_run.added_since(
        root, options.storage_options, since, snap.version))
    files, planned, skipped = [], {}, []
    for data in sorted(snap.files.values(), key=lambda f: f.path):
        try:
            url = delta.file_url(root, data.path)
        except PageIndexError as err:
            skipped.append(_record(data.path, data.size, err.reason))
            continue
        real = None if options.follow_links else _linked_outside(root, url, options)
        if real is not None:
            skipped.append(_record(url, data.size, f"a symbolic link to {real}, outside the table root "
                                   f"(left as is; --follow-links follows it)"))
            continue
        if data.deletion_vector:
            skipped.append(_record(url, data.size, DELETION_VECTOR))
            continue
        if _known_indexed(data.path, options):
            skipped.append(_record(url, data.size, KNOWN_INDEXED, Status.ALREADY_INDEXED))
            continue
        if new is not None and data.path not in new:
            skipped.append(_seen(url, data.size, DELTA, since))
            continue
        new_path = indexed_name(data.path, data.size, options.truncate_length, options.trust_page_stats,
                                options.bloom, options.chunk_statistics)
        files.append(InputFile(url, data.size, unquote(new_path)))
        planned[url] = (data, new_path)
    return TableRun(DELTA, root, snap.version, dataclasses.replace(options, output=root), tuple(files),
                    planned, tuple(skipped))


def _linked_outside(root: str, url: str, options: JobOptions) -> str | None:
    """Where a local table file really is when a link leads it outside the table root's real
    path (None on an object store, which has no links)."""
    fs, path = resolve(url, storage_options=options.storage_options)
    if not isinstance(fs, LocalFileSystem):
        return None
    return outside(path, os.path.realpath(resolve(root, storage_options=options.storage_options)[1]))


def plan_iceberg(name: str, in_place: bool, options: JobOptions) -> TableRun:
    """Plan from the current snapshot of the catalog table `name`; copies go next to their
    originals, below the table location (files elsewhere are left alone). Files the snapshot the
    last settled run planned from already had are not opened (recorded below the location, as
    for Delta: see table.last_run)."""
    if not in_place:
        raise UsageError("--iceberg-table takes --in-place (the table gets a new snapshot, "
                         "the old files stay for time travel)", path=name)
    table = iceberg.load_table(name)
    snap = iceberg.snapshot(table, name)
    root = snap.location.rstrip("/")
    since, new = (None, None) if snap.snapshot_id is None else _changes(
        root, options, lambda since: iceberg.added_since(table, snap, since))
    files, planned, skipped = [], {}, []
    for entry in sorted(snap.files.values(), key=lambda e: e.path):
        if entry.deleted_by:
            skipped.append(_record(entry.path, entry.size, entry.deleted_by))
            continue
        if not below(root, entry.path):
            skipped.append(_record(entry.path, entry.size, f"outside the table location {root} (left as is)"))
            continue
        if _known_indexed(entry.path, options):
            skipped.append(_record(entry.path, entry.size, KNOWN_INDEXED, Status.ALREADY_INDEXED))
            continue
        if new is not None and entry.path not in new:
            skipped.append(_seen(entry.path, entry.size, ICEBERG, since))
            continue
        new_path = indexed_name(entry.path, entry.size, options.truncate_length, options.trust_page_stats,
                                options.bloom, options.chunk_statistics)
        files.append(InputFile(entry.path, entry.size, new_path[len(root) + 1:]))
        planned[entry.path] = (entry, new_path)
    return TableRun(ICEBERG, name, snap.snapshot_id, dataclasses.replace(options, output=root), tuple(files),
                    planned, tuple(skipped))


def _changes(root: str, options: JobOptions, added_since: Callable[[int], set[str] | None]
             ) -> tuple[int | None, set[str] | None]:
    """The version (or snapshot) the last settled run planned from, and the paths of the data
    files the table gained since (`added_since`: the Delta log's or the Iceberg manifests'
    answer); (None, None) when every file is to be opened: no such run, other options, --force or
    --verify-existing, or `added_since` cannot tell (a log cleaned up, a snapshot expired)."""
    if options.force or options.verify_existing:
        return None, None
    with storage_errors("read the table's last run", root):
        since = last_run.read(root, options.storage_options, _key(options))
        new = added_since(since) if since is not None else None
    return (since, new) if new is not None else (None, None)


def _seen(url: str, size: int, table_format: str, since: int | None) -> dict[str, Any]:
    """The record of a file the table had at `since`, when a run with these options settled it."""
    return _record(url, size, SEEN.format(version=f"{_VERSION[table_format]} {since}"), Status.UNCHANGED)


def settles(record: dict[str, Any]) -> bool:
    """Whether a record leaves its file settled for remember (neither failed nor changed)."""
    return record["status"] not in (Status.FAILED, Status.CHANGED)


def remember(run: TableRun, settled: bool) -> None:
    """After a table run that settled every file (`settled`: none failed, none changed; not a dry
    run): the Delta version or Iceberg snapshot it planned from, below the table's root, for the
    next run to open only the files added since (a failure to record it is a warning)."""
    if run.options.dry_run or run.version is None or not settled:
        return
    root = run.options.output  # the Delta root, the Iceberg location
    try:
        with storage_errors("record the table's last run", root):
            last_run.write(root, run.options.storage_options, run.version, _key(run.options))
    except PageIndexError as err:  # the next run opens every file again: slower, never wrong
        log.warning("pageindex: warning: %s", err)


def _key(options: JobOptions) -> str:
    return options_key(options.truncate_length, options.trust_page_stats, options.bloom, options.chunk_statistics)


def _known_indexed(path: str, options: JobOptions) -> bool:
    """Whether the file's name says pageindex wrote it with the options of this run: then
    opening it would only find it indexed. --force and --verify-existing open it anyway."""
    if options.force or options.verify_existing:
        return False
    return indexed_with(path) == options_tag(options.truncate_length, options.trust_page_stats,
                                             options.bloom, options.chunk_statistics)


def _record(url: str, size: int, reason: str, status: Status = Status.SKIPPED) -> dict[str, Any]:
    """The report record of a file the plan leaves alone (the keys process_file reports)."""
    return {**failed_record(InputFile(url, size, ""), None, reason), "status": status}


def to_commit(record: dict[str, Any]) -> bool:
    """Whether the record's file got an indexed copy for the table to take."""
    return record["status"] in (Status.INDEXED, Status.REPAIRED)


@dataclass
class Commits:
    """What the summary says of a run's commits, summed batch by batch (the records are not kept)."""

    replaced: int = 0  # files whose copy a commit took
    lines: list[str] = dataclasses.field(default_factory=list)  # one per commit

    def summary(self, run: TableRun, totals: Tally) -> str:
        """The table's lines of the summary, from the commits and the Tally of every record."""
        known = sum(r["reason"] == KNOWN_INDEXED for r in run.skipped)
        seen = sum(r["status"] == Status.UNCHANGED for r in run.skipped)
        lines = [f"{run.format} table {run.table}: planned at {_VERSION[run.format]} {run.version}, "
                 f"{self.replaced} files replaced, {totals.counts[Status.SKIPPED]} skipped, "
                 f"{totals.counts[Status.CHANGED]} changed"
                 + (f", {known} known indexed from their names (not opened)" if known else "")
                 + (f", {seen} unchanged since the last run (not opened)" if seen else "")]
        lines += [f"  commit {c}" for c in self.lines] or ["  nothing committed"]
        return "\n".join(lines)


def commit_batch(run: TableRun, batch: list[dict[str, Any]], commits: Commits) -> None:
    """Commit one batch's indexed copies in one transaction (to_commit's records; the others
    pass). Every record of the batch gets `table_version`: the version that replaced its file,
    None for none; a file the table no longer holds as planned becomes `changed`, a failed
    commit makes its files `failed`."""
    indexed = {r["path"]: r for r in batch if to_commit(r)}
    for r in batch:
        r.setdefault("table_version", None)
    if not indexed:
        return
    replacements = [Replacement(run.planned[url][0], run.planned[url][1], r["bytes_out"])
                    for url, r in indexed.items()]
    try:
        result = _commit(run, replacements)
    except PageIndexError as err:
        for r in indexed.values():
            r.update(status=Status.FAILED, reason=f"commit: {err.message(with_path=False)}",
                     retryable=err.retryable)
        return
    by_log_path = {run.planned[url][0].path: r for url, r in indexed.items()}
    for path in result.replaced:
        by_log_path[path]["table_version"] = result.version
    for path, reason in result.changed.items():
        by_log_path[path].update(status=Status.CHANGED, reason=f"not committed: {reason}")
    commits.replaced += len(result.replaced)
    if result.version is not None:
        commits.lines.append(f"{_VERSION[run.format]} {result.version} ({len(result.replaced)} files, "
                             f"attempt {result.attempts})")


_VERSION = {DELTA: "version", ICEBERG: "snapshot"}


def _commit(run: TableRun, replacements: list[Replacement]) -> CommitResult:
    o = run.options
    key = options_key(o.truncate_length, o.trust_page_stats, o.bloom, o.chunk_statistics)
    if run.format == ICEBERG:
        return iceberg.commit(run.table, replacements, options=key)
    return delta.commit(run.table, o.storage_options, replacements, options=key)
