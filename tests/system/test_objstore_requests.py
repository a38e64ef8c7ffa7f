"""Requests each command makes on an S3 API server (moto behind the counting proxy), as
assertions against the bounds of issue 25: GETs per file at most 2x pyarrow read_table's plus 4,
an in-place commit at most 5 requests more than the dry run and never downloading the prefix.

Counts, not timings: the proxy adds no latency here.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pageindex
from pageindex.inspection import inspect_file
from pageindex.io.discovery import InputFile
from pageindex.job.process import JobOptions, process_file
from pageindex.retrofit import Status
from tests.helpers import s3 as s3h
from tests.helpers.bloom_files import write_filtered
from tests.helpers.fault_proxy import FaultProxy

pytestmark = pytest.mark.s3

ROW_GROUPS = 4
PAGE_BYTES = 64 << 10
COMMIT_EXTRA_REQUESTS = 5  # the bound on what an in-place commit adds to the dry run


def _wide(rng: np.random.Generator) -> pa.Table:
    rows = 6_000  # 120 x 6000 int64: over 5 MiB, so the commit copies the prefix server-side
    columns = {"c000": np.arange(rows, dtype=np.int64)}
    columns.update({f"c{i:03d}": rng.integers(0, 1 << 62, rows) for i in range(1, 120)})
    return pa.table(columns)


def _many_pages(rng: np.random.Generator) -> pa.Table:
    rows = 300_000
    return pa.table({"c000": np.arange(rows, dtype=np.int64), "x": rng.random(rows),
                     "k": rng.integers(0, 1 << 62, rows)})


def _nested(rng: np.random.Generator) -> pa.Table:
    rows = 100_000
    offsets = np.concatenate([[0], np.cumsum(rng.integers(0, 6, rows))]).astype(np.int32)
    return pa.table({
        "c000": np.arange(rows, dtype=np.int64),
        "items": pa.ListArray.from_arrays(pa.array(offsets), pa.array(rng.integers(0, 1 << 40, int(offsets[-1])))),
        "point": pa.StructArray.from_arrays([pa.array(rng.random(rows)), pa.array(rng.random(rows))],
                                            names=["x", "y"]),
    })


KINDS = {"wide": _wide, "many_pages": _many_pages, "nested": _nested}


@dataclass(frozen=True)
class Count:
    requests: dict[str, int]
    get_bytes: int

    @property
    def gets(self) -> int:
        return self.requests.get("GetObject", 0)

    @property
    def total(self) -> int:
        return sum(self.requests.values())


@dataclass(frozen=True)
class Objects:
    proxy: FaultProxy
    client: object
    bucket: str
    plain: dict[str, str]  # kind -> key of the file without page indexes
    indexed: dict[str, str]  # kind -> key of the same table written with page indexes

    def measure(self, action: Callable[[], object]) -> Count:
        self.proxy.reset()
        action()
        return Count(self.proxy.stats.by_operation(), self.proxy.stats.bytes_returned("GetObject"))

    def fs(self):
        return s3h.make_s3fs(self.proxy.endpoint)

    def path(self, key: str) -> str:
        return f"{self.bucket}/{key}"

    def fresh_copy(self, kind: str, name: str) -> str:
        """A new object with the plain file's bytes (copied on the server, not counted)."""
        key = f"{name}/{kind}.parquet"
        self.client.copy_object(Bucket=self.bucket, Key=key,
                                CopySource={"Bucket": self.bucket, "Key": self.plain[kind]})
        return key

    def pyarrow_gets(self, key: str) -> int:
        fs = s3h.pyarrow_s3fs(self.proxy.endpoint)
        return self.measure(lambda: pq.read_table(self.path(key), filesystem=fs, pre_buffer=True)).gets


@pytest.fixture(scope="module")
def objects(s3_server, tmp_path_factory) -> Objects:
    tmp: Path = tmp_path_factory.mktemp("objstore")
    bucket = s3h.create_bucket(s3_server, "requests")
    client = s3h.boto3_client(s3_server)
    plain, indexed = {}, {}
    for kind, make in KINDS.items():
        table = make(np.random.default_rng(25))
        for keys, with_index in ((plain, False), (indexed, True)):
            local = tmp / f"{kind}-{with_index}.parquet"
            pq.write_table(table, local, row_group_size=-(-table.num_rows // ROW_GROUPS),
                           data_page_size=PAGE_BYTES, write_page_index=with_index, compression="snappy")
            keys[kind] = f"{'indexed' if with_index else 'plain'}/{kind}.parquet"
            client.upload_file(str(local), bucket, keys[kind])
    with FaultProxy(s3_server) as proxy:
        yield Objects(proxy, client, bucket, plain, indexed)


def _bound(objects: Objects, key: str) -> int:
    return 2 * objects.pyarrow_gets(key) + 4


def _dry_run_and_in_place(objects: Objects, kind: str, trust: bool, name: str) -> tuple[Count, Count, str]:
    key = objects.fresh_copy(kind, f"{name}-{trust}")
    dry = objects.measure(lambda: pageindex.retrofit(objects.path(key), filesystem=objects.fs(), dry_run=True,
                                                     trust_page_stats=trust))
    done = objects.measure(lambda: pageindex.retrofit(objects.path(key), filesystem=objects.fs(),
                                                      trust_page_stats=trust))
    assert pageindex.verify(objects.path(key), filesystem=objects.fs()).ok
    return dry, done, key


TRUST = pytest.mark.parametrize("trust", [False, True], ids=["exact", "trust"])
OVER_5_MIB = ["wide", "many_pages"]  # committed with UploadPartCopy; nested is one PutObject


@pytest.mark.parametrize("kind", KINDS)
@TRUST
def test_retrofit_dry_run(objects, kind, trust):
    key = objects.plain[kind]
    dry = objects.measure(lambda: pageindex.retrofit(objects.path(key), filesystem=objects.fs(), dry_run=True,
                                                     trust_page_stats=trust))
    assert dry.gets <= _bound(objects, key), dry.requests


@pytest.mark.parametrize("kind", OVER_5_MIB)
@TRUST
def test_in_place_never_downloads_the_prefix(objects, kind, trust):
    dry, done, key = _dry_run_and_in_place(objects, kind, trust, "prefix")
    assert objects.client.head_object(Bucket=objects.bucket, Key=objects.plain[kind])["ContentLength"] > 5 << 20
    assert done.get_bytes <= dry.get_bytes, (dry.get_bytes, done.get_bytes)
    assert done.requests.get("UploadPartCopy") == 1 and "PutObject" not in done.requests, done.requests


@pytest.mark.parametrize("kind", KINDS)
@TRUST
def test_in_place_request_overhead(objects, kind, trust):
    dry, done, _ = _dry_run_and_in_place(objects, kind, trust, "overhead")
    print(f"\n{kind} {'trust' if trust else 'exact'}: dry run {dry.requests}, in place {done.requests}")
    # No stale-upload listing when committing in place: the run that finds the object indexed
    # lists (test_job_skips_an_indexed_file_by_its_footer; io.commit.cleanup_point).
    assert "ListMultipartUploads" not in done.requests, done.requests
    assert done.total <= dry.total + COMMIT_EXTRA_REQUESTS, (dry.requests, done.requests)


@pytest.mark.parametrize("kind", KINDS)
def test_verify(objects, kind):
    key = objects.indexed[kind]
    count = objects.measure(lambda: pageindex.verify(objects.path(key), filesystem=objects.fs()))
    assert count.gets <= _bound(objects, key), count.requests


@pytest.mark.parametrize("kind", KINDS)
def test_inspect(objects, kind):
    key = objects.indexed[kind]
    count = objects.measure(lambda: inspect_file(objects.path(key), filesystem=objects.fs()))
    # the head magic, the footer (in two reads when longer than the tail guess), and all index
    # blocks in one merged read
    assert count.gets <= 4, count.requests
    assert count.gets <= _bound(objects, key), count.requests


@pytest.mark.parametrize("kind", KINDS)
def test_inspect_without_index(objects, kind):
    """Page counts from the page headers: the chunks in one merged read plan, not a request per
    page header."""
    key = objects.plain[kind]
    views = []
    count = objects.measure(lambda: views.append(inspect_file(objects.path(key), filesystem=objects.fs())))
    assert all(c.pages > 0 and not c.has_offset_index for c in views[0].chunks)
    assert count.gets <= _bound(objects, key), count.requests


@pytest.mark.parametrize("kind", KINDS)
def test_lookup(objects, kind):
    key = objects.indexed[kind]
    columns = ["c000", {"wide": "c001", "many_pages": "x", "nested": "point"}[kind]]
    count = objects.measure(lambda: pageindex.lookup(objects.path(key), "c000 = 1234", columns=columns,
                                                     filesystem=objects.fs()))
    assert count.gets <= _bound(objects, key), count.requests


@pytest.mark.parametrize("kind", KINDS)
def test_job_skips_an_indexed_file_by_its_footer(objects, kind):
    key = objects.fresh_copy(kind, "job-skip")
    options = JobOptions(storage_options=s3h.storage_options(objects.proxy.endpoint))
    pageindex.retrofit(objects.path(key), filesystem=s3h.make_s3fs(objects.proxy.endpoint))
    url = f"s3://{objects.path(key)}"
    record: dict = {}
    count = objects.measure(lambda: record.update(process_file(InputFile(url, 0, key), options)))
    assert record["status"] == Status.ALREADY_INDEXED, record
    # HEAD for the version, the head magic and the footer with the index blocks before it in one
    # tail read (the wide file's footer is longer than 64 KiB), and the stale-upload listing: the
    # run that finds an object indexed is the one that aborts what dead runs left for it.
    assert count.requests.get("HeadObject", 0) == 1 and 1 <= count.gets <= 2, count.requests
    assert count.requests.get("ListMultipartUploads", 0) == 1, count.requests
    assert count.total == 2 + count.gets <= 4, count.requests


@pytest.fixture(scope="module")
def filtered(objects, tmp_path_factory) -> dict[str, str]:
    """Keys of bloom_files' table retrofitted with a filter on every column (36 filters), and
    without filters."""
    tmp: Path = tmp_path_factory.mktemp("objstore-bloom")
    _, src, out, _ = write_filtered(tmp, decimals_as_integer=False)
    pageindex.retrofit(str(src), str(tmp / "plain.parquet"))
    keys = {"filters": "bloom/filters.parquet", "none": "bloom/none.parquet"}
    objects.client.upload_file(str(out), objects.bucket, keys["filters"])
    objects.client.upload_file(str(tmp / "plain.parquet"), objects.bucket, keys["none"])
    return keys


def test_filters_come_in_the_index_read(objects, filtered):
    # inspect, verify and lookup read every filter they need (one each would be 36 or 4 requests)
    # along with the index blocks: at most one request more than on the same file without
    # filters, whose index blocks the footer's tail read holds (the filters, 150 KB, lie before them).
    def count(key: str, action: Callable[[str], object]) -> Count:
        return objects.measure(lambda: action(objects.path(key)))

    def inspect(path: str) -> object:
        view = inspect_file(path, filesystem=objects.fs())
        assert sum(c.bloom_filter is not None for c in view.chunks) == (36 if "filters" in path else 0)
        return view

    def verify(path: str) -> None:
        assert pageindex.verify(path, filesystem=objects.fs()).ok

    def lookup(path: str) -> None:
        stats = pageindex.lookup(path, "i64 = 7777", filesystem=objects.fs())[1]
        assert stats.row_groups_pruned_by_bloom_filter == (4 if "filters" in path else 0)

    for action in (inspect, verify, lookup):
        with_filters, without = count(filtered["filters"], action), count(filtered["none"], action)
        assert with_filters.gets <= without.gets + 1, (action.__name__, with_filters.requests, without.requests)
