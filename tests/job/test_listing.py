"""Listing on Spark (pageindex.job.listing): past Spark's parallelPartitionDiscovery threshold the
job's discovery lists an object store's directories in a Spark job, with the same result as the
driver's; typed errors come back typed."""
from __future__ import annotations

import os

import pytest

from pageindex.errors import MissingInputError, StorageError
from pageindex.io import discovery
from pageindex.io.discovery import discover
from pageindex.job import listing
from tests.helpers import s3 as s3h

PARTITIONS = 40  # past Spark's default threshold (32)


@pytest.fixture
def s3_workers(spark, s3_server):
    """The shared session, its Python workers given the fake credentials (as test_spark does)."""
    keys = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
            "AWS_DEFAULT_REGION", "AWS_REGION", "AWS_EC2_METADATA_DISABLED")
    spark.sparkContext.environment.update({k: os.environ[k] for k in keys})
    return spark


@pytest.fixture
def partitions(s3_server, s3_bucket) -> str:
    client = s3h.boto3_client(s3_server)
    for i in range(PARTITIONS):
        for key in (f"t/day={i:02d}/part-0.parquet", f"t/day={i:02d}/part-1.parquet", f"t/day={i:02d}/_SUCCESS"):
            client.put_object(Bucket=s3_bucket, Key=key, Body=b"x" * (i + 1))
    return s3_bucket


def test_many_directories_are_listed_by_spark_with_the_drivers_result(s3_workers, s3_server, partitions,
                                                                       monkeypatch):
    options = s3h.storage_options(s3_server)
    inputs = [f"s3://{partitions}/t/day={i:02d}" for i in range(PARTITIONS)]
    glob = [f"s3://{partitions}/t/day=*"]
    on_driver, glob_on_driver = discover(inputs, options), discover(glob, options)
    assert len(on_driver.files) == len(glob_on_driver.files) == 2 * PARTITIONS

    def not_here(*args):
        raise AssertionError("listed on the driver")

    # The driver's _listing now fails; the Python workers import their own, unpatched.
    monkeypatch.setattr(discovery, "_listing", not_here)
    assert discover(inputs, options, listing.on_spark(s3_workers)) == on_driver
    assert discover(glob, options, listing.on_spark(s3_workers)) == glob_on_driver

    # At or under the session's threshold, the driver lists them itself.
    s3_workers.conf.set(listing.THRESHOLD, str(PARTITIONS))
    try:
        with pytest.raises(StorageError, match="listed on the driver"):
            discover(inputs, options, listing.on_spark(s3_workers))
    finally:
        s3_workers.conf.unset(listing.THRESHOLD)


def test_a_typed_error_of_a_listing_comes_back_typed(spark):
    def fail_at_seven(n: int) -> int:
        if n in (7, 30):
            raise MissingInputError("input does not exist", path=f"s3://b/p={n}")
        return n * 2

    run = listing.on_spark(spark)
    assert run(fail_at_seven, list(range(5))) == [0, 2, 4, 6, 8]  # on the driver
    with pytest.raises(MissingInputError, match="p=7"):  # the first in the items' order
        run(fail_at_seven, list(range(40)))
    assert run(lambda n: n + 1, list(range(40))) == list(range(1, 41))


def test_job_keeps_a_spark_listing_distributed_and_skips_by_the_state_there(s3_workers, s3_server, partitions,
                                                                            tmp_path, monkeypatch):
    """Past the threshold the job's listing stays on the executors (the driver's _listing and
    its Mapper are never called), is joined with the state there, and the rerun opens nothing."""
    from pageindex.job.spark import main
    from tests.helpers.report_parts import report_records

    options = s3h.storage_options(s3_server)
    expected = {f.url for f in discover([f"s3://{partitions}/t/day=*"], options).files}

    def not_here(*args):
        raise AssertionError("listed on the driver")

    monkeypatch.setattr(discovery, "_listing", not_here)
    monkeypatch.setattr(listing, "on_spark", not_here)
    state = tmp_path / "state"
    args = ["--input", f"s3://{partitions}/t/day=*", "--output", str(tmp_path / "out"), "--s3-endpoint-url",
            s3_server, "--state", str(state)]
    assert main([*args, "--report", str(tmp_path / "first")], spark=s3_workers) == 0
    first = report_records(tmp_path / "first")
    assert {r["path"] for r in first} == expected and {r["status"] for r in first} == {"skipped"}
    assert main([*args, "--report", str(tmp_path / "second")], spark=s3_workers) == 0
    second = report_records(tmp_path / "second")
    assert {r["path"] for r in second} == expected and {r["status"] for r in second} == {"unchanged"}


def test_missing_match_of_a_spark_listing_is_one_typed_error(s3_workers, s3_server, partitions, capsys):
    from pageindex.job.spark import main

    inputs = [f"s3://{partitions}/t/day={i:02d}" for i in range(PARTITIONS)] + [f"s3://{partitions}/t/nope"]
    assert main(["--input", *inputs, "--in-place", "--s3-endpoint-url", s3_server], spark=s3_workers) == 2
    err = capsys.readouterr().err
    assert "t/nope" in err and "does not exist" in err, err
