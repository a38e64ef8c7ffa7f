"""Commit: write prefix + tail to the destination atomically, never exposing a partial file.

Local paths use a unique temporary sibling and rename; other filesystems a single atomic upload.
"""
from __future__ import annotations

import os
import uuid
from typing import Any

import fsspec

from .errors import ConcurrentModificationError, StorageError
from .storage import Source, file_version

COPY_BLOCK = 8 << 20
TEMP_TAG = ".pageindex-tmp-"


def temp_name(path: str) -> str:
    """A unique hidden sibling of `path` (hidden so dataset readers skip it)."""
    head, name = os.path.split(path)
    return os.path.join(head, f".{name}{TEMP_TAG}{uuid.uuid4().hex}")


def _copy_prefix(source: Source, out: Any, length: int) -> None:
    pos = 0
    while pos < length:
        block = source.read(pos, min(COPY_BLOCK, length - pos))
        if not block:
            raise StorageError("file shrank while copying", path=source.path, offset=pos)
        out.write(block)
        pos += len(block)


def _check_unchanged(source: Source) -> None:
    now = file_version(source.fs, source.path)
    if now != source.version:
        raise ConcurrentModificationError(
            "file changed while it was processed; not overwritten", path=source.path
        )


def commit(source: Source, prefix_length: int, tail: bytes, dst: str, dst_fs: Any) -> None:
    """Write source[0:prefix_length] + tail to dst; dst == source path means in place."""
    in_place = dst == source.path and dst_fs is source.fs
    if isinstance(dst_fs, fsspec.implementations.local.LocalFileSystem):
        _commit_local(source, prefix_length, tail, dst, in_place)
    else:
        _commit_remote(source, prefix_length, tail, dst, dst_fs, in_place)


def _commit_local(source: Source, prefix_length: int, tail: bytes, dst: str, in_place: bool) -> None:
    parent = os.path.dirname(os.path.abspath(dst))
    os.makedirs(parent, exist_ok=True)
    tmp = temp_name(dst)
    try:
        with open(tmp, "wb") as out:
            _copy_prefix(source, out, prefix_length)
            out.write(tail)
            out.flush()
            os.fsync(out.fileno())
        if in_place:
            _check_unchanged(source)
        os.replace(tmp, dst)
        _fsync_dir(parent)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _commit_remote(source: Source, prefix_length: int, tail: bytes, dst: str, fs: Any,
                   in_place: bool) -> None:
    # An object store makes the object visible only when the upload completes.
    if in_place:
        _check_unchanged(source)
    try:
        with fs.open(dst, "wb") as out:
            _copy_prefix(source, out, prefix_length)
            out.write(tail)
    except OSError as err:
        raise StorageError(f"upload failed: {err}", path=dst) from err
