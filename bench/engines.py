"""What each engine gains from the index: `python -m bench.engines [--rows N] [--no-spark] [--json PATH]`.

The events lake (bench.engine_lake) written by pyarrow, Spark and DuckDB, each without an index,
retrofitted (with and without a bloom filter on user_id) and with the writer's own index; then per
query shape and engine (bench.engine_probes) the rows, pages or bytes the engine reports reading,
and whether every variant gives the answer pyarrow computes from the rows in memory. Counts do not
depend on the machine; times (single-threaded engines, files in the page cache) are indicative.
Prints the markdown section bench/run.py puts in RESULTS.md.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.engine_lake import BLOOM_COLUMN, VARIANT_LABELS, VARIANTS, Query, build, events, layout, queries
from bench.engine_probes import ENGINES, answer, arrow_filter, probe, versions, where_sql
from bench.measure import ROOT
from bench.report import fmt_bytes

# 10 million rows would take about an hour on a busy 2-core machine; a million take about 8 minutes.
ROWS = 1_000_000
HEADING = "## What engines gain (bench.engines)"


def log(msg: str) -> None:
    print(f"[engines {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def reference(table: pa.Table, query: Query) -> list:
    """The query's answer from the rows in memory (pyarrow's filter, not a Parquet reader)."""
    return answer(table.filter(arrow_filter(query)))


def measure(rows: int, directory: Path, spark=None) -> dict[str, Any]:
    """Build the lake in `directory`, run every query in every engine on every variant; Spark's
    files and queries only with a `spark` session (the caller's to stop)."""
    started = time.monotonic()
    table = events(rows)
    writers = ("pyarrow", "spark", "duckdb") if spark is not None else ("pyarrow", "duckdb")
    log(f"writing the lake: {rows:,} rows, {', '.join(writers)}")
    files = build(table, directory, writers, spark)
    built = time.monotonic() - started
    shape = {w: {v: layout(p) for v, p in vs.items()} for w, vs in files.items()}
    engines = tuple(e for e in ENGINES if spark is not None or e != "spark")
    qs = queries(table)
    for engine in engines:  # first calls (imports, JIT, Spark's planning code) untimed
        probe(engine, files["pyarrow"]["native"], qs[0], spark)
    results: dict[str, dict] = {}
    for writer, variants in files.items():
        log(f"querying {writer}'s files")
        for q in qs:
            expected = reference(table, q)
            for engine in engines:
                cell = results.setdefault(writer, {}).setdefault(q.name, {}).setdefault(engine, {})
                for variant, path in variants.items():
                    got = probe(engine, path, q, spark)
                    cell[variant] = got | {"equal": got["result"] == expected}
    return {"rows": rows, "versions": versions(), "layout": shape, "results": results,
            "queries": [{"name": q.name, "shape": q.shape, "where": where_sql(q, "datafusion")} for q in qs],
            "seconds": {"build": built, "total": time.monotonic() - started}}


def spark_session():
    """The bench's local[1] session (bench.spark_worker's settings), quiet."""
    from bench.spark_worker import session_builder

    spark = session_builder("local[1]").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


# ---- the section -----------------------------------------------------------------------------

def _count(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}" if n < 10 * size else f"{n / size:.1f}{unit}"
    return str(n)


def cell(engine: str, m: dict | None) -> str:
    """One engine's counts on one file, as the table shows them."""
    if m is None:
        return ""
    if engine == "spark":
        text = f"{_count(m['rows_scanned'])} rows"
    elif engine == "datafusion":
        text = fmt_bytes(m.get("bytes_scanned"))
        if m.get("page_index_pages_pruned_total"):
            text += f", {m['page_index_pages_pruned']}/{m['page_index_pages_pruned_total']} pages pruned"
        if m.get("row_groups_pruned_bloom_filter"):
            text += f", bloom {m['row_groups_pruned_bloom_filter']}/{m['row_groups_pruned_bloom_filter_total']} RG"
    elif engine == "duckdb":
        text = f"{fmt_bytes(m['bytes_read'])}, {m['row_groups_scanned']}/{m['row_groups_total']} RG"
    else:
        text = fmt_bytes(m["bytes_read"])
        if m.get("row_groups_pruned_bloom_filter"):
            text += f", bloom {m['row_groups_pruned_bloom_filter']} RG"
    return text + f" ({m['seconds']:.2f}s)" + ("" if m["equal"] else " **WRONG**")


def _pages(shape: dict) -> str:
    lo, hi = shape["pages_per_chunk"]["event_id"]
    return str(lo) if lo == hi else f"{lo}-{hi}"


def section(results: dict[str, Any]) -> list[str]:
    """RESULTS.md's section for one bench.engines run."""
    v = results["versions"]
    out = [HEADING, "",
           f"{results['rows']:,} rows (bench/engine_lake.py: sorted event_id, clustered event_time, random user_id, "
           "a rare country), written by each writer with its defaults; each file without an index (the writer's "
           "stripped: the same data pages), retrofitted by pageindex (with and without "
           f"`--bloom-filter {BLOOM_COLUMN}`) and with the writer's own index. Every engine answers "
           "`SELECT count(*), sum(event_id), sum(user_id), min(amount), max(amount) WHERE ...` on one thread, "
           "files in the page cache. Versions: "
           + ", ".join(f"{k} {v[k]}" for k in ("spark", "datafusion", "duckdb", "pyarrow", "polars", "pageindex"))
           + ".", "",
           "What each engine reports: Spark, the Parquet scan's numOutputRows (rows left after row-group and "
           "page skipping); DataFusion, its scan's bytes_scanned, page_index_pages_pruned (of the pages it "
           "considered) and row_groups_pruned_bloom_filter; DuckDB, its JSON profile's io.total_bytes_read and "
           "row groups scanned; pyarrow.dataset and polars report nothing, so the bytes their process read "
           "(/proc/self/io rchar); pageindex lookup, its own bytes read. RG: row groups. Seconds are indicative "
           "(a shared machine). Every cell's answer equals the one computed from the rows in memory unless "
           "marked WRONG.", "", "Queries (the WHERE clause as DataFusion takes it):", ""]
    out += [f"- {q['shape']}: `{q['where']}`" for q in results["queries"]]
    out.append("")
    for writer, shapes in results["layout"].items():
        out += [f"### {writer}-written files", "",
                "| file | bytes | row groups | pages per column chunk (event_id) | bloom filters | skipping |",
                "| --- | --- | --- | --- | --- | --- |"]
        out += [f"| {VARIANT_LABELS[k]} | {fmt_bytes(s['bytes'])} | {s['row_groups']} | {_pages(s)} | "
                f"{', '.join(s['bloom_columns']) or '-'} | {s['skipping']} |" for k, s in shapes.items()]
        shown = [k for k in VARIANTS if k in shapes]
        out += ["", "| query | engine | " + " | ".join(VARIANT_LABELS[k] for k in shown) + " |",
                "| --- | --- | " + " | ".join("---" for _ in shown) + " |"]
        for q in results["queries"]:
            for engine, cells in results["results"][writer][q["name"]].items():
                out.append(f"| {q['shape']} | {engine} | "
                           + " | ".join(cell(engine, cells.get(k)) for k in shown) + " |")
        out.append("")
    wrong = sum(not m["equal"] for w in results["results"].values() for q in w.values()
                for e in q.values() for m in e.values())
    out += [f"Answers checked: {'all equal' if not wrong else f'{wrong} differ'}. "
            f"Lake built in {results['seconds']['build']:.0f}s, section in {results['seconds']['total']:.0f}s.", ""]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=ROWS, help=f"rows in the lake (default {ROWS:,})")
    parser.add_argument("--no-spark", action="store_true", help="no Spark: neither its files nor its queries")
    parser.add_argument("--dir", type=Path, default=ROOT / "bench" / "out" / "engines-lake",
                        help="where the lake is written (removed afterwards unless --keep)")
    parser.add_argument("--keep", action="store_true", help="keep the lake's files")
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    args = parser.parse_args(argv)
    shutil.rmtree(args.dir, ignore_errors=True)
    spark = None if args.no_spark else spark_session()
    try:
        results = measure(args.rows, args.dir, spark)
    finally:
        if spark is not None:
            spark.stop()
        if not args.keep:
            shutil.rmtree(args.dir, ignore_errors=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1, default=str))
    print("\n".join(section(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
