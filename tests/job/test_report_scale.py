"""The report of a big run (pageindex.job.report): written batch by batch from records read once, the
same table as converting them all at once; the summaries read the records in one pass."""
from __future__ import annotations

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex.io.discovery import InputFile
from pageindex.job import report
from pageindex.job.process import failed_record
from pageindex.job.report import REPORT_SCHEMA, summary, summary_document, write_report
from pageindex.retrofit import Status

BATCH = 100
RECORDS = 250  # two full batches and a part


def _records(n: int) -> list[dict]:
    """Records of every status with varied reasons, notes and counts (some without the keys
    a record may lack)."""
    rng = random.Random(7)
    out = []
    for i in range(n):
        r = failed_record(InputFile(f"s3://b/t/day={i % 9}/f{i:04d}.parquet", 1000 + i, f"f{i}"), None, "")
        r.update(status=rng.choice(list(Status)), reason=rng.choice([None, "bad magic", "changed under us"]),
                 bytes_read=i * 3, copy_bytes_read=i, pages=i % 11, bloom_filters=i % 2,
                 without_column_index_reasons=rng.choice([{}, {"too long": 2}, {"b": 1, "a": 3}]),
                 page_stats_fallback_reasons=rng.choice([{}, {"no stats": 1}]),
                 no_page_skipping=rng.choice([None, "one page per chunk"]),
                 notes=rng.choice([[], ["n1"], ["n2", "n1"]]), violations=rng.choice([[], ["v é"]]),
                 chunk_statistics=rng.choice([{}, {"copied": 1, "filled": 2, "replaced": 0}]))
        if i % 5 == 0:
            del r["notes"], r["retryable"]
        if i % 7 == 0:
            r["table_version"] = i
        out.append(r)
    return out


def _all_at_once(records: list[dict]) -> pa.Table:
    """The reference: every record converted in one go by pyarrow from rows (defaults filled,
    mappings and lists as sorted-key JSON)."""
    rows = []
    for r in records:
        row = {"table_version": None, "retryable": False, "notes": [], **r}
        for key in ("without_column_index_reasons", "page_stats_fallback_reasons", "chunk_statistics",
                    "violations", "notes"):
            row[key] = json.dumps(row[key], sort_keys=True)
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=REPORT_SCHEMA)


def test_report_written_in_batches_reads_back_as_the_all_at_once_table(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "REPORT_BATCH_ROWS", BATCH)
    records = _records(RECORDS)
    path = tmp_path / "report.parquet"
    write_report((r for r in records), str(path), {})  # a generator: read once
    back = pq.read_table(path)
    assert back.schema.remove_metadata() == REPORT_SCHEMA
    assert back.to_pylist() == _all_at_once(records).to_pylist()
    # one row group per batch: never more than BATCH records converted at a time
    assert [pq.ParquetFile(path).metadata.row_group(i).num_rows
            for i in range(pq.ParquetFile(path).metadata.num_row_groups)] == [100, 100, 50]


def test_json_lines_report_from_a_generator(tmp_path):
    records = _records(20)
    path = tmp_path / "report.jsonl"
    write_report(iter(records), str(path), {})
    lines = path.read_text().splitlines()
    assert lines == [json.dumps(r, sort_keys=True) for r in records]


@pytest.mark.parametrize("n", [0, 1, RECORDS])
def test_summaries_read_the_records_once(n):
    """A generator gives the summaries what the list gives them: one pass over the records."""
    records = _records(n)
    assert summary(iter(records), 12.0, report="r.parquet") == summary(records, 12.0, report="r.parquet")
    assert summary_document(iter(records), 1.0, 3, None) == summary_document(records, 1.0, 3, None)
    text = summary(records, 12.0)
    failed = [r for r in records if r["status"] in (Status.FAILED, Status.CHANGED)]
    assert text.startswith(f"pageindex job: {n} file")
    if len(failed) > 3:
        assert "… and" in text
