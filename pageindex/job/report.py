"""Report: the job's per-file records written as JSON lines or Parquet (one declared schema), and
the end summary: files and bytes per status, pages indexed, failures grouped by reason, throughput.
"""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pageindex.io.storage import resolve
from pageindex.retrofit import Status

# Files that reached the index stage (a dry run computes the indexes it does not write).
WRITTEN = (Status.INDEXED, Status.DRY_RUN, Status.REPAIRED, Status.REPAIR_NEEDED)
FAILURES = (Status.FAILED, Status.CHANGED)
# Record fields that count chunks by reason: a JSON text column in a Parquet report.
COUNTED_REASONS = ("without_column_index_reasons", "page_stats_fallback_reasons", "chunk_statistics")
# Record fields that list messages: a JSON text column in a Parquet report.
LISTS = ("violations", "notes")

# The Parquet report's columns, declared once. Every report has all of them with these types, whatever
# its records hold: a column of nulls keeps its type and a run over no file writes them too, so an
# engine reads many nights' reports as one table (Spark refuses a column typed null in one file and
# int64 in another). Keys a record may lack get their default below.
REPORT_SCHEMA = pa.schema([
    ("path", pa.string()),
    ("output", pa.string()),
    ("status", pa.string()),
    ("reason", pa.string()),
    ("bytes_in", pa.int64()),
    ("bytes_out", pa.int64()),
    ("row_groups", pa.int64()),
    ("pages", pa.int64()),
    ("chunks_with_column_index", pa.int64()),
    ("chunks_without_column_index", pa.int64()),
    ("chunks_from_page_stats", pa.int64()),
    ("bloom_filters", pa.int64()),
    ("without_column_index_reasons", pa.string()),  # JSON object: reason -> chunks
    ("violations", pa.string()),  # JSON list of strings
    ("bytes_read", pa.int64()),
    ("seconds", pa.float64()),
    ("index_bytes_read", pa.int64()),
    ("copy_bytes_read", pa.int64()),
    ("no_page_skipping", pa.string()),
    ("page_stats_fallback_reasons", pa.string()),  # JSON object: reason -> chunks
    ("table_version", pa.int64()),  # the Delta version or Iceberg snapshot that replaced the file
    ("retryable", pa.bool_()),  # a failure a retry may mend
    ("notes", pa.string()),  # JSON list of strings
    ("chunk_statistics", pa.string()),  # JSON object: copied/filled/replaced -> chunks
    ("version", pa.string()),  # the file's version after the run (S3 ETag, local mtime in ns), if known
])
DEFAULTS: dict[str, Any] = {"table_version": None, "retryable": False, "notes": [], "version": None}


def report_table(records: list[dict[str, Any]]) -> pa.Table:
    """The records as a table of REPORT_SCHEMA, JSON text where a field is a mapping or a list."""
    rows = []
    for r in records:
        row = {**DEFAULTS, **r}
        row.update({key: json.dumps(row[key], sort_keys=True) for key in COUNTED_REASONS + LISTS})
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=REPORT_SCHEMA)


def write_report(records: list[dict[str, Any]], url: str, storage_options: dict[str, Any]) -> None:
    """Parquet (REPORT_SCHEMA) when the path ends in .parquet, JSON lines (the records) otherwise."""
    fs, path = resolve(url, storage_options=storage_options)
    parent = path.rsplit("/", 1)[0] if "/" in path else ""
    if parent and not fs.exists(parent):
        fs.makedirs(parent, exist_ok=True)
    if path.endswith(".parquet"):
        table = report_table(records)
        with fs.open(path, "wb") as out:
            pq.write_table(table, out)
        return
    with fs.open(path, "w") as out:
        for r in records:
            out.write(json.dumps(r, sort_keys=True) + "\n")


def format_size(n: float) -> str:
    """A byte count in binary units: 512 B, 1.5 KiB, 2.0 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n} B"


def file_noun(n: int) -> str:
    """"file" for one, else "files". The summary's first line reads `TITLE: N file(s) in ...`:
    the Airflow DAG finds the job's summary in spark-submit's output by it."""
    return "file" if n == 1 else "files"


def summary_document(records: list[dict[str, Any]], seconds: float, code: int, report: str | None
                     ) -> dict[str, Any]:
    """The summary for schedulers: files and bytes per status, failures by reason, the exit code
    and where the report went (None: none asked for, or it could not be written)."""
    statuses: dict[str, dict[str, int]] = {}
    for r in records:
        entry = statuses.setdefault(str(r["status"]), {"files": 0, "bytes": 0})
        entry["files"] += 1
        entry["bytes"] += r["bytes_in"]
    failures = Counter(f"{r['status']}: {r['reason']}" for r in records if r["status"] in FAILURES)
    return {
        "files": len(records), "bytes_in": sum(r["bytes_in"] for r in records),
        "bytes_read": sum(r["bytes_read"] for r in records), "seconds": round(seconds, 3),
        "statuses": dict(sorted(statuses.items())), "failures_by_reason": dict(sorted(failures.items())),
        "exit_code": code, "report": report,
    }


def write_summary_json(document: dict[str, Any], url: str, storage_options: dict[str, Any]) -> None:
    """The summary document as one JSON object (a trailing newline) at `url`."""
    fs, path = resolve(url, storage_options=storage_options)
    parent = path.rsplit("/", 1)[0] if "/" in path else ""
    if parent and not fs.exists(parent):
        fs.makedirs(parent, exist_ok=True)
    with fs.open(path, "w") as out:
        out.write(json.dumps(document, sort_keys=True) + "\n")


def summary(records: list[dict[str, Any]], seconds: float, title: str = "pageindex job",
            report: str | None = None) -> str:
    counts = Counter(r["status"] for r in records)
    sizes: dict[str, int] = defaultdict(int)
    for r in records:
        sizes[r["status"]] += r["bytes_in"]
    lines = [f"{title}: {len(records)} {file_noun(len(records))} in {seconds:.1f}s"]
    for status in Status:
        if counts[status]:
            n = counts[status]
            lines.append(f"  {status:<16} {n:>8} {file_noun(n):<5} {format_size(sizes[status]):>12}")
    written = [r for r in records if r["status"] in WRITTEN]
    pages = sum(r["pages"] for r in written)
    read = sum(r["bytes_read"] for r in records)
    copied = sum(r["copy_bytes_read"] for r in records)
    lines.append(f"  pages indexed    {pages:>8}")
    filters = sum(r.get("bloom_filters", 0) for r in written)
    if filters:
        lines.append(f"  bloom filters    {filters:>8}")
    changed: Counter[str] = Counter()
    for r in written:
        changed.update(r.get("chunk_statistics", {}))
    if any(changed.values()):  # chunks given min/max readers prune row groups on
        lines.append(f"  chunk statistics {changed['filled']:>8} filled, {changed['copied']} copied, "
                     f"{changed['replaced']} replaced")
    lines.append(f"  bytes read       {format_size(read):>12}"
                 f"   throughput {format_size(read / seconds if seconds > 0 else 0)}/s")
    lines.append(f"    to index       {format_size(read - copied):>12}")
    lines.append(f"    to copy        {format_size(copied):>12}   (the unchanged prefix, for the commit; "
                 "0 where the store copies it)")
    no_skipping = Counter(r["no_page_skipping"] for r in written if r["no_page_skipping"])
    for reason, n in no_skipping.most_common():
        lines.append(f"  {n} file{'s' if n > 1 else ''} gain{'' if n > 1 else 's'} no page skipping: {reason}")
    lines += _by_reason(written, "without_column_index_reasons",
                        "chunks without ColumnIndex (OffsetIndex only), by reason:")
    lines += _by_reason(written, "page_stats_fallback_reasons",
                        "chunks decoded exactly though page-header statistics were trusted, by reason:")
    notes = Counter(note for r in records for note in r.get("notes", ()))
    if notes:  # e.g. a column named for a bloom filter that older files lack
        lines.append("  notes, by files (the report lists each file's):")
        lines += [f"    {n:>6}  {note}" for note, n in sorted(notes.items(), key=lambda kv: (-kv[1], kv[0]))]
    failures: dict[str, list[str]] = defaultdict(list)
    for r in records:
        if r["status"] in FAILURES:
            failures[f"{r['status']}: {r['reason']}"].append(r["path"])
    if failures:
        lines.append("  failures by reason:")
        for reason, paths in sorted(failures.items(), key=lambda kv: -len(kv[1])):
            lines.append(f"    {len(paths):>6}  {reason}")
            lines.extend(f"            {p}" for p in paths[:3])
            if len(paths) > 3:
                lines.append(f"            … and {len(paths) - 3} more")
    if report is not None:
        lines.append(f"  report           {report}")
    return "\n".join(lines)


def _by_reason(records: list[dict[str, Any]], key: str, title: str) -> list[str]:
    """The records' chunk counts under `key` summed per reason, most common first (none: no lines)."""
    counts: Counter[str] = Counter()
    for r in records:
        counts.update(r[key])
    if not counts:
        return []
    return [f"  {title}"] + [f"    {n:>6}  {reason}" for reason, n in counts.most_common()]
