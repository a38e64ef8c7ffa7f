"""A job task's files in turn (pageindex.job.process.process_task) on the moto S3 server: the next
file is opened while the current one is committed, and nothing else changes.

Orderings and counts from the request log of the proxy in front of moto, not timings.
"""
from __future__ import annotations

import io
import posixpath
import threading
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex.errors import StorageError
from pageindex.io.discovery import InputFile
from pageindex.job.process import JobOptions, process_task
from pageindex.retrofit import Status
from tests.helpers import s3 as s3h
from tests.helpers.fault_proxy import FaultProxy, Request

FILES = 3
# How long a file's last request waits for the next file's footer read before going on without
# it: only a run that does not open ahead ever waits this long.
WAIT_SECONDS = 10.0
RUN_ONLY_KEYS = ("seconds",)


def _parquet(seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    rows = 4_000
    table = pa.table({"id": np.arange(rows, dtype=np.int64), "x": rng.random(rows)})
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=rows // 2, data_page_size=4 << 10, write_page_index=False)
    return out.getvalue()


@pytest.fixture(scope="module")
def bucket(s3_server) -> str:
    name = s3h.create_bucket(s3_server, "overlap")
    client = s3h.boto3_client(s3_server)
    for i in range(FILES):
        client.put_object(Bucket=name, Key=f"plain/f{i}.parquet", Body=_parquet(i))
    client.put_object(Bucket=name, Key="plain/notes.parquet", Body=b"not parquet at all")
    return name


def _copies(s3_server: str, bucket: str, prefix: str, names: list[str]) -> list[InputFile]:
    client = s3h.boto3_client(s3_server)
    files = []
    for name in names:
        key = f"{prefix}/{name}"
        if name != "missing.parquet":
            client.copy_object(Bucket=bucket, Key=key, CopySource={"Bucket": bucket, "Key": f"plain/{name}"})
        files.append(InputFile(f"s3://{bucket}/{key}", 0, name))
    return files


def _run(proxy: FaultProxy, files: list[InputFile], ahead: bool) -> list[dict]:
    options = JobOptions(storage_options=s3h.storage_options(proxy.endpoint))
    return list(process_task([(f, None) for f in files], options, open_ahead=ahead))


def _per_file(proxy: FaultProxy) -> Counter:
    """Requests by file name (the bucket's own requests under its name) and operation."""
    return Counter((posixpath.basename(r.path), r.operation) for r in proxy.log)


def _same(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in RUN_ONLY_KEYS + ("path", "output")}


def test_next_file_is_opened_while_the_current_one_commits(s3_server, bucket):
    names = [f"f{i}.parquet" for i in range(FILES)]
    ordered: dict[str, bool] = {}
    footer_read = {name: threading.Event() for name in names}

    def hold_commits(request: Request) -> str:
        """Holds a file's commit (its PutObject, its last request) until the next file's footer
        read has arrived: it can only arrive while the commit is held if it was issued ahead."""
        name = posixpath.basename(request.path)
        if request.operation == "GetObject" and name in footer_read:
            footer_read[name].set()
        if request.operation == "PutObject" and name in names[:-1]:
            following = names[names.index(name) + 1]
            ordered[name] = footer_read[following].wait(WAIT_SECONDS)
        return "forward"

    with FaultProxy(s3_server) as proxy:
        one_by_one = _run(proxy, _copies(s3_server, bucket, "one-by-one", names), ahead=False)
        requests_one_by_one = _per_file(proxy)
        proxy.reset(hold_commits)
        ahead = _run(proxy, _copies(s3_server, bucket, "ahead", names), ahead=True)
        requests_ahead = _per_file(proxy)
    assert ordered == {name: True for name in names[:-1]}
    assert [r["status"] for r in ahead] == [Status.INDEXED] * FILES
    assert [_same(r) for r in ahead] == [_same(r) for r in one_by_one]
    assert requests_ahead == requests_one_by_one
    assert requests_ahead[(names[1], "HeadObject")] == 2  # its version, then the check before its commit
    client = s3h.boto3_client(s3_server)
    for name in names:
        done = client.get_object(Bucket=bucket, Key=f"ahead/{name}")["Body"].read()
        assert done == client.get_object(Bucket=bucket, Key=f"one-by-one/{name}")["Body"].read()
        meta = pq.ParquetFile(io.BytesIO(done)).metadata
        assert all(meta.row_group(g).column(c).has_column_index
                   for g in range(meta.num_row_groups) for c in range(meta.num_columns))


def test_errors_opening_ahead_are_each_files_own(s3_server, bucket):
    """A file that is missing or not Parquet gets the record it gets when opened in its turn, and
    the files around it are processed as ever."""
    names = ["f0.parquet", "missing.parquet", "notes.parquet", "f1.parquet"]
    with FaultProxy(s3_server) as proxy:
        records = {ahead: _run(proxy, _copies(s3_server, bucket, f"errors-{ahead}", names), ahead)
                   for ahead in (False, True)}
    assert [r["status"] for r in records[True]] == [Status.INDEXED, Status.FAILED, Status.SKIPPED, Status.INDEXED]
    assert records[True][1]["reason"].startswith(StorageError.__name__)
    assert [_same(r) for r in records[True]] == [_same(r) for r in records[False]]



def _indexed_parquet(seed: int, rows: int = 400_000) -> bytes:
    """A file with a page index, several times the tail a retrofit reads first (6.4 MB, 1 MiB)."""
    rng = np.random.default_rng(seed)
    out = io.BytesIO()
    pq.write_table(pa.table({"id": np.arange(rows, dtype=np.int64), "x": rng.random(rows)}), out,
                   row_group_size=rows // 2, data_page_size=64 << 10, write_page_index=True)
    return out.getvalue()


def test_copy_unchanged_within_a_store_is_copied_by_the_store(s3_server, bucket):
    """--copy-unchanged from S3 to S3: a file that needs no change (already indexed, or not
    Parquet) is copied by CopyObject, its body never downloaded; its record names the copy."""
    client = s3h.boto3_client(s3_server)
    indexed = _indexed_parquet(7)
    client.put_object(Bucket=bucket, Key="copy-src/indexed.parquet", Body=indexed)
    client.put_object(Bucket=bucket, Key="copy-src/notes.txt", Body=b"not parquet at all")
    files = [InputFile(f"s3://{bucket}/copy-src/{name}", size, name)
             for name, size in (("indexed.parquet", len(indexed)), ("notes.txt", 18))]
    with FaultProxy(s3_server) as proxy:
        options = JobOptions(output=f"s3://{bucket}/mirror", copy_unchanged=True,
                             storage_options=s3h.storage_options(proxy.endpoint))
        records = list(process_task([(f, f"s3://{bucket}/mirror/{f.relative}") for f in files], options))
        operations = proxy.stats.by_operation()
        downloaded = proxy.stats.bytes_returned("GetObject")
    assert [r["status"] for r in records] == [Status.ALREADY_INDEXED, Status.SKIPPED]
    assert [r["output"] for r in records] == [f"s3://{bucket}/mirror/{f.relative}" for f in files]
    assert operations.get("CopyObject") == 2 and "PutObject" not in operations, operations
    assert downloaded < len(indexed) // 4, "the footer is read, the body is not"
    assert client.get_object(Bucket=bucket, Key="mirror/indexed.parquet")["Body"].read() == indexed
    assert client.get_object(Bucket=bucket, Key="mirror/notes.txt")["Body"].read() == b"not parquet at all"


def test_copy_unchanged_local_copies_leave_no_temporary(tmp_path):
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    data = _indexed_parquet(8)
    (src / "indexed.parquet").write_bytes(data)
    file = InputFile(str(src / "indexed.parquet"), len(data), "indexed.parquet")
    [record] = process_task([(file, str(out / "deep" / "indexed.parquet"))],
                            JobOptions(output=str(out), copy_unchanged=True))
    assert record["status"] == Status.ALREADY_INDEXED and record["output"] == str(out / "deep" / "indexed.parquet")
    assert (out / "deep" / "indexed.parquet").read_bytes() == data
    assert [p.name for p in out.rglob("*") if p.is_file()] == ["indexed.parquet"]
