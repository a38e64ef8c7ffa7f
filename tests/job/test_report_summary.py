"""`pageindex report` (pageindex.job.report_summary): saved reports written by write_report, Parquet
and JSON lines, a run_date= directory tree as the DAG writes it, read back and summed."""
from __future__ import annotations

from typing import Any

import pytest


from pageindex.cli import main
from pageindex.io.discovery import InputFile
from pageindex.job.process import failed_record
from pageindex.job.report import write_report
from pageindex.job.report_summary import read_report, report_urls, summarise
from pageindex.retrofit import Status


def _record(name: str, size: int, status: Status, reason: str | None = None) -> dict[str, Any]:
    record = failed_record(InputFile(f"/lake/{name}", size, name), None, reason or "")
    record.update(status=status, reason=reason)
    return record


def _night_one() -> list[dict[str, Any]]:
    return [_record("a.parquet", 1024, Status.INDEXED), _record("b.parquet", 2048, Status.INDEXED),
            _record("c.parquet", 100, Status.FAILED, "MalformedFileError: bad footer"),
            _record("d.parquet", 100, Status.FAILED, "MalformedFileError: bad footer")]


def _night_two() -> list[dict[str, Any]]:
    return [_record("a.parquet", 1024, Status.ALREADY_INDEXED),
            _record("e.parquet", 4096, Status.CHANGED, "the file changed while it was read")]


def test_report_sums_a_dag_tree_per_night(tmp_path, capsys):
    root = tmp_path / "reports"
    write_report(_night_one()[:2], str(root / "run_date=2026-11-25" / "run1-try1.parquet"), {})
    write_report(_night_one()[2:], str(root / "run_date=2026-11-25" / "run1-try2.parquet"), {})
    write_report(_night_two(), str(root / "run_date=2026-11-26" / "run2-try1.jsonl"), {})
    (root / "run_date=2026-11-26" / "_SUCCESS").write_text("")

    assert main(["report", str(root)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("pageindex report: 3 reports, 6 files\n")
    first, second, total = out.split("\n\n")[1:]
    assert first.splitlines()[0] == "2026-11-25: 4 files, 3.2 KiB (2 reports)"
    assert "  indexed                 2 files      3.0 KiB" in first
    assert "  failed                  2 files        200 B" in first
    assert "  failures by reason:\n         2  failed: MalformedFileError: bad footer" in first
    assert second.splitlines()[0] == "2026-11-26: 2 files, 5.0 KiB (1 report)"
    assert "         1  changed: the file changed while it was read" in second
    assert "MalformedFileError" not in second
    assert total.splitlines()[0] == "all: 6 files, 8.2 KiB"
    assert "  indexed                 2 files      3.0 KiB" in total


def test_report_of_one_file_is_its_own_night(tmp_path, capsys):
    path = tmp_path / "r.parquet"
    write_report(_night_one(), str(path), {})
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{path}: 4 files, 3.2 KiB (1 report)" in out
    assert "\nall:" not in out


def test_an_unreadable_report_is_named_and_the_others_summed(tmp_path, capsys):
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    write_report(_night_one(), str(good), {})
    bad.write_text('{"path": "x"}\n')
    assert main(["report", str(bad), str(good)]) == 3
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        f"pageindex: error: MalformedFileError: {bad}: line 1 is not a pageindex record (needs path, status, reason, bytes_in)"]
    assert "pageindex report: 1 report, 4 files" in captured.out


def test_a_missing_report_path_is_a_usage_error(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert str(tmp_path / "nope") in capsys.readouterr().err


@pytest.mark.s3
def test_reports_on_s3_are_found_and_summed_per_night(s3_bucket, s3_storage_options):
    root = f"s3://{s3_bucket}/reports"
    write_report(_night_one(), f"{root}/run_date=2026-11-25/run1-try1.parquet", s3_storage_options)
    write_report(_night_two(), f"{root}/run_date=2026-11-26/run2-try1.jsonl", s3_storage_options)
    urls = report_urls([root + "/"], s3_storage_options)
    assert urls == [f"{root}/run_date=2026-11-25/run1-try1.parquet", f"{root}/run_date=2026-11-26/run2-try1.jsonl"]
    text = summarise([read_report(url, s3_storage_options) for url in urls])
    assert "\n2026-11-25: 4 files, 3.2 KiB (1 report)\n" in text
    assert "\n2026-11-26: 2 files, 5.0 KiB (1 report)\n" in text
    assert "\nall: 6 files, 8.2 KiB\n" in text
