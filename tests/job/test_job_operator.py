"""What `pageindex-job` tells an operator: unwritable outputs and malformed storage options are
exit 2 before Spark starts; in a log captured as schedulers capture it (2>&1), the job's own
lines start lines of their own after Spark's console progress bar; files being written and
read-only files are counted and fail no run.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pageindex.job.config import check_argv
from pageindex.job.spark import main
from tests.helpers.files import write_sorted_int_file
from tests.helpers.paths import REPO_ROOT

SENTINEL_SPARK = object()  # usage errors must be found before Spark is touched


def write_file(path: Path, rows: int = 3000) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_sorted_int_file(path, rows, page_index=False, data_page_size=1024, write_batch_size=256)


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p): (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("flag", ["--report", "--summary-json", "--state"])
def test_unwritable_output_is_exit_2_before_spark(tmp_path, flag, capsys):
    lake = tmp_path / "lake"
    write_file(lake / "a.parquet")
    before = snapshot(lake)
    target = "/proc/nope/out.json"
    assert main(["--input", str(lake), "--in-place", flag, target], spark=SENTINEL_SPARK) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and target in err and "cannot be written here" in err, err
    assert snapshot(lake) == before


def test_malformed_storage_option_is_one_usage_line(capsys):
    assert check_argv(["--input", "s3://b/t", "--in-place", "--storage-option", "client_kwargs=notjson"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pageindex-job: error: storage option client_kwargs=")
    assert "takes a JSON object" in err


def _job(lake: Path, *more: str) -> subprocess.CompletedProcess:
    """`python -m pageindex.job` (local[*]) with stdout and stderr in one stream, as a scheduler
    captures them (2>&1): bytes as written, carriage returns included."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYSPARK_PYTHON": sys.executable}
    return subprocess.run([sys.executable, "-m", "pageindex.job", "--input", str(lake), "--in-place",
                           "--force", *more], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                          cwd=lake.parent, timeout=600, check=False)


def _own_lines_start_lines(log: str) -> list[str]:
    """The job's own lines (summary, errors, [pageindex] log lines) that do not start a line of
    the log split on newlines only (as `grep`, `tail` and log shippers split it)."""
    own = ("pageindex job:", "pageindex-job:", "[pageindex]")
    return [line for line in log.split("\n") if any(tag in line for tag in own)
            and not line.startswith(own)]


@pytest.mark.spark
@pytest.mark.slow
def test_job_lines_start_lines_of_their_own_in_a_captured_log(tmp_path):
    """By default the job's session draws no console progress bar; asked for one (--conf
    spark.ui.showConsoleProgress=true), it is drawn, and the summary still starts a line. The
    same runs count a file being written and a read-only file, and exit 0."""
    lake = tmp_path / "lake"
    for i in range(4):
        write_file(lake / f"f{i}.parquet", 100_000)
    whole = (lake / "f0.parquet").read_bytes()
    (lake / "writing.parquet").write_bytes(whole[: len(whole) // 2])
    (lake / "f3.parquet").chmod(0o444)
    try:
        plain = _job(lake)
        log = plain.stdout.decode()
        assert plain.returncode == 0, log
        assert "\r[Stage" not in log and _own_lines_start_lines(log) == [], log
        assert "\n  being_written           1 file" in log and "\n  read_only               1 file" in log, log
        drawn = _job(lake, "--conf", "spark.ui.showConsoleProgress=true")
        log = drawn.stdout.decode()
        assert drawn.returncode == 0, log
        assert "\r[Stage" in log, "the progress bar was not drawn: the check below would prove nothing"
        assert "\npageindex job: 5 files in " in log and _own_lines_start_lines(log) == [], log
    finally:
        (lake / "f3.parquet").chmod(0o644)
