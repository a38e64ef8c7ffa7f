"""Which scan path the processes that index files take: this process's, or every executor's asked
by a tiny Spark task at the job's start, and the line a run says of it when files take the fallback.
"""
from __future__ import annotations

import builtins
import logging
import types
from dataclasses import dataclass
from typing import Any, Iterable

from pageindex.errors import UsageError
from pageindex.scan.compiled import ARROW, COMPILED

log = logging.getLogger("pageindex.job.spark")
# What the job's warning and summary send a reader to.
DOCS = "docs/spark-job.md#what-executors-run"
NO_PACKAGE = "none"  # the path of a worker that cannot import pageindex at all


@dataclass(frozen=True, order=True)
class Worker:
    """One Python process's answer: where it runs, which interpreter and package, the path its
    scan takes (compiled, arrow, or none: pageindex does not import) and why not compiled."""

    host: str
    python: str
    package: str
    path: str
    why: str | None


def this_process() -> Worker:
    """The answer of the process that calls it (also what each probe task runs)."""
    return Worker(**_answer())


def _answer() -> dict[str, Any]:
    """Self-contained (imports inside): Spark ships it by value to executors, where pageindex
    may not import at all, and that too is an answer."""
    import os
    import socket
    import sys

    where = {"host": socket.gethostname(), "python": sys.executable}
    try:
        import pageindex
        from pageindex.scan import compiled
    except ImportError as err:
        return {**where, "package": "", "path": "none", "why": f"pageindex does not import: {err}"}  # NO_PACKAGE
    where["package"] = f"pageindex {pageindex.__version__} from {os.path.dirname(pageindex.__file__)}"
    try:
        path = compiled.path()
    except (ImportError, ValueError) as err:  # PAGEINDEX_SCAN_KERNEL insists, or is misspelled
        return {**where, "path": compiled.ARROW, "why": str(err)}
    if path == compiled.COMPILED:
        return {**where, "path": path, "why": None}
    forced = os.environ.get(compiled.ENV, "").strip().lower() == compiled.ARROW
    return {**where, "path": path, "why": f"{compiled.ENV}={compiled.ARROW}" if forced else compiled.missing()}


def probe(sc: Any) -> tuple[Worker, ...]:
    """Every distinct answer of the executors' Python workers: one task per core Spark offers
    now (executors that join later are not asked; their records still say their path)."""
    ask = _by_value(_answer)
    n = max(1, sc.defaultParallelism)
    sc.setJobDescription("pageindex: which scan path the executors take")
    try:
        answers = sc.parallelize(range(n), n).map(lambda _: ask()).collect()
    finally:
        sc.setJobDescription(None)
    return tuple(sorted({Worker(**a) for a in answers}))


def _by_value(fn: types.FunctionType) -> types.FunctionType:
    """A copy of `fn` bound to no module: Spark's pickler sends a module's function by reference,
    which an executor without pageindex could not load, and this one by value."""
    return types.FunctionType(fn.__code__, {"__builtins__": builtins}, fn.__name__)


def fallback(workers: Iterable[Worker]) -> str | None:
    """Why files are indexed by the Arrow fallback, naming the hosts, their Python and the reason
    (None when every worker takes the compiled path)."""
    slow = [w for w in workers if w.path != COMPILED]
    if not slow:
        return None
    reasons: dict[str, list[Worker]] = {}
    for w in slow:
        reasons.setdefault(w.why or "unknown", []).append(w)
    parts = []
    for why, some in sorted(reasons.items()):
        hosts = sorted({w.host for w in some})
        pythons = sorted({w.python for w in some})
        verb = "were not asked for" if why.endswith(f"={ARROW}") else "did not load"
        parts.append(f"the compiled kernels {verb} on {', '.join(hosts)} (python {', '.join(pythons)}): {why}")
    return "; ".join(parts)


def check(sc: Any, require_compiled: bool) -> tuple[Worker, ...]:
    """Ask the executors, say once what they run, and refuse to go on (UsageError: exit 2, no file
    touched) when they cannot import pageindex, or take the fallback under --require-compiled."""
    workers = probe(sc)
    broken = [w for w in workers if w.path == NO_PACKAGE]
    if broken:
        raise UsageError(f"the executors on {', '.join(sorted({w.host for w in broken}))} cannot run the job "
                         f"(python {broken[0].python}): {broken[0].why}; see {DOCS}")
    why = fallback(workers)
    if why is None:
        log.warning("executors scan with the compiled kernels: %s",
                    "; ".join(sorted({f"{w.python}, {w.package}" for w in workers})))
        return workers
    if require_compiled:
        raise UsageError(f"--require-compiled: {why}; see {DOCS}")
    log.warning("executors index files by the Arrow fallback, at 2-3x the CPU: %s; see %s "
                "(--require-compiled makes this an error)", why, DOCS)
    return workers
