"""The entry points end through `leave`: output flushed, exit handlers run, exit code kept."""
from __future__ import annotations

import subprocess
import sys

import tomllib

from tests.helpers.paths import REPO_ROOT


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
    assert scripts == {"pageindex": "pageindex.cli:console", "pageindex-job": "pageindex.job.spark:console"}
    for path in ("pageindex/__main__.py", "jobs/retrofit_job.py"):
        assert "leave(main(" in (REPO_ROOT / path).read_text(), path
