"""Run pageindex.retrofit on many files in one child process; one JSON line per file on stdout.

Usage: ``python -m tests.helpers.bad_input_runner < jobs.json`` where jobs.json is a JSON list of
``{"src": PATH, "dst": PATH or null, "force": bool}`` (dst null: in-place mode; force
optional).  Before each file it prints
``{"event": "start", "index": i, "src": ...}`` and after it ``{"event": "done", ...}`` with the
outcome, flushing after every line, so a parent that sees the child die (pyarrow can abort the
whole process on malformed input) knows which file was being processed.

The outcome of a file is one of:
  {"status": "indexed" | "already_indexed" | "dry_run", "chunks": n, "chunks_without_ci": m}
  {"status": "error", "type": class name, "mro": [class names], "message": str(err),
   "path": err.path (PageIndexError only), "pageindex_error": bool, "traceback": text}

``run_jobs`` is the parent side: it runs the jobs in as many child processes as it takes,
restarting after a crash or a timeout with the files not yet processed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from typing import Any

from tests.helpers.paths import REPO_ROOT


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _one(src: str, dst: str | None, force: bool) -> dict[str, Any]:
    import pageindex

    try:
        result = pageindex.retrofit(src, dst, force=force)
    except BaseException as err:  # noqa: BLE001 - every outcome is reported to the parent
        return {
            "status": "error",
            "type": type(err).__name__,
            "mro": [c.__name__ for c in type(err).__mro__],
            "message": str(err),
            "path": getattr(err, "path", None),
            "pageindex_error": isinstance(err, pageindex.PageIndexError),
            "traceback": traceback.format_exc(),
        }
    return {
        "status": result.status,
        "output": result.output,
        "chunks": len(result.chunks),
        "chunks_without_ci": sum(not c.column_index for c in result.chunks),
    }


def main() -> int:
    jobs = json.load(sys.stdin)
    for i, job in enumerate(jobs):
        _emit({"event": "start", "index": i, "src": job["src"]})
        if job.get("abort_for_test"):  # lets the harness prove it survives a dying child
            os.abort()
        outcome = _one(job["src"], job.get("dst"), bool(job.get("force")))
        _emit({"event": "done", "index": i, "src": job["src"], **outcome})
    _emit({"event": "finished"})
    return 0


# ---------------------------------------------------------------- parent side

def _run_batch(jobs: list[dict], timeout: float) -> tuple[list[dict], str, int | None, bool, int]:
    """One child over `jobs`: (done records, stderr, returncode or None on timeout, finished,
    number of jobs started)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "tests.helpers.bad_input_runner"],
            check=False, input=json.dumps(jobs), capture_output=True, text=True, timeout=timeout,
            cwd=REPO_ROOT, env=env,
        )
        out, err, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        rc = None
    done, finished, started = [], False, 0
    for line in out.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a library printing to stdout must not break the protocol
        if rec.get("event") == "start":
            started += 1
        elif rec.get("event") == "done":
            done.append(rec)
        elif rec.get("event") == "finished":
            finished = True
    return done, err, rc, finished, started


def run_jobs(jobs: list[dict], *, batch_timeout: float = 300.0) -> list[dict]:
    """The outcome of every job, in job order. A job during which the child died gets status
    "crashed" (with the return code: negative = killed by that signal) or "timeout"; the
    remaining jobs then run in a new child."""
    results: list[dict] = []
    pending = list(jobs)
    while pending:
        done, stderr, rc, finished, started = _run_batch(pending, batch_timeout)
        for job, rec in zip(pending, done):
            assert rec["src"] == job["src"], "runner output out of order"
            results.append(rec)
        pending = pending[len(done):]
        if finished or not pending:
            if pending:  # cannot happen unless the protocol broke
                raise RuntimeError(f"runner finished with {len(pending)} jobs unreported")
            break
        if started == len(done):  # died outside any job: the runner itself is broken
            raise RuntimeError(f"runner died before its next job (rc {rc}):\n{stderr[-4000:]}")
        culprit = pending.pop(0)
        results.append({
            "src": culprit["src"],
            "status": "timeout" if rc is None else "crashed",
            "returncode": rc,
            "stderr": stderr[-4000:],
        })
    return results


if __name__ == "__main__":
    sys.exit(main())
