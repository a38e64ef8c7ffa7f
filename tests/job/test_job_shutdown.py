"""The job's driver stopped by SIGTERM (a scheduler's stop) while executors commit: one line, exit
143, and every file original or completely indexed with no temporary left, once the executors'
Python workers have unwound."""
from __future__ import annotations

import logging
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pageindex.job.spark import _not_interrupted
from pageindex.retrofit import retrofit
from pageindex.shutdown import Terminated
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
    assert "terminated by SIGTERM" not in run.stderr, run.stderr  # the whole of it, to see where
    assert _left_behind(data) == []
    for path in sorted(data.iterdir()):
        assert path.read_bytes() in (original, indexed), path.name
        assert pq.read_table(path).num_rows == ROWS
    # The report holds the parts of the tasks that ended, each whole; no summary was printed.
    report = tmp_path / "report.parquet"
    for part in report.glob("part-*") if report.exists() else []:
        assert pq.read_table(part).num_rows >= 0, part
    assert "pageindex job:" not in run.stdout


def _logged(error: BaseException) -> logging.LogRecord:
    return logging.LogRecord("root", logging.ERROR, __file__, 1, "Exception while sending command.",
                             None, (type(error), error, error.__traceback__))


def test_py4j_tracebacks_of_an_interrupted_call_are_not_logged():
    """py4j logs the interruption itself, or a socket error raised while handling it (its
    `logging.exception` in send_command): both are the stop, which main reports in one line."""
    try:
        try:
            raise Terminated("terminated by SIGTERM")
        except KeyboardInterrupt:
            raise OSError("connection reset")  # noqa: B904 - chained implicitly, as py4j's is
    except OSError as err:
        during_the_stop = err
    assert not _not_interrupted(_logged(Terminated("terminated by SIGTERM")))
    assert not _not_interrupted(_logged(during_the_stop))
    assert _not_interrupted(_logged(OSError("connection reset")))
    assert _not_interrupted(logging.LogRecord("root", logging.ERROR, __file__, 1, "no error", None, None))
