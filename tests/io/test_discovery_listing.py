"""Discovery of many inputs and partitions on an object store (pageindex.io.discovery.discover_each,
catalog.table_files): listed several at once, with the same requests and the same result as one by
one, and each ancestor's table-format check made once, not once per partition."""
from __future__ import annotations

import threading
from collections import Counter

import pytest

from pageindex.io import discovery
from pageindex.io.discovery import discover, discover_each, find
from pageindex.job.catalog import CatalogTable, Partition, table_files
from tests.helpers import s3 as s3h
from tests.helpers.fault_proxy import FaultProxy

PARTITIONS = 64  # more than LISTING_THREADS


@pytest.fixture(scope="module")
def lake(s3_server) -> str:
    """PARTITIONS partition folders (one data file and a _SUCCESS each) under t/, and as many
    partitions of another table kept elsewhere (elsewhere/p=N/); no object is ever opened."""
    bucket = s3h.create_bucket(s3_server)
    client = s3h.boto3_client(s3_server)
    for i in range(PARTITIONS):
        for key in (f"t/day={i:03d}/part-0.parquet", f"t/day={i:03d}/_SUCCESS",
                    f"elsewhere/p={i:03d}/part-0.parquet"):
            client.put_object(Bucket=bucket, Key=key, Body=b"x" * (i + 1))
    return bucket


def _requests(proxy: FaultProxy) -> Counter:
    return Counter((r.operation, r.path) for r in proxy.log)


def _both_ways(monkeypatch, proxy: FaultProxy, run) -> tuple:
    """run() one by one and LISTING_THREADS at once: each one's result and requests."""
    out = []
    for threads in (1, discovery.LISTING_THREADS):
        monkeypatch.setattr(discovery, "LISTING_THREADS", threads)
        proxy.reset()
        out.append((run(), _requests(proxy)))
    return tuple(out)


def test_many_inputs_listed_at_once_give_the_same_files_and_requests(s3_server, lake, monkeypatch):
    inputs = [f"s3://{lake}/t/day={i:03d}" for i in range(PARTITIONS)]
    with FaultProxy(s3_server) as proxy:
        options = s3h.storage_options(proxy.endpoint)
        (serial, serial_requests), (parallel, parallel_requests) = _both_ways(
            monkeypatch, proxy, lambda: discover(inputs, options))
    assert parallel == serial
    assert [f.url for f in parallel.files] == [f"s3://{lake}/t/day={i:03d}/part-0.parquet" for i in range(PARTITIONS)]
    assert [f.size for f in parallel.files] == [i + 1 for i in range(PARTITIONS)]
    assert parallel_requests == serial_requests
    assert sum(parallel_requests.values()) >= PARTITIONS  # a listing each, at least


def test_a_glob_over_partitions_lists_them_at_once_with_the_same_requests(s3_server, lake, monkeypatch):
    with FaultProxy(s3_server) as proxy:
        options = s3h.storage_options(proxy.endpoint)
        (serial, serial_requests), (parallel, parallel_requests) = _both_ways(
            monkeypatch, proxy, lambda: discover([f"s3://{lake}/t/day=*"], options))
    assert parallel == serial and len(parallel.files) == PARTITIONS
    assert [f.relative for f in parallel.files][:2] == ["day=000/part-0.parquet", "day=001/part-0.parquet"]
    assert parallel_requests == serial_requests


def test_each_ancestor_is_checked_for_a_table_root_once(s3_server, lake):
    """Every partition given lies in t/: whether t/ (or the bucket) is a Delta, Hudi or Iceberg
    root is asked once, not once per partition."""
    with FaultProxy(s3_server) as proxy:
        discover([f"s3://{lake}/t/day={i:03d}" for i in range(PARTITIONS)], s3h.storage_options(proxy.endpoint))
        requests = _requests(proxy)
    for marker in ("t/_delta_log", "t/.hoodie", "_delta_log", ".hoodie"):
        assert requests[("HeadObject", f"/{lake}/{marker}")] == 1, marker


def test_catalog_partitions_elsewhere_listed_at_once(s3_server, lake, monkeypatch):
    table = CatalogTable("db.t", f"s3://{lake}/t", "parquet", tuple(
        Partition(f"s3://{lake}/elsewhere/p={i:03d}", f"p={i:03d}") for i in range(PARTITIONS)) + (
        Partition(f"s3://{lake}/gone/p=x", "p=x"),))  # a listed partition whose folder is gone
    with FaultProxy(s3_server) as proxy:
        options = s3h.storage_options(proxy.endpoint)
        (serial, serial_requests), (parallel, parallel_requests) = _both_ways(
            monkeypatch, proxy, lambda: table_files(table, options))
    assert parallel == serial
    assert [f.relative for f in parallel.files][:2] == ["p=000/part-0.parquet", "p=001/part-0.parquet"]
    assert len(parallel.files) == PARTITIONS
    assert parallel_requests == serial_requests


def test_listings_overlap(s3_server, lake, monkeypatch):
    """Two inputs' listings are in flight together: each waits at a barrier for the other
    (listed one by one, the first would wait alone until the barrier gives up)."""
    barrier = threading.Barrier(2, timeout=60)

    def waiting_find(fs, path, confine=None):
        barrier.wait()
        return find(fs, path, confine)

    monkeypatch.setattr(discovery, "find", waiting_find)
    found = discover_each([f"s3://{lake}/t/day=000", f"s3://{lake}/t/day=001"], s3h.storage_options(s3_server))
    assert [len(d.files) for d in found] == [1, 1]
