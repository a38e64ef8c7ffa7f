"""Running one measured subprocess: CPU pinning, wall time, peak RSS (ru_maxrss via wait4, or
VmHWM of a whole process tree for the JVM)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pin_prefix(cpus: str | None) -> list[str]:
    """`taskset -c CPUS` when taskset exists and CPUS is set."""
    if cpus and shutil.which("taskset"):
        return ["taskset", "-c", cpus]
    return []


@dataclass
class Run:
    """One finished child process."""

    argv: list[str]
    returncode: int
    wall: float  # seconds from spawn to exit, as seen by the parent
    maxrss: int  # bytes: the child's own VmHWM when it reported one (bench.worker does), else
    # ru_maxrss, which on Linux also carries the parent's high-water mark from before exec
    cpu_total: float  # user + system seconds of the child (whole process, imports included)
    result: dict = field(default_factory=dict)  # the JSON the child printed last, if any
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def cpu(self) -> float:
        """The child's own CPU time of the operation when reported, else its whole CPU time."""
        return float(self.result.get("cpu", self.cpu_total))

    @property
    def seconds(self) -> float:
        """The child's own timing of the measured operation when it reported one, else wall."""
        return float(self.result.get("seconds", self.wall))


def run(argv: list[str], cpus: str | None, env: dict | None = None, timeout: float | None = None) -> Run:
    """Run argv pinned to `cpus`, returning wall time, ru_maxrss and its last JSON line."""
    full = pin_prefix(cpus) + argv
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(full, stdout=out, stderr=err, cwd=ROOT, env=env)
        deadline = None if timeout is None else started + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG if deadline else 0)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.01)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    result = {}
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                result = json.loads(line)
                break
            except ValueError:
                pass
    maxrss = int(result.get("vmhwm") or usage.ru_maxrss * 1024)
    return Run(full, proc.returncode, wall, maxrss, usage.ru_utime + usage.ru_stime,
               result, stderr[-4000:])


def worker(op: str, *args: str, cpus: str | None, timeout: float | None = None, prime_mb: int = 0) -> Run:
    """`python -m bench.worker OP ARGS...` pinned to `cpus`; `prime_mb`: MiB of memory the worker
    touches and frees just before its timed operation (bench.worker._prime_memory)."""
    env = {**os.environ, "BENCH_PRIME_MB": str(prime_mb)} if prime_mb else None
    return run([sys.executable, "-m", "bench.worker", op, *map(str, args)], cpus, env=env, timeout=timeout)


# ---- process trees (the JVM is a grandchild of the Spark worker) --------------------------------

def descendants(pid: int) -> list[int]:
    """pid and every live descendant."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        stack.extend(children.get(p, ()))
    return out


def status_bytes(pid: int | str, key: str) -> int:
    """A memory field of /proc/PID/status (VmHWM, VmRSS, ...) in bytes; 0 if the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree_hwm(pid: int) -> int:
    """Sum of VmHWM (peak RSS) over the tree, in bytes: an upper bound of the tree's peak."""
    return sum(status_bytes(p, "VmHWM") for p in descendants(pid))


def tree_rss(pid: int) -> int:
    return sum(status_bytes(p, "VmRSS") for p in descendants(pid))


def tree_cpu(pid: int) -> float:
    """User + system CPU seconds consumed so far by the live processes of the tree."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def reset_hwm(pid: int) -> bool:
    """Reset VmHWM of every process in the tree (`echo 5 > clear_refs`); False if not allowed."""
    ok = True
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            ok = False
    return ok
