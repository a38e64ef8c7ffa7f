"""Process one file for the job and describe the outcome as a report record.

Never raises for a bad file: every outcome, including internal errors, becomes a record.
"""
from __future__ import annotations

import argparse
import errno
import logging
import os
import posixpath
import shutil
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from fsspec.implementations.local import LocalFileSystem

from pageindex.errors import (
    ConcurrentModificationError,
    FooterMissingError,
    NotParquetError,
    PageIndexError,
    ReadOnlyFileError,
    retryable,
)
from pageindex.format.footer import DEFAULT_MAX_PAGE_BYTES
from pageindex.format.opened import OpenAhead
from pageindex.index.bloom.options import NONE, BloomOptions, bloom_options
from pageindex.index.bloom.sbbf import DEFAULT_FPP, DEFAULT_MAX_BYTES
from pageindex.io.prefix_copy import COPY_BLOCK, NO_KERNEL_COPY
from pageindex.io.discovery import InputFile
from pageindex.io.storage import resolve
from pageindex.io.whole_file import whole_file
from pageindex.job.tasks import parse_size
from pageindex.retrofit import Status, retrofit, scan_path
from pageindex.shutdown import stops_cleanly

log = logging.getLogger("pageindex.job.spark")
# Outcomes that leave the file as it is: --copy-unchanged copies them to the output.
UNCHANGED = (Status.ALREADY_INDEXED, Status.SKIPPED)
# A local file without its footer modified this recently is taken as still being written.
BEING_WRITTEN_SECONDS = 600.0


@dataclass(frozen=True)
class JobOptions:
    """What every executor needs to know; plain data so it pickles to executors."""

    output: str | None = None  # None: in place
    copy_unchanged: bool = False
    dry_run: bool = False
    force: bool = False
    truncate_length: int = 64
    storage_options: dict[str, Any] = field(default_factory=dict)
    stale_temp_seconds: float = 3600.0
    trust_page_stats: bool = False
    bloom_filter: str = NONE  # "none", "auto" or comma-separated dotted columns
    bloom_fpp: float = DEFAULT_FPP
    bloom_max_bytes: int = DEFAULT_MAX_BYTES
    verify_existing: bool = False
    chunk_statistics: bool = True  # False: every chunk's statistics left as they are
    # A file's chunks scanned at a time (retrofit's threads): the CLI's --threads. The Spark job
    # keeps one, as it runs a task per core.
    threads: int = 1
    # The largest page read (compressed or not; values at 4 bytes each): --max-page-bytes.
    max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES
    # Follow local symbolic links that lead outside an input's real path (--follow-links);
    # by default they are skipped with a warning, as are a table's files outside its root.
    follow_links: bool = False
    # A local file whose footer is missing and that changed less than this ago is left for the
    # next run (status being_written), not failed.
    being_written_seconds: float = BEING_WRITTEN_SECONDS

    @property
    def bloom(self) -> BloomOptions:
        return bloom_options(self.bloom_filter, self.bloom_fpp, self.bloom_max_bytes)


# The namespace attribute listing the bloom tuning flags given (see _BloomTuning).
TUNING_GIVEN = "bloom_tuning_given"


class _BloomTuning(argparse.Action):
    """Store the value and note the flag as given: without --bloom-filter it would tune nothing,
    so check_bloom_arguments refuses it."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        setattr(namespace, TUNING_GIVEN, (*getattr(namespace, TUNING_GIVEN, ()), option_string))


def add_index_arguments(parser: argparse.ArgumentParser) -> None:
    """How the index is built, the same flags for the CLI's retrofit and the Spark job (bloom
    filters included)."""
    parser.add_argument("--dry-run", action="store_true", help="compute and report, write nothing")
    parser.add_argument("--force", action="store_true", help="rebuild even if the file is already indexed")
    parser.add_argument("--verify-existing", action="store_true",
                        help="check an existing page index against the data before keeping it, and "
                             "rebuild it if wrong (status repaired); indexes that are structurally "
                             "impossible or from writers known to write wrong ones are always checked")
    parser.add_argument("--truncate-length", type=int, default=64, metavar="N",
                        help="truncate BYTE_ARRAY bounds longer than N bytes (default 64)")
    parser.add_argument("--trust-page-stats", action="store_true",
                        help="build bounds from page-header statistics where trustworthy (much faster; "
                             "values of floats and known-bad writers are still decoded, and each chunk "
                             "decoded says why)")
    parser.add_argument("--keep-chunk-statistics", action="store_true",
                        help="leave every column chunk's statistics as they are (by default a chunk "
                             "without bounds readers can use gets its page index's exact bounds)")
    parser.add_argument("--max-page-bytes", type=_page_bytes, default=DEFAULT_MAX_PAGE_BYTES, metavar="SIZE",
                        help="refuse a file with a page larger than SIZE, compressed or not, or with "
                             "more values than SIZE/4 (default 128m: far above what writers make; "
                             "bounds the memory one page costs)")
    parser.add_argument("--follow-links", action="store_true",
                        help="also follow local symbolic links that lead outside an input's real path "
                             "(as find -L, rsync -L); by default they are skipped with a warning")
    parser.add_argument("--being-written-seconds", type=_seconds, default=BEING_WRITTEN_SECONDS,
                        metavar="N",
                        help="a local file that ends before its footer and was modified less than "
                             f"N seconds ago is being written: left for the next run (status "
                             f"being_written, not a failure); older, it is broken (default "
                             f"{BEING_WRITTEN_SECONDS:.0f})")
    add_bloom_arguments(parser)


def _page_bytes(text: str) -> int:
    """--max-page-bytes: a byte count, or a number with k, m or g (1 KiB at least)."""
    try:
        value = parse_size(text)
    except (ValueError, OverflowError):
        value = 0
    if value < 1 << 10:
        raise argparse.ArgumentTypeError(f"must be a size of at least 1k (a byte count, or with k, m "
                                         f"or g), not {text!r}")
    return value


def _seconds(text: str) -> float:
    """A number of seconds, at least 0."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds, at least 0, not {text!r}")
    return value


def index_options(args: argparse.Namespace, **more: Any) -> JobOptions:
    """The JobOptions the flags of add_index_arguments say, with `more` (output, storage, ...)."""
    return JobOptions(dry_run=args.dry_run, force=args.force, verify_existing=args.verify_existing,
                      truncate_length=args.truncate_length, trust_page_stats=args.trust_page_stats,
                      chunk_statistics=not args.keep_chunk_statistics, bloom_filter=args.bloom_filter,
                      bloom_fpp=args.bloom_fpp, bloom_max_bytes=args.bloom_max_bytes,
                      max_page_bytes=args.max_page_bytes, follow_links=args.follow_links,
                      being_written_seconds=args.being_written_seconds, **more)


def add_bloom_arguments(parser: argparse.ArgumentParser) -> None:
    """The bloom filter flags, the same for the CLI's retrofit and the Spark job."""
    parser.add_argument("--bloom-filter", default=NONE, metavar="COLUMNS|auto|none",
                        help="add a split block bloom filter to the chunks of these comma-separated "
                             "columns (a list or map by its own name), or of the columns where one "
                             "pays (auto; see docs/bloom-filters.md), or none (default); a file "
                             "without a named column is indexed without its filter, with a note")
    parser.add_argument("--bloom-fpp", type=float, default=DEFAULT_FPP, metavar="P", action=_BloomTuning,
                        help=f"with --bloom-filter: the filters' false positive rate (default {DEFAULT_FPP})")
    parser.add_argument("--bloom-max-bytes", type=int, default=DEFAULT_MAX_BYTES, metavar="N",
                        action=_BloomTuning,
                        help=f"with --bloom-filter: largest filter per chunk, a power of two "
                             f"(default {DEFAULT_MAX_BYTES})")


def check_bloom_arguments(args: argparse.Namespace) -> None:
    """Raises ValueError for flags the library would refuse, and for a filter's tuning given
    without a filter, before any file is opened."""
    bloom = bloom_options(args.bloom_filter, args.bloom_fpp, args.bloom_max_bytes)
    given = sorted(set(getattr(args, TUNING_GIVEN, ())))
    if given and bloom.columns == NONE:
        raise ValueError(f"{' and '.join(given)} tune{'s' if len(given) == 1 else ''} bloom filters: "
                         "give --bloom-filter COLUMNS or auto too (without it no filter is written)")


def output_url(file: InputFile, options: JobOptions) -> str | None:
    if options.output is None:
        return None
    return posixpath.join(options.output.rstrip("/"), file.relative)


def process_file(file: InputFile, options: JobOptions) -> dict[str, Any]:
    return process_to(file, output_url(file, options), options)


def process_task(targets: Sequence[tuple[InputFile, str | None]], options: JobOptions,
                 open_ahead: bool = True) -> Iterator[dict[str, Any]]:
    """process_to of each (file, output) in turn, its record yielded as it is done. With
    open_ahead, the next file on an object store is opened (its HEAD and footer tail read, see
    OpenAhead) on a background thread while the current one is computed and committed: a task
    of many small files then waits on their latencies once, not file after file. At most one
    file ahead, so what it holds beyond the current file's memory is one footer and one tail
    read (ReadOptions.tail_bytes). Records are the same either way."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pageindex-open-ahead") as pool:
        following = _open_ahead(pool, targets[0][0], options) if targets and open_ahead else None
        try:
            for i, (file, output) in enumerate(targets):
                current = following
                following = (_open_ahead(pool, targets[i + 1][0], options)
                             if open_ahead and i + 1 < len(targets) else None)
                try:
                    yield process_to(file, output, options, current)
                finally:
                    if current is not None:
                        current.discard()  # not taken when retrofit failed before opening
        finally:
            if following is not None:
                following.discard()


def _open_ahead(pool: Executor, file: InputFile, options: JobOptions) -> OpenAhead | None:
    """`file` opening on `pool`, unless it is local (opening costs no request) or its URL does
    not resolve (process_to then reports that)."""
    try:
        fs, path = resolve(file.url, storage_options=options.storage_options)
    except Exception:  # noqa: BLE001 - process_to raises it again and makes it the record
        return None
    # A local file opens in microseconds: a thread hand-off costs more than it hides
    # (bench/RESULTS-objstore.md, job overlap).
    if isinstance(fs, LocalFileSystem):
        return None
    return OpenAhead(pool, path, fs, options.max_page_bytes)


@stops_cleanly  # SIGTERM in a worker process undoes the commit in flight
def process_to(file: InputFile, output: str | None, options: JobOptions,
               ahead: OpenAhead | None = None) -> dict[str, Any]:
    """process_file with the destination given (None: in place), for callers that map outputs
    their own way (the CLI writes a single input to the --output file itself). `ahead`: the
    file already being opened (process_task)."""
    started = time.monotonic()
    # "output" names what was written: set once a file is, None while nothing is.
    record = failed_record(file, None, "")
    try:
        fs, path = resolve(file.url, storage_options=options.storage_options)
        dst_fs, dst = None, None
        if output is not None:
            dst_fs, dst = resolve(output, storage_options=options.storage_options)
        result = retrofit(path, dst, truncate_length=options.truncate_length, force=options.force,
                          filesystem=fs, dst_filesystem=dst_fs, dry_run=options.dry_run,
                          trust_page_stats=options.trust_page_stats,
                          stale_temp_seconds=options.stale_temp_seconds, bloom_filter=options.bloom_filter,
                          bloom_fpp=options.bloom_fpp, bloom_max_bytes=options.bloom_max_bytes,
                          verify_existing=options.verify_existing, ahead=ahead,
                          chunk_statistics=options.chunk_statistics, threads=options.threads,
                          max_page_bytes=options.max_page_bytes)
        record.update(
            status=result.status, bytes_in=result.bytes_in, bytes_out=result.bytes_out,
            row_groups=result.row_groups, pages=result.pages, bytes_read=result.bytes_read,
            output=output if result.output is not None else None, scan_path=result.scan_path,
            **result.counts(),
        )
        if output is None and result.output is not None:  # the listing will now show the new file
            record["version"] = result.written_version
        reasons: dict[str, int] = {}
        for c in result.chunks:
            if c.reason:
                reasons[c.reason] = reasons.get(c.reason, 0) + 1
        record["without_column_index_reasons"] = reasons
        record["violations"] = [str(v) for v in result.violations]
        record["notes"] = list(result.notes)
    except NotParquetError as err:
        record.update(status=Status.SKIPPED, reason=err.reason)
    except ReadOnlyFileError as err:
        record.update(status=Status.READ_ONLY, reason=err.reason)
    except FooterMissingError as err:
        age = _age(fs, path)
        if age is not None and age < options.being_written_seconds:
            record.update(status=Status.BEING_WRITTEN,
                          reason=f"{err.reason}, modified {age:.0f}s ago: left for the next run")
        else:
            record.update(status=Status.FAILED, reason=f"{type(err).__name__}: {err.message(with_path=False)}")
    except PageIndexError as err:
        changed = isinstance(err, ConcurrentModificationError)
        record.update(status=Status.CHANGED if changed else Status.FAILED,
                      reason=f"{type(err).__name__}: {err.message(with_path=False)}",
                      retryable=err.retryable, scan_path=scan_path())
    except Exception as err:  # noqa: BLE001 - one bad file must not end the job
        log.exception("internal error on %s", file.url)
        record.update(status=Status.FAILED, reason=f"internal error: {type(err).__name__}: {err}",
                      retryable=retryable(err), scan_path=scan_path())
    if record["status"] in UNCHANGED and options.copy_unchanged and output is not None \
            and not options.dry_run:
        _copy_unchanged(file, output, record, options)
    record["seconds"] = round(time.monotonic() - started, 6)
    return record


def _age(fs: Any, path: str) -> float | None:
    """Seconds since a local file was last modified; None elsewhere (an object store shows an
    object only once it is whole, so one without its footer is never still being written)."""
    if not isinstance(fs, LocalFileSystem):
        return None
    try:
        return max(0.0, time.time() - os.stat(path).st_mtime)
    except OSError:
        return None


def failed_record(file: InputFile, output: str | None, reason: str) -> dict[str, Any]:
    """The record of a file that was not processed: also what process_to starts from."""
    return {
        "path": file.url, "output": output, "status": Status.FAILED, "reason": reason,
        "bytes_in": file.size, "bytes_out": 0, "row_groups": 0, "pages": 0,
        "chunks_with_column_index": 0, "chunks_without_column_index": 0, "chunks_from_page_stats": 0,
        "bloom_filters": 0,
        "without_column_index_reasons": {}, "violations": [], "bytes_read": 0, "seconds": 0.0,
        "index_bytes_read": 0, "copy_bytes_read": 0, "no_page_skipping": None,
        "page_stats_fallback_reasons": {}, "notes": [],
        "chunk_statistics": {"copied": 0, "filled": 0, "replaced": 0},
        "retryable": False,  # True only for a failure a retry may mend (pageindex.errors.retryable)
        "version": file.version,  # the file's version after the run, as a listing gives it
        # compiled or arrow: the path of the process that read the file (None: not read as Parquet)
        "scan_path": None,
    }


def _copy_unchanged(file: InputFile, output: str, record: dict[str, Any], options: JobOptions) -> None:
    """Copy a file that needed no change to its output (a complete mirror); a failed copy fails
    the file, whose record then names no output."""
    try:
        copy_file(file.url, output, options.storage_options)
    except (OSError, PageIndexError) as err:
        record.update(status=Status.FAILED, reason=f"{record['reason'] or record['status']}; "
                                                   f"copy to {output} failed: {err}")
        return
    record.update(output=output, bytes_out=file.size)


def copy_file(src_url: str, dst_url: str, storage_options: dict[str, Any]) -> None:
    """Copy a file unchanged, server-side within one filesystem, streamed across two."""
    src_fs, src = resolve(src_url, storage_options=storage_options)
    dst_fs, dst = resolve(dst_url, storage_options=storage_options)
    parent = posixpath.dirname(dst)
    if parent:
        dst_fs.makedirs(parent, exist_ok=True)
    if src_fs is dst_fs and isinstance(src_fs, LocalFileSystem):
        _copy_local(src, dst)
        return
    if src_fs is dst_fs:  # server-side on an object store (S3 CopyObject)
        src_fs.copy(src, dst)
        return
    with src_fs.open(src, "rb") as reader, dst_fs.open(dst, "wb") as writer:
        shutil.copyfileobj(reader, writer, COPY_BLOCK)


def _copy_local(src: str, dst: str) -> None:
    """Copy into a temporary renamed over `dst`, so no reader sees half a file. copy_file_range
    lets the filesystem share the blocks (XFS, btrfs reflinks) or copy server-side (NFS)."""
    with open(src, "rb") as reader, whole_file(LocalFileSystem(), dst) as writer:
        if not _copied_in_kernel(reader.fileno(), writer.fileno(), os.fstat(reader.fileno()).st_size):
            reader.seek(0)
            writer.seek(0)
            writer.truncate()
            shutil.copyfileobj(reader, writer, COPY_BLOCK)


def _copied_in_kernel(src: int, dst: int, size: int) -> bool:
    """Copy `size` bytes between descriptors with copy_file_range; False where the kernel or the
    filesystem cannot (the caller then copies through user space)."""
    if not hasattr(os, "copy_file_range"):
        return False
    pos = 0
    while pos < size:
        try:
            sent = os.copy_file_range(src, dst, size - pos, pos, pos)
        except OSError as err:
            if err.errno in NO_KERNEL_COPY:
                return False
            raise
        if sent == 0:
            raise OSError(errno.EIO, f"the file ended after {pos} of {size} bytes while copied")
        pos += sent
    return True
