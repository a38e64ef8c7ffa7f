"""A Spark standalone cluster on this machine: a Master and one Worker JVM (pyspark's own
spark-class), started with no Python settings of the test's, so executors run only what a job ships."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pyspark

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
# Variables that would put the test's Python, or a checkout, in the executors' view.
NOT_INHERITED = ("PYTHONPATH", "PYTHONHOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV",
                 "PAGEINDEX_SCAN_KERNEL", "SPARK_HOME")


@dataclass(frozen=True)
class Standalone:
    url: str  # spark://127.0.0.1:PORT
    work_dir: Path  # where the Worker runs executors: each in work_dir/APP/ID


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env() -> dict[str, str]:
    """The environment without the test's Python settings; PATH without any venv's bin/."""
    env = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not (Path(p) / "activate").exists())
    env["SPARK_DAEMON_MEMORY"] = "256m"
    return env


def _alive_workers(ui: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=5) as r:
            state = json.load(r)
    except OSError:
        return 0
    return sum(w.get("state") == "ALIVE" for w in state.get("workers", []))


@contextmanager
def standalone_cluster(tmp: Path, cores: int = 2, memory: str = "1g") -> Iterator[Standalone]:
    """Master and Worker started, the Worker registered; both stopped (and waited for) after."""
    port, ui, worker_ui = _free_port(), _free_port(), _free_port()
    work = tmp / "work"
    work.mkdir(parents=True)
    env = clean_env()
    procs = []
    try:
        procs.append(subprocess.Popen(
            [str(SPARK_CLASS), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(ui)],
            env=env, cwd=tmp, stdout=open(tmp / "master.log", "wb"), stderr=subprocess.STDOUT,
            start_new_session=True))
        url = f"spark://127.0.0.1:{port}"
        procs.append(subprocess.Popen(
            [str(SPARK_CLASS), "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
             "--cores", str(cores), "--memory", memory, "--work-dir", str(work),
             "--webui-port", str(worker_ui), url],
            env=env, cwd=tmp, stdout=open(tmp / "worker.log", "wb"), stderr=subprocess.STDOUT,
            start_new_session=True))
        deadline = time.monotonic() + 180
        while _alive_workers(ui) < 1:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                logs = "".join((tmp / n).read_text(errors="replace")[-3000:] for n in ("master.log", "worker.log"))
                raise RuntimeError(f"the standalone cluster did not start:\n{logs}")
            time.sleep(1)
        yield Standalone(url, work)
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
