"""The run state on S3 (moto behind the counting proxy): a rerun over 300 indexed objects and 10
new ones opens the 10 and sends no request for any of the 300, from the CLI and from the job.

The proxy logs every request with its path: the assertions are on which objects were asked for,
not only on totals. Counts, not timings.
"""
from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex import cli
from pageindex.job.spark import main as job_main
from pageindex.job.state import read_state
from tests.helpers import s3 as s3h
from tests.helpers.fault_proxy import FaultProxy
from tests.helpers.report_parts import report_records

pytestmark = pytest.mark.s3

OLD, NEW = 300, 10
# Over 5 MiB: committed by UploadPartCopy + CompleteMultipartUpload, whose ETag the state records.
BIG_ROWS = 700_000


def _parquet(rows: int, seed: int) -> bytes:
    values = np.random.default_rng(seed).integers(0, 1 << 62, rows)
    out = io.BytesIO()
    pq.write_table(pa.table({"k": np.arange(rows, dtype=np.int64), "v": values}), out,
                   data_page_size=1 << 14, compression="none", use_dictionary=False)
    return out.getvalue()


def _key(i: int) -> str:
    return f"lake/day{1 if i < OLD else 2}/f{i:03d}.parquet"


def _upload(client, bucket: str, indices: range, big: int | None = None) -> None:
    small = _parquet(2_000, 1)
    for i in indices:
        body = _parquet(BIG_ROWS, 2) if i == big else small
        client.put_object(Bucket=bucket, Key=_key(i), Body=body)


def _touched(proxy: FaultProxy, bucket: str, keys: set[str]) -> list[str]:
    """The logged requests (operation and key) that named one of `keys`."""
    out = []
    for r in proxy.stats.log:
        path = unquote(r.path.split("?", 1)[0]).removeprefix(f"/{bucket}/")
        if path in keys:
            out.append(f"{r.operation} {path}")
    return out


def _records(report: Path) -> dict[str, dict]:
    return {r["path"]: r for r in report_records(report)}


@pytest.fixture
def lake(s3_server):
    bucket = s3h.create_bucket(s3_server, "state")
    client = s3h.boto3_client(s3_server)
    _upload(client, bucket, range(OLD), big=7)
    with FaultProxy(s3_server) as proxy:
        yield bucket, client, proxy


def _check_rerun(bucket: str, client, proxy: FaultProxy, run, tmp_path: Path) -> None:
    """Index the lake with a state, add NEW objects and run again: only the new ones are asked for."""
    state = f"s3://{bucket}/state/lake.parquet"
    assert run(state, tmp_path / "first.jsonl") == 0
    first = _records(tmp_path / "first.jsonl")
    assert {r["status"] for r in first.values()} == {"indexed"} and len(first) == OLD
    _upload(client, bucket, range(OLD, OLD + NEW))
    old_keys = {_key(i) for i in range(OLD)}
    proxy.reset()
    assert run(state, tmp_path / "second.jsonl") == 0
    second = _records(tmp_path / "second.jsonl")
    assert _touched(proxy, bucket, old_keys) == []
    assert {p: r["status"] for p, r in second.items()} == {
        **{f"s3://{bucket}/{_key(i)}": "unchanged" for i in range(OLD)},
        **{f"s3://{bucket}/{_key(i)}": "indexed" for i in range(OLD, OLD + NEW)}}
    requests = proxy.stats.by_operation()
    print(f"\nrerun with --state: {requests}")
    new_keys = {_key(i) for i in range(OLD, OLD + NEW)}
    per_new = {k: [t for t in _touched(proxy, bucket, new_keys) if t.endswith(k)] for k in new_keys}
    assert all(per_new.values()), per_new  # the proxy sees per-object requests: the check can fail
    entries = read_state(state, s3h.storage_options(proxy.endpoint))
    assert len(entries) == OLD + NEW
    for i in (0, 7, OLD):  # a PutObject commit, a multipart commit, a new file
        head = client.head_object(Bucket=bucket, Key=_key(i))
        entry = entries[f"s3://{bucket}/{_key(i)}"]
        assert (entry.size, entry.version) == (head["ContentLength"], head["ETag"])
    # Without the state every object is opened again (the reference the state saves).
    proxy.reset()
    assert run(None, tmp_path / "third.jsonl") == 0
    assert {t.split(" ", 1)[1] for t in _touched(proxy, bucket, old_keys)} == old_keys


def test_cli_rerun_sends_nothing_for_indexed_objects(lake, tmp_path):
    bucket, client, proxy = lake

    def run(state: str | None, report: Path) -> int:
        return cli.main(["retrofit", f"s3://{bucket}/lake", "--s3-endpoint-url", proxy.endpoint,
                         "--report", str(report), "--json", *(["--state", state] if state else [])])

    _check_rerun(bucket, client, proxy, run, tmp_path)


def test_job_rerun_sends_nothing_for_indexed_objects(lake, spark, tmp_path):
    bucket, client, proxy = lake
    keys = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
            "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_EC2_METADATA_DISABLED")
    spark.sparkContext.environment.update({k: os.environ[k] for k in keys})  # the Python workers'

    def run(state: str | None, report: Path) -> int:
        return job_main(["--input", f"s3://{bucket}/lake", "--in-place", "--s3-endpoint-url", proxy.endpoint,
                         "--report", str(report), *(["--state", state] if state else [])], spark=spark)

    _check_rerun(bucket, client, proxy, run, tmp_path)


def test_changed_object_of_the_same_size_is_opened(lake, tmp_path):
    bucket, client, proxy = lake
    state = f"s3://{bucket}/state/small.parquet"
    keys = ["small/a.parquet", "small/b.parquet"]
    for key in keys:
        client.put_object(Bucket=bucket, Key=key, Body=_parquet(2_000, 3))
    args = ["retrofit", f"s3://{bucket}/small", "--s3-endpoint-url", proxy.endpoint, "--state", state, "--json"]
    assert cli.main([*args, "--report", str(tmp_path / "first.jsonl")]) == 0
    indexed = client.get_object(Bucket=bucket, Key=keys[0])["Body"].read()
    # The same bytes but one: the same size, another ETag (a rewrite by another writer).
    cut = len(indexed) // 2
    changed = indexed[:cut] + bytes([indexed[cut] ^ 1]) + indexed[cut + 1:]
    client.put_object(Bucket=bucket, Key=keys[0], Body=changed)
    proxy.reset()
    assert cli.main([*args, "--report", str(tmp_path / "second.jsonl")]) != 2
    second = _records(tmp_path / "second.jsonl")
    assert second[f"s3://{bucket}/{keys[1]}"]["status"] == "unchanged"
    assert second[f"s3://{bucket}/{keys[0]}"]["status"] != "unchanged"
    assert _touched(proxy, bucket, {keys[0]}) and not _touched(proxy, bucket, {keys[1]})


def test_job_checkpoints_the_state_as_tasks_end(lake, spark, tmp_path, monkeypatch):
    """The last file's first request is held until the state on the server already records the
    three files before it: the job wrote it while that file's task was still running."""
    bucket, client, proxy = lake
    keys = [f"ck/f{i}.parquet" for i in range(4)]
    for key in keys:
        client.put_object(Bucket=bucket, Key=key, Body=_parquet(2_000, 4))
    state = f"s3://{bucket}/state/ck.parquet"
    seen: list[set[str]] = []

    def recorded() -> set[str]:  # the job's state: a folder of parts, each task's written as it ends
        listed = client.list_objects_v2(Bucket=bucket, Prefix="state/ck.parquet/").get("Contents", [])
        return {path for item in listed
                for path in pq.read_table(io.BytesIO(client.get_object(Bucket=bucket, Key=item["Key"])["Body"]
                                                     .read())).column("path").to_pylist()}

    def hold_the_last(request):
        if unquote(request.path) == f"/{bucket}/{keys[-1]}" and not seen:
            deadline = time.monotonic() + 120  # a safeguard: without checkpoints this never fills
            while len(recorded()) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            seen.append(recorded())
        return "forward"

    keys_env = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_EC2_METADATA_DISABLED")
    spark.sparkContext.environment.update({k: os.environ[k] for k in keys_env})
    proxy.reset(hold_the_last)
    code = job_main(["--input", f"s3://{bucket}/ck", "--in-place", "--s3-endpoint-url", proxy.endpoint,
                     "--target-task-bytes", "1", "--progress-seconds", "0.05", "--state", state,
                     "--report", str(tmp_path / "r.jsonl")], spark=spark)
    assert code == 0
    # Each request for the last file that arrived while it was held saw the same three (a client
    # retry of the held request waits too).
    assert seen and {frozenset(s) for s in seen} == {frozenset(f"s3://{bucket}/{k}" for k in keys[:3])}
    assert recorded() == {f"s3://{bucket}/{k}" for k in keys}
