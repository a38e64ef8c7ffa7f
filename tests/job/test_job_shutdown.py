"""The job's driver stopped by SIGTERM (a scheduler's stop) while executors commit: one line, exit
143, and every file original or completely indexed with no temporary left, once the executors'
Python workers have unwound."""
from __future__ import annotations

import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pageindex.retrofit import retrofit
from tests.helpers.big_files import write_wide_file
from tests.helpers.signals import temporaries, terminated_mid_commit

pytestmark = [pytest.mark.spark, pytest.mark.slow]
FILES = 4
ROWS = 40_000


def _left_behind(directory: Path, wait: float = 60.0) -> list[str]:
    """The temporaries still there once the stopped workers are done unwinding (they run on
    after the driver has exited; a killed one would leave its temporary for good)."""
    deadline = time.monotonic() + wait
    while temporaries(directory) and time.monotonic() < deadline:
        time.sleep(0.2)
    return temporaries(directory)


def test_sigterm_to_the_driver_stops_the_job_cleanly(tmp_path):
    data = tmp_path / "lake"
    data.mkdir()
    original = write_wide_file(data / "part-0.parquet", ROWS)
    for i in range(1, FILES):
        (data / f"part-{i}.parquet").write_bytes(original)
    retrofit(str(data / "part-0.parquet"), str(tmp_path / "indexed.parquet"))
    indexed = (tmp_path / "indexed.parquet").read_bytes()

    run = terminated_mid_commit(["-m", "pageindex.job", "--input", str(data), "--in-place",
                                 "--report", str(tmp_path / "report.parquet")], data, 1)

    assert run.returncode == 143, run.stderr
    stopped = [line for line in run.stderr.splitlines() if line.startswith("pageindex-job: stopped")]
    assert len(stopped) == 1, run.stderr
    # py4j's own traceback of the interrupted call is not shown: the line above says it.
    assert "KeyboardInterrupt while sending command" not in run.stderr
    assert "terminated by SIGTERM" not in run.stderr
    assert _left_behind(data) == []
    for path in sorted(data.iterdir()):
        assert path.read_bytes() in (original, indexed), path.name
        assert pq.read_table(path).num_rows == ROWS
    assert not (tmp_path / "report.parquet").exists()
