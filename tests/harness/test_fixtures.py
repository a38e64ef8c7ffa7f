"""The test harness itself: corpus access, parquet-java ColumnIndexValidator, Spark scan metrics,
the moto S3 endpoint and DataFusion page pruning. Each oracle is shown to be able to fail."""
from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from tests.helpers.corpus import CATEGORIES, corpus_files
from tests.helpers.datafusion import datafusion_page_pruning
from tests.helpers.files import corrupt_first_page_min, tail_region, write_sorted_int_file
from tests.helpers.spark import column_index_violations, scan_output_rows

# A base value whose little-endian bytes (88 77 66 55 44 33 22 11) occur nowhere else in the index.
MAGIC_BASE = 0x1122334455667788


# ---------------------------------------------------------------- corpus

def test_catalog_matches_files(corpus_dir, catalog):
    assert (corpus_dir / "CATALOG.tsv").is_file()
    assert {r["category"] for r in catalog} == set(CATEGORIES)
    for category in CATEGORIES:
        paths = corpus_files(category)
        assert len(paths) == sum(r["category"] == category for r in catalog)
        assert all(p.is_file() for p in paths)
    assert {"path", "category", "page_index", "ci_chunks", "oi_chunks"} <= set(catalog[0])


def test_unknown_category_is_an_error():
    with pytest.raises(ValueError):
        corpus_files("nope")


# ---------------------------------------------------------------- parquet-java ColumnIndexValidator

@pytest.fixture(scope="module")
def magic_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("magic")
    good = write_sorted_int_file(
        d / "good.parquet", 4096, page_index=True, start=MAGIC_BASE,
        compression="none", use_dictionary=False, write_batch_size=512, data_page_size=1024,
    )
    bad = corrupt_first_page_min(good, d / "bad.parquet", MAGIC_BASE)
    return good, bad


def test_magic_file_layout(magic_files):
    good, bad = magic_files
    md = pq.ParquetFile(good).metadata
    assert md.num_row_groups == 1
    assert md.row_group(0).column(0).has_column_index
    start, end = tail_region(good)
    assert 0 < start < end < good.stat().st_size
    # the corrupted copy has the same size and still reads back identically
    assert bad.stat().st_size == good.stat().st_size
    assert pq.read_table(bad).equals(pq.read_table(good))


def test_validator_accepts_pyarrow_index(spark, magic_files, paged_parquet):
    good, _ = magic_files
    assert column_index_violations(spark, good) == []
    assert column_index_violations(spark, paged_parquet.with_index) == []


def test_validator_rejects_corrupted_min(spark, magic_files):
    _, bad = magic_files
    violations = column_index_violations(spark, bad)
    assert violations, "ColumnIndexValidator failed to notice a min that does not bound the page"
    assert any("k" in v and "min" in v.lower() for v in violations), violations


def test_validator_is_silent_without_index(spark, paged_parquet):
    # Caveat of the oracle: no ColumnIndex means nothing to check, not an error.
    assert column_index_violations(spark, paged_parquet.without_index) == []


# ---------------------------------------------------------------- Spark scan metrics

@pytest.mark.parametrize("vectorized", [True, False], ids=["vectorized", "row-reader"])
def test_spark_uses_page_index(spark, paged_parquet, vectorized):
    n = paged_parquet.num_rows
    with_index = scan_output_rows(spark, paged_parquet.with_index, "k = 123457", vectorized=vectorized)
    without = scan_output_rows(spark, paged_parquet.without_index, "k = 123457", vectorized=vectorized)
    assert 1 <= with_index <= n // 20, with_index
    assert without == n


def test_spark_scan_rows_when_row_group_pruned(spark, paged_parquet):
    # Out-of-range key: the row group is dropped by footer statistics alone, index or not.
    assert scan_output_rows(spark, paged_parquet.without_index, "k = -5") == 0


# ---------------------------------------------------------------- S3 (moto)

def test_s3fs_roundtrip_and_ranged_read(s3fs_fs, s3_bucket, paged_parquet):
    import s3fs

    # s3fs < 2023 is an unrelated boto3-based implementation a bad resolve can fall back to.
    assert int(s3fs.__version__.split(".")[0]) >= 2024, s3fs.__version__
    assert s3fs_fs.test_bucket == s3_bucket
    assert s3fs_fs.ls(s3_bucket) == []
    key = f"{s3_bucket}/dir/with_index.parquet"
    s3fs_fs.put(str(paged_parquet.with_index), key)
    local = paged_parquet.with_index.read_bytes()
    assert s3fs_fs.size(key) == len(local)
    assert s3fs_fs.cat_file(key, start=len(local) - 8) == local[-8:]
    assert s3fs_fs.cat_file(key, start=4, end=100) == local[4:100]
    with s3fs_fs.open(key, "rb") as fh:
        fh.seek(len(local) // 2)
        assert fh.read(16) == local[len(local) // 2 : len(local) // 2 + 16]
    with s3fs_fs.open(key, "rb") as fh:
        assert pq.ParquetFile(fh).metadata.num_rows == paged_parquet.num_rows


def test_s3_bucket_is_fresh_per_test(s3fs_fs, s3_bucket):
    assert s3fs_fs.ls(s3_bucket) == []


def test_plain_s3_urls_reach_moto(s3_server, s3fs_fs, s3_bucket, s3_storage_options):
    import fsspec

    s3fs_fs.pipe(f"{s3_bucket}/x.bin", b"hello")
    with fsspec.open(f"s3://{s3_bucket}/x.bin", "rb", **s3_storage_options) as fh:
        assert fh.read() == b"hello"


# ---------------------------------------------------------------- DataFusion

def test_datafusion_prunes_pages_only_with_index(paged_parquet):
    with_index = datafusion_page_pruning(paged_parquet.with_index, "k = 123457")
    without = datafusion_page_pruning(paged_parquet.without_index, "k = 123457")
    assert with_index["result_rows"] == without["result_rows"] == 1
    assert with_index["page_index_pages_pruned"] > 0
    assert with_index["page_index_pages_pruned_matched"] >= 1
    assert with_index["page_index_rows_pruned"] > paged_parquet.num_rows // 2
    assert without["page_index_pages_pruned"] == 0
    assert without["page_index_pages_pruned_total"] == 0
    assert with_index["bytes_scanned"] < without["bytes_scanned"]
