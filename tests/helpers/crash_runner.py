"""A retrofit in a child process that can be paused at a named point of its commit, so a parent
can SIGKILL it exactly there (tests/system/test_crash_safety.py, tests/system/test_concurrency.py).

Usage::

    python -m tests.helpers.crash_runner SRC [DST] [--s3-endpoint URL] [--pause-at PHASE]
                                         [--stale-temp-seconds N] [--trust-page-stats]

SRC/DST are local paths, or ``bucket/key`` on the S3 endpoint given.  The child prints
``PHASE <name>`` (flushed) as it passes each point and, at ``--pause-at PHASE``, prints
``PAUSED <name>`` and sleeps until killed.  ``--hold-at PHASE --release FILE`` instead prints
``HELD <name>`` there and goes on once FILE exists; ``--wait-for FILE`` makes it wait (after its
imports) until FILE exists before starting, so several children can start at the same instant.  At the end
it prints ``DONE <status>``; a PageIndexError ends it with exit code 1 and ``ERROR <type>: <msg>``.

Phases, local commit: ``before_copy``, ``after_copy`` (the background copy), ``fsync``,
``before_rename`` (after the commit's check, before the exchange or rename), ``after_rename``
(the new file in place, the original gone).  S3 commit: ``before_<method>`` / ``after_<method>`` for every S3 call of the
commit (create_multipart_upload, upload_part_copy, upload_part, complete_multipart_upload,
put_object).  Also ``start`` (imports done) and ``footer`` (footer read).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

_HOLD: dict[str, str] = {}


def _wait_for(path: str) -> None:
    while not os.path.exists(path):
        time.sleep(0.001)


def _phase(name: str, pause_at: str | None) -> None:
    print(f"PHASE {name}", flush=True)
    if pause_at and name == pause_at:
        print(f"PAUSED {name}", flush=True)
        while True:
            time.sleep(3600)
    if _HOLD.get("at") == name:
        print(f"HELD {name}", flush=True)
        _wait_for(_HOLD["release"])


def _instrument(pause_at: str | None) -> None:
    import importlib

    commit_mod = importlib.import_module("pageindex.io.commit")

    real_copy = commit_mod.copy_prefix

    def copy_prefix(source, out, length, *rest):
        _phase("before_copy", pause_at)
        real_copy(source, out, length, *rest)
        _phase("after_copy", pause_at)

    commit_mod.copy_prefix = copy_prefix

    real_fsync = os.fsync
    real_replace = os.replace

    def fsync(fd):
        real_fsync(fd)
        _phase("fsync", pause_at)

    real_exchange = commit_mod._exchange
    real_fsync_dir = commit_mod._fsync_dir
    renaming = {"started": False}

    def before_rename():
        if not renaming["started"]:
            renaming["started"] = True
            _phase("before_rename", pause_at)

    def replace(src, dst, *a, **kw):
        before_rename()
        real_replace(src, dst, *a, **kw)

    def exchange(a, b):
        before_rename()
        return real_exchange(a, b)

    def fsync_dir(path):
        # the new file has its name, and the original is gone (also from the temporary's name)
        _phase("after_rename", pause_at)
        real_fsync_dir(path)

    commit_mod.os.fsync = fsync  # commit uses the os module; this child only runs the retrofit
    commit_mod.os.replace = replace
    commit_mod._exchange = exchange
    commit_mod._fsync_dir = fsync_dir

    real_call = commit_mod._s3_call

    def s3_call(fs, path, method, **kwargs):
        _phase(f"before_{method}", pause_at)
        out = real_call(fs, path, method, **kwargs)
        _phase(f"after_{method}", pause_at)
        return out

    commit_mod._s3_call = s3_call

    # retrofit reads the footer through format.opened (open_file), where the job may open it ahead
    opened_mod = importlib.import_module("pageindex.format.opened")
    real_read_footer = opened_mod.read_footer

    def read_footer(*a, **kw):
        footer = real_read_footer(*a, **kw)
        _phase("footer", pause_at)
        return footer

    opened_mod.read_footer = read_footer


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("src")
    p.add_argument("dst", nargs="?")
    p.add_argument("--s3-endpoint")
    p.add_argument("--pause-at")
    p.add_argument("--stale-temp-seconds", type=float, default=3600.0)
    p.add_argument("--trust-page-stats", action="store_true")
    p.add_argument("--hold-at")
    p.add_argument("--release")
    p.add_argument("--wait-for")
    args = p.parse_args(argv)
    if args.hold_at:
        _HOLD.update(at=args.hold_at, release=args.release)

    import pageindex
    from pageindex.errors import PageIndexError

    _instrument(args.pause_at)
    fs = None
    if args.s3_endpoint:
        import s3fs

        from pageindex.io.storage import s3_options
        from tests.helpers.s3 import storage_options

        fs = s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False,
                               **s3_options(storage_options(args.s3_endpoint)))
    if args.wait_for:
        _wait_for(args.wait_for)
    _phase("start", args.pause_at)
    try:
        result = pageindex.retrofit(args.src, args.dst, filesystem=fs,
                                    stale_temp_seconds=args.stale_temp_seconds,
                                    trust_page_stats=args.trust_page_stats)
    except PageIndexError as err:
        print(f"ERROR {type(err).__name__}: {err}", flush=True)
        return 1
    print(f"DONE {result.status}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
