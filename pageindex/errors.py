"""Exceptions raised by pageindex, one hierarchy for every module, and the exit code each means.

Each error names the file and, where known, the row group, column and byte offset at fault.
"""
from __future__ import annotations

from typing import ClassVar, Iterable

# The exit codes of the command line and the Spark job, one rule for both (a scheduler retries 1
# only): every file ended well; a failure a retry may mend; usage or configuration, found before
# anything was changed; files failed for reasons no retry can mend, and nothing retryable failed.
EXIT_OK, EXIT_RETRYABLE, EXIT_USAGE, EXIT_PERMANENT = 0, 1, 2, 3
# Ctrl-C, as shells report it (SIGTERM and SIGHUP leave with 128 + the signal: shutdown.leave).
EXIT_INTERRUPTED = 130


class PageIndexError(Exception):
    """Base of every error pageindex raises on purpose."""

    # May running again mend it? False by default: the same bytes fail the same way.
    retryable: ClassVar[bool] = False
    # Is it how pageindex was called (exit 2), found before anything was changed?
    usage: ClassVar[bool] = False

    def __init__(
        self,
        reason: str,
        *,
        path: str | None = None,
        row_group: int | None = None,
        column: str | None = None,
        offset: int | None = None,
    ) -> None:
        self.reason = reason
        self.path = path
        self.row_group = row_group
        self.column = column
        self.offset = offset
        super().__init__(self.message())

    def message(self, *, with_path: bool = True) -> str:
        """The error with its location; without the path where the caller names the file."""
        where = [self.path] if with_path and self.path is not None else []
        if self.row_group is not None:
            where.append(f"row group {self.row_group}")
        if self.column is not None:
            where.append(f"column {self.column}")
        if self.offset is not None:
            where.append(f"byte {self.offset}")
        return f"{', '.join(where)}: {self.reason}" if where else self.reason

    def located(
        self,
        *,
        path: str | None = None,
        row_group: int | None = None,
        column: str | None = None,
        offset: int | None = None,
    ) -> "PageIndexError":
        """A copy of this error with missing location parts filled in."""
        return type(self)(
            self.reason,
            path=self.path if self.path is not None else path,
            row_group=self.row_group if self.row_group is not None else row_group,
            column=self.column if self.column is not None else column,
            offset=self.offset if self.offset is not None else offset,
        )


class MalformedFileError(PageIndexError):
    """The bytes do not form a valid Parquet file (bad footer, page header, levels, values)."""


class NotParquetError(MalformedFileError):
    """The file does not start with Parquet magic: it is some other kind of file."""


class FooterMissingError(MalformedFileError):
    """The file starts as Parquet but ends before a footer: broken, or still being written (a
    direct writer puts the footer last); the job tells them apart by the file's age."""


class ThriftDecodeError(MalformedFileError):
    """A Thrift compact-protocol structure is truncated, too deep or otherwise invalid."""


class ThriftTruncatedError(ThriftDecodeError):
    """The bytes end inside a Thrift structure; with more bytes it might decode."""


class EncryptedFileError(PageIndexError):
    """The file uses Parquet modular encryption; pageindex cannot index it without keys."""


class UnsupportedFileError(PageIndexError):
    """A valid file using a feature pageindex does not handle (e.g. the LZO codec)."""


class ReadOnlyFileError(PageIndexError):
    """A file to be replaced in place whose permissions allow no one to write it (no w bit): its
    owner said it must not change, so it is left as is (rename would replace it regardless)."""


class UsageError(PageIndexError):
    """Bad arguments or configuration (an unknown table, an unwritable report path): exit code
    2, found before any file was touched."""

    usage = True


class StorageError(PageIndexError):
    """Reading, writing or committing through the filesystem failed."""

    # Timeouts, throttling, connection resets, a store briefly unavailable: the next try may pass.
    retryable = True


class MissingInputError(StorageError):
    """An input path that does not exist or a glob that matches nothing: nothing was processed."""

    retryable = False
    usage = True


class UnmappedOptionError(PageIndexError):
    """A storage option that Arrow's S3 client cannot honor exactly (the message says which and
    why): the reads of that filesystem stay on fsspec."""


class ConcurrentModificationError(StorageError):
    """The file changed while it was being processed, so it was not overwritten."""

    # Another writer owns the file now; whether it should be indexed again is for a later run
    # over the new version to decide, not for a retry of this one.
    retryable = False


class OutputRefusedError(StorageError):
    """An output path that would overwrite an input, an existing file (unless asked) or a
    directory, so nothing was written."""

    retryable = False
    usage = True


def retryable(err: BaseException) -> bool:
    """Whether running again may mend `err`. Beyond pageindex's own errors: an OSError that no
    storage layer wrapped (a full disk, a reset connection) and a MemoryError (another executor
    or a later run may have the memory) may pass next time. Any other exception is an internal
    error: a bug that fails the same way on the same bytes, so retrying only delays the alarm."""
    if isinstance(err, PageIndexError):
        return err.retryable
    return isinstance(err, (OSError, MemoryError))


def exit_code(err: BaseException) -> int:
    """The exit code of a run ended by `err` (usage 2, retryable 1, else 3)."""
    if isinstance(err, PageIndexError) and err.usage:
        return EXIT_USAGE
    return EXIT_RETRYABLE if retryable(err) else EXIT_PERMANENT


def failures_exit_code(failures: Iterable[bool], allowed: int = 0) -> int:
    """The exit code of a run whose failed files have these `retryable` flags: 0 within
    `allowed`, else 1 when any may be mended by a retry (which then reruns them all), else 3."""
    flags = list(failures)
    if len(flags) <= allowed:
        return EXIT_OK
    return EXIT_RETRYABLE if any(flags) else EXIT_PERMANENT


def combined_exit_code(codes: Iterable[int]) -> int:
    """One exit code for several outcomes: usage first, then retryable (a retry mends those and
    then reports the permanent ones), then permanent, else 0."""
    found = set(codes)
    for code in (EXIT_USAGE, EXIT_RETRYABLE, EXIT_PERMANENT):
        if code in found:
            return code
    return EXIT_OK
