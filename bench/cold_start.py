"""Cold start: the CPU a fresh process spends on its first file, with caches empty and warm, on the
install being benchmarked (python -m bench.cold_start [--size 100] [--rounds 3]).

Each figure comes from its own subprocess pinned to one core, from interpreter start through
pageindex's import to the end of one exact dry run. `cold`: a home, cache and temporary directory
that are new and empty (a machine that never ran pageindex: where a JIT would keep compiled code);
`warm`: the same directories after earlier runs. `second file` is the dry run of the same file
again in a process that ran one: what the interpreter and imports add is the rest. The file is in
the page cache for all; rounds are interleaved and medians reported.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.measure import pin_prefix


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child(mode: str, path: str) -> dict:
    """In the measured process: the figures of one run (mode "second": the file done twice)."""
    import pageindex
    from pageindex.scan.compiled import path as scan_path

    imported = _cpu()
    if mode == "second":
        pageindex.retrofit(path, dry_run=True)
    before = _cpu()
    result = pageindex.retrofit(path, dry_run=True)
    after = _cpu()
    return {"cpu": after - before if mode == "second" else after, "import_cpu": imported,
            "status": result.status, "scan_path": scan_path(), "pageindex": pageindex.__file__}


def _dirs(root: Path) -> dict[str, str]:
    """A home, cache and temporary directory under root, made if missing."""
    env = {}
    for name, var in (("home", "HOME"), ("cache", "XDG_CACHE_HOME"), ("tmp", "TMPDIR")):
        (root / name).mkdir(parents=True, exist_ok=True)
        env[var] = str(root / name)
    return env


def measure(path: str, rounds: int, cpus: str | None) -> dict:
    """Medians of `rounds` cold, warm and second-file subprocesses, interleaved."""
    runs: dict[str, list[dict]] = {"cold": [], "warm": [], "second": []}
    with tempfile.TemporaryDirectory() as tmp:
        warm = _dirs(Path(tmp) / "warm")
        for k in range(rounds):
            for mode in runs:
                dirs = _dirs(Path(tmp) / f"cold-{k}") if mode == "cold" else warm
                out = subprocess.run([*pin_prefix(cpus), sys.executable, "-m", "bench.cold_start", "--child",
                                      mode, path], capture_output=True, text=True, check=True,
                                     env=os.environ | dirs)
                runs[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    med = {mode: statistics.median(r["cpu"] for r in rs) for mode, rs in runs.items()}
    first = runs["cold"][0]
    return {"cold_cpu": med["cold"], "warm_cpu": med["warm"], "ratio": med["cold"] / med["warm"],
            "second_cpu": med["second"],
            "import_cpu": statistics.median(r["import_cpu"] for r in runs["cold"]),
            "scan_path": first["scan_path"], "pageindex": first["pageindex"], "rounds": rounds}


def report(name: str, figures: dict) -> str:
    return "\n".join([
        f"### Cold start: {name}", "",
        "| fresh process, empty caches (CPU s) | fresh process, warm caches (CPU s) | cold / warm | "
        "of it, interpreter and imports | the same file again in a process (CPU s) |",
        "|---:|---:|---:|---:|---:|",
        f"| {figures['cold_cpu']:.3f} | {figures['warm_cpu']:.3f} | {figures['ratio']:.2f} | "
        f"{figures['import_cpu']:.3f} | {figures['second_cpu']:.3f} |",
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
