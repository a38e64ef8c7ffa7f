"""Fuzz worker: runs many mutated inputs through one pageindex target per input, in a child
process with a memory limit, and reports one JSON line per input.

Usage: ``python -m tests.helpers.fuzz_runner < jobs.json``; a job is
``{"target": T, "file": F, "mutation": M, "seed": S}`` (a recipe, built by
tests.helpers.fuzz_mutations.build) or ``{"target": T, "bytes_path": P}`` (a stored input), plus
optional ``"options"`` for the retrofit target.  Targets:

  thrift    pageindex.format.thrift.decode_struct on the buffer; a decoded struct must re-encode to a
            canonical form that decodes to the same encoding (encode . decode is idempotent)
  footer    pageindex.format.footer.read_footer on a Source of the file
  scan      read_footer, then pageindex.scan.chunk_scan.scan_chunk(with_values=False) on every chunk
            (page walk and level decoding; a PageIndexError of one chunk does not stop the rest)
  retrofit  pageindex.retrofit(file, dry_run=True, ...), which hands pyarrow synthesized files

Before each input the worker prints ``{"event": "start", "i": i}`` and after it
``{"event": "done", "i": i, "status": ..., ...}``; status is "ok", "pageindex_error" (the
allowed outcomes), "error" (any other exception, MemoryError included), "timeout" (the per-input
alarm fired; the worker then exits) or "n/a" (the mutation had nothing to work on).  The parent
(``run_inputs``) adds "crashed" (the worker died: abort, segfault, killed) and "hung" (no answer
within the per-input bound even from the alarm, e.g. stuck in C code; the worker is killed),
and restarts a worker for the remaining inputs.  The address-space limit (RLIMIT_AS) makes a
memory blow-up a MemoryError (or a crash) rather than an exhausted machine.
"""
from __future__ import annotations

import hashlib
import json
import os
import queue
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.helpers.paths import REPO_ROOT

MEMORY_LIMIT = 4 << 30
PER_INPUT_SECONDS = 10.0
FAILURES = ("error", "timeout", "crashed", "hung")


class _Alarm(BaseException):
    """Raised by SIGALRM when one input runs past its time bound."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Alarm()


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _thrift(data: bytes) -> dict[str, Any]:
    from pageindex.format.thrift import decode_struct, encode_struct
    from tests.helpers.thrift_trees import rebuilt

    tree, end = decode_struct(data)
    if encode_struct(tree) != data[:end]:
        raise AssertionError("decoded struct does not encode back to the bytes it came from")
    once = encode_struct(rebuilt(tree))
    again, end2 = decode_struct(once)
    if end2 != len(once) or encode_struct(rebuilt(again)) != once:
        raise AssertionError("decoded struct does not re-encode to a stable canonical form")
    return {"fields": len(tree.fields), "end": end}


def _footer(path: str) -> dict[str, Any]:
    from pageindex.format.footer import read_footer
    from pageindex.index.marker import is_fully_indexed
    from pageindex.io.storage import open_source

    with open_source(path) as source:
        footer = read_footer(source)
        _ = footer.created_by, footer.key_value("pageindex"), is_fully_indexed(footer)
        return {"row_groups": len(footer.chunks), "leaves": len(footer.leaves)}


def _scan(path: str) -> dict[str, Any]:
    from pageindex.errors import PageIndexError
    from pageindex.format.footer import read_footer
    from pageindex.io.storage import open_source
    from pageindex.scan.chunk_scan import scan_chunk

    scanned = refused = 0
    reasons = []
    with open_source(path) as source:
        footer = read_footer(source)
        for row in footer.chunks:
            for chunk in row:
                try:
                    scan_chunk(source, footer, chunk, with_values=False)
                    scanned += 1
                except PageIndexError as err:
                    refused += 1
                    reasons.append(f"{type(err).__name__}: {err.reason}")
    return {"chunks_scanned": scanned, "chunks_refused": refused, "reasons": reasons[:3]}


def _retrofit(path: str, options: dict[str, Any]) -> dict[str, Any]:
    import pageindex

    result = pageindex.retrofit(path, dry_run=True, **options)
    return {"result": result.status, "chunks": len(result.chunks),
            "with_ci": sum(c.column_index for c in result.chunks)}


def _selftest(kind: str) -> dict[str, Any]:
    """Misbehaving targets that prove the harness attributes each failure to its input."""
    if kind == "abort":
        os.abort()
    if kind == "memory":
        return {"len": len(bytearray(MEMORY_LIMIT * 2))}
    if kind == "slow":  # interruptible: the alarm turns it into a timeout
        time.sleep(3600)
    if kind == "stuck":  # the alarm is blocked, as in C code that never returns to Python
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(3600)
    raise ValueError(kind)


def _one(job: dict[str, Any], workdir: str) -> dict[str, Any]:
    from pageindex.errors import PageIndexError
    from tests.helpers import fuzz_mutations as fm

    try:
        if job["target"].startswith("selftest:"):
            data = b""
        elif job.get("bytes_path"):
            data = Path(job["bytes_path"]).read_bytes()
        else:
            data = fm.build(job)
    except fm.NotApplicable as err:
        return {"status": "n/a", "message": str(err)}
    except Exception as err:  # noqa: BLE001 - a broken mutation is a harness bug, reported as such
        return {"status": "harness_error", "type": type(err).__name__, "message": str(err),
                "traceback": traceback.format_exc()}
    info = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    path = os.path.join(workdir, "input.parquet")
    if job["target"] != "thrift":
        with open(path, "wb") as fh:
            fh.write(data)
    options = job.get("options") or (fm.options(job) if job["target"] == "retrofit" else {})
    started = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, float(job.get("seconds") or PER_INPUT_SECONDS))
    try:
        if job["target"].startswith("selftest:"):
            out = _selftest(job["target"].split(":", 1)[1])
        elif job["target"] == "thrift":
            out = _thrift(data)
        elif job["target"] == "footer":
            out = _footer(path)
        elif job["target"] == "scan":
            out = _scan(path)
        elif job["target"] == "retrofit":
            out = _retrofit(path, options)
        else:
            raise ValueError(f"unknown target {job['target']}")
        signal.setitimer(signal.ITIMER_REAL, 0)
        status = {"status": "ok", **out}
    except _Alarm:
        status = {"status": "timeout", "traceback": traceback.format_exc()}
    except PageIndexError as err:
        signal.setitimer(signal.ITIMER_REAL, 0)
        status = {"status": "pageindex_error", "type": type(err).__name__, "message": str(err)}
    except BaseException as err:  # noqa: BLE001 - anything else is a finding
        signal.setitimer(signal.ITIMER_REAL, 0)
        status = {"status": "error", "type": type(err).__name__, "message": str(err)[:2000],
                  "traceback": traceback.format_exc()[-6000:]}
    return {**info, **status, "seconds": round(time.monotonic() - started, 4)}


def main() -> int:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    signal.signal(signal.SIGALRM, _on_alarm)
    jobs = json.load(sys.stdin)
    import pageindex  # noqa: F401  (imported before the first input, not during it)
    import pageindex.scan.chunk_scan  # noqa: F401

    with tempfile.TemporaryDirectory(prefix="pageindex-fuzz-") as workdir:
        for i, job in enumerate(jobs):
            _emit({"event": "start", "i": i})
            try:
                outcome = _one(job, workdir)
            except _Alarm:  # fired between the target's end and the timer's reset
                outcome = {"status": "timeout", "traceback": traceback.format_exc()}
            _emit({"event": "done", "i": i, **outcome})
            if outcome["status"] == "timeout":
                return 3  # the interrupted state is not trusted; the parent restarts a worker
    _emit({"event": "finished"})
    return 0


# ---------------------------------------------------------------- parent side

def _reader(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _run_worker(jobs: list[dict], per_input: float, startup: float, grace: float
                ) -> tuple[list[dict], dict | None, bool]:
    """One worker over `jobs`: (done records, culprit record if it died or hung, finished)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryFile() as err_file:
        proc = subprocess.Popen([sys.executable, "-m", "tests.helpers.fuzz_runner"], cwd=REPO_ROOT,
                                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=err_file, text=True)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
        proc.stdin.write(json.dumps(jobs))
        proc.stdin.close()
        done: list[dict] = []
        started: int | None = None
        finished = False
        hung = False
        wait = startup
        while True:
            try:
                line = lines.get(timeout=wait)
            except queue.Empty:
                hung = True
                proc.kill()
                break
            if line is None:
                break
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # stray output from a library
            if rec.get("event") == "start":
                started = rec["i"]
                wait = per_input + grace  # the alarm fires first unless stuck outside Python
            elif rec.get("event") == "done":
                done.append(rec)
                wait = per_input + grace
            elif rec.get("event") == "finished":
                finished = True
        rc = proc.wait()
        err_file.seek(0)
        stderr = err_file.read().decode(errors="replace")
    culprit = None
    if not finished and started is not None and started == len(done):
        culprit = {"status": "hung" if hung else "crashed", "returncode": rc,
                   "stderr": stderr[-4000:]}
    elif not finished and (started is None or started < len(done) - 1 or hung):
        if not done or done[-1]["status"] != "timeout":
            raise RuntimeError(f"fuzz worker failed outside any input (rc {rc}):\n{stderr[-4000:]}")
    return done, culprit, finished


def run_inputs(jobs: list[dict], *, per_input: float = PER_INPUT_SECONDS, startup: float = 120.0,
               grace: float = 20.0) -> list[dict]:
    """The outcome of every job, in order, restarting a worker after a crash, hang or timeout."""
    results: list[dict] = []
    pending = list(jobs)
    while pending:
        done, culprit, finished = _run_worker(pending, per_input, startup, grace)
        results += done
        pending = pending[len(done):]
        if finished:
            break
        if culprit is not None:
            results.append({"i": len(results), **culprit})
            pending = pending[1:]
    for i, rec in enumerate(results):
        rec["i"] = i
    return results


def run_parallel(jobs: list[dict], workers: int = 2, **kw: Any) -> list[dict]:
    """run_inputs over `workers` worker processes (jobs interleaved), outcomes in job order."""
    shares = [jobs[w::workers] for w in range(workers)]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        outs = list(pool.map(lambda share: run_inputs(share, **kw), shares))
    results: list[dict] = [None] * len(jobs)  # type: ignore[list-item]
    for w, out in enumerate(outs):
        for k, rec in enumerate(out):
            results[w + k * workers] = rec
    return results


if __name__ == "__main__":
    sys.exit(main())
