"""Delta Lake tables (pageindex.table.delta, pageindex.job.lake): the job plans from the snapshot,
writes indexed copies under new names and commits remove + add with dataChange false.

Real deltalake tables on local disk and on the moto S3 server; racing writers run inside the
commit hook, between our reload of the log and our commit, so each interleaving is deterministic.
"""
from __future__ import annotations

import dataclasses
import json
import os
import struct
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

deltalake = pytest.importorskip("deltalake")
from deltalake import ColumnProperties, DeltaTable, QueryBuilder, WriterProperties, write_deltalake  # noqa: E402

from pageindex.errors import UnsupportedFileError  # noqa: E402
from pageindex.io.storage import resolve  # noqa: E402
from pageindex.job import lake  # noqa: E402
from pageindex.job.process import JobOptions, process_file  # noqa: E402
from pageindex.job.spark import main  # noqa: E402
from pageindex.retrofit import Status  # noqa: E402
from pageindex.table import delta  # noqa: E402
from pageindex.table.replacement import drop_changed  # noqa: E402
from tests.helpers import s3 as s3h  # noqa: E402
from tests.helpers.duckdb_lake import duckdb_scan  # noqa: E402
from tests.helpers.fault_proxy import FaultProxy  # noqa: E402
from tests.helpers.lakes import check_rerun_records  # noqa: E402
from tests.helpers.report_parts import report_records
from tests.helpers.table_commits import commit_records  # noqa: E402

# arrow-rs writes an OffsetIndex always and a ColumnIndex only with page statistics.
NO_COLUMN_INDEX = WriterProperties(data_page_row_count_limit=100, write_batch_size=100,
                                   default_column_properties=ColumnProperties(statistics_enabled="CHUNK"))


def _rows(first: int, n: int, parts: tuple[str, ...] = ("a", "b", "c d")) -> pa.Table:
    return pa.table({"p": [parts[i % len(parts)] for i in range(first, first + n)],
                     "id": pa.array(range(first, first + n), pa.int64()),
                     "s": [f"s{i % 37:03d}" for i in range(first, first + n)]})


def _delta(options: dict | None) -> dict:
    """deltalake's settings for the fsspec options every helper here takes."""
    return delta.delta_storage_options(options or {})


def make_table(root: str, options: dict | None = None) -> None:
    """Four versions: a partitioned write, an append, a delete (files rewritten), an append."""
    kw = dict(partition_by=["p"], writer_properties=NO_COLUMN_INDEX, storage_options=_delta(options))
    write_deltalake(root, _rows(0, 3000), **kw)
    write_deltalake(root, _rows(3000, 900), mode="append", **kw)
    DeltaTable(root, storage_options=_delta(options)).delete("id >= 100 and id < 200",
                                                     writer_properties=NO_COLUMN_INDEX)
    write_deltalake(root, _rows(5000, 600), mode="append", **kw)


def rows(root: str, version: int | None = None, options: dict | None = None) -> list[tuple]:
    """Through delta-rs's query engine, which applies deletion vectors (to_pyarrow_table refuses)."""
    dt = DeltaTable(root, version=version, storage_options=_delta(options))
    t = pa.table(QueryBuilder().register("t", dt).execute("select p, id, s from t"))
    return sorted(zip(*(t.column(c).to_pylist() for c in ("p", "id", "s"))))


def every_version(root: str, options: dict | None = None) -> dict[int, list[tuple]]:
    latest = DeltaTable(root, storage_options=_delta(options)).version()
    return {v: rows(root, v, options) for v in range(latest + 1)}


def log_actions(root: str, version: int, options: dict | None = None) -> list[dict]:
    fs, path = resolve(root, None, options)
    fs.invalidate_cache()
    with fs.open(f"{path}/_delta_log/{version:020d}.json", "rb") as f:
        return [json.loads(line) for line in f.read().decode().splitlines()]


def assert_indexed(root: str, options: dict | None = None) -> None:
    fs, _ = resolve(root, None, options)
    for uri in DeltaTable(root, storage_options=_delta(options)).file_uris():
        with fs.open(uri.replace("s3a://", "s3://"), "rb") as f:
            meta = pq.ParquetFile(f).metadata
        for rg in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                chunk = meta.row_group(rg).column(c)
                assert chunk.has_offset_index and chunk.has_column_index, uri


def retrofit_table(root: str, before_commit=None, batch: int = 1000, options: dict | None = None):
    """The job's three steps without Spark: plan, write copies, commit."""
    run = lake.plan(root, JobOptions(storage_options=options or {}))
    records = [process_file(f, run.options) for f in run.files]
    hook = {"before_commit": before_commit} if before_commit else {}
    replacements = [delta.Replacement(run.planned[r["path"]][0], run.planned[r["path"]][1], r["bytes_out"])
                    for r in records if r["status"] == Status.INDEXED]
    return run, records, delta.commit(root, run.options.storage_options, replacements[:batch], **hook)


def check_job(root: str, run_job, options: dict | None = None) -> None:
    before = every_version(root, options)
    first = max(before)
    files = len(DeltaTable(root, storage_options=_delta(options)).file_uris())
    assert files > 4
    report = run_job()
    latest = DeltaTable(root, storage_options=_delta(options)).version()
    assert latest == first + -(-files // 4)  # --commit-batch-files 4
    for version in range(first + 1, latest + 1):
        actions = log_actions(root, version, options)
        kinds = {k for a in actions for k in a} - {"commitInfo"}
        assert kinds == {"add", "remove"}
        assert all(a[k]["dataChange"] is False for a in actions for k in a if k != "commitInfo")
    assert_indexed(root, options)
    assert rows(root, options=options) == before[first]
    for version, expected in before.items():
        assert rows(root, version, options) == expected
    replaced = [r for r in report if r["table_version"] is not None]
    assert len(replaced) == len(DeltaTable(root, storage_options=_delta(options)).file_uris()) == files
    assert {r["table_version"] for r in replaced} == set(range(first + 1, latest + 1))
    run_job()  # nothing left to do: no commit
    assert DeltaTable(root, storage_options=_delta(options)).version() == latest


def test_job_replaces_every_file_through_the_log(spark, tmp_path):
    root = str(tmp_path / "t")
    make_table(root)
    report = tmp_path / "report.jsonl"

    def run_job():
        assert main(["--input", root, "--in-place", "--commit-batch-files", "4",
                     "--report", str(report)], spark=spark) == 0
        return report_records(report)

    check_job(root, run_job)


def test_job_on_s3(spark, s3_server, s3_bucket):
    # The workers may predate the moto fixture's AWS_* variables (as in test_job's s3_spark).
    spark.sparkContext.environment.update({k: os.environ[k] for k in s3h._ENV})
    root = f"s3://{s3_bucket}/lake/t"
    options = s3h.storage_options(s3_server)
    make_table(root, options)
    report = []

    def run_job():
        path = f"s3://{s3_bucket}/report.jsonl"
        assert main(["--input", root, "--in-place", "--commit-batch-files", "4",
                     "--s3-endpoint-url", s3_server, "--report", path], spark=spark) == 0
        fs, inner = resolve(path, None, options)
        report[:] = [json.loads(line) for part in fs.find(inner)  # a folder of parts
                     for line in fs.cat_file(part).decode().splitlines()]
        return report

    check_job(root, run_job, options)


def test_catalog_table_located_at_a_delta_root_commits_through_the_log(spark, tmp_path):
    """`--table db.tbl` in place: the catalog only gives the location (Spark has no Delta source
    here, so the table is registered as parquet); a Delta root there is retrofitted as --input."""
    root = str(tmp_path / "t")
    make_table(root)
    name = "default.pageindex_delta_events"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    # a schema given: Spark need not scan the files to infer one
    spark.sql(f"CREATE TABLE {name} (id BIGINT, s STRING, p STRING) USING parquet LOCATION '{root}'")
    before = DeltaTable(root).version()
    expected = rows(root)
    try:
        assert main(["--table", name, "--in-place"], spark=spark) == 0
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")
    assert DeltaTable(root).version() == before + 1
    assert {k for a in log_actions(root, before + 1) for k in a} == {"add", "remove", "commitInfo"}
    assert_indexed(root)
    assert rows(root) == expected


@pytest.mark.slow  # the first run installs .venv-duckdb
@pytest.mark.parametrize("on_s3", [False, pytest.param(True, marks=pytest.mark.s3)], ids=["local", "s3"])
def test_duckdb_delta_scan_reads_the_retrofitted_files(duckdb_python, tmp_path, request, on_s3):
    """DuckDB's delta_scan returns the same rows after the retrofit, read from the indexed copies."""
    endpoint = request.getfixturevalue("s3_server") if on_s3 else None
    root = f"s3://{request.getfixturevalue('s3_bucket')}/lake/t" if on_s3 else str(tmp_path / "t")
    options = s3h.storage_options(endpoint) if on_s3 else None
    make_table(root, options)
    expected = rows(root, options=options)
    before, old_files = duckdb_scan(duckdb_python, "delta_scan", root, ("p", "id", "s"), endpoint)
    assert before == expected
    assert old_files and not [f for f in old_files if ".pageindex-" in f]
    assert retrofit_table(root, options=options)[2].version is not None
    after, new_files = duckdb_scan(duckdb_python, "delta_scan", root, ("p", "id", "s"), endpoint)
    assert after == expected
    assert new_files == {uri.rsplit("/", 1)[1] for uri in DeltaTable(root, storage_options=_delta(options)).file_uris()}
    assert all(".pageindex-" in f for f in new_files)


def test_table_format_flag_needs_a_table_and_in_place(spark, tmp_path):
    (tmp_path / "plain").mkdir()
    pq.write_table(_rows(0, 10), tmp_path / "plain" / "x.parquet")
    assert main(["--input", str(tmp_path / "plain"), "--in-place", "--table-format", "delta"],
                spark=spark) == 2
    root = str(tmp_path / "t")
    make_table(root)
    assert main(["--input", root, "--output", str(tmp_path / "o"), "--table-format", "delta"],
                spark=spark) == 2


# --------------------------------------------------------------------------- races

def _append(root):
    write_deltalake(root, _rows(9000, 300), mode="append", partition_by=["p"])


def _delete(root):
    DeltaTable(root).delete("p = 'a'")


def _overwrite(root):
    write_deltalake(root, _rows(7000, 50), mode="overwrite", partition_by=["p"])


def _compact(root):
    DeltaTable(root).optimize.compact()


def _second_retrofit(root):
    assert retrofit_table(root)[2].version is not None


@pytest.mark.parametrize("race", [_append, _delete, _overwrite, _compact, _second_retrofit])
def test_concurrent_writer(tmp_path, race):
    root = str(tmp_path / "t")
    make_table(root)
    fired = []

    def before_commit(attempt):
        if not fired:
            fired.append(attempt)
            race(root)
            expected.extend(rows(root))

    expected: list[tuple] = []
    run, records, result = retrofit_table(root, before_commit)
    assert result.attempts == 2  # the race failed our first attempt; we reloaded
    assert rows(root) == expected  # no row lost, none duplicated
    assert len(set(rows(root))) == len(expected)
    active = {f for f in delta.snapshot(DeltaTable(root), root, {}).files}
    for path in result.replaced:
        assert path not in active
    for path, reason in result.changed.items():
        assert path not in active and reason
    assert len(result.replaced) + len(result.changed) == len(run.files)
    if race is _append:
        assert not result.changed
    else:
        assert result.changed
    if race is _second_retrofit:
        assert not result.replaced
    assert_indexed(root) if race in (_append, _second_retrofit) else None


def test_why_a_planned_file_changed():
    planned = delta.DataFile("p=a/x.parquet", 100, {"p": "a"}, 0, None, False)
    replacement = delta.Replacement(planned, "p=a/x.pageindex-0.parquet", 120)
    now = {"gone": {}, "resized": {planned.path: dataclasses.replace(planned, size=90)},
           "vector": {planned.path: dataclasses.replace(planned, deletion_vector=True)},
           "same": {planned.path: planned}}
    reasons = {}
    for case, current in now.items():
        pending, changed = {planned.path: replacement}, {}
        drop_changed(pending, current, changed, "logged", delta._blocked_by)
        assert bool(pending) != bool(changed)
        reasons[case] = changed.get(planned.path)
    assert reasons == {"gone": "removed from the table since it was planned",
                       "resized": "its logged size changed from 100 to 90",
                       "vector": "it has a deletion vector now", "same": None}


# --------------------------------------------------------------------------- deletion vectors

Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def _z85(data: bytes) -> str:
    out = []
    for i in range(0, len(data), 4):
        n = int.from_bytes(data[i:i + 4], "big")
        out.append("".join(Z85[n // 85 ** k % 85] for k in range(4, -1, -1)))
    return "".join(out)


def add_inline_deletion_vector(root: str, deleted_rows: list[int]) -> str:
    """Commit a deletion vector (inline, per the Delta protocol) on the table's first file."""
    from pyroaring import BitMap

    dt = DeltaTable(root)
    data = next(iter(sorted(delta.snapshot(dt, root, {}).files.values(), key=lambda f: f.path)))
    bitmap = struct.pack("<iQI", 1681511377, 1, 0) + BitMap(deleted_rows).serialize()
    padded = bitmap + b"\0" * (-len(bitmap) % 4)
    dv = {"storageType": "i", "pathOrInlineDv": _z85(padded), "sizeInBytes": len(bitmap),
          "cardinality": len(deleted_rows)}
    add = {"path": data.path, "partitionValues": data.partition_values, "size": data.size,
           "modificationTime": data.modification_time, "dataChange": True, "stats": data.stats,
           "deletionVector": dv}
    remove = {"path": data.path, "dataChange": True, "deletionTimestamp": 1, "size": data.size,
              "partitionValues": data.partition_values, "extendedFileMetadata": True}
    version = dt.version() + 1
    with open(f"{root}/_delta_log/{version:020d}.json", "w") as f:
        f.write(json.dumps({"commitInfo": {"operation": "DELETE"}}) + "\n")
        f.write(json.dumps({"remove": remove}) + "\n" + json.dumps({"add": add}) + "\n")
    return data.path


def test_files_with_deletion_vectors_are_left_alone(tmp_path):
    root = str(tmp_path / "t")
    write_deltalake(root, _rows(0, 3000), partition_by=["p"], writer_properties=NO_COLUMN_INDEX,
                    configuration={"delta.enableDeletionVectors": "true"})
    path = add_inline_deletion_vector(root, [0, 1, 2])
    before = rows(root)
    assert len(before) == 3000 - 3  # deltalake applies the vector
    run = lake.plan(root, JobOptions())
    assert [r["reason"] for r in run.skipped] == [lake.DELETION_VECTOR]
    assert [r["status"] for r in run.skipped] == [Status.SKIPPED]
    records = [process_file(f, run.options) for f in run.files]
    out, text = commit_records(run, records, 1000)
    assert "2 files replaced, 1 skipped" in text
    after = delta.snapshot(DeltaTable(root), root, {}).files
    assert after[path].deletion_vector
    assert rows(root) == before
    assert all(r["status"] != Status.CHANGED for r in out)


def test_table_needing_writer_features_delta_rs_lacks_is_refused_at_plan_time(tmp_path):
    root = str(tmp_path / "t")
    write_deltalake(root, _rows(0, 300), writer_properties=NO_COLUMN_INDEX)
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [],
                "writerFeatures": ["rowTracking", "domainMetadata"]}
    with open(f"{root}/_delta_log/{1:020d}.json", "w") as f:
        f.write(json.dumps({"commitInfo": {}}) + "\n" + json.dumps({"protocol": protocol}) + "\n")
    with pytest.raises(UnsupportedFileError, match="delta-rs cannot write this table.*RowTracking"):
        lake.plan(root, JobOptions())
    assert not [p for p in os.listdir(root) if ".pageindex-" in p]  # refused before any copy
    assert DeltaTable(root).version() == 1


# --------------------------------------------------------------------------- reruns

def _data_reads(proxy, bucket: str) -> set[str]:
    """The table-relative paths of the objects a run read (HEAD or GET), its log and the last run's
    record beside it excluded (the keys as stored: delta-rs keeps a partition value's escapes in
    the key, as `p=c%20d`)."""
    prefix = f"/{bucket}/lake/t/"
    return {unquote(r.path)[len(prefix):] for r in proxy.log
            if r.operation in ("GetObject", "HeadObject") and unquote(r.path).startswith(prefix)
            and "/_delta_log/" not in r.path and "/_pageindex/" not in r.path}


def test_rerun_after_two_appends_reads_only_the_appended_files(spark, s3_server, s3_bucket, tmp_path):
    """The rerun of a retrofitted table on S3 knows the copies from their names in the log: it
    sends no request for them and indexes the files another writer appended since."""
    spark.sparkContext.environment.update({k: os.environ[k] for k in s3h._ENV})
    root, options = f"s3://{s3_bucket}/lake/t", s3h.storage_options(s3_server)
    make_table(root, options)
    with FaultProxy(s3_server) as proxy:
        def run_job(report):
            assert main(["--input", root, "--in-place", "--s3-endpoint-url", proxy.endpoint,
                         "--report", str(report)], spark=spark) == 0
            return {r["path"].removeprefix(f"{root}/"): r
                    for r in report_records(report)}

        first = run_job(tmp_path / "first.jsonl")
        assert {r["status"] for r in first.values()} == {Status.INDEXED}
        copies = {unquote(p) for p in delta.snapshot(DeltaTable(root, storage_options=_delta(options)),
                                                     root, options).files}
        for first_row in (9000, 9500):  # another writer's two appends
            write_deltalake(root, _rows(first_row, 300), mode="append", partition_by=["p"],
                            writer_properties=NO_COLUMN_INDEX, storage_options=_delta(options))
        appended = {unquote(p) for p in delta.snapshot(DeltaTable(root, storage_options=_delta(options)),
                                                       root, options).files} - copies
        assert len(appended) == 6 and copies
        expected = rows(root, options=options)
        proxy.reset()
        second = run_job(tmp_path / "second.jsonl")
        assert _data_reads(proxy, s3_bucket) == appended  # not one request for a copy
    check_rerun_records(second, copies, appended)
    assert rows(root, options=options) == expected
    assert_indexed(root, options)


def test_rerun_of_a_table_its_writer_indexed_opens_only_the_appended_files(spark, s3_server, s3_bucket, tmp_path):
    """deltalake writes page indexes: the first run finds every file indexed and commits nothing,
    and records the version it planned from beside the table. After two appends the rerun plans
    from the log's changes since: not one request for an earlier file; --force opens them all."""
    spark.sparkContext.environment.update({k: os.environ[k] for k in s3h._ENV})
    root, options = f"s3://{s3_bucket}/lake/t", s3h.storage_options(s3_server)
    kw = dict(partition_by=["p"], storage_options=_delta(options))  # deltalake's default: indexed
    write_deltalake(root, _rows(0, 600), **kw)
    write_deltalake(root, _rows(600, 300), mode="append", **kw)
    earlier = {unquote(p) for p in delta.snapshot(DeltaTable(root, storage_options=_delta(options)),
                                                  root, options).files}
    assert len(earlier) == 6
    with FaultProxy(s3_server) as proxy:
        def run_job(report, *more):
            assert main(["--input", root, "--in-place", "--s3-endpoint-url", proxy.endpoint,
                         "--report", str(report), *more], spark=spark) == 0
            return {r["path"].removeprefix(f"{root}/"): r for r in report_records(report)}

        first = run_job(tmp_path / "first.jsonl")
        assert {r["status"] for r in first.values()} == {Status.ALREADY_INDEXED}
        assert DeltaTable(root, storage_options=_delta(options)).version() == 1, "nothing committed"
        for first_row in (900, 1200):  # another writer's two appends
            write_deltalake(root, _rows(first_row, 300), mode="append", **kw)
        appended = {unquote(p) for p in delta.snapshot(DeltaTable(root, storage_options=_delta(options)),
                                                       root, options).files} - earlier
        assert len(appended) == 6
        proxy.reset()
        second = run_job(tmp_path / "second.jsonl")
        assert _data_reads(proxy, s3_bucket) == appended
        assert not {unquote(r.path) for r in proxy.log} & {f"/{s3_bucket}/lake/t/{p}" for p in earlier}
        assert {second[p]["status"] for p in earlier} == {Status.UNCHANGED}
        assert all(second[p]["bytes_read"] == 0 for p in earlier)
        assert {second[p]["status"] for p in appended} == {Status.ALREADY_INDEXED}
        proxy.reset()
        third = run_job(tmp_path / "third.jsonl")  # nothing new: nothing opened
        assert {r["status"] for r in third.values()} == {Status.UNCHANGED}
        assert not _data_reads(proxy, s3_bucket)
        proxy.reset()
        forced = run_job(tmp_path / "forced.jsonl", "--verify-existing")
        assert {r["status"] for r in forced.values()} == {Status.ALREADY_INDEXED}
        assert _data_reads(proxy, s3_bucket) >= earlier | appended


def _plan_and_commit(root: str, **options):
    run = lake.plan(root, JobOptions(**options))
    records = [process_file(f, run.options) for f in run.files]
    return run, commit_records(run, records, 1000)


def test_other_options_force_and_verify_open_the_copies(tmp_path):
    """Copies named for other options are opened (and found indexed); --force rebuilds them and
    --verify-existing checks them, so both open them whatever their names say. The names are
    read from a checkpoint as well as from commits."""
    root = str(tmp_path / "t")
    make_table(root)
    _plan_and_commit(root)
    expected, version = rows(root), DeltaTable(root).version()
    [info] = [a["commitInfo"] for a in log_actions(root, version) if "commitInfo" in a]
    assert info["pageindex"]["options"] == "truncate_length=64"
    DeltaTable(root).create_checkpoint()  # the names survive in the checkpoint
    run, (out, text) = _plan_and_commit(root)
    assert not run.files and {r["reason"] for r in out} == {lake.KNOWN_INDEXED}
    assert f"{len(out)} known indexed from their names (not opened)" in text
    run, (out, _) = _plan_and_commit(root, truncate_length=16)
    assert len(run.files) == len(out) and not run.skipped
    assert {r["status"] for r in out} == {Status.ALREADY_INDEXED} and all(r["bytes_read"] for r in out)
    run, (out, _) = _plan_and_commit(root, verify_existing=True)
    assert len(run.files) == len(out) and {r["status"] for r in out} == {Status.ALREADY_INDEXED}
    assert DeltaTable(root).version() == version
    run, (out, _) = _plan_and_commit(root, force=True)
    assert len(run.files) == len(out) and {r["status"] for r in out} == {Status.INDEXED}
    assert DeltaTable(root).version() == version + 1
    assert rows(root) == expected
    run, (out, _) = _plan_and_commit(root)  # the forced copies are named for the default options
    assert not run.files and {r["reason"] for r in out} == {lake.KNOWN_INDEXED}


# --------------------------------------------------------------------------- confinement


def test_files_the_log_places_outside_the_table_are_left_alone(tmp_path):
    """Add actions whose paths lead outside the table root (`..`, percent-encoded or not) and a
    data file that is a link to a file outside: each is skipped with its reason, nothing is
    written beside them and the commit adds no path outside the root; --follow-links follows the
    link (a file of the table reached through it), never a path outside the root."""
    root = tmp_path / "lake" / "t"
    write_deltalake(str(root), _rows(0, 300), writer_properties=NO_COLUMN_INDEX)
    outside = tmp_path / "lake" / "outside"
    outside.mkdir()
    adds = []
    for name, logged in (("evil.parquet", "../outside/evil.parquet"), ("enc.parquet", "%2E%2E/outside/enc.parquet"),
                         ("deep.parquet", "sub/..%2F..%2F../outside/deep.parquet")):
        pq.write_table(_rows(0, 10), outside / name)
        adds.append({"path": logged, "size": (outside / name).stat().st_size, "partitionValues": {},
                     "modificationTime": 0, "dataChange": True})
    pq.write_table(_rows(0, 10), outside / "victim.parquet")
    (root / "link.parquet").symlink_to("../outside/victim.parquet")
    adds.append({"path": "link.parquet", "size": (outside / "victim.parquet").stat().st_size,
                 "partitionValues": {}, "modificationTime": 0, "dataChange": True})
    with open(root / "_delta_log" / f"{1:020d}.json", "w") as f:
        f.write(json.dumps({"commitInfo": {"operation": "WRITE"}}) + "\n")
        f.write("".join(json.dumps({"add": a}) + "\n" for a in adds))
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in outside.iterdir()}
    run = lake.plan(str(root), JobOptions())
    assert sorted((r["path"], r["reason"]) for r in run.skipped) == sorted([
        ("%2E%2E/outside/enc.parquet", "the log names a file outside the table root (left as is)"),
        ("../outside/evil.parquet", "the log names a file outside the table root (left as is)"),
        ("sub/..%2F..%2F../outside/deep.parquet", "the log names a file outside the table root (left as is)"),
        (f"{root}/link.parquet", f"a symbolic link to {outside / 'victim.parquet'}, outside the table root "
                                 "(left as is; --follow-links follows it)")])
    assert len(run.files) == 1 and run.files[0].url.startswith(f"{root}/part-")
    records = [process_file(f, run.options) for f in run.files]
    out, _ = commit_records(run, records, 1000)
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in outside.iterdir()} == before
    added = [a["add"]["path"] for a in log_actions(str(root), 2) if "add" in a]
    assert len(added) == 1 and ".." not in unquote(added[0]) and "/" not in unquote(added[0])
    followed = lake.plan(str(root), JobOptions(follow_links=True))
    assert [f.url for f in followed.files] == [f"{root}/link.parquet"]
    assert len(followed.skipped) == 4  # the three outside paths, and the copy indexed above
