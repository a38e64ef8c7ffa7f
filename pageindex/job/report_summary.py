"""Report summary: saved reports (Parquet or JSON lines, files, the job's folders of part files, or
directories of them, local or on an object store) read back and summed per night and status.
"""
from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq

from pageindex.errors import MalformedFileError, MissingInputError
from pageindex.io.storage import resolve, storage_errors
from pageindex.job.report import FAILURES, file_noun, format_size
from pageindex.retrofit import Status

REPORT_SUFFIXES = (".parquet", ".jsonl", ".json")
PART = "part-"  # a part file of the job's report folder
# The Airflow DAG writes <prefix>/run_date=YYYY-MM-DD/<run>-try<n>.parquet: the partition names the night.
_NIGHT = re.compile(r"(?:^|/)run_date=([^/]+)/")
# Columns a summary needs; a report missing one is not a pageindex report.
NEEDED = ("path", "status", "reason", "bytes_in")


@dataclass(frozen=True)
class SavedReport:
    """One report file read back: where it is, the night it belongs to, its records' needed fields."""

    url: str
    night: str
    records: tuple[dict[str, Any], ...]


def report_urls(paths: list[str], storage_options: dict[str, Any]) -> list[str]:
    """Every report file named or below a named directory (by suffix), sorted; a named file is
    taken whatever its name, a missing path raises MissingInputError."""
    urls: list[str] = []
    for given in paths:
        with storage_errors("list the reports", given):
            fs, path = resolve(given, storage_options=storage_options)
            if not fs.exists(path):
                raise MissingInputError("no such file or directory", path=given)
            if not fs.isdir(path):
                urls.append(given)
                continue
            found = sorted(p for p in fs.find(path) if p.endswith(REPORT_SUFFIXES)
                           and not p.rsplit("/", 1)[-1].startswith((".", "_")))
            # The job's report is a folder of part files: the folder is one report.
            found = [p.rsplit("/", 1)[0] if p.rsplit("/", 1)[-1].startswith(PART) else p for p in found]
            urls += [_url_of(given, path, p) for p in found]
    return sorted(dict.fromkeys(urls))


def _url_of(given: str, root: str, found: str) -> str:
    """`found` (a path within the filesystem, below `root`) spelled as the user spelled `root`."""
    return given.rstrip("/") + found[len(root.rstrip("/")):]


def read_report(url: str, storage_options: dict[str, Any]) -> SavedReport:
    """The report at `url`: Parquet by its magic bytes, else JSON lines. A file that is neither,
    or lacks a needed field, raises MalformedFileError naming it."""
    with storage_errors("read the report", url):
        fs, path = resolve(url, storage_options=storage_options)
        if fs.isdir(path):  # the job's: its part files, read in turn
            names = sorted(p for p in fs.ls(path, detail=False) if p.rsplit("/", 1)[-1].startswith(PART))
            records = [r for name in names for r in _file_records(f"{url.rstrip('/')}/{name.rsplit('/', 1)[-1]}",
                                                                  fs, name)]
        else:
            records = _file_records(url, fs, path)
    match = _NIGHT.search(url)
    return SavedReport(url, match.group(1) if match else url, tuple(records))


def _file_records(url: str, fs: Any, path: str) -> list[dict[str, Any]]:
    with fs.open(path, "rb") as f:
        head = f.read(4)
        f.seek(0)
        if head == b"PAR1":
            return _parquet_records(url, f)
        return _json_records(url, f.read())


def _parquet_records(url: str, f: Any) -> list[dict[str, Any]]:
    try:
        table = pq.read_table(f)
    except Exception as err:  # pyarrow raises several kinds for a damaged file
        raise MalformedFileError(f"not a readable Parquet report: {err}", path=url) from None
    missing = [name for name in NEEDED if name not in table.column_names]
    if missing:
        raise MalformedFileError(f"not a pageindex report: no column {', '.join(missing)}", path=url)
    return table.select(list(NEEDED)).to_pylist()


def _json_records(url: str, data: bytes) -> list[dict[str, Any]]:
    records = []
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            raise MalformedFileError(f"line {number} is not JSON", path=url) from None
        if not isinstance(record, dict) or any(name not in record for name in NEEDED):
            raise MalformedFileError(f"line {number} is not a pageindex record (needs "
                                     f"{', '.join(NEEDED)})", path=url)
        records.append({name: record[name] for name in NEEDED})
    return records


def summarise(reports: list[SavedReport]) -> str:
    """Per night (in order), then over all: files and bytes per status, failures by reason."""
    nights: dict[str, list[SavedReport]] = defaultdict(list)
    for report in reports:
        nights[report.night].append(report)
    everything = [r for report in reports for r in report.records]
    lines = [f"pageindex report: {len(reports)} {_noun(len(reports), 'report')}, "
             f"{len(everything)} {file_noun(len(everything))}"]
    for night in sorted(nights):
        records = [r for report in nights[night] for r in report.records]
        lines.append("")
        lines.append(f"{night}: {len(records)} {file_noun(len(records))}, "
                     f"{format_size(sum(r['bytes_in'] or 0 for r in records))} "
                     f"({len(nights[night])} {_noun(len(nights[night]), 'report')})")
        lines += _block(records)
    if len(nights) > 1:
        lines += ["", f"all: {len(everything)} {file_noun(len(everything))}, "
                      f"{format_size(sum(r['bytes_in'] or 0 for r in everything))}"]
        lines += _block(everything)
    return "\n".join(lines)


def _block(records: list[dict[str, Any]]) -> list[str]:
    counts = Counter(r["status"] for r in records)
    sizes: Counter[str] = Counter()
    for r in records:
        sizes[r["status"]] += r["bytes_in"] or 0
    known = [str(s) for s in Status]
    lines = []
    for status in known + sorted(set(counts) - set(known)):
        if counts[status]:
            n = counts[status]
            lines.append(f"  {status:<16} {n:>8} {file_noun(n):<5} {format_size(sizes[status]):>12}")
    failures = Counter(f"{r['status']}: {r['reason']}" for r in records if r["status"] in FAILURES)
    if failures:
        lines.append("  failures by reason:")
        lines += [f"    {n:>6}  {reason}" for reason, n in sorted(failures.items(), key=lambda kv: (-kv[1], kv[0]))]
    return lines


def _noun(n: int, word: str) -> str:
    return word if n == 1 else word + "s"
