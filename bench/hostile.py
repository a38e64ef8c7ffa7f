"""Hostile files: peak RSS and CPU of `pageindex retrofit` on each file of the hostile set.

python -m bench.hostile [--only NAME,...] [--dir DIR]: one child per file (tests.helpers.hostile).
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Callable

from tests.helpers import hostile as h

# The set the tests refuse or index (tests/system/test_hostile_files.py), by name.
CASES: dict[str, Callable[[], bytes]] = {
    "zstd 1 GiB": lambda: h.zstd_bomb(h.GiB),
    "zstd 128 MiB (at the limit)": lambda: h.zstd_bomb(128 * h.MiB),
    "snappy 128 MiB (at the limit)": lambda: h.snappy_bomb(128 * h.MiB),
    "snappy 256 MiB": lambda: h.snappy_bomb(256 * h.MiB),
    "gzip 512 MiB": lambda: h.gzip_bomb(512 * h.MiB),
    "brotli 512 MiB": lambda: h.brotli_bomb(512 * h.MiB),
    "lz4_raw 1 GiB": lambda: h.lz4_raw_bomb(h.GiB),
    "lz4 (Hadoop) 1 GiB": lambda: h.lz4_hadoop_bomb(h.GiB),
    "snappy header lying 100 MiB": lambda: h.lying_snappy(100 * h.MiB),
    "2^30 nulls in 10 bytes": lambda: h.null_page(1 << 30),
    "2^25 nulls (at the limit)": lambda: h.null_page(1 << 25),
    "dictionary of 2^31-1 entries in 8 bytes": lambda: h.huge_dictionary((1 << 31) - 1),
    "dictionary of 2^24 entries in 8 bytes": lambda: h.huge_dictionary(1 << 24),
    "5000 chunks claiming 2^62 values": lambda: h.claimed_values(5000, 20000),
    "schema 60 structs deep": lambda: h.deep_schema(60),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", help="comma-separated case names (default: all)")
    parser.add_argument("--dir", help="where the files are written (default: a temporary directory)")
    args = parser.parse_args()
    names = [n for n in CASES if args.only is None or n in args.only.split(",")]
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        print("| file | size on disk | outcome | peak RSS | CPU |")
        print("|---|---|---|---|---|")
        for i, name in enumerate(names):
            path = Path(tmp) / f"hostile-{i}.parquet"
            path.write_bytes(CASES[name]())
            started = time.monotonic()
            run = h.measured(path)
            outcome = run.stderr.strip().splitlines()[-1] if run.returncode else run.stdout.splitlines()[0]
            outcome = outcome.split("failed: ", 1)[-1].replace(str(path), "FILE")
            print(f"| {name} | {path.stat().st_size:,} B | exit {run.returncode}: {outcome} | "
                  f"{run.rss_mb:.0f} MB | {run.cpu_seconds:.1f} s ({time.monotonic() - started:.1f} s wall) |",
                  flush=True)
            path.unlink()


if __name__ == "__main__":
    main()
