"""Command line: `pageindex retrofit | inspect | verify | lookup | report`, parsed, run, exited.

Exit codes (EXIT_CODES, pageindex.errors): 0 success, 1 retryable, 2 usage, 3 failed for good.
"""
from __future__ import annotations

import os
import sys
from typing import NoReturn, Sequence

from pageindex.cli.arguments import parser
from pageindex.cli.output import print_error
from pageindex.errors import EXIT_INTERRUPTED, EXIT_USAGE, PageIndexError, UsageError, exit_code
from pageindex.io.storage import storage_options_from
from pageindex.job.process import check_bloom_arguments
from pageindex.shutdown import leave, stops_cleanly

__all__ = ["console", "main", "parser"]


def main(argv: Sequence[str] | None = None) -> int:
    cli = parser()
    args = cli.parse_args(argv)
    if getattr(args, "truncate_length", 1) < 1:
        cli.error("--truncate-length must be at least 1")
    if getattr(args, "jobs", 1) < 1:
        cli.error("--jobs must be at least 1")
    if hasattr(args, "bloom_filter"):
        try:
            check_bloom_arguments(args)
        except ValueError as err:
            args.subparser.error(str(err))
    try:
        args.storage_options = storage_options_from(args.s3_endpoint_url, args.storage_option, args.s3_transport)
    except ValueError as err:  # one line: the usage would bury which option is wrong
        print(f"{args.subparser.prog}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return args.run(args)
    except UsageError as err:
        if err.path is None:  # how the command was spelled: the usage helps
            args.subparser.error(str(err))
        print_error(err, False)  # about a path given: one line naming it
        return exit_code(err)
    except BrokenPipeError:
        # The reader went away (`... | head`): silence the flush at exit, as the Python docs advise.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except PageIndexError as err:
        print_error(err, getattr(args, "json", False))
        return exit_code(err)


def console() -> NoReturn:
    """The `pageindex` console script."""
    leave(stops_cleanly(main)())
