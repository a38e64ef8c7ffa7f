"""Bloom filter cost and effect (issue 27): `python -m bench.bloom [--rows N] [--json PATH]`.

Time (wall and CPU) and peak RSS of an exact retrofit without filters, with filters on every
eligible column, with auto (both on the compiled path, the default, and on the numpy path for
comparison) and with each column alone, each run in its own process, the runs interleaved round by
round; a fresh process's first filters against a warm process's; filter bytes against pyarrow's
for the same values and fpp; per column, the row groups filters rule out for present and absent
values beyond what footer statistics do (the measurements behind auto's rule); a point lookup of
an absent id before and after; the reference: pyarrow's own writer's CPU cost of the same filters
per value against build_filter's, on the same arrays (`--reference-only` runs just that).
`--trees a=PATH,b=PATH` compares the filters' cost of source trees side by side instead. Prints
the markdown section (bench/report.py's bloom section) that bench/run.py puts in RESULTS.md.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench import report
from pageindex.format.parquet_thrift import Type
from pageindex.index.bloom.blob import build_filter
from pageindex.index.bloom.chunk_hashes import chunk_hashes
from pageindex.index.bloom.path import AUTO, COMPILED, ENV, NUMPY
from pageindex.index.bloom.sbbf import DEFAULT_MAX_BYTES, MAX_BYTES, optimal_bytes

ROWS = 2_000_000
ROW_GROUPS = 8
FPP = 0.01
ROUNDS = 3
PROBES = 200  # present and absent values probed per column
_CHILD = """
import json, resource, sys, time
from pageindex.retrofit import retrofit
spec = json.loads(sys.argv[3])
if sys.argv[4] == "warm":  # a long-lived process (a job's worker, a CLI run over many files): one file done before
    retrofit(sys.argv[1], sys.argv[2] + ".first", bloom_filter=spec, bloom_fpp={fpp})
started, cpu = time.perf_counter(), time.process_time()
result = retrofit(sys.argv[1], sys.argv[2], bloom_filter=spec, bloom_fpp={fpp})
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"seconds": time.perf_counter() - started, "cpu": time.process_time() - cpu,
                  "rss": usage.ru_maxrss << 10, "filters": sum(c.bloom_filter > 0 for c in result.chunks),
                  "filter_bytes": sum(c.bloom_filter for c in result.chunks),
                  "columns": sorted({{c.column for c in result.chunks if c.bloom_filter}}),
                  "ndv": {{c.column: c.bloom_ndv for c in result.chunks if c.row_group == 0 and c.bloom_filter}},
                  "path": "compiled" if "pageindex.index.bloom.kernel" in sys.modules else "numpy"}}))
"""
# A fresh process's first filters (one of each physical type, tiny): pageindex's import, then the
# first filters (loading the kernel's extension module on the compiled path), then the same filters
# again in the now warm process.
_STARTUP = """
import json, time
import numpy as np
import pyarrow as pa
started = time.perf_counter()
from pageindex.index.bloom.blob import build_filter
from pageindex.format.parquet_thrift import Type
imported = time.perf_counter()
def filters():
    build_filter(pa.array(np.arange(10, dtype=np.int64)), Type.INT64)
    build_filter(pa.array(np.arange(10, dtype=np.int32)), Type.INT32)
    build_filter(pa.array(["a", "bc"]), Type.BYTE_ARRAY)
    build_filter(pa.array([b"ab"], pa.binary(2)), Type.FIXED_LEN_BYTE_ARRAY)
filters()
first = time.perf_counter()
filters()
print(json.dumps({"import": imported - started, "first": first - imported, "warm": time.perf_counter() - first}))
"""
# What each column stands for when auto's rule is measured.
COLUMNS = {
    "id": "unique int64, unsorted (an order id)",
    "user": "strings, each value ~once in the file (a user name)",
    "ts": "timestamps, sorted (statistics prune already)",
    "amount": "doubles, unique (rarely looked up by equality)",
    "rep5": "int64, each value ~5 times in the file, spread uniformly",
    "mid": "int64, each value ~20 times in the file, spread uniformly",
    "low": "int32, 1000 values, dictionary-encoded",
    "country": "5 strings, dictionary-encoded",
}


def dataset(rows: int) -> pa.Table:
    rng = np.random.default_rng(27)
    ids = rng.permutation(rows).astype(np.int64) * 2  # even: odd ids are absent
    return pa.table({
        "id": ids,
        "user": pa.array([f"user-{x:09d}" for x in rng.integers(0, rows, rows)]),
        "ts": pa.array(np.arange(rows, dtype=np.int64) * 1000, pa.timestamp("us")),
        "amount": rng.normal(100, 30, rows),
        "rep5": rng.integers(0, rows // 5, rows) * 2,
        "mid": rng.integers(0, rows // 20, rows) * 2,
        "low": rng.integers(0, 1000, rows).astype(np.int32) * 2,
        "country": pa.array(rng.choice(["DE", "FR", "US", "JP", "BR"], rows)),
        "flag": rng.integers(0, 2, rows) == 1,
    })


def retrofit_once(src: Path, dst: Path, spec: object, path: str = AUTO, warm: bool = False,
                  tree: Path | None = None) -> dict:
    """One retrofit in its own process, on the filter path `path` (PAGEINDEX_BLOOM_KERNEL); warm:
    timed after a first, untimed retrofit of the same file in that process; tree: the source tree
    whose pageindex it imports (this one by default)."""
    args = [str(src), str(dst), json.dumps(spec), "warm" if warm else "cold"]
    env = os.environ | {ENV: path} | ({"PYTHONPATH": str(tree)} if tree else {})
    proc = subprocess.run([sys.executable, "-c", _CHILD.format(fpp=FPP), *args],
                          capture_output=True, text=True, check=True, env=env, cwd=tree)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def startup_seconds(path: str) -> dict[str, float]:
    """Seconds a fresh process on filter path `path` takes to import pageindex's filter code, to
    build its first filters of each kind, and to build them again (warm)."""
    env = os.environ | {ENV: path}
    proc = subprocess.run([sys.executable, "-c", _STARTUP], capture_output=True, text=True, check=True, env=env)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def startup(rounds: int) -> dict[str, dict[str, float]]:
    """Per path (compiled, numpy): the medians over `rounds` fresh processes, paths interleaved."""
    got: dict[str, list[dict]] = {COMPILED: [], NUMPY: []}
    for _ in range(rounds):
        for path, runs in got.items():
            runs.append(startup_seconds(path))
    return {path: {key: statistics.median(r[key] for r in runs) for key in runs[0]} for path, runs in got.items()}


def measure(src: Path, dst: Path, specs: dict[str, tuple[object, str, bool]], rounds: int) -> dict[str, dict]:
    """Median wall and CPU seconds per (spec, path, warm) over interleaved rounds (load changes
    between rounds hit every run alike), the largest peak RSS."""
    runs: dict[str, list[dict]] = {name: [] for name in specs}
    for _ in range(rounds):
        for name, (spec, path, warm) in specs.items():
            runs[name].append(retrofit_once(src, dst, spec, path, warm))
    out = {}
    for name, got in runs.items():
        out[name] = {**got[-1], "seconds": statistics.median(r["seconds"] for r in got),
                     "cpu": statistics.median(r["cpu"] for r in got), "rss": max(r["rss"] for r in got)}
        print(f"{name}: {out[name]['seconds']:.2f} s, CPU {out[name]['cpu']:.2f} s", flush=True)
    return out


def pyarrow_filter_bytes(table: pa.Table, path: Path, columns: list[str], group: int) -> int:
    options = {c: {"ndv": group, "fpp": FPP} for c in columns}
    pq.write_table(table, path, row_group_size=group, bloom_filter_options=options)
    meta = pq.ParquetFile(path).metadata
    return sum(meta.row_group(rg).column(c).bloom_filter_length or 0
               for rg in range(meta.num_row_groups) for c in range(meta.num_columns))


def pruning(table: pa.Table, path: Path, columns: list[str], group: int) -> dict[str, dict]:
    """Per column: the share of (row group, probe) pairs min/max statistics rule out, and the share
    the filters rule out on top, for present values and for absent ones (odd, where the data's
    integers are even)."""
    from pageindex.format.footer import read_footer
    from pageindex.index.bloom.blob import might_contain, read_filter
    from pageindex.io.storage import open_source

    rng = np.random.default_rng(28)
    out = {}
    with open_source(str(path)) as source:
        footer = read_footer(source)
        for name in columns:
            leaf = next(leaf for leaf in footer.leaves if leaf.dotted == name)
            column = table.column(name)
            if pa.types.is_timestamp(column.type):
                column = column.cast(pa.int64())  # as stored: the filter hashed the INT64
            values = column.to_pylist()
            present = [values[i] for i in rng.integers(0, len(values), PROBES)]
            kinds = {"present": present}
            if isinstance(present[0], int):
                kinds["absent"] = [v + 1 for v in present]
            row = {}
            for kind, probes in kinds.items():
                by_stats = by_filter = 0
                for rg, chunks in enumerate(footer.chunks):
                    bounds = pc.min_max(column.slice(rg * group, group)).as_py()
                    bloom = read_filter(source, *chunks[leaf.index].bloom_filter)
                    for probe in probes:
                        if not bounds["min"] <= probe <= bounds["max"]:
                            by_stats += 1
                        elif not might_contain(bloom, probe, leaf.physical_type):
                            by_filter += 1
                pairs = len(probes) * len(footer.chunks)
                row[kind] = {"stats": by_stats / pairs, "filter": by_filter / pairs}
            out[name] = row
    return out


@contextmanager
def filter_path(path: str):
    """Filters built in this process on `path` (pageindex.index.bloom.path reads ENV on every filter)."""
    before = os.environ.get(ENV)
    os.environ[ENV] = path
    try:
        yield
    finally:
        if before is None:
            del os.environ[ENV]
        else:
            os.environ[ENV] = before


def pyarrow_write_cpu(column: pa.ChunkedArray, group: int, ndv: int | None) -> tuple[float, int]:
    """CPU seconds pyarrow's writer takes for one column (no compression, dictionary or statistics,
    so what remains is encoding and, with `ndv`, the filters), and its filters' bytes."""
    options = {"bloom_filter_options": {"c": {"ndv": ndv, "fpp": FPP}}} if ndv else {}
    sink = pa.BufferOutputStream()
    cpu = time.process_time()
    pq.write_table(pa.table({"c": column}), sink, row_group_size=group, compression="none",
                   use_dictionary=False, write_statistics=False, **options)
    cpu = time.process_time() - cpu
    meta = pq.ParquetFile(pa.BufferReader(sink.getvalue())).metadata
    return cpu, sum(meta.row_group(rg).column(0).bloom_filter_length or 0 for rg in range(meta.num_row_groups))


def ours_cpu(column: pa.ChunkedArray, physical_type: int, group: int, path: str) -> tuple[float, int]:
    """CPU seconds build_filter (and serializing) takes for each row group's slice of the column
    on filter path `path`, and the filters' bytes."""
    with filter_path(path):
        cpu = time.process_time()
        blobs = [build_filter(column.slice(start, group), physical_type).to_bytes()
                 for start in range(0, len(column), group)]
        return time.process_time() - cpu, sum(len(b) for b in blobs)


def reference(table: pa.Table, src: Path, columns: list[str], group: int, rounds: int) -> dict[str, dict]:
    """Per column, nanoseconds of CPU per value: pyarrow's writer with filters minus without, for
    filters of the size ours start at (ndv chosen so pyarrow's OptimalNumOfBytes is our starting
    size; it folds by the same rule), against build_filter on each path, on the same row groups.
    Rounds interleaved after one untimed warm-up round (caches and allocations settled); medians."""
    schema = pq.ParquetFile(src).schema
    paths = [NUMPY, COMPILED]
    out = {}
    for name in columns:
        column = table.column(name)
        physical_type = getattr(Type, schema.column(table.column_names.index(name)).physical_type)
        ndv = chunk_hashes(column.slice(0, group), physical_type).inserted
        start = optimal_bytes(ndv, FPP, DEFAULT_MAX_BYTES)
        if optimal_bytes(ndv, FPP, MAX_BYTES) != start:  # pyarrow caps only at MAX_BYTES
            raise ValueError(f"{name}: pyarrow's filter for ndv {ndv} would not start at {start} bytes")
        runs: dict[str, list[float]] = {"pyarrow": [], **{path: [] for path in paths}}
        for timed in [False] + [True] * rounds:
            without, _ = pyarrow_write_cpu(column, group, None)
            with_filters, theirs = pyarrow_write_cpu(column, group, ndv)
            got = {path: ours_cpu(column, physical_type, group, path) for path in paths}
            if timed:
                runs["pyarrow"].append(with_filters - without)
                for path, (cpu, _) in got.items():
                    runs[path].append(cpu)
        out[name] = {"type": Type.name(physical_type), "values": len(column), "start_bytes": start,
                     "pyarrow_bytes": theirs, "our_bytes": got[paths[-1]][1],
                     **{f"{key}_ns": 1e9 * statistics.median(cpu) / len(column) for key, cpu in runs.items()}}
        print(f"reference {name}: " + ", ".join(f"{key} {out[name][f'{key}_ns']:.1f} ns/value" for key in runs),
              flush=True)
    return out


def lookup_effect(path: Path, absent: int) -> dict:
    from pageindex.query.lookup import lookup

    rows, stats = lookup(str(path), [("id", "=", absent)])
    return {"rows": rows.num_rows, "row_groups_read": stats.row_groups_read, "row_groups": stats.row_groups,
            "bytes_read": stats.bytes_read}


def datafusion_effect(path: Path, absent: int) -> dict:
    from datafusion import SessionContext

    ctx = SessionContext()
    ctx.register_parquet("t", str(path))
    plan = "\n".join(str(r["plan"]) for r in ctx.sql(f"EXPLAIN ANALYZE SELECT * FROM t WHERE id = {absent}")
                     .to_arrow_table().to_pylist())
    pruned = plan.split("row_groups_pruned_bloom_filter=", 1)[1].split(",", 1)[0] if "bloom_filter=" in plan else "?"
    scanned = plan.split("bytes_scanned=", 1)[1].split(",", 1)[0] if "bytes_scanned=" in plan else "?"
    return {"row_groups_pruned_bloom_filter": pruned.strip(), "bytes_scanned": scanned.strip()}


def run(rows: int, rounds: int) -> dict:
    table = dataset(rows)
    group = rows // ROW_GROUPS
    eligible = [name for name in table.column_names if name != "flag"]
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "in.parquet", Path(tmp) / "out.parquet"
        pq.write_table(table, src, row_group_size=group, write_page_index=False)
        # Unsuffixed runs take the default path (the compiled kernel); the numpy path beside them
        # for comparison. "warm": a second file in the same process, as a job's reused worker or a
        # CLI run over many files pays for it.
        specs: dict[str, tuple[object, str, bool]] = {
            "none": ("none", AUTO, False),
            "all eligible (numpy)": (eligible, NUMPY, False), "auto (numpy)": ("auto", NUMPY, False),
            "all eligible": (eligible, AUTO, False), "auto": ("auto", AUTO, False),
            "none, warm": ("none", AUTO, True),
            "all eligible (numpy), warm": (eligible, NUMPY, True), "all eligible, warm": (eligible, AUTO, True)}
        specs |= {f"+{name}": ([name], AUTO, False) for name in eligible}
        runs = measure(src, out, specs, rounds)
        first = startup(rounds)
        theirs = pyarrow_filter_bytes(table, Path(tmp) / "pyarrow.parquet", eligible, group)
        plain = Path(tmp) / "plain.parquet"
        retrofit_once(src, plain, "none")
        retrofit_once(src, out, eligible)
        effect = {name: {"pageindex": lookup_effect(path, rows + 1), "datafusion": datafusion_effect(path, rows + 1)}
                  for name, path in (("page index only", plain), ("page index + filters", out))}
        prune = pruning(table, out, eligible, group)
        ref = reference(table, src, eligible, group, rounds)
        return {"rows": rows, "row_groups": ROW_GROUPS, "input_bytes": src.stat().st_size, "fpp": FPP,
                "rounds": rounds, "runs": runs, "pyarrow_filter_bytes": theirs, "lookup": effect,
                "pruning": prune, "columns": COLUMNS, "startup": first, "reference": ref, "load_average": os.getloadavg()}


def run_reference(rows: int, rounds: int) -> dict:
    """The reference measurement alone, on the same file (`--reference-only`)."""
    table = dataset(rows)
    group = rows // ROW_GROUPS
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.parquet"
        pq.write_table(table, src, row_group_size=group, write_page_index=False)
        ref = reference(table, src, [name for name in table.column_names if name != "flag"], group, rounds)
    return {"rows": rows, "row_groups": ROW_GROUPS, "fpp": FPP, "rounds": rounds, "reference": ref,
            "load_average": os.getloadavg()}


def compare_trees(trees: dict[str, Path], rows: int, rounds: int) -> list[str]:
    """The filters' cost (CPU against none, fresh and warm, both paths) of source trees side by
    side on the same file, every run in its own process, trees and runs interleaved round by round.
    The compiled runs take each tree's default path (auto), so each tree's kernels must be built in
    place (`python setup.py build_ext --inplace` there); a tree whose runs fall back to numpy stops it."""
    table = dataset(rows)
    eligible = [name for name in table.column_names if name != "flag"]
    specs = {"none": ("none", AUTO, False), "all eligible, numpy": (eligible, NUMPY, False),
             "all eligible, compiled": (eligible, AUTO, False), "auto, compiled": ("auto", AUTO, False),
             "none, warm": ("none", AUTO, True), "all eligible, numpy, warm": (eligible, NUMPY, True),
             "all eligible, compiled, warm": (eligible, AUTO, True)}
    runs: dict[tuple[str, str], list[dict]] = {(t, s): [] for t in trees for s in specs}
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "in.parquet", Path(tmp) / "out.parquet"
        pq.write_table(table, src, row_group_size=rows // ROW_GROUPS, write_page_index=False)
        for _ in range(rounds):
            for name, (spec, path, warm) in specs.items():
                for tree, root in trees.items():
                    got = retrofit_once(src, out, spec, path, warm, root)
                    if "compiled" in name and got["path"] != COMPILED:
                        raise SystemExit(f"{root}: the compiled bloom kernel does not load there "
                                         "(build it: python setup.py build_ext --inplace)")
                    runs[(tree, name)].append(got)
    cpu = {key: statistics.median(r["cpu"] for r in got) for key, got in runs.items()}
    lines = [f"{rows:,} rows, {rounds} rounds, load average {os.getloadavg()[0]:.1f}; CPU s (x none)", "",
             "| run | " + " | ".join(trees) + " |", "|---|" + "---:|" * len(trees)]
    for name in specs:
        base = "none, warm" if name.endswith("warm") else "none"
        cells = [f"{cpu[(t, name)]:.2f} ({cpu[(t, name)] / cpu[(t, base)]:.2f}x)" for t in trees]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--json", type=Path, help="also write the results as JSON (bench/run.py reads it)")
    parser.add_argument("--reference-only", action="store_true",
                        help="only pyarrow's writer's filter cost against build_filter's")
    parser.add_argument("--trees", help="NAME=PATH,...: only the filters' cost of these source trees side "
                                        "by side (bench/RESULTS-bloom.md's comparisons against main)")
    args = parser.parse_args(argv)
    if args.trees:
        trees = {name: Path(path).resolve() for name, path in (t.split("=", 1) for t in args.trees.split(","))}
        print("\n".join(compare_trees(trees, args.rows, args.rounds)))
        return
    results = (run_reference if args.reference_only else run)(args.rows, args.rounds)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))
    print("\n".join(report.bloom_reference(results) if args.reference_only else report.bloom_section(results)))


if __name__ == "__main__":
    main()
