"""Stopping a run from outside: start `python ARGS`, send it a signal once its first commits have
begun (their hidden temporaries exist), and list the temporaries left (tests/test_shutdown.py,
tests/job/test_job_shutdown.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.helpers.paths import REPO_ROOT


def temporaries(directory: Path) -> list[str]:
    """The commit temporaries in `directory` (local commits write `.NAME.pageindex-tmp-*`)."""
    return sorted(p.name for p in directory.iterdir() if ".pageindex-tmp-" in p.name)


def terminated_mid_commit(args: list[str], directory: Path, begun: int,
                          signum: int = signal.SIGTERM) -> subprocess.CompletedProcess:
    """Run `python ARGS`; once `begun` commit temporaries exist in `directory` (that many
    commits begun and not finished), send it `signum`."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, *args], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while len(temporaries(directory)) < begun:
            assert proc.poll() is None, "the run ended before its commits began: " + proc.communicate()[1]
            time.sleep(0.001)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=180)
    finally:
        proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
