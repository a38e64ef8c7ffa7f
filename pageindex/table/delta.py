"""Delta Lake: a snapshot's active data files from the log, and commits that swap them for copies.

A batch commits as one transaction of remove + add actions with dataChange false, retried by us.
"""
from __future__ import annotations

import json
import os
import posixpath
import re
import tempfile
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from pageindex.errors import UnsupportedFileError, UsageError
from pageindex.io.confinement import escapes
from pageindex.io.storage import normalize_url, resolve
from pageindex.table.replacement import COMMIT_ATTEMPTS, CommitResult, Replacement, drop_changed, gave_up
from pageindex.version import __version__

LOG_DIR = "_delta_log"
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.\d{10}\.\d{10})?\.parquet$")
_V2_CHECKPOINT = re.compile(r"^\d{20}\.checkpoint\.[0-9a-fA-F-]{36}\.(?:json|parquet)$")
_COMMIT = re.compile(r"^(\d{20})\.json$")


@dataclass(frozen=True)
class DataFile:
    """One active file as the log's add action records it (path relative and URL-encoded)."""

    path: str
    size: int
    partition_values: dict[str, str | None]
    modification_time: int
    stats: str | None  # the log's JSON string, copied verbatim: the data does not change
    deletion_vector: bool


@dataclass(frozen=True)
class Snapshot:
    root: str
    version: int
    files: dict[str, DataFile]
    partition_columns: tuple[str, ...]


def is_table(root: str, storage_options: dict[str, Any]) -> bool:
    fs, path = resolve(root, None, storage_options)
    return fs.isdir(posixpath.join(path.rstrip("/"), LOG_DIR))


def delta_storage_options(storage_options: dict[str, Any]) -> dict[str, str]:
    """delta-rs's object-store settings for pageindex's fsspec ones (credentials otherwise from
    the environment, as for s3fs)."""
    client = storage_options.get("client_kwargs", {})
    out = {}
    if client.get("endpoint_url"):
        out["AWS_ENDPOINT_URL"] = client["endpoint_url"]
        if client["endpoint_url"].startswith("http://"):
            out["AWS_ALLOW_HTTP"] = "true"
    if client.get("region_name"):
        out["AWS_REGION"] = client["region_name"]
    if storage_options.get("key"):
        out["AWS_ACCESS_KEY_ID"] = storage_options["key"]
    if storage_options.get("secret"):
        out["AWS_SECRET_ACCESS_KEY"] = storage_options["secret"]
    return out


def file_url(root: str, path: str) -> str:
    """Where a logged path lives; the log URL-encodes paths relative to the table root. A path
    that leads outside the root, once decoded and normalised (`../x`, `%2E%2E/x`, `a/../../x`),
    is refused: its file is not the table's to change."""
    relative = unquote(path)
    if "://" in path or escapes(relative):
        raise UnsupportedFileError("the log names a file outside the table root (left as is)", path=path)
    return posixpath.join(normalize_url(root).rstrip("/"), posixpath.normpath(relative))


def open_table(root: str, storage_options: dict[str, Any]) -> Any:
    try:
        from deltalake import DeltaTable
    except ImportError:
        raise UnsupportedFileError("committing to a Delta table needs the deltalake package "
                                   "(pip install 'pageindex[delta]')", path=root) from None
    try:
        return DeltaTable(normalize_url(root), storage_options=delta_storage_options(storage_options))
    except Exception as err:  # noqa: BLE001 - deltalake raises its own hierarchy and OSError
        raise UsageError(f"a Delta table root ({LOG_DIR}/) that delta-rs cannot open: {err} "
                         "(its files are indexed only through its log, which must be readable)",
                         path=root) from err


# Protocol versions from which the protocol action lists table features explicitly.
_READER_FEATURES_FROM = 3
_WRITER_FEATURES_FROM = 7


def check_writable(table: Any, root: str) -> None:
    """Refuse, with delta-rs's own reason, a table it cannot commit to (writer features it lacks),
    before any copy is written. delta-rs checks features only when it commits, so it commits an
    empty transaction to a throwaway local table with the same protocol and metadata."""
    from deltalake import CommitProperties, DeltaTable
    from deltalake.exceptions import CommitFailedError, DeltaProtocolError

    versions, metadata = table.protocol(), table.metadata()
    protocol: dict[str, Any] = {"minReaderVersion": versions.min_reader_version,
                                "minWriterVersion": versions.min_writer_version}
    if versions.min_reader_version >= _READER_FEATURES_FROM:
        protocol["readerFeatures"] = versions.reader_features or []
    if versions.min_writer_version >= _WRITER_FEATURES_FROM:
        protocol["writerFeatures"] = versions.writer_features or []
    meta = {"id": metadata.id, "format": {"provider": "parquet", "options": {}},
            "schemaString": table.schema().to_json(), "partitionColumns": metadata.partition_columns,
            "configuration": metadata.configuration, "createdTime": metadata.created_time}
    with tempfile.TemporaryDirectory(prefix="pageindex-delta-probe-") as probe:
        os.mkdir(os.path.join(probe, LOG_DIR))
        with open(os.path.join(probe, LOG_DIR, f"{0:020d}.json"), "w") as f:
            f.write(json.dumps({"protocol": protocol}) + "\n" + json.dumps({"metaData": meta}) + "\n")
        try:
            twin = DeltaTable(probe)
            twin.create_write_transaction([], "append", twin.schema(), list(metadata.partition_columns),
                                          commit_properties=CommitProperties(max_commit_retries=0))
        except (CommitFailedError, DeltaProtocolError) as err:
            raise UnsupportedFileError(f"delta-rs cannot write this table: {err}", path=root) from err


def snapshot(table: Any, root: str, storage_options: dict[str, Any]) -> Snapshot:
    """The active files at the table's loaded version, replayed from the log itself because
    delta-rs exposes neither the raw stats string nor which files carry a deletion vector."""
    version = table.version()
    fs, path = resolve(root, None, storage_options)
    files = _replay(fs, posixpath.join(path.rstrip("/"), LOG_DIR), version)
    theirs = {unquote(p) for p in pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist()}
    if theirs != {unquote(p) for p in files}:
        raise UnsupportedFileError(f"the log at version {version} holds actions pageindex cannot "
                                   "replay (its active files differ from delta-rs's)", path=root)
    return Snapshot(root, version, files, tuple(table.metadata().partition_columns))


def _replay(fs: Any, log: str, version: int) -> dict[str, DataFile]:
    fs.invalidate_cache(log)
    names = [posixpath.basename(n) for n in fs.ls(log, detail=False)]
    if any(_V2_CHECKPOINT.match(n) for n in names):
        raise UnsupportedFileError("v2 checkpoints are not supported", path=log)
    checkpoints = [(int(m.group(1)), n) for n in names if (m := _CHECKPOINT.match(n))]
    start = max((v for v, _ in checkpoints if v <= version), default=-1)
    files: dict[str, DataFile] = {}
    for _, name in sorted(c for c in checkpoints if c[0] == start):
        with fs.open(posixpath.join(log, name), "rb") as f:
            adds = pq.read_table(f, columns=["add"]).column("add").to_pylist()
        for add in adds:
            if add:
                files[add["path"]] = _data_file(add)
    commits = sorted(int(m.group(1)) for n in names if (m := _COMMIT.match(n)))
    for v in (c for c in commits if start < c <= version):
        actions = _read_commit(fs, log, v)
        # Removes first: a deletion-vector update removes and re-adds one path in one commit.
        for action in actions:
            if "remove" in action:
                files.pop(action["remove"]["path"], None)
        for action in actions:
            if "add" in action:
                files[action["add"]["path"]] = _data_file(action["add"])
    return files


def _read_commit(fs: Any, log: str, version: int) -> list[dict[str, Any]]:
    with fs.open(posixpath.join(log, f"{version:020d}.json"), "rb") as f:
        return [json.loads(line) for line in f.read().decode().splitlines() if line.strip()]


def _data_file(add: dict[str, Any]) -> DataFile:
    values = add.get("partitionValues") or {}
    if isinstance(values, list):  # a checkpoint's map column reads as (key, value) pairs
        values = dict(values)
    return DataFile(add["path"], int(add["size"]), values, int(add.get("modificationTime") or 0),
                    add.get("stats"), bool(add.get("deletionVector")))


def _blocked_by(now: DataFile) -> str | None:
    return "it has a deletion vector now" if now.deletion_vector else None


def commit(root: str, storage_options: dict[str, Any], replacements: list[Replacement],
           before_commit: Callable[[int], None] | None = None, options: str = "") -> CommitResult:
    """Commit one transaction replacing each still-current old file by its indexed copy; its
    commitInfo records pageindex's version and `options` (the copies' index.marker.options_key).

    delta-rs's own retries committed a replacement next to a concurrent compaction or a second
    replacement of the same file (rows duplicated), so it gets no retries: any concurrent commit
    fails ours, and we reload, drop the files that changed and try again. `before_commit` runs
    after each reload, just before the attempt (tests interleave other writers there).
    """
    from deltalake import CommitProperties
    from deltalake.exceptions import CommitFailedError, DeltaProtocolError

    pending = {r.old.path: r for r in replacements}
    changed: dict[str, str] = {}
    tag = uuid.uuid4().hex
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        table = open_table(root, storage_options)
        current = snapshot(table, root, storage_options)
        drop_changed(pending, current.files, changed, "logged", _blocked_by)
        if not pending:
            return CommitResult(None, (), changed, attempt)
        if before_commit is not None:
            before_commit(attempt)
        properties = CommitProperties(max_commit_retries=0,
                                      custom_metadata={"pageindex": {"version": __version__, "commit": tag,
                                                                     "options": options}})
        try:
            table.create_write_transaction(_actions(pending.values()), "append", table.schema(),
                                           list(current.partition_columns), commit_properties=properties)
        except CommitFailedError as err:
            if open_table(root, storage_options).version() != current.version:
                continue  # a concurrent commit: reload and recheck
            raise UnsupportedFileError(f"delta-rs refused the commit: {err}", path=root) from err
        except DeltaProtocolError as err:
            raise UnsupportedFileError(f"delta-rs cannot write this table: {err}", path=root) from err
        return CommitResult(_committed_version(root, storage_options, current.version, tag),
                            tuple(sorted(pending)), changed, attempt)
    raise gave_up(root)


def _actions(replacements: Any) -> list[Any]:
    from deltalake.transaction import AddAction, RemoveAction

    now = int(time.time() * 1000)
    out: list[Any] = []
    # delta-rs URL-encodes the paths it is given: hand it decoded ones, or the remove matches no
    # file (and is accepted silently, leaving both old and new active).
    for r in replacements:
        out.append(RemoveAction(unquote(r.old.path), False, now, r.old.size, r.old.partition_values))
        out.append(AddAction(unquote(r.new_path), r.new_size, r.old.partition_values, now, False, r.old.stats))
    return out


def _committed_version(root: str, storage_options: dict[str, Any], read_version: int, tag: str) -> int:
    """The version our commit got: delta-rs does not return it, so find our tag in the log."""
    fs, path = resolve(root, None, storage_options)
    log = posixpath.join(path.rstrip("/"), LOG_DIR)
    fs.invalidate_cache(log)
    version = read_version + 1
    while True:
        actions = _read_commit(fs, log, version)
        if any(a.get("commitInfo", {}).get("pageindex", {}).get("commit") == tag for a in actions):
            return version
        version += 1
