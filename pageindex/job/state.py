"""The run state (--state): what a run decided per listed file, a small Parquet table, so that the
next run opens only files that are new or changed since, and none the state says are settled.

A file is skipped only when its listing (path, size, version) and the run's options and output
match a record of a settled outcome; anything else, an unreadable state included, means opening it.
"""
from __future__ import annotations

import argparse
import datetime
import logging
import os
import time
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.implementations.local import LocalFileSystem

from pageindex.errors import PageIndexError
from pageindex.index.marker import options_key
from pageindex.io.discovery import InputFile, canonical_local, input_root
from pageindex.io.storage import resolve, storage_errors
from pageindex.io.whole_file import whole_file
from pageindex.job import parts
from pageindex.job.process import JobOptions, failed_record
from pageindex.retrofit import Status
from pageindex.version import __version__

log = logging.getLogger("pageindex.job.state")

# The state's columns, declared once: every state has them with these types, in this order.
STATE_SCHEMA = pa.schema([
    ("path", pa.string()),
    ("size", pa.int64()),  # the file's size after the run (an in-place index makes it longer)
    ("version", pa.string()),  # S3 ETag or local mtime in ns after the run; null: never skipped
    ("status", pa.string()),
    ("options", pa.string()),  # index.marker.options_key of the run that decided
    ("output", pa.string()),  # where the indexed file went; null: in place
    ("pageindex_version", pa.string()),
    ("decided_at", pa.timestamp("ms", tz="UTC")),  # when the run that decided started
])
# Outcomes that hold as long as the file's bytes and the options stay the same: a failure, a file
# changed while read, a dry run's verdict are decided again by opening the file.
SETTLED = (Status.INDEXED, Status.ALREADY_INDEXED, Status.REPAIRED, Status.SKIPPED)
# A long run writes the state every this many decided files or seconds, whichever comes first.
CHECKPOINT_FILES = 1000
CHECKPOINT_SECONDS = 300.0


@dataclass(frozen=True)
class Entry:
    """One file's row of the state."""

    path: str
    size: int
    version: str | None
    status: str
    options: str
    output: str | None
    pageindex_version: str
    decided_at: datetime.datetime


def add_state_argument(parser: argparse.ArgumentParser) -> None:
    """--state, the same for the CLI's retrofit and the Spark job."""
    parser.add_argument(
        "--state", metavar="PATH",
        help="a small Parquet table (local or s3://; the Spark job's: a folder of part files) of what "
             "each run decided per file: a file "
             "listed with the size and version (S3 ETag, local mtime) it records, indexed or found "
             "indexed under the same index options, is not opened (status unchanged); new and "
             "changed files are processed and recorded, failures retried. Written at the end and at "
             "checkpoints during long runs; --force and --verify-existing open every file and still "
             "update it; --dry-run reads it, never writes it. A missing or unreadable state: every "
             "file is opened (one warning) and the state written anew")


def run_key(options: JobOptions) -> str:
    """What a state record's options must equal for its file to be skipped."""
    return options_key(options.truncate_length, options.trust_page_stats, options.bloom, options.chunk_statistics)


def read_state(url: str, storage_options: dict[str, Any]) -> dict[str, Entry]:
    """The state at `url` by path; empty when there is none yet. An unreadable one (corrupt, not
    a state, a storage error) is one warning line naming it, and empty: every file is opened."""
    return read_state_tidied(url, storage_options)[0]


def read_state_tidied(url: str, storage_options: dict[str, Any]) -> tuple[dict[str, Entry], bool]:
    """read_state, and whether any stored path was not as state_key names it (to be written
    back tidy)."""
    try:
        with storage_errors("read the state", url):
            fs, path = resolve(url, storage_options=storage_options)
            if not fs.exists(path):
                return {}, False
            if fs.isdir(path):  # the job's: a folder of part files, rewritten by each run
                return read_state_folder(url, storage_options), False
            data = fs.cat_file(path)
        return _entries(pq.read_table(pa.BufferReader(data)))
    except (PageIndexError, OSError, ValueError, pa.ArrowException) as err:
        log.warning("pageindex: warning: %s: the state cannot be read (%s); every file is opened this "
                    "run and the state is written anew at its end", url, err)
        return {}, False


def read_state_folder(url: str, storage_options: dict[str, Any]) -> dict[str, Entry]:
    """The entries of a state folder's parts, read in their runs' order: a later run's entry of a
    path replaces an earlier one's (a crashed run's parts count, over the run before it)."""
    entries: dict[str, Entry] = {}
    for part in parts.list_parts(url, storage_options):
        entries.update(read_part(part.url, storage_options))
    return entries


def read_part(url: str, storage_options: dict[str, Any]) -> dict[str, Entry]:
    """One state file's entries by path (raises on a damaged one)."""
    fs, path = resolve(url, storage_options=storage_options)
    return entries_of(pq.read_table(pa.BufferReader(fs.cat_file(path))))


def entries_of(table: pa.Table) -> dict[str, Entry]:
    """A state table's entries by state_key (ValueError: not a state)."""
    return _entries(table)[0]


def _entries(table: pa.Table) -> tuple[dict[str, Entry], bool]:
    """entries_of, and whether any stored path was not as state_key names it."""
    missing = [f.name for f in STATE_SCHEMA if f.name not in table.column_names]
    if missing:
        raise ValueError(f"not a pageindex state: no column {', '.join(missing)}")
    rows = table.select(STATE_SCHEMA.names).cast(STATE_SCHEMA).to_pylist()
    entries: dict[str, Entry] = {}
    # A state written before its paths were normalised may hold one file under two spellings:
    # the latest decision stands.
    for row in sorted(rows, key=lambda row: row["decided_at"] or _EPOCH):
        entry = Entry(**{**row, "path": state_key(row["path"]), "output": state_key(row["output"])})
        entries[entry.path] = entry
    untidy = len(entries) < len(rows) or any(
        (row["path"], row["output"]) != (state_key(row["path"]), state_key(row["output"])) for row in rows)
    return entries, untidy


_EPOCH = datetime.datetime.fromtimestamp(0, datetime.timezone.utc)


def state_key(url: str | None) -> str | None:
    """How the state names a file (or an output): a local path canonical (absolute, `.`, `..`
    and links among its directories resolved, its own name kept), so that `../lake`,
    `/abs/lake` and a linked parent name one file once; a URL of an object store as it is."""
    if url is None or ("://" in url and not url.startswith("file://")):
        return url
    return canonical_local(url.removeprefix("file://"))


def root_key(url: str) -> str:
    """state_key of an input's root: a directory is resolved whole, as its files' keys are."""
    key = str(state_key(url))
    return os.path.realpath(key) if "://" not in key and os.path.isdir(key) else key


def state_table(entries: Iterable[Entry]) -> pa.Table:
    """The entries as a table of STATE_SCHEMA, sorted by path: the same entries, the same bytes."""
    rows = [e.__dict__ for e in sorted(entries, key=lambda e: e.path)]
    return pa.Table.from_pylist(rows, schema=STATE_SCHEMA)


def write_state(entries: Iterable[Entry], url: str, storage_options: dict[str, Any]) -> None:
    """Replace the state at `url` atomically: a local file through a temporary renamed over it, an
    object with one upload (it appears whole or not at all)."""
    with storage_errors("write the state", url):
        fs, path = resolve(url, storage_options=storage_options)
        if isinstance(fs, LocalFileSystem):
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with whole_file(fs, path) as out:
            pq.write_table(state_table(entries), out, compression="zstd")


class RunState:
    """The state of one run: the previous decisions it skips by, and the new ones it saves."""

    def __init__(self, url: str, storage_options: dict[str, Any], inputs: Sequence[str],
                 options: JobOptions) -> None:
        self.url, self.storage_options = url, storage_options
        self.previous, self._untidy = read_state_tidied(url, storage_options)
        self._found = bool(self.previous)  # else written at the end even when nothing is decided
        self.roots = tuple(root_key(input_root(raw, storage_options)) for raw in inputs)
        self.key = run_key(options)
        # --force and --verify-existing ask for every file to be opened; their outcomes are saved.
        self.skipping = not (options.force or options.verify_existing)
        self.saving = not options.dry_run
        self.started = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        self.listed: dict[str, tuple[InputFile, str | None]] = {}  # by the file's URL
        self.listed_keys: set[str | None] = set()
        self.decided: dict[str, Entry] = {}
        self._since_saved, self._saved_at = 0, time.monotonic()

    def split(self, targets: Sequence[tuple[InputFile, str | None]]
              ) -> tuple[list[tuple[InputFile, str | None]], list[dict[str, Any]]]:
        """The (file, output) pairs to process, and the records of those the state settles."""
        todo, unchanged = [], []
        for file, output in targets:
            record = self.skip(file, output)
            if record is None:
                todo.append((file, output))
            else:
                unchanged.append(record)
        return todo, unchanged

    def skip(self, file: InputFile, output: str | None) -> dict[str, Any] | None:
        """Note `file` as listed; the record saying it is unchanged when the state settles it,
        else None (it is to be processed)."""
        self.listed[file.url] = (file, output)
        key = state_key(file.url)
        self.listed_keys.add(key)
        entry = self.previous.get(str(key))
        if self.skipping and entry is not None and self._settles(entry, file, output):
            return unchanged_record(file, output, entry)
        return None

    def _settles(self, entry: Entry, file: InputFile, output: str | None) -> bool:
        return settles(entry, file, output, self.key)

    def decide(self, record: dict[str, Any]) -> None:
        """Take a processed file's record; write the state when a checkpoint is due."""
        self.decide_all([record])
        if self.due():
            self.checkpoint()

    def due(self) -> bool:
        """Whether CHECKPOINT_FILES decisions or CHECKPOINT_SECONDS have passed since the last write."""
        return self._since_saved >= CHECKPOINT_FILES or time.monotonic() - self._saved_at >= CHECKPOINT_SECONDS

    def decide_all(self, records: Iterable[dict[str, Any]]) -> None:
        """Take processed files' records, writing nothing yet."""
        for record in records:
            self._note(record)

    def _note(self, record: dict[str, Any]) -> None:
        listed = self.listed.get(record["path"])
        if listed is None or record["status"] == Status.UNCHANGED:
            return
        file, output = listed
        self.decided[str(state_key(file.url))] = decided_entry(file, output, record, self.key, self.started)
        self._since_saved += 1

    def checkpoint(self) -> None:
        """Write what is decided so far over the previous state (nothing dropped yet). A failure
        is a warning: the run goes on, and the end tries again."""
        if not self.saving or not self._since_saved:
            return
        try:
            write_state({**self.previous, **self.decided}.values(), self.url, self.storage_options)
        except PageIndexError as err:
            log.warning("pageindex: warning: %s: state checkpoint not written: %s", self.url, err)
        self._since_saved, self._saved_at = 0, time.monotonic()

    def save(self) -> None:
        """Write the state at the end of the run: records of files gone from under this run's
        inputs are dropped, those of other inputs' files kept. Raises StorageError."""
        if not self.saving:
            return
        kept = {path: e for path, e in self.previous.items()
                if path in self.listed_keys or not any(below(path, root) for root in self.roots)}
        if self.decided or len(kept) < len(self.previous) or not self._found or self._untidy:
            write_state({**kept, **self.decided}.values(), self.url, self.storage_options)


def settles(entry: Entry, file: InputFile, output: str | None, key: str) -> bool:
    """Whether `entry` settles `file` as listed now, under options `key` and this `output`."""
    return (file.version is not None and entry.version == file.version and entry.size == file.size
            and entry.status in SETTLED and entry.options == key and entry.output == state_key(output))


def decided_entry(file: InputFile, output: str | None, record: dict[str, Any], key: str,
                  started: datetime.datetime) -> Entry:
    """The state's entry for a processed file's record (a file rewritten in place: its new size
    and version)."""
    rewritten = output is None and record["status"] in (Status.INDEXED, Status.REPAIRED)
    return Entry(str(state_key(file.url)), record["bytes_out"] if rewritten else file.size,
                 record.get("version") if rewritten else file.version, str(record["status"]), key,
                 state_key(output), __version__, started)


def below(path: str, root: str) -> bool:
    """Whether `path` is `root` or lies below it."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def unchanged_record(file: InputFile, output: str | None, entry: Entry) -> dict[str, Any]:
    """The report record of a file the state settles: not opened, nothing read."""
    return {**failed_record(file, None, f"listed as the state recorded it on "
                                        f"{entry.decided_at:%Y-%m-%d %H:%M:%S} UTC: {entry.status}"),
            "status": Status.UNCHANGED, "output": output, "bytes_out": file.size}
