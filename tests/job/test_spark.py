"""The Spark batch job (pageindex.job.spark) end to end: local and S3 (moto), report, modes, failures.

Every test that runs the job uses the shared local[2] session (fixture ``spark``) through
``pageindex.job.spark.main(argv, spark=spark)``.  Datasets are tiny (tens of thousands of rows per
file) but have many small pages, so Spark's page skipping is visible in its scan metrics.
"""
from __future__ import annotations

import importlib
import io
import json
import logging
import os
import re
import shutil
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex.errors import UsageError
from pageindex.io import commit as commit_mod
from pageindex.io.commit import TEMP_TAG
from pageindex.io.discovery import InputFile
from pageindex.io.read_plan import ReadOptions
from pageindex.job import catalog
from pageindex.job.config import JobConfig, check_argv
from pageindex.job.process import JobOptions, process_file
from pageindex.job.spark import main
from pageindex.verify import verify
from tests.helpers.report_parts import report_records
from tests.helpers import s3 as s3h
from tests.helpers.paths import REPO_ROOT
from tests.helpers.spark import scan_output_rows

# pageindex/__init__ exports functions named like their modules (retrofit, verify): import the modules
retrofit_mod = importlib.import_module("pageindex.retrofit")
storage_mod = importlib.import_module("pageindex.io.storage")
TAIL_READ = 64 << 10
REPORT_KEYS = {
    "path", "status", "reason", "bytes_in", "bytes_out", "row_groups", "pages",
    "chunks_with_column_index", "chunks_without_column_index", "without_column_index_reasons",
    "bytes_read", "seconds", "index_bytes_read", "copy_bytes_read", "no_page_skipping",
    "page_stats_fallback_reasons",
}
ROWS = 20_000          # rows per pyarrow file
ROW_GROUP = 10_000     # rows per row group
PAGE_ROWS = 1_024      # pyarrow cuts a page per write batch when data_page_size is tiny
PARTS, FILES_PER_PART = 3, 4


# --------------------------------------------------------------------------- data

def _table(first: int, n: int) -> pa.Table:
    k = np.arange(first, first + n, dtype=np.int64)
    return pa.table({
        "k": k,
        "v": (k % 977).astype(np.float64) / 7.0,
        "s": pa.array([f"name-{i % 5003:05d}" for i in range(first, first + n)]),
    })


def write_arrow(path: Path, first: int, n: int = ROWS, *, page_index: bool = False,
                row_group: int = ROW_GROUP, compression: str = "snappy") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(_table(first, n), path, row_group_size=row_group, data_page_size=512,
                   write_page_index=page_index, compression=compression)
    return path


def write_duckdb(path: Path, first: int, n: int = ROWS) -> Path:
    import duckdb

    path.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    try:
        con.register("t", _table(first, n))
        con.execute(f"COPY (SELECT * FROM t ORDER BY k) TO '{path}' "
                    f"(FORMAT PARQUET, ROW_GROUP_SIZE {ROW_GROUP})")
    finally:
        con.close()
    return path


def build_dataset(root: Path) -> dict[str, int]:
    """3 Hive partitions x 4 pyarrow files + 2 DuckDB files, sorted by k in each file, plus the
    debris a Hadoop/Spark writer leaves (hidden files, _temporary/ with a Parquet file inside).
    Returns {relative path: first k} for the data files."""
    firsts: dict[str, int] = {}
    first = 0
    for p in range(PARTS):
        part = root / f"day=2024-01-0{p + 1}"
        for i in range(FILES_PER_PART):
            rel = f"{part.name}/part-{i:05d}-arrow.parquet"
            write_arrow(root / rel, first)
            firsts[rel] = first
            first += ROWS
        # what Hadoop writes next to _SUCCESS (a .crc of a data file would be read and checked
        # by Hadoop's local filesystem, so a fake one must not sit beside a data file)
        (part / "_SUCCESS").write_bytes(b"")
        (part / "._SUCCESS.crc").write_bytes(b"crc\x00\x00\x00\x02\x00")
    for p in (0, 2):
        rel = f"day=2024-01-0{p + 1}/part-00009-duckdb.parquet"
        write_duckdb(root / rel, first)
        firsts[rel] = first
        first += ROWS
    (root / "_SUCCESS").write_bytes(b"")
    write_arrow(root / "_temporary" / "0" / "task_0" / "part-99999.parquet", 10_000_000)
    return firsts


@pytest.fixture(scope="module")
def dataset_template(tmp_path_factory) -> tuple[Path, dict[str, int]]:
    root = tmp_path_factory.mktemp("template") / "events"
    return root, build_dataset(root)


@pytest.fixture
def dataset(dataset_template, tmp_path) -> tuple[Path, dict[str, int]]:
    """A fresh copy of the template dataset for one test."""
    src, firsts = dataset_template
    dst = tmp_path / "events"
    shutil.copytree(src, dst)
    return dst, dict(firsts)


def all_files(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file's bytes and mtime (ns), hidden ones included."""
    return {rel: (p.read_bytes(), p.stat().st_mtime_ns) for rel, p in all_files(root).items()}


def read_data(path) -> pa.Table:
    return pq.read_table(path)


def footer_start(data: bytes) -> int:
    (length,) = struct.unpack("<I", data[-8:-4])
    return len(data) - 8 - length


def read_report(path: Path) -> list[dict]:
    """The job's report: a folder of part files (report_parts.report_records)."""
    assert Path(path).is_dir(), "the job's report is a folder of part files"
    return report_records(path)


def by_path(records: list[dict]) -> dict[str, dict]:
    out = {r["path"]: r for r in records}
    assert len(out) == len(records), "one record per file"
    return out


def temporaries(root: Path) -> list[Path]:
    return [p for p in root.rglob(f"*{TEMP_TAG}*")]


def run_job(spark, *argv) -> int:
    return main([str(a) for a in argv], spark=spark)


# --------------------------------------------------------------------------- local end to end

@pytest.mark.parametrize("report_name", ["report.jsonl", "report.parquet"])
def test_local_in_place_end_to_end(spark, dataset, tmp_path, report_name):
    root, firsts = dataset
    before = snapshot(root)
    data_before = {rel: read_data(root / rel) for rel in firsts}
    probe_rel = "day=2024-01-02/part-00001-arrow.parquet"
    probe = firsts[probe_rel] + ROW_GROUP + 4321  # inside the file's second row group
    predicate = f"k = {probe}"
    if report_name.endswith(".jsonl"):
        rows_before = scan_output_rows(spark, root, predicate)
        # no page index yet: row-group statistics keep exactly one row group
        assert rows_before == ROW_GROUP

    report = tmp_path / "out" / report_name  # the report's directory does not exist yet
    assert run_job(spark, "--input", root, "--in-place", "--report", report) == 0

    records = read_report(report)
    recs = by_path(records)
    assert set(recs) == {str(root / rel) for rel in firsts}, "exactly the data files, nothing hidden"
    for rel in firsts:
        r = recs[str(root / rel)]
        assert REPORT_KEYS <= set(r), r
        assert r["status"] == "indexed", r
        assert r["reason"] == ""
        data = (root / rel).read_bytes()
        assert r["bytes_in"] == len(before[rel][0])
        assert r["bytes_out"] == len(data) > r["bytes_in"]
        assert r["row_groups"] == ROWS // ROW_GROUP
        assert r["pages"] >= 3 * r["row_groups"]  # at least one page per chunk (DuckDB: exactly)
        assert r["chunks_with_column_index"] == 3 * r["row_groups"]
        assert r["chunks_without_column_index"] == 0
        assert r["without_column_index_reasons"] == {}
        # every column chunk is read once, then (local commit) the prefix is copied
        assert 2 * footer_start(before[rel][0]) <= r["bytes_read"] <= 2 * r["bytes_in"] + TAIL_READ
        assert r["copy_bytes_read"] == len(before[rel][0])  # the whole file, its footer included
        assert r["index_bytes_read"] == r["bytes_read"] - r["copy_bytes_read"] <= r["bytes_in"] + TAIL_READ
        assert r["seconds"] >= 0
        # the old file, its footer included, is a prefix of the new one
        old = before[rel][0]
        assert data[:len(old)] == old
        assert read_data(root / rel).equals(data_before[rel])
        assert verify(str(root / rel)).ok
        md = pq.ParquetFile(root / rel).metadata
        assert md.row_group(0).column(0).has_column_index and md.row_group(0).column(0).has_offset_index
    arrow = [r for p, r in recs.items() if p.endswith("-arrow.parquet")]
    assert all(r["pages"] >= 3 * ROWS // PAGE_ROWS for r in arrow)

    # hidden entries and the _temporary/ attempt are left exactly as they were
    after = snapshot(root)
    for rel, (data, mtime) in before.items():
        if rel not in firsts:
            assert after[rel] == (data, mtime), rel
    assert set(after) == set(before)
    assert not temporaries(root)

    if report_name.endswith(".jsonl"):
        rows_after = scan_output_rows(spark, root, predicate)
        assert spark.read.parquet(str(root)).where(predicate).count() == 1
        assert rows_after <= 2 * PAGE_ROWS, (rows_before, rows_after)
        assert rows_after * 4 < rows_before

    # a second run changes nothing and says so
    report2 = tmp_path / ("again" + Path(report_name).suffix)
    assert run_job(spark, "--input", root, "--in-place", "--report", report2) == 0
    again = read_report(report2)
    assert len(again) == len(firsts)
    assert {r["status"] for r in again} == {"already_indexed"}
    assert all(r["bytes_out"] == 0 and r["pages"] == 0 for r in again)
    assert snapshot(root) == after


def test_hidden_entries_non_parquet_globs_and_file_urls(spark, dataset, tmp_path):
    root, firsts = dataset
    notes = root / "day=2024-01-01" / "notes.txt"
    notes.write_text("not a parquet file\n")
    before = snapshot(root)
    report = tmp_path / "r.jsonl"
    code = run_job(
        spark, "--in-place", "--report", report, "--input",
        f"file://{root}/day=2024-01-01",                        # a directory as a file:// URL
        f"{root}/day=2024-01-02/*-arrow.parquet",               # a glob
        f"file://{root}/day=2024-01-03/part-0000[01]-arrow.parquet",  # a glob in a file:// URL
        f"{root}/day=2024-01-02/part-00000-arrow.parquet",      # overlaps the glob: once only
    )
    assert code == 0
    recs = by_path(read_report(report))
    want = {rel for rel in firsts if rel.startswith(("day=2024-01-01/", "day=2024-01-02/"))}
    want |= {"day=2024-01-03/part-00000-arrow.parquet", "day=2024-01-03/part-00001-arrow.parquet"}
    want.discard("day=2024-01-02/part-00009-duckdb.parquet")
    assert set(recs) == {str(root / rel) for rel in want} | {str(notes)}
    skipped = recs.pop(str(notes))
    assert skipped["status"] == "skipped" and skipped["reason"], skipped
    assert skipped["bytes_in"] == notes.stat().st_size
    assert {r["status"] for r in recs.values()} == {"indexed"}
    after = snapshot(root)
    for rel, state in before.items():
        if rel not in want:  # hidden files, _temporary/, notes.txt and files not named
            assert after[rel] == state, rel


def test_glob_input_ignores_hidden_entries(spark, dataset, tmp_path):
    """A glob over a dataset root must skip _SUCCESS and _temporary/ like a directory input does."""
    root, firsts = dataset
    temp_attempt = root / "_temporary" / "0" / "task_0" / "part-99999.parquet"
    before = temp_attempt.read_bytes()
    report = tmp_path / "r.jsonl"
    assert run_job(spark, "--input", f"{root}/*", "--in-place", "--report", report) == 0
    recs = by_path(read_report(report))
    assert temp_attempt.read_bytes() == before, "a file of an uncommitted Spark attempt was rewritten"
    assert set(recs) == {str(root / rel) for rel in firsts}


# --------------------------------------------------------------------------- --output

def _add_unchanged_files(root: Path) -> tuple[Path, Path]:
    """A file that already has a page index and one that is not Parquet: neither needs a change."""
    indexed = write_arrow(root / "day=2024-01-04" / "part-00000-indexed.parquet", 9_000_000,
                          page_index=True)
    readme = root / "README.txt"
    readme.write_text("dataset notes\n")
    return indexed, readme


def test_output_mirrors_tree_and_leaves_input_untouched(spark, dataset, tmp_path):
    root, firsts = dataset
    indexed, readme = _add_unchanged_files(root)
    before = snapshot(root)
    out = tmp_path / "mirror" / "events"  # does not exist yet
    report = tmp_path / "r.jsonl"
    assert run_job(spark, "--input", root, "--output", out, "--report", report) == 0
    assert snapshot(root) == before, "input changed"
    assert set(all_files(out)) == set(firsts), "only indexed files are written"
    recs = by_path(read_report(report))
    assert recs[str(indexed)]["status"] == "already_indexed"
    assert recs[str(readme)]["status"] == "skipped"
    for rel in firsts:
        r = recs[str(root / rel)]
        assert r["status"] == "indexed" and r["output"] == str(out / rel)
        new, old = (out / rel).read_bytes(), before[rel][0]
        assert new[:len(old)] == old
        assert r["bytes_out"] == len(new)
        assert read_data(out / rel).equals(read_data(root / rel))
        assert verify(str(out / rel)).ok
    assert not temporaries(out)


def test_output_copy_unchanged(spark, dataset, tmp_path):
    """--copy-unchanged also copies files that need no change (already indexed, not Parquet), so
    the output is a complete dataset; here a whole partition is already indexed."""
    root, firsts = dataset
    indexed, readme = _add_unchanged_files(root)
    before = snapshot(root)
    out = tmp_path / "mirror"
    out.mkdir()
    report = tmp_path / "r.jsonl"
    code = run_job(spark, "--input", root, "--output", out, "--copy-unchanged", "--report", report)
    recs = by_path(read_report(report))
    assert recs[str(indexed)]["status"] == "already_indexed", recs[str(indexed)]
    assert recs[str(readme)]["status"] == "skipped"
    assert code == 0
    assert snapshot(root) == before
    assert set(all_files(out)) == set(firsts) | {"day=2024-01-04/part-00000-indexed.parquet",
                                                 "README.txt"}
    assert (out / "day=2024-01-04" / "part-00000-indexed.parquet").read_bytes() == indexed.read_bytes()
    assert (out / "README.txt").read_bytes() == readme.read_bytes()


def test_copy_unchanged_local_to_s3(s3fs_fs, s3_bucket, s3_storage_options, tmp_path, monkeypatch):
    """--copy-unchanged across filesystems: an already indexed local file goes to the S3 output
    (not to a local path named like the bucket, relative to the working directory)."""
    monkeypatch.chdir(tmp_path)
    f = write_arrow(tmp_path / "src" / "day=1" / "a.parquet", 0, n=4_000, page_index=True)
    rec = process_file(InputFile(str(f), f.stat().st_size, "day=1/a.parquet"),
                       JobOptions(output=f"s3://{s3_bucket}/out", copy_unchanged=True,
                                  storage_options=s3_storage_options))
    assert rec["status"] == "already_indexed", rec
    assert s3fs_fs.cat_file(f"{s3_bucket}/out/day=1/a.parquet") == f.read_bytes()
    assert not (tmp_path / s3_bucket).exists()


def test_local_to_s3_output(s3fs_fs, s3_bucket, s3_storage_options, tmp_path, monkeypatch):
    """A local input retrofitted to an S3 output lands in the bucket, byte for byte the local
    retrofit's result (not in a local directory named like the bucket)."""
    monkeypatch.chdir(tmp_path)
    f = write_arrow(tmp_path / "src" / "day=1" / "a.parquet", 0, n=4_000)
    rec = process_file(InputFile(str(f), f.stat().st_size, "day=1/a.parquet"),
                       JobOptions(output=f"s3://{s3_bucket}/out", storage_options=s3_storage_options))
    assert rec["status"] == "indexed", rec
    local = tmp_path / "local.parquet"
    process_file(InputFile(str(f), f.stat().st_size, "a.parquet"), JobOptions(output=str(local)))
    assert s3fs_fs.cat_file(f"{s3_bucket}/out/day=1/a.parquet") == (local / "a.parquet").read_bytes()
    assert not (tmp_path / s3_bucket).exists()


def test_output_with_glob_keeps_partition_directories(spark, tmp_path):
    """`--input root/day=* --output out` must keep the Hive partition directories: they carry
    the partition values, so flattening them loses the `day` column of the copied dataset.
    (Spark names files part-NNNNN-<uuid>..., unique across partitions, as here.)"""
    root = tmp_path / "events"
    rels = [f"day={d}/part-0000{i}-{d}{i}ab.snappy.parquet" for d in (1, 2) for i in (0, 1)]
    for n, rel in enumerate(rels):
        write_arrow(root / rel, n * 4_000, n=4_000)
    out = tmp_path / "mirror"
    assert run_job(spark, "--input", f"{root}/day=*", "--output", out) == 0
    assert set(all_files(out)) == set(rels)
    assert spark.read.parquet(str(out)).where("day = 2").count() == 8_000


# --------------------------------------------------------------------------- S3 (moto)

@pytest.fixture
def s3_spark(spark, s3_server):
    """The shared session, with the fake credentials also given to its Python workers.

    The JVM (and so the Python workers it forks) may have started before the moto fixture set
    AWS_* in this process; `SparkContext.environment` is passed to every worker, as
    spark.executorEnv.* would be on a cluster.  The endpoint is NOT passed: the job must use
    --s3-endpoint-url.
    """
    keys = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
            "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_EC2_METADATA_DISABLED")
    spark.sparkContext.environment.update({k: os.environ[k] for k in keys})
    return spark


BIG_ROWS = 400_000  # two uncompressed plain int64/double columns: ~6.4 MB, prefix > 5 MiB


def big_file(path: Path, first: int = 0) -> Path:
    k = np.arange(first, first + BIG_ROWS, dtype=np.int64)
    v = np.random.default_rng(first).random(BIG_ROWS)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"k": k, "v": v}), path, row_group_size=BIG_ROWS // 2,
                   data_page_size=64 << 10, use_dictionary=False, compression="none",
                   write_page_index=False)
    assert footer_start(path.read_bytes()) > 5 << 20
    return path


@pytest.fixture(scope="module")
def s3_sources(tmp_path_factory) -> dict[str, bytes]:
    d = tmp_path_factory.mktemp("s3src")
    return {
        "day=1/part-00000.parquet": write_arrow(d / "a.parquet", 0).read_bytes(),
        "day=1/part-00001.parquet": write_duckdb(d / "b.parquet", ROWS).read_bytes(),
        "day=2/part-00000.parquet": big_file(d / "big.parquet", 2 * ROWS).read_bytes(),
    }


def upload(fs, bucket: str, prefix: str, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        fs.pipe(f"{bucket}/{prefix}/{rel}", data)
    fs.pipe(f"{bucket}/{prefix}/_SUCCESS", b"")
    fs.invalidate_cache()


def etag(client, bucket: str, key: str) -> str:
    return client.head_object(Bucket=bucket, Key=key)["ETag"].strip('"')


def check_s3_output(fs, client, bucket, key, original: bytes) -> bytes:
    new = fs.cat_file(f"{bucket}/{key}")
    start = len(original)  # the whole object is the prefix, its footer included
    assert new[:start] == original, "prefix bytes changed"
    assert pq.read_table(io.BytesIO(new)).equals(pq.read_table(io.BytesIO(original)))
    assert verify(f"{bucket}/{key}", filesystem=fs).ok
    tag = etag(client, bucket, key)
    if start >= 5 << 20:
        # assembled by a multipart upload: a copied prefix part (server side) and the tail part
        assert "-" in tag and int(tag.rsplit("-", 1)[1]) >= 2, tag
    else:
        assert "-" not in tag, tag  # one PUT
    return new


def test_s3_in_place(s3_spark, s3fs_fs, s3_bucket, s3_server, s3_sources, tmp_path):
    fs, client, bucket = s3fs_fs, s3h.boto3_client(s3_server), s3_bucket
    upload(fs, bucket, "data", s3_sources)
    report = f"s3://{bucket}/reports/run1.jsonl"
    code = run_job(s3_spark, "--input", f"s3://{bucket}/data", "--in-place",
                   "--s3-endpoint-url", s3_server, "--report", report)
    assert code == 0
    records = [json.loads(x) for part in fs.find(f"{bucket}/reports/run1.jsonl")  # a folder of parts
               for x in fs.cat_file(part).decode().splitlines()]
    recs = by_path(records)
    assert set(recs) == {f"s3://{bucket}/data/{rel}" for rel in s3_sources}
    tags = {}
    for rel, original in s3_sources.items():
        r = recs[f"s3://{bucket}/data/{rel}"]
        assert REPORT_KEYS <= set(r) and r["status"] == "indexed", r
        new = check_s3_output(fs, client, bucket, f"data/{rel}", original)
        assert r["bytes_out"] == len(new) and r["bytes_in"] == len(original)
        if len(original) >= 5 << 20:
            # the prefix was copied server side: only the chunks (and footer) were downloaded
            assert r["bytes_read"] <= len(original) + TAIL_READ, r
            assert r["copy_bytes_read"] == 0, r
        elif len(original) <= ReadOptions().tail_bytes:
            # read once, whole, with the footer: the one PutObject's prefix came from memory
            assert r["bytes_read"] == len(original), r
        else:
            assert r["bytes_read"] >= 2 * footer_start(original), r
            assert r["copy_bytes_read"] == len(original), r
        tags[rel] = etag(client, bucket, f"data/{rel}")

    code = run_job(s3_spark, "--input", f"s3://{bucket}/data", "--in-place",
                   "--s3-endpoint-url", s3_server, "--report", tmp_path / "again.jsonl")
    assert code == 0
    assert {r["status"] for r in read_report(tmp_path / "again.jsonl")} == {"already_indexed"}
    assert {rel: etag(client, bucket, f"data/{rel}") for rel in s3_sources} == tags


def test_s3_to_other_prefix_with_s3a_urls(s3_spark, s3fs_fs, s3_bucket, s3_server, s3_sources,
                                          tmp_path):
    fs, client, bucket = s3fs_fs, s3h.boto3_client(s3_server), s3_bucket
    upload(fs, bucket, "data", s3_sources)
    source_tags = {rel: etag(client, bucket, f"data/{rel}") for rel in s3_sources}
    report = tmp_path / "r.jsonl"
    code = run_job(s3_spark, "--input", f"s3a://{bucket}/data", "--output", f"s3://{bucket}/other/",
                   "--s3-endpoint-url", s3_server, "--report", report)
    assert code == 0
    recs = by_path(read_report(report))
    assert set(recs) == {f"s3://{bucket}/data/{rel}" for rel in s3_sources}  # s3a -> same bucket/key
    for rel, original in s3_sources.items():
        r = recs[f"s3://{bucket}/data/{rel}"]
        assert r["status"] == "indexed" and r["output"] == f"s3://{bucket}/other/{rel}", r
        check_s3_output(fs, client, bucket, f"other/{rel}", original)
        assert fs.cat_file(f"{bucket}/data/{rel}") == original, "source object changed"
        assert etag(client, bucket, f"data/{rel}") == source_tags[rel]
    assert sorted(fs.find(f"{bucket}/other")) == sorted(f"{bucket}/other/{rel}" for rel in s3_sources)


def test_s3_stale_multipart_upload_aborted(s3_spark, s3fs_fs, s3_bucket, s3_server, s3_sources, tmp_path):
    """A dead attempt's incomplete multipart upload of the file's key outlives the run that
    commits the file in place (it lists no uploads) and is aborted by the next run, which finds
    the file indexed; an upload of another key with the same prefix is not.  (moto's
    ListMultipartUploads reports every upload as initiated in 2010, so here every upload is
    "old"; the age rule itself is tested below with a stub client.)"""
    fs, client, bucket = s3fs_fs, s3h.boto3_client(s3_server), s3_bucket
    rel = "day=1/part-00000.parquet"
    upload(fs, bucket, "data", {rel: s3_sources[rel]})
    key = f"data/{rel}"
    dead = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    other = client.create_multipart_upload(Bucket=bucket, Key=key + ".bak")["UploadId"]

    def uploads() -> set[str]:
        return {u["UploadId"] for u in client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])}

    assert uploads() == {dead, other}
    args = ["--input", f"s3://{bucket}/data", "--in-place", "--s3-endpoint-url", s3_server]
    assert run_job(s3_spark, *args) == 0
    assert uploads() == {dead, other}, "a commit in place lists no uploads"
    report = tmp_path / "report.jsonl"
    assert run_job(s3_spark, *args, "--report", report) == 0
    assert [r["status"] for r in read_report(report)] == ["already_indexed"]
    assert uploads() == {other}, "only the file's own upload is aborted"


class _StubS3:
    """Just enough of s3fs for clean_stale_temporaries: uploads initiated at given ages."""

    protocol = ("s3", "s3a")

    def __init__(self, ages: dict[str, float]) -> None:
        import datetime as dt

        now = dt.datetime.now(dt.timezone.utc)
        self.uploads = [{"Key": "data/a.parquet", "UploadId": uid,
                         "Initiated": now - dt.timedelta(seconds=age)} for uid, age in ages.items()]
        self.aborted: list[str] = []

    def split_path(self, path: str):
        bucket, key = path.split("/", 1)
        return bucket, key, None

    def call_s3(self, method: str, **kw):
        if method == "list_multipart_uploads":
            return {"Uploads": [u for u in self.uploads if u["Key"].startswith(kw["Prefix"])]}
        assert method == "abort_multipart_upload" and kw["Key"] == "data/a.parquet"
        self.aborted.append(kw["UploadId"])
        return {}


def test_s3_stale_upload_age_rule():
    fs = _StubS3({"old": 7200.0, "young": 60.0})
    assert commit_mod.clean_stale_temporaries(fs, "bucket/data/a.parquet", 3600.0) == 1
    assert fs.aborted == ["old"]


def test_s3_table_created_after_an_earlier_run_is_refused(s3_spark, s3fs_fs, s3_bucket, s3_server,
                                                          s3_sources):
    """The driver may run the job more than once (notebook, scheduler): a directory converted to
    Delta since the previous run (CONVERT TO DELTA writes _delta_log/ next to the existing files)
    must be refused in place, not judged from a listing cached by the previous run."""
    fs, bucket = s3fs_fs, s3_bucket
    rel = "day=1/part-00000.parquet"
    upload(fs, bucket, "tbl", {rel: s3_sources[rel]})
    args = ["--input", f"s3://{bucket}/tbl/day=1", "--in-place", "--s3-endpoint-url", s3_server]
    assert run_job(s3_spark, *args, "--dry-run") == 0
    fs.pipe(f"{bucket}/tbl/_delta_log/00000000000000000000.json", b"{}")
    assert run_job(s3_spark, *args) == 2
    assert fs.cat_file(f"{bucket}/tbl/{rel}") == s3_sources[rel]


# --------------------------------------------------------------------------- failures

def corrupt_copy(good: Path, path: Path) -> Path:
    data = bytearray(good.read_bytes())
    start = footer_start(bytes(data))
    data[start: len(data) - 8] = b"\xff" * (len(data) - 8 - start)  # garbage footer, valid magic
    path.write_bytes(bytes(data))
    return path


def test_corrupt_file_among_good_ones(spark, tmp_path):
    root = tmp_path / "t"
    good = [write_arrow(root / f"p={i}" / "part-0.parquet", i * ROWS) for i in range(3)]
    bad = corrupt_copy(good[0], root / "p=1" / "part-1.parquet")
    bad_bytes, bad_mtime = bad.read_bytes(), bad.stat().st_mtime_ns
    report = tmp_path / "r.jsonl"
    # malformed: no retry mends it, so not 1 (a scheduler retries 1) but 3
    assert run_job(spark, "--input", root, "--in-place", "--report", report) == 3
    recs = by_path(read_report(report))
    assert len(recs) == 4
    failed = recs[str(bad)]
    assert failed["status"] == "failed" and failed["reason"], failed
    assert failed["retryable"] is False and not any(r["retryable"] for r in recs.values())
    assert "internal error" not in failed["reason"], failed
    assert all(recs[str(g)]["status"] == "indexed" for g in good)
    assert bad.read_bytes() == bad_bytes and bad.stat().st_mtime_ns == bad_mtime
    assert not temporaries(root)
    # the same run, tolerating one failure
    assert run_job(spark, "--input", root, "--in-place", "--max-failures", "1") == 0
    assert bad.read_bytes() == bad_bytes


TABLE_LAYOUTS = {
    "delta": ("_delta_log/00000000000000000000.json", "{}\n"),
    "iceberg": ("metadata/v1.metadata.json", "{}\n"),
    "hudi": (".hoodie/hoodie.properties", "hoodie.table.name=t\n"),
}


def make_table(root: Path, kind: str) -> list[Path]:
    marker, text = TABLE_LAYOUTS[kind]
    (root / marker).parent.mkdir(parents=True, exist_ok=True)
    (root / marker).write_text(text)
    data = root / "data" if kind == "iceberg" else root
    return [write_arrow(data / f"day={d}" / "part-00000.parquet", d * ROWS, n=4_000) for d in (1, 2)]


@pytest.mark.parametrize("kind", sorted(TABLE_LAYOUTS))
def test_table_formats_refused_in_place(spark, tmp_path, capsys, kind):
    root = tmp_path / "tbl"
    files = make_table(root, kind)
    before = snapshot(root)
    for target in (root, files[0].parent, files[0]):  # the root, a partition, one data file
        capsys.readouterr()
        assert run_job(spark, "--input", target, "--in-place") == 2, target
        err = capsys.readouterr().err
        assert f"{kind.capitalize()} table" in err and "--output" not in err, err
    assert run_job(spark, "--input", root, "--in-place", "--dry-run") == 2
    assert snapshot(root) == before
    # a mirror of the directory is not the table either (tests/job/test_lakes.py)
    out = tmp_path / "copy"
    assert run_job(spark, "--input", root, "--output", out) == 2
    assert snapshot(root) == before and not out.exists()


def test_delta_table_below_input_refused_in_place(spark, tmp_path):
    """A warehouse directory holding a Delta table: in place would change the table's files."""
    warehouse = tmp_path / "warehouse"
    make_table(warehouse / "events_delta", "delta")
    write_arrow(warehouse / "plain" / "part-0.parquet", 0, n=4_000)
    before = snapshot(warehouse)
    assert run_job(spark, "--input", warehouse, "--in-place") == 2
    assert snapshot(warehouse) == before


def _race(monkeypatch, action) -> None:
    """Run `action` between retrofit's reads (compute_indexes) and the commit."""
    real = retrofit_mod.compute_indexes

    def racing(*args, **kwargs):
        out = real(*args, **kwargs)
        action()
        return out

    monkeypatch.setattr(retrofit_mod, "compute_indexes", racing)


def test_file_modified_during_processing_is_reported_changed(tmp_path, monkeypatch):
    f = write_arrow(tmp_path / "d" / "a.parquet", 0)
    changed = bytearray(f.read_bytes())
    changed[200] ^= 0xFF  # same size, different bytes (and a new mtime)
    _race(monkeypatch, lambda: f.write_bytes(bytes(changed)))
    rec = process_file(InputFile(str(f), f.stat().st_size, "a.parquet"), JobOptions())
    assert rec["status"] == "changed", rec
    assert "changed" in rec["reason"]
    assert f.read_bytes() == bytes(changed)
    assert not temporaries(tmp_path)


@pytest.mark.parametrize("big", [False, True], ids=["put", "multipart"])
def test_s3_object_modified_during_processing_is_reported_changed(
        s3fs_fs, s3_bucket, s3_storage_options, s3_sources, monkeypatch, big):
    fs, bucket = s3fs_fs, s3_bucket
    rel = "day=2/part-00000.parquet" if big else "day=1/part-00000.parquet"
    original = s3_sources[rel]
    key = f"{bucket}/data/{rel}"
    fs.pipe(key, original)
    replacement = bytearray(original)
    replacement[200] ^= 0xFF
    _race(monkeypatch, lambda: fs.pipe(key, bytes(replacement)))
    rec = process_file(InputFile(f"s3://{key}", len(original), rel),
                       JobOptions(storage_options=s3_storage_options))
    assert rec["status"] == "changed", rec
    assert fs.cat_file(key) == bytes(replacement)


def test_s3_change_detected_after_discover_in_same_process(
        s3fs_fs, s3_bucket, s3_storage_options, s3_sources, monkeypatch):
    """discover() then process_file() in one process (the library without Spark): the change
    check must not be answered from s3fs's listing cache filled by discover()."""
    from pageindex.io.discovery import discover

    fs, bucket = s3fs_fs, s3_bucket
    rel = "day=1/part-00000.parquet"
    original = s3_sources[rel]
    key = f"{bucket}/data/{rel}"
    fs.pipe(key, original)
    (found,) = discover([f"s3://{bucket}/data"], s3_storage_options).files
    replacement = bytearray(original)
    replacement[200] ^= 0xFF
    _race(monkeypatch, lambda: fs.pipe(key, bytes(replacement)))
    rec = process_file(found, JobOptions(storage_options=s3_storage_options))
    assert fs.cat_file(key) == bytes(replacement), "another writer's object was overwritten"
    assert rec["status"] == "changed", rec


def test_file_replaced_between_open_and_commit(tmp_path, monkeypatch):
    """A concurrent run commits (atomic rename) just after this one opened the file: this run
    keeps reading the file it opened (size and bytes of one version), then sees at commit that
    the path now names another file, and reports it changed instead of overwriting it."""
    f = write_arrow(tmp_path / "d" / "a.parquet", 0, n=4_000)
    indexed = tmp_path / "indexed.parquet"
    retrofit_mod.retrofit(str(f), str(indexed))
    real_open = storage_mod.os.open

    def open_then_replaced(path, flags, *rest):
        fd = real_open(path, flags, *rest)
        if path == str(f) and indexed.exists():
            os.replace(indexed, f)  # the other run's commit
        return fd

    monkeypatch.setattr(storage_mod.os, "open", open_then_replaced)
    rec = process_file(InputFile(str(f), f.stat().st_size, "a.parquet"), JobOptions())
    monkeypatch.undo()
    assert rec["status"] == "changed", rec
    assert verify(str(f)).ok and pq.ParquetFile(f).metadata.row_group(0).column(0).has_column_index


def test_hadoop_checksum_sidecar_stays_consistent(spark, tmp_path):
    """Files written through Hadoop's local filesystem (file://, e.g. by Spark or Hive) have a
    `.NAME.crc` checksum sidecar that Hadoop verifies on every read.  After an in-place rewrite
    Spark must still be able to read the dataset."""
    src = write_arrow(tmp_path / "src" / "a.parquet", 0)
    part = tmp_path / "events" / "day=1"
    jvm = spark._jvm
    local = jvm.org.apache.hadoop.fs.FileSystem.getLocal(spark._jsc.hadoopConfiguration())
    out = local.create(jvm.org.apache.hadoop.fs.Path(f"file://{part}/part-00000.parquet"))
    out.write(bytearray(src.read_bytes()))  # through the checksummed filesystem, as Spark writes
    out.close()
    assert (part / ".part-00000.parquet.crc").exists(), sorted(os.listdir(part))
    root = part.parent
    assert spark.read.parquet(str(root)).where("k = 5").count() == 1
    assert run_job(spark, "--input", root, "--in-place") == 0
    assert verify(str(part / "part-00000.parquet")).ok
    assert spark.read.parquet(str(root)).where("k = 5").count() == 1


def test_dry_run_writes_nothing(spark, dataset, tmp_path):
    root, _ = dataset
    before = snapshot(root)
    report = tmp_path / "r.jsonl"
    assert run_job(spark, "--input", root, "--in-place", "--dry-run", "--report", report) == 0
    assert snapshot(root) == before
    recs = by_path(read_report(report))
    assert {r["status"] for r in recs.values()} == {"dry_run"}
    assert all(r["bytes_out"] > r["bytes_in"] and r["pages"] > 0 for r in recs.values())
    out = tmp_path / "out"
    assert run_job(spark, "--input", root, "--output", out, "--dry-run", "--copy-unchanged") == 0
    assert not out.exists()
    assert snapshot(root) == before


def test_dry_run_keeps_stale_temporaries(spark, tmp_path):
    """--dry-run writes nothing: not even the clean-up of a dead attempt's temporary file."""
    d = tmp_path / "t"
    f = write_arrow(d / "a.parquet", 0, n=4_000)
    stale = d / f".{f.name}{TEMP_TAG}{'0' * 32}"
    stale.write_bytes(b"partial")
    old = time.time() - 7200
    os.utime(stale, (old, old))
    before = snapshot(d)
    assert run_job(spark, "--input", d, "--in-place", "--dry-run") == 0
    assert snapshot(d) == before


SENTINEL_SPARK = object()  # usage errors must be found before Spark is touched


@pytest.mark.parametrize("argv", [
    [],
    ["--in-place"],
    ["--input", "{d}"],
    ["--input", "{d}", "--in-place", "--output", "{d}/out"],
    ["--input", "{d}", "--table", "db.t", "--in-place"],
    ["--input", "{d}", "--in-place", "--target-task-bytes", "abc"],
    ["--input", "{d}", "--in-place", "--target-task-bytes", "0"],
    ["--input", "{d}", "--in-place", "--target-task-bytes", "-1m"],
    ["--input", "{d}", "--in-place", "--target-task-bytes", "12q"],
    ["--input", "{d}", "--in-place", "--target-task-bytes", "inf"],
    ["--input", "{d}", "--in-place", "--truncate-length", "0"],
    ["--input", "{d}", "--in-place", "--max-failures", "-1"],
    ["--input", "{d}", "--in-place", "--bloom-fpp", "0"],
    ["--input", "{d}", "--in-place", "--bloom-filter", "auto", "--bloom-max-bytes", "3000"],
    ["--input", "{d}/missing", "--in-place"],
    ["--input", "{d}/nothing-*.parquet", "--in-place"],
    ["--input", "{d}", "--in-place", "--copy-unchanged"],
    ["--input", "{d}", "--in-place", "--progress-seconds", "0"],
    ["--input", "{d}", "--in-place", "--stale-temp-seconds", "nan"],
    ["--input", "{d}", "--in-place", "--conf", "spark.executor.memory"],
    ["--input", "{d}", "--in-place", "--conf", "=1"],
    ["--input", "{d}", "--output", "{d}/o", "--table-format", "delta"],
    ["--iceberg-table", "c.n.t", "--output", "{d}/o"],
    ["--input", "{d}", "--in-place", "--report", "{d}/a.parquet/report.jsonl"],  # parent: a file
    ["--input", "{d}", "--in-place", "--report", "{d}"],  # a directory
], ids=lambda a: " ".join(a) or "no-args")
def test_usage_errors(tmp_path, capsys, argv):
    d = tmp_path / "d"
    f = write_arrow(d / "a.parquet", 0, n=100)
    before = f.read_bytes(), f.stat().st_mtime_ns
    assert main([a.format(d=d) for a in argv], spark=SENTINEL_SPARK) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("pageindex-job: error: "), err
    assert (f.read_bytes(), f.stat().st_mtime_ns) == before
    assert sorted(p.name for p in d.iterdir()) == ["a.parquet"]


@pytest.mark.parametrize("value, named", [("12x", "'12x'"), ("0", "'0'"), ("inf", "'inf'")])
def test_size_errors_name_the_option(capsys, value, named):
    argv = ["--input", "x", "--in-place", "--target-task-bytes", value]
    assert check_argv(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pageindex-job: error: --target-task-bytes {named}: not a size") and err.count("\n") == 1


def test_check_argv_and_help(capsys):
    assert check_argv(["--input", "x", "--in-place", "--conf", "spark.executor.memory=4g"]) == 0
    assert capsys.readouterr() == ("", "")
    assert check_argv(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: pageindex-job ") and "--conf KEY=VALUE" in out
    for code in ("0", "1", "2", "3"):
        assert re.search(rf"^  {code}  \S", out, re.M), out
    assert check_argv(["--input", "x"]) == 2
    assert capsys.readouterr().err.startswith("pageindex-job: error: one of the arguments --in-place --output")


def _python(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=REPO_ROOT,
                          timeout=300, check=False)


def test_without_pyspark_one_line_and_exit_2(tmp_path):
    """The console script where pyspark cannot be imported (sys.modules["pyspark"] = None
    makes its import fail): one line saying what to install, no file touched."""
    f = write_arrow(tmp_path / "d" / "a.parquet", 0, n=100)
    before = f.read_bytes(), f.stat().st_mtime_ns
    script = ("import sys; sys.modules['pyspark'] = None; "
              f"sys.argv = ['pageindex-job', '--input', {str(f.parent)!r}, '--in-place']; "
              "from pageindex.job.spark import console; console()")
    proc = _python("-c", script)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == "pageindex-job: error: pageindex-job needs pyspark: pip install 'pageindex[spark]'\n"
    assert (f.read_bytes(), f.stat().st_mtime_ns) == before


def test_spark_that_cannot_start_is_configuration(tmp_path):
    """A SPARK_HOME without Spark: one line, exit 2 (a retry would only repeat it)."""
    f = write_arrow(tmp_path / "d" / "a.parquet", 0, n=100)
    before = f.read_bytes(), f.stat().st_mtime_ns
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "SPARK_HOME": str(tmp_path / "no-spark")}
    proc = subprocess.run([sys.executable, "-m", "pageindex.job", "--input", str(f.parent), "--in-place"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("pageindex-job: error: Spark could not start: ")
    assert (f.read_bytes(), f.stat().st_mtime_ns) == before


def test_python_m_pageindex_job():
    proc = _python("-m", "pageindex.job", "--help")
    assert proc.returncode == 0 and proc.stdout.startswith("usage: pageindex-job "), proc.stderr
    assert "exit codes:" in proc.stdout
    proc = _python("-m", "pageindex.job", "--input", "x", "--in-place", "--target-task-bytes", "12x")
    assert proc.returncode == 2 and proc.stderr.startswith("pageindex-job: error: --target-task-bytes '12x'")


def test_config_is_parsed_once_and_frozen():
    import dataclasses

    config = JobConfig.from_argv(["--input", "a", "b", "--output", "o", "--target-task-bytes", "1m",
                                  "--conf", "k=v=w", "--bloom-filter", "auto"])
    assert config.inputs == ("a", "b") and config.target_task_bytes == 1 << 20
    assert config.spark_conf == (("k", "v=w"),) and config.options.output == "o"
    assert config.options.bloom_filter == "auto" and not config.in_place
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.max_failures = 3


def test_the_job_scans_a_file_on_one_thread_per_task():
    """A task per core is the job's model: its files are not given more threads (retrofit's threads)."""
    assert JobConfig.from_argv(["--input", "a", "--in-place"]).options.threads == 1
    with pytest.raises(UsageError):
        JobConfig.from_argv(["--input", "a", "--in-place", "--threads", "2"])


def test_links_and_page_limit_are_options_the_executors_get():
    options = JobConfig.from_argv(["--input", "a", "--in-place", "--follow-links", "--max-page-bytes", "2m"]).options
    assert options.follow_links and options.max_page_bytes == 2 << 20
    options = JobConfig.from_argv(["--input", "a", "--in-place"]).options
    assert not options.follow_links and options.max_page_bytes == 128 << 20
    with pytest.raises(UsageError, match="max-page-bytes"):
        JobConfig.from_argv(["--input", "a", "--in-place", "--max-page-bytes", "12"])


def test_links_outside_the_input_are_not_followed(spark, tmp_path, caplog):
    """A lake holding a link to a file and one to a directory outside it: in place, the job
    indexes the lake's own file and leaves what the links lead to unchanged; --follow-links
    indexes them too."""
    lake, outside = tmp_path / "lake", tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    lake.mkdir()
    for path in (lake / "own.parquet", outside / "victim.parquet", outside / "dir" / "d.parquet"):
        pq.write_table(pa.table({"id": np.arange(3000, dtype=np.int64)}), path, data_page_size=1024)
    (lake / "link.parquet").symlink_to("../outside/victim.parquet")
    (lake / "dirlink").symlink_to("../outside/dir", target_is_directory=True)
    before = {p: p.read_bytes() for p in (outside / "victim.parquet", outside / "dir" / "d.parquet")}
    assert run_job(spark, "--input", lake, "--in-place", "--report", tmp_path / "r.jsonl") == 0
    assert [(Path(r["path"]).name, r["status"]) for r in read_report(tmp_path / "r.jsonl")] == [("own.parquet", "indexed")]
    assert {p: p.read_bytes() for p in before} == before
    assert sum("outside the input" in r.getMessage() for r in caplog.records) == 2
    assert run_job(spark, "--input", lake, "--in-place", "--follow-links", "--report", tmp_path / "f.jsonl") == 0
    assert sorted((Path(r["path"]).name, r["status"]) for r in read_report(tmp_path / "f.jsonl")) == [
        ("d.parquet", "indexed"), ("link.parquet", "indexed"), ("own.parquet", "already_indexed")]


def test_keep_chunk_statistics_leaves_them_and_names_the_copy_apart(spark, tmp_path):
    """--keep-chunk-statistics: a file written without statistics keeps none, the report counts no
    chunk changed; by default its chunks get the exact bounds. Its outputs differ, and so do the
    names a table's indexed copies get."""
    from pageindex.table.naming import indexed_name

    assert not JobConfig.from_argv(["--input", "a", "--in-place", "--keep-chunk-statistics"]).options.chunk_statistics
    assert JobConfig.from_argv(["--input", "a", "--in-place"]).options.chunk_statistics
    kept, filled = tmp_path / "kept", tmp_path / "filled"
    for d in (kept, filled):
        d.mkdir()
        pq.write_table(pa.table({"id": np.arange(5000, dtype=np.int64)}), d / "a.parquet",
                       write_statistics=False, data_page_size=1024)
    assert run_job(spark, "--input", kept, "--in-place", "--keep-chunk-statistics",
                   "--report", tmp_path / "kept.jsonl") == 0
    assert run_job(spark, "--input", filled, "--in-place", "--report", tmp_path / "filled.jsonl") == 0
    [kept_record] = read_report(tmp_path / "kept.jsonl")
    [filled_record] = read_report(tmp_path / "filled.jsonl")
    assert kept_record["status"] == filled_record["status"] == "indexed"
    assert kept_record["chunk_statistics"] == {"copied": 0, "filled": 0, "replaced": 0}
    assert filled_record["chunk_statistics"] == {"copied": 0, "filled": 1, "replaced": 0}
    assert not pq.ParquetFile(kept / "a.parquet").metadata.row_group(0).column(0).is_stats_set
    assert pq.ParquetFile(filled / "a.parquet").metadata.row_group(0).column(0).statistics.max == 4999
    name = indexed_name("t/a.parquet", 9, 64, False)
    assert indexed_name("t/a.parquet", 9, 64, False, chunk_statistics=False) != name


def test_unwritable_report_found_before_any_file_changes(spark, dataset, tmp_path, capsys):
    """The report's parent is a regular file (root ignores permission bits, so not chmod): the
    run stops with exit 2 and one line before any file is touched."""
    root, _ = dataset
    before = snapshot(root)
    blocker = tmp_path / "reports"
    blocker.write_text("a file where the report's directory would be\n")
    report = blocker / "nightly" / "r.parquet"
    assert run_job(spark, "--input", root, "--in-place", "--report", report) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(report) in err and "is not a directory" in err, err
    assert snapshot(root) == before


def test_s3_report_probed_before_anything(s3fs_fs, s3_bucket, s3_server, tmp_path, capsys):
    """On an object store the report path is learned by writing and removing a probe next to
    it: a bucket that does not exist is exit 2 before Spark or any file; one that does is
    left as it was."""
    d = tmp_path / "d"
    write_arrow(d / "a.parquet", 0, n=100)
    args = ["--input", str(d), "--in-place", "--s3-endpoint-url", s3_server, "--report"]
    assert main([*args, "s3://no-such-bucket-here/r.jsonl"], spark=SENTINEL_SPARK) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "s3://no-such-bucket-here/r.jsonl" in err, err
    # the probe passes; the missing input then ends the run (still before Spark is touched)
    missing = ["--input", str(tmp_path / "missing"), *args[2:]]
    assert main([*missing, f"s3://{s3_bucket}/reports/r.jsonl"], spark=SENTINEL_SPARK) == 2
    assert "input does not exist" in capsys.readouterr().err
    s3fs_fs.invalidate_cache()
    assert s3fs_fs.find(s3_bucket) == []


def test_unknown_table_is_a_usage_error(spark, tmp_path, capsys):
    assert run_job(spark, "--table", "default.no_such_table_here", "--in-place") == 2
    err = capsys.readouterr().err
    assert err == "pageindex-job: error: table default.no_such_table_here does not exist in the catalog\n"


def test_conf_on_a_running_session(spark, tmp_path, capsys):
    """A session given (or reused) keeps its static settings: a --conf Spark can set at runtime
    is set; a differing static or core one is a usage error, named, before any file."""
    d = tmp_path / "d"
    f = write_arrow(d / "a.parquet", 0, n=1_000)
    key = "spark.sql.files.maxRecordsPerFile"
    old = spark.conf.get(key)
    try:
        assert run_job(spark, "--input", d, "--in-place", "--dry-run", "--conf", f"{key}=77") == 0
        assert spark.conf.get(key) == "77"
    finally:
        spark.conf.set(key, old)
    before = f.read_bytes()
    for setting in ("spark.sql.catalogImplementation=hive", "spark.executor.memory=3g"):
        for given in (spark, None):  # given, or found running (a notebook's) and reused
            capsys.readouterr()
            argv = ["--input", str(d), "--in-place", "--conf", setting]
            assert main(argv, spark=given) == 2, (setting, given)
            err = capsys.readouterr().err
            assert len(err.strip().splitlines()) == 1 and f"--conf {setting} cannot apply" in err, err
    assert f.read_bytes() == before
    assert main(["--input", str(d), "--in-place", "--dry-run", "--conf", "spark.sql.shuffle.partitions=2"]) == 0


# --------------------------------------------------------------------------- --table

def test_catalog_table(spark, dataset, tmp_path):
    root, firsts = dataset
    name = "default.pageindex_job_events"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} USING parquet LOCATION '{root}'")
    spark.sql(f"MSCK REPAIR TABLE {name}")  # register the Hive partitions
    try:
        probe = firsts["day=2024-01-03/part-00002-arrow.parquet"] + 777
        assert spark.table(name).where(f"k = {probe}").count() == 1
        report = tmp_path / "r.jsonl"
        assert run_job(spark, "--table", name, "--in-place", "--report", report) == 0
        recs = by_path(read_report(report))
        assert set(recs) == {str(root / rel) for rel in firsts}
        assert {r["status"] for r in recs.values()} == {"indexed"}
        # the job changed the table's files under the session's cached file listing
        assert spark.table(name).where(f"k = {probe}").count() == 1
        assert spark.table(name).count() == len(firsts) * ROWS
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


class _SqlOnly:
    """A session as Spark Connect offers it: SQL and the catalog API, no JVM behind it."""

    def __init__(self, spark) -> None:
        self.sql, self.catalog = spark.sql, spark.catalog


def catalog_path(location: str) -> Path:
    assert location.startswith("file:/"), location
    return Path(location[len("file:"):])


def test_catalog_partitions_wherever_they_live(spark, tmp_path, caplog):
    """A partitioned catalog table is read as Spark reads it: the files of every partition the
    catalog lists, one added with a LOCATION outside the table root included, and nothing from
    a folder below the root that is no partition; --output mirrors the table's partitions."""
    root = tmp_path / "wh" / "events"
    name = "default.pageindex_job_partitions"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} (k BIGINT, v DOUBLE, s STRING, day INT) USING parquet "
              f"PARTITIONED BY (day) LOCATION '{root}'")
    try:
        inside = [write_arrow(root / f"day={d}" / "part-00000.parquet", d * ROWS, n=4_000) for d in (1, 2)]
        outside = write_arrow(tmp_path / "elsewhere" / "d3" / "part-00000.parquet", 3 * ROWS, n=4_000)
        stray = write_arrow(root / "day=9" / "part-00000.parquet", 9 * ROWS, n=4_000)
        spark.sql(f"ALTER TABLE {name} ADD PARTITION (day=1) PARTITION (day=2)")
        spark.sql(f"ALTER TABLE {name} ADD PARTITION (day=3) LOCATION '{outside.parent}'")
        described = catalog.describe(spark, name)
        assert [(p.spec_path, catalog_path(p.location)) for p in described.partitions] == [
            ("day=1", root / "day=1"), ("day=2", root / "day=2"), ("day=3", outside.parent)]
        # without a JVM (Spark Connect) the same answer from SHOW PARTITIONS and DESCRIBE
        assert catalog.describe(_SqlOnly(spark), name) == described
        three_parts = catalog.describe(spark, f"spark_catalog.{name}")
        assert (three_parts.location, three_parts.partitions) == (described.location, described.partitions)
        query = f"SELECT day, count(*) AS n, sum(k) AS total FROM {name} GROUP BY day ORDER BY day"
        rows_before = [tuple(r) for r in spark.sql(query).collect()]
        assert [r[0] for r in rows_before] == [1, 2, 3]
        stray_before = snapshot(stray.parent)

        out = tmp_path / "copy"
        assert run_job(spark, "--table", name, "--output", out) == 0
        assert set(all_files(out)) == {"day=1/part-00000.parquet", "day=2/part-00000.parquet",
                                       "day=3/part-00000.parquet"}
        copied = spark.read.parquet(str(out)).groupBy("day").count().orderBy("day").collect()
        assert [(r["day"], r["count"]) for r in copied] == [(d, 4_000) for d in (1, 2, 3)]

        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="pageindex.job.spark"):
            assert run_job(spark, "--table", name, "--in-place") == 0
        assert any(re.fullmatch(rf"found 3 files \(\d+ bytes\) in 3 partitions of table {name}", m)
                   for m in caplog.messages), caplog.messages
        for f in [*inside, outside]:
            md = pq.ParquetFile(f).metadata
            assert md.row_group(0).column(0).has_column_index, f
        assert snapshot(stray.parent) == stray_before
        assert [tuple(r) for r in spark.sql(query).collect()] == rows_before
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


def _planned_bytes(spark, name: str) -> int:
    """The size Spark's plan gives the table: the sum of the file lengths in its cached listing."""
    plan = spark.table(name)._jdf.queryExecution().optimizedPlan()
    return int(str(plan.stats().sizeInBytes()))  # a Scala BigInt (py4j may hand it over as int)


def test_in_place_refreshes_spark_cache_of_the_table(spark, tmp_path):
    """Spark caches a table's file listing, lengths included (its plans' statistics come from
    it); an in-place run changes every file's length under it, and REFRESH TABLE (run by the
    job) makes the session list the files anew."""
    root = tmp_path / "plain"
    files = [write_arrow(root / f"part-0000{i}.parquet", i * 4_000, n=4_000) for i in range(2)]
    name = "default.pageindex_job_refresh"
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} USING parquet LOCATION '{root}'")
    try:
        assert spark.table(name).where("k = 1234").count() == 1
        assert _planned_bytes(spark, name) == sum(f.stat().st_size for f in files)
        assert run_job(spark, "--table", name, "--in-place", "--dry-run") == 0
        assert run_job(spark, "--table", name, "--in-place") == 0
        assert _planned_bytes(spark, name) == sum(f.stat().st_size for f in files)
        assert all(pq.ParquetFile(f).metadata.row_group(0).column(0).has_column_index for f in files)
        assert spark.table(name).where("k = 1234").count() == 1
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")


# --------------------------------------------------------------------------- temporaries, races

def test_stale_temporaries_removed_fresh_ones_kept(spark, tmp_path):
    d = tmp_path / "t"
    f = write_arrow(d / "p=1" / "a.parquet", 0, n=4_000)
    stale = d / "p=1" / f".a.parquet{TEMP_TAG}{'0' * 32}"
    fresh = d / "p=1" / f".a.parquet{TEMP_TAG}{'1' * 32}"
    neighbour = d / "p=1" / f".b.parquet{TEMP_TAG}{'2' * 32}"  # another file's: not ours to judge
    for t in (stale, fresh, neighbour):
        t.write_bytes(b"partial")
    old = time.time() - 7200
    for t in (stale, neighbour):
        os.utime(t, (old, old))
    report = tmp_path / "r.jsonl"
    assert run_job(spark, "--input", d, "--in-place", "--report", report) == 0
    assert [r["status"] for r in read_report(report)] == ["indexed"]
    assert not stale.exists() and fresh.exists() and neighbour.exists()
    os.utime(fresh, (old, old))
    assert run_job(spark, "--input", d, "--in-place", "--report", report) == 0
    assert [r["status"] for r in read_report(report)] == ["already_indexed"]
    assert not fresh.exists(), "an already indexed file's stale temporary is removed too"
    assert verify(str(f)).ok


def check_valid(root: Path, firsts: dict[str, int], data_before: dict[str, pa.Table]) -> None:
    for rel in firsts:
        assert read_data(root / rel).equals(data_before[rel]), rel
        result = verify(str(root / rel))
        assert result.ok and result.chunks_with_column_index == result.chunks, rel
    assert not temporaries(root)


def test_two_concurrent_job_runs(spark, dataset, tmp_path):
    root, firsts = dataset
    data_before = {rel: read_data(root / rel) for rel in firsts}
    codes: list[int | None] = [None, None]
    errors: list[BaseException] = []

    def go(i: int) -> None:
        try:
            codes[i] = run_job(spark, "--input", root, "--in-place", "--report", tmp_path / f"r{i}.jsonl")
        except BaseException as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors and None not in codes, (errors, codes)
    check_valid(root, firsts, data_before)
    statuses = [r["status"] for i in range(2) for r in read_report(tmp_path / f"r{i}.jsonl")]
    assert set(statuses) <= {"indexed", "already_indexed", "changed", "failed"}
    # every file ends indexed once; a rerun finds nothing to do
    report = tmp_path / "after.jsonl"
    assert run_job(spark, "--input", root, "--in-place", "--report", report) == 0
    assert {r["status"] for r in read_report(report)} == {"already_indexed"}


def test_racing_process_file_calls(dataset_template, tmp_path):
    src, firsts = dataset_template
    root = tmp_path / "events"
    shutil.copytree(src, root)
    data_before = {rel: read_data(root / rel) for rel in firsts}
    files = [InputFile(str(root / rel), (root / rel).stat().st_size, rel) for rel in firsts]
    statuses: list[str] = []
    lock = threading.Lock()

    def go(f: InputFile, barrier: threading.Barrier) -> None:
        barrier.wait()
        rec = process_file(f, JobOptions())
        with lock:
            statuses.append(rec["status"])

    for f in files[:6]:
        barrier = threading.Barrier(3)
        threads = [threading.Thread(target=go, args=(f, barrier)) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    check_valid(root, {f.relative: 0 for f in files[:6]}, data_before)
    assert statuses.count("indexed") >= 6


def test_progress_line_counts_bytes_and_gives_an_eta():
    from pageindex.job.spark import progress_line

    # a quarter of the bytes in 60 s: three quarters left take 180 s, whatever the files' count says
    assert progress_line(9, 10, 1 << 30, 4 << 30, 2, 60.0) == (
        "progress: 9/10 files, 1.0 GiB of 4.0 GiB (25%) done, 2 task(s) running, about 0h 03m 00s left")
    assert progress_line(0, 3, 0, 3000, 1, 5.0) == "progress: 0/3 files, 0 B of 2.9 KiB (0%) done, 1 task(s) running"
    assert progress_line(3, 3, 3000, 3000, 0, 5.0).endswith("(100%) done, 0 task(s) running")
