"""The job's driver at lake scale: `python -m bench.planning [--files N,...] [--json PATH]`.

For each N, in a process of its own: a synthetic listing of N objects (an fsspec filesystem whose
`find` answers what s3fs's would for a Hive-partitioned table, 1,000 files per partition, a
_SUCCESS in each; no object exists), then the driver's stages as the Spark job runs them:
discovery's post-processing (`discover`, and `table_files` for the same files as a catalog table's
partitions), `check_modes`, `pack`, and for N records as `collect` returns them, `summary` and
`write_report` (Parquet). Each stage's seconds and its peak RSS
(VmHWM, reset before each stage through /proc/self/clear_refs), and the RSS held after it;
CPU seconds besides wall seconds, which a shared machine disturbs much less.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from fsspec import AbstractFileSystem, register_implementation

from bench.measure import ROOT

SIZES = (100_000, 1_000_000)
PER_PARTITION = 1_000
PROTOCOL = "synthlake"
ROOT_PATH = "lake/events"
TARGET_TASK_BYTES = 256 << 20
LISTING = "listing (as s3fs's find returns it; synthetic)"
RECORDS = "records (as collect returns them; synthetic)"


class SyntheticLake(AbstractFileSystem):
    """A read-only lake of `files` Parquet objects below ROOT_PATH: `find` gives s3fs's detail
    entries (Key, ETag, LastModified, size, ...) in its order; nothing can be opened."""

    protocol = PROTOCOL
    files = 0  # set before the first use (fsspec caches instances by their arguments)

    def _entries(self) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for part in range(-(-self.files // PER_PARTITION)):
            folder = f"{ROOT_PATH}/day={part:05d}"
            names = [f"{folder}/part-{i:05d}-7c0e6c1a-6b53-4a8f-9d2e-{part:06d}{i:06d}.snappy.parquet"
                     for i in range(min(PER_PARTITION, self.files - part * PER_PARTITION))]
            names.append(f"{folder}/_SUCCESS")
            for i, name in enumerate(sorted(names)):
                size = 0 if name.endswith("_SUCCESS") else 50_000_000 + (part * 7919 + i * 104_729) % 90_000_000
                out[name] = {"Key": name, "LastModified": "2026-11-27T00:00:00+00:00",
                             "ETag": f'"{part:016x}{i:016x}"', "Size": size, "StorageClass": "STANDARD",
                             "type": "file", "size": size, "name": name}
        return out

    def find(self, path: str, maxdepth: Any = None, withdirs: bool = False, detail: bool = False,
             **kwargs: Any) -> Any:
        entries = self._entries()
        return entries if detail else sorted(entries)

    def isdir(self, path: str) -> bool:
        return self._strip_protocol(path).rstrip("/") == ROOT_PATH

    def exists(self, path: str, **kwargs: Any) -> bool:
        return self.isdir(path)

    def glob(self, path: str, **kwargs: Any) -> list[str]:
        return []

    def invalidate_cache(self, path: str | None = None) -> None:
        pass


def _vm(field: str) -> int:
    """A /proc/self/status size in bytes (VmHWM: the peak RSS since the last reset, VmRSS: now)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) << 10
    return 0


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _stage(stages: list[dict], name: str, fn: Callable[[], Any]) -> Any:
    before = _vm("VmRSS")
    _reset_peak()
    started, cpu = time.perf_counter(), time.process_time()
    value = fn()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    stages.append({"stage": name, "seconds": round(seconds, 3), "cpu": round(cpu, 3), "peak_rss": _vm("VmHWM"),
                   "rss_before": before, "rss_after": _vm("VmRSS")})
    return value


def _record(f: Any) -> dict[str, Any]:
    """What one file's executor record looks like after an exact retrofit (process.py's keys)."""
    return {"path": f.url, "output": f.url, "status": "indexed", "reason": None, "bytes_in": f.size,
            "bytes_out": f.size + 40_000, "row_groups": 4, "pages": 480, "chunks_with_column_index": 48,
            "chunks_without_column_index": 0, "chunks_from_page_stats": 40, "bloom_filters": 0,
            "without_column_index_reasons": {}, "violations": [], "bytes_read": f.size // 3,
            "seconds": 0.8, "index_bytes_read": f.size // 3, "copy_bytes_read": 0, "no_page_skipping": None,
            "page_stats_fallback_reasons": {}, "notes": [],
            "chunk_statistics": {"copied": 48, "filled": 0, "replaced": 0}, "retryable": False}


def measure(files: int) -> dict[str, Any]:
    """The driver's stages for a synthetic lake of `files` objects, in this process."""
    from pageindex.io.discovery import discover
    from pageindex.job.catalog import CatalogTable, Partition, table_files
    from pageindex.job.report import summary, write_report
    from pageindex.job.spark import check_modes
    from pageindex.job.tasks import pack

    register_implementation(PROTOCOL, SyntheticLake, clobber=True)
    SyntheticLake.files = files
    fs = SyntheticLake()
    stages: list[dict] = []
    baseline = _vm("VmRSS")
    # built once, as s3fs's find would return it; `find` then hands the same dict to discovery
    listing = _stage(stages, LISTING, fs._entries)
    SyntheticLake._entries = lambda self: listing  # type: ignore[method-assign]
    found = _stage(stages, "discover", lambda: discover([f"{PROTOCOL}://{ROOT_PATH}"]))
    assert len(found.files) == files, len(found.files)
    # The same files as a catalog table's, every partition listed by the metastore (below the location).
    table = CatalogTable("db.events", f"{PROTOCOL}://{ROOT_PATH}", "parquet", tuple(
        Partition(f"{PROTOCOL}://{ROOT_PATH}/day={i:05d}", f"day={i:05d}") for i in range(-(-files // PER_PARTITION))))
    in_table = _stage(stages, "table_files (--table, partitions from the catalog)", lambda: table_files(table, {}))
    assert in_table.files == found.files
    del in_table
    del listing
    SyntheticLake._entries = lambda self: {}  # type: ignore[method-assign]
    _stage(stages, "check_modes", lambda: check_modes(found, in_place=False))
    tasks = _stage(stages, "pack", lambda: pack(list(found.files), TARGET_TASK_BYTES))
    records = _stage(stages, RECORDS,
                     lambda: sorted((_record(f) for task in tasks for f in task), key=lambda r: r["path"]))
    del tasks
    _stage(stages, "summary", lambda: summary(records, 3600.0))
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.parquet")
        _stage(stages, "write_report (Parquet)", lambda: write_report(records, report, {}))
        report_bytes = os.path.getsize(report)
    return {"files": files, "partitions": -(-files // PER_PARTITION), "baseline_rss": baseline,
            "report_bytes": report_bytes, "stages": stages,
            "driver_seconds": round(sum(s["seconds"] for s in stages if s["stage"] not in (LISTING, RECORDS)), 3),
            "driver_cpu": round(sum(s["cpu"] for s in stages if s["stage"] not in (LISTING, RECORDS)), 3),
            "peak_rss": max(s["peak_rss"] for s in stages)}


def listing(partitions: int, latency: float) -> list[dict[str, Any]]:
    """Discovery of `partitions` partition folders on moto behind the latency proxy, one by one
    (LISTING_THREADS = 1) and LISTING_THREADS at once: requests and wall seconds, and whether both
    found the same files with the same requests."""
    from pageindex.io import discovery
    from pageindex.job.catalog import CatalogTable, Partition, table_files
    from tests.helpers import s3 as s3h
    from tests.helpers.fault_proxy import FaultProxy

    threads = getattr(discovery, "LISTING_THREADS", 1)  # 1: a tree from before it existed
    rows = []
    with s3h.moto_s3_server() as endpoint:
        bucket, client = s3h.create_bucket(endpoint), s3h.boto3_client(endpoint)
        for i in range(partitions):
            for key in (f"t/day={i:04d}/part-0.parquet", f"t/day={i:04d}/_SUCCESS", f"other/p={i:04d}/part-0.parquet"):
                client.put_object(Bucket=bucket, Key=key, Body=b"x")
        table = CatalogTable("db.t", f"s3://{bucket}/t", "parquet", tuple(
            Partition(f"s3://{bucket}/other/p={i:04d}", f"p={i:04d}") for i in range(partitions)))
        with FaultProxy(endpoint, latency=latency) as proxy:
            options = s3h.storage_options(proxy.endpoint)
            cases = (("a glob over the partitions", lambda: discovery.discover([f"s3://{bucket}/t/day=*"], options)),
                     ("each partition an input", lambda: discovery.discover(
                         [f"s3://{bucket}/t/day={i:04d}" for i in range(partitions)], options)),
                     ("catalog partitions outside the table location", lambda: table_files(table, options)))
            for what, fn in cases:
                got = []
                for n in (1, threads):
                    discovery.LISTING_THREADS = n
                    proxy.reset()
                    started = time.perf_counter()
                    found = fn()
                    got.append((time.perf_counter() - started, found, sorted((r.operation, r.path) for r in proxy.log)))
                discovery.LISTING_THREADS = threads
                (serial, a, ra), (parallel, b, rb) = got
                rows.append({"case": what, "partitions": partitions, "files": len(b.files), "requests": len(rb),
                             "serial_seconds": round(serial, 2), "parallel_seconds": round(parallel, 2),
                             "threads": threads, "same_files": a == b, "same_requests": ra == rb})
    return rows


def run(sizes: list[int], partitions: int, latency: float) -> dict[str, Any]:
    """Each size measured in a fresh process (peaks of one size do not hide the next's), then
    the listing of `partitions` partitions on moto (none: 0)."""
    rows = []
    for n in sizes:
        done = subprocess.run([sys.executable, "-m", "bench.planning", "--one", str(n)], cwd=ROOT,
                              capture_output=True, text=True, check=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"planning: {n:,} files: {rows[-1]['driver_cpu']:.1f} CPU s, peak "
              f"{rows[-1]['peak_rss'] / 1e6:.0f} MB", file=sys.stderr)
    return {"sizes": rows, "per_partition": PER_PARTITION, "target_task_bytes": TARGET_TASK_BYTES,
            "latency_ms": round(latency * 1000), "listing": listing(partitions, latency) if partitions else []}


def section(results: dict[str, Any]) -> list[str]:
    """The RESULTS.md section of a run's results."""
    out = [HEADING, "",
           "The Spark job's driver for a lake of N files: a synthetic listing (an fsspec filesystem "
           f"answering `find` as s3fs would, {results['per_partition']:,} files and a _SUCCESS per partition; "
           "no object exists), then discovery's post-processing (`discover`, and `table_files` for the same files "
           "as a catalog table's partitions), `check_modes`, `pack` "
           f"(target {results['target_task_bytes'] >> 20} MiB), and for N records as `collect` returns them, "
           "`summary` and `write_report` (Parquet). Each size in a process of its own; peak RSS is VmHWM, "
           "reset before each stage; CPU seconds are the process's (a shared machine disturbs wall "
           "seconds much more).", "",
           "| files | stage | wall s | CPU s | CPU µs per file | peak RSS | RSS held after |",
           "| ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for row in results["sizes"]:
        for st in row["stages"]:
            out.append(f"| {row['files']:,} | {st['stage']} | {st['seconds']:.2f} | {st['cpu']:.2f} | "
                       f"{st['cpu'] / row['files'] * 1e6:.1f} | {st['peak_rss'] / 1e6:,.0f} MB | "
                       f"{st['rss_after'] / 1e6:,.0f} MB |")
        out.append(f"| {row['files']:,} | **driver total** (synthetic stages excluded) | {row['driver_seconds']:.2f} | "
                   f"{row['driver_cpu']:.2f} | {row['driver_cpu'] / row['files'] * 1e6:.1f} | "
                   f"{row['peak_rss'] / 1e6:,.0f} MB | |")
    out += ["", "Bytes per file at the peak (peak RSS less the RSS before the listing, over N): "
            + ", ".join(f"{_per_file(row):,.0f} B for {row['files']:,} files" for row in results["sizes"]) + "."]
    if results.get("before"):
        out += ["", f"The same measures before ({results['before']['what']}):", "",
                "| files | stage | CPU s before | CPU s now | peak RSS before | peak RSS now |",
                "| ---: | --- | ---: | ---: | ---: | ---: |"]
        now = {(r["files"], st["stage"]): st for r in results["sizes"] for st in r["stages"]}
        for row in results["before"]["sizes"]:
            for st in row["stages"]:
                if (row["files"], st["stage"]) in now and st["stage"] not in (LISTING, RECORDS):
                    new = now[(row["files"], st["stage"])]
                    out.append(f"| {row['files']:,} | {st['stage']} | {st['cpu']:.2f} | {new['cpu']:.2f} | "
                               f"{st['peak_rss'] / 1e6:,.0f} MB | {new['peak_rss'] / 1e6:,.0f} MB |")
    out.append("")
    if results.get("listing"):
        out += [f"Listing on moto behind the latency proxy ({results['latency_ms']} ms per request): "
                f"one by one and {results['listing'][0]['threads']} at once (`LISTING_THREADS`).", "",
                "| case | partitions | files | requests | one by one | at once | same files, same requests |",
                "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
        out += [f"| {r['case']} | {r['partitions']} | {r['files']} | {r['requests']} | {r['serial_seconds']:.2f} s | "
                f"{r['parallel_seconds']:.2f} s | {'yes' if r['same_files'] and r['same_requests'] else 'NO'} |"
                for r in results["listing"]]
        out.append("")
        before = {r["case"]: r for r in (results.get("before") or {}).get("listing", [])}
        if before:
            out += ["Before: " + "; ".join(f"{case}: {r['requests']} requests, {r['serial_seconds']:.2f} s"
                                           for case, r in before.items()) + ".", ""]
    return out


HEADING = "## Planning at lake scale (the job's driver)"


def _per_file(row: dict[str, Any]) -> float:
    return (row["peak_rss"] - row["baseline_rss"]) / row["files"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default=",".join(map(str, SIZES)), help="comma-separated sizes")
    parser.add_argument("--partitions", type=int, default=200, help="partitions listed on moto (0: none)")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="the proxy's latency per request")
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    parser.add_argument("--before", type=Path, help="an earlier run's --json, shown beside this one's")
    parser.add_argument("--before-what", default="an earlier tree", help="what the earlier run measured")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # one size, in this process
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one)))
        return
    results = run([int(n) for n in args.files.split(",")], args.partitions, args.latency_ms / 1000)
    if args.before:
        earlier = json.loads(args.before.read_text())
        results["before"] = {"what": args.before_what, "sizes": earlier["sizes"], "listing": earlier.get("listing", [])}
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    print("\n".join(section(results)))


if __name__ == "__main__":
    main()
