"""Table runs: plan a Delta table's files from its snapshot, commit the indexed copies in batches.

Executors write each copy under a new name next to its original; only the driver commits.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from pageindex.errors import PageIndexError, StorageError
from pageindex.io.discovery import InputFile
from pageindex.job.process import JobOptions, failed_record
from pageindex.retrofit import Status
from pageindex.table import delta
from pageindex.table.naming import indexed_name

DELTA = "delta"
TABLE_FORMATS = (DELTA,)
DELETION_VECTOR = "has a deletion vector, which the new file could not carry (left as is)"


@dataclass(frozen=True)
class TableRun:
    """What the driver planned: the files to copy and the log entries they replace."""

    root: str
    version: int
    options: JobOptions  # output = the table root: each copy's `relative` is its path below it
    files: tuple[InputFile, ...]
    planned: dict[str, tuple[delta.DataFile, str]]  # old URL -> (its log entry, the copy's log path)
    skipped: tuple[dict[str, Any], ...]


def plan_input(inputs: list[str], table_format: str | None, in_place: bool,
               options: JobOptions) -> TableRun | None:
    """A TableRun when the input is a Delta table to retrofit in place, else None (plain files)."""
    if table_format is None:
        if not in_place or len(inputs) != 1 or not delta.is_table(inputs[0], options.storage_options):
            return None
    elif not in_place or len(inputs) != 1:
        raise StorageError(f"--table-format {table_format} takes one table root and --in-place "
                           "(the table's log is updated, the old files stay for time travel)")
    elif not delta.is_table(inputs[0], options.storage_options):
        raise StorageError(f"no {delta.LOG_DIR}/ here: not a Delta table root", path=inputs[0])
    return plan(inputs[0], options)


def plan(root: str, options: JobOptions) -> TableRun:
    table = delta.open_table(root, options.storage_options)
    snap = delta.snapshot(table, root, options.storage_options)
    files, planned, skipped = [], {}, []
    for data in sorted(snap.files.values(), key=lambda f: f.path):
        try:
            url = delta.file_url(root, data.path)
        except PageIndexError as err:
            skipped.append(_record(data.path, data.size, err.reason))
            continue
        if data.deletion_vector:
            skipped.append(_record(url, data.size, DELETION_VECTOR))
            continue
        new_path = indexed_name(data.path, data.size, options.truncate_length, options.trust_page_stats)
        files.append(InputFile(url, data.size, unquote(new_path)))
        planned[url] = (data, new_path)
    return TableRun(root, snap.version, dataclasses.replace(options, output=root), tuple(files),
                    planned, tuple(skipped))


def _record(url: str, size: int, reason: str) -> dict[str, Any]:
    """The report record of a file the plan leaves alone (the keys process_file reports)."""
    return {**failed_record(InputFile(url, size, ""), None, reason), "status": Status.SKIPPED}


def commit_run(run: TableRun, records: list[dict[str, Any]], batch_files: int
               ) -> tuple[list[dict[str, Any]], str]:
    """Commit the indexed copies, `batch_files` per transaction; the records gain the version
    that replaced their file (`table_version`), and the summary lists the commits."""
    indexed = [r for r in records if r["status"] in (Status.INDEXED, Status.REPAIRED)]
    commits = []
    for start in range(0, len(indexed), batch_files):
        batch = {r["path"]: r for r in indexed[start:start + batch_files]}
        replacements = [delta.Replacement(run.planned[url][0], run.planned[url][1], r["bytes_out"])
                        for url, r in batch.items()]
        try:
            result = delta.commit(run.root, run.options.storage_options, replacements)
        except PageIndexError as err:
            for r in batch.values():
                r.update(status=Status.FAILED, reason=f"commit: {err.message(with_path=False)}")
            continue
        by_log_path = {run.planned[url][0].path: r for url, r in batch.items()}
        for path in result.replaced:
            by_log_path[path]["table_version"] = result.version
        for path, reason in result.changed.items():
            by_log_path[path].update(status=Status.CHANGED, reason=f"not committed: {reason}")
        if result.version is not None:
            commits.append(f"version {result.version} ({len(result.replaced)} files, "
                           f"attempt {result.attempts})")
    out = sorted([*records, *run.skipped], key=lambda r: r["path"])
    for r in out:
        r.setdefault("table_version", None)
    replaced = sum(r["table_version"] is not None for r in out)
    lines = [f"delta table {run.root}: planned at version {run.version}, {replaced} files replaced, "
             f"{sum(r['status'] == Status.SKIPPED for r in out)} skipped, "
             f"{sum(r['status'] == Status.CHANGED for r in out)} changed"]
    lines += [f"  commit {c}" for c in commits] or ["  nothing committed"]
    return out, "\n".join(lines)
