"""Commit: write prefix + tail atomically (local: temporary sibling, swapped in by an atomic
exchange; S3: multipart with the prefix copied server-side), refusing when the source changed.
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import functools
import hashlib
import os
import posixpath
import re
import socket
import stat
import threading
import time
import uuid
from contextlib import contextmanager
from enum import Enum
from typing import Any, Iterator

import fsspec

from pageindex.errors import ConcurrentModificationError, StorageError
from pageindex.io import temporaries
from pageindex.io.prefix_copy import COPY, LIBC, copy_prefix
from pageindex.io.storage import Source, current_version, local_version, storage_errors
from pageindex.io.transport import is_s3

TEMP_TAG = ".pageindex-tmp-"


# The longest directory entry ext4, XFS, btrfs and tmpfs allow, in bytes.
NAME_MAX = 255
# A temporary's suffix names its writer: HOST-PID-UNIQUE, HOST 8 hex digits of the machine (and
# PID namespace), PID the writing process (at most 7 digits: Linux's PID_MAX_LIMIT is 2^22).
_SUFFIX = re.compile(r"([0-9a-f]{8})-([0-9]{1,7})-[0-9a-f]{32}")
_SUFFIX_MAX = 8 + 1 + 7 + 1 + 32


@functools.lru_cache(maxsize=1)
def host_token() -> str:
    """8 hex digits naming this machine's process space: its host name, its boot (a reboot ends
    every writer) and its PID namespace (two containers may share a host name, not their PIDs)."""
    parts = [socket.gethostname()]
    for where, read in (("/proc/sys/kernel/random/boot_id", lambda p: open(p).read().strip()),
                        ("/proc/self/ns/pid", os.readlink)):
        try:
            parts.append(read(where))
        except OSError:
            parts.append("")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:8]


def temp_prefix(name: str) -> str:
    """What every temporary for the file `name` starts with (hidden, so dataset readers skip it).
    A long name is cut so that prefix + a unique suffix still fits in one directory entry."""
    room = NAME_MAX - len(TEMP_TAG) - 1 - _SUFFIX_MAX
    while len(os.fsencode(name)) > room:
        name = name[:-1]
    return f".{name}{TEMP_TAG}"


def temp_name(path: str) -> str:
    """A unique temporary sibling of `path`, named after this process (see writer_gone)."""
    head, name = os.path.split(path)
    return os.path.join(head, f"{temp_prefix(name)}{host_token()}-{os.getpid()}-{uuid.uuid4().hex}")


def writer_gone(suffix: str) -> bool:
    """Whether the process that named a temporary with this suffix (after temp_prefix) is known
    to be gone: it ran on this machine, in this PID namespace, and no process has its PID now.
    Unknown (another host, an older name without its writer, a PID now alive, possibly reused):
    False, and the temporary waits for its age."""
    match = _SUFFIX.fullmatch(suffix)
    if match is None or match.group(1) != host_token():
        return False
    pid = int(match.group(2))
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # PermissionError: alive, another user's
        return False
    return False


# renameat2(RENAME_EXCHANGE) (Linux 3.15+, glibc 2.28+) swaps two names in one atomic step.
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_RENAMEAT2: object = getattr(LIBC, "renameat2", None)


def _exchange(a: str, b: str) -> bool:
    """Atomically swap the files named a and b; False where the OS or filesystem cannot."""
    if _RENAMEAT2 is None:
        return False
    if _RENAMEAT2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), b)


def check_unchanged(source: Source) -> None:
    """Refuse to go on when the file at the source's path is no longer the version it opened."""
    if current_version(source) != source.version:
        raise ConcurrentModificationError(
            "file changed while it was processed; not overwritten", path=source.path
        )


class PendingCommit:
    """A commit whose tail is not known yet: finish(tail) completes it, abort() undoes it."""

    def __init__(self, source: Source, prefix_length: int, dst: str, dst_fs: Any) -> None:
        self.source, self.prefix_length, self.dst, self.dst_fs = source, prefix_length, dst, dst_fs

    def finish(self, tail: bytes) -> str | None:
        """Write the file; its version as a listing will give it (the ETag S3 answered the write
        with, a local file's mtime in nanoseconds), None where the store did not say."""
        if is_s3(self.dst_fs) and is_s3(self.source.fs):
            return _commit_s3(self.source, self.prefix_length, tail, self.dst, self.dst_fs)
        _commit_remote(self.source, self.prefix_length, tail, self.dst, self.dst_fs)
        return None

    def abort(self) -> None:
        """Nothing was written before finish()."""


class _LocalCommit(PendingCommit):
    """Temporary sibling, then exchange (in place) or rename. From a local source the prefix copy
    (and its fsync) runs in a thread from the start; the kernel copies, overlapping the caller."""

    def __init__(self, source: Source, prefix_length: int, dst: str, dst_fs: Any) -> None:
        in_place = dst == source.path and dst_fs is source.fs
        if in_place:
            # A symlink stays a link: the file it points to is replaced (its temporary sibling
            # is made beside that file), as any writer through the link would change it.
            dst = os.path.realpath(dst)
        super().__init__(source, prefix_length, dst, dst_fs)
        self.in_place = in_place
        self.parent = os.path.dirname(os.path.abspath(dst))
        self.tmp = temp_name(dst)
        with storage_errors("create the temporary file", dst):
            if len(os.fsencode(os.path.basename(dst))) > NAME_MAX:
                raise OSError(errno.ENAMETOOLONG, f"file name longer than {NAME_MAX} bytes")
            self.created_dirs = _make_dirs(self.parent)
            try:
                with temporaries.held():  # the file never exists unrecorded
                    self.out = open(self.tmp, "wb")
                    self.tmp_inode = os.fstat(self.out.fileno()).st_ino
                    temporaries.record(self.tmp, self.tmp_inode)
            except BaseException:
                _remove_dirs(self.created_dirs)
                raise
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._copier: threading.Thread | None = None
        if source.local:
            self._copier = threading.Thread(target=self._copy, name="pageindex-copy", daemon=True)
            self._copier.start()

    def _copy(self) -> None:
        try:
            copy_prefix(self.source, self.out, self.prefix_length, self._stop)
            if not self._stop.is_set():
                self.out.flush()
                os.fdatasync(self.out.fileno())  # write-back now, not at the final fsync
        except BaseException as err:  # noqa: BLE001 - re-raised by finish() in the caller's thread
            self._error = err

    def finish(self, tail: bytes) -> str | None:
        try:
            if self._copier is None:
                copy_prefix(self.source, self.out, self.prefix_length)
            else:
                self._copier.join()
                if self._error is not None:
                    raise self._error
            self.out.write(tail)
            self.out.flush()
            os.fsync(self.out.fileno())
            # Renames and chmod keep it: the version the next listing gives, taken from our own file.
            written = str(os.fstat(self.out.fileno()).st_mtime_ns)
            self.out.close()
            if self.in_place:
                # The replacement keeps the original's permissions, not the umask's.
                os.chmod(self.tmp, stat.S_IMODE(os.stat(self.source.path).st_mode))
            with _commit_lock(self.dst if self.in_place else None):
                # Also when writing elsewhere: the index must describe the prefix bytes that were copied.
                check_unchanged(self.source)
                _drop_stale_checksum(self.dst)
                with temporaries.held():  # swapped in and forgotten, or neither
                    if not (self.in_place and self._swap_in()):
                        os.replace(self.tmp, self.dst)
                    temporaries.forget(self.tmp)
            _fsync_dir(self.parent)
            return written
        except BaseException:
            self.abort()
            # An immutable file (chattr +i), a full disk, a directory in the file's place: a
            # typed error naming the file, which is left as it was.
            with storage_errors("commit", self.dst):
                raise

    def _swap_in(self) -> bool:
        """Replace the source with the temporary by an atomic exchange, then look at what was
        replaced: if another writer renamed or wrote over the file after the check above, swap
        its file back and refuse. (A plain rename after the check would lose that writer's
        bytes.) False where exchanging is not supported; the caller then renames."""
        if not _exchange(self.tmp, self.dst):
            return False
        if local_version(os.lstat(self.tmp)) != self.source.version:
            _exchange(self.tmp, self.dst)
            raise ConcurrentModificationError(
                "file changed while it was committed; the other writer's file was put back",
                path=self.source.path)
        os.unlink(self.tmp)  # the original, now under the temporary's name
        return True

    def abort(self) -> None:
        self._stop.set()
        if self._copier is not None:
            self._copier.join()
        self.out.close()
        # Only our own file: after a swap back in a three-way race the name may hold another's.
        if os.path.exists(self.tmp) and os.lstat(self.tmp).st_ino == self.tmp_inode:
            os.unlink(self.tmp)
        temporaries.forget(self.tmp)
        _remove_dirs(self.created_dirs)


# How long an in-place commit waits for another's lock on the same file: theirs holds it for
# a check, an exchange and an unlink, so a longer wait means a stranger holds it.
LOCK_WAIT_SECONDS = 30.0


@contextmanager
def _commit_lock(path: str | None) -> Iterator[None]:
    """An exclusive flock on the file an in-place commit replaces, so that pageindex writers on
    this machine check, exchange and look in turn. Interleaved, three writers' exchanges can
    leave finished files under temporary names that no one removes. A writer on another host or
    a foreign one is still caught by the version checks; where the filesystem has no flock the
    commit goes on without it."""
    if path is None:
        yield
        return
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        yield  # gone: check_unchanged refuses
        return
    try:
        _flock(fd, path)
        yield
    finally:
        os.close(fd)  # releases the lock


def _flock(fd: int, path: str) -> None:
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise ConcurrentModificationError(
                    f"another process has held a lock on the file for {LOCK_WAIT_SECONDS:.0f} s; "
                    "not overwritten", path=path) from None
            time.sleep(pause)  # a lock that is busy: no event to wait on
            pause = min(pause * 2, 0.05)
        except OSError as err:
            if err.errno in (errno.EBADF, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                return  # no flock here (some network filesystems): the version checks remain
            raise


def begin_commit(source: Source, prefix_length: int, dst: str, dst_fs: Any) -> PendingCommit:
    """Start writing source[0:prefix_length] + a tail to come to dst (dst == source: in place)."""
    if isinstance(dst_fs, fsspec.implementations.local.LocalFileSystem):
        return _LocalCommit(source, prefix_length, dst, dst_fs)
    return PendingCommit(source, prefix_length, dst, dst_fs)


def _make_dirs(path: str) -> list[str]:
    """Create `path` and missing parents; return the ones created, deepest first."""
    missing, probe = [], path
    while not os.path.isdir(probe):
        missing.append(probe)
        probe = os.path.dirname(probe)
    try:
        os.makedirs(path, exist_ok=True)
    except BaseException:
        _remove_dirs(missing)
        raise
    return missing


def _remove_dirs(created: list[str]) -> None:
    """Remove the directories `_make_dirs` created, deepest first, up to one that is not empty
    (someone else put something there)."""
    for directory in created:
        try:
            os.rmdir(directory)
        except FileNotFoundError:
            continue
        except OSError:
            break


def _drop_stale_checksum(path: str) -> None:
    """Hadoop's local filesystem keeps a ".NAME.crc" sidecar and refuses a file that no longer
    matches it; without one it reads the file unchecked. Removed before the new file appears."""
    head, name = os.path.split(path)
    crc = os.path.join(head, f".{name}.crc")
    if os.path.exists(crc):
        os.unlink(crc)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _commit_remote(source: Source, prefix_length: int, tail: bytes, dst: str, fs: Any) -> None:
    # An object store makes the object visible only when the upload completes.
    check_unchanged(source)
    with storage_errors("upload", dst):
        with fs.open(dst, "wb") as out:
            copy_prefix(source, out, prefix_length)
            out.write(tail)


# S3 refuses parts under 5 MiB except the last, and copies at most 5 GiB per part.
S3_MIN_PART = 5 << 20
S3_MAX_PART = 5 << 30


def _commit_s3(source: Source, prefix_length: int, tail: bytes, dst: str, fs: Any) -> str | None:
    """The object appears whole at CompleteMultipartUpload; the prefix never leaves S3. Returns
    the new object's ETag, as the store answered the write."""
    bucket, key = fs.split_path(dst)[:2]
    etag = source.version.etag
    if prefix_length < S3_MIN_PART or etag is None:
        # Too small for a copied part: one PUT of the (small) object.
        body = source.read(0, prefix_length, COPY) + tail
        check_unchanged(source)
        put = _s3_call(fs, dst, "put_object", Bucket=bucket, Key=key, Body=body)
        fs.invalidate_cache(dst)
        return put.get("ETag")
    src_bucket, src_key = fs.split_path(source.path)[:2]
    upload = _s3_call(fs, dst, "create_multipart_upload", Bucket=bucket, Key=key)["UploadId"]
    try:
        parts = []
        count = -(-prefix_length // S3_MAX_PART)
        step = -(-prefix_length // count)
        for number, start in enumerate(range(0, prefix_length, step), start=1):
            end = min(start + step, prefix_length) - 1
            copied = _s3_call(
                fs, dst, "upload_part_copy", Bucket=bucket, Key=key, UploadId=upload,
                PartNumber=number, CopySource={"Bucket": src_bucket, "Key": src_key},
                CopySourceRange=f"bytes={start}-{end}", CopySourceIfMatch=etag,
            )
            parts.append({"PartNumber": number, "ETag": copied["CopyPartResult"]["ETag"]})
        sent = _s3_call(fs, dst, "upload_part", Bucket=bucket, Key=key, UploadId=upload,
                        PartNumber=len(parts) + 1, Body=tail)
        parts.append({"PartNumber": len(parts) + 1, "ETag": sent["ETag"]})
        check_unchanged(source)
        done = _s3_call(fs, dst, "complete_multipart_upload", Bucket=bucket, Key=key, UploadId=upload,
                        MultipartUpload={"Parts": parts})
    except BaseException:
        try:
            fs.call_s3("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload)
        except Exception:  # noqa: BLE001 - the original failure is what must surface
            pass  # the bucket's lifecycle rule, or a later run that finds the object indexed, removes it
        raise
    fs.invalidate_cache(dst)
    return done.get("ETag")


def _s3_call(fs: Any, path: str, method: str, **kwargs: Any) -> dict:
    try:
        with storage_errors(f"S3 {method}", path):
            return fs.call_s3(method, **kwargs)
    except StorageError as err:
        if "PreconditionFailed" in err.reason or "412" in err.reason:
            raise ConcurrentModificationError(
                "object changed while it was processed; not overwritten", path=path) from err
        raise


class CleanupAt(Enum):
    """The point of a (non-dry) run at which it removes what dead attempts left for its destination."""

    BEFORE_OPENING = "before the source is opened"
    FOUND_INDEXED = "when the file is found already indexed"


def cleanup_point(fs: Any, in_place: bool) -> CleanupAt:
    """When a run cleans its destination `fs`'s dead attempts: the one rule for local and S3.

    Listing a directory costs no request: local runs (and any other filesystem's) clean before
    every run. On S3 the listing (ListMultipartUploads) is a billed request that a run committing
    the object in place does not need: a dead run's orphan upload harms nothing while the object
    is committed again, and every later run that finds it indexed (nightly backfills rerun over
    the same tables) lists and aborts the stale ones. A run to a separate output never finds its
    destination indexed (it reads the source), so it cleans first, as a local run does."""
    return CleanupAt.FOUND_INDEXED if in_place and is_s3(fs) else CleanupAt.BEFORE_OPENING


def clean_stale_temporaries(fs: Any, path: str, older_than: float) -> int:
    """Remove what dead attempts left for this file: temporary siblings (local) or incomplete
    multipart uploads (S3), if older than `older_than` seconds (younger ones may be live). A
    local temporary whose writer is gone (writer_gone: same machine, its process dead) is
    removed at once, whatever its age."""
    now = time.time()
    removed = 0
    if is_s3(fs):
        bucket, key = fs.split_path(path)[:2]
        try:
            with storage_errors("list uploads", path):
                uploads = fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=key).get("Uploads", [])
        except StorageError:
            return 0  # cleanup is best effort; a later run tries again
        for upload in uploads:
            initiated = upload.get("Initiated")
            if upload.get("Key") == key and initiated is not None and now - initiated.timestamp() > older_than:
                try:
                    with storage_errors("abort upload", path):
                        fs.call_s3("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload["UploadId"])
                except StorageError:
                    continue  # e.g. another run aborted it first: the file itself is fine
                removed += 1
        return removed
    head, name = posixpath.split(path)
    prefix = temp_prefix(name)
    try:
        # Listed, not globbed: a name holding "[" or "*" would be read as a pattern.
        siblings = fs.ls(head, detail=False)
    except (FileNotFoundError, NotADirectoryError):
        return 0
    for candidate in siblings:
        base = posixpath.basename(candidate)
        if not base.startswith(prefix):
            continue
        try:
            info = fs.info(candidate)
            if writer_gone(base[len(prefix):]) or now - float(info.get("mtime") or now) > older_than:
                fs.rm_file(candidate)
                removed += 1
        except FileNotFoundError:
            continue
    return removed

