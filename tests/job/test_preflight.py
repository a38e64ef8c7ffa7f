"""Preflight: output paths proven writable by a probe that leaves nothing behind, and made absolute."""
from __future__ import annotations

import os

import pytest

from pageindex.errors import UsageError
from pageindex.job.preflight import check_report_path, normalised


def test_probe_leaves_no_file_and_no_directory(tmp_path):
    report = tmp_path / "gone" / "deeper" / "r.jsonl"
    check_report_path(str(report), {})
    assert list(tmp_path.iterdir()) == []


def test_existing_output_is_opened_not_changed(tmp_path):
    report = tmp_path / "r.jsonl"
    report.write_text("yesterday\n")
    os.utime(report, ns=(1_000_000_000, 1_000_000_000))
    check_report_path(str(report), {})
    assert report.read_text() == "yesterday\n" and report.stat().st_mtime_ns == 1_000_000_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.jsonl"]


@pytest.mark.parametrize("where", ["/proc/nope/r.jsonl", "/proc/r.jsonl", "/sys/r.jsonl"])
def test_pseudo_filesystems_refuse(where):
    """Writable by every permission bit root checks; refused when written."""
    with pytest.raises(UsageError, match="the state cannot be written here"):
        check_report_path(where, {}, "the state")


def test_normalised_is_absolute_with_dots_resolved_as_the_os_does(tmp_path, monkeypatch):
    (tmp_path / "real" / "sub").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real" / "sub", target_is_directory=True)
    monkeypatch.chdir(tmp_path / "real" / "sub")
    assert normalised("../r.parquet") == str(tmp_path / "real" / "r.parquet")
    assert normalised("./x/r.parquet") == str(tmp_path / "real" / "sub" / "x" / "r.parquet")
    # `..` after a link: the parent of its target, as open() would go (not a lexical cut)
    assert normalised(f"{tmp_path}/link/../r.parquet") == str(tmp_path / "real" / "r.parquet")
    # without dots, links are kept as typed
    assert normalised(f"file://{tmp_path}/link/r.parquet") == str(tmp_path / "link" / "r.parquet")
    assert normalised("relative.parquet") == str(tmp_path / "real" / "sub" / "relative.parquet")
    assert normalised("s3://bucket/a/../r.parquet") == "s3://bucket/a/../r.parquet"
    assert normalised(None) is None
