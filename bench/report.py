"""Render bench results (the dict bench.run collects) as RESULTS.md and a console summary.

`python -m bench.report --bloom JSON --objstore JSON --planning JSON --engines JSON` puts a separate
bench.bloom, bench.objstore, bench.planning or bench.engines run's section into RESULTS.md.
"""
from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

from bench import cold_start, planning

MB = 1e6
MiB = 1 << 20
RSS_ALLOWANCE = 200 * MiB
BLOOM_MAX_RATIO = 1.25
BLOOM_HEADING = "## Bloom filters"
OBJSTORE_HEADING = "## Object store"
TARGETS_HEADING = "## Targets"

TOOL_LABELS = {
    "cat_warm": "cat (warm)",
    "cp": "cp",
    "cp_fsync": "cp+fsync",
    "read_table": "pyarrow read_table",
    "decompress": "read + decompress pages",
    "retrofit": "**retrofit (exact)**",
    "retrofit_trust": "retrofit --trust-page-stats",
    "retrofit_dry": "retrofit --dry-run",
    "retrofit_trust_dry": "--trust-page-stats --dry-run",
    "retrofit_reflink": "retrofit (exact), reflink fs",
    "retrofit_trust_reflink": "--trust-page-stats, reflink fs",
    "pa_rewrite": "pyarrow rewrite",
    "spark_rewrite": "Spark rewrite",
}

EXPLAIN = """\
## What is measured

Every tool runs in its own subprocess pinned with `taskset` to one core (pyarrow limited to one
CPU thread and one I/O thread; Spark `local[1]`: its JVM boots on all cores, unmeasured, then
every thread of it is pinned with `taskset -a -p` before the timed jobs). Repetitions are
interleaved: round *r* runs every tool on every dataset before round *r+1* starts, and the
tables show the median of the rounds, so machine noise hits every tool alike. MB/s = input
file size (10^6 bytes) / median seconds. All inputs are warm in the page cache (the same file
is read by the tools before); `sync` runs (untimed) before each measurement so one tool's
write-back does not land on the next one.

Memory priming: each Python tool (read_table, retrofit, pyarrow rewrite) first touches and frees
1.25x its peak RSS from its previous run on the dataset (the first time, an untimed run learns
that peak), plus the size of the file it writes (the rewrite's new file takes page cache, new
memory too; so did retrofit's copy before it wrote ext4 with direct I/O, and it is primed the same
way still), resets its `VmHWM`, then starts the timed operation; cp and
cp+fsync run right after a worker process that primes the file's size. The bench machine is a VM that
hands freed memory back to its host (free page reporting), and the first touch of such memory
costs the faulting process 1-2 ms of CPU per MiB: pyarrow `read_table` of numeric-200MB,
after 6 idle seconds, took 1.20-1.55 s unprimed and 0.42-0.44 s primed
(`python -m bench.prime_check`, bench/RESULTS-prime.md). Without priming a tool's time depended on what ran
before it, and tools that allocate much (pyarrow) were slowed the most. Spark's long-lived JVM
keeps the heap it grew and is not primed; cat allocates little.

| column | command | timed part |
| --- | --- | --- |
| cat (warm) | `cat FILE > /dev/null`, run twice | the second run (process wall time): the floor for reading the bytes |
| cp | `cp FILE COPY` | process wall time (coreutils cp, in-kernel copy_file_range on this filesystem; no fsync) |
| cp+fsync | `cp FILE COPY && sync COPY` | process wall time: a durable copy made through the page cache (retrofit's commit makes a durable copy too, on ext4 with direct I/O) |
| pyarrow read_table | `pq.read_table(FILE, use_threads=False)` | the call only (decode floor) |
| read + decompress pages | `os.pread` of every column chunk, then pyarrow's codec on every page body (`bench.worker.op_decompress`; where the pages are is learned first, untimed) | the reads and decompressions only: the least work of any exact retrofit, which must see every value |
| retrofit (exact) | `pageindex retrofit COPY` (in place, CLI entry point `pageindex.cli.main`) on a fresh copy made untimed just before | `cli.main` only: read + decode + build index + copy prefix + write tail + fsync + rename |
| retrofit --trust-page-stats | the same with `--trust-page-stats` (or `retrofit(..., trust_page_stats=True)` if only the API has it) | as above; skipped while the option does not exist |
| retrofit (exact), reflink fs; --trust-page-stats, reflink fs | the same two runs in place on a fresh copy in `--reflink-dir`, a filesystem that copies by reflink (XFS or btrfs; shown only when given) | as above: there the prefix "copy" shares the file's blocks, so no data is written |
| retrofit --dry-run, --trust-page-stats --dry-run | `pageindex retrofit --dry-run [--trust-page-stats] FILE` | compute only: footer, page walk, decode, index build; no copy, no fsync |
| pyarrow rewrite | `pq.write_table(pq.read_table(FILE), OUT, write_page_index=True, <same compression, dictionary and page version>)` | read + write (no fsync) |
| Spark rewrite | `spark.read.parquet(FILE).write.option("compression", C).parquet(DIR)` in one long-lived `local[1]` session | the job only; JVM start and a warm-up job on a tiny file are reported separately |

Peak RSS: the child's own `VmHWM` (read from /proc/self/status as it finishes) for Python
tools; not `ru_maxrss`, which on Linux carries the harness's high-water mark across fork+exec
into every child. For Spark: the sum of
`VmHWM` over the worker process tree (Python driver + JVM), reset through
`/proc/PID/clear_refs` before each job. A JVM keeps the heap it grew, so Spark's number is
the high-water mark of a session that has run all earlier jobs too.

Index size: the sum of `column_index_length + offset_index_length` over all chunks, read
with pageindex's own footer decoder, for the retrofitted file and for pyarrow's (and
Spark's) rewritten file. "growth" is the whole retrofitted file minus the input (index blocks
plus the larger footer). The target allows 0.1% over pyarrow's: its rewritten file has other
page offsets (and, for nested columns, pages cut at other rows), so a few varints differ in
length either way. Spark's numbers are for its own layout (other row groups and pages, INT96
timestamps without ColumnIndex) and are shown for reference only.

RSS target: peak RSS of one retrofit <= largest column chunk's `total_uncompressed_size` +
200 MiB. The uncompressed size is a proxy for the decoded chunk (decoded Arrow arrays can be
larger: offsets, validity bitmaps, dictionaries expanded), and the 200 MiB allowance has to
cover the Python interpreter and pyarrow themselves (~100 MiB).
"""


def rss_limit(largest_chunk: int) -> int:
    """The memory target for one retrofit: its file's largest chunk (uncompressed) + RSS_ALLOWANCE."""
    return largest_chunk + RSS_ALLOWANCE


def fmt_s(x: float | None) -> str:
    return "-" if x is None else (f"{x:.3f}" if x < 10 else f"{x:.1f}")


def fmt_mb(n: int | float | None) -> str:
    if n is None:
        return "-"
    return f"{n / MiB:.0f} MiB" if n >= 10 * MiB else f"{n / MiB:.1f} MiB"


def fmt_bytes(n: int | float | None) -> str:
    if n is None:
        return "-"
    n = float(n)
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}" if n < 10 * size else f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def _median(tools: dict, tool: str) -> float | None:
    return tools.get(tool, {}).get("median")


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


def _cpu(tools: dict, tool: str) -> float | None:
    return tools.get(tool, {}).get("cpu_median")


def _cpu_check(row: dict, value: float | None, ok) -> dict:
    row["cpu_shown"] = f"{value:.2f}x" if value else "-"
    row["cpu_ok"] = None if value is None else ok(value)
    return row


def contention(results: dict) -> float | None:
    """Median wall/CPU of pyarrow read_table (CPU bound, warm): ~1 on a free core."""
    vals = []
    for tools in results["tools"].values():
        rt = tools.get("read_table", {})
        for w, c in zip(rt.get("all", []), rt.get("cpu_all", [])):
            if c:
                vals.append(w / c)
    vals.sort()
    return vals[len(vals) // 2] if vals else None


def _index_check(name: str, ours: dict | None, theirs: dict | None, ours_b, theirs_b) -> dict:
    row = {"target": "index size <= pyarrow's", "dataset": name, "value": ours_b, "shown": "-", "ok": None}
    if ours_b is None or theirs_b is None:
        return row
    # The rewritten file has its own page offsets (and, for nested columns, pyarrow re-batches
    # and cuts pages at other rows), so a few varints differ in length either way: allow 0.1%.
    row["shown"] = f"{fmt_bytes(ours_b)} vs {fmt_bytes(theirs_b)} ({ours_b - theirs_b:+d} B)"
    row["ok"] = ours_b <= theirs_b * 1.001
    if ours.get("layout") and ours.get("layout") != theirs.get("layout"):
        row["shown"] += (f"; pyarrow's rewrite cut pages at other rows ({ours.get('pages')} vs "
                         f"{theirs.get('pages')} pages)")
    return row


def checks(results: dict) -> list[dict]:
    """One row per (target, dataset) with value, threshold and verdict (wall time, and the same
    ratio on CPU time where the target is about speed)."""
    rows = []
    by_name = {d["name"]: d for d in results["datasets"]}
    for name, tools in results["tools"].items():
        rows += _checks_one(name, tools, by_name, results)
    if results.get("bloom"):
        rows.append(bloom_check(results["bloom"]))
    return rows


def bloom_check(section: dict) -> dict:
    """Issue 27's target: exact retrofit with filters on every eligible column at most 1.25x the
    time without (the default filter code: the compiled kernel)."""
    runs = section["runs"]
    base, filtered = runs["none"], runs["all eligible"]
    ratio = filtered["seconds"] / base["seconds"]
    return _cpu_check({"target": f"bloom filters on all eligible columns <= {BLOOM_MAX_RATIO}x exact retrofit",
                       "dataset": f"bloom ({section['rows']:,} rows, filter code {filtered.get('path', 'numpy')})",
                       "value": ratio, "shown": f"{ratio:.2f}x", "ok": ratio <= BLOOM_MAX_RATIO},
                      filtered["cpu"] / base["cpu"], lambda v: v <= BLOOM_MAX_RATIO)


def _checks_one(name: str, tools: dict, by_name: dict, results: dict) -> list[dict]:
    if True:
        retro = _median(tools, "retrofit")
        cretro = _cpu(tools, "retrofit")
        pa_ratio = _ratio(_median(tools, "pa_rewrite"), retro)
        sp_ratio = _ratio(_median(tools, "spark_rewrite"), retro)
        rt_ratio = _ratio(retro, _median(tools, "read_table"))
        trust = _median(tools, "retrofit_trust")
        trust_ratio = _ratio(retro, trust)
        tx = tools.get("retrofit_trust", {}).get("extra", {})
        trust_applies = bool(tx.get("chunks")) and tx.get("chunks_from_page_stats") == tx.get("chunks")
        dry_ratio = _ratio(_median(tools, "retrofit_dry"), _median(tools, "retrofit_trust_dry"))
        trust_partial = f" (partial: {tx.get('chunks_from_page_stats')}/{tx.get('chunks')} chunks from page stats)"
        rss = tools.get("retrofit", {}).get("peak_rss")
        limit = rss_limit(by_name[name]["largest_chunk"])
        idx = results["index"].get(name, {})
        ours = idx.get("retrofit")
        theirs = idx.get("pa_rewrite")
        ours_b = ours["column_index_bytes"] + ours["offset_index_bytes"] if ours else None
        theirs_b = theirs["column_index_bytes"] + theirs["offset_index_bytes"] if theirs else None
        return [
            _cpu_check({"target": "exact >= 3x faster than pyarrow rewrite", "dataset": name, "value": pa_ratio,
                        "shown": f"{pa_ratio:.2f}x" if pa_ratio else "-", "ok": None if pa_ratio is None else pa_ratio >= 3},
                       _ratio(_cpu(tools, "pa_rewrite"), cretro), lambda v: v >= 3),
            _cpu_check({"target": "exact >= 8x faster than Spark rewrite", "dataset": name, "value": sp_ratio,
                        "shown": f"{sp_ratio:.2f}x" if sp_ratio else "-", "ok": None if sp_ratio is None else sp_ratio >= 8},
                       _ratio(_cpu(tools, "spark_rewrite"), cretro), lambda v: v >= 8),
            _cpu_check({"target": "retrofit <= 1.5x pyarrow read_table", "dataset": name, "value": rt_ratio,
                        "shown": f"{rt_ratio:.2f}x" if rt_ratio else "-", "ok": None if rt_ratio is None else rt_ratio <= 1.5},
                       _ratio(cretro, _cpu(tools, "read_table")), lambda v: v <= 1.5),
            {"target": "peak RSS <= largest chunk + 200 MiB", "dataset": name, "value": rss,
             "shown": f"{fmt_mb(rss)} vs {fmt_mb(limit)}" if rss else "-", "ok": None if rss is None else rss <= limit},
            _index_check(name, ours, theirs, ours_b, theirs_b),
            _cpu_check({"target": "trust-page-stats >= 20x faster than exact (where it applies to every chunk)",
                        "dataset": name, "value": trust_ratio,
                        "shown": (f"{trust_ratio:.1f}x" + ("" if trust_applies else trust_partial)
                                  + (f"; compute only (dry-run) {dry_ratio:.1f}x" if dry_ratio else ""))
                        if trust_ratio else "skipped (option not in this checkout)",
                        "ok": None if trust_ratio is None or not trust_applies else trust_ratio >= 20},
                       _ratio(cretro, _cpu(tools, "retrofit_trust")) if trust_applies else None, lambda v: v >= 20),
        ] + _reflink_checks(name, tools, trust_applies)


def _reflink_checks(name: str, tools: dict, trust_applies: bool) -> list[dict]:
    """The trust target again, both modes in place on a reflink filesystem (--reflink-dir): there
    the commit shares the file's blocks instead of writing a copy. Nothing when not measured."""
    exact, trust = _median(tools, "retrofit_reflink"), _median(tools, "retrofit_trust_reflink")
    ratio = _ratio(exact, trust)
    if ratio is None:
        return []
    return [_cpu_check({"target": "trust-page-stats >= 20x faster than exact, in place on a reflink filesystem",
                        "dataset": name, "value": ratio,
                        "shown": f"{ratio:.1f}x" + ("" if trust_applies else " (partial)"),
                        "ok": ratio >= 20 if trust_applies else None},
                       _ratio(_cpu(tools, "retrofit_reflink"), _cpu(tools, "retrofit_trust_reflink"))
                       if trust_applies else None, lambda v: v >= 20)]


def _facts_table(f: dict, results: dict) -> list[str]:
    sp = results.get("spark", {})
    lines = ["| fact | value |", "| --- | --- |"]
    for key, label in (("date", "date"), ("make_target", "make target"), ("command", "exact command"),
                       ("cpu", "CPU"), ("cores", "cores (machine)"), ("pinning", "pinning"),
                       ("memory", "memory"), ("kernel", "kernel"), ("filesystem", "filesystem of bench/"),
                       ("reflink_filesystem", "filesystem of --reflink-dir"),
                       ("loadavg_start", "load average at start"), ("loadavg_end", "load average at end"),
                       ("python", "Python"), ("pyarrow", "pyarrow"), ("pyspark", "PySpark"),
                       ("java", "Java"), ("datafusion", "DataFusion"), ("duckdb", "DuckDB"),
                       ("pageindex", "pageindex"), ("install", "pageindex installed as"),
                       ("git", "git commit")):
        value = f.get(key)
        if isinstance(value, (list, tuple)):
            value = " / ".join(f"{v:.2f}" for v in value)
        if key == "command":
            value = f"`{value}` (run by `make bench` from the repository root with .venv-bench/bin/python)"
        lines.append(f"| {label} | {value} |")
    if sp:
        lines.append(f"| Spark session start (JVM + SparkSession, local[1]) | {sp['jvm_start']:.1f} s "
                     f"(worker process ready after {sp['process_start']:.1f} s) |")
        lines.append(f"| Spark warm-up job (tiny file rewrite, first job in the JVM; run twice, the second pinned) | {fmt_s(sp.get('warmup_job'))} s |")
        if not sp.get("pinned", True):
            lines.append("| Spark pinning | FAILED: the JVM ran on every core |")
        lines.append(f"| Spark idle RSS after start | {fmt_mb(sp.get('baseline_rss'))} |")
    c = contention(results)
    if c:
        lines.append(f"| contention (median wall/CPU of pyarrow read_table; ~1.0 = the pinned core was free) | {c:.2f} |")
    t = results.get("timings", {})
    lines.append("| bench wall time | " + ", ".join(f"{k} {v:.0f}s" for k, v in t.items()) + " |")
    return lines


SYSTEM_TOOLS = ("read_table", "retrofit", "retrofit_dry", "retrofit_trust", "retrofit_trust_dry", "pa_rewrite")
RSS_TOOLS = ("read_table", "retrofit", "retrofit_trust", "pa_rewrite", "spark_rewrite")


def _system_cpu(results: dict) -> list[str]:
    """System CPU and minor faults per round of the Python tools: where the kernel's work (page
    faults on fresh memory, the in-kernel copy of a commit, write-back) goes. Rounds without it
    (older runs) are left out."""
    rows = []
    measured = False
    for name, tr in results["tools"].items():
        cells = []
        for tool in SYSTEM_TOOLS:
            work = [w for w in tr.get(tool, {}).get("memory_work_all") or [] if w]
            measured = measured or bool(work)
            cells.append(" / ".join(f"{w['system_cpu']:.2f} ({w['minor_faults'] / 1000:.0f}k)" for w in work)
                         or "-")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    if not measured:
        return []
    return ["## System CPU seconds and minor page faults (each round)", "",
            "The kernel's share of the CPU seconds above, per round in round order, and in "
            "parentheses the thousands of minor page faults (fresh memory touched), from the "
            "worker's getrusage. results.json also keeps each round's major faults and the system's "
            "direct-reclaim, compaction-stall and huge-page-fault counts (`memory_work_all`).", "",
            "| dataset | " + " | ".join(TOOL_LABELS[t] for t in SYSTEM_TOOLS) + " |",
            "| --- |" + " ---: |" * len(SYSTEM_TOOLS), *rows, ""]


def _room(results: dict) -> list[str]:
    """How much time each speed target leaves a retrofit once it has done the work it cannot
    avoid: what the targets ask against what the machine allows."""
    out = ["## Room under the speed targets", "",
           "The time each target allows (pyarrow rewrite / 3, Spark rewrite / 8, read_table x 1.5 for "
           "exact mode; exact / 20 for --trust-page-stats), and in parentheses how much of it is left "
           "after the work no retrofit can skip. Exact mode must read and decompress every page (its "
           "bounds come from every value): the read + decompress column. Any in-place retrofit on a "
           "filesystem without reflinks must also write a durable copy of the file: the cp+fsync column "
           "(retrofit overlaps that copy with its computation, and writes it with direct I/O). A room "
           "near zero or below leaves nothing for decoding the values, bounding them, the copy, or "
           "(trust) the copy itself.", "",
           "| dataset | read + decompress s | 3x pyarrow allows s (room) | 8x Spark allows s (room) | "
           "1.5x read_table allows s (room) | cp+fsync s | 20x trust allows s (room) | exact dry-run s | exact s |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, tr in results["tools"].items():
        floor, copy = _median(tr, "decompress"), _median(tr, "cp_fsync")
        exact = _median(tr, "retrofit")
        cells = [_allowance(_scaled(_median(tr, "pa_rewrite"), 1 / 3), floor),
                 _allowance(_scaled(_median(tr, "spark_rewrite"), 1 / 8), floor),
                 _allowance(_scaled(_median(tr, "read_table"), 1.5), floor),
                 fmt_s(copy), _allowance(_scaled(exact, 1 / 20), copy)]
        out.append(f"| {name} | {fmt_s(floor)} | " + " | ".join(cells) +
                   f" | {fmt_s(_median(tr, 'retrofit_dry'))} | {fmt_s(exact)} |")
    return out + [""]


def _allowance(allowed: float | None, floor: float | None) -> str:
    return f"{fmt_s(allowed)} ({allowed - floor:+.3f})" if allowed and floor else fmt_s(allowed)


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


PYARROW = "pyarrow read_table"


def objstore_section(section: dict) -> list[str]:
    """The object-store table (bench/objstore.py's results): per dataset and tool the requests by
    S3 operation, bytes returned and time, with GETs and time against pyarrow's on the object."""
    out = [f"{OBJSTORE_HEADING} (moto on 127.0.0.1, {section['latency_ms']:g} ms per request in the proxy)", "",
           "Issue 25's targets per file: GETs at most 2x pyarrow read_table's + 4; exact dry run at most "
           "1.5x its time; trusted page stats never slower than exact; peak RSS of a retrofit at most the "
           "largest chunk (uncompressed) + 200 MiB, read-ahead included. Peak RSS: a fresh process that runs "
           "the tool once, imports included.", "",
           "| dataset | size | tool | time | x pyarrow time | requests | GETs | GET bound | other requests "
           "| bytes returned | peak RSS |",
           "|---|---:|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    base = {row["dataset"]: row for row in section["rows"] if row["tool"] == PYARROW}
    for row in section["rows"]:
        ref = base.get(row["dataset"])
        gets = row["requests"].get("GetObject", 0)
        bound = 2 * ref["requests"].get("GetObject", 0) + 4 if ref else None
        other = ", ".join(f"{op} {n}" for op, n in sorted(row["requests"].items()) if op != "GetObject")
        ratio = f"{row['seconds'] / ref['seconds']:.1f}" if ref and ref["seconds"] else "-"
        verdict = "" if bound is None or row["tool"] == PYARROW else (" ok" if gets <= bound else " OVER")
        out.append(f"| {row['dataset']} | {row['size'] / 2**20:.1f} MiB | {row['tool']} | {row['seconds']:.2f} s "
                   f"| {ratio} | {sum(row['requests'].values())} | {gets} | "
                   f"{'-' if bound is None or row['tool'] == PYARROW else bound}{verdict} | {other} "
                   f"| {row['bytes_returned'] / 2**20:.1f} MiB | {_objstore_rss(row)} |")
    out.append("")
    out += _in_place_rows(section["rows"])
    if section.get("job"):
        out += _job_rows(section["job"])
    if section.get("load_average"):
        out += ["Load average at the end of the run: " + " ".join(f"{x:.2f}" for x in section["load_average"]) + ".", ""]
    return out


def _objstore_rss(row: dict) -> str:
    """A run's peak RSS, and for retrofit whether it is within the target."""
    rss = row.get("peak_rss")
    if rss is None:
        return "-"
    if row["tool"] == PYARROW:
        return fmt_mb(rss)
    limit = rss_limit(row["largest_chunk"])
    return f"{fmt_mb(rss)} of {fmt_mb(limit)} {'ok' if rss <= limit else 'OVER'}"


IN_PLACE_MAX_EXTRA = 5  # issue 25: requests an in-place run may make beyond the dry run's


def _in_place_rows(rows: list[dict]) -> list[str]:
    """Each in-place run against the dry run of the same mode and transport on the same object."""
    tools = {(row["dataset"], row["tool"]): row for row in rows}
    out = [f"In place against the dry run (issue 25: at most {IN_PLACE_MAX_EXTRA} requests more; the prefix of an "
           "object over 5 MiB is copied on the server, so no more bytes come back than in the dry run):", "",
           "| dataset | mode | dry run requests | in place requests | more | bytes returned, dry -> in place |",
           "|---|---|---:|---:|---:|---:|"]
    for (dataset, tool), row in tools.items():
        dry = tools.get((dataset, tool.replace(" in place", "")))
        if " in place" not in tool or dry is None:
            continue
        more = sum(row["requests"].values()) - sum(dry["requests"].values())
        verdict = "ok" if more <= IN_PLACE_MAX_EXTRA else "OVER"
        out.append(f"| {dataset} | {tool} | {sum(dry['requests'].values())} | {sum(row['requests'].values())} "
                   f"| {more} {verdict} | {dry['bytes_returned'] / 2**20:.1f} -> {row['bytes_returned'] / 2**20:.1f} MiB |")
    return out + [""]


def _job_rows(job: dict) -> list[str]:
    """The Spark job over a directory of small files: files per second and requests per file."""
    out = [f"The Spark job ({job['master']}) over {job['files']} files of {job['file_bytes'] / 1024:.0f} KiB, "
           f"median of {job['rounds']} rounds (requests include the driver's listing and the run "
           "state's reads and writes; \"naming a file\": requests for the files' own objects, per file):", "",
           "| job run | files/s | seconds (min-max) | requests | per file | naming a file | by operation | statuses |",
           "|---|---:|---:|---:|---:|---:|---|---|"]
    for mode, run in job["runs"].items():
        total = sum(run["requests"].values())
        low, high = job["spread"][mode]
        ops = ", ".join(f"{op} {n}" for op, n in sorted(run["requests"].items()))
        statuses = ", ".join(f"{s} {n}" for s, n in sorted(run["statuses"].items()))
        naming = f"{run['file_requests'] / job['files']:.1f}" if "file_requests" in run else "-"
        out.append(f"| {mode} | {job['files'] / run['seconds']:.1f} | {run['seconds']:.2f} ({low:.2f}-{high:.2f}) "
                   f"| {total} | {total / job['files']:.1f} | {naming} | {ops} | {statuses} |")
    return out + [""]


def bloom_section(section: dict) -> list[str]:
    """The bloom filter section (bench/bloom.py's results): cost of exact retrofit with filters
    against without, in one run; filter bytes against pyarrow's; what filters prune per column."""
    runs = section["runs"]
    base = runs["none"]
    out = [f"{BLOOM_HEADING} ({section['rows']:,} rows, {section['row_groups']} row groups, "
           f"{section['input_bytes'] / 2**20:.1f} MiB, fpp {section['fpp']:g})", "",
           f"Exact retrofit, each run its own process, median of {section['rounds']} interleaved rounds. "
           f"Issue 27's target: filters on every eligible column at most {BLOOM_MAX_RATIO}x the time without. "
           "Filter code: the compiled kernel built into the wheel (the default), or numpy (forced with "
           "PAGEINDEX_BLOOM_KERNEL=numpy, for comparison). Runs marked warm retrofit a second file in a "
           "process that has done one (a job's reused worker, a CLI run over many files); their ratios "
           "are against `none, warm`.", "",
           "| run | filter code | wall s | x none | CPU s | x none (CPU) | peak RSS MiB | filters | filter bytes "
           "| columns |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, r in runs.items():
        code = r.get("path", "numpy") if r["filters"] else "-"
        against = runs.get("none, warm", base) if name.endswith(", warm") else base
        out.append(f"| {name} | {code} | {r['seconds']:.2f} | {r['seconds'] / against['seconds']:.2f} | {r['cpu']:.2f} | "
                   f"{r['cpu'] / against['cpu']:.2f} | {r['rss'] / 2**20:.0f} | {r['filters']} | {r['filter_bytes']:,} "
                   f"| {', '.join(r['columns'])} |")
    if section.get("load_average"):
        out += ["", "Load average at the end of the run: " + ", ".join(f"{x:.2f}" for x in section["load_average"]) + "."]
    if section.get("startup"):
        first = section["startup"]
        out += ["", "A fresh process's first filters (one of each physical type, tiny; median of "
                f"{section['rounds']} processes), after importing pageindex's filter code, against the same "
                "filters again in that now warm process: " + "; ".join(
                    f"{path} import {t['import'] * 1e3:.0f} ms, first {t['first'] * 1e3:.1f} ms, "
                    f"warm {t['warm'] * 1e3:.1f} ms" for path, t in first.items()) + "."]
    out += ["", f"Filter bytes, all eligible columns: pageindex {runs['all eligible']['filter_bytes']:,}, "
            f"pyarrow {section['pyarrow_filter_bytes']:,} (same values, same fpp).", "",
            "Per column: the share of (row group, probed value) pairs that footer statistics rule out, "
            "and that the filter rules out on top, for values present in the file and absent ones "
            "(CPU: what the column's filter adds to the run without filters).", "",
            "| column | what | distinct share (row group 0, estimated) | present: stats | present: + filter "
            "| absent: stats | absent: + filter | CPU added s | auto keeps |",
            "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    group_rows = section["rows"] // section["row_groups"]
    auto = set(runs["auto"]["columns"])
    for name, row in section["pruning"].items():
        shares = [f"{row[kind][by]:.0%}" if kind in row else "-"
                  for kind in ("present", "absent") for by in ("stats", "filter")]
        cost = runs[f"+{name}"]["cpu"] - base["cpu"]
        share = runs["all eligible"]["ndv"].get(name, 0) / group_rows
        out.append(f"| {name} | {section['columns'].get(name, '')} | {share:.2f} | {' | '.join(shares)} | {cost:+.2f} | "
                   f"{'yes' if name in auto else 'no'} |")
    out += ["", "Point lookup of an absent id:", ""]
    out += [f"- {name}: pageindex lookup {r['pageindex']}; DataFusion {r['datafusion']}"
            for name, r in section["lookup"].items()]
    return out + [""] + (bloom_reference(section) if section.get("reference") else [])


def bloom_reference(section: dict) -> list[str]:
    """The reference table: pyarrow's own writer's CPU cost of the same filters per value (with
    minus without) beside build_filter's, and the share of issue 27's target each leaves."""
    ref = section["reference"]
    paths = [p for p in ("numpy", "compiled") if all(f"{p}_ns" in r for r in ref.values())]
    out = [f"Reference: CPU ns per value of one column's filters ({section['rows']:,} values, "
           f"{section['row_groups']} row groups, fpp {section['fpp']:g}, median of {section['rounds']} "
           "interleaved rounds after a warm-up). pyarrow: its writer with `bloom_filter_options` minus "
           "without (no compression, dictionary or statistics; ndv chosen so its filter starts at our "
           "size; it folds by the same rule); ours: `build_filter` and serializing, per row group, on "
           "the same arrays.", "",
           "| column | physical type | start bytes | pyarrow ns/value | "
           + " | ".join(f"ours ({p}) ns/value" for p in paths) + " | filter bytes (ours = pyarrow) |",
           "|---|---|---:|---:|" + "---:|" * len(paths) + "---|"]
    for name, r in ref.items():
        same = "yes" if r["our_bytes"] == r["pyarrow_bytes"] else f"no ({r['our_bytes']:,} / {r['pyarrow_bytes']:,})"
        out.append(f"| {name} | {r['type']} | {r['start_bytes']:,} | {r['pyarrow_ns']:.1f} | "
                   + " | ".join(f"{r[f'{p}_ns']:.1f}" for p in paths) + f" | {same} |")
    if section.get("load_average"):
        out += ["", "Load average at the end: " + ", ".join(f"{x:.2f}" for x in section["load_average"]) + "."]
    return out + [""]


def render(results: dict) -> tuple[str, str]:
    f = results["facts"]
    out = [f"# pageindex benchmark results ({'quick' if 'quick' in f['make_target'] else 'full'})", "",
           f"Generated by `{f['make_target']}` on {f['date']}. Numbers from a shared, noisy machine "
           "are only comparable within one run; the ratios are what the targets check.", ""]
    out += ["## Machine", ""] + _facts_table(f, results) + [""]
    out.append(EXPLAIN)

    out += ["## Datasets", "",
            "Written by pyarrow without a page index: 1 MiB data pages (no row-count cap, as legacy "
            "writers did; pyarrow >= 15 would also cut pages at 20,000 rows), page statistics in headers, "
            "row groups ~128 MiB scaled down for smaller files (about 6 per file), sorted by `id`; "
            "`u` is an unsorted int64 (a scramble of `id`). Cached in bench/data/ by spec hash.", "",
            "| dataset | what | size | rows | row groups | largest chunk (uncompressed) |",
            "| --- | --- | ---: | ---: | ---: | --- |"]
    for d in results["datasets"]:
        out.append(f"| {d['name']} | {d['description']} | {fmt_bytes(d['size'])} | {d['rows']:,} | "
                   f"{d['row_groups']} | {fmt_mb(d['largest_chunk'])} ({d['largest_chunk_at']}) |")
    out.append("")

    sizes = {d["name"]: d["size"] for d in results["datasets"]}
    tools = ["cat_warm", "cp", "cp_fsync", "read_table", "decompress", "retrofit", "retrofit_trust", "retrofit_dry",
             "retrofit_trust_dry", "retrofit_reflink", "retrofit_trust_reflink", "pa_rewrite", "spark_rewrite"]
    tools = [t for t in tools if any(_median(tr, t) or "skipped" not in tr.get(t, {}).get("error", "skipped")
                                     for tr in results["tools"].values())]
    out += ["## Throughput (MB/s of input, median of rounds; seconds in parentheses)", "",
            "| dataset | " + " | ".join(TOOL_LABELS[t] for t in tools) + " |",
            "| --- |" + " ---: |" * len(tools)]
    notes = []
    for name, tr in results["tools"].items():
        cells = []
        for t in tools:
            m = tr.get(t, {}).get("median")
            if m:
                cells.append(f"{sizes[name] / MB / m:,.0f} ({fmt_s(m)} s)")
            else:
                err = tr.get(t, {}).get("error", "")
                cells.append("skipped" if err.startswith("skipped") else "error")
                if err and not err.startswith("skipped"):
                    notes.append(f"- {name} / {t}: {err[:400]}")
                elif err and "trust" in t and not any("trust_page_stats" in n for n in notes):
                    notes.append("- retrofit --trust-page-stats: " + err + "; the row fills in once the "
                                 "option lands (detected from `pageindex.retrofit`'s signature and the CLI help).")
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    out += [""] + notes + ([""] if notes else [])
    out += ["Per-round seconds (in round order) are in the raw JSON (bench/out/results*.json).", ""]

    out += ["## CPU seconds (median of rounds)", "",
            "User + system CPU time of the operation: less sensitive than wall time to other load on a "
            "shared machine, but blind to I/O waits such as fsync. Python tools: `time.process_time()` "
            "around the operation; cat/cp: the whole process; Spark: the worker tree's /proc CPU "
            "counters around the job.", "",
            "| dataset | " + " | ".join(TOOL_LABELS[t] for t in tools) + " |",
            "| --- |" + " ---: |" * len(tools)]
    for name, tr in results["tools"].items():
        out.append(f"| {name} | " + " | ".join(fmt_s(tr.get(t, {}).get("cpu_median")) for t in tools) + " |")
    out.append("")
    out += _system_cpu(results)

    out += ["## Ratios", "",
            "| dataset | pyarrow rewrite / retrofit | Spark rewrite / retrofit | retrofit / read_table | "
            "retrofit / cp+fsync | exact / trust-stats |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, tr in results["tools"].items():
        r = _median(tr, "retrofit")
        vals = [_ratio(_median(tr, "pa_rewrite"), r), _ratio(_median(tr, "spark_rewrite"), r),
                _ratio(r, _median(tr, "read_table")), _ratio(r, _median(tr, "cp_fsync")),
                _ratio(r, _median(tr, "retrofit_trust"))]
        out.append(f"| {name} | " + " | ".join(f"{v:.2f}x" if v else "-" for v in vals) + " |")
    out += ["", "The same ratios on CPU time:", "",
            "| dataset | pyarrow rewrite / retrofit | Spark rewrite / retrofit | retrofit / read_table | "
            "exact / trust-stats |", "| --- | ---: | ---: | ---: | ---: |"]
    for name, tr in results["tools"].items():
        def c(t):
            return tr.get(t, {}).get("cpu_median")
        r = c("retrofit")
        vals = [_ratio(c("pa_rewrite"), r), _ratio(c("spark_rewrite"), r), _ratio(r, c("read_table")),
                _ratio(r, c("retrofit_trust"))]
        out.append(f"| {name} | " + " | ".join(f"{v:.2f}x" if v else "-" for v in vals) + " |")
    out.append("")

    out += _room(results)

    out += ["## --trust-page-stats", "",
            "Chunks whose ColumnIndex came from page-header statistics (the rest were decoded exactly: "
            "float columns, known-bad writers; nested columns decode their levels but not their values). "
            "End to end, both modes also copy the data "
            "prefix and fsync it (in-place commit), so cp+fsync bounds the trust speed-up; the dry-run "
            "columns compare the index computation alone. The reflink columns (with --reflink-dir) run "
            "both modes in place on a filesystem that copies by sharing blocks (XFS, btrfs), where the "
            "commit writes no copy; \"-\" when not measured.", "",
            "| dataset | chunks from page stats | exact s | trust s | speed-up | exact dry-run s | "
            "trust dry-run s | compute speed-up | cp+fsync s | reflink fs: exact s | trust s | speed-up |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, tr in results["tools"].items():
        ex = tr.get("retrofit_trust", {}).get("extra", {})
        k, n = ex.get("chunks_from_page_stats"), ex.get("chunks")
        e, t = _median(tr, "retrofit"), _median(tr, "retrofit_trust")
        ed, td = _median(tr, "retrofit_dry"), _median(tr, "retrofit_trust_dry")
        sp, spd = _ratio(e, t), _ratio(ed, td)
        er, trr = _median(tr, "retrofit_reflink"), _median(tr, "retrofit_trust_reflink")
        spr = _ratio(er, trr)
        out.append(f"| {name} | {f'{k}/{n}' if n else '-'} | {fmt_s(e)} | {fmt_s(t)} | "
                   f"{f'{sp:.1f}x' if sp else '-'} | {fmt_s(ed)} | {fmt_s(td)} | {f'{spd:.1f}x' if spd else '-'} | "
                   f"{fmt_s(_median(tr, 'cp_fsync'))} | {fmt_s(er)} | {fmt_s(trr)} | {f'{spr:.1f}x' if spr else '-'} |")
    out.append("")

    out += ["## Peak RSS", "",
            "\"retrofit at start\": the exact retrofit's resident memory as its timed part began "
            "(interpreter, pyarrow and pageindex loaded, a tiny warm-up file retrofitted): the part of "
            "its peak that does not depend on the file.", "",
            "| dataset | largest chunk | " + " | ".join(TOOL_LABELS[t] for t in RSS_TOOLS)
            + " | retrofit at start |", "| --- | ---: |" + " ---: |" * (len(RSS_TOOLS) + 1)]
    by_name = {d["name"]: d for d in results["datasets"]}
    for name, tr in results["tools"].items():
        cells = [fmt_mb(tr.get(t, {}).get("peak_rss")) for t in RSS_TOOLS]
        cells.append(fmt_mb(tr.get("retrofit", {}).get("extra", {}).get("rss_start")))
        out.append(f"| {name} | {fmt_mb(by_name[name]['largest_chunk'])} | " + " | ".join(cells) + " |")
    out.append("")

    out += ["## Index size", "",
            "| dataset | pageindex CI + OI | pageindex file growth | pyarrow CI + OI | Spark CI + OI | "
            "chunks with CI, pages (pageindex / pyarrow / Spark) |", "| --- | ---: | ---: | ---: | ---: | --- |"]
    for name, idx in results["index"].items():
        def tot(k):
            v = idx.get(k)
            return None if v is None else v["column_index_bytes"] + v["offset_index_bytes"]

        def detail(k):
            v = idx.get(k)
            if v is None:
                return "-"
            return f"{fmt_bytes(tot(k))} ({fmt_bytes(v['column_index_bytes'])} + {fmt_bytes(v['offset_index_bytes'])})"

        chunks = " / ".join(f"{idx[k]['chunks_with_column_index']}/{idx[k]['chunks']}" if k in idx else "-"
                            for k in ("retrofit", "pa_rewrite", "spark_rewrite"))
        chunks += "; pages " + " / ".join(str(idx[k].get("pages", "-")) if k in idx else "-"
                                          for k in ("retrofit", "pa_rewrite", "spark_rewrite"))
        if "retrofit" in idx and "pa_rewrite" in idx:
            same = idx["retrofit"].get("layout") == idx["pa_rewrite"].get("layout")
            chunks += "; same page layout as pyarrow's" if same else "; pyarrow's pages differ"
        growth = idx.get("retrofit", {}).get("growth")
        out.append(f"| {name} | {detail('retrofit')} | {fmt_bytes(growth)} | {detail('pa_rewrite')} | "
                   f"{detail('spark_rewrite')} | {chunks} |")
    out.append("")

    if results["queries"]:
        out += ["## Query effects (before -> after retrofit)", "",
                "Each query selects `id, u, <payload>`. Spark: numOutputRows of the \"Scan parquet\" node "
                "(rows left after row-group and ColumnIndex filtering, before Spark's Filter) and the "
                "query wall time (collect) in the local[1] session. DataFusion (1 partition, page index and "
                "pushdown on): pages pruned by the page index (of pages considered) and bytes_scanned. "
                "pageindex lookup: bytes read. Results are the same before and after (checked: result rows).", ""]
        rerun = results.get("queries_rerun")
        if rerun:
            out += [f"This section was rerun on its own on {rerun['date']} (git commit {rerun['git']}, "
                    f"`{rerun['command']}`); the other sections are from the run described above.", ""]
        out += [
                "| dataset | column | query | result rows | Spark scan rows | Spark s | DataFusion pages pruned | "
                "DataFusion bytes_scanned | lookup bytes read |",
                "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for name, qs in results["queries"].items():
            pairs: dict[tuple, dict] = {}
            for q in qs:
                pairs.setdefault((q["column"], q["query"]), {})[q["state"]] = q
            for (col, kind), pr in pairs.items():
                b, a = pr.get("before", {}), pr.get("after", {})

                def arrow(fn):
                    return f"{fn(b)} -> {fn(a)}"

                def df_pages(q):
                    df = q.get("df") or {}
                    tot = df.get("page_index_pages_pruned_total")
                    return "-" if df.get("page_index_pages_pruned") is None else \
                        f"{df['page_index_pages_pruned']}/{tot}"

                rows_b = (b.get("df") or {}).get("result_rows")
                rows_a = (a.get("df") or {}).get("result_rows")
                same = rows_b == rows_a == b.get("lookup_rows") == a.get("lookup_rows")
                out.append(
                    f"| {name} | {col} | {kind} | {rows_a}{'' if same else ' (MISMATCH: ' + str([rows_b, b.get('lookup_rows'), a.get('lookup_rows')]) + ')'} | "
                    f"{arrow(lambda q: format(q['spark_scan_rows'], ',') if 'spark_scan_rows' in q else '-')} | "
                    f"{arrow(lambda q: fmt_s(q.get('spark_seconds')))} | {arrow(df_pages)} | "
                    f"{arrow(lambda q: fmt_bytes((q.get('df') or {}).get('bytes_scanned')))} | "
                    f"{arrow(lambda q: fmt_bytes(q.get('lookup_bytes_read')))} |")
        out.append("")

    if results["scale"]:
        out += ["## Scale cases (each at half and full size; time ratio ~2 = linear, ~4 = quadratic)", "",
                "| case | size | input | seconds | rate | peak RSS | full / half time |",
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for row in results["scale"]:
            for n, r in sorted(row["sizes"].items(), key=lambda kv: int(kv[0])):
                if not r.get("ok"):
                    out.append(f"| {row['case']} | {int(n):,} {row['unit']} | {fmt_bytes(r.get('input_bytes'))} | "
                               f"FAILED | - | - | - |")
                    continue
                secs = r.get("seconds")
                rate = f"{r['files_per_s']:.0f} files/s" if r.get("files_per_s") else \
                    (f"{r['input_bytes'] / MB / secs:.0f} MB/s" if secs else "-")
                per = f"{secs / int(n) * 1000:.2f} ms per {row['unit'].rstrip('s')}" if secs else "-"
                rate = f"{rate}; {per}"
                extra = f", {r['pages']:,} pages" if r.get("pages") and row["unit"] != "pages" else ""
                ratio = f"{row['ratio']:.2f}" if row.get("ratio") and int(n) == max(map(int, row["sizes"])) else ""
                out.append(f"| {row['case']} | {int(n):,} {row['unit']}{extra} | {fmt_bytes(r.get('input_bytes'))} | "
                           f"{fmt_s(secs)} | {rate} | {fmt_mb(r.get('peak_rss'))} | {ratio} |")
        out += ["", *[f"- {row['case']}: {row['what']}" for row in results["scale"]], ""]
        jobs = [r for row in results["scale"] if row["case"] == "files" for r in row["sizes"].values()]
        if jobs:
            out.append("The files case runs `pageindex.job.spark.main(['--input', DIR, '--output', OUT])` with a "
                       f"local[2] session pinned to CPUs {jobs[0].get('cpus')}; seconds exclude the "
                       "session start; its peak RSS is the sum of VmHWM over the driver's process tree (Python "
                       "driver, JVM, Python workers) read just before the session stops.")
            out.append("")

    if results.get("objstore"):
        out += objstore_section(results["objstore"])

    if results.get("bloom"):
        out += bloom_section(results["bloom"])

    if results.get("planning"):
        out += planning.section(results["planning"])

    if results.get("cold_start"):
        out += ["## Cold start", "", cold_start.report("Spark-like file, exact dry run", results["cold_start"])]

    if results.get("engines"):
        from bench import engines  # here: bench.engines imports this module's formats

        out += engines.section(results["engines"])

    rows = checks(results)
    out += [TARGETS_HEADING, "",
            "Verdicts on wall time (the targets as stated) and, for the speed targets, on CPU time, "
            "which a busy shared machine disturbs much less.", "",
            "| target | dataset | measured (wall) | verdict | on CPU time | CPU verdict |",
            "| --- | --- | --- | --- | --- | --- |"]
    out += [f"| {r['target']} | {r['dataset']} | {r['shown']} | {_verdict(r['ok'])} | "
            f"{r.get('cpu_shown', '')} | {_verdict(r['cpu_ok']) if 'cpu_ok' in r else ''} |" for r in rows]
    out.append("")

    summary = ["", "=== pageindex bench summary ==="]
    for name, tr in results["tools"].items():
        r = _median(tr, "retrofit")
        parts = [f"{name:<22}"]
        if r:
            parts.append(f"retrofit {sizes[name] / MB / r:7.0f} MB/s")
        for t, label in (("read_table", "read"), ("pa_rewrite", "pa-rw"), ("spark_rewrite", "spark-rw")):
            m = _median(tr, t)
            parts.append(f"{label} {sizes[name] / MB / m:6.0f}" if m else f"{label} -")
        summary.append("  ".join(parts))
    targets: dict[str, list] = {}
    for r in rows:
        targets.setdefault(r["target"], []).append(r)
    for target, rs in targets.items():
        verdicts = [r["ok"] for r in rs if r["ok"] is not None]
        overall = "n/a" if not verdicts else ("PASS" if all(verdicts) else "FAIL")
        bad = [f"{r['dataset']} {r['shown']}" for r in rs if r["ok"] is False]
        line = f"{overall:4} {target}" + (f"  (failing: {'; '.join(bad)})" if bad else "")
        cpu = [r["cpu_ok"] for r in rs if r.get("cpu_ok") is not None]
        if cpu:
            line += f"  [on CPU time: {'PASS' if all(cpu) else 'FAIL'}]"
        summary.append(line)
    c = contention(results)
    if c:
        summary.append(f"contention: pyarrow read_table wall/CPU = {c:.1f} (about 1 on a free core)")
    for row in results.get("scale", []):
        if row.get("ratio"):
            summary.append(f"scale {row['case']}: full/half time {row['ratio']:.2f}")
    return "\n".join(out), "\n".join(summary)


def splice_bloom(text: str, section: dict, source: str) -> str:
    """RESULTS.md's text with its bloom section replaced by `section`'s, marked as a separate run
    with its own verdict."""
    check = bloom_check(section)
    lines = bloom_section(section)
    lines[1:1] = ["", f"From a separate `{source}` on {datetime.date.today().isoformat()}, not the `make bench` "
                  f"run above. Target: {check['target']}: {check['shown']} wall ({_verdict(check['ok'])}), "
                  f"{check['cpu_shown']} CPU ({_verdict(check['cpu_ok'])})."]
    return _splice(text, BLOOM_HEADING, lines, (TARGETS_HEADING,))


def splice_objstore(text: str, section: dict, source: str) -> str:
    """RESULTS.md's text with its object-store section replaced by `section`'s, marked as a separate run."""
    lines = objstore_section(section)
    lines[1:1] = ["", f"From a separate `{source}` on {datetime.date.today().isoformat()}, not the `make bench` "
                  "run above."]
    return _splice(text, OBJSTORE_HEADING, lines, (BLOOM_HEADING, TARGETS_HEADING))


def splice_planning(text: str, section: dict, source: str) -> str:
    """RESULTS.md's text with its planning section replaced by `section`'s, marked as a separate run."""
    lines = planning.section(section)
    lines[1:1] = ["", f"From a separate `{source}` on {datetime.date.today().isoformat()}, not the `make bench` "
                  "run above."]
    return _splice(text, planning.HEADING, lines, (TARGETS_HEADING,))


def splice_engines(text: str, section: dict, source: str) -> str:
    """RESULTS.md's text with its engines section replaced by `section`'s, marked as a separate run."""
    from bench import engines  # here: bench.engines imports this module's formats

    lines = engines.section(section)
    lines[1:1] = ["", f"From a separate `{source}` on {datetime.date.today().isoformat()}, not the `make bench` "
                  "run above."]
    return _splice(text, engines.HEADING, lines, (TARGETS_HEADING,))


def _splice(text: str, heading: str, lines: list[str], before: tuple[str, ...]) -> str:
    """`text` with the section under `heading` replaced by `lines` or, when it has none, `lines`
    inserted ahead of the first of the `before` headings found (else at the end): the full run's
    raw results are not kept, so the rest of the file cannot be rendered again."""
    old = text.splitlines()
    start = next((i for i, line in enumerate(old) if line.startswith(heading)), None)
    if start is None:
        start = end = next((i for b in before for i, line in enumerate(old) if line.startswith(b)), len(old))
    else:
        end = next((i for i in range(start + 1, len(old)) if old[i].startswith("## ")), len(old))
    return "\n".join(old[:start] + lines + old[end:]) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.splitlines()[2:4]))
    parser.add_argument("--bloom", type=Path, help="bench.bloom's --json output")
    parser.add_argument("--objstore", type=Path, help="bench.objstore's --json output")
    parser.add_argument("--planning", type=Path, help="bench.planning's --json output")
    parser.add_argument("--engines", type=Path, help="bench.engines' --json output")
    parser.add_argument("--results", type=Path, default=Path(__file__).parent / "RESULTS.md")
    args = parser.parse_args(argv)
    if args.bloom is None and args.objstore is None and args.planning is None and args.engines is None:
        parser.error("give --bloom, --objstore, --planning or --engines (or several)")
    text = args.results.read_text()
    if args.objstore is not None:
        text = splice_objstore(text, json.loads(args.objstore.read_text()), "python -m bench.objstore --rounds 3")
    if args.bloom is not None:
        text = splice_bloom(text, json.loads(args.bloom.read_text()), "python -m bench.bloom")
    if args.planning is not None:
        text = splice_planning(text, json.loads(args.planning.read_text()), "python -m bench.planning")
    if args.engines is not None:
        text = splice_engines(text, json.loads(args.engines.read_text()), "python -m bench.engines")
    args.results.write_text(text)


if __name__ == "__main__":
    main()
