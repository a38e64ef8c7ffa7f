"""The command line's arguments: the `pageindex` parser, its subcommands and their options, help
texts and exit codes, each subcommand naming the command that runs it (pageindex.cli.commands).
"""
from __future__ import annotations

import argparse

from pageindex.cli.commands import run_inspect, run_lookup, run_report, run_retrofit, run_verify
from pageindex.index.parallel import AUTO, threads_option
from pageindex.io.storage import add_transport_argument
from pageindex.job.process import add_index_arguments
from pageindex.job.state import add_state_argument
from pageindex.version import __version__

# S3 and other stores are configured the usual way (environment, ~/.aws): no options of our own.


def _threads_argument(text: str) -> int:
    """--threads: a positive number or `auto`."""
    try:
        return threads_option(AUTO if text.strip().lower() == AUTO else int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number or {AUTO}, not {text!r}") from None


RETROFIT_HELP = """\
Every PATH is an input: a Parquet file, a directory (searched recursively;
hidden and _underscore entries are ignored, files in it that are not Parquet
are reported skipped) or a glob; local, file://, s3:// or s3a://. Without
--output each file is replaced atomically in place; a symlink stays a link and
the file it points to is replaced. With --output the inputs are never changed.

The old form `retrofit SRC DST` (DST not existing) is refused with exit code
2: write `retrofit SRC --output DST` instead."""

EXIT_CODES = """\
exit codes (every command, and pageindex-job, follow one rule):
  0  every file ended well (retrofit: indexed, already indexed, skipped, or
     left for a later run: being written, read-only; verify: every page index
     agrees with the data)
  1  a failure a retry may mend: storage errors and throttling, a worker
     process that died, a report that could not be written
  2  usage: bad arguments, a malformed --storage-option, a missing input, an
     output that would overwrite an input, an existing file or a directory, a
     --report or --state that cannot be written; nothing was written
  3  files failed for reasons no retry can mend (malformed, unsupported,
     encrypted, changed while read; verify: a page index that contradicts the
     data) and none failed for a reason a retry may mend"""


LOOKUP_HELP = """\
PATH is a Parquet file or a directory, local, file://, s3:// or s3a://. In a
directory, files are found by the job's rules (hidden and _underscore entries
ignored; links to directories followed, each file read once; a file that is
not Parquet is reported skipped) and key=value folders
are Hive partitions: returned as columns (typed as pyarrow.dataset infers them:
int32 when every value casts to int32, else string, dates included;
__HIVE_DEFAULT_PARTITION__ is null; URL escapes decoded) and filterable, and a
condition on them prunes whole files without reading a byte of them. Files
whose schemas evolved are read as one: a column missing from a file is null in
its rows, int32 and int64 become int64 (pyarrow's permissive unify_schemas);
types that cannot be unified are refused, naming the file. A file of the
directory that cannot be read (malformed, encrypted, unsupported) is left out
with a warning naming it and the exit code is 3; --strict fails instead.

Floats compare as Spark and DuckDB compare them: every NaN equals NaN and is
greater than every number, infinity included; -0.0 equals 0.0. 'NaN',
'inf' and '-inf' (any case; also 'Infinity') are float literals."""


def storage_arguments() -> argparse.ArgumentParser:
    """The options every command takes to reach an object store (as the Spark job does)."""
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument("--s3-endpoint-url", metavar="URL",
                        help="S3-compatible endpoint (MinIO, Ceph, R2, ...); the AWS_ENDPOINT_URL_S3 "
                             "environment variable does the same")
    shared.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                        help="an fsspec storage option, repeatable; a dotted KEY nests "
                             "(client_kwargs.region_name=eu-west-1), a JSON VALUE is parsed (anon=true)")
    add_transport_argument(shared)
    return shared


def _links_argument(command: argparse.ArgumentParser) -> None:
    command.add_argument("--follow-links", action="store_true",
                         help="also follow local symbolic links that lead outside an input's real path "
                              "(as find -L); by default they are skipped with a warning")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pageindex", description="Exact Parquet page indexes, appended without rewriting data.",
                                epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    storage = storage_arguments()
    p.add_argument("--version", action="version", version=f"pageindex {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("retrofit", parents=[storage], help="add a ColumnIndex and OffsetIndex to files, in place or to --output",
                       description=RETROFIT_HELP, epilog=EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("paths", nargs="+", metavar="PATH", help="files, directories or globs to index")
    r.add_argument("--output", metavar="PATH",
                   help="write the indexed files here instead of in place: the output file for one "
                        "input file, else a directory mirroring the inputs (a trailing / also asks "
                        "for a directory); refused if it is one of the inputs")
    r.add_argument("--overwrite", action="store_true",
                   help="with --output: replace output files that already exist (refused otherwise)")
    r.add_argument("--copy-unchanged", action="store_true",
                   help="with --output: also copy the files that need no change (already indexed, "
                        "not Parquet), so the output is a complete copy of the inputs (copied by the "
                        "store itself where it can)")
    r.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="index N files at a time in worker processes (default 1)")
    r.add_argument("--threads", type=_threads_argument, default=None, metavar="N|auto",
                   help="scan N column chunks of a file at a time, each on a thread (auto: 2 where "
                        "the process may use 2 CPUs, else 1); default auto, but 1 per worker "
                        "process with --jobs above 1. The output is the same for any N")
    add_index_arguments(r)
    r.add_argument("--require-compiled", action="store_true",
                   help="exit 2 before any file is touched when the compiled kernels do not load "
                        "here (by default files are indexed by the Arrow fallback, at 2-3x the CPU)")
    r.add_argument("--json", action="store_true",
                   help="print one JSON record per file (JSON lines) instead of text; the summary "
                        "goes to stderr")
    r.add_argument("--report", metavar="PATH",
                   help="also write the per-file records here: Parquet if PATH ends in .parquet, "
                        "else JSON lines (as the Spark job's --report)")
    add_state_argument(r)
    r.set_defaults(run=run_retrofit, subparser=r)

    i = sub.add_parser("inspect", parents=[storage], epilog=EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="show files' page indexes page by page, or their pages, types and codecs without one")
    i.add_argument("paths", nargs="+", metavar="PATH", help="files, directories or globs to show")
    i.add_argument("--json", action="store_true", help="one JSON document per file (JSON lines)")
    i.add_argument("--max-pages", type=int, default=20, metavar="N",
                   help="pages shown per chunk (default 20)")
    i.add_argument("--all-pages", action="store_true", help="show every page of every chunk")
    i.add_argument("--summary", action="store_true",
                   help="one line per column (its chunks over all row groups taken together) instead of "
                        "chunk by chunk: for files with many row groups")
    _links_argument(i)
    i.set_defaults(run=run_inspect, subparser=i)

    v = sub.add_parser("verify", parents=[storage], help="check files' page indexes against the data",
                       epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    v.add_argument("paths", nargs="+", metavar="PATH", help="files, directories or globs to check")
    v.add_argument("--json", action="store_true", help="one JSON document per file (JSON lines)")
    v.add_argument("--threads", type=_threads_argument, default=None, metavar="N|auto",
                   help="check N column chunks of a file at a time, each on a thread (default auto: 2 "
                        "where the process may use 2 CPUs, else 1)")
    _links_argument(v)
    v.set_defaults(run=run_verify, subparser=v)

    lk = sub.add_parser("lookup", parents=[storage], help="read only the pages that can hold matching rows",
                        description=LOOKUP_HELP, epilog=EXIT_CODES,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    lk.add_argument("path", help="a Parquet file or a directory of them (Hive-partitioned or not)")
    lk.add_argument("--where", required=True,
                    help="e.g. \"user_id = 42 AND ts >= '2024-01-01'\" (=, !=, <, <=, >, >=, "
                         "BETWEEN, IN, IS [NOT] NULL, joined by AND; partition columns too). A quoted "
                         "number on a numeric column is that number ('42' as 42); ISO date/timestamp "
                         "text without an offset on a UTC-adjusted timestamp column is UTC; struct "
                         "leaves by dotted path (point.x = 3)")
    lk.add_argument("--columns", help="comma-separated columns to return, partition columns included "
                                      "(default: all)")
    lk.add_argument("--limit", type=int, metavar="N", help="print at most this many rows")
    lk.add_argument("--strict", action="store_true",
                    help="fail on the first file of a directory that cannot be read (malformed, encrypted, "
                         "unsupported) instead of leaving it out with a warning and exit code 3")
    lk.add_argument("--json", action="store_true", help="rows and I/O counts as one strict JSON document (NaN and infinities as "
                         "strings, binary as 0x hex, dates and timestamps as ISO text)")
    lk.set_defaults(run=run_lookup, subparser=lk)

    rp = sub.add_parser("report", parents=[storage], epilog=EXIT_CODES,
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        help="summarise saved reports (--report, the job's): per night, per status, failures by reason")
    rp.add_argument("paths", nargs="+", metavar="PATH",
                    help="report files (Parquet or JSON lines) or directories of them; a run_date=DAY "
                         "directory names the night, else each file is one")
    rp.set_defaults(run=run_report, subparser=rp)
    return p

