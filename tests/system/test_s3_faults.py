"""Transient S3 faults: a fault-injecting proxy (tests/helpers/fault_proxy.py) between s3fs and
the moto server answers 503 SlowDown, 500 InternalError, drops connections (before the body,
after it, or mid-response) on a schedule, and forwards everything else.

- Intermittent faults: retrofit (in place and to another prefix; a small object committed with
  one PUT and a > 5 MiB one with a multipart upload whose prefix part is copied server side) and
  the Spark job still succeed, byte-identical to a fault-free run.
- Permanent faults: the file fails with a StorageError (job: status failed, with that reason),
  the original object is untouched, nothing is left behind, and the retries are bounded (in time
  and in the attempts the proxy saw).
- Backoff: the retried requests' timestamps spread out by the delays botocore's standard mode
  computed (exponential with jitter).

How many attempts one read makes (measured in test_effective_max_attempts): botocore is
configured with retries.max_attempts=8, which botocore counts as *retries*, so 9 attempts per
call; s3fs wraps calls in its own retry loop (5 tries) for SlowDown, connection errors and
truncated bodies, and nests it twice for reads (cat_file); aiohttp also resends an idempotent
request once, at once, when a reused keep-alive connection was dropped; botocore's retry quota
(500 capacity, 5 a retry) caps the total.

Most tests shrink the time actually slept between attempts (``fast_backoff``: botocore still
computes and records its delays, only the sleep is scaled) so permanent faults end in seconds;
test_backoff_spreads_retries and the intermittent job tests run with the real delays.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import botocore.retries.standard as botocore_standard
import pytest
import s3fs

import pageindex
from pageindex.errors import StorageError
from pageindex.io.storage import s3_options
from pageindex.io.transport import Transport, mark_fsspec_reads
from pageindex.job.spark import main as job_main
from tests.helpers import s3 as s3h
from tests.helpers.big_files import write_wide_file
from tests.helpers.fault_proxy import (
    FaultProxy,
    Request,
    every_nth,
    first_of_each,
    forward_all,
    permanent,
)
from tests.helpers.paths import HELPERS_DIR, REPO_ROOT
from tests.helpers.report_parts import report_records

FAULTS = ("503", "500", "drop", "drop_after", "truncate")
BOTOCORE_ATTEMPTS = 9  # retries.max_attempts=8 retries after the first attempt
S3FS_TRIES = 5  # S3FileSystem.retries
BACKOFF_SITE = HELPERS_DIR / "backoff_site"


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> SimpleNamespace:
    """A small file (one PUT) and a big one (prefix > 5 MiB: multipart), with the bytes a local
    retrofit gives (the expected result everywhere: output is deterministic)."""
    d = tmp_path_factory.mktemp("s3faults")
    out = {}
    for name, rows in (("small", 1_500), ("big", 8_000)):
        src = d / f"{name}.parquet"
        original = write_wide_file(src, rows)
        pageindex.retrofit(str(src), str(d / f"{name}.ref.parquet"))
        out[name] = SimpleNamespace(original=original, reference=(d / f"{name}.ref.parquet").read_bytes(),
                                    rows=rows)
    assert len(out["big"].original) > 5 << 20 > len(out["small"].original)
    return SimpleNamespace(**out)


@pytest.fixture
def proxy(s3_server):
    with FaultProxy(s3_server) as p:
        yield p


def proxied_fs(proxy: FaultProxy, transport: Transport = Transport.ARROW, **extra) -> s3fs.S3FileSystem:
    """s3fs through the proxy, with pageindex's retry configuration (what resolve() builds); a
    Source on it reads through `transport`."""
    fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False,
                           **s3_options({**s3h.storage_options(proxy.endpoint), **extra}))
    if transport is Transport.FSSPEC:
        mark_fsspec_reads(fs)
    return fs


@pytest.fixture
def fast_backoff(monkeypatch) -> list[tuple[int, float]]:
    """Record every delay botocore's standard retry mode computes (attempt, seconds) and sleep
    only 1% of it."""
    delays: list[tuple[int, float]] = []
    real = botocore_standard.ExponentialBackoff.delay_amount

    def delay_amount(self, context):
        d = real(self, context)
        delays.append((context.attempt_number, d))
        return d * 0.01

    monkeypatch.setattr(botocore_standard.ExponentialBackoff, "delay_amount", delay_amount)
    return delays


def _uploads(client, bucket: str) -> list:
    return client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])


def _check_uploads_cleaned(proxy: FaultProxy, client, bucket: str, key: str) -> int:
    """After a successful run: the only incomplete uploads left are those whose
    CreateMultipartUpload the server applied but whose response was lost (the client retried,
    and cannot know the first upload's id); the first later run that finds the object indexed
    aborts them.  Returns how many there were."""
    lost = sum(r.operation == "CreateMultipartUpload" and r.action in ("truncate", "lost_response")
               for r in proxy.log)
    proxy.reset(forward_all)
    left = _uploads(client, bucket)
    assert len(left) == lost, (left, lost)
    if left:
        again = pageindex.retrofit(f"{bucket}/{key}", filesystem=proxied_fs(proxy), stale_temp_seconds=0)
        assert again.status == "already_indexed"
        assert _uploads(client, bucket) == []
    return lost


def _mixed(n: int) -> object:
    """Every n-th request fails, the k-th failure with FAULTS[k % len(FAULTS)]."""
    actions = {"k": 0}
    nth = every_nth(n, "fail")

    def schedule(request: Request) -> str:
        if nth(request) == "forward":
            return "forward"
        actions["k"] += 1
        return FAULTS[actions["k"] % len(FAULTS)]
    return schedule


# ---------------------------------------------------------------- the proxy itself

def test_proxy_faults_look_like_s3_faults(proxy, s3_bucket):
    """With botocore's retries off, each action surfaces as the error a client would see."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError, ConnectionClosedError, ResponseStreamingError

    client = boto3.client("s3", endpoint_url=proxy.endpoint, aws_access_key_id=s3h.ACCESS_KEY,
                          aws_secret_access_key=s3h.SECRET_KEY, region_name=s3h.REGION,
                          config=Config(retries={"max_attempts": 0, "mode": "standard"}))
    client.put_object(Bucket=s3_bucket, Key="k", Body=b"x" * 1000)
    assert client.get_object(Bucket=s3_bucket, Key="k")["Body"].read() == b"x" * 1000
    proxy.reset(permanent("503"))
    with pytest.raises(ClientError, match="SlowDown"):
        client.get_object(Bucket=s3_bucket, Key="k")
    proxy.reset(permanent("500"))
    with pytest.raises(ClientError, match="InternalError"):
        client.get_object(Bucket=s3_bucket, Key="k")
    with pytest.raises(ClientError, match="500"):  # a HEAD error has no body to name the code
        client.head_object(Bucket=s3_bucket, Key="k")
    for action in ("drop", "drop_after"):
        proxy.reset(permanent(action))
        with pytest.raises(ConnectionClosedError):
            client.put_object(Bucket=s3_bucket, Key="k", Body=b"y")
    proxy.reset(permanent("truncate"))
    with pytest.raises((ResponseStreamingError, ConnectionError, OSError)):
        client.get_object(Bucket=s3_bucket, Key="k")["Body"].read()
    proxy.reset(forward_all)
    assert client.get_object(Bucket=s3_bucket, Key="k")["Body"].read() == b"x" * 1000
    assert [r.operation for r in proxy.log] == ["GetObject"]
    proxy.reset(permanent("lost_response", operations={"PutObject"}))
    with pytest.raises(ConnectionClosedError):
        client.put_object(Bucket=s3_bucket, Key="lost", Body=b"z")
    assert client.get_object(Bucket=s3_bucket, Key="lost")["Body"].read() == b"z"  # applied


# ---------------------------------------------------------------- intermittent faults

def _run_retrofit(proxy, s3fs_fs, bucket, f, mode, transport=Transport.ARROW):
    """Upload the original directly (not through the proxy), retrofit through the proxy."""
    s3fs_fs.pipe(f"{bucket}/in/a.parquet", f.original)
    fs = proxied_fs(proxy, transport)
    dst = None if mode == "in_place" else f"{bucket}/out/a.parquet"
    result = pageindex.retrofit(f"{bucket}/in/a.parquet", dst, filesystem=fs)
    s3fs_fs.invalidate_cache()
    return result, s3fs_fs.cat_file(dst or f"{bucket}/in/a.parquet")


SCHEDULES = {
    "every_3rd_mixed": lambda: _mixed(3),
    "first_2_of_each_op_mixed": lambda: first_of_each(
        2, lambda r: FAULTS[(r.index + r.op_index) % len(FAULTS)]),
}


@pytest.mark.parametrize("size", ["small", "big"])
@pytest.mark.parametrize("mode", ["in_place", "other_prefix"])
@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_intermittent_faults_retrofit_succeeds(sources, proxy, s3fs_fs, s3_bucket, s3_server,
                                               fast_backoff, size, mode, schedule):
    f = getattr(sources, size)
    proxy.reset(SCHEDULES[schedule]())
    result, data = _run_retrofit(proxy, s3fs_fs, s3_bucket, f, mode)
    assert result.status == "indexed"
    assert data == f.reference, "the result differs from the fault-free output"
    faults = [r for r in proxy.log if r.action != "forward"]
    assert len(faults) >= 3, [(r.operation, r.action) for r in proxy.log]
    ops = {r.operation for r in proxy.log}
    assert ("UploadPartCopy" in ops) == (size == "big") and ("PutObject" in ops) == (size == "small")
    if mode == "other_prefix":
        assert s3fs_fs.cat_file(f"{s3_bucket}/in/a.parquet") == f.original
    _check_uploads_cleaned(proxy, s3h.boto3_client(s3_server), s3_bucket,
                           "in/a.parquet" if mode == "in_place" else "out/a.parquet")


@pytest.mark.parametrize("action", FAULTS)
def test_each_fault_once_per_operation(sources, proxy, s3fs_fs, s3_bucket, s3_server,
                                       fast_backoff, action):
    """The first request of every operation fails with one kind of fault (multipart path, in
    place): every step of the read and of the commit is retried."""
    client = s3h.boto3_client(s3_server)
    proxy.reset(first_of_each(1, action))
    result, data = _run_retrofit(proxy, s3fs_fs, s3_bucket, sources.big, "in_place")
    assert result.status == "indexed" and data == sources.big.reference
    failed_ops = {r.operation for r in proxy.log if r.action != "forward"}
    assert {"HeadObject", "GetObject", "CreateMultipartUpload",
            "UploadPartCopy", "UploadPart", "CompleteMultipartUpload"} <= failed_ops
    _check_uploads_cleaned(proxy, client, s3_bucket, "in/a.parquet")
    # The stale-upload cleanup of the run that finds the object indexed is retried the same way.
    client.create_multipart_upload(Bucket=s3_bucket, Key="in/a.parquet")
    proxy.reset(first_of_each(1, action))
    again = pageindex.retrofit(f"{s3_bucket}/in/a.parquet", filesystem=proxied_fs(proxy), stale_temp_seconds=0)
    assert again.status == "already_indexed"
    assert {"ListMultipartUploads", "AbortMultipartUpload"} <= {r.operation for r in proxy.log if r.action != "forward"}
    assert _uploads(client, s3_bucket) == []


def test_lost_create_multipart_response_leaves_an_upload_a_later_run_aborts(
        sources, proxy, s3fs_fs, s3_bucket, s3_server, fast_backoff):
    """CreateMultipartUpload applied by the server but its response lost: the client's retry
    starts a second upload.  The first is orphaned (the run cannot know its id); the run itself
    succeeds.  A run that commits the object lists no uploads, so the orphan outlives the next
    commit too; the first later run that finds the object indexed aborts it."""
    client = s3h.boto3_client(s3_server)
    proxy.reset(first_of_each(1, "lost_response", operations={"CreateMultipartUpload"}))
    result, data = _run_retrofit(proxy, s3fs_fs, s3_bucket, sources.big, "in_place")
    assert result.status == "indexed" and data == sources.big.reference
    assert proxy.stats.count("CreateMultipartUpload") == 2
    orphans = _uploads(client, s3_bucket)
    print(f"\norphaned uploads after a lost CreateMultipartUpload response: {len(orphans)}")
    assert len(orphans) == 1
    # the original again (uploaded directly), committed again: the orphan stays
    proxy.reset(forward_all)
    result, data = _run_retrofit(proxy, s3fs_fs, s3_bucket, sources.big, "in_place")
    assert result.status == "indexed" and data == sources.big.reference
    assert proxy.stats.count("ListMultipartUploads") == 0
    assert _uploads(client, s3_bucket) == orphans
    proxy.reset(forward_all)
    again = pageindex.retrofit(f"{s3_bucket}/in/a.parquet", filesystem=proxied_fs(proxy),
                               stale_temp_seconds=0)
    assert again.status == "already_indexed"
    assert proxy.stats.count("ListMultipartUploads") == 1 and proxy.stats.count("AbortMultipartUpload") == 1
    assert _uploads(client, s3_bucket) == []


def test_failed_abort_leaves_an_indexed_file_already_indexed(sources, proxy, s3fs_fs, s3_bucket, s3_server,
                                                             fast_backoff):
    """The stale-upload cleanup is best effort: an abort that keeps failing (or finds the upload
    gone, aborted by another run) does not fail the run that found the object indexed; the upload
    stays for a later run."""
    client = s3h.boto3_client(s3_server)
    key = "in/a.parquet"
    s3fs_fs.pipe(f"{s3_bucket}/{key}", sources.big.reference)
    dead = client.create_multipart_upload(Bucket=s3_bucket, Key=key)["UploadId"]
    proxy.reset(permanent("500", operations={"AbortMultipartUpload"}))
    result = pageindex.retrofit(f"{s3_bucket}/{key}", filesystem=proxied_fs(proxy), stale_temp_seconds=0)
    assert result.status == "already_indexed"
    assert proxy.stats.count("AbortMultipartUpload") > 1
    assert [u["UploadId"] for u in _uploads(client, s3_bucket)] == [dead]
    proxy.reset(forward_all)
    again = pageindex.retrofit(f"{s3_bucket}/{key}", filesystem=proxied_fs(proxy), stale_temp_seconds=0)
    assert again.status == "already_indexed" and _uploads(client, s3_bucket) == []


# ---------------------------------------------------------------- backoff

def test_backoff_spreads_retries(sources, proxy, s3fs_fs, s3_bucket, monkeypatch):
    """Real delays: the first three HeadObject attempts fail (500).  The retries arrive after
    the delays botocore drew, each within [0, 2**(k-1)] seconds (exponential, with jitter).
    Reads through s3fs, so that the HEAD is botocore's (Arrow's SDK draws its own delays)."""
    delays: list[tuple[int, float]] = []
    real = botocore_standard.ExponentialBackoff.delay_amount

    def delay_amount(self, context):
        d = real(self, context)
        delays.append((context.attempt_number, d))
        return d

    monkeypatch.setattr(botocore_standard.ExponentialBackoff, "delay_amount", delay_amount)
    proxy.reset(first_of_each(3, "500", operations={"HeadObject"}))
    result, data = _run_retrofit(proxy, s3fs_fs, s3_bucket, sources.small, "other_prefix", Transport.FSSPEC)
    assert result.status == "indexed" and data == sources.small.reference
    heads = [r for r in proxy.log if r.operation == "HeadObject"]
    assert [r.action for r in heads[:4]] == ["500", "500", "500", "forward"]
    gaps = [b.time - a.time for a, b in zip(heads, heads[1:4])]
    assert [a for a, _ in delays[:3]] == [1, 2, 3]
    for k, ((_, delay), gap) in enumerate(zip(delays, gaps), start=1):
        assert 0 <= delay <= 2 ** (k - 1)
        assert gap >= delay - 0.02, (gaps, delays)
        assert gap <= delay + 3.0, (gaps, delays)  # (slack for a loaded machine)
    print(f"\nretry gaps {[round(g, 3) for g in gaps]} for drawn delays {[round(d, 3) for _, d in delays[:3]]}")
    assert len({round(d, 6) for _, d in delays[:3]}) == 3, "no jitter"


# ---------------------------------------------------------------- permanent faults

def _attempts_bound(action: str) -> int:
    """The most requests one logical call can make: s3fs's retry loop twice nested (reads),
    botocore's attempts, aiohttp's immediate resend of an idempotent request on a dropped
    keep-alive connection (botocore's retry quota usually stops it well before)."""
    return S3FS_TRIES * S3FS_TRIES * BOTOCORE_ATTEMPTS * 2


PERMANENT = [("source_reads", a) for a in ("503", "500", "truncate")] + [
    ("commit", a) for a in ("503", "500", "drop", "drop_after", "truncate")]
# (a permanent drop on the source reads is measured in test_effective_max_attempts: s3fs nests
# two retry loops around each read, so it runs into botocore's retry quota and takes long)


@pytest.mark.parametrize("where,action", PERMANENT, ids=[f"{w}-{a}" for w, a in PERMANENT])
def test_permanent_faults_fail_with_storage_error(sources, proxy, s3fs_fs, s3_bucket, s3_server,
                                                   fast_backoff, action, where):
    f = sources.big
    key = f"{s3_bucket}/in/a.parquet"
    s3fs_fs.pipe(key, f.original)
    etag = s3h.boto3_client(s3_server).head_object(Bucket=s3_bucket, Key="in/a.parquet")["ETag"]
    ops = ({"GetObject"} if where == "source_reads"
           else {"UploadPartCopy", "UploadPart", "CompleteMultipartUpload", "PutObject"})
    proxy.reset(permanent(action, operations=ops))
    started = time.monotonic()
    with pytest.raises(StorageError) as info:
        pageindex.retrofit(key, filesystem=proxied_fs(proxy))
    elapsed = time.monotonic() - started
    attempts = sum(r.operation in ops for r in proxy.log)
    print(f"\n{action} on {where}: {type(info.value).__name__} after {attempts} attempts, "
          f"{elapsed:.1f}s (sleeps scaled to 1%), {len(fast_backoff)} backoff delays drawn")
    assert info.value.path == key
    assert 1 < attempts <= _attempts_bound(action)
    assert elapsed < 120
    s3fs_fs.invalidate_cache()
    assert s3fs_fs.cat_file(key) == f.original, "the original object changed"
    assert s3h.boto3_client(s3_server).head_object(Bucket=s3_bucket, Key="in/a.parquet")["ETag"] == etag
    assert _uploads(s3h.boto3_client(s3_server), s3_bucket) == []
    assert s3fs_fs.find(s3_bucket) == [key]


ARROW_RETRIES = 2  # a small retries.max_attempts: Arrow's SDK sleeps its own (unscaled) delays


@pytest.mark.parametrize("action,expected,transport", [
    ("500", BOTOCORE_ATTEMPTS, Transport.FSSPEC),                # botocore only: InternalError is not s3fs-retried
    ("503", S3FS_TRIES * BOTOCORE_ATTEMPTS, Transport.FSSPEC),   # s3fs retries SlowDown around botocore's attempts
    ("truncate", S3FS_TRIES, Transport.FSSPEC),                  # headers arrive; s3fs retries the short body
    ("drop", None, Transport.FSSPEC),                            # s3fs twice nested x botocore x aiohttp, quota-capped
    # Arrow: the configured attempts (retries + 1); on a dropped connection curl may also resend
    # once, at once, as aiohttp does
    *((action, ARROW_RETRIES + 1, Transport.ARROW) for action in ("500", "503", "truncate")),
    ("drop", (ARROW_RETRIES + 1, 2 * (ARROW_RETRIES + 1)), Transport.ARROW),
])
def test_effective_max_attempts(sources, proxy, s3fs_fs, s3_bucket, fast_backoff, action, expected, transport):
    """One ranged read of the source (Source.read -> s3fs cat_file, or Arrow's read_at) against a
    permanent fault: how many requests reach the server before the error surfaces."""
    from pageindex.io.storage import open_source

    key = f"{s3_bucket}/in/a.parquet"
    s3fs_fs.pipe(key, sources.small.original)
    retries = {"config_kwargs": {"retries": {"max_attempts": ARROW_RETRIES, "mode": "standard"}}}
    fs = proxied_fs(proxy, transport, **(retries if transport is Transport.ARROW else {}))
    with open_source(key, fs) as source:
        proxy.reset(permanent(action, operations={"GetObject"}))
        with pytest.raises(Exception) as info:
            source.read(0, 4)
    attempts = proxy.stats.count("GetObject")
    print(f"\none read, permanent {action}: {attempts} attempts, {len(fast_backoff)} botocore "
          f"delays drawn (unscaled they would sleep {sum(d for _, d in fast_backoff):.0f}s), "
          f"surfaced as {type(info.value).__module__}.{type(info.value).__name__}")
    if isinstance(expected, tuple):
        assert expected[0] <= attempts <= expected[1]
    elif expected is not None:
        assert attempts == expected
    else:
        assert BOTOCORE_ATTEMPTS < attempts <= _attempts_bound(action)
    assert isinstance(info.value, StorageError), (
        f"a permanent {action} surfaced as {type(info.value).__name__}, not a StorageError")


def _transport_errors() -> dict:
    """What s3fs lets through untranslated when its and botocore's retries give up on a broken
    connection or response (only botocore ClientErrors become OSError)."""
    import aiohttp
    from botocore.exceptions import (
        ConnectionClosedError,
        EndpointConnectionError,
        ReadTimeoutError,
    )
    from botocore.parsers import ResponseParserError

    return {
        "ConnectionClosedError": lambda: ConnectionClosedError(endpoint_url="http://s3"),
        "EndpointConnectionError": lambda: EndpointConnectionError(endpoint_url="http://s3"),
        "ReadTimeoutError": lambda: ReadTimeoutError(endpoint_url="http://s3"),
        "ResponseParserError": lambda: ResponseParserError("truncated XML"),
        "ClientPayloadError": lambda: aiohttp.ClientPayloadError("Response payload is not completed"),
    }


@pytest.mark.parametrize("error", list(_transport_errors()))
@pytest.mark.parametrize("call", ["Source.read", "file_version", "commit"])
def test_transport_errors_become_storage_errors(error, call):
    """Minimal reproduction, without a network: a filesystem whose calls fail the way s3fs
    fails after its retries give up on a dropped connection or a truncated response.  Source.read,
    file_version (stat) and the S3 commit only catch OSError, so these escape untyped."""
    from pageindex.io import commit as commit_mod
    from pageindex.io.storage import FileVersion, Source, file_version

    make = _transport_errors()[error]

    class BrokenFS:
        protocol = ("s3", "s3a")

        def cat_file(self, path, start=None, end=None):
            raise make()

        def invalidate_cache(self, path=None):
            pass

        def info(self, path):
            raise make()

        def split_path(self, path):
            bucket, key = path.split("/", 1)
            return bucket, key, None

        def call_s3(self, method, **kwargs):
            raise make()

    fs = BrokenFS()
    with pytest.raises(StorageError):
        if call == "Source.read":
            Source("bucket/key", fs, FileVersion(100, None, "etag")).read(0, 4)
        elif call == "file_version":
            file_version(fs, "bucket/key")
        else:
            commit_mod._s3_call(fs, "bucket/key", "put_object", Bucket="bucket", Key="key", Body=b"")


# ---------------------------------------------------------------- the Spark job

@pytest.fixture
def s3_job_spark(spark, s3_server):
    """The shared session with the fake credentials passed to its Python workers (as
    spark.executorEnv.* would on a cluster); restored afterwards."""
    keys = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
            "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_EC2_METADATA_DISABLED")
    env = spark.sparkContext.environment
    saved = dict(env)
    env.update({k: os.environ[k] for k in keys})
    yield spark
    env.clear()
    env.update(saved)


def _job_dataset(s3fs_fs, bucket: str, sources) -> dict[str, SimpleNamespace]:
    files = {"data/day=1/small.parquet": sources.small, "data/day=2/big.parquet": sources.big}
    for rel, f in files.items():
        s3fs_fs.pipe(f"{bucket}/{rel}", f.original)
    return files


def _report(path: Path) -> dict[str, dict]:
    return {r["path"]: r for r in report_records(path)}


@pytest.mark.parametrize("mode", ["in_place", "output"])
def test_job_with_intermittent_faults(s3_job_spark, sources, proxy, s3fs_fs, s3_bucket, s3_server,
                                      tmp_path, mode):
    """Real backoff in the executors; every 4th request through the proxy fails.  Which request
    is the 4th depends on executor timing, so a CreateMultipartUpload whose response is cut may
    or may not occur: the uploads left must be exactly those (see _check_uploads_cleaned)."""
    files = _job_dataset(s3fs_fs, s3_bucket, sources)
    proxy.reset(_mixed(4))
    report = tmp_path / "report.jsonl"
    target = ["--in-place"] if mode == "in_place" else ["--output", f"s3://{s3_bucket}/out/"]
    code = job_main(["--input", f"s3://{s3_bucket}/data", *target, "--s3-endpoint-url",
                     proxy.endpoint, "--report", str(report)], spark=s3_job_spark)
    records = _report(report)
    assert code == 0, records
    assert sum(r.action != "forward" for r in proxy.log) >= 3
    s3fs_fs.invalidate_cache()
    for rel, f in files.items():
        rec = records[f"s3://{s3_bucket}/{rel}"]
        assert rec["status"] == "indexed", rec
        out = rel if mode == "in_place" else rel.replace("data/", "out/", 1)
        assert s3fs_fs.cat_file(f"{s3_bucket}/{out}") == f.reference, out
        if mode == "output":
            assert s3fs_fs.cat_file(f"{s3_bucket}/{rel}") == f.original
    big = "data/day=2/big.parquet" if mode == "in_place" else "out/day=2/big.parquet"
    _check_uploads_cleaned(proxy, s3h.boto3_client(s3_server), s3_bucket, big)


@pytest.mark.parametrize("action", ["500", "503", "drop"])
def test_job_permanent_faults_reported_failed(s3_job_spark, sources, proxy, s3fs_fs, s3_bucket,
                                              s3_server, tmp_path, action):
    """Every request for the big file's key fails; the small file is indexed, the big one is
    reported failed with a StorageError and is untouched.  The executors' backoff sleeps are
    scaled to 1% (tests/helpers/backoff_site) so the retries end in seconds."""
    _job_dataset(s3fs_fs, s3_bucket, sources)
    env = s3_job_spark.sparkContext.environment
    env["PYTHONPATH"] = str(BACKOFF_SITE)
    env["PAGEINDEX_TEST_BACKOFF_SCALE"] = "0.01"
    proxy.reset(permanent(action, path_contains="/big.parquet"))  # (botocore quotes "=")
    report = tmp_path / "report.jsonl"
    started = time.monotonic()
    code = job_main(["--input", f"s3://{s3_bucket}/data", "--in-place", "--s3-endpoint-url",
                     proxy.endpoint, "--report", str(report)], spark=s3_job_spark)
    elapsed = time.monotonic() - started
    records = _report(report)
    bad = records[f"s3://{s3_bucket}/data/day=2/big.parquet"]
    good = records[f"s3://{s3_bucket}/data/day=1/small.parquet"]
    attempts = sum("/big.parquet" in r.path for r in proxy.log)
    print(f"\njob, permanent {action}: {bad['status']} ({bad['reason'][:120]}) after {attempts} "
          f"attempts in {elapsed:.1f}s")
    assert code == 1
    assert good["status"] == "indexed"
    s3fs_fs.invalidate_cache()
    assert s3fs_fs.cat_file(f"{s3_bucket}/data/day=1/small.parquet") == sources.small.reference
    assert s3fs_fs.cat_file(f"{s3_bucket}/data/day=2/big.parquet") == sources.big.original
    assert _uploads(s3h.boto3_client(s3_server), s3_bucket) == []
    assert 1 < attempts <= _attempts_bound(action) and elapsed < 300
    assert bad["status"] == "failed" and bad["reason"].startswith("StorageError"), bad
    assert bad["retryable"] is True  # so the exit code is 1: a scheduler retries


# ---------------------------------------------------------------- exit codes

def test_cli_exit_code_for_a_storage_failure(sources, proxy, s3fs_fs, s3_bucket, tmp_path):
    """A file the store keeps failing (every GetObject 503) fails with a StorageError a retry
    may mend: exit 1, even beside a malformed file (which alone exits 3: tests/cli/test_cli.py). The
    backoff sleeps are scaled to 1% (tests/helpers/backoff_site)."""
    key = f"{s3_bucket}/data/small.parquet"
    s3fs_fs.pipe(key, sources.small.original)
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1" + b"\0" * 200 + b"PAR1")
    proxy.reset(permanent("503", operations={"GetObject"}, path_contains="/small.parquet"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(BACKOFF_SITE), str(REPO_ROOT)]),
           "PAGEINDEX_TEST_BACKOFF_SCALE": "0.01"}
    proc = subprocess.run(
        [sys.executable, "-m", "pageindex", "retrofit", "--json", f"s3://{key}", str(bad),
         "--s3-endpoint-url", proxy.endpoint, "--s3-transport", "fsspec"],
        capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=600, check=False)
    assert proc.returncode == 1, proc.stderr
    records = {r["path"]: r for r in map(json.loads, proc.stdout.splitlines())}
    stored = records[f"s3://{key}"]
    assert stored["status"] == "failed" and stored["reason"].startswith("StorageError"), stored
    assert stored["retryable"] is True and records[str(bad)]["retryable"] is False
    assert proxy.stats.count("GetObject", "503") > 1
    proxy.reset(forward_all)
    s3fs_fs.invalidate_cache()
    assert s3fs_fs.cat_file(key) == sources.small.original
