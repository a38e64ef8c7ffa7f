"""The entry points end through `leave`: output flushed, exit handlers run, exit code kept; and
stop cleanly: SIGTERM during an in-place retrofit (one file, or several in worker processes)
leaves no temporary and the file original or complete, exit code 143."""
from __future__ import annotations

import signal
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
import tomllib

from pageindex.retrofit import retrofit
from tests.helpers.big_files import write_wide_file
from tests.helpers.paths import REPO_ROOT
from tests.helpers.signals import temporaries as _temporaries
from tests.helpers.signals import terminated_mid_commit as _terminated_mid_commit


def test_leave_flushes_runs_exit_handlers_and_keeps_the_code():
    program = ("import atexit, sys\n"
               "from pageindex.shutdown import leave\n"
               "atexit.register(lambda: print('handler ran', end=''))\n"
               "print('work done;', end='')\n"
               "sys.stderr.write('to stderr')\n"
               "leave(3)\n")
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=REPO_ROOT,
                          timeout=60, check=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "work done;handler ran", "to stderr")


def test_every_entry_point_leaves_through_shutdown():
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    # pageindex-deploy only copies files with the standard library: no Arrow thread pool to skip.
    assert scripts == {"pageindex": "pageindex.cli:console", "pageindex-job": "pageindex.job.spark:console",
                       "pageindex-deploy": "pageindex.deploy:console"}
    for path in ("pageindex/__main__.py", "jobs/retrofit_job.py", "pageindex/cli/__init__.py", "pageindex/job/spark.py"):
        assert "leave(stops_cleanly(main)(" in (REPO_ROOT / path).read_text(), path
    assert "console()" in (REPO_ROOT / "pageindex/job/__main__.py").read_text()


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> tuple[bytes, bytes]:
    """A ~33 MB file with no page index, and the bytes of its retrofit (deterministic)."""
    tmp = tmp_path_factory.mktemp("sigterm")
    original = write_wide_file(tmp / "big.parquet", 40_000)
    retrofit(str(tmp / "big.parquet"), str(tmp / "big.indexed.parquet"))
    return original, (tmp / "big.indexed.parquet").read_bytes()


def test_sigterm_during_in_place_retrofit_removes_the_temporary(tmp_path, big):
    original, indexed = big
    path = tmp_path / "big.parquet"
    path.write_bytes(original)
    run = _terminated_mid_commit(["-m", "pageindex", "retrofit", str(path)], tmp_path, 1)
    assert run.returncode == 143, run.stderr
    assert _temporaries(tmp_path) == []
    assert path.read_bytes() in (original, indexed)
    assert pq.read_table(path).num_rows == 40_000


def test_sigterm_with_worker_processes_removes_every_temporary(tmp_path, big):
    """--jobs 2: the signal reaches the parent only (as `timeout` and Kubernetes send it); the
    workers are stopped too, each undoing its commit, and files not started are not started."""
    original, indexed = big
    paths = [tmp_path / f"part-{i}.parquet" for i in range(4)]
    for path in paths:
        path.write_bytes(original)
    run = _terminated_mid_commit(["-m", "pageindex", "retrofit", "--jobs", "2", str(tmp_path)], tmp_path, 1)
    assert run.returncode == 143, run.stderr
    assert _temporaries(tmp_path) == []
    states = [path.read_bytes() for path in paths]
    assert all(state in (original, indexed) for state in states) and original in states


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stopped_executor_task_undoes_its_commit(tmp_path, big, signum):
    """A Spark executor's Python worker runs process_task; SIGTERM there, or SIGHUP (what
    pyspark's daemon sends its workers when Spark stops), undoes the commit in flight and ends
    the task with Terminated, which the worker reports."""
    original, indexed = big
    path = tmp_path / "big.parquet"
    path.write_bytes(original)
    program = ("import sys\n"
               "from pageindex.io.discovery import discover\n"
               "from pageindex.job.process import JobOptions, process_task\n"
               "from pageindex.shutdown import Terminated\n"
               f"files = discover([{str(path)!r}]).files\n"
               "try:\n"
               "    list(process_task([(f, None) for f in files], JobOptions()))\n"
               "except Terminated:\n"
               "    sys.exit(7)\n")
    run = _terminated_mid_commit(["-c", program], tmp_path, 1, signum)
    assert run.returncode == 7, run.stderr
    assert _temporaries(tmp_path) == [] and path.read_bytes() in (original, indexed)
