"""The job's driver at lake scale, through the job's own code: `python -m bench.planning [--files N,...]`.

For each N, in a process of its own: a synthetic lake of N objects in partitions of 1,000 (an
fsspec filesystem answering glob/find as s3fs would; no object exists) and a state that settles
every one, then `pageindex-job --input synthlake://lake/events/day=* --in-place --state S --report R`
on a local Spark (2 cores, Spark's default 1 GB driver heap, executors in the same JVM): the
listing on the executors, the join with the state, every file `unchanged`, report and state
parts written by the tasks. The driver's peak: Python (VmHWM) plus the JVM heap used (sampled
every 0.2 s; garbage included, and what the last collection left, the live set), and the wall
and CPU seconds.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from fsspec import AbstractFileSystem, register_implementation

from bench.measure import ROOT

SIZES = (100_000, 1_000_000)
HEADING = "## Planning at lake scale (the job's driver)"
HEAP = "1g"
PER_PARTITION = 1_000
PROTOCOL = "synthlake"
ROOT_PATH = "lake/events"
FILES_ENV = "PAGEINDEX_BENCH_LAKE_FILES"  # the lake's size, for the executors' own instances


def _partition_entries(part: int, files: int) -> dict[str, dict]:
    folder = f"{ROOT_PATH}/day={part:05d}"
    out = {}
    for i in range(min(PER_PARTITION, files - part * PER_PARTITION)):
        name = f"{folder}/part-{i:05d}-7c0e6c1a-{part:06d}{i:06d}.snappy.parquet"
        size = 50_000_000 + (part * 7919 + i * 104_729) % 90_000_000
        out[name] = {"Key": name, "ETag": f'"{part:016x}{i:016x}"', "Size": size, "type": "file",
                     "size": size, "name": name}
    return out


class SyntheticLake(AbstractFileSystem):
    """A read-only lake of FILES_ENV objects below ROOT_PATH, partition folders day=NNNNN."""

    protocol = PROTOCOL

    @property
    def files(self) -> int:
        return int(os.environ.get(FILES_ENV, "0"))

    def _parts(self) -> int:
        return -(-self.files // PER_PARTITION)

    def glob(self, path: str, **kwargs: Any) -> list[str]:
        if self._strip_protocol(path).rstrip("/") != f"{ROOT_PATH}/day=*":
            return []  # e.g. an Iceberg table's metadata/*.metadata.json: none
        return [f"{ROOT_PATH}/day={p:05d}" for p in range(self._parts())]

    def find(self, path: str, maxdepth: Any = None, withdirs: bool = False, detail: bool = False,
             **kwargs: Any) -> Any:
        part = int(self._strip_protocol(path).rstrip("/").rsplit("=", 1)[1])
        entries = _partition_entries(part, self.files)
        return entries if detail else sorted(entries)

    def isdir(self, path: str) -> bool:
        path = self._strip_protocol(path).rstrip("/")
        return path == ROOT_PATH or (path.startswith(f"{ROOT_PATH}/day=") and "/" not in path[len(ROOT_PATH) + 1:]
                                     and "*" not in path)

    def exists(self, path: str, **kwargs: Any) -> bool:
        return self.isdir(path)

    def invalidate_cache(self, path: str | None = None) -> None:
        pass


register_implementation(PROTOCOL, SyntheticLake, clobber=True)


def job_args(state: str, report: str) -> list[str]:
    return ["--input", f"{PROTOCOL}://{ROOT_PATH}/day=*", "--in-place", "--state", state, "--report", report,
            "--progress-seconds", "600", "--conf", "spark.ui.enabled=false"]


def write_state(files: int, state: str) -> None:
    """A state folder that settles every file of the lake (as a run before would have left it)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pageindex.job import parts
    from pageindex.job.config import JobConfig
    from pageindex.job.state import STATE_SCHEMA, run_key

    key = run_key(JobConfig.from_argv(job_args(state, state)).options)
    when = datetime.datetime(2026, 11, 27, tzinfo=datetime.timezone.utc)
    run = parts.new_run()
    os.makedirs(state, exist_ok=True)
    for start in range(0, -(-files // PER_PARTITION), 100):
        rows = [e for p in range(start, min(start + 100, -(-files // PER_PARTITION)))
                for e in _partition_entries(p, files).values()]
        table = pa.table({
            "path": [f"{PROTOCOL}://{e['name']}" for e in rows], "size": [e["size"] for e in rows],
            "version": [e["ETag"] for e in rows], "status": ["indexed"] * len(rows),
            "options": [key] * len(rows), "output": pa.nulls(len(rows), pa.string()),
            "pageindex_version": ["bench"] * len(rows), "decided_at": [when] * len(rows)}, schema=STATE_SCHEMA)
        pq.write_table(table, parts.part_url(state, run, "kept", start // 100))


def _vm(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) << 10
    return 0


def measure(files: int, heap: str) -> dict[str, Any]:
    """The job over the synthetic lake of `files`, in this process: the driver's peaks."""
    os.environ[FILES_ENV] = str(files)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    from pyspark.sql import SparkSession

    from pageindex.job.spark import hide_pandas_warning, main

    hide_pandas_warning()
    spark = (SparkSession.builder.master("local[2]").appName("bench-planning-job")
             .config("spark.ui.enabled", "false").config("spark.driver.memory", heap).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    jvm = spark.sparkContext._jvm
    runtime = jvm.java.lang.Runtime.getRuntime()
    beans = list(jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans())

    def live() -> int:
        """The heap the last collection left in use (what the driver holds, its garbage aside)."""
        best = 0
        for bean in beans:
            info = bean.getLastGcInfo()
            if info is not None:
                best = max(best, sum(u.getUsed() for u in info.getMemoryUsageAfterGc().values()))
        return best

    tmp = tempfile.mkdtemp(prefix="bench-planning-")
    try:
        state, report = os.path.join(tmp, "state"), os.path.join(tmp, "report.parquet")
        write_state(files, state)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        baseline = _vm("VmRSS")
        heap_used, held = [runtime.totalMemory() - runtime.freeMemory()], [live()]
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.2):
                heap_used.append(runtime.totalMemory() - runtime.freeMemory())
                held.append(live())

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started, cpu = time.perf_counter(), time.process_time()
        code = main(job_args(state, report), spark=spark)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        stop.set()
        sampler.join()
        python_peak = _vm("VmHWM")  # before the report is read back below
        import pyarrow.compute as pc
        import pyarrow.dataset as ds

        statuses = ds.dataset(report, format="parquet").to_table(columns=["status"]).column("status")
        unchanged = pc.sum(pc.equal(statuses, "unchanged")).as_py() or 0
        return {"files": files, "exit_code": code, "report_rows": len(statuses), "unchanged": unchanged,
                "seconds": round(seconds, 2), "driver_python_cpu": round(cpu, 2), "baseline_rss": baseline,
                "python_peak_rss": python_peak, "jvm_heap_peak": max(heap_used), "jvm_live_peak": max(held),
                "driver_peak": python_peak + max(heap_used), "heap_max": runtime.maxMemory(), "cores": os.cpu_count()}
    finally:
        spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def run(sizes: list[int], heap: str = HEAP) -> dict[str, Any]:
    rows = []
    for n in sizes:
        done = subprocess.run([sys.executable, "-m", "bench.planning", "--one", str(n), "--heap", heap], cwd=ROOT,
                              capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"bench.planning --one {n} failed:\n{done.stderr[-3000:]}")
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        r = rows[-1]
        print(f"planning: {n:,} files: exit {r['exit_code']}, {r['seconds']:.0f} s, driver peak "
              f"{r['driver_peak'] / 1e6:,.0f} MB (Python {r['python_peak_rss'] / 1e6:,.0f} MB + JVM heap "
              f"{r['jvm_heap_peak'] / 1e6:,.0f} MB)", file=sys.stderr)
    return {"rows": rows}


def section(results: dict[str, Any]) -> list[str]:
    """The planning section of RESULTS.md: per size, the driver's peaks and the time per file."""
    rows = results["rows"]
    out = [HEADING, "",
           "`pageindex-job` over a synthetic lake (partitions of 1,000 objects, listed by the executors) with a "
           "state that settles every file: every file `unchanged`, report and state written as parts by the "
           "tasks. Driver peak = Python VmHWM + JVM heap used (sampled every 0.2 s, garbage included: an upper "
           "bound; local mode, so the executors' work is in the same heap); the heap after GC is what "
           "collections left; the heap the JVM was given (spark.driver.memory) caps the heap used. local[2]. "
           "Target: driver peak <= 1 GB at every "
           "size, planning time linear (the time per file flat).", "",
           "| files | exit | report rows | wall s | µs per file | Python peak | JVM heap given | JVM heap used, peak | "
           "JVM heap after GC, peak | driver peak | <= 1 GB |",
           "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: |"]
    out += [f"| {r['files']:,} | {r['exit_code']} | {r['report_rows']:,} | {r['seconds']:.0f} | "
            f"{1e6 * r['seconds'] / r['files']:.0f} | {r['python_peak_rss'] / 1e6:,.0f} MB | "
            f"{_given(r)} | {r['jvm_heap_peak'] / 1e6:,.0f} MB | {r['jvm_live_peak'] / 1e6:,.0f} MB | "
            f"{r['driver_peak'] / 1e6:,.0f} MB | {'met' if r['driver_peak'] <= 1e9 else 'NOT met'} |" for r in rows]
    return out + [""]


def _given(row: dict[str, Any]) -> str:
    """The heap the JVM could grow to (Runtime.maxMemory), as a run recorded it."""
    return f"{row['heap_max'] / 1e6:,.0f} MB" if "heap_max" in row else "1 GB (default)"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default=",".join(map(str, SIZES)),
                        help="comma-separated sizes (10000000 for 10^7: long on 2 cores)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    parser.add_argument("--heap", default=HEAP, help="the driver's JVM heap (spark.driver.memory; Spark's "
                        "default 1g): the job must run within it")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one, args.heap)))
        return
    results = run([int(n) for n in args.files.split(",")], args.heap)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    print("\n".join(section(results)))


if __name__ == "__main__":
    # Through the module, not __main__: executors import its SyntheticLake by name.
    from bench import planning

    planning.main()
