"""Iceberg tables (pageindex.table.iceberg, pageindex.job.lake): the job plans from the current
snapshot, writes indexed copies under new names and commits one snapshot per batch.

A SqlCatalog on SQLite, configured the pyiceberg way (PYICEBERG_CATALOG__* variables); racing
writers run inside the commit hook, between our reload and our commit, so each race is deterministic.
"""
from __future__ import annotations

import json
import posixpath
from collections import Counter
from types import SimpleNamespace
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyiceberg")
import pyiceberg.catalog  # noqa: E402
from pyiceberg.catalog import load_catalog  # noqa: E402
from pyiceberg.expressions import EqualTo, GreaterThanOrEqual  # noqa: E402
from pyiceberg.manifest import (  # noqa: E402
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestWriterV2,
)
from pyiceberg.table.snapshots import Operation  # noqa: E402
from pyiceberg.table.update.snapshot import _FastAppendFiles  # noqa: E402
from pyiceberg.transforms import IdentityTransform  # noqa: E402
from pyiceberg.utils.config import Config  # noqa: E402

from pageindex.errors import UnsupportedFileError  # noqa: E402
from pageindex.io.storage import resolve  # noqa: E402
from pageindex.job import lake  # noqa: E402
from pageindex.job.process import JobOptions, process_file  # noqa: E402
from pageindex.job.spark import main  # noqa: E402
from pageindex.retrofit import Status  # noqa: E402
from pageindex.table import iceberg  # noqa: E402
from pageindex.table.replacement import Replacement  # noqa: E402
from tests.helpers import s3 as s3h  # noqa: E402
from tests.helpers.duckdb_lake import duckdb_scan  # noqa: E402
from tests.helpers.fault_proxy import FaultProxy  # noqa: E402
from tests.helpers.lakes import check_rerun_records  # noqa: E402
from tests.helpers.report_parts import report_records
from tests.helpers.table_commits import commit_records, settled  # noqa: E402

NAME = "lake.db.t"


def _rows(first: int, n: int) -> pa.Table:
    return pa.table({"p": [("a", "b", "c d")[i % 3] for i in range(first, first + n)],
                     "id": pa.array(range(first, first + n), pa.int64()),
                     "s": [f"s{i % 37:03d}" for i in range(first, first + n)]})


def make_catalog(monkeypatch, tmp_path, warehouse: str, **properties: str):
    """The catalog `lake` with the namespace `db`, configured the way users do."""
    settings = {"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": warehouse, **properties}
    for key, value in settings.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__LAKE__{key.upper()}", value)
    monkeypatch.setattr(pyiceberg.catalog, "_ENV_CONFIG", Config())  # pyiceberg reads them at import
    catalog = load_catalog("lake")
    catalog.create_namespace("db")
    return catalog


def make_table(monkeypatch, tmp_path, warehouse: str, **properties: str):
    """A partitioned table with four snapshots: two appends, a delete (files rewritten), an append."""
    catalog = make_catalog(monkeypatch, tmp_path, warehouse, **properties)
    schema = _rows(0, 1).schema
    t = catalog.create_table("db.t", schema=schema)
    field = t.schema().find_field("p")
    with t.update_spec() as spec:
        spec.add_field(field.name, IdentityTransform(), "p")
    t.append(_rows(0, 3000))
    t.append(_rows(3000, 900))
    t.delete(GreaterThanOrEqual("id", 3500))
    t.append(_rows(5000, 600))
    return t


def _s3_settings(endpoint: str) -> dict[str, str]:
    return {"s3__endpoint": endpoint, "s3__access-key-id": s3h.ACCESS_KEY,
            "s3__secret-access-key": s3h.SECRET_KEY, "s3__region": s3h.REGION}


def s3_table(monkeypatch, tmp_path, endpoint: str, bucket: str):
    """make_table with its warehouse in `bucket` on the moto server at `endpoint`."""
    return make_table(monkeypatch, tmp_path, f"s3://{bucket}/warehouse", **_s3_settings(endpoint))


@pytest.fixture
def table(tmp_path, monkeypatch):
    return make_table(monkeypatch, tmp_path, f"file://{tmp_path}/warehouse")


def load():
    return iceberg.load_table(NAME)


def rows(snapshot_id: int | None = None) -> list[tuple]:
    t = load().scan(snapshot_id=snapshot_id).to_arrow()
    return sorted(zip(*(t.column(c).to_pylist() for c in ("p", "id", "s"))))


def every_snapshot() -> dict[int, list[tuple]]:
    return {s.snapshot_id: rows(s.snapshot_id) for s in load().snapshots()}


def assert_indexed(options: dict | None = None) -> None:
    for task in load().scan().plan_files():
        fs, path = resolve(task.file.file_path, None, options or {})
        with fs.open(path, "rb") as f:
            meta = pq.ParquetFile(f).metadata
        assert meta.num_row_groups
        for rg in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                chunk = meta.row_group(rg).column(c)
                assert chunk.has_offset_index and chunk.has_column_index, task.file.file_path


def retrofit_table(before_commit=None, options: dict | None = None):
    """The job's three steps without Spark: plan, write copies, commit."""
    run = lake.plan_iceberg(NAME, True, JobOptions(storage_options=options or {}))
    records = [process_file(f, run.options) for f in run.files]
    replacements = [Replacement(*run.planned[r["path"]], r["bytes_out"]) for r in records if r["status"] == Status.INDEXED]
    return run, records, iceberg.commit(NAME, replacements, before_commit)


def test_retrofit_commits_one_snapshot_of_copies(table):
    before = every_snapshot()
    first = load().current_snapshot().snapshot_id
    old_files = {task.file.file_path for task in load().scan().plan_files()}
    run, records, result = retrofit_table()
    assert run.version == first and len(run.files) == len(old_files) > 3
    assert result.attempts == 1 and set(result.replaced) == old_files and not result.changed
    current = load().current_snapshot()
    assert current.snapshot_id == result.version != first
    assert current.summary["pageindex"]
    new_files = {task.file.file_path for task in load().scan().plan_files()}
    assert not new_files & old_files and all(".pageindex-" in f for f in new_files)
    assert_indexed()
    assert rows() == before[first]
    for snapshot_id, expected in before.items():  # the old snapshots still read the old files
        assert rows(snapshot_id) == expected
    assert retrofit_table()[2].version is None  # nothing left to do


def test_retrofit_on_s3(s3_server, s3_bucket, tmp_path, monkeypatch):
    s3_table(monkeypatch, tmp_path, s3_server, s3_bucket)
    before = every_snapshot()
    first = load().current_snapshot().snapshot_id
    options = s3h.storage_options(s3_server)
    run, records, result = retrofit_table(options=options)
    assert len(result.replaced) == len(run.files) > 3 and result.version != first
    assert_indexed(options)
    assert rows() == before[first]
    for snapshot_id, expected in before.items():
        assert rows(snapshot_id) == expected
    assert retrofit_table(options=options)[2].version is None


def _job_steps(options: dict, **more) -> dict[str, dict]:
    """The job's steps without Spark: plan, write copies, commit, record the run; the records by path."""
    run = lake.plan_iceberg(NAME, True, JobOptions(storage_options=options, **more))
    records, _ = commit_records(run, [process_file(f, run.options) for f in run.files], 1000)
    lake.remember(run, settled(records))
    return {r["path"]: r for r in records}


def _data_reads(proxy: FaultProxy) -> set[str]:
    """The data files the requests since the proxy's last reset opened (a HEAD or a GET)."""
    return {f"s3:/{unquote(r.path)}" for r in proxy.log
            if r.operation in ("GetObject", "HeadObject") and r.path.endswith(".parquet")}


def test_rerun_after_two_appends_reads_only_the_appended_files(s3_server, s3_bucket, tmp_path, monkeypatch):
    """On S3, the catalog and the job both behind the counting proxy: the rerun knows the copies
    from their names in the manifests, sends no request for them, and indexes the appended files."""
    with FaultProxy(s3_server) as proxy:
        s3_table(monkeypatch, tmp_path, proxy.endpoint, s3_bucket)
        options = s3h.storage_options(proxy.endpoint)
        assert {r["status"] for r in _job_steps(options).values()} == {Status.INDEXED}
        copies = {task.file.file_path for task in load().scan().plan_files()}
        load().append(_rows(9000, 300))  # another writer's two appends
        load().append(_rows(9500, 300))
        appended = {task.file.file_path for task in load().scan().plan_files()} - copies
        assert len(appended) == 6 and copies
        expected = rows()
        proxy.reset()
        second = _job_steps(options)
        assert _data_reads(proxy) == appended  # not one request for a copy
        check_rerun_records(second, copies, appended)
        assert rows() == expected
        assert_indexed(options)


def test_other_options_and_force_open_the_copies(table):
    _job_steps({})
    expected, snapshot = rows(), load().current_snapshot().snapshot_id
    assert load().current_snapshot().summary["pageindex.options"] == "truncate_length=64"
    assert {r["reason"] for r in _job_steps({}).values()} == {lake.KNOWN_INDEXED}
    run = lake.plan_iceberg(NAME, True, JobOptions(trust_page_stats=True))
    assert len(run.files) > 3 and not run.skipped
    run = lake.plan_iceberg(NAME, True, JobOptions(force=True))
    records, _ = commit_records(run, [process_file(f, run.options) for f in run.files], 1000)
    assert len(records) == len(run.files) and {r["status"] for r in records} == {Status.INDEXED}
    assert load().current_snapshot().snapshot_id != snapshot
    assert rows() == expected


# --------------------------------------------------------------------------- reruns from the last run


def add_indexed(first: int, files: int, options: dict | None = None) -> set[str]:
    """Files another writer wrote with page indexes (as Spark 4 and parquet-java 1.13+ do), added
    below the table location as one snapshot (pyiceberg's add_files); their paths."""
    t = load()
    paths = [f"{t.location()}/data/indexed-{first + i * 100}.parquet" for i in range(files)]
    for i, path in enumerate(paths):
        fs, local = resolve(path, None, options or {})
        fs.makedirs(posixpath.dirname(local), exist_ok=True)
        with fs.open(local, "wb") as f:
            pq.write_table(_rows(first + i * 100, 100), f, write_page_index=True, data_page_size=512)
    t.add_files(paths)
    return set(paths)


def _empty_table(catalog) -> None:
    catalog.create_table("db.t", schema=_rows(0, 1).schema)


def opened(**options) -> set[str]:
    """The files a run with these options would open (its plan's files)."""
    return {f.url for f in lake.plan_iceberg(NAME, True, JobOptions(**options)).files}


def every_file() -> set[str]:
    return {task.file.file_path for task in load().scan().plan_files()}


def test_rerun_of_a_table_its_writer_indexed_opens_only_the_appended_files(s3_server, s3_bucket, tmp_path,
                                                                           monkeypatch):
    """Files their writer indexed: the first run opens them, finds them indexed, commits nothing
    and records the snapshot it planned from below the table location. After two appends the
    rerun reads manifests, not one earlier data file, and opens only the appended files; the run
    after that opens nothing; --verify-existing opens them all."""
    with FaultProxy(s3_server) as proxy:
        options = s3h.storage_options(proxy.endpoint)
        _empty_table(make_catalog(monkeypatch, tmp_path, f"s3://{s3_bucket}/warehouse", **_s3_settings(proxy.endpoint)))
        earlier = add_indexed(0, 3, options) | add_indexed(300, 3, options)
        planned_from = load().current_snapshot().snapshot_id
        first = _job_steps(options)
        assert set(first) == earlier and {r["status"] for r in first.values()} == {Status.ALREADY_INDEXED}
        assert load().current_snapshot().snapshot_id == planned_from, "nothing committed"
        fs, record = resolve(f"{load().location()}/_pageindex/last-run.json", None, options)
        assert json.loads(fs.cat_file(record))["version"] == planned_from
        indexed_appended = add_indexed(600, 3, options)  # another writer's two appends: one indexed,
        load().append(_rows(900, 300))  # one by pyiceberg, which writes no page index
        appended = {task.file.file_path for task in load().scan().plan_files()} - earlier
        plain = appended - indexed_appended
        assert len(indexed_appended) == 3 and plain
        expected = rows()
        now = load().current_snapshot()
        manifests = {now.manifest_list} | {m.manifest_path for m in now.manifests(load().io)}
        proxy.reset()
        second = _job_steps(options)
        assert _data_reads(proxy) == appended
        assert not {f"s3:/{unquote(r.path)}" for r in proxy.log} & earlier
        assert set(second) == earlier | appended
        for path in earlier:
            assert second[path]["status"] == Status.UNCHANGED and second[path]["bytes_read"] == 0
            assert second[path]["reason"] == lake.SEEN.format(version=f"snapshot {planned_from}")
        reads = Counter(f"s3:/{unquote(r.path)}" for r in proxy.log if r.operation == "GetObject")
        counts = {reads[name] for name in manifests}  # as many requests each: none is read again
        assert len(counts) == 1 and 0 not in counts, counts
        assert {second[p]["status"] for p in indexed_appended} == {Status.ALREADY_INDEXED}
        assert {second[p]["status"] for p in plain} == {Status.INDEXED}
        assert rows() == expected
        assert_indexed(options)
        proxy.reset()
        third = _job_steps(options)  # nothing new but the copies, known from their names
        assert not _data_reads(proxy)
        copies = {p for p, r in third.items() if r["reason"] == lake.KNOWN_INDEXED}
        assert len(copies) == len(plain) and {r["status"] for p, r in third.items()
                                              if p not in copies} == {Status.UNCHANGED}
        proxy.reset()
        verified = _job_steps(options, verify_existing=True)
        assert {r["status"] for r in verified.values()} == {Status.ALREADY_INDEXED}
        assert _data_reads(proxy) == set(verified) == earlier | indexed_appended | copies
        assert rows() == expected


def test_other_options_force_a_rollback_and_an_expired_snapshot_open_every_file(tmp_path, monkeypatch):
    """What the last run recorded spares opening only under the same options, without --force or
    --verify-existing, while its snapshot is still an ancestor of the current one; a dry run or a
    run with a failed file records nothing."""
    _empty_table(make_catalog(monkeypatch, tmp_path, f"file://{tmp_path}/warehouse"))
    earlier = add_indexed(0, 3)
    assert opened() == earlier
    _job_steps({})
    first = load().current_snapshot().snapshot_id
    assert opened() == set()
    for more in ({"truncate_length": 16}, {"force": True}, {"verify_existing": True}):
        assert opened(**more) == earlier, more
    appended = add_indexed(300, 3)
    assert opened() == appended
    _job_steps({}, dry_run=True)
    assert opened() == appended
    run = lake.plan_iceberg(NAME, True, JobOptions())
    records = [process_file(f, run.options) for f in run.files]
    lake.remember(run, settled([{**records[0], "status": Status.FAILED}, *records[1:]]))
    assert opened() == appended
    lake.remember(run, settled(records))
    assert opened() == set()
    load().manage_snapshots().rollback_to_snapshot(first).commit()  # the recorded snapshot's parent
    assert opened() == every_file() == earlier
    _job_steps({})
    newest = add_indexed(600, 3)
    assert opened() == newest
    load().maintenance.expire_snapshots().by_id(first).commit()  # recorded by the run after the rollback
    assert opened() == every_file() == earlier | newest


def test_job_commits_in_batches(spark, table, tmp_path):
    first = load().current_snapshot().snapshot_id
    expected = rows()
    files = len(list(load().scan().plan_files()))
    report = tmp_path / "report.jsonl"

    def run_job():
        assert main(["--iceberg-table", NAME, "--in-place", "--commit-batch-files", "4",
                     "--report", str(report)], spark=spark) == 0
        return report_records(report)

    records = run_job()
    snapshots = [s.snapshot_id for s in load().snapshots()]
    ours = snapshots[snapshots.index(first) + 1:]
    assert len(ours) == -(-files // 4)
    assert {r["table_version"] for r in records} == set(ours)
    assert rows() == expected
    assert_indexed()
    run_job()
    assert [s.snapshot_id for s in load().snapshots()] == snapshots


def test_iceberg_table_needs_in_place(spark, table, tmp_path):
    assert main(["--iceberg-table", NAME, "--output", str(tmp_path / "o")], spark=spark) == 2
    assert main(["--iceberg-table", "lake.nope", "--in-place"], spark=spark) == 2


def data_files() -> set[str]:
    return {task.file.file_path.rsplit("/", 1)[1] for task in load().scan().plan_files()}


@pytest.mark.slow  # the first run installs .venv-duckdb
@pytest.mark.parametrize("on_s3", [False, pytest.param(True, marks=pytest.mark.s3)], ids=["local", "s3"])
def test_duckdb_iceberg_scan_reads_the_retrofitted_files(duckdb_python, tmp_path, monkeypatch, request, on_s3):
    """iceberg_scan on the current metadata returns the same rows from the indexed copies; on the
    metadata of the snapshot before the retrofit, the same rows from the old files."""
    endpoint = request.getfixturevalue("s3_server") if on_s3 else None
    if on_s3:
        s3_table(monkeypatch, tmp_path, endpoint, request.getfixturevalue("s3_bucket"))
    else:
        make_table(monkeypatch, tmp_path, f"file://{tmp_path}/warehouse")
    options = s3h.storage_options(endpoint) if on_s3 else None

    def scan(metadata: str):
        return duckdb_scan(duckdb_python, "iceberg_scan", metadata, ("p", "id", "s"), endpoint)

    expected, old_files = rows(), data_files()
    old_metadata = load().metadata_location
    assert scan(old_metadata) == (expected, old_files)
    assert retrofit_table(options=options)[2].version is not None
    new_metadata = load().metadata_location
    assert new_metadata != old_metadata
    new_files = data_files()
    assert all(".pageindex-" in f for f in new_files) and not new_files & old_files
    assert scan(new_metadata) == (expected, new_files)
    assert scan(old_metadata) == (expected, old_files)


# --------------------------------------------------------------------------- races

def _append():
    load().append(_rows(9000, 300))


def _delete():
    load().delete("p = 'a'")


def _overwrite():
    load().overwrite(_rows(7000, 50))


def _compact():
    """pyiceberg 0.12 has no rewrite_data_files; a compaction is a commit deleting data files and
    adding new ones with the same rows, which an overwrite of partition a with its own rows is."""
    t = load()
    t.overwrite(t.scan(row_filter=EqualTo("p", "a")).to_arrow(), overwrite_filter=EqualTo("p", "a"))


def _second_retrofit():
    assert retrofit_table()[2].version is not None


@pytest.mark.parametrize("race", [_append, _delete, _overwrite, _compact, _second_retrofit])
def test_concurrent_writer(table, race):
    fired = []
    expected: list[tuple] = []
    original = rows()

    def before_commit(attempt):
        if not fired:
            fired.append(attempt)
            race()
            expected.extend(rows())

    run, records, result = retrofit_table(before_commit)
    assert result.attempts == 2  # the race failed our first attempt; we reloaded
    assert rows() == expected  # no row lost, none duplicated
    current = {task.file.file_path for task in load().scan().plan_files()}
    for path in [*result.replaced, *result.changed]:
        assert path not in current
    assert all(result.changed.values())
    assert len(result.replaced) + len(result.changed) == len(run.files)
    assert bool(result.changed) == (race is not _append)
    if race is _second_retrofit:
        assert not result.replaced
    if race is _compact:  # only partition a's files were rewritten: the others are still ours
        assert expected == original
        assert result.changed and result.replaced
        assert all("/p=a/" in path for path in result.changed)
        assert not any("/p=a/" in path for path in result.replaced)
    assert {run.planned[path][1] for path in result.replaced} <= current
    if race is _second_retrofit:
        assert_indexed()


# --------------------------------------------------------------------------- delete files

def _entry(path: str, content=DataFileContent.DATA, seq: int = 1, low: str | None = None,
           high: str | None = None, partition=("a",)):
    bounds = {iceberg.POSITION_DELETE_FILE_PATH_ID: (low or "").encode()} if low else {}
    upper = {iceberg.POSITION_DELETE_FILE_PATH_ID: (high or "").encode()} if high else {}
    return SimpleNamespace(sequence_number=seq, data_file=SimpleNamespace(
        file_path=path, content=content, spec_id=0, partition=partition, lower_bounds=bounds, upper_bounds=upper))


def test_delete_files_that_apply_keep_a_file_out():
    data = _entry("s3://b/t/data/x.parquet", seq=2)
    pos = DataFileContent.POSITION_DELETES
    eq = DataFileContent.EQUALITY_DELETES
    applies = iceberg._applying_delete
    assert applies(data, [_entry("d1", pos, 2, "s3://b/t/data/x.parquet", "s3://b/t/data/x.parquet")])
    assert applies(data, [_entry("d2", pos, 3)])  # no bounds: it may name the file
    assert not applies(data, [_entry("d3", pos, 3, "s3://b/t/data/y", "s3://b/t/data/z")])
    assert not applies(data, [_entry("d4", pos, 1)])  # older than the data file
    assert not applies(data, [_entry("d5", pos, 3, partition=("b",))])
    assert applies(data, [_entry("d6", eq, 3)])
    assert not applies(data, [_entry("d7", eq, 2)])  # equality deletes need a higher sequence number


# The Iceberg spec's reserved field id of a position delete file's `pos` column.
POSITION_DELETE_POS_ID = 2147483545


class _DeleteManifestWriter(ManifestWriterV2):
    """pyiceberg 0.12 writes only data manifests: this one is marked as holding delete files."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


def add_position_deletes(data_file, positions: list[int]) -> str:
    """Commit a real position delete file for `data_file` (a local table) through pyiceberg's own
    snapshot producer, which its public API cannot do: a delete manifest added to a DELETE snapshot."""
    path = data_file.file_path.replace(".parquet", "-deletes.parquet")
    ids = {"file_path": iceberg.POSITION_DELETE_FILE_PATH_ID, "pos": POSITION_DELETE_POS_ID}
    schema = pa.schema([pa.field("file_path", pa.string(), False), pa.field("pos", pa.int64(), False)])
    schema = pa.schema([f.with_metadata({b"PARQUET:field_id": str(ids[f.name]).encode()}) for f in schema])
    fs, local = resolve(path, None, {})
    with fs.open(local, "wb") as f:
        pq.write_table(pa.table({"file_path": [data_file.file_path] * len(positions), "pos": positions}, schema), f)
    bound = {iceberg.POSITION_DELETE_FILE_PATH_ID: data_file.file_path.encode()}
    delete = DataFile.from_args(content=DataFileContent.POSITION_DELETES, file_path=path, file_format=FileFormat.PARQUET,
                                partition=data_file.partition, record_count=len(positions),
                                file_size_in_bytes=fs.size(local), lower_bounds=bound, upper_bounds=bound)
    delete.spec_id = data_file.spec_id
    table = load()
    transaction = table.transaction()
    producer = _FastAppendFiles(operation=Operation.DELETE, transaction=transaction, io=table.io)
    with _DeleteManifestWriter(table.specs()[data_file.spec_id], table.schema(), producer.new_manifest_output(),
                               producer._snapshot_id, producer._compression) as writer:
        writer.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=producer._snapshot_id,
                                           sequence_number=None, file_sequence_number=None, data_file=delete))
    manifest = writer.to_manifest_file()
    producer._process_manifests = lambda manifests: [*manifests, manifest]
    producer.commit()
    transaction.commit_transaction()
    return path


def test_a_file_with_a_real_position_delete_file_is_left_alone(table):
    before = rows()
    target = min((task.file for task in load().scan().plan_files()), key=lambda f: f.file_path)
    delete_path = add_position_deletes(target, [0, 1, 2])
    after_delete = rows()
    assert len(after_delete) == len(before) - 3  # pyiceberg's own scan honours the delete file
    run, records, result = retrofit_table()
    [skipped] = run.skipped
    assert skipped["path"] == target.file_path and skipped["status"] == Status.SKIPPED
    assert delete_path in skipped["reason"]
    assert target.file_path not in result.replaced and result.replaced and not result.changed
    tasks = {task.file.file_path: task for task in load().scan().plan_files()}
    assert [d.file_path for d in tasks[target.file_path].delete_files] == [delete_path]
    assert rows() == after_delete


def remove_delete_files() -> None:
    """A commit that drops the table's delete manifests, the data files staying (as a maintenance
    job removing delete files that no longer apply would), through pyiceberg's snapshot producer."""
    table = load()
    transaction = table.transaction()
    producer = _FastAppendFiles(operation=Operation.DELETE, transaction=transaction, io=table.io)
    producer._process_manifests = lambda manifests: [m for m in manifests if m.content != ManifestContent.DELETES]
    producer.commit()
    transaction.commit_transaction()


def test_a_delete_file_removed_since_the_last_run_opens_every_file(tmp_path, monkeypatch):
    """A file its delete file kept out when the last run was recorded may be indexable once that
    delete file is gone, though the recorded snapshot had it: every file is opened again."""
    _empty_table(make_catalog(monkeypatch, tmp_path, f"file://{tmp_path}/warehouse"))
    earlier = add_indexed(0, 3)
    target = min((task.file for task in load().scan().plan_files()), key=lambda f: f.file_path)
    add_position_deletes(target, [0, 1])
    records = _job_steps({})
    assert records[target.file_path]["status"] == Status.SKIPPED
    assert {r["status"] for p, r in records.items() if p != target.file_path} == {Status.ALREADY_INDEXED}
    assert opened() == set()
    remove_delete_files()
    assert not next(t for t in load().scan().plan_files() if t.file.file_path == target.file_path).delete_files
    assert opened() == every_file() == earlier


def test_format_v3_is_refused(tmp_path):
    v3 = SimpleNamespace(format_version=3)
    with pytest.raises(UnsupportedFileError, match="v3"):
        iceberg.snapshot(v3, NAME)
