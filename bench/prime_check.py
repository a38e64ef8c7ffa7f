"""Why the bench primes memory: pyarrow read_table, pinned, after an idle pause, unprimed and primed.

`python -m bench.prime_check [--kind numeric] [--size 200MB] [--rounds 3] [--pause 6]`; on a VM
that hands freed memory back to its host the unprimed runs are the slow ones.
"""
from __future__ import annotations

import argparse
import math
import time

from bench import datasets as D
from bench import measure as M
from bench.run import parse_size


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kind", default="numeric")
    p.add_argument("--size", default="200MB")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--pause", type=float, default=6.0, help="idle seconds before each run")
    p.add_argument("--cpus", default="0")
    args = p.parse_args(argv)
    ds = D.ensure(D.spec_for(args.kind, parse_size(args.size)))
    peak = M.worker("read_table", ds.path, cpus=args.cpus).maxrss
    prime_mb = math.ceil(peak * 1.25 / 2**20)
    print(f"{ds.name}: read_table peak RSS {peak >> 20} MiB; primed runs touch {prime_mb} MiB first")
    print("round  primed MiB  seconds  CPU s")
    for rnd in range(1, args.rounds + 1):
        for mb in (0, prime_mb):
            time.sleep(args.pause)
            r = M.worker("read_table", ds.path, cpus=args.cpus, prime_mb=mb)
            print(f"{rnd:5d}  {mb:10d}  {r.seconds:7.3f}  {r.cpu:5.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
