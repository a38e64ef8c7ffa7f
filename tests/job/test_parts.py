"""The job's report and state as folders of part files (pageindex.job.parts, pageindex.job.pipeline):
written by the tasks, read as one table by pyarrow, DuckDB, Spark and `pageindex report`; a crashed
run's parts count; a driver whose maxResultSize is tiny still ends well.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex import cli
from pageindex.job.report import REPORT_SCHEMA
from pageindex.job.spark import main
from pageindex.job.state import STATE_SCHEMA, read_state
from tests.helpers.paths import REPO_ROOT
from tests.helpers.report_parts import report_records, state_paths


def _lake(root: Path, dirs: int, per_dir: int, rows: int = 8) -> list[Path]:
    """`dirs` partitions of `per_dir` tiny files each (a page of `rows` int64s)."""
    paths = []
    for d in range(dirs):
        folder = root / f"day={d:03d}"
        folder.mkdir(parents=True)
        for i in range(per_dir):
            path = folder / f"f{i:04d}.parquet"
            pq.write_table(pa.table({"x": pa.array(range(i, i + rows), pa.int64())}), path)
            paths.append(path)
    return paths


def _job(*args: object, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m pageindex.job ARGS` (a local Spark of its own, two cores)."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "pageindex.job", *map(str, args)], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=1800)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(2400)  # two runs of a local Spark over 5,000 files on a shared machine
def test_tiny_max_result_size_run_writes_report_and_state_then_all_unchanged(tmp_path):
    """5,000 files in 50 partitions under spark.driver.maxResultSize=1m: what a 1 GB limit is to
    millions of files. Records reach no driver: exit 0, every output, every row, every entry."""
    lake, out, report, state = tmp_path / "lake", tmp_path / "out", tmp_path / "r.parquet", tmp_path / "s"
    paths = _lake(lake, 50, 100)
    args = ["--input", lake, "--output", out, "--report", report, "--state", state,
            "--conf", "spark.driver.maxResultSize=1m", "--conf", "spark.master=local[2]",
            "--progress-seconds", "600"]
    first = _job(*args)
    assert first.returncode == 0, first.stderr[-3000:]
    assert len(list(out.rglob("*.parquet"))) == 5000
    records = pq.read_table(report)  # pyarrow reads the folder as one table
    assert records.num_rows == 5000 and records.schema == REPORT_SCHEMA
    assert set(records.column("status").to_pylist()) == {"indexed"}
    assert set(records.column("path").to_pylist()) == {str(p) for p in paths}
    duck = duckdb.sql(f"select count(*), count(distinct path) from read_parquet('{report}/*.parquet')").fetchall()[0]
    assert duck == (5000, 5000)
    assert len(read_state(str(state), {})) == 5000 and state_paths(state) == {str(p) for p in paths}
    assert pq.read_table(state).schema == STATE_SCHEMA
    assert "pageindex job: 5000 files" in first.stdout
    second = _job(*args)
    assert second.returncode == 0, second.stderr[-3000:]
    again = pq.read_table(report)
    assert again.num_rows == 5000 and set(again.column("status").to_pylist()) == {"unchanged"}
    assert len(read_state(str(state), {})) == 5000
    # The state's earlier run's parts are gone: each path once in the folder.
    assert pq.read_table(state).num_rows == 5000


@pytest.mark.spark
@pytest.mark.slow
def test_killed_driver_leaves_parts_the_next_run_counts(spark, tmp_path):
    """SIGKILL of the driver midway: the parts its tasks wrote before stay, and the next run
    finds their files unchanged; it opens only the others, then its own parts replace them."""
    lake, state = tmp_path / "lake", tmp_path / "state"
    paths = _lake(lake, 3, 10)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "tests.helpers.job_crash_runner", "--state-folder", str(state), "--after", "3",
         "--", "--input", str(lake), "--in-place", "--state", str(state), "--target-task-bytes", "1",
         "--report", str(tmp_path / "killed.parquet")],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]
    assert "KILLING" in done.stdout
    saved = read_state(str(state), {})
    assert 3 <= len(saved) < len(paths), "killed midway"
    report = tmp_path / "rerun.parquet"
    assert main(["--input", str(lake), "--in-place", "--state", str(state), "--report", str(report)],
                spark=spark) == 0
    records = {r["path"]: r["status"] for r in report_records(report)}
    assert {p for p, s in records.items() if s == "unchanged"} == set(saved)
    assert {s for p, s in records.items() if p not in saved} == {"indexed"}
    assert state_paths(state) == {str(p) for p in paths}
    assert pq.read_table(state).num_rows == len(paths), "compacted: one entry per file"


def test_dry_run_writes_no_state_and_report_folder_reads_everywhere(spark, tmp_path):
    lake, state, report = tmp_path / "lake", tmp_path / "state", tmp_path / "r.parquet"
    paths = _lake(lake, 2, 3)
    assert main(["--input", str(lake), "--in-place", "--dry-run", "--state", str(state), "--report",
                 str(report)], spark=spark) == 0
    assert not state.exists() or not list(state.iterdir())
    assert {r["status"] for r in report_records(report)} == {"dry_run"}
    assert main(["--input", str(lake), "--in-place", "--state", str(state), "--report", str(report)],
                spark=spark) == 0
    rows = spark.read.parquet(str(report)).collect()  # Spark reads the folder as one table
    assert sorted(r["path"] for r in rows) == sorted(str(p) for p in paths)
    assert {r["status"] for r in rows} == {"indexed"}
    assert cli.main(["report", str(report)]) == 0


def test_report_summary_counts_a_folder_as_one_report(spark, tmp_path, capsys):
    lake = tmp_path / "lake"
    _lake(lake, 2, 2)
    reports = tmp_path / "reports"
    assert main(["--input", str(lake), "--in-place", "--target-task-bytes", "1", "--report",
                 str(reports / "run_date=2026-01-01" / "r.jsonl")], spark=spark) == 0
    assert len(list((reports / "run_date=2026-01-01" / "r.jsonl").glob("part-*.jsonl"))) >= 2
    capsys.readouterr()
    assert cli.main(["report", str(reports)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("pageindex report: 1 report, 4 files"), out
    assert "2026-01-01: 4 files" in out


def test_a_directory_of_other_files_is_refused_as_report_or_state(tmp_path, capsys):
    lake = tmp_path / "lake"
    _lake(lake, 1, 1)
    for flag in ("--report", "--state"):
        assert main(["--input", str(lake), "--in-place", flag, str(lake)], spark=object()) == 2
        err = capsys.readouterr().err
        assert "holds other files than part files" in err and str(lake) in err, err
