"""Wide-file CPU bench: retrofit dry runs (exact, trusted page stats) of source trees side by side,
and pyarrow read_table on the same local files, in subprocesses over interleaved rounds.

    python -m bench.wide_cpu [--trees base=/path/to/tree,new=.] [--rounds 5] [--profile]
                             [--files PATH,...] [--tools exact,trust]

Each subprocess imports one tree's pageindex, runs once untimed (imports, caches), then reports
the median wall and main-thread CPU time of five more runs and its peak RSS (imports included);
the table gives the median over rounds. --profile instead splits one exact run of this tree into
Thrift decode, Thrift encode, Arrow's decode (read_row_group) and the rest, and times its stages.
Files: bench.objstore's wide file (240 columns x 4 row groups) and a 1,200-column one, both
cached in bench/data/, or the Parquet files given with --files (e.g. bench.run's cached 200 MB
datasets, to compare trees on local disk); --tools limits the retrofit modes.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.objstore import DATA_DIR, KINDS, ensure

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ("pyarrow", "exact", "trust")
TIMED_RUNS = 5

# Run in the subprocess with PYTHONPATH set to one tree: no import from this tree's bench.
_WORKER = """
import json, resource, statistics, sys, time
tool, path, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
if tool == "pyarrow":
    import pyarrow.parquet as pq
    action = lambda: pq.read_table(path)
else:
    from pageindex.retrofit import retrofit
    action = lambda: retrofit(path, dry_run=True, trust_page_stats=tool == "trust")
action()
walls, cpus = [], []
for _ in range(runs):
    wall, cpu = time.perf_counter(), time.thread_time()
    action()
    cpus.append(time.thread_time() - cpu)
    walls.append(time.perf_counter() - wall)
print(json.dumps({"wall": statistics.median(walls), "cpu": statistics.median(cpus),
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10}))
"""


def wider_file() -> Path:
    """1,200 int64 columns x 4 row groups of 1,000 rows (snappy, 64 KiB pages, no page index)."""
    path = DATA_DIR / "wide-cpu-1200-v1.parquet"
    if not path.exists():
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(25)
        table = pa.table({f"c{i:04d}": rng.integers(0, 1 << 62, 4_000) for i in range(1_200)})
        tmp = path.with_suffix(".tmp")
        pq.write_table(table, tmp, row_group_size=1_000, data_page_size=64 << 10, write_page_index=False,
                       compression="snappy")
        tmp.rename(path)
    return path


def files() -> dict[str, Path]:
    return {"240 columns x 4 row groups": ensure(KINDS["wide"]), "1,200 columns x 4 row groups": wider_file()}


def _measure(tree: Path, tool: str, path: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", _WORKER, tool, str(path), str(TIMED_RUNS)], env=env,
                         capture_output=True, text=True, check=True, cwd=tree)
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(trees: dict[str, Path], rounds: int, datasets: dict[str, Path], tools: tuple[str, ...]) -> list[str]:
    """The markdown table: per file and tool, the median wall (and CPU) time of each tree."""
    load_start = os.getloadavg()
    runs: dict[tuple[str, str, str], list[dict]] = {}
    for _ in range(rounds):
        for label, path in datasets.items():
            for tool in ("pyarrow", *tools):
                for name, tree in trees.items() if tool != "pyarrow" else [("pyarrow", ROOT)]:
                    runs.setdefault((label, tool, name), []).append(_measure(tree, tool, path))
    load_end = os.getloadavg()
    lines = [f"{rounds} rounds interleaved, medians; load average {load_start[0]:.1f} at start, "
             f"{load_end[0]:.1f} at end", "",
             "| file | tool | " + " | ".join(trees) + " |", "|---|---|" + "---:|" * len(trees)]
    for label in datasets:
        base = statistics.median(r["wall"] for r in runs[(label, "pyarrow", "pyarrow")])
        lines.append(f"| {label} | pyarrow read_table | {base:.3f} s" + " |" * len(trees))
        for tool in tools:
            cells = []
            for name in trees:
                rs = runs[(label, tool, name)]
                wall, cpu = statistics.median(r["wall"] for r in rs), statistics.median(r["cpu"] for r in rs)
                rss = statistics.median(r["rss"] for r in rs) / (1 << 20)
                cells.append(f"{wall:.3f} s ({wall / base:.1f}x), CPU {cpu:.3f} s, {rss:.0f} MiB")
            lines.append(f"| {label} | retrofit {tool} | " + " | ".join(cells) + " |")
    return lines


# Where one exact run's time goes. SPLIT does not overlap (Thrift calls never nest in Arrow's
# decode or in each other); STAGES are inclusive, each holding its share of the SPLIT rows.
SPLIT = (("pageindex.format.thrift", "decode_struct", "Thrift decode (footer, page headers)"),
         ("pageindex.format.thrift", "encode_struct", "Thrift encode (indexes, footers)"),
         ("pageindex.format.index_blocks", "column_index_bytes", "Thrift encode (indexes, footers)"),
         ("pageindex.format.index_blocks", "offset_index_bytes", "Thrift encode (indexes, footers)"))
STAGES = (("pageindex.format.footer", "read_footer", "read and decode the footer"),
          ("pageindex.scan.page_walk", "walk_chunk", "walk chunks (read, page headers)"),
          ("pageindex.scan.page_walk", "decode_page_header", "  of which page headers"),
          ("pageindex.scan.values", "synthesize_chunks", "synthesize the groups' files"),
          ("pageindex.scan.values", "decode_columns", "decode the groups (Arrow, opening the files)"),
          ("pageindex.scan.chunk_scan", "_finish", "levels and values from the decoded arrays"),
          ("pageindex.index.builder", "page_bounds", "page bounds (index kinds)"),
          ("pageindex.index.builder", "column_index_block", "ColumnIndex blocks"),
          ("pageindex.index.builder", "offset_index", "OffsetIndex blocks"),
          ("pageindex.index.tail_writer", "build_tail", "build the tail (encode indexes, footer)"))


def profile(path: Path) -> list[str]:
    """One exact dry run of this tree: wall time in the SPLIT and STAGES functions (in process,
    wrapped where every pageindex module refers to them)."""
    import importlib

    from pageindex.retrofit import retrofit

    spent: dict[str, float] = {}

    def timed(label: str, fn):
        def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + time.perf_counter() - started
        return wrapper

    patches = [(pq.ParquetFile, "read_row_group", pq.ParquetFile.read_row_group, "Arrow decode (read_row_group)")]
    for module_name, name, label in SPLIT + STAGES:
        fn = getattr(importlib.import_module(module_name), name)
        patches += [(module, name, fn, label) for module in list(sys.modules.values())
                    if getattr(module, "__name__", "").startswith("pageindex") and getattr(module, name, None) is fn]
    for owner, name, fn, label in patches:
        setattr(owner, name, timed(label, fn))
    try:
        retrofit(str(path), dry_run=True)
        spent.clear()
        started = time.perf_counter()
        retrofit(str(path), dry_run=True)
        total = time.perf_counter() - started
    finally:
        for owner, name, fn, _ in patches:
            setattr(owner, name, fn)
    split = list(dict.fromkeys(label for _, _, label in SPLIT)) + ["Arrow decode (read_row_group)"]
    rest = total - sum(spent.get(label, 0.0) for label in split)
    rows = [(label, spent.get(label, 0.0)) for label in split] + [("rest: Python outside those", rest)]
    rows += [("stage: " + label, spent.get(label, 0.0)) for _, _, label in STAGES]
    return [f"exact dry run of {path.name}: {total:.3f} s, load average {os.getloadavg()[0]:.1f}"] + [
        f"  {label}: {seconds:.3f} s ({seconds / total:.0%})" for label, seconds in rows]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", default=f"this={ROOT}", help="NAME=PATH,... source trees to compare")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="split one exact run of this tree instead")
    parser.add_argument("--files", help="PATH,... Parquet files to run on instead of the two wide ones")
    parser.add_argument("--tools", default=",".join(TOOLS[1:]), help="retrofit modes: exact,trust")
    args = parser.parse_args(argv)
    datasets = files() if args.files is None else {Path(p).name: Path(p).resolve() for p in args.files.split(",")}
    if args.profile:
        for path in datasets.values():
            print("\n".join(profile(path)))
        return
    trees = {name: Path(path).resolve() for name, path in (t.split("=", 1) for t in args.trees.split(","))}
    tools = tuple(args.tools.split(","))
    if not set(tools) <= set(TOOLS[1:]):
        parser.error(f"--tools takes {','.join(TOOLS[1:])}")
    print("\n".join(compare(trees, args.rounds, datasets, tools)))


if __name__ == "__main__":
    main()
