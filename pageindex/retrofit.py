"""Retrofit: read a file's footer, plan, compute each chunk's indexes, write the tail, commit.

The only module that runs the whole pipeline; each stage lives in its own module.
"""
from __future__ import annotations

import os
import stat
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Iterator

from pageindex.errors import ConcurrentModificationError, PageIndexError, ReadOnlyFileError
from pageindex.format.collector import collector_paused
from pageindex.format.footer import DEFAULT_MAX_PAGE_BYTES, Footer
from pageindex.format.opened import OpenAhead, open_file
from pageindex.index.bloom.columns import choose
from pageindex.index.bloom.options import bloom_options
from pageindex.index.bloom.sbbf import DEFAULT_FPP, DEFAULT_MAX_BYTES
from pageindex.index.compute import PAGE_STATS, ChunkReport, compute_indexes
from pageindex.index.chunk_stats import STATISTICS_CHANGES, NewStatistics, new_statistics
from pageindex.index.marker import is_fully_indexed, marker_value
from pageindex.index.original import kept_prefix, with_moved_filters
from pageindex.index.parallel import threads_option
from pageindex.index.plan import ChunkPlan, plan_chunks
from pageindex.index.skipping import NoSkipping, no_page_skipping
from pageindex.index.soundness import Violation, structural_flaws, suspect_writer
from pageindex.index.tail_writer import build_tail
from pageindex.io.commit import (
    CleanupAt,
    PendingCommit,
    begin_commit,
    check_unchanged,
    clean_stale_temporaries,
    cleanup_point,
)
from pageindex.io.prefix_copy import COPY
from pageindex.io.storage import Source, resolve
from pageindex.scan import compiled
from pageindex.verify import CHUNK_STATISTICS, verify_source
from pageindex.version import __version__

__all__ = ["ChunkReport", "NoSkipping", "RetrofitResult", "Status", "Violation", "retrofit", "scan_path"]


class Status(StrEnum):
    """A file's outcome. retrofit gives the first five (REPAIRED: its existing index was wrong and
    is rebuilt; REPAIR_NEEDED: the same, found by a dry run); the job gives the others to files
    it skipped (not Parquet), found changed while processed, or failed on, UNCHANGED to
    files not opened because they are listed as a run state recorded them (--state),
    BEING_WRITTEN to recent files whose footer is not there yet and READ_ONLY to files in
    place that no one may write: both left as they are for a later run."""

    INDEXED = "indexed"
    ALREADY_INDEXED = "already_indexed"
    DRY_RUN = "dry_run"
    REPAIRED = "repaired"
    REPAIR_NEEDED = "repair_needed"
    SKIPPED = "skipped"
    CHANGED = "changed"
    FAILED = "failed"
    UNCHANGED = "unchanged"
    BEING_WRITTEN = "being_written"
    READ_ONLY = "read_only"


@dataclass(frozen=True)
class RetrofitResult:
    path: str
    output: str | None
    status: str  # Status.INDEXED, ALREADY_INDEXED, DRY_RUN, REPAIRED or REPAIR_NEEDED
    bytes_in: int
    bytes_out: int
    row_groups: int
    chunks: tuple[ChunkReport, ...] = field(default_factory=tuple)
    bytes_read: int = 0
    seconds: float = 0.0
    violations: tuple[Violation, ...] = field(default_factory=tuple)  # what was wrong in the index repaired
    copy_bytes_read: int = 0  # of bytes_read, those read to copy the prefix for the commit
    notes: tuple[str, ...] = ()  # what the run did not do as asked, e.g. a named column the file lacks
    # The written file's version as a listing gives it (S3 ETag, local mtime in ns), where known.
    written_version: str | None = None
    # The code this process scanned the file's pages with: compiled (the kernels built into the
    # wheel) or arrow (Arrow's decode, where they do not load): a report shows which files took it.
    scan_path: str | None = None

    @property
    def pages(self) -> int:
        return sum(c.pages for c in self.chunks)

    @property
    def index_bytes_read(self) -> int:
        """Of bytes_read, those read to compute the index (footer, headers, pages)."""
        return self.bytes_read - self.copy_bytes_read

    @property
    def no_page_skipping(self) -> NoSkipping | None:
        """Why the index computed lets a reader skip no page, if it does not (None too when no
        index was computed)."""
        return no_page_skipping((c.pages, c.column_index) for c in self.chunks)

    def counts(self) -> dict[str, Any]:
        """What the result's chunks and reads add up to: the fields a report record shares with
        to_dict."""
        return {
            "chunks_with_column_index": sum(c.column_index for c in self.chunks),
            "chunks_without_column_index": sum(not c.column_index for c in self.chunks),
            "chunks_from_page_stats": sum(c.source == PAGE_STATS for c in self.chunks),
            "bloom_filters": sum(c.bloom_filter > 0 for c in self.chunks),
            "index_bytes_read": self.index_bytes_read, "copy_bytes_read": self.copy_bytes_read,
            "no_page_skipping": self.no_page_skipping,
            # why chunks were decoded exactly though page-header statistics were trusted
            "page_stats_fallback_reasons": dict(Counter(str(c.fallback) for c in self.chunks if c.fallback)),
            # chunks whose Statistics the new footer changes, by how (index.chunk_stats)
            "chunk_statistics": {how: sum(c.statistics == how for c in self.chunks) for how in STATISTICS_CHANGES},
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path, "output": self.output, "status": self.status,
            "bytes_in": self.bytes_in, "bytes_out": self.bytes_out,
            "row_groups": self.row_groups, "pages": self.pages, **self.counts(),
            "chunks": [c.__dict__ for c in self.chunks],
            "bytes_read": self.bytes_read, "seconds": round(self.seconds, 6),
            "violations": [str(v) for v in self.violations], "notes": list(self.notes),
            "scan_path": self.scan_path,
        }


def retrofit(src: str, dst: str | None = None, *, truncate_length: int = 64, force: bool = False,
             filesystem: Any = None, dst_filesystem: Any = None, dry_run: bool = False,
             trust_page_stats: bool = False, stale_temp_seconds: float = 3600.0,
             bloom_filter: str | list[str] | tuple[str, ...] = "none", bloom_fpp: float = DEFAULT_FPP,
             bloom_max_bytes: int = DEFAULT_MAX_BYTES, verify_existing: bool = False,
             ahead: OpenAhead | None = None, chunk_statistics: bool = True,
             threads: int | str = 1, max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES) -> RetrofitResult:
    """Give `src` a page index; write to `dst`, or replace `src` atomically when dst is None.
    The output is the original file, byte for byte and its footer included, then the new index
    blocks and footer: a reader that learned the old length still reads the old file. A rerun
    replaces what an earlier retrofit appended (index.original), so the file does not grow.

    filesystem: the fsspec filesystem of src, and of dst unless dst_filesystem is given (by default
    each path's own, from its URL).
    trust_page_stats: build a chunk's ColumnIndex bounds from its page-header statistics, without
    decoding values, where those can be trusted (see page_stats); other chunks are decoded exactly.
    stale_temp_seconds: temporaries (or S3 multipart uploads) that dead runs left for the
    destination are removed once older than this; younger ones may belong to a live run. A
    non-dry run removes them before it opens the source, except in place on S3: there the run
    that finds the object already indexed does (one ListMultipartUploads, a request a commit
    does without), so a dead run's uploads go at the first later run that finds the object
    indexed (io.commit.cleanup_point).
    bloom_filter: "none", "auto" (the leaves where a filter pays, see index.bloom.options) or the
    dotted columns whose chunks get a split block bloom filter, started at the size for each
    chunk's values at false positive rate bloom_fpp, at most bloom_max_bytes, then folded as its
    set bits allow (as pyarrow 26 does). A chunk that has a filter keeps it unless `force`. On a
    file that already has its page index, only named columns that lack filters make it processed
    again (without `force`). A named column the file lacks, or whose type has no filter, is left
    out with a note (RetrofitResult.notes); a list or map may be named by its own name.
    verify_existing: check an existing complete index against the data before keeping it (as
    `verify` does); it is always checked for structural impossibilities, and against the data
    when its writer is known to write wrong indexes. A wrong index is rebuilt: status REPAIRED.
    ahead: `src` already being opened (the job opens a task's next file while it processes the
    current one); taken instead of opening src, its error raised as opening src would raise it.
    chunk_statistics: give chunks that readers could not prune row groups on min_value/max_value
    (index.chunk_stats: deprecated bounds a declared order would hide, else the exact bounds of
    the new ColumnIndex); False leaves every chunk's statistics as they are, except bounds a
    repair found wrong (they would drop rows): those are always replaced.
    threads: scan this many of the file's column chunks at a time, each on a thread of its own
    ("auto": two where the process may use two CPUs, else one); the output is the same byte for
    byte, and so is any error. One (the default) scans them one after the other on the calling
    thread, as a process that already runs a file per core wants.
    max_page_bytes: refuse (UnsupportedFileError, the file unchanged) a page larger than this,
    compressed or decompressed, or with more values than this at four bytes each: what one page
    may cost in memory (see docs/security.md).
    """
    if truncate_length < 1:
        raise ValueError("truncate_length must be at least 1")
    if max_page_bytes < 1:
        raise ValueError("max_page_bytes must be at least 1")
    if ahead is not None and (ahead.path != src or ahead.max_page_bytes != max_page_bytes):
        raise ValueError(f"ahead opens {ahead.path} (pages up to {ahead.max_page_bytes} bytes), not {src}")
    bloom = bloom_options(bloom_filter, bloom_fpp, bloom_max_bytes)
    scan_threads = threads_option(threads)
    started = time.monotonic()
    dst_fs, dst_path = resolve(src if dst is None else dst,
                               filesystem if dst_filesystem is None else dst_filesystem)
    cleanup = None if dry_run else cleanup_point(dst_fs, in_place=dst is None)
    if cleanup is CleanupAt.BEFORE_OPENING:
        clean_stale_temporaries(dst_fs, dst_path, stale_temp_seconds)

    def run() -> RetrofitResult:
        nonlocal dst_fs, dst_path
        opened = open_file(src, filesystem, max_page_bytes) if ahead is None else ahead.take()
        with opened.source as source:
            footer = opened.footer
            chosen = choose(bloom, footer.leaves)
            plan = plan_chunks(footer, trust_page_stats, bloom, force, chosen)
            violations: tuple[Violation, ...] = ()
            if is_fully_indexed(footer) and not force:
                violations = _existing_index_violations(source, footer, verify_existing, scan_threads)
                if not violations and not _named_filters_missing(plan):
                    if cleanup is CleanupAt.FOUND_INDEXED:
                        clean_stale_temporaries(dst_fs, dst_path, stale_temp_seconds)
                    return _result(src, None, Status.ALREADY_INDEXED, source, footer, 0, (), started,
                                   notes=chosen.notes)
            if dst is None:
                dst_fs, dst_path = source.fs, source.path
                if not dry_run:
                    _refuse_read_only(source)
            kept = kept_prefix(source, footer, plan)
            pending = None if dry_run else begin_commit(source, kept.length, dst_path, dst_fs)
            with _undone_on_failure(source, pending):
                indexes, reports = compute_indexes(source, footer, plan, truncate_length, scan_threads)
                with_moved_filters(source, kept, indexes)
                wrong = frozenset((v.row_group, v.column) for v in violations if v.check == CHUNK_STATISTICS)
                statistics = new_statistics(footer, plan, indexes, chunk_statistics, wrong)
                reports = _with_statistics_reported(footer, reports, statistics)
                marker = marker_value(__version__, truncate_length, trust_page_stats, bloom, kept.length,
                                      chunk_statistics)
                tail = build_tail(footer, indexes, marker, kept.length, {k: v.stats for k, v in statistics.items()})
                written = None if pending is None else pending.finish(tail)
            if violations:
                status = Status.REPAIR_NEEDED if dry_run else Status.REPAIRED
            else:
                status = Status.DRY_RUN if dry_run else Status.INDEXED
            return replace(_result(src, None if dry_run else dst or src, status, source, footer,
                                   kept.length + len(tail), tuple(reports), started, violations, chosen.notes),
                           written_version=written)

    # Paused from the footer's decode on, and until what the run built (the decoded footer above
    # all) is freed with run's frame: the collector's first pass after a pause walks every object
    # made during it that is still alive (format.collector).
    with collector_paused():
        return run()


def _with_statistics_reported(footer: Footer, reports: list[ChunkReport],
                              statistics: dict[tuple[int, int], NewStatistics]) -> list[ChunkReport]:
    """Each chunk's report, saying how its statistics changed, if they did."""
    how = {(rg, footer.leaves[col].dotted): new.how for (rg, col), new in statistics.items()}
    return [replace(r, statistics=how[(r.row_group, r.column)]) if (r.row_group, r.column) in how else r
            for r in reports]


def _existing_index_violations(source: Source, footer: Footer, verify_existing: bool, threads: int
                               ) -> tuple[Violation, ...]:
    """What is wrong with a complete existing index: structural impossibilities first (index
    blocks only), then, when asked or its writer is suspect, whatever `verify` finds in the data."""
    flaws = structural_flaws(source, footer)
    if flaws or not (verify_existing or suspect_writer(footer)):
        return flaws
    return verify_source(source, footer, threads).violations


def _named_filters_missing(plan: tuple[tuple[ChunkPlan, ...], ...]) -> bool:
    """Whether a column named for a bloom filter has a chunk without one (auto never reopens a file)."""
    return any(planned.bloom is not None and not planned.bloom.auto for row in plan for planned in row)


def _result(src: str, output: str | None, status: Status, source: Source, footer: Footer, bytes_out: int,
            reports: tuple[ChunkReport, ...], started: float, violations: tuple[Violation, ...] = (),
            notes: tuple[str, ...] = ()) -> RetrofitResult:
    copied = sum(length for _, length, purpose in source.stats.ranges if purpose == COPY)
    return RetrofitResult(src, output, status, source.size, bytes_out, len(footer.chunks), reports,
                          source.stats.bytes_read, time.monotonic() - started, violations, copied, notes,
                          scan_path=scan_path())


def scan_path() -> str | None:
    """The path this process's scan takes (scan.compiled.path): compiled or arrow; None when it
    cannot be said (PAGEINDEX_SCAN_KERNEL insists on kernels that do not load, or names no path)."""
    try:
        return compiled.path()
    except (ImportError, ValueError):
        return None


def _refuse_read_only(source: Source) -> None:
    """A local file in place whose mode has no write bit: its owner froze it. The commit renames
    over it, which the file's own mode does not prevent, so it is refused here (ReadOnlyFileError)."""
    if not source.local:
        return
    mode = stat.S_IMODE(os.stat(source.path).st_mode)
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        raise ReadOnlyFileError(f"read-only (mode {mode:04o}): left as is; make it writable "
                                "(chmod u+w) to index it in place", path=source.path)


@contextmanager
def _undone_on_failure(source: Source, pending: PendingCommit | None) -> Iterator[None]:
    """Abort the commit begun for `source` if anything fails before it is finished."""
    try:
        yield
    except BaseException as err:
        if pending is not None:
            pending.abort()
        if isinstance(err, PageIndexError) and not isinstance(err, ConcurrentModificationError):
            _raise_if_changed(source, err)
        raise


def _raise_if_changed(source: Source, err: PageIndexError) -> None:
    """Bytes that stop making sense mid-run may be another writer's, not corruption."""
    try:
        check_unchanged(source)
    except ConcurrentModificationError as changed:
        raise changed from err
    except PageIndexError:
        pass  # cannot tell: the original error is the one to report
