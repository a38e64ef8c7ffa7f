"""Virtualenvs for tools too heavy or too tightly pinned to share .venv (Airflow, DuckDB's lake extensions).

Each is created on first use and reused while its stamp file matches its pins and Python version; a
failed install fails the test (pytest.fail), it never skips it. A lock file serializes xdist workers.
"""
from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class SideVenv:
    path: Path
    pins: tuple[str, ...]
    label: str  # names the venv in stamp files and messages: "airflow", "duckdb"
    install_timeout_s: int

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def stamp(self) -> Path:
        return self.path / f".pageindex-{self.label}-stamp"

    def _key(self) -> dict:
        return {"pins": list(self.pins), "python": f"{sys.version_info.major}.{sys.version_info.minor}"}

    def _current(self) -> bool:
        if not (self.stamp.is_file() and self.python.exists()):
            return False
        try:
            return json.loads(self.stamp.read_text()).get("key") == self._key()
        except ValueError:
            return False

    def _install(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        started = time.monotonic()
        log = []
        steps = [
            [sys.executable, "-m", "venv", str(self.path)],
            [str(self.python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet", *self.pins],
        ]
        for cmd in steps:
            try:
                proc = subprocess.run(cmd, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, timeout=self.install_timeout_s, stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired as exc:
                shutil.rmtree(self.path, ignore_errors=True)
                pytest.fail(f"installing {self.label} timed out after {exc.timeout}s: {' '.join(cmd)}")
            log.append(proc.stdout)
            if proc.returncode != 0:
                shutil.rmtree(self.path, ignore_errors=True)
                pytest.fail(f"installing {self.label} failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                            + "".join(log)[-4000:])
        seconds = round(time.monotonic() - started, 1)
        self.stamp.write_text(json.dumps({"key": self._key(), "install_seconds": seconds}, indent=1) + "\n")
        print(f"\n{self.path.name}: installed {' '.join(self.pins)} in {seconds}s", file=sys.stderr)

    def ensure(self) -> Path:
        """The venv's python, after creating the venv if it is missing or its pins changed."""
        with open(self.path.with_name(self.path.name + ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not self._current():
                self._install()
        return self.python
