"""Report: the job's per-file records written as JSON lines or Parquet (one declared schema), and
the end summary: files and bytes per status, pages indexed, failures grouped by reason, throughput.
"""
from __future__ import annotations

import json
import operator
from collections import Counter
from typing import Any, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from pageindex.errors import EXIT_OK, EXIT_PERMANENT, EXIT_RETRYABLE
from pageindex.index.skipping import REMEDY, skipping_advice
from pageindex.io.storage import resolve
from pageindex.io.whole_file import whole_file
from pageindex.retrofit import Status
from pageindex.scan.compiled import ARROW

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
    # The path of the process that read the file as Parquet: compiled, or arrow (the fallback);
    # null for a file not read so (not Parquet, or unchanged since --state recorded it).
    ("scan_path", pa.string()),
])
DEFAULTS: dict[str, Any] = {"table_version": None, "retryable": False, "notes": [], "version": None,
                            "scan_path": None}
_ALL_DEFAULTS = {name: DEFAULTS.get(name) for name in REPORT_SCHEMA.names}  # None: null
_FIELDS = operator.itemgetter(*REPORT_SCHEMA.names)


# Records per Arrow batch (one row group each) of a Parquet report: a run's million records are
# converted and written batch by batch, so at most one batch is held twice (as dicts and as Arrow).
REPORT_BATCH_ROWS = 65_536
# json.dumps(value, sort_keys=True), without building an encoder per call (a report of a million
# records encodes five values each).
_to_json = json.JSONEncoder(sort_keys=True).encode


def report_batches(records: Iterable[dict[str, Any]], rows: int | None = None) -> Iterator[pa.RecordBatch]:
    """The records as batches of REPORT_SCHEMA of at most `rows` (REPORT_BATCH_ROWS) rows each,
    in their order, JSON text where a field is a mapping or a list; `records` is read once (a
    generator will do)."""
    rows = rows or REPORT_BATCH_ROWS
    batch: list[dict[str, Any]] = []
    for record in records:
        batch.append(record)
        if len(batch) == rows:
            yield _batch(batch)
            batch = []
    if batch:
        yield _batch(batch)


def _batch(records: list[dict[str, Any]]) -> pa.RecordBatch:
    # Record by record, then transposed: a million records lie scattered in memory, and reading
    # each once (not once per column) is what keeps the conversion linear in practice.
    rows = [_FIELDS({**_ALL_DEFAULTS, **r}) for r in records]
    columns = []
    for field, values in zip(REPORT_SCHEMA, zip(*rows) if rows else [()] * len(REPORT_SCHEMA)):
        if field.name in COUNTED_REASONS + LISTS:
            values = _json_texts(values)
        columns.append(pa.array(values, type=field.type))
    return pa.RecordBatch.from_arrays(columns, schema=REPORT_SCHEMA)


def _json_texts(values: Sequence[Any]) -> list[str]:
    """Each value as JSON text, encoded once per distinct value: most records repeat a few (no
    reasons, no notes), and their repr (insertion order kept) names the value for the memo."""
    memo: dict[str, str] = {}
    out = []
    for value in values:
        key = repr(value)
        text = memo.get(key)
        if text is None:
            text = memo[key] = _to_json(value)
        out.append(text)
    return out


def report_table(records: Iterable[dict[str, Any]]) -> pa.Table:
    """The records as a table of REPORT_SCHEMA (report_batches' rows)."""
    return pa.Table.from_batches(list(report_batches(records)), schema=REPORT_SCHEMA)


def write_report(records: Iterable[dict[str, Any]], url: str, storage_options: dict[str, Any]) -> None:
    """Parquet (REPORT_SCHEMA) when the path ends in .parquet, JSON lines (the records) otherwise;
    written as `records` are read, a batch of REPORT_BATCH_ROWS at a time, and appearing whole."""
    fs, path = resolve(url, storage_options=storage_options)
    parent = path.rsplit("/", 1)[0] if "/" in path else ""
    if parent and not fs.exists(parent):
        fs.makedirs(parent, exist_ok=True)
    if path.endswith(".parquet"):
        with whole_file(fs, path) as out, pq.ParquetWriter(out, REPORT_SCHEMA) as writer:
            for batch in report_batches(records):
                writer.write_batch(batch)
        return
    with whole_file(fs, path, text=True) as out:
        for r in records:
            out.write(_to_json(r) + "\n")


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


def summary_document(records: Iterable[dict[str, Any]] | Tally, seconds: float, code: int,
                     report: str | None) -> dict[str, Any]:
    """The summary for schedulers: files and bytes per status, failures by reason, files indexed
    per scan path, the exit code and where the report went (None: none asked for, or it could not
    be written). `records` may be their Tally already (the job's tasks sum their own)."""
    t = records if isinstance(records, Tally) else tally(records)
    statuses = {str(s): {"files": n, "bytes": t.sizes[s]} for s, n in t.counts.items() if n}
    failures = {reason: n for reason, (n, _) in t.failures.items()}
    return {
        "files": t.files, "bytes_in": sum(t.sizes.values()), "bytes_read": t.read, "seconds": round(seconds, 3),
        "statuses": dict(sorted(statuses.items())), "failures_by_reason": dict(sorted(failures.items())),
        "scan_paths": dict(sorted(t.paths.items())),  # files indexed per path: compiled, arrow
        "exit_code": code, "report": report,
    }


def write_summary_json(document: dict[str, Any], url: str, storage_options: dict[str, Any]) -> None:
    """The summary document as one JSON object (a trailing newline) at `url`."""
    fs, path = resolve(url, storage_options=storage_options)
    parent = path.rsplit("/", 1)[0] if "/" in path else ""
    if parent and not fs.exists(parent):
        fs.makedirs(parent, exist_ok=True)
    with whole_file(fs, path, text=True) as out:
        out.write(json.dumps(document, sort_keys=True) + "\n")


class Tally:
    """What the summary and the exit code say of a run's records, summed in one pass over them
    (a million records are read once, and only the first paths of each failure reason are kept).
    Tallies merge: each Spark task sums its own records, the driver merges the sums."""

    def __init__(self) -> None:
        self.files = self.pages = self.filters = self.read = self.copied = 0
        self.counts: Counter[str] = Counter()
        self.sizes: Counter[str] = Counter()
        self.changed: Counter[str] = Counter()
        self.no_skipping: Counter[str] = Counter()
        self.page_skipping = 0  # files written whose index lets readers skip pages
        self.paths: Counter[str] = Counter()  # files indexed per scan path: compiled, arrow
        self.without: Counter[str] = Counter()
        self.fallback: Counter[str] = Counter()
        self.notes: Counter[str] = Counter()
        self.failures: dict[str, list] = {}  # reason -> [files, the first three paths by name]
        self.failed = [0, 0]  # failed files: [permanent, retryable] (the exit code's input)

    def add(self, r: dict[str, Any]) -> None:
        status = str(r["status"])
        self.files += 1
        self.counts[status] += 1
        self.sizes[status] += r["bytes_in"]
        self.read += r["bytes_read"]
        self.copied += r["copy_bytes_read"]
        for note in r.get("notes", ()):
            self.notes[note] += 1
        if status in WRITTEN:
            self.pages += r["pages"]
            self.filters += r.get("bloom_filters", 0)
            _add(self.changed, r.get("chunk_statistics", {}))
            if r["no_page_skipping"]:
                self.no_skipping[r["no_page_skipping"]] += 1
            elif r["pages"]:
                self.page_skipping += 1
            if r.get("scan_path"):
                self.paths[r["scan_path"]] += 1
            _add(self.without, r["without_column_index_reasons"])
            _add(self.fallback, r["page_stats_fallback_reasons"])
        elif status in FAILURES:
            entry = self.failures.setdefault(f"{status}: {r['reason']}", [0, []])
            entry[0] += 1
            if len(entry[1]) < 3 or r["path"] < entry[1][-1]:
                entry[1] = sorted([*entry[1], r["path"]])[:3]
            if status == Status.FAILED:
                self.failed[bool(r.get("retryable", False))] += 1

    def merge(self, other: "Tally") -> "Tally":
        """Add `other`'s sums to this one's; returns self."""
        self.files += other.files
        self.pages += other.pages
        self.filters += other.filters
        self.read += other.read
        self.copied += other.copied
        self.page_skipping += other.page_skipping
        for mine, theirs in ((self.counts, other.counts), (self.sizes, other.sizes), (self.paths, other.paths),
                             (self.changed, other.changed), (self.no_skipping, other.no_skipping),
                             (self.without, other.without), (self.fallback, other.fallback),
                             (self.notes, other.notes)):
            _add(mine, theirs)
        for reason, (n, paths) in other.failures.items():
            entry = self.failures.setdefault(reason, [0, []])
            entry[0] += n
            entry[1] = sorted(set(entry[1]) | set(paths))[:3]
        self.failed = [self.failed[0] + other.failed[0], self.failed[1] + other.failed[1]]
        return self

    def exit_code(self, allowed: int) -> int:
        """errors.failures_exit_code's rule on the failed files counted."""
        if sum(self.failed) <= allowed:
            return EXIT_OK
        return EXIT_RETRYABLE if self.failed[1] else EXIT_PERMANENT


def tally(records: Iterable[dict[str, Any]]) -> Tally:
    """The records' Tally, read once."""
    t = Tally()
    for r in records:
        t.add(r)
    return t


def _add(counter: Counter[str], counts: dict[str, int]) -> None:
    for key, n in counts.items():  # Counter.update's sum, without its per-call overhead
        counter[key] += n


# Where the summary sends a reader whose files took the Arrow fallback.
FALLBACK_DOCS = "docs/getting-started.md#the-compiled-scan"


def summary(records: Iterable[dict[str, Any]] | Tally, seconds: float, title: str = "pageindex job",
            report: str | None = None, fallback: str | None = None,
            fallback_docs: str = FALLBACK_DOCS) -> str:
    """The end summary of the records (or of their Tally). `fallback`: where and why the compiled
    kernels did not load (the hosts and the import error: kernel_probe.fallback), said beside the
    count of files indexed by the Arrow fallback."""
    t = records if isinstance(records, Tally) else tally(records)
    lines = [f"{title}: {t.files} {file_noun(t.files)} in {seconds:.1f}s"]
    for status in Status:
        if t.counts[status]:
            n = t.counts[status]
            lines.append(f"  {status:<16} {n:>8} {file_noun(n):<5} {format_size(t.sizes[status]):>12}")
    lines.append(f"  pages indexed    {t.pages:>8}")
    if t.paths[ARROW]:  # 2-3x the CPU of the compiled scan, for the same bytes
        lines.append(f"  {t.paths[ARROW]} {file_noun(t.paths[ARROW])} indexed by the Arrow fallback: "
                     f"{fallback or 'the compiled kernels did not load where they were scanned'}; see {fallback_docs}")
    if t.filters:
        lines.append(f"  bloom filters    {t.filters:>8}")
    if any(t.changed.values()):  # chunks given min/max readers prune row groups on
        lines.append(f"  chunk statistics {t.changed['filled']:>8} filled, {t.changed['copied']} copied, "
                     f"{t.changed['replaced']} replaced")
    lines.append(f"  bytes read       {format_size(t.read):>12}"
                 f"   throughput {format_size(t.read / seconds if seconds > 0 else 0)}/s")
    lines.append(f"    to index       {format_size(t.read - t.copied):>12}")
    lines.append(f"    to copy        {format_size(t.copied):>12}   (the unchanged prefix, for the commit; "
                 "0 where the store copies it)")
    if t.page_skipping:
        lines.append(f"  {t.page_skipping} {file_noun(t.page_skipping)} allow{'' if t.page_skipping > 1 else 's'} "
                     f"{skipping_advice(None)}")
    for reason, n in t.no_skipping.most_common():
        lines.append(f"  {n} file{'s' if n > 1 else ''} gain{'' if n > 1 else 's'} no page skipping: {reason}")
        if reason in REMEDY:  # a report from another version may give a reason without one
            lines.append(f"    {REMEDY[reason]}")
    lines += _by_reason(t.without, "chunks without ColumnIndex (OffsetIndex only), by reason:")
    lines += _by_reason(t.fallback, "chunks decoded exactly though page-header statistics were trusted, by reason:")
    if t.notes:  # e.g. a column named for a bloom filter that older files lack
        lines.append("  notes, by files (the report lists each file's):")
        lines += [f"    {n:>6}  {note}" for note, n in sorted(t.notes.items(), key=lambda kv: (-kv[1], kv[0]))]
    if t.failures:
        lines.append("  failures by reason:")
        for reason, (n, paths) in sorted(t.failures.items(), key=lambda kv: -kv[1][0]):
            lines.append(f"    {n:>6}  {reason}")
            lines.extend(f"            {p}" for p in paths)
            if n > 3:
                lines.append(f"            … and {n - 3} more")
    if report is not None:
        lines.append(f"  report           {report}")
    return "\n".join(lines)


def _by_reason(counts: Counter[str], title: str) -> list[str]:
    """Chunk counts per reason, most common first (none: no lines)."""
    if not counts:
        return []
    return [f"  {title}"] + [f"    {n:>6}  {reason}" for reason, n in counts.most_common()]
