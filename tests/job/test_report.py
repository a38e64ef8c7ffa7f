"""The job's report (pageindex.job.report): one declared Parquet schema, whatever the records hold,
so many nights' reports read back as one table in pyarrow and in Spark."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex.io.discovery import InputFile
from pageindex.job.process import failed_record
from pageindex.job.report import REPORT_SCHEMA, summary, write_report
from pageindex.job.spark import main
from pageindex.retrofit import Status
from tests.helpers.paths import REPO_ROOT

JSON_COLUMNS = ("without_column_index_reasons", "page_stats_fallback_reasons", "chunk_statistics", "violations",
                "notes")


def _schema(path: Path) -> pa.Schema:
    """A report file's schema, or each part's of the job's report folder (all the same)."""
    if path.is_dir():
        schemas = [pq.read_schema(part).remove_metadata() for part in path.glob("part-*.parquet")]
        assert schemas and all(s == schemas[0] for s in schemas), path
        return schemas[0]
    return pq.read_schema(path).remove_metadata()


def _good_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({"id": pa.array(range(5000), pa.int64())})
    pq.write_table(table, path, write_page_index=False, data_page_size=1024)


def test_schema_covers_every_record_key():
    record = failed_record(InputFile("/d/x.parquet", 1, "x.parquet"), None, "r")
    assert set(REPORT_SCHEMA.names) == set(record) | {"table_version", "retryable", "notes"}
    assert REPORT_SCHEMA.field("table_version").type == pa.int64()
    assert REPORT_SCHEMA.field("retryable").type == pa.bool_()
    assert all(REPORT_SCHEMA.field(c).type == pa.string() for c in JSON_COLUMNS)


def test_zero_files_and_all_null_columns_keep_the_schema(tmp_path):
    empty = tmp_path / "empty.parquet"
    write_report([], str(empty), {})
    assert _schema(empty) == REPORT_SCHEMA
    assert pq.read_table(empty).num_rows == 0

    # every nullable column null in every row: still typed as declared, not Arrow's null type
    record = {**failed_record(InputFile("/d/x.parquet", 10, "x.parquet"), None, "bad magic"),
              "output": None, "no_page_skipping": None}
    one = tmp_path / "one.parquet"
    write_report([record], str(one), {})
    assert _schema(one) == REPORT_SCHEMA
    [row] = pq.read_table(one).to_pylist()
    assert row["table_version"] is None and row["retryable"] is False
    assert row["status"] == "failed" and row["reason"] == "bad magic"
    assert {c: json.loads(row[c]) for c in JSON_COLUMNS} == {
        "without_column_index_reasons": {}, "page_stats_fallback_reasons": {}, "violations": [], "notes": [],
        "chunk_statistics": {"copied": 0, "filled": 0, "replaced": 0}}


def test_json_lines_report_keeps_its_shape(tmp_path):
    record = failed_record(InputFile("/d/x.parquet", 10, "x.parquet"), None, "bad magic")
    out = tmp_path / "r.jsonl"
    write_report([record], str(out), {})
    [line] = out.read_text().splitlines()
    assert json.loads(line) == json.loads(json.dumps(record))  # the record as it is, no added keys


@pytest.mark.spark
def test_spark_reads_many_nights_reports_together(spark, tmp_path):
    """Nights whose records differ (only indexed files; a failure; no file at all; a table run with
    versions) read as one table by Spark, every column, and equal what pyarrow reads."""
    data, reports = tmp_path / "data", tmp_path / "reports"
    _good_file(data / "night1" / "a.parquet")
    _good_file(data / "night2" / "b.parquet")
    (data / "night2" / "c.parquet").write_bytes(b"PAR1" + b"\0" * 64 + b"PAR1")
    night1 = reports / "run_date=2026-06-01" / "r1-try1.parquet"
    night2 = reports / "run_date=2026-06-02" / "r2-try1.parquet"
    assert main(["--input", str(data / "night1"), "--in-place", "--report", str(night1)], spark=spark) == 0
    assert main(["--input", str(data / "night2"), "--in-place", "--max-failures", "1",
                 "--report", str(night2)], spark=spark) == 0
    night3 = reports / "run_date=2026-06-03" / "r3-try1.parquet"
    (data / "night3").mkdir()
    assert main(["--input", str(data / "night3"), "--in-place", "--report", str(night3)], spark=spark) == 0
    indexed = {**failed_record(InputFile("s3://b/t/p=1/d.parquet", 100, "p=1/d.parquet"), None, ""),
               "status": Status.INDEXED, "bytes_out": 120, "table_version": 7_300_000_000_000_000_001,
               "notes": ["bloom filter: column b not in this file"]}
    skipped = {**failed_record(InputFile("s3://b/t/p=1/e.parquet", 50, "p=1/e.parquet"), None, "kept"),
               "status": Status.SKIPPED, "table_version": None}
    night4 = reports / "run_date=2026-06-04" / "r4-try2.parquet"
    write_report([indexed, skipped], str(night4), {})

    for night in (night1, night2, night3, night4):
        assert _schema(night) == REPORT_SCHEMA, night
    expected = [row for night in (night1, night2, night3, night4) for row in pq.read_table(night).to_pylist()]
    assert sorted(r["status"] for r in expected) == ["failed", "indexed", "indexed", "indexed", "skipped"]

    frame = spark.read.parquet(str(reports))
    assert frame.columns == [*REPORT_SCHEMA.names, "run_date"]
    got = [row.asDict() for row in frame.collect()]
    assert sorted(str(r.pop("run_date")) for r in got) == ["2026-06-01", "2026-06-02", "2026-06-02",
                                                            "2026-06-04", "2026-06-04"]
    assert sorted(got, key=lambda r: r["path"]) == sorted(expected, key=lambda r: r["path"])


def _dag_job_summary():
    """The DAG's job_summary, compiled alone from its source (the DAG module imports Airflow,
    which this venv lacks)."""
    source = (REPO_ROOT / "deploy" / "airflow" / "pageindex_backfill_dag.py").read_text()
    [node] = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "job_summary"]
    scope: dict[str, Any] = {"re": re, "Any": Any}
    exec(compile(ast.Module(body=[node], type_ignores=[]), "pageindex_backfill_dag.py", "exec"), scope)
    return scope["job_summary"]


@pytest.mark.parametrize("n", [1, 2])
def test_summary_counts_files_in_words_and_the_dag_finds_it(n):
    records = [failed_record(InputFile(f"/d/{i}.parquet", 10, f"{i}.parquet"), None, "bad magic")
               for i in range(n)]
    text = summary(records, 0.5)
    noun = "file" if n == 1 else "files"
    first, by_status = text.splitlines()[:2]
    assert first == f"pageindex job: {n} {noun} in 0.5s"
    assert re.fullmatch(rf"  failed +{n} {noun} +{10 * n} B", by_status), by_status
    # spark-submit's output tail: the DAG keeps the job's summary from its first line on
    tail = ["[pageindex] found some files", "an error before", *text.splitlines()]
    assert _dag_job_summary()(tail) == text


@pytest.mark.spark
def test_job_summary_names_the_report_and_writes_summary_json(spark, tmp_path, capsys):
    """The summary's last line says where the report went; --summary-json holds the counts the
    report holds (read back by pyarrow), the failures by reason and the exit code."""
    data = tmp_path / "data"
    _good_file(data / "a.parquet")
    (data / "c.parquet").write_bytes(b"PAR1" + b"\0" * 64 + b"PAR1")
    report, summary_path = tmp_path / "out" / "r.parquet", tmp_path / "out" / "deep" / "summary.json"
    assert main(["--input", str(data), "--in-place", "--max-failures", "1", "--report", str(report),
                 "--summary-json", str(summary_path)], spark=spark) == 0
    out = capsys.readouterr().out
    assert f"\n  report           {report}\n" in out + "\n"
    document = json.loads(summary_path.read_text())
    rows = pq.read_table(report).to_pylist()
    statuses: dict[str, dict[str, int]] = {}
    for row in rows:
        entry = statuses.setdefault(row["status"], {"files": 0, "bytes": 0})
        entry["files"] += 1
        entry["bytes"] += row["bytes_in"]
    assert document["statuses"] == statuses and set(statuses) == {"indexed", "failed"}
    assert document["files"] == 2 and document["bytes_in"] == sum(r["bytes_in"] for r in rows)
    [failed] = [r for r in rows if r["status"] == "failed"]
    assert document["failures_by_reason"] == {f"failed: {failed['reason']}": 1}
    assert document["exit_code"] == 0 and document["report"] == str(report)


@pytest.mark.spark
def test_summary_json_that_cannot_be_written_stops_the_job_before_any_file(spark, tmp_path, capsys):
    data = tmp_path / "data"
    _good_file(data / "a.parquet")
    before = (data / "a.parquet").read_bytes()
    (tmp_path / "taken").mkdir()
    assert main(["--input", str(data), "--in-place", "--summary-json", str(tmp_path / "taken")],
                spark=spark) == 2
    assert "the summary cannot be written here: it is a directory" in capsys.readouterr().err
    assert (data / "a.parquet").read_bytes() == before


def test_summary_without_a_report_names_none():
    records = [failed_record(InputFile("/d/x.parquet", 10, "x.parquet"), None, "bad magic")]
    assert "report" not in summary(records, 0.5)
    assert summary(records, 0.5, report="s3://b/r.parquet").splitlines()[-1] == "  report           s3://b/r.parquet"


@pytest.mark.parametrize("name", ["part-1.parquet", "part-1.jsonl"])
def test_a_report_stopped_midway_leaves_no_part(tmp_path, name):
    """A task stopped while writing its report part (the job's SIGTERM) leaves none: an empty
    or half part would make the whole folder unreadable."""
    def records():
        yield {"path": "a", "status": "indexed"}
        raise RuntimeError("stopped")

    with pytest.raises(RuntimeError, match="stopped"):
        write_report(records(), str(tmp_path / name), {})
    assert list(tmp_path.iterdir()) == []
