"""Exceptions raised by pageindex, one hierarchy for every module.

Each error names the file and, where known, the row group, column and byte offset at fault.
"""
from __future__ import annotations


class PageIndexError(Exception):
    """Base of every error pageindex raises on purpose."""

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


class ThriftDecodeError(MalformedFileError):
    """A Thrift compact-protocol structure is truncated, too deep or otherwise invalid."""


class ThriftTruncatedError(ThriftDecodeError):
    """The bytes end inside a Thrift structure; with more bytes it might decode."""


class EncryptedFileError(PageIndexError):
    """The file uses Parquet modular encryption; pageindex cannot index it without keys."""


class UnsupportedFileError(PageIndexError):
    """A valid file using a feature pageindex does not handle (e.g. the LZO codec)."""


class StorageError(PageIndexError):
    """Reading, writing or committing through the filesystem failed."""


class UnmappedOptionError(PageIndexError):
    """A storage option that Arrow's S3 client cannot honor exactly (the message says which and
    why): the reads of that filesystem stay on fsspec."""


class ConcurrentModificationError(StorageError):
    """The file changed while it was being processed, so it was not overwritten."""


class OutputRefusedError(StorageError):
    """An output path that would overwrite an input, an existing file (unless asked) or a
    directory, so nothing was written."""
