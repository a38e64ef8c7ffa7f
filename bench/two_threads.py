"""How far two threads carry the exact scan. `--mode runs`: two dry runs of a file one after the
other, against the same two on two threads (an upper bound for two cores on one file).
`--mode file`: one file's dry run with retrofit's threads=1 against threads=2, side by side.

`python -m bench.two_threads [--mode runs|file] [--kinds spark_like,numeric] [--size 40] [--rounds 3]`
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import os
import sys
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from pageindex.retrofit import retrofit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "bench", "data")


def cached(kind: str, size: int) -> str:
    """bench.scan's cached dataset of this kind (run it once first: it generates them)."""
    pattern = f"{kind}-*.parquet" if kind == "spark_like" else f"{kind}-{size}MB-*.parquet"
    found = sorted(glob.glob(os.path.join(DATA, pattern)))
    if not found:
        raise SystemExit(f"no {pattern} in {DATA}: run `python -m bench.scan --size {size}` first")
    return found[0]


def one_round(path: str) -> tuple[float, float]:
    """Wall seconds of two dry runs one after the other, and of the same two on two threads."""
    started = time.perf_counter()
    retrofit(path, dry_run=True)
    retrofit(path, dry_run=True)
    serial = time.perf_counter() - started
    with ThreadPoolExecutor(2) as pool:
        started = time.perf_counter()
        list(pool.map(lambda _: retrofit(path, dry_run=True), range(2)))
        threaded = time.perf_counter() - started
    return serial, threaded


def one_file(path: str, threads: int) -> float:
    """Wall seconds of one dry run of `path` on `threads` threads."""
    started = time.perf_counter()
    retrofit(path, dry_run=True, threads=threads)
    return time.perf_counter() - started


_PEAK = ("import resource, sys; from pageindex.retrofit import retrofit; "
         "retrofit(sys.argv[1], dry_run=True, threads=int(sys.argv[2])); "
         "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")


def peak_mib(path: str, threads: int) -> float:
    """Peak RSS in MiB of a fresh process doing one dry run of `path` on `threads` threads."""
    out = subprocess.run([sys.executable, "-c", _PEAK, path, str(threads)], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    return int(out.stdout.split()[-1]) / 1024


def ceiling(threads: int) -> float:
    """What two (or `threads`) cores give right now to work that surely runs without the GIL:
    hashlib over 32 MiB per thread, one after the other against on threads (best of 3). Another
    process on the second core shows here as well as in the scan's ratio."""
    data = os.urandom(32 << 20)
    best = 0.0
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(threads):
            hashlib.sha256(data).digest()
        serial = time.perf_counter() - started
        with ThreadPoolExecutor(threads) as pool:
            started = time.perf_counter()
            list(pool.map(lambda _: hashlib.sha256(data).digest(), range(threads)))
            best = max(best, serial / (time.perf_counter() - started))
    return best


def file_rounds(path: str, rounds: int, threads: int) -> None:
    """threads=1 and threads=`threads` in turn, `rounds` times (which goes first alternates, so
    neither always runs on a warmer cache): each round's ratio, then the medians'."""
    ones, manys = [], []
    before = ceiling(threads)
    for i in range(rounds):
        if i % 2:
            many, one = one_file(path, threads), one_file(path, 1)
        else:
            one, many = one_file(path, 1), one_file(path, threads)
        ones.append(one)
        manys.append(many)
    one, many = statistics.median(ones), statistics.median(manys)
    print(f"{os.path.basename(path)}: threads=1 {one * 1e3:.1f} ms, threads={threads} {many * 1e3:.1f} ms "
          f"(medians of {rounds}): {one / many:.2f}x; rounds "
          + ", ".join(f"{a / b:.2f}x" for a, b in zip(ones, manys)), flush=True)
    print(f"  hashlib on {threads} threads meanwhile (what the cores gave): {before:.2f}x before, "
          f"{ceiling(threads):.2f}x after", flush=True)
    print(f"  peak RSS of a process doing one dry run: threads=1 {peak_mib(path, 1):.0f} MiB, "
          f"threads={threads} {peak_mib(path, threads):.0f} MiB", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.two_threads", description=__doc__)
    ap.add_argument("--mode", choices=("runs", "file"), default="runs")
    ap.add_argument("--threads", type=int, default=2, help="--mode file: the threads against one (default 2)")
    ap.add_argument("--kinds", default="spark_like,numeric")
    ap.add_argument("--size", type=int, default=40, help="bench.scan's dataset size in MB (default 40)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs")
    for kind in args.kinds.split(","):
        path = cached(kind, args.size)
        retrofit(path, dry_run=True)  # compiled code loaded (or built) before any round
        if args.mode == "file":
            retrofit(path, dry_run=True, threads=args.threads)
            file_rounds(path, args.rounds, args.threads)
            continue
        for _ in range(args.rounds):
            serial, threaded = one_round(path)
            print(f"{os.path.basename(path)}: two dry runs one after the other {serial:.3f} s, "
                  f"on two threads {threaded:.3f} s: {serial / threaded:.2f}x")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
