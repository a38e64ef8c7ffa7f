"""Which scan path each file took: the record's scan_path, the summary's count of files indexed by
the Arrow fallback, the executors asked at the job's start, and --require-compiled (exit 2)."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex.io.discovery import InputFile
from pageindex.job import kernel_probe
from pageindex.job.process import failed_record
from pageindex.job.report import summary, summary_document
from tests.helpers.report_parts import report_records
from pageindex.job.spark import main
from pageindex.retrofit import Status, retrofit
from pageindex.scan import compiled
from tests.helpers.paths import REPO_ROOT


def _file(path: Path) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(range(4000), pa.int64())}), path, write_page_index=False,
                   data_page_size=1024)
    return path.read_bytes()


@contextmanager
def _executor_env(spark, key: str, value: str) -> Iterator[None]:
    """`key`=`value` in the executors' Python workers: Spark starts workers for each distinct
    environment, so the session's workers already running keep theirs."""
    env = spark.sparkContext.environment
    env[key] = value
    try:
        yield
    finally:
        del env[key]


def test_record_says_the_path_its_scan_took(tmp_path, monkeypatch):
    src = tmp_path / "a.parquet"
    _file(src)
    for choice in (compiled.ARROW, compiled.AUTO):
        monkeypatch.setenv(compiled.ENV, choice)
        result = retrofit(str(src), str(tmp_path / f"{choice}.parquet"))
        assert result.scan_path == compiled.path()
        assert result.to_dict()["scan_path"] == result.scan_path
    assert retrofit(str(src), str(tmp_path / "x.parquet"), dry_run=True).scan_path == compiled.path()
    monkeypatch.setenv(compiled.ENV, compiled.ARROW)
    assert retrofit(str(src), str(tmp_path / "y.parquet")).scan_path == compiled.ARROW
    # both paths write the same bytes
    assert (tmp_path / "arrow.parquet").read_bytes() == (tmp_path / "auto.parquet").read_bytes()


def test_summary_counts_files_indexed_by_the_fallback():
    def record(i: int, status: str, path: str | None) -> dict:
        return {**failed_record(InputFile(f"/d/{i}.parquet", 10, f"{i}.parquet"), None, ""),
                "status": status, "scan_path": path}

    records = [record(0, Status.INDEXED, compiled.ARROW), record(1, Status.DRY_RUN, compiled.ARROW),
               record(2, Status.INDEXED, compiled.COMPILED), record(3, Status.FAILED, compiled.ARROW),
               record(4, Status.UNCHANGED, None)]
    why = "the compiled kernels did not load on h1 (python /p): ImportError: x"
    lines = summary(records, 1.0, fallback=why, fallback_docs="docs/x.md").splitlines()
    assert f"  2 files indexed by the Arrow fallback: {why}; see docs/x.md" in lines
    # written or not, only files whose index was computed count; none: no line
    assert not [ln for ln in summary(records[2:], 1.0).splitlines() if "fallback" in ln]
    assert summary_document(records, 1.0, 0, None)["scan_paths"] == {"arrow": 2, "compiled": 1}


def test_fallback_names_hosts_pythons_and_reasons():
    ok = kernel_probe.Worker("h0", "/e/bin/python", "pageindex 1 from /e", compiled.COMPILED, None)
    slow = kernel_probe.Worker("h2", "/u/bin/python3", "pageindex 1 from /z", compiled.ARROW, "ImportError: no")
    slow1 = kernel_probe.Worker("h1", "/u/bin/python3", "pageindex 1 from /z", compiled.ARROW, "ImportError: no")
    forced = kernel_probe.Worker("h3", "/e/bin/python", "pageindex 1 from /e", compiled.ARROW,
                                 f"{compiled.ENV}=arrow")
    assert kernel_probe.fallback([ok]) is None
    assert kernel_probe.fallback([ok, slow, slow1]) == \
        "the compiled kernels did not load on h1, h2 (python /u/bin/python3): ImportError: no"
    assert kernel_probe.fallback([forced]) == \
        f"the compiled kernels were not asked for on h3 (python /e/bin/python): {compiled.ENV}=arrow"


def test_this_process_answers_as_the_scan_chooses(monkeypatch):
    here = kernel_probe.this_process()
    assert here.python == sys.executable and here.path == compiled.path()
    assert here.package.endswith(str(Path(compiled.__file__).parent.parent))
    monkeypatch.setenv(compiled.ENV, compiled.ARROW)
    assert kernel_probe.this_process().path == compiled.ARROW
    assert kernel_probe.this_process().why == f"{compiled.ENV}=arrow"


def test_cli_require_compiled_exits_2_before_any_file(tmp_path):
    src = tmp_path / "a.parquet"
    before = _file(src)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), compiled.ENV: compiled.ARROW}
    cmd = [sys.executable, "-m", "pageindex", "retrofit", str(src), "--require-compiled"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "--require-compiled: the compiled kernels were not asked for" in proc.stderr
    assert src.read_bytes() == before
    # without the flag: indexed by the fallback, counted in the summary (two files: a summary)
    _file(tmp_path / "b.parquet")
    proc = subprocess.run(cmd[:-1] + [str(tmp_path / "b.parquet"), "--json"], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(ln)["scan_path"] for ln in proc.stdout.splitlines()] == ["arrow", "arrow"]
    assert "2 files indexed by the Arrow fallback: the compiled kernels were not asked for" in proc.stderr


@pytest.mark.spark
def test_job_warns_counts_and_refuses_a_fallback_executor(spark, tmp_path, caplog):
    data = tmp_path / "data"
    before = _file(data / "a.parquet")
    report = tmp_path / "r.jsonl"
    with _executor_env(spark, compiled.ENV, compiled.ARROW):
        # --require-compiled: exit 2, the file untouched, no report
        assert main(["--input", str(data), "--in-place", "--report", str(report), "--require-compiled"],
                    spark=spark) == 2
        assert (data / "a.parquet").read_bytes() == before and not report.exists()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="pageindex.job.spark"):
            assert main(["--input", str(data), "--in-place", "--report", str(report)], spark=spark) == 0
    [warning] = [m for m in caplog.messages if "Arrow fallback" in m]
    assert f"{compiled.ENV}=arrow" in warning and "--require-compiled" in warning
    [row] = report_records(report)
    assert row["status"] == "indexed" and row["scan_path"] == "arrow"


@pytest.mark.spark
def test_job_probe_says_what_executors_run(spark, tmp_path, caplog, capsys):
    data = tmp_path / "data"
    _file(data / "a.parquet")
    report = tmp_path / "r.parquet"
    with caplog.at_level(logging.WARNING, logger="pageindex.job.spark"):
        assert main(["--input", str(data), "--in-place", "--report", str(report)], spark=spark) == 0
    workers = kernel_probe.probe(spark.sparkContext)
    assert workers and all(w.path == compiled.path() for w in workers)
    [row] = report_records(report)
    assert row["scan_path"] == compiled.path()
    said = [m for m in caplog.messages if m.startswith("executors ")]
    assert len(said) == 1, caplog.messages  # once, at the start
    if compiled.path() == compiled.COMPILED:
        assert said[0].startswith("executors scan with the compiled kernels: ")
        assert "fallback" not in capsys.readouterr().out
