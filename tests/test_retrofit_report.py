"""What retrofit tells the user (library result, job record, summary): files an index cannot
help and why, why chunks fell back from trusted header statistics to exact decoding, and bytes
read to compute the index apart from bytes read to copy the prefix for the commit."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex.cli.output import describe
from pageindex.format.thrift import Field, Struct, T
from pageindex.index.fallback import Fallback
from pageindex.inspection import format_text, inspect_file
from pageindex.io.discovery import InputFile
from pageindex.io.read_plan import ReadOptions
from pageindex.job.process import JobOptions, process_to
from pageindex.job.report import summary
from pageindex.retrofit import NoSkipping, retrofit
from tests.helpers import s3 as s3h
from tests.helpers.corpus import corpus_path
from tests.helpers.hand_pages import data_page, with_only_chunk
from tests.helpers.retrofit_checks import footer_of
from tests.helpers.split_records import write_split_record_file

ROWS = 5000


def _duckdb_file(path: Path) -> Path:
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    con.execute(f"COPY (SELECT range AS id, 'v' || range AS s FROM range({ROWS})) TO '{path}' (FORMAT parquet)")
    con.close()
    return path


def _pyarrow_file(path: Path, **options) -> Path:
    pq.write_table(pa.table({"id": pa.array(range(ROWS)), "s": pa.array([f"v{i:05d}" for i in range(ROWS)])}),
                   path, **options)
    return path


def _record(path: Path, **options) -> dict:
    return process_to(InputFile(str(path), path.stat().st_size, path.name), None, JobOptions(**options))


# ---------------------------------------------------------------- files an index cannot help

def test_a_duckdb_file_gains_no_page_skipping(tmp_path):
    """DuckDB writes one data page per column chunk: the index is written, and said to be useless."""
    path = _duckdb_file(tmp_path / "duck.parquet")
    result = retrofit(str(path), dry_run=True)
    assert all(c.pages == 1 for c in result.chunks)
    assert result.no_page_skipping == NoSkipping.ONE_PAGE
    assert result.to_dict()["no_page_skipping"] == "one data page per column chunk"


def test_a_pyarrow_file_with_one_page_per_chunk_gains_no_page_skipping(tmp_path):
    path = _pyarrow_file(tmp_path / "one_page.parquet", data_page_size=1 << 20)
    assert retrofit(str(path), dry_run=True).no_page_skipping == NoSkipping.ONE_PAGE


def test_a_file_with_several_pages_per_chunk_can_skip(tmp_path):
    path = _pyarrow_file(tmp_path / "pages.parquet", data_page_size=1024)
    result = retrofit(str(path), dry_run=True)
    assert result.pages > 2 * len(result.chunks) and result.no_page_skipping is None


def test_a_file_whose_every_column_index_is_refused_gains_no_page_skipping(tmp_path):
    """INT96 has no order, so no ColumnIndex: many pages, none of them skippable."""
    path = tmp_path / "int96.parquet"
    pq.write_table(pa.table({"t": pa.array(range(ROWS), pa.timestamp("ns"))}),
                   path, data_page_size=1024, use_deprecated_int96_timestamps=True, use_dictionary=False)
    result = retrofit(str(path), dry_run=True)
    assert result.pages > 1 and not any(c.column_index for c in result.chunks)
    assert result.no_page_skipping == NoSkipping.NO_COLUMN_INDEX


def test_the_job_record_and_summary_count_files_without_page_skipping(tmp_path):
    duck = _duckdb_file(tmp_path / "duck.parquet")
    one = _pyarrow_file(tmp_path / "one.parquet", data_page_size=1 << 20)
    many = _pyarrow_file(tmp_path / "many.parquet", data_page_size=1024)
    records = [_record(p, dry_run=True) for p in (duck, one, many)]
    assert [r["no_page_skipping"] for r in records] == ["one data page per column chunk"] * 2 + [None]
    lines = summary(records, 1.0).splitlines()
    at = lines.index("  2 files gain no page skipping: one data page per column chunk")
    assert lines[at + 1].startswith("    row-group statistics still skip row groups, and bloom filters can too "
                                    "(`--bloom-filter COLUMN`")
    assert ("  1 file allows page skipping: Spark, DataFusion and DuckDB skip pages on filters over sorted or "
            "clustered columns") in lines


def test_each_file_says_what_skipping_it_allows_and_what_else_helps(tmp_path):
    """The CLI's block per file: pages where chunks have several, else what is left (bloom filters),
    and the bloom filters it holds."""
    duck = _duckdb_file(tmp_path / "duck.parquet")
    many = _pyarrow_file(tmp_path / "many.parquet", data_page_size=1024)
    said = {p.name: describe(_record(p, dry_run=True, bloom_filter="id")).splitlines() for p in (duck, many)}
    assert ("  no page skipping: one data page per column chunk; row-group statistics still skip row groups, "
            "and bloom filters can too (`--bloom-filter COLUMN` for columns looked up by value); to skip "
            "pages, write smaller pages; its bloom filters skip row groups on equality lookups") in said["duck.parquet"]
    assert ("  page skipping: Spark, DataFusion and DuckDB skip pages on filters over sorted or clustered "
            "columns; its bloom filters skip row groups on equality lookups") in said["many.parquet"]


def test_inspect_says_which_columns_skip_pages(tmp_path):
    many = _pyarrow_file(tmp_path / "many.parquet", data_page_size=1024)
    shuffled = tmp_path / "shuffled.parquet"
    ids = np.random.default_rng(1).permutation(ROWS)
    pq.write_table(pa.table({"id": ids, "s": pa.array([f"v{i:05d}" for i in ids])}), shuffled, data_page_size=1024)
    assert format_text(inspect_file(str(many)), summary=True).splitlines()[4] == (
        "no page index yet (`pageindex retrofit` adds one); then page skipping: Spark, DataFusion and DuckDB "
        "skip pages on filters over sorted or clustered columns")
    for path in (many, shuffled):
        retrofit(str(path))
    assert format_text(inspect_file(str(many)), summary=True).splitlines()[4].endswith(
        "sorted or clustered columns (here: id, s)")
    assert format_text(inspect_file(str(shuffled)), summary=True).splitlines()[4].endswith(
        "no column here is ordered enough for a point lookup to skip most pages: sort or cluster the data on "
        "the columns you filter by")


# ---------------------------------------------------------------- --trust-page-stats fallbacks

def _fallbacks(path: Path, **options) -> dict[str, str]:
    result = retrofit(str(path), dry_run=True, force=True, trust_page_stats=True, **options)
    return {c.column: c.fallback for c in result.chunks}


def test_floats_fall_back(tmp_path):
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"f": pa.array([float(i) for i in range(ROWS)]), "i": pa.array(range(ROWS))}),
                   path, data_page_size=1024)
    assert _fallbacks(path) == {"f": Fallback.FLOAT, "i": ""}


def test_without_header_statistics_falls_back(tmp_path):
    path = _pyarrow_file(tmp_path / "nostats.parquet", data_page_size=1024, write_statistics=False)
    assert set(_fallbacks(path).values()) == {Fallback.NO_NULL_COUNT}


def test_a_bloom_filter_falls_back(tmp_path):
    path = _pyarrow_file(tmp_path / "b.parquet", data_page_size=1024)
    assert _fallbacks(path, bloom_filter="s") == {"id": "", "s": Fallback.BLOOM_FILTER}


def test_parquet_251_writer_falls_back(tmp_path):
    from pageindex.format.parquet_thrift import FileMetaData
    from tests.helpers.strip import rewrite_footer

    path = _pyarrow_file(tmp_path / "new.parquet", data_page_size=1024)
    old = rewrite_footer(path, tmp_path / "old.parquet", lambda meta: meta.set(
        FileMetaData.CREATED_BY, T.BINARY, b"parquet-mr version 1.7.0 (build x)"))
    assert _fallbacks(old) == {"id": "", "s": Fallback.PARQUET_251}


def test_legacy_only_min_max_falls_back():
    """parquet-mr 1.8 wrote a FIXED_LEN_BYTE_ARRAY decimal's header bounds as the deprecated
    min/max only, which its order cannot take."""
    path = corpus_path("parquet-testing/data/fixed_length_decimal.parquet")
    assert _fallbacks(path) == {"value": Fallback.NO_MIN_MAX}


def test_null_counts_that_differ_from_the_levels_fall_back():
    path = corpus_path("parquet-testing/data/list_columns.parquet")
    assert _fallbacks(path)["utf8_list.list.item"] == Fallback.NULL_COUNT_DIFFERS


def test_pages_no_index_describes_fall_back(tmp_path):
    path = write_split_record_file(tmp_path / "split.parquet")
    assert _fallbacks(path) == {"l.list.element": Fallback.UNINDEXABLE_PAGES}


def _one_page_ints(path: Path, stats: Struct) -> Path:
    """A required INT32 column of 10 values in one hand-made page with these header statistics."""
    values = list(range(10))
    base = path.with_suffix(".base.parquet")
    pq.write_table(pa.table({"i": pa.array(values, pa.int32())}, schema=pa.schema([pa.field("i", pa.int32(), False)])),
                   base, compression="none", use_dictionary=False, data_page_version="1.0", write_page_index=False)
    body = struct.pack(f"<{len(values)}i", *values)
    path.write_bytes(with_only_chunk(base.read_bytes(), data_page(len(values), body, stats)))
    return path


def test_a_null_count_out_of_range_falls_back(tmp_path):
    stats = Struct((Field(3, T.I64, 11), Field(5, T.BINARY, struct.pack("<i", 9)), Field(6, T.BINARY, bytes(4))))
    path = _one_page_ints(tmp_path / "nulls.parquet", stats)
    assert _fallbacks(path) == {"i": Fallback.NULL_COUNT_OUT_OF_RANGE}


def test_an_undecodable_bound_falls_back(tmp_path):
    stats = Struct((Field(3, T.I64, 0), Field(5, T.BINARY, b"\x09\x00"), Field(6, T.BINARY, bytes(4))))
    path = _one_page_ints(tmp_path / "bound.parquet", stats)
    assert _fallbacks(path) == {"i": Fallback.UNDECODABLE_BOUND}


def test_the_job_record_and_summary_count_fallbacks(tmp_path):
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"f": pa.array([0.5, 1.5] * 100), "g": pa.array([2.5] * 200)}), path)
    record = _record(path, dry_run=True, trust_page_stats=True)
    assert record["page_stats_fallback_reasons"] == {Fallback.FLOAT: 2}
    text = summary([record], 1.0)
    assert f"         2  {Fallback.FLOAT}" in text.splitlines()


# ---------------------------------------------------------------- bytes read to index, to copy

def test_in_place_bytes_read_to_index_and_to_copy(tmp_path):
    path = _pyarrow_file(tmp_path / "p.parquet", data_page_size=1024)
    size = prefix = path.stat().st_size  # the whole file is kept, its footer included
    record = _record(path)
    assert record["status"] == "indexed"
    assert record["copy_bytes_read"] == prefix
    assert prefix <= record["index_bytes_read"] <= 2 * size
    assert record["bytes_read"] == record["index_bytes_read"] + record["copy_bytes_read"]
    assert "to copy" in summary([record], 1.0)


def test_a_dry_run_copies_nothing(tmp_path):
    path = _pyarrow_file(tmp_path / "p.parquet", data_page_size=1024)
    result = retrofit(str(path), dry_run=True)
    assert result.copy_bytes_read == 0 and result.index_bytes_read == result.bytes_read > 0


@pytest.mark.s3
def test_server_side_copy_reads_no_prefix(s3_server, s3_bucket, tmp_path):
    """A prefix of 5 MiB or more is copied by S3 itself (UploadPartCopy); a small one is read
    and uploaded with the tail in one PUT."""
    rng = np.random.default_rng(3)
    big, small = tmp_path / "big.parquet", tmp_path / "small.parquet"
    pq.write_table(pa.table({"k": pa.array(rng.integers(0, 1 << 62, 700_000))}), big,
                   compression="none", use_dictionary=False)
    _pyarrow_file(small, data_page_size=1024)
    client, fs = s3h.boto3_client(s3_server), s3h.make_s3fs(s3_server)
    for path in (big, small):
        client.put_object(Bucket=s3_bucket, Key=path.name, Body=path.read_bytes())
    big_result = retrofit(f"s3://{s3_bucket}/big.parquet", filesystem=fs)
    small_result = retrofit(f"s3://{s3_bucket}/small.parquet", filesystem=fs)
    assert footer_of(big.read_bytes()).start >= 5 << 20
    assert big_result.copy_bytes_read == 0
    assert big_result.index_bytes_read == big_result.bytes_read >= big.stat().st_size * 0.9
    # An object within the remote footer read (ReadOptions.tail_bytes) is read once, whole: the
    # commit's prefix comes from those bytes, so nothing more is read to copy it.
    assert small.stat().st_size <= ReadOptions().tail_bytes
    assert (small_result.bytes_read, small_result.copy_bytes_read) == (small.stat().st_size, 0)
