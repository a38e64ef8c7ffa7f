"""How the command line shows results: report records, rows and I/O as text, or as strict JSON.

The words and numbers a person reads after `pageindex retrofit | lookup` (pageindex.cli runs them).
"""
from __future__ import annotations

import datetime as dt
import json
import math
import sys
from typing import Any

from pageindex.errors import PageIndexError
from pageindex.index.skipping import skipping_advice
from pageindex.job.report import format_size
from pageindex.retrofit import Status

NOT_DONE = (Status.FAILED, Status.CHANGED)  # the statuses that make `retrofit` exit 1 or 3
SHOWN_VIOLATIONS = 5  # per repaired file in the text output
DRY_RUNS = (Status.DRY_RUN, Status.REPAIR_NEEDED)  # computed, not written


def print_json(obj: object) -> None:
    json.dump(jsonable(obj), sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")


def print_json_line(obj: object) -> None:
    """One document per file: JSON lines, whatever the number of files."""
    print(json.dumps(jsonable(obj), sort_keys=True, allow_nan=False))


def jsonable(value: Any) -> Any:
    """Strict JSON: NaN and the infinities as the strings "NaN", "Infinity", "-Infinity" (as
    Spark's to_json writes them), bytes as 0x hex (as inspect shows binary bounds), dates and
    times as ISO text, decimals and anything else as their exact text."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if value is None or isinstance(value, (str, int, float)):
        return value
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    return str(value)


def print_error(err: PageIndexError, as_json: bool) -> None:
    print(f"pageindex: error: {type(err).__name__}: {err}", file=sys.stderr)
    if as_json:
        print_json_line({"error": type(err).__name__, "message": str(err), "path": err.path})


def describe(record: dict[str, Any]) -> str:
    """A retrofit record as text: what was written, and why any chunk got no ColumnIndex."""
    path, status = record["path"], record["status"]
    notes = [f"  note: {note}" for note in record.get("notes", ())]
    if status == Status.ALREADY_INDEXED:
        copied = f" (copied to {record['output']})" if record["output"] else ""
        return "\n".join([f"{path}: already has a complete page index (use --force to rebuild){copied}",
                          *notes])
    if status == Status.SKIPPED and record["output"]:
        return f"{path}: {status}: {record['reason']} (copied to {record['output']})"
    if status in (Status.SKIPPED, Status.UNCHANGED, Status.BEING_WRITTEN, Status.READ_ONLY, *NOT_DONE):
        return f"{path}: {status}: {record['reason']}"
    with_ci, without = record["chunks_with_column_index"], record["chunks_without_column_index"]
    from_stats = record["chunks_from_page_stats"]
    lines = [
        f"{path}: {status}" + (f" -> {record['output']}" if record["output"] else ""),
        f"  row groups {record['row_groups']}, pages {record['pages']}, chunks {with_ci + without}"
        f" ({with_ci} with ColumnIndex, {without} without)"
        + (f", {from_stats} from page-header statistics" if from_stats else "")
        + (f", {plural(record['bloom_filters'], 'bloom filter')} "
           f"{'to write' if status in DRY_RUNS else 'written'}" if record.get("bloom_filters") else ""),
        f"  size {record['bytes_in']} -> {record['bytes_out']} bytes"
        f" (+{record['bytes_out'] - record['bytes_in']}), read {record['index_bytes_read']} bytes to index"
        + (f" and {record['copy_bytes_read']} to copy" if record["copy_bytes_read"] else "")
        + f" in {record['seconds']:.2f}s",
    ]
    if record["pages"]:  # the skipping the index allows, and what else can help
        blooms = "its bloom filters" if record.get("bloom_filters") else ""
        lines.append(f"  {skipping_advice(record['no_page_skipping'], blooms)}")
    for reason, count in sorted(record["without_column_index_reasons"].items()):
        lines.append(f"  no ColumnIndex for {count} chunk{'s' if count > 1 else ''}: {reason}")
    for reason, count in sorted(record["page_stats_fallback_reasons"].items()):
        lines.append(f"  decoded exactly, {count} chunk{'s' if count > 1 else ''}: {reason}")
    if any(record["chunk_statistics"].values()):
        lines.append(chunk_statistics(record["chunk_statistics"]))
    lines.extend(notes)
    violations = record["violations"]
    if violations:
        done = "to rebuild" if status == Status.REPAIR_NEEDED else "rebuilt"
        lines.append(f"  the existing page index is wrong ({len(violations)} violations), {done}:")
        lines.extend(f"    {v}" for v in violations[:SHOWN_VIOLATIONS])
        if len(violations) > SHOWN_VIOLATIONS:
            lines.append(f"    … and {len(violations) - SHOWN_VIOLATIONS} more (--json lists them all)")
    return "\n".join(lines)


def chunk_statistics(counts: dict[str, int]) -> str:
    """What the new footer changed in chunk statistics, e.g. `chunk statistics: 16 chunks filled
    from the page bounds, 24 copied from the deprecated min/max`."""
    said = {"filled": "filled from the page bounds", "copied": "copied from the deprecated min/max",
            "replaced": "replaced (they could drop rows)"}
    parts = [f"{counts[how]} {said[how]}" for how in ("filled", "copied", "replaced") if counts[how]]
    first = parts[0].split(" ", 1)
    parts[0] = f"{plural(int(first[0]), 'chunk')} {first[1]}"
    return "  chunk statistics: " + ", ".join(parts)


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def lookup_io(rows: int, stats: Any) -> str:
    """The lookup's I/O against a full scan of the same columns (LookupStats.full_scan_bytes),
    then each column's pages read of the pages in the row groups it read, and their bytes."""
    of_full = (f" ({100 * stats.bytes_read / stats.full_scan_bytes:.1f}% of the "
               f"{format_size(stats.full_scan_bytes)} a full scan of these columns reads)"
               if stats.full_scan_bytes else "")
    lines = [f"{rows} rows; read {format_size(stats.bytes_read)}{of_full} in {stats.requests} requests "
             f"from {stats.files} file(s)"
             + (f" ({stats.files_pruned_by_partition} pruned by partition values, never opened)"
                if stats.files_pruned_by_partition else "")
             + f"; {stats.row_groups_read} of {stats.row_groups} row groups read"
             + (f", {stats.row_groups_pruned_by_bloom_filter} skipped by bloom filters"
                if stats.row_groups_pruned_by_bloom_filter else "")]
    for name, io in stats.columns.items():
        lines.append(f"  {name}: {io.pages_read} of {io.pages_total} pages read; "
                     f"{format_size(io.bytes_read)} read for the column in all")
    return "\n".join(lines)


def printable(table):
    """Temporal columns as ISO text (Python's datetime cannot hold nanoseconds)."""
    import pyarrow as pa

    columns = [c.cast(pa.string()) if pa.types.is_temporal(c.type) else c for c in table.columns]
    return pa.table(columns, names=table.column_names)


def format_rows(table) -> str:
    names = table.column_names
    rows = [["" if v is None else str(v) for v in row.values()] for row in table.to_pylist()]
    widths = [max([len(n)] + [len(r[i]) for r in rows]) for i, n in enumerate(names)]
    lines = ["  ".join(n.rjust(w) for n, w in zip(names, widths))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)
