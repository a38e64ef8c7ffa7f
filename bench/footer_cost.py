"""What keeping the original footer costs: its bytes (FileMetaData + 8), once per indexed file.

`python -m bench.footer_cost [--corpus DIR] [--kinds numeric,wide,...] [--size 200MB] [--json PATH]`
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import struct
import sys
import tempfile
from dataclasses import asdict, dataclass

from pageindex.retrofit import Status, retrofit

INDEXED = (Status.INDEXED, Status.REPAIRED)


@dataclass(frozen=True)
class Cost:
    """One file: its size, the kept footer's bytes and what the retrofit appended after it."""

    name: str
    size: int
    footer_bytes: int  # FileMetaData + its length + "PAR1": what a rewrite would not have kept
    appended: int


def footer_bytes(path: str) -> int:
    """The original footer's bytes, read from the file's last 8 bytes (length + magic)."""
    with open(path, "rb") as f:
        f.seek(-8, os.SEEK_END)
        (length,) = struct.unpack("<I", f.read(4))
    return length + 8


def measure(path: str, name: str, scratch: str) -> Cost | None:
    """Retrofit `path` into `scratch`; None when the file gets no index (refused, already indexed)."""
    out = os.path.join(scratch, "out.parquet")
    try:
        result = retrofit(path, out)
    except Exception:  # noqa: BLE001 - the corpus holds files pageindex refuses: not indexed, no cost
        return None
    if result.status not in INDEXED:
        return None
    size = os.path.getsize(path)
    cost = Cost(name, size, footer_bytes(path), os.path.getsize(out) - size)
    os.remove(out)
    return cost


def corpus_files(corpus: str) -> list[tuple[str, str]]:
    """The corpus's indexable candidates (CATALOG.tsv's category), as (path, name)."""
    with open(os.path.join(corpus, "CATALOG.tsv"), newline="", encoding="utf-8", errors="replace") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return [(os.path.join(corpus, r["path"]), r["path"]) for r in rows if r.get("category") == "candidate"]


def dataset_files(kinds: list[str], size: str) -> list[tuple[str, str]]:
    """bench.datasets' files of these kinds (generated and cached on first use)."""
    from bench.datasets import ensure, spec_for
    from bench.run import parse_size

    target = parse_size(size)
    return [(ensure(spec_for(kind, target), log=lambda *_: None).path, f"{kind} {size}") for kind in kinds]


def summary(costs: list[Cost]) -> dict:
    sizes = [c.footer_bytes for c in costs]
    return {"files": len(costs), "median_bytes": statistics.median(sizes) if sizes else 0,
            "max_bytes": max(sizes, default=0), "total_bytes": sum(sizes),
            "data_bytes": sum(c.size for c in costs)}


def table(costs: list[Cost]) -> str:
    lines = ["| file | size | kept footer | share | appended index |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {c.name} | {c.size:,} | {c.footer_bytes:,} | {100 * c.footer_bytes / c.size:.3f}% | "
              f"{c.appended:,} |" for c in costs]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.footer_cost", description=__doc__)
    ap.add_argument("--corpus", default=os.path.join("..", "shared", "corpus"),
                    help="a corpus with CATALOG.tsv (default ../shared/corpus); '' to leave it out")
    ap.add_argument("--kinds", default="", help="bench datasets too, e.g. numeric,strings_low,nested,v2,wide")
    ap.add_argument("--size", default="200MB", help="their size (default 200MB)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    groups = {}
    if args.corpus:
        groups["corpus candidates"] = corpus_files(args.corpus)
    if args.kinds:
        groups[f"bench datasets ({args.size})"] = dataset_files(args.kinds.split(","), args.size)
    out = {}
    with tempfile.TemporaryDirectory() as scratch:
        for group, files in groups.items():
            costs = [c for path, name in files if (c := measure(path, name, scratch))]
            out[group] = {"summary": summary(costs), "files": [asdict(c) for c in costs]}
            s = out[group]["summary"]
            print(f"{group}: {s['files']} indexed files, kept footer median {s['median_bytes']:,.0f} B, "
                  f"max {s['max_bytes']:,} B, {s['total_bytes']:,} B in all "
                  f"({100 * s['total_bytes'] / max(1, s['data_bytes']):.3f}% of {s['data_bytes']:,} B)")
            if group.startswith("bench"):
                print(table(costs))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
