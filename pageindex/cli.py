"""Command line: `pageindex retrofit | inspect | verify | lookup`.

Exit codes: 0 success, 1 a refused/failed file or a violation, 2 usage errors.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

from pageindex.errors import PageIndexError
from pageindex.index.compute import PAGE_STATS
from pageindex.inspection import format_text, inspect_file
from pageindex.query.lookup import lookup
from pageindex.retrofit import RetrofitResult, Status, retrofit
from pageindex.verify import verify
from pageindex.version import __version__


def _print_json(obj: object) -> None:
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def _summary(result: RetrofitResult) -> str:
    if result.status == Status.ALREADY_INDEXED:
        return f"{result.path}: already has a complete page index (use --force to rebuild)"
    with_ci = sum(c.column_index for c in result.chunks)
    lines = [
        f"{result.path}: {result.status}" + (f" -> {result.output}" if result.output and result.output != result.path else ""),
        f"  row groups {result.row_groups}, pages {result.pages}, chunks {len(result.chunks)}"
        f" ({with_ci} with ColumnIndex, {len(result.chunks) - with_ci} without)"
        + (f", {sum(c.source == PAGE_STATS for c in result.chunks)} from page-header statistics"
           if any(c.source == PAGE_STATS for c in result.chunks) else ""),
        f"  size {result.bytes_in} -> {result.bytes_out} bytes (+{result.bytes_out - result.bytes_in}),"
        f" read {result.bytes_read} bytes in {result.seconds:.2f}s",
    ]
    reasons: dict[str, list[str]] = {}
    for c in result.chunks:
        if c.reason:
            reasons.setdefault(c.reason, []).append(f"{c.column}@rg{c.row_group}")
    for reason, where in sorted(reasons.items()):
        shown = ", ".join(where[:5]) + (f" and {len(where) - 5} more" if len(where) > 5 else "")
        lines.append(f"  no ColumnIndex for {shown}: {reason}")
    return "\n".join(lines)


def _cmd_retrofit(args: argparse.Namespace) -> int:
    result = retrofit(args.src, args.dst, truncate_length=args.truncate_length, force=args.force,
                      dry_run=args.dry_run, trust_page_stats=args.trust_page_stats)
    if args.json:
        _print_json(result.to_dict())
    else:
        print(_summary(result))
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    view = inspect_file(args.file)
    if args.json:
        _print_json(view.to_dict())
    else:
        print(format_text(view, max_pages=1 << 62 if args.all_pages else args.max_pages))
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    result = verify(args.file)
    if args.json:
        _print_json(result.to_dict())
    else:
        print(f"{result.path}: {'OK' if result.ok else 'VIOLATIONS'} — {result.chunks} chunks, "
              f"{result.chunks_with_offset_index} with OffsetIndex, {result.chunks_with_column_index} "
              f"with ColumnIndex, {result.pages_checked} pages checked")
        for v in result.violations:
            print(f"  {v}")
        if result.chunks_with_offset_index == 0:
            print("  (the file has no page index to verify)")
    return 0 if result.ok else 1


def _cmd_lookup(args: argparse.Namespace) -> int:
    columns = [c.strip() for c in args.columns.split(",")] if args.columns else None
    table, stats = lookup(args.path, args.where, columns=columns)
    shown = table if args.limit is None else table.slice(0, args.limit)
    if args.json:
        _print_json({"rows": _printable(shown).to_pylist(), "num_rows": table.num_rows,
                     "io": stats.to_dict()})
        return 0
    print(_format_rows(_printable(shown)))
    if args.limit is not None and table.num_rows > args.limit:
        print(f"… {table.num_rows - args.limit} more rows")
    print(f"\n{table.num_rows} rows; read {stats.bytes_read} bytes in {stats.requests} requests "
          f"from {stats.files} file(s), {stats.row_groups_read}/{stats.row_groups} row groups")
    for name, io in stats.columns.items():
        print(f"  {name}: {io.pages_read}/{io.pages_total} pages, {io.bytes_read} bytes")
    return 0


def _printable(table):
    """Temporal columns as ISO text (Python's datetime cannot hold nanoseconds)."""
    import pyarrow as pa

    columns = [c.cast(pa.string()) if pa.types.is_temporal(c.type) else c for c in table.columns]
    return pa.table(columns, names=table.column_names)


def _format_rows(table) -> str:
    names = table.column_names
    rows = [["" if v is None else str(v) for v in row.values()] for row in table.to_pylist()]
    widths = [max([len(n)] + [len(r[i]) for r in rows]) for i, n in enumerate(names)]
    lines = ["  ".join(n.rjust(w) for n, w in zip(names, widths))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pageindex", description="Exact Parquet page indexes, appended without rewriting data.")
    p.add_argument("--version", action="version", version=f"pageindex {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("retrofit", help="add a ColumnIndex and OffsetIndex to a file")
    r.add_argument("src")
    r.add_argument("dst", nargs="?", help="output path (default: replace SRC atomically)")
    r.add_argument("--truncate-length", type=int, default=64, metavar="N",
                   help="truncate BYTE_ARRAY bounds longer than N bytes (default 64)")
    r.add_argument("--force", action="store_true", help="rebuild even if the file is already indexed")
    r.add_argument("--dry-run", action="store_true", help="compute and report, write nothing")
    r.add_argument("--trust-page-stats", action="store_true",
                   help="build bounds from page-header statistics where trustworthy (much faster; "
                        "values of floats and known-bad writers are still decoded)")
    r.add_argument("--json", action="store_true", help="machine-readable output")
    r.set_defaults(run=_cmd_retrofit)

    i = sub.add_parser("inspect", help="show a file's page index, page by page")
    i.add_argument("file")
    i.add_argument("--json", action="store_true")
    i.add_argument("--max-pages", type=int, default=20, help="pages shown per chunk (default 20)")
    i.add_argument("--all-pages", action="store_true")
    i.set_defaults(run=_cmd_inspect)

    v = sub.add_parser("verify", help="check a page index against the data")
    v.add_argument("file")
    v.add_argument("--json", action="store_true")
    v.set_defaults(run=_cmd_verify)

    lk = sub.add_parser("lookup", help="read only the pages that can hold matching rows")
    lk.add_argument("path", help="a Parquet file or a directory of them")
    lk.add_argument("--where", required=True,
                    help="e.g. \"user_id = 42 AND ts >= '2024-01-01'\" (=, !=, <, <=, >, >=, "
                         "BETWEEN, IN, IS [NOT] NULL, joined by AND)")
    lk.add_argument("--columns", help="comma-separated columns to return (default: all)")
    lk.add_argument("--limit", type=int, help="print at most this many rows")
    lk.add_argument("--json", action="store_true")
    lk.set_defaults(run=_cmd_lookup)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if getattr(args, "truncate_length", 1) < 1:
        parser().error("--truncate-length must be at least 1")
    try:
        return args.run(args)
    except BrokenPipeError:
        # The reader went away (`... | head`): silence the flush at exit, as the Python docs advise.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except PageIndexError as err:
        print(f"pageindex: error: {type(err).__name__}: {err}", file=sys.stderr)
        if getattr(args, "json", False):
            _print_json({"error": type(err).__name__, "message": str(err), "path": err.path})
        return 1


if __name__ == "__main__":
    sys.exit(main())
