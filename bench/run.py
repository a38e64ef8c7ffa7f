"""pageindex benchmark harness: `python -m bench.run [--quick]` (make bench / make bench-quick).

Measures, in one run on one machine, single core, each tool in its own pinned subprocess:
pageindex retrofit (exact; and --trust-page-stats when this checkout has it), a pyarrow full
rewrite with page index, a Spark full rewrite (local[1], job time only), and floors (warm cat,
cp, cp+fsync, pyarrow read_table). Repetitions are interleaved (round 1: every tool on every
dataset, then round 2, ...) and medians reported. Then query effects before/after retrofit
(Spark, DataFusion, pageindex lookup), index sizes, (full run only) scale cases, the object-store
part (bench.objstore, --no-objstore skips it), the bloom filter part (bench.bloom, --no-bloom) and the
planning part (bench.planning: the job's driver for 10^5-10^6 files, --no-planning), what engines
gain from the index (bench.engines, --no-engines) and the cold start (bench.cold_start: a fresh
process's first file against a warm one's, --no-cold-start). `make bench` runs all of it on the
install users get: pageindex from its wheel, no extra.

Results: bench/RESULTS.md (full) or bench/RESULTS-quick.md (--quick); raw numbers in
bench/out/results[-quick].json.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from bench import datasets as D
from bench import measure as M
from bench import report
from bench import scale as S
from bench.engines import ROWS as ENGINE_ROWS
from pageindex.scan.compiled import path as scan_path

BENCH = Path(__file__).resolve().parent
OUT = BENCH / "out"
MB = 1e6  # throughput is reported in MB/s (10^6 bytes)
MiB = 1 << 20

FULL_KINDS = ("numeric", "strings_low", "strings_high", "nested", "v2_zstd", "wide")
QUICK_KINDS = ("numeric", "strings_high", "nested")

TOOLS = ("cat_warm", "read_table", "decompress", "cp", "cp_fsync", "retrofit", "retrofit_trust", "retrofit_dry",
         "retrofit_trust_dry", "retrofit_reflink", "retrofit_trust_reflink", "pa_rewrite", "spark_rewrite")


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---- configuration ---------------------------------------------------------------------------

@dataclass
class Config:
    quick: bool
    kinds: tuple[str, ...]
    sizes: tuple[int, ...]
    rounds: int
    cpus: str | None
    spark: bool
    queries: bool
    scale: bool
    scale_factor: float
    profile: bool
    query_reps: int
    results: Path
    raw: Path
    command: str
    reflink_dir: Path | None = None
    objstore: bool = True
    bloom: bool = True
    planning: bool = True
    queries_only: bool = False
    cold_start: bool = True
    engines: bool = True


def parse_size(text: str) -> int:
    text = text.strip().upper()
    for suffix, mult in (("GB", 1 << 30), ("MB", MiB), ("G", 1 << 30), ("M", MiB)):
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * mult)
    return int(text)


def config(argv: list[str] | None) -> Config:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="~20 MB datasets, 3 kinds, no scale cases")
    p.add_argument("--kinds", help=f"comma-separated subset of {','.join(D.KINDS)}")
    p.add_argument("--sizes", help="comma-separated target sizes, e.g. 200MB,1GB")
    p.add_argument("--rounds", type=int, help="interleaved repetitions (default 3)")
    p.add_argument("--cpus", default="0", help="taskset CPU list for every subprocess ('' = no pinning)")
    p.add_argument("--no-spark", action="store_true", help="skip Spark (rewrite and queries)")
    p.add_argument("--no-queries", action="store_true", help="skip the query-effect part")
    p.add_argument("--queries-only", action="store_true",
                   help="rerun only the query-effect part into the last run's bench/out/results.json "
                        "(and RESULTS.md), marked as rerun")
    p.add_argument("--no-objstore", action="store_true",
                   help="skip the object-store part (bench.objstore: moto behind a 20 ms proxy)")
    p.add_argument("--no-bloom", action="store_true",
                   help="skip the bloom filter part (bench.bloom: cost of filters and what they prune)")
    p.add_argument("--no-cold-start", action="store_true",
                   help="skip the cold start part (bench.cold_start: a fresh process's first file)")
    p.add_argument("--no-planning", action="store_true",
                   help="skip the planning part (bench.planning: the job's driver for 10^5-10^6 files)")
    p.add_argument("--no-engines", action="store_true",
                   help="skip the engines part (bench.engines: what each engine reads before and after retrofit)")
    p.add_argument("--scale", choices=("auto", "yes", "no", "only"), default="auto",
                   help="scale cases: auto = full run only")
    p.add_argument("--scale-factor", type=float, default=1.0,
                   help="multiply every scale case size (e.g. 0.1 to try them quickly)")
    p.add_argument("--query-reps", type=int, help="Spark query repetitions (default 1 quick, 3 full)")
    p.add_argument("--profile", action="store_true", help="also cProfile one retrofit per dataset")
    p.add_argument("--output", help="results markdown path")
    p.add_argument("--reflink-dir", type=Path,
                   help="also retrofit in place (exact and --trust-page-stats) in this directory, on a "
                        "filesystem that copies by reflink (XFS, btrfs; see bench/README.md)")
    a = p.parse_args(argv)
    if a.reflink_dir is not None:
        why = reflink_problem(a.reflink_dir)
        if why:
            p.error(f"--reflink-dir {a.reflink_dir}: {why}")
    kinds = tuple(a.kinds.split(",")) if a.kinds else (QUICK_KINDS if a.quick else FULL_KINDS)
    for k in kinds:
        if k not in D.KINDS:
            p.error(f"unknown kind {k}")
    sizes = tuple(parse_size(s) for s in a.sizes.split(",")) if a.sizes else (
        (20 * MiB,) if a.quick else (200 * MiB, 1 << 30))
    suffix = "-quick" if a.quick else ""
    results = Path(a.output) if a.output else BENCH / f"RESULTS{suffix}.md"
    scale = {"auto": not a.quick, "yes": True, "no": False, "only": True}[a.scale]
    if a.scale == "only":
        kinds = ()
    cpus = a.cpus if a.cpus and shutil.which("taskset") else None
    return Config(a.quick, kinds, sizes, a.rounds or 3, cpus, not a.no_spark, not a.no_queries,
                  scale, a.scale_factor, a.profile, a.query_reps or (1 if a.quick else 3),
                  results, OUT / f"results{suffix}.json",
                  "python -m bench.run " + " ".join(map(shlex.quote, argv if argv is not None else sys.argv[1:])),
                  a.reflink_dir, not a.no_objstore, not a.no_bloom, not a.no_planning, a.queries_only,
                  not a.no_cold_start, not a.no_engines)


def reflink_problem(directory: Path) -> str | None:
    """Why `directory` cannot serve as --reflink-dir (None if it can): it must exist and copy a
    file by reflink (coreutils cp --reflink=always succeeds only where the filesystem can)."""
    if not directory.is_dir():
        return "not a directory"
    probe = directory / ".bench-reflink-probe"
    try:
        probe.write_bytes(b"x" * 4096)
        r = subprocess.run(["cp", "--reflink=always", str(probe), f"{probe}.copy"], capture_output=True, text=True)
        return None if r.returncode == 0 else f"its filesystem does not copy by reflink ({r.stderr.strip()})"
    finally:
        probe.unlink(missing_ok=True)
        Path(f"{probe}.copy").unlink(missing_ok=True)


# ---- machine facts -----------------------------------------------------------------------------

def _cmd(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=M.ROOT).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine_facts(cfg: Config) -> dict:
    import datafusion
    import pyarrow

    import pageindex

    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import pyspark
        spark_version = pyspark.__version__
    except ImportError:
        spark_version = "not installed"
    try:
        import duckdb
        duck = duckdb.__version__
    except ImportError:
        duck = "not installed"
    java = _cmd(["java", "-version"]) or subprocess.run(
        ["java", "-version"], capture_output=True, text=True).stderr.strip().splitlines()[0:1]
    mem = ""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / (1 << 20):.1f} GiB"
    except OSError:
        pass
    fs = _cmd(["findmnt", "-no", "FSTYPE", "-T", str(BENCH)])  # stat -f names ext4 "ext2/ext3"
    dirty = _cmd(["git", "status", "--porcelain"])
    return {
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": cfg.command,
        "make_target": "make bench-quick" if cfg.quick else "make bench",
        "cpu": cpu, "cores": os.cpu_count(), "memory": mem, "kernel": platform.release(),
        "filesystem": fs,
        "reflink_filesystem": _cmd(["findmnt", "-no", "FSTYPE,SOURCE", "-T", str(cfg.reflink_dir)])
        if cfg.reflink_dir else "not measured (no --reflink-dir)",
        "pinning": f"taskset -c {cfg.cpus}" if cfg.cpus else "none",
        "loadavg_start": os.getloadavg(),
        "python": platform.python_version(), "pyarrow": pyarrow.__version__,
        "pyspark": spark_version, "datafusion": datafusion.__version__, "duckdb": duck,
        "java": java if isinstance(java, str) else " ".join(java),
        "pageindex": pageindex.__version__,
        "install": f"{_install_kind()}; scan path {scan_path()}",
        "git": _cmd(["git", "rev-parse", "--short", "HEAD"]) + (" (+ uncommitted changes)" if dirty else ""),
    }


def _install_kind() -> str:
    """How the measured pageindex is installed: a wheel in site-packages (what `make bench` runs)
    or a checkout (an editable install or the working directory on sys.path)."""
    import pageindex

    where = Path(pageindex.__file__).resolve()
    return "from its wheel, no extra" if "site-packages" in where.parts else f"a checkout ({where.parent})"


# ---- Spark -------------------------------------------------------------------------------------

class SparkServer:
    """The bench.spark_worker process: one local[1] JVM for the whole run."""

    def __init__(self, cpus: str | None) -> None:
        OUT.mkdir(parents=True, exist_ok=True)
        self.errlog = open(OUT / "spark-worker.log", "w")
        self.cpus = cpus
        started = time.perf_counter()
        # Booted on every core (start-up is not measured), pinned before the first timed job.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.spark_worker"], cwd=M.ROOT,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errlog, text=True, bufsize=1)
        hello = self._read()
        self.process_start = time.perf_counter() - started
        if not hello.get("ready"):
            raise RuntimeError(f"Spark worker did not start: {hello}")
        self.jvm_start = hello["jvm_start"]
        self.version = hello.get("spark")
        self.peak_resettable = True
        self.baseline_rss = M.tree_rss(self.proc.pid)

    def pin(self) -> bool:
        """Pin every thread of the worker tree (Python driver, JVM) to the bench CPUs."""
        if not self.cpus:
            return False
        ok = True
        for pid in M.descendants(self.proc.pid):
            r = subprocess.run(["taskset", "-a", "-p", "-c", self.cpus, str(pid)],
                               capture_output=True, text=True)
            ok &= r.returncode == 0
        return ok

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("Spark worker exited; see bench/out/spark-worker.log")
        return json.loads(line)

    def call(self, **cmd) -> dict:
        """Run one command; adds "peak_rss": the tree's VmHWM during it (reset before)."""
        self.peak_resettable &= M.reset_hwm(self.proc.pid)
        cpu = M.tree_cpu(self.proc.pid)
        started = time.perf_counter()
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        answer = self._read()
        answer["wall"] = time.perf_counter() - started
        answer["cpu"] = M.tree_cpu(self.proc.pid) - cpu
        answer["peak_rss"] = M.tree_hwm(self.proc.pid)
        return answer

    def stop(self) -> None:
        try:
            self.proc.stdin.write(json.dumps({"op": "stop"}) + "\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired, ValueError):
            self.proc.kill()
            self.proc.wait()
        self.errlog.close()


# ---- the throughput part -----------------------------------------------------------------------

@dataclass
class Sample:
    seconds: float  # the operation's wall time
    wall: float  # the process's (or Spark request's) wall time
    peak_rss: int | None
    cpu: float | None = None  # CPU seconds of the operation (user + system)
    extra: dict = field(default_factory=dict)


def _proc_sample(r: M.Run, what: str) -> Sample | str:
    """A shell tool (cat, cp): process wall time and CPU time."""
    return Sample(r.wall, r.wall, None, r.cpu_total) if r.ok else f"{what} failed: {r.stderr}"


def _shell(script: str, *args: str, cpus: str | None) -> M.Run:
    return M.run(["sh", "-c", script, "sh", *args], cpus)


def _sample(run: M.Run, what: str) -> Sample | str:
    if not run.ok or run.result.get("rc", 0) not in (0, None):
        return f"{what} failed (exit {run.returncode}): {run.stderr.strip()[-600:] or run.result}"
    extra = {k: v for k, v in run.result.items() if k not in ("seconds", "cpu", "output")}
    return Sample(run.seconds, run.wall, run.maxrss, run.cpu, extra)


def _prime_mb(peak: int, writes: int) -> int:
    return math.ceil((peak * 1.25 + writes) / 2**20)


def _primed(cfg: Config, peaks: dict[str, int], tool: str, args: list, fresh: Callable[[], None],
            writes: int = 0) -> M.Run:
    """A Python tool's run, primed with as much memory as its last peak RSS on this dataset plus
    the `writes` bytes of page cache the files it writes take (see bench.worker._prime_memory).
    The first time, an untimed run learns that peak. `fresh` sets up the input (and runs
    os.sync) before each run."""
    if tool not in peaks:
        fresh()
        peaks[tool] = M.worker(*args, cpus=cfg.cpus).maxrss
    fresh()
    r = M.worker(*args, cpus=cfg.cpus, prime_mb=_prime_mb(peaks[tool], writes))
    if r.ok:
        peaks[tool] = r.maxrss
    return r


def measure_round(cfg: Config, ds: D.Dataset, spark: SparkServer | None, trust_mode: str | None,
                  keep: bool, peaks: dict[str, int]) -> dict[str, Sample | str]:
    """Every tool once on one dataset. `keep`: leave retrofit/pyarrow/Spark outputs for later.
    `peaks`: each Python tool's last peak RSS on this dataset, updated here."""
    work = OUT / "work"
    work.mkdir(parents=True, exist_ok=True)
    src = ds.path
    out: dict[str, Sample | str] = {}

    os.sync()
    _shell('cat "$1" > /dev/null', src, cpus=cfg.cpus)
    r = _shell('cat "$1" > /dev/null', src, cpus=cfg.cpus)
    out["cat_warm"] = _proc_sample(r, "cat")

    out["read_table"] = _sample(_primed(cfg, peaks, "read_table", ["read_table", src], os.sync), "read_table")
    out["decompress"] = _sample(_primed(cfg, peaks, "decompress", ["decompress", src], os.sync), "decompress")

    dst = work / "cp.parquet"
    size = os.path.getsize(src)
    os.sync()
    M.worker("prime", cpus=cfg.cpus, prime_mb=_prime_mb(0, size))  # for the copy's page cache
    r = _shell('cp "$1" "$2"', src, str(dst), cpus=cfg.cpus)
    out["cp"] = _proc_sample(r, "cp")
    dst.unlink(missing_ok=True)
    os.sync()
    M.worker("prime", cpus=cfg.cpus, prime_mb=_prime_mb(0, size))
    r = _shell('cp "$1" "$2" && sync "$2"', src, str(dst), cpus=cfg.cpus)
    out["cp_fsync"] = _proc_sample(r, "cp+fsync")
    dst.unlink(missing_ok=True)

    for tool, mode, where in (("retrofit", "exact", work), ("retrofit_trust", trust_mode, work),
                              ("retrofit_reflink", "exact", cfg.reflink_dir),
                              ("retrofit_trust_reflink", trust_mode, cfg.reflink_dir)):
        if where is None:
            out[tool] = "skipped: no --reflink-dir"
            continue
        if mode is None:
            out[tool] = "skipped: this checkout has no trust_page_stats option yet"
            continue
        copy = where / f"{ds.name}.{tool}.parquet"

        def fresh_copy(copy: Path = copy) -> None:
            shutil.copyfile(src, copy)  # not timed
            os.sync()
        # In place: the committed copy is a whole new file.
        out[tool] = _sample(_primed(cfg, peaks, tool, ["retrofit", copy, mode], fresh_copy, size), tool)
        if keep and where is work and isinstance(out[tool], Sample):
            os.replace(copy, OUT / f"{ds.name}.{tool}.parquet")
        else:
            copy.unlink(missing_ok=True)

    # Compute only (--dry-run: read, decode, build the index; no copy, no fsync), on the input.
    for tool, mode in (("retrofit_dry", "exact-dry"), ("retrofit_trust_dry", trust_mode and trust_mode + "-dry")):
        if mode is None:
            out[tool] = "skipped: this checkout has no trust_page_stats option yet"
            continue
        out[tool] = _sample(_primed(cfg, peaks, tool, ["retrofit", src, mode], os.sync), tool)

    pa_dst = OUT / f"{ds.name}.pa_rewrite.parquet"
    out["pa_rewrite"] = _sample(_primed(cfg, peaks, "pa_rewrite", ["rewrite", src, pa_dst, ds.spec.kind], os.sync,
                                        size), "pyarrow rewrite")
    if not keep:
        pa_dst.unlink(missing_ok=True)

    if spark is None:
        out["spark_rewrite"] = "skipped (--no-spark)"
    else:
        sp_dst = OUT / f"{ds.name}.spark_rewrite"
        os.sync()
        a = spark.call(op="rewrite", src=src, dst=str(sp_dst), compression=ds.kind.compression)
        if a.get("ok"):
            out["spark_rewrite"] = Sample(a["seconds"], a["wall"], a["peak_rss"], a["cpu"],
                                          {"size_after": a["size_after"], "files": a["files"]})
        else:
            out["spark_rewrite"] = f"Spark rewrite failed: {a.get('error')}"
        if not keep:
            shutil.rmtree(sp_dst, ignore_errors=True)
    return out


def trust_mode(cfg: Config) -> tuple[str | None, dict]:
    r = M.worker("trust_support", cpus=cfg.cpus)
    support = {"api": bool(r.result.get("api")), "cli": bool(r.result.get("cli"))} if r.ok else \
        {"api": False, "cli": False}
    if support.get("cli"):
        return "trust", support
    if support.get("api"):
        return "trust-api", support
    return None, support


def summarize(samples: list[Sample | str]) -> dict:
    good = [s for s in samples if isinstance(s, Sample)]
    errors = [s for s in samples if isinstance(s, str)]
    if not good:
        return {"error": errors[0] if errors else "no samples"}
    secs = [s.seconds for s in good]
    rss = [s.peak_rss for s in good if s.peak_rss]
    extra = {}
    for s in good:
        extra.update(s.extra)
    cpus = [s.cpu for s in good if s.cpu is not None]
    return {"median": statistics.median(secs), "all": secs, "walls": [s.wall for s in good],
            "cpu_median": statistics.median(cpus) if cpus else None, "cpu_all": cpus,
            "peak_rss": max(rss) if rss else None, "extra": extra, "errors": errors,
            # Per round, unlike `extra` (the last round's): the kernel's memory work explains outliers.
            "memory_work_all": [s.extra.get("memory_work") for s in good]}


def index_sizes(cfg: Config, ds: D.Dataset) -> dict:
    """Page index bytes in each tool's output; removes every output but the exact retrofit."""
    sizes = {}
    for tool, path in (("retrofit", OUT / f"{ds.name}.retrofit.parquet"),
                       ("retrofit_trust", OUT / f"{ds.name}.retrofit_trust.parquet"),
                       ("pa_rewrite", OUT / f"{ds.name}.pa_rewrite.parquet"),
                       ("spark_rewrite", OUT / f"{ds.name}.spark_rewrite")):
        if not path.exists():
            continue
        r = M.worker("index_sizes", path, cpus=cfg.cpus)
        if r.ok:
            sizes[tool] = r.result
            if tool.startswith("retrofit"):
                sizes[tool]["growth"] = os.path.getsize(path) - ds.size
        if tool != "retrofit":
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    return sizes


# ---- queries -----------------------------------------------------------------------------------

def query_set(ds: D.Dataset) -> list[dict]:
    n = ds.rows
    cols = ["id", "u", ds.kind.payload]
    lo = int(0.37 * n)
    ulo, uhi = int(0.37 * D.U_MOD), int(0.38 * D.U_MOD)
    return [
        {"column": "id (sorted)", "query": "point", "where": f"id = {n // 2 + 17}", "columns": cols},
        {"column": "id (sorted)", "query": "1% range", "where": f"id >= {lo} AND id < {lo + max(1, n // 100)}", "columns": cols},
        {"column": "u (unsorted)", "query": "point", "where": f"u = {D.u_of(n // 3)}", "columns": cols},
        {"column": "u (unsorted)", "query": "1% range", "where": f"u >= {ulo} AND u < {uhi}", "columns": cols},
    ]


def run_queries(cfg: Config, ds: D.Dataset, after_path: str, spark: SparkServer | None) -> list[dict]:
    queries = []
    for q in query_set(ds):
        for state, path in (("before", ds.path), ("after", after_path)):
            queries.append(q | {"state": state, "path": path})
    r = M.worker("queries", json.dumps({"queries": queries}), cpus=cfg.cpus)
    if not r.ok:
        log(f"  DataFusion/lookup queries failed on {ds.name}: {r.stderr[-800:]}")
        results = [q | {"error": r.stderr[-300:]} for q in queries]
    else:
        results = r.result["queries"]
    if spark is not None:
        reps = cfg.query_reps
        times: dict[int, list[float]] = {}
        for _ in range(reps):
            for i, q in enumerate(results):
                a = spark.call(op="query", path=q["path"], where=q["where"], columns=q["columns"])
                if a.get("ok"):
                    q["spark_scan_rows"] = a["scan_rows"]
                    times.setdefault(i, []).append(a["seconds"])
                else:
                    q["spark_error"] = a.get("error")
        for i, q in enumerate(results):
            if i in times:
                q["spark_seconds"] = statistics.median(times[i])
    return results


# ---- scale cases -------------------------------------------------------------------------------

def run_scale(cfg: Config) -> list[dict]:
    out = []
    S.remove_stale()
    work = OUT / "scale-work"
    for case in S.CASES:
        full = max(2, int(case.full * cfg.scale_factor))
        row = {"case": case.name, "what": case.what, "unit": case.unit, "sizes": {}}
        for n in (full // 2, full):
            log(f"scale {case.name}: n={n}: generating (cached)")
            started = time.monotonic()
            src = S.build(case, n)
            gen = time.monotonic() - started
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            os.sync()
            if case.name == "files":
                # local[2] as the spec asks; pinned to two cores when the machine has them.
                cpus = "0,1" if (os.cpu_count() or 1) >= 2 and cfg.cpus else cfg.cpus
                r = M.worker("scale_job", src, work / "out", "local[2]", cpus=cpus, timeout=3 * 3600)
                res = r.result | {"files_per_s": n / r.seconds if r.ok and r.seconds else None,
                                  "cpus": cpus}
            else:
                copy = work / "in.parquet"
                shutil.copyfile(src, copy)
                os.sync()
                r = M.worker("retrofit_api", copy, cpus=cfg.cpus, timeout=3 * 3600)
                res = dict(r.result)
            res.update({"ok": r.ok, "wall": r.wall, "peak_rss": max(r.maxrss, res.get("tree_vmhwm") or 0),
                        "input_bytes": S.dir_size(src),
                        "generate_seconds": gen})
            if not r.ok:
                res["error"] = r.stderr[-800:]
            row["sizes"][n] = res
            log(f"  n={n}: {'ok' if r.ok else 'FAILED'} {r.seconds:.2f}s, peak RSS {res['peak_rss'] / MiB:.0f} MiB")
        shutil.rmtree(work, ignore_errors=True)
        half, fullr = row["sizes"].get(full // 2, {}), row["sizes"].get(full, {})
        if half.get("ok") and fullr.get("ok") and half.get("seconds"):
            row["ratio"] = fullr["seconds"] / half["seconds"]
        out.append(row)
    return out


# ---- main --------------------------------------------------------------------------------------

OBJSTORE_LATENCY_MS = 20
BLOOM_ROWS = 2_000_000


def run_objstore(cfg: Config) -> dict | None:
    """bench.objstore in its own process (its moto server and clients stay out of this one)."""
    log(f"object store: bench.objstore, {OBJSTORE_LATENCY_MS} ms per request")
    job = [] if cfg.spark else ["--job-files", "0"]  # the job part starts Spark
    return _run_part("object store", "objstore", ["--latency-ms", str(OBJSTORE_LATENCY_MS), *job])


def run_bloom(cfg: Config) -> dict | None:
    """bench.bloom in its own process (a quarter of its rows in --quick)."""
    rows = BLOOM_ROWS // 4 if cfg.quick else BLOOM_ROWS
    log(f"bloom filters: bench.bloom, {rows:,} rows")
    return _run_part("bloom filter", "bloom", ["--rows", str(rows)])


def run_planning(cfg: Config) -> dict | None:
    """bench.planning in its own process (10^5 files in --quick, else 10^5 and 10^6)."""
    sizes = "100000" if cfg.quick else "100000,1000000"
    log(f"planning: bench.planning, {sizes} files")
    return _run_part("planning", "planning", ["--files", sizes])


def run_cold_start(cfg: Config) -> dict | None:
    """bench.cold_start in its own process (a 20 MB file in --quick, else 100 MB)."""
    size = "20" if cfg.quick else "100"
    log(f"cold start: bench.cold_start, Spark-like {size} MB")
    return _run_part("cold start", "cold_start", ["--size", size, "--cpus", cfg.cpus or ""])

def run_engines(cfg: Config) -> dict | None:
    """bench.engines in its own process (a fifth of its rows in --quick; Spark only with Spark)."""
    rows = ENGINE_ROWS // 5 if cfg.quick else ENGINE_ROWS
    log(f"engines: bench.engines, {rows:,} rows")
    return _run_part("engines", "engines", ["--rows", str(rows), *([] if cfg.spark else ["--no-spark"])])


def _run_part(what: str, module: str, args: list[str]) -> dict | None:
    """`python -m bench.<module> ARGS --json FILE`'s results, or None if it failed."""
    out = OUT / f"{module}.json"
    done = subprocess.run([sys.executable, "-m", f"bench.{module}", *args, "--json", str(out)],
                          cwd=M.ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        log(f"{what} part failed: {done.stderr.strip().splitlines()[-1:] or done.returncode}")
        return None
    return json.loads(out.read_text())


def rerun_queries(cfg: Config) -> int:
    """Only the query-effect part, into the last run's results: each of its datasets retrofitted
    (exact, through the CLI) into bench/out, the queries run before and after, the section replaced
    and marked as a rerun (date, commit, command); every other figure stays the last run's."""
    results = json.loads(cfg.raw.read_text())
    ran = {d["name"] for d in results["datasets"]}
    dsets = [ds for ds in (D.ensure(D.spec_for(kind, size), log=log) for size in cfg.sizes for kind in cfg.kinds)
             if ds.name in ran]
    started = time.monotonic()
    spark = SparkServer(cfg.cpus) if cfg.spark else None
    try:
        if spark is not None:
            tiny = D.tiny_file(str(D.DATA_DIR / "tiny-warmup.parquet"))
            spark.call(op="warmup", path=tiny)
            spark.pin()
        for ds in dsets:
            after = OUT / f"{ds.name}.retrofit.parquet"
            shutil.copyfile(ds.path, after)
            r = M.worker("retrofit", str(after), "exact", cpus=cfg.cpus)
            if not r.ok:
                log(f"queries on {ds.name} skipped: retrofit failed: {r.stderr[-300:]}")
                continue
            log(f"queries on {ds.name}")
            results["queries"][ds.name] = run_queries(cfg, ds, str(after), spark)
            after.unlink(missing_ok=True)
    finally:
        if spark is not None:
            spark.stop()
    facts = machine_facts(cfg)
    results["queries_rerun"] = {"date": facts["date"], "git": facts["git"], "command": cfg.command,
                                "seconds": time.monotonic() - started}
    cfg.raw.write_text(json.dumps(results, indent=1, default=str))
    text, _ = report.render(results)
    cfg.results.write_text(text)
    log(f"queries rerun into {os.path.relpath(cfg.results, M.ROOT)} in {time.monotonic() - started:.0f}s")
    return 0


def main(argv: list[str] | None = None) -> int:
    cfg = config(argv)
    os.chdir(M.ROOT)
    OUT.mkdir(parents=True, exist_ok=True)
    if cfg.queries_only:
        return rerun_queries(cfg)
    bench_started = time.monotonic()
    facts = machine_facts(cfg)
    log(f"{facts['make_target']}: kinds={','.join(cfg.kinds) or '-'} sizes="
        f"{','.join(str(s // MiB) + 'MiB' for s in cfg.sizes)} rounds={cfg.rounds} pin={facts['pinning']}")
    results: dict = {"facts": facts, "config": {k: str(v) for k, v in cfg.__dict__.items()},
                     "datasets": [], "tools": {}, "queries": {}, "index": {}, "scale": [],
                     "timings": {}}

    started = time.monotonic()
    dsets = []
    for size in cfg.sizes:
        for kind in cfg.kinds:
            ds = D.ensure(D.spec_for(kind, size), log=log)
            dsets.append(ds)
    results["timings"]["datasets"] = time.monotonic() - started
    for ds in dsets:
        big, where = D.largest_chunk(ds.path)
        results["datasets"].append({"name": ds.name, "kind": ds.spec.kind, "description": ds.kind.description,
                                    "path": os.path.relpath(ds.path, M.ROOT), "size": ds.size, "rows": ds.rows,
                                    "row_groups": ds.row_groups, "largest_chunk": big,
                                    "largest_chunk_at": where, "generate_seconds": ds.seconds_to_generate})

    mode, support = trust_mode(cfg)
    results["trust_support"] = support | {"mode": mode}
    log(f"trust-page-stats: {support} -> {mode or 'skipped'}")

    spark = None
    if cfg.spark and dsets:
        log("starting Spark (local[1])")
        started = time.monotonic()
        spark = SparkServer(cfg.cpus)
        tiny = D.tiny_file(str(D.DATA_DIR / "tiny-warmup.parquet"))
        warm = spark.call(op="warmup", path=tiny)
        pinned = spark.pin()
        spark.call(op="warmup", path=tiny)  # once more, pinned: JIT state settles on one core
        results["spark"] = {"pinned": pinned,"jvm_start": spark.jvm_start, "process_start": spark.process_start,
                            "warmup_job": warm.get("seconds"), "version": spark.version,
                            "baseline_rss": spark.baseline_rss}
        results["timings"]["spark_start"] = time.monotonic() - started
        log(f"  JVM/session start {spark.jvm_start:.1f}s, warm-up job {warm.get('seconds', 0):.1f}s")

    try:
        started = time.monotonic()
        index_seconds = 0.0
        raw: dict[str, dict[str, list]] = {ds.name: {t: [] for t in TOOLS} for ds in dsets}
        peaks: dict[str, dict[str, int]] = {ds.name: {} for ds in dsets}
        for rnd in range(cfg.rounds):
            for ds in dsets:
                t0 = time.monotonic()
                got = measure_round(cfg, ds, spark, mode, keep=rnd == cfg.rounds - 1, peaks=peaks[ds.name])
                for tool, s in got.items():
                    raw[ds.name][tool].append(s)
                brief = ", ".join(f"{t} {s.seconds:.2f}s" if isinstance(s, Sample) else f"{t} -"
                                  for t, s in got.items())
                log(f"round {rnd + 1}/{cfg.rounds} {ds.name} ({time.monotonic() - t0:.0f}s): {brief}")
                if rnd == cfg.rounds - 1:
                    # Index sizes now, then drop the outputs (all but the exact retrofit, which the
                    # queries use), so 1 GB datasets do not pile up copies in bench/out.
                    t1 = time.monotonic()
                    results["index"][ds.name] = index_sizes(cfg, ds)
                    index_seconds += time.monotonic() - t1
            if rnd == 0 and cfg.rounds > 1 and dsets:
                per_round = time.monotonic() - started
                log(f"round 1 took {per_round:.0f}s; the remaining rounds should take about "
                    f"{per_round * (cfg.rounds - 1) / 60:.0f} min")
        results["timings"]["rounds"] = time.monotonic() - started - index_seconds
        results["timings"]["index_sizes"] = index_seconds
        for ds in dsets:
            results["tools"][ds.name] = {t: summarize(v) for t, v in raw[ds.name].items()}

        if cfg.queries:
            started = time.monotonic()
            for ds in dsets:
                after = OUT / f"{ds.name}.retrofit.parquet"
                if not after.exists():
                    log(f"queries on {ds.name} skipped: no retrofitted file")
                    continue
                log(f"queries on {ds.name}")
                # Retrofit writes ext4 past the page cache (direct I/O): warm it like the input.
                _shell('cat "$1" > /dev/null', str(after), cpus=cfg.cpus)
                results["queries"][ds.name] = run_queries(cfg, ds, str(after), spark)
                after.unlink(missing_ok=True)
            results["timings"]["queries"] = time.monotonic() - started

        if cfg.profile:
            for ds in dsets:
                r = M.worker("profile", ds.path, str(OUT / f"profile-{ds.name}"), cpus=cfg.cpus)
                log(f"profile of {ds.name}: {r.result.get('profile')} ({r.result.get('seconds', 0):.2f}s)")
    finally:
        if spark is not None:
            spark.stop()

    # The parts that run in their own processes, in this order; each one's seconds in timings.
    parts: tuple[tuple[str, bool, Callable[[Config], object]], ...] = (
        ("scale", cfg.scale, run_scale), ("objstore", cfg.objstore, run_objstore),
        ("bloom", cfg.bloom, run_bloom), ("planning", cfg.planning, run_planning),
        ("cold_start", cfg.cold_start, run_cold_start), ("engines", cfg.engines, run_engines))
    for name, wanted, run_part in parts:
        if wanted:
            started = time.monotonic()
            results[name] = run_part(cfg)
            results["timings"][name] = time.monotonic() - started

    for ds in dsets:  # keep bench/out small: outputs were only needed for sizes and queries
        for suffix in (".retrofit.parquet", ".retrofit_trust.parquet", ".pa_rewrite.parquet"):
            (OUT / f"{ds.name}{suffix}").unlink(missing_ok=True)
        shutil.rmtree(OUT / f"{ds.name}.spark_rewrite", ignore_errors=True)

    facts["loadavg_end"] = os.getloadavg()
    results["timings"]["total"] = time.monotonic() - bench_started
    cfg.raw.parent.mkdir(parents=True, exist_ok=True)
    cfg.raw.write_text(json.dumps(results, indent=1, default=str))
    text, summary = report.render(results)
    cfg.results.write_text(text)
    print(summary)
    log(f"wrote {os.path.relpath(cfg.results, M.ROOT)} and {os.path.relpath(cfg.raw, M.ROOT)} "
        f"in {results['timings']['total']:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
