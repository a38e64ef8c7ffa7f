"""The command line as a user runs it: `python -m pageindex ARGS` in a subprocess, this checkout's
package first on its path, and the check that it exited as expected without a traceback."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import REPO_ROOT


def run_cli(*args: str | Path, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "pageindex", *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env=env, check=False)


def ok(proc: subprocess.CompletedProcess, code: int = 0) -> subprocess.CompletedProcess:
    assert proc.returncode == code, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc
