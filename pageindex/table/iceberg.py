"""Iceberg: a table's current data files from its catalog (and which an earlier snapshot lacked),
and snapshots that swap them for copies.

A batch commits as one snapshot deleting each old DataFile and adding its copy, retried by us.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Callable

from pageindex.errors import UnsupportedFileError, UsageError
from pageindex.table.replacement import COMMIT_ATTEMPTS, CommitResult, Replacement, drop_changed, gave_up
from pageindex.version import __version__

SNAPSHOT_PROPERTY = "pageindex"
# The Iceberg spec's reserved field id of a position delete file's `file_path` column: its
# bounds say which data files the delete file can name.
POSITION_DELETE_FILE_PATH_ID = 2147483546
# In-memory DataFiles have the v2 layout whatever the table's version (pyiceberg reads into it).
_DATA_FILE_LAYOUT = 2


@dataclass(frozen=True)
class DataEntry:
    """One data file of the current snapshot, as its manifest entry records it."""

    data_file: Any  # pyiceberg.manifest.DataFile, copied into the new snapshot but for path and size
    sequence_number: int
    deleted_by: str | None  # why a delete file applies to it, if one does

    @property
    def path(self) -> str:
        return self.data_file.file_path

    @property
    def size(self) -> int:
        return self.data_file.file_size_in_bytes


@dataclass(frozen=True)
class Manifest:
    """One manifest of a snapshot: the files it holds live (added or existing)."""

    path: str
    data: bool  # data files; else delete files
    live: frozenset[str]


@dataclass(frozen=True)
class Snapshot:
    name: str
    snapshot_id: int | None  # None: the table has no snapshot yet
    location: str
    files: dict[str, DataEntry]
    manifests: tuple[Manifest, ...]  # what added_since compares with an earlier snapshot


def load_table(name: str) -> Any:
    """`CATALOG.NAMESPACE.TABLE` from the user's pyiceberg configuration (.pyiceberg.yaml or the
    PYICEBERG_CATALOG__<name>__... variables): committing needs the table's own catalog."""
    try:
        from pyiceberg.catalog import load_catalog
        from pyiceberg.exceptions import NoSuchTableError
    except ImportError:
        raise UnsupportedFileError("committing to an Iceberg table needs the pyiceberg package "
                                   "(pip install 'pageindex[iceberg]')", path=name) from None
    catalog, _, identifier = name.partition(".")
    if "." not in identifier:
        raise UsageError("an Iceberg table is named CATALOG.NAMESPACE.TABLE", path=name)
    try:
        return load_catalog(catalog).load_table(identifier)
    except NoSuchTableError as err:
        raise UsageError(f"no such Iceberg table: {err}", path=name) from err
    except ValueError as err:  # pyiceberg's word for a catalog it has no configuration for
        raise UsageError(f"the Iceberg catalog {catalog!r} cannot be loaded: {err}", path=name) from err


def snapshot(table: Any, name: str) -> Snapshot:
    """The current snapshot's data files, each with the delete files that apply to it."""
    if table.format_version >= 3:
        raise UnsupportedFileError("Iceberg format v3 tables are refused until row lineage "
                                   "(first_row_id) is carried over to the new files", path=name)
    from pyiceberg.manifest import ManifestContent

    current = table.current_snapshot()
    if current is None:
        return Snapshot(name, None, table.location(), {}, ())
    data, deletes, manifests = [], [], []
    for manifest in current.manifests(table.io):
        entries = manifest.fetch_manifest_entry(table.io, discard_deleted=True)
        is_data = manifest.content == ManifestContent.DATA
        (data if is_data else deletes).extend(entries)
        manifests.append(Manifest(manifest.manifest_path, is_data, frozenset(e.data_file.file_path for e in entries)))
    files = {e.data_file.file_path: DataEntry(e.data_file, e.sequence_number, _applying_delete(e, deletes))
             for e in data}
    return Snapshot(name, current.snapshot_id, table.location(), files, tuple(manifests))


def added_since(table: Any, now: Snapshot, since: int) -> set[str] | None:
    """The paths of the data files of `now` (the table's snapshot, as `snapshot` read it) that
    snapshot `since` did not have, from manifests only: of `since`, those `now` does not share
    (a manifest's live entries are live in every snapshot listing it). None when every file is
    to be opened: `since` expired, not an ancestor of `now` (the table rolled back or replaced),
    one of its manifests gone, or one of its delete files removed since (a file that delete kept
    out may be indexable now)."""
    from pyiceberg.table.snapshots import ancestors_of

    current = table.snapshot_by_id(now.snapshot_id) if now.snapshot_id is not None else None
    then = table.snapshot_by_id(since)
    if current is None or then is None or all(s.snapshot_id != since for s in ancestors_of(current, table.metadata)):
        return None
    try:
        then_manifests = then.manifests(table.io)
        then_data, then_deletes = _live_paths(table.io, then_manifests, {m.path for m in now.manifests})
    except FileNotFoundError:
        return None
    then_paths = {m.manifest_path for m in then_manifests}
    new = [m for m in now.manifests if m.path not in then_paths]
    now_data = set().union(*(m.live for m in new if m.data))
    now_deletes = set().union(*(m.live for m in new if not m.data))
    return None if then_deletes - now_deletes else now_data - then_data


def _live_paths(io: Any, manifests: list[Any], shared: set[str]) -> tuple[set[str], set[str]]:
    """The data and the delete files the manifests not in `shared` hold live (added or existing)."""
    from pyiceberg.manifest import ManifestContent

    data: set[str] = set()
    deletes: set[str] = set()
    for manifest in manifests:
        if manifest.manifest_path not in shared:
            paths = {e.data_file.file_path for e in manifest.fetch_manifest_entry(io, discard_deleted=True)}
            (data if manifest.content == ManifestContent.DATA else deletes).update(paths)
    return data, deletes


def _applying_delete(entry: Any, deletes: list[Any]) -> str | None:
    """Why a delete file may apply to the data file of `entry` (conservatively: a file kept out
    wrongly only stays without an index). A position delete names the old path, which the copy
    does not have; an equality delete applies to lower sequence numbers, and the copy gets a new
    one: either way the deleted rows would come back."""
    from pyiceberg.manifest import DataFileContent

    data = entry.data_file
    for d in deletes:
        delete = d.data_file
        if delete.spec_id == data.spec_id and delete.partition != data.partition:
            continue
        if delete.content == DataFileContent.POSITION_DELETES and d.sequence_number >= entry.sequence_number:
            low = (delete.lower_bounds or {}).get(POSITION_DELETE_FILE_PATH_ID)
            high = (delete.upper_bounds or {}).get(POSITION_DELETE_FILE_PATH_ID)
            path = data.file_path.encode()
            if low is None or high is None or low <= path <= high:
                return f"the position delete file {delete.file_path} may delete rows of it (left as is)"
        if delete.content == DataFileContent.EQUALITY_DELETES and d.sequence_number > entry.sequence_number:
            return (f"the equality delete file {delete.file_path} applies to it, and would not "
                    "apply to a re-added copy (left as is)")
    return None


def copy_of(data_file: Any, path: str, size: int) -> Any:
    """The DataFile of the indexed copy: only the path and the size differ, since record counts,
    bounds, column sizes and split offsets all describe data bytes, which are unchanged."""
    from pyiceberg.manifest import DATA_FILE_TYPE, DataFile

    fields = {f.name: getattr(data_file, f.name) for f in DATA_FILE_TYPE[_DATA_FILE_LAYOUT].fields}
    new = DataFile.from_args(_table_format_version=_DATA_FILE_LAYOUT,
                             **{**fields, "file_path": path, "file_size_in_bytes": size})
    new.spec_id = data_file.spec_id
    return new


def commit(name: str, replacements: list[Replacement],
           before_commit: Callable[[int], None] | None = None, options: str = "") -> CommitResult:
    """Commit one snapshot replacing each still-current old file by its indexed copy; its summary
    records pageindex's version and `options` (the copies' index.marker.options_key).

    pyiceberg 0.12 has no public rewrite (REPLACE) operation, so this is its overwrite producer:
    delete_data_file(old) + append_data_file(copy). Its own retries validate concurrent commits
    (a file we delete must still exist and gain no delete file), but under the default
    serializable isolation any concurrently added data file fails ours too, even a harmless
    append: safe, over-strict. So on a failed commit we reload the table, drop the files that
    changed and try again. `before_commit` runs after each reload, before the attempt (tests
    interleave other writers there).
    """
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    pending = {r.old.path: r for r in replacements}
    changed: dict[str, str] = {}
    properties = {SNAPSHOT_PROPERTY: __version__, f"{SNAPSHOT_PROPERTY}.commit": uuid.uuid4().hex,
                  f"{SNAPSHOT_PROPERTY}.options": options}
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        table = load_table(name)
        current = snapshot(table, name)
        drop_changed(pending, current.files, changed, "recorded", attrgetter("deleted_by"))
        if not pending:
            return CommitResult(None, (), changed, attempt)
        if before_commit is not None:
            before_commit(attempt)
        try:
            transaction = table.transaction()
            with transaction.update_snapshot(snapshot_properties=properties).overwrite() as overwrite:
                for path, r in pending.items():
                    overwrite.delete_data_file(current.files[path].data_file)
                    overwrite.append_data_file(copy_of(current.files[path].data_file, r.new_path, r.new_size))
            transaction.commit_transaction()
        except (CommitFailedException, ValidationException):
            continue  # a concurrent commit: reload and recheck
        return CommitResult(overwrite.snapshot_id, tuple(sorted(pending)), changed, attempt)
    raise gave_up(name)
