"""Copying a file's unchanged prefix into the commit's new file: local to local without Python
touching the bytes (direct I/O on ext4, else copy_file_range, which may reflink), else block by block.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import mmap
import os
import threading
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: no direct I/O copy (_copies_through_page_cache says so)
    fcntl = None  # type: ignore[assignment]

from pageindex.errors import StorageError
from pageindex.io.storage import Source

COPY_BLOCK = 8 << 20
# How the prefix copy labels its reads in the source's stats: what was read to copy, not to index.
COPY = "copy"

try:
    LIBC: Any = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
except (OSError, TypeError):
    LIBC = None  # no C library to load: the calls fall back (sync_file_range, renameat2 in io.commit)


def copy_prefix(source: Source, out: Any, length: int, stop: threading.Event | None = None) -> None:
    """Copy source[0:length] to out, block by block; a set `stop` ends it early (abort). Local to
    local the bytes skip Python: direct I/O where the filesystem could only copy them through the
    page cache (_copy_direct), then the kernel's copy_file_range, which may reflink instead."""
    pos = 0
    fd = _descriptor(out) if source.local else None
    if fd is not None:
        out.flush()
        if _copies_through_page_cache(fd):
            pos = _copy_direct(source, fd, length, stop)
        if hasattr(os, "copy_file_range"):
            pos = _copy_in_kernel(source, fd, pos, length, stop)
        source.stats.record(0, pos, COPY)
        out.seek(pos)
    while pos < length and not (stop and stop.is_set()):
        block = source.read(pos, min(COPY_BLOCK, length - pos), COPY)
        if not block:
            raise StorageError("file shrank while copying", path=source.path, offset=pos)
        out.write(block)
        pos += len(block)


def _descriptor(out: Any) -> int | None:
    """The OS file descriptor behind `out`, or None: fsspec's remote and in-memory files have a
    fileno() that refuses."""
    try:
        return out.fileno()
    except (AttributeError, OSError):  # io.UnsupportedOperation is an OSError
        return None


# copy_file_range's answers for "not here": no syscall, two filesystems (EXDEV: every kernel
# before 5.3 and since 5.19, for most pairs of filesystems), or one that does not implement it.
NO_KERNEL_COPY = frozenset({errno.ENOSYS, errno.EXDEV, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP})


def _copy_in_kernel(source: Source, fd: int, pos: int, length: int, stop: threading.Event | None) -> int:
    """Copy source[pos:length] with copy_file_range, each block handed to the disk at once; where
    it stopped when the kernel cannot copy between these files (the caller copies the rest)."""
    while pos < length and not (stop and stop.is_set()):
        try:
            sent = os.copy_file_range(source.fileno(), fd, min(COPY_BLOCK, length - pos), pos, pos)
        except OSError as err:
            if err.errno in NO_KERNEL_COPY:
                return pos  # another filesystem (EXDEV) or none of this: the caller copies the rest
            raise StorageError(f"copy failed: {err}", path=source.path, offset=pos) from err
        if sent == 0:
            raise StorageError("file shrank while copying", path=source.path, offset=pos)
        start_writeback(fd, pos, sent)
        pos += sent
    return pos


# ext2/3/4 (one magic number): no reflinks and no server-side copy, so copy_file_range copies into
# fresh page-cache pages, CPU that direct I/O does not spend (see bench/RESULTS.md).
_EXT4_MAGIC = 0xEF53
_FSTATFS: Any = getattr(LIBC, "fstatfs", None)
# struct statfs (120 bytes on 64-bit Linux) starts with f_type, a long; the rest is not read.
_STATFS_SIZE = 256


def _copies_through_page_cache(fd: int) -> bool:
    """Whether fd's filesystem is one where copy_file_range can only copy through the page cache
    (ext2/3/4). Elsewhere it may reflink (XFS, btrfs) or copy server-side (NFS, SMB): kept."""
    if _FSTATFS is None or fcntl is None or not hasattr(os, "O_DIRECT"):
        return False
    buf = ctypes.create_string_buffer(_STATFS_SIZE)
    if _FSTATFS(fd, buf) != 0:
        return False
    return ctypes.c_long.from_buffer(buf).value == _EXT4_MAGIC


DIRECT_BLOCK = 4 << 20
# Direct I/O wants offsets, lengths and memory aligned to the device's logical block (512 B or
# 4 KiB); the unaligned end of the prefix is left to the buffered copy.
DIRECT_ALIGN = 4096


def _copy_direct(source: Source, fd: int, length: int, stop: threading.Event | None) -> int:
    """Copy the block-aligned part of source[0:length] to fd with O_DIRECT writes made straight
    from the source's page cache: each block of the source is mapped read-only and handed to the
    write, so the kernel gives the disk the cached pages themselves. No memory is copied and no
    page cache is made for the copy; the thread waits on the disk. Returns the bytes copied; 0
    (or where it stopped) when the filesystem refuses direct I/O or a block cannot be mapped."""
    aligned = length - length % DIRECT_ALIGN
    if aligned == 0:
        return 0
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_DIRECT)
    except OSError:
        return 0
    pos = 0
    try:
        while pos < aligned and not (stop and stop.is_set()):
            try:
                # Never read by this process, only by the kernel on its behalf: a page the
                # source lost meanwhile (truncated) fails the write with EFAULT, never a SIGBUS.
                window = mmap.mmap(source.fileno(), min(DIRECT_BLOCK, aligned - pos),
                                   access=mmap.ACCESS_READ, offset=pos)
            except ValueError:
                raise StorageError("file shrank while copying", path=source.path, offset=pos) from None
            except OSError:
                break  # a source that cannot be mapped: the buffered copy goes on from pos
            try:
                sent = os.pwritev(fd, [window], pos)
            except OSError as err:
                if err.errno == errno.EINVAL:
                    break  # this alignment is refused after all: the buffered copy goes on from pos
                if err.errno == errno.EFAULT:
                    raise StorageError("file shrank while copying", path=source.path, offset=pos) from None
                raise StorageError(f"copy failed: {err}", path=source.path, offset=pos) from err
            finally:
                window.close()
            if sent <= 0:
                break
            pos += sent
    finally:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags)
    return pos


_SYNC_FILE_RANGE_WRITE = 2
_SYNC_FILE_RANGE: Any = getattr(LIBC, "sync_file_range", None)
if _SYNC_FILE_RANGE is not None:
    _SYNC_FILE_RANGE.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)


def start_writeback(fd: int, offset: int, length: int) -> bool:
    """Ask the kernel to start writing [offset, offset + length) to disk now, without waiting:
    the disk then writes while the rest is copied, and the final fdatasync has little left to
    wait for. Only a hint (durability still comes from fdatasync); False where there is none."""
    if _SYNC_FILE_RANGE is None:
        return False
    return _SYNC_FILE_RANGE(fd, offset, length, _SYNC_FILE_RANGE_WRITE) == 0
