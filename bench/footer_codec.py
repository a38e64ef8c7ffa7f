"""Footer codec bench: decode_footer and build_tail of source trees side by side, on the footers of
wide files, in subprocesses over interleaved rounds.

    python -m bench.footer_codec --trees base=/path/to/tree,new=. [--rounds 5] [--files PATH,...]

Each subprocess imports one tree's pageindex, decodes each file's footer (decode_footer) and
builds its tail (build_tail: every chunk gets both indexes, as a retrofit of a file without them
does), each once untimed and then RUNS times, and reports the medians; "decode+stats" also reads
every chunk's Statistics (as index.chunk_stats does in a retrofit), "decode+use" every struct of
the decoded footer (what a decode on first use would defer). The table gives the median over
rounds, and each tree's time over the first tree's. Times are the main thread's CPU time (the
machine's other load shows less in it than in wall time). The tails must be byte for byte the same.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data"
RUNS = 5
KEYS = ("decode", "decode+stats", "decode+use", "encode")
DEFAULT_FILES = ("wide-40MB-e902e47b66.parquet", "wide-1GB-758cbebdeb.parquet",
                 "scale-v1-columns-2000.parquet")

# Run in the subprocess with PYTHONPATH set to one tree: no import from this tree's bench.
_WORKER = """
import gc, hashlib, json, statistics, struct, sys, time
from pageindex.format.footer import decode_footer
from pageindex.format.parquet_thrift import ColumnChunk, ColumnMetaData, FileMetaData, RowGroup, Statistics
from pageindex.format.thrift import Struct, TList
from pageindex.index.tail_writer import ChunkIndexes, build_tail

def use(value):
    if isinstance(value, Struct):
        for f in value.fields:
            use(f.value)
    elif isinstance(value, TList):
        for item in value.items:
            use(item)

def stats(footer):
    for group in footer.metadata.get(FileMetaData.ROW_GROUPS).items:
        for cc in group.get(RowGroup.COLUMNS).items:
            found = cc.get(ColumnChunk.META_DATA).get(ColumnMetaData.STATISTICS)
            if found is not None:
                found.has(Statistics.MIN_VALUE)

def timed(action, runs):
    times = []
    for _ in range(runs):
        gc.collect()
        gc.disable()  # as a retrofit runs: the collector paused throughout
        start = time.thread_time()
        action()
        times.append(time.thread_time() - start)
        gc.enable()
    return statistics.median(times)

out = {}
for path in sys.argv[2:]:
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        f.seek(size - 8)
        (n,) = struct.unpack("<I", f.read(4))
        f.seek(size - 8 - n)
        raw = f.read(n)
    footer = decode_footer(raw, size, path)
    indexes = [[ChunkIndexes(b"c" * (17 + c % 5), b"o" * (11 + r)) for c in range(len(row))]
               for r, row in enumerate(footer.chunks)]
    tail = build_tail(footer, indexes, "bench", size)
    runs = int(sys.argv[1])
    out[path] = {
        "footer_bytes": n,
        "decode": timed(lambda: decode_footer(raw, size, path), runs),
        "decode+stats": timed(lambda: stats(decode_footer(raw, size, path)), runs),
        "decode+use": timed(lambda: use(decode_footer(raw, size, path).metadata), runs),
        "encode": timed(lambda: build_tail(footer, indexes, "bench", size), runs),
        "tail_sha256": hashlib.sha256(tail).hexdigest(),
    }
print(json.dumps(out))
"""


def run_tree(tree: str, files: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
    # -P: without it `-c` puts the working directory first on sys.path, and this tree's pageindex
    # would shadow the one PYTHONPATH names.
    done = subprocess.run([sys.executable, "-P", "-c", _WORKER, str(RUNS), *files], env=env, check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.footer_codec", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trees", default="new=.", help="name=path,... (the first is the reference)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--files", help="Parquet files, comma-separated (default: the wide bench files "
                    "in bench/data)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    trees = dict(t.split("=", 1) for t in args.trees.split(","))
    files = args.files.split(",") if args.files else [str(DATA / f) for f in DEFAULT_FILES]
    rounds: dict[str, list[dict]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():  # interleaved: each round runs every tree once
            rounds[name].append(run_tree(tree, files))
    load = os.getloadavg()
    names = list(trees)
    figures = {}
    for path in files:
        row = {}
        for name in names:
            runs = [r[path] for r in rounds[name]]
            row[name] = {k: statistics.median(r[k] for r in runs) for k in KEYS}
            row[name]["tail_sha256"] = sorted({r["tail_sha256"] for r in runs})
            row[name]["footer_bytes"] = runs[0]["footer_bytes"]
        figures[path] = row
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {args.rounds} rounds, median of {RUNS} runs "
          "each; thread CPU time")
    print("| file | footer | tree | " + " | ".join(f"{k} ms" for k in KEYS) + " | "
          + " | ".join(f"{k} x" for k in KEYS) + " |")
    print("|---|---:|---|" + "---:|" * (2 * len(KEYS)))
    for path, row in figures.items():
        ref = row[names[0]]
        for name in names:
            r = row[name]
            print(f"| {Path(path).name} | {r['footer_bytes']:,} | {name} | "
                  + " | ".join(f"{1e3 * r[k]:.1f}" for k in KEYS) + " | "
                  + " | ".join(f"{ref[k] / r[k]:.2f}" for k in KEYS) + " |")
        hashes = {h for name in names for h in row[name]["tail_sha256"]}
        if len(hashes) != 1:
            print(f"TAILS DIFFER for {path}: {row}", file=sys.stderr)
            return 1
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"load": load, "figures": figures}, f, indent=2, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
