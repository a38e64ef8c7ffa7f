"""Cold start: the CPU a fresh process spends on its first file against a warm process's CPU for the
same file, on the install being benchmarked (python -m bench.cold_start [--size 100] [--rounds 3]).

Each figure comes from its own subprocess pinned to one core. `cold` is the whole process, from
interpreter start through pageindex's import to the end of its first exact dry run, with nothing of
pageindex loaded before; `warm` is the second dry run of the same file in a process that ran one.
The file is in the page cache for both; rounds are interleaved and medians reported.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.measure import pin_prefix


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child(mode: str, path: str) -> dict:
    """In the measured process: the figures of one cold or warm run."""
    import pageindex
    from pageindex.scan.compiled import path as scan_path

    imported = _cpu()
    if mode == "warm":
        pageindex.retrofit(path, dry_run=True)
    before = _cpu()
    result = pageindex.retrofit(path, dry_run=True)
    after = _cpu()
    return {"cpu": after if mode == "cold" else after - before, "import_cpu": imported,
            "status": result.status, "scan_path": scan_path(), "pageindex": pageindex.__file__}


def measure(path: str, rounds: int, cpus: str | None) -> dict:
    """Medians of `rounds` cold and warm subprocesses, interleaved."""
    runs: dict[str, list[dict]] = {"cold": [], "warm": []}
    for _ in range(rounds):
        for mode in runs:
            out = subprocess.run([*pin_prefix(cpus), sys.executable, "-m", "bench.cold_start", "--child", mode, path],
                                 capture_output=True, text=True, check=True)
            runs[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    cold = statistics.median(r["cpu"] for r in runs["cold"])
    warm = statistics.median(r["cpu"] for r in runs["warm"])
    first = runs["cold"][0]
    return {"cold_cpu": cold, "warm_cpu": warm, "ratio": cold / warm,
            "import_cpu": statistics.median(r["import_cpu"] for r in runs["cold"]),
            "scan_path": first["scan_path"], "pageindex": first["pageindex"], "rounds": rounds}


def report(name: str, figures: dict) -> str:
    return "\n".join([
        f"### Cold start: {name}", "",
        "| first file, fresh process (CPU s) | same file, warm process (CPU s) | ratio | of it, interpreter and imports |",
        "|---:|---:|---:|---:|",
        f"| {figures['cold_cpu']:.3f} | {figures['warm_cpu']:.3f} | {figures['ratio']:.2f} | {figures['import_cpu']:.3f} |",
        "", f"Scan path: {figures['scan_path']}; pageindex from {figures['pageindex']}; "
        f"medians of {figures['rounds']} interleaved rounds.", ""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=float, default=100, help="the Spark-like file's size in MB")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpus", default="0", help="taskset CPU list ('' = no pinning)")
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    from bench.datasets import MiB
    from bench.scan import spark_like

    started = time.monotonic()
    path = str(spark_like(int(args.size * MiB)))
    Path(path).read_bytes()  # into the page cache before either kind of run
    figures = measure(path, args.rounds, args.cpus or None)
    figures["seconds"] = time.monotonic() - started
    figures["load"] = os.getloadavg()
    print(report(f"Spark-like {args.size:.0f} MB, exact dry run", figures), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
