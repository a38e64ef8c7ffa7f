"""Job-overlap bench: files/s of one job task over many small files on an object store, with the
next file opened ahead (process_task's default) and without, side by side in one run.

    python -m bench.job_overlap [--latency-ms 20] [--files 48] [--rounds 3]

A moto S3 server runs in this process on 127.0.0.1 behind tests/helpers/fault_proxy.py, which
adds the latency to every request and counts them. Each round runs both variants, alternating
which goes first, on the task's files as the Spark job's executor does (process_task): a dry run,
in place (fresh copies each round, made on the server and not counted), and the footer-only skip
of files already indexed. Local files are never opened ahead (see bench/RESULTS-objstore.md).
Prints a markdown table with the load average.
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pageindex.io.discovery import InputFile
from pageindex.job.process import JobOptions, process_task
from tests.helpers import s3 as s3h
from tests.helpers.fault_proxy import FaultProxy

ROWS = 16_000


def write_files(folder: Path, count: int, with_index: bool) -> list[Path]:
    """`count` small files (a few hundred KB: 4 columns, 2 row groups, 8 KiB pages)."""
    rng = np.random.default_rng(26)
    paths = []
    for i in range(count):
        table = pa.table({"id": np.arange(i * ROWS, (i + 1) * ROWS, dtype=np.int64), "x": rng.random(ROWS),
                          "k": rng.integers(0, 1 << 40, ROWS),
                          "s": pa.array(np.char.add("u", rng.integers(0, 1 << 20, ROWS).astype(str)))})
        path = folder / f"{'indexed' if with_index else 'plain'}-{i:04d}.parquet"
        pq.write_table(table, path, row_group_size=ROWS // 2, data_page_size=8 << 10,
                       write_page_index=with_index, compression="snappy")
        paths.append(path)
    return paths


@dataclass(frozen=True)
class Run:
    seconds: float
    requests: int
    statuses: tuple[str, ...]


def _task(files: list[InputFile], options: JobOptions, ahead: bool) -> tuple[str, ...]:
    return tuple(r["status"] for r in process_task([(f, None) for f in files], options, open_ahead=ahead))


def _timed(action: Callable[[], tuple[str, ...]], proxy: FaultProxy) -> Run:
    proxy.reset()
    started = time.perf_counter()
    statuses = action()
    seconds = time.perf_counter() - started
    return Run(seconds, proxy.stats.count(), statuses)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--files", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    rows: list[tuple[str, str, Run]] = []
    with tempfile.TemporaryDirectory() as tmp, s3h.moto_s3_server() as upstream, \
            FaultProxy(upstream, latency=args.latency_ms / 1000) as proxy:
        plain = write_files(Path(tmp), args.files, False)
        size_kib = plain[0].stat().st_size // 1024
        indexed = write_files(Path(tmp), args.files, True)
        bucket = s3h.create_bucket(upstream, "overlap")
        client = s3h.boto3_client(upstream)
        for path in plain + indexed:
            client.upload_file(str(path), bucket, path.name)
        options = JobOptions(storage_options=s3h.storage_options(proxy.endpoint))

        def remote(paths: list[Path], prefix: str = "") -> list[InputFile]:
            return [InputFile(f"s3://{bucket}/{prefix}{p.name}", p.stat().st_size, p.name) for p in paths]

        def fresh(round_: int, ahead: bool) -> list[InputFile]:
            prefix = f"r{round_}-{ahead}/"
            for p in plain:
                client.copy_object(Bucket=bucket, Key=prefix + p.name, CopySource={"Bucket": bucket, "Key": p.name})
            return remote(plain, prefix)

        modes: dict[str, Callable[[int, bool], tuple[list[InputFile], JobOptions]]] = {
            "dry run": lambda r, a: (remote(plain), replace(options, dry_run=True)),
            "in place": lambda r, a: (fresh(r, a), options),
            "already indexed (footer-only skip)": lambda r, a: (remote(indexed), options),
        }
        _task(remote(plain), replace(options, dry_run=True), True)  # warm up: clients, connections
        for round_ in range(args.rounds):
            for mode, make in modes.items():
                for ahead in ((False, True) if round_ % 2 == 0 else (True, False)):
                    files, opts = make(round_, ahead)
                    run = _timed(lambda: _task(files, opts, ahead), proxy)
                    rows.append((mode, "ahead" if ahead else "one by one", run))
    load = os.getloadavg()
    print(f"\n{args.files} files of {size_kib} KiB, {args.latency_ms:g} ms per request, "
          f"median of {args.rounds} rounds; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n")
    print("| task | files opened | files/s | requests | statuses |")
    print("|---|---|---|---|---|")
    for mode in dict.fromkeys(m for m, _, _ in rows):
        for variant in ("one by one", "ahead"):
            runs = [run for m, v, run in rows if m == mode and v == variant]
            seconds = statistics.median(r.seconds for r in runs)
            statuses = ", ".join(f"{n} {s}" for s, n in sorted(
                {s: runs[0].statuses.count(s) for s in runs[0].statuses}.items()))
            print(f"| {mode} | {variant} | {args.files / seconds:.1f} | {runs[0].requests} | {statuses} |")


if __name__ == "__main__":
    main()
