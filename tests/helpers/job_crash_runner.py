"""The Spark job in a child process whose driver kills itself (SIGKILL) once its state folder
holds N part files of processing tasks, for the job's crash test (tests/job/test_parts.py).

    python -m tests.helpers.job_crash_runner --state-folder DIR --after N -- JOB ARGS...

A thread of the driver watches the folder; the kill ends the driver on the spot, as a lost
machine would (its JVM ends with it: the gateway exits when its parent's pipe closes).
"""
from __future__ import annotations

import argparse
import os
import signal
import threading
import time
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--state-folder", required=True)
    p.add_argument("--after", type=int, required=True)
    p.add_argument("args", nargs=argparse.REMAINDER)
    opts = p.parse_args()
    folder = Path(opts.state_folder)

    def watch() -> None:
        deadline = time.monotonic() + 600  # bounded: the job ends the process well before
        while time.monotonic() < deadline:
            parts = [p for p in folder.glob("part-*-task*.parquet")] if folder.is_dir() else []
            if len(parts) >= opts.after:
                print(f"KILLING with {len(parts)} task parts", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(0.01)

    threading.Thread(target=watch, daemon=True).start()
    from pageindex.job.spark import main as job_main

    raise SystemExit(job_main([a for a in opts.args if a != "--"], master="local[1]"))


if __name__ == "__main__":
    main()
