"""Object-store bench: requests, bytes and time of retrofit (dry run and in place, exact and trusted
page stats) reading through Arrow's S3 client and through s3fs, of pyarrow's
read_table(pre_buffer=True) on the same objects, and of the Spark job over a directory of small
files, behind a latency proxy.

    python -m bench.objstore [--latency-ms 20] [--rounds 1] [--kinds wide,numeric,strings,nested]
                             [--job-files 48]

An in-place run works on a fresh copy of its object, made on the server and not counted.

A moto S3 server runs in this process on 127.0.0.1; tests/helpers/fault_proxy.py sits between it
and the clients (s3fs and pyarrow.fs.S3FileSystem), adds the latency to
every request and counts requests by S3 operation and the body bytes it returned. Prints one
markdown table (bench/report.py's object-store section); datasets are cached in bench/data/. The
Spark job part (bench/objstore_job.py; --job-files 0 skips it) starts a local Spark session.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import s3fs

import pageindex
from bench import objstore_job, report
from bench.datasets import largest_chunk
from bench.report import PYARROW
from pageindex.io.storage import s3_options
from pageindex.io.transport import Transport, mark_fsspec_reads
from tests.helpers import s3 as s3h
from tests.helpers.fault_proxy import FaultProxy

REPO = Path(__file__).resolve().parent.parent
DATA_DIR = REPO / "bench" / "data"
GEN_VERSION = 1  # bump when a generator changes: cached files are rebuilt
ROW_GROUPS = 4
PAGE_BYTES = 64 << 10


def _wide(rng: np.random.Generator) -> pa.Table:
    rows = 5_500
    return pa.table({f"c{i:03d}": rng.integers(0, 1 << 62, rows) for i in range(240)})


def _numeric(rng: np.random.Generator) -> pa.Table:
    rows = 2_200_000
    return pa.table({"id": np.arange(rows, dtype=np.int64), "x": rng.random(rows),
                     "k": rng.integers(0, 1 << 62, rows)})


def _strings(rng: np.random.Generator) -> pa.Table:
    rows = 300_000
    names = pa.array(np.char.add("user-", rng.integers(0, 1 << 40, rows).astype(str)))
    tags = pa.array([rng.bytes(12).hex() for _ in range(rows)])
    return pa.table({"name": names, "tag": tags})


def _nested(rng: np.random.Generator) -> pa.Table:
    rows = 300_000
    lengths = rng.integers(0, 6, rows)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = pa.array(rng.integers(0, 1 << 40, int(offsets[-1])))
    return pa.table({
        "id": np.arange(rows, dtype=np.int64),
        "items": pa.ListArray.from_arrays(pa.array(offsets), values),
        "point": pa.StructArray.from_arrays([pa.array(rng.random(rows)), pa.array(rng.random(rows))],
                                            names=["x", "y"]),
    })


@dataclass(frozen=True)
class Kind:
    name: str
    label: str
    table: Callable[[np.random.Generator], pa.Table]


KINDS = {k.name: k for k in (
    Kind("wide", "240 columns x 4 row groups", _wide),
    Kind("numeric", "3 columns x 4 row groups, 64 KiB pages", _numeric),
    Kind("strings", "2 string columns, 64 KiB pages", _strings),
    Kind("nested", "list + struct columns, 64 KiB pages", _nested),
)}


def ensure(kind: Kind) -> Path:
    path = DATA_DIR / f"objstore-{kind.name}-v{GEN_VERSION}.parquet"
    if not path.exists():
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        table = kind.table(np.random.default_rng(25))
        tmp = path.with_suffix(".tmp")
        pq.write_table(table, tmp, row_group_size=-(-table.num_rows // ROW_GROUPS),
                       data_page_size=PAGE_BYTES, write_page_index=False, compression="snappy")
        tmp.rename(path)
    return path


@dataclass(frozen=True)
class Run:
    seconds: float
    requests: dict[str, int]
    bytes_returned: int


def measure(proxy: FaultProxy, action: Callable[[], object]) -> Run:
    proxy.reset()
    started = time.perf_counter()
    action()
    seconds = time.perf_counter() - started
    return Run(seconds, proxy.stats.by_operation(), proxy.stats.bytes_returned())


def pageindex_fs(endpoint: str, transport: Transport) -> s3fs.S3FileSystem:
    """A fresh s3fs per run, as pageindex's resolve() builds it for `transport`: no listing or
    instance cache carries one run's answers into the next."""
    fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False,
                           **s3_options(s3h.storage_options(endpoint)))
    if transport is Transport.FSSPEC:
        mark_fsspec_reads(fs)
    return fs


@dataclass(frozen=True)
class Tool:
    """What one measured run does on an object (endpoint, bucket/key); an in-place tool gets a
    fresh copy of the object each run."""

    action: Callable[[str, str], object]
    in_place: bool = False


def _retrofit(trust: bool, transport: Transport, dry_run: bool = True) -> Tool:
    return Tool(lambda endpoint, key: pageindex.retrofit(key, filesystem=pageindex_fs(endpoint, transport),
                                                         dry_run=dry_run, trust_page_stats=trust),
                in_place=not dry_run)


TOOLS: dict[str, Tool] = {
    PYARROW: Tool(lambda endpoint, key: pq.read_table(key, filesystem=s3h.pyarrow_s3fs(endpoint), pre_buffer=True)),
    **{f"retrofit {mode} via {transport.value}": _retrofit(mode == "trust", transport)
       for mode in ("exact", "trust") for transport in (Transport.ARROW, Transport.FSSPEC)},
    **{f"retrofit {mode} in place via {Transport.ARROW.value}": _retrofit(mode == "trust", Transport.ARROW, False)
       for mode in ("exact", "trust")},
}


# One run of a tool in a fresh process: the bench's own process ran every tool and holds moto's
# objects, so its peak RSS cannot tell one run's memory from another's.
_RSS_WORKER = """
import os, sys
from bench.measure import status_bytes
from bench.objstore import TOOLS
TOOLS[sys.argv[2]].action(sys.argv[1], sys.argv[3])
print(status_bytes("self", "VmHWM"), flush=True)
os._exit(0)  # Arrow's thread pools can abort at static destruction (pageindex/shutdown.py)
"""


def peak_rss(endpoint: str, tool: str, key: str) -> int:
    """Peak RSS, imports included, of a process that runs `tool` once on the object `key`."""
    out = subprocess.run([sys.executable, "-c", _RSS_WORKER, endpoint, tool, key], cwd=REPO,
                         capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


def median_run(runs: list[Run]) -> Run:
    return sorted(runs, key=lambda r: r.seconds)[len(runs) // 2]


def run(latency_ms: float, rounds: int, kinds: list[Kind], tools: list[str], job_files: int) -> dict:
    """Every tool on every dataset, `rounds` times each, then the Spark job (unless job_files is 0);
    the median run of each, as plain data (bench/report.py renders it; bench/run.py stores it with
    the local results)."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request
    files = {kind.name: ensure(kind) for kind in kinds}
    rows = []
    with s3h.moto_s3_server() as upstream, FaultProxy(upstream, latency=latency_ms / 1000) as proxy:
        bucket = s3h.create_bucket(upstream, "bench")
        client = s3h.boto3_client(upstream)
        for kind in kinds:
            key = f"{bucket}/{kind.name}.parquet"
            client.upload_file(str(files[kind.name]), bucket, f"{kind.name}.parquet")
            runs: dict[str, list[Run]] = {tool: [] for tool in tools}
            for _ in range(rounds):  # interleaved: a slow spell of the shared machine hits every tool
                for tool in tools:
                    target = _fresh_copy(client, bucket, kind) if TOOLS[tool].in_place else key
                    runs[tool].append(measure(proxy, lambda: TOOLS[tool].action(proxy.endpoint, target)))
            size, largest = files[kind.name].stat().st_size, largest_chunk(str(files[kind.name]))[0]
            for tool in tools:
                best = median_run(runs[tool])
                target = _fresh_copy(client, bucket, kind) if TOOLS[tool].in_place else key
                rows.append({"dataset": kind.label, "size": size, "tool": tool,
                             "seconds": best.seconds, "requests": best.requests,
                             "bytes_returned": best.bytes_returned,
                             "peak_rss": peak_rss(proxy.endpoint, tool, target), "largest_chunk": largest})
                print(f"{kind.name} {tool}: {statistics.median(r.seconds for r in runs[tool]):.2f} s", flush=True)
        job = objstore_job.run(upstream, proxy, job_files, rounds) if job_files else None
    return {"latency_ms": latency_ms, "rounds": rounds, "rows": rows, "job": job, "load_average": os.getloadavg()}


def _fresh_copy(client: object, bucket: str, kind: Kind) -> str:
    """A copy of the dataset's object made on the server (straight to moto: not counted)."""
    scratch = f"scratch/{kind.name}.parquet"
    client.copy_object(Bucket=bucket, Key=scratch, CopySource={"Bucket": bucket, "Key": f"{kind.name}.parquet"})
    return f"{bucket}/{scratch}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--kinds", default=",".join(KINDS), help='datasets ("": the Spark job part only)')
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--job-files", type=int, default=48,
                        help="small files for the Spark job part (0: skip it, and Spark)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON (bench/run.py reads it)")
    args = parser.parse_args(argv)
    results = run(args.latency_ms, args.rounds, [KINDS[k] for k in args.kinds.split(",") if k], args.tools.split(","),
                  args.job_files)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))
    print("\n".join(report.objstore_section(results)))


if __name__ == "__main__":
    main()
