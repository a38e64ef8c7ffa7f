"""Listing on Spark (pageindex.job.spread): the job lists an object store's inputs and a catalog
table's partitions in a Spark job, with the same result as the driver's discovery; the files stay
on the executors; a listing's typed error comes back typed."""
from __future__ import annotations

import dataclasses
import os

import pytest


from pageindex.io import discovery
from pageindex.io.discovery import discover
from pageindex.job import catalog, spread
from tests.helpers import s3 as s3h

PARTITIONS = 40


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


def _spread_files(spread_out: spread.Spread) -> list:
    try:
        return sorted(spread_out.files.collect(), key=lambda f: f.url)
    finally:
        spread_out.release()


def test_an_object_stores_listing_on_spark_equals_the_drivers(s3_workers, s3_server, partitions, monkeypatch):
    options = s3h.storage_options(s3_server)
    inputs = [f"s3://{partitions}/t/day={i:02d}" for i in range(PARTITIONS)]
    glob = [f"s3://{partitions}/t/day=*"]
    nested = [f"s3://{partitions}/t", f"s3://{partitions}/t/day=03"]  # one file reached twice: listed once
    expected = {tuple(names): discover(names, options).files for names in (inputs, glob, nested, inputs[:2])}
    assert len(expected[tuple(glob)]) == 2 * PARTITIONS

    def not_here(*args):
        raise AssertionError("listed on the driver")

    # The driver's _listing now fails; the Python workers import their own, unpatched.
    monkeypatch.setattr(discovery, "_listing", not_here)
    for names, files in expected.items():
        got = spread.list_inputs(s3_workers, list(names), options, in_place=True)
        assert (got.count, got.nbytes) == (len(files), sum(f.size for f in files))
        assert _spread_files(got) == list(files)


def test_a_catalog_tables_partitions_listed_on_spark_equal_the_drivers(s3_workers, s3_server, partitions,
                                                                      monkeypatch):
    """Partitions inside the table's location, one elsewhere (its relative paths start with its
    values), one whose location does not exist: as catalog.table_files lists them."""
    options = s3h.storage_options(s3_server)
    table = catalog.CatalogTable("db.t", f"s3://{partitions}/t", "parquet", (
        catalog.Partition(f"s3://{partitions}/t/day=01", "day=01"),
        catalog.Partition(f"s3://{partitions}/t/day=02", "day=02"),
        catalog.Partition(f"s3://{partitions}/t/day=30", "day=99"),  # its location is not its values' path
        catalog.Partition(f"s3://{partitions}/elsewhere/x", "day=77"),  # no such location: no files
    ))
    moved = dataclasses.replace(table, location=f"s3://{partitions}/t/day=01")  # the others outside it
    expected = {t: catalog.table_files(t, options).files for t in (table, moved)}
    assert len(expected[table]) == 6 and "day=99/part-0.parquet" in {f.relative for f in expected[moved]}

    def not_here(*args):
        raise AssertionError("listed on the driver")

    monkeypatch.setattr(discovery, "_listing", not_here)
    for t, files in expected.items():
        got = spread.list_table(s3_workers, t, options, in_place=False)
        assert (got.count, got.nbytes) == (len(files), sum(f.size for f in files))
        assert _spread_files(got) == list(files)


def test_job_keeps_a_spark_listing_distributed_and_skips_by_the_state_there(s3_workers, s3_server, partitions,
                                                                            tmp_path, monkeypatch):
    """The job's listing stays on the executors (the driver's _listing is never called), is
    joined with the state there, and the rerun opens nothing."""
    from pageindex.job.spark import main
    from tests.helpers.report_parts import report_records

    options = s3h.storage_options(s3_server)
    expected = {f.url for f in discover([f"s3://{partitions}/t/day=*"], options).files}

    def not_here(*args):
        raise AssertionError("listed on the driver")

    monkeypatch.setattr(discovery, "_listing", not_here)
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
