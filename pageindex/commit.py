"""Commit: write prefix + tail atomically (local: temporary sibling + rename; S3: multipart with
the prefix copied server-side), refusing when the source changed; clean dead runs' temporaries.
"""
from __future__ import annotations

import os
import posixpath
import stat
import time
import uuid
from typing import Any

import fsspec

from .errors import ConcurrentModificationError, StorageError
from .storage import Source, current_version, storage_errors

COPY_BLOCK = 8 << 20
TEMP_TAG = ".pageindex-tmp-"


def temp_name(path: str) -> str:
    """A unique hidden sibling of `path` (hidden so dataset readers skip it)."""
    head, name = os.path.split(path)
    return os.path.join(head, f".{name}{TEMP_TAG}{uuid.uuid4().hex}")


def _copy_prefix(source: Source, out: Any, length: int) -> None:
    if source.local and hasattr(os, "copy_file_range") and hasattr(out, "fileno"):
        _copy_prefix_in_kernel(source, out, length)
        return
    pos = 0
    while pos < length:
        block = source.read(pos, min(COPY_BLOCK, length - pos), "copy")
        if not block:
            raise StorageError("file shrank while copying", path=source.path, offset=pos)
        out.write(block)
        pos += len(block)


def _copy_prefix_in_kernel(source: Source, out: Any, length: int) -> None:
    """Local to local: the kernel copies (or reflinks) the bytes without a trip through Python."""
    out.flush()
    src_fd = source.fileno()
    pos = 0
    while pos < length:
        try:
            sent = os.copy_file_range(src_fd, out.fileno(), length - pos, pos, pos)
        except OSError as err:
            raise StorageError(f"copy failed: {err}", path=source.path, offset=pos) from err
        if sent == 0:
            raise StorageError("file shrank while copying", path=source.path, offset=pos)
        pos += sent
    source.stats.record(0, length, "copy")
    out.seek(length)


def _check_unchanged(source: Source) -> None:
    if current_version(source) != source.version:
        raise ConcurrentModificationError(
            "file changed while it was processed; not overwritten", path=source.path
        )


def commit(source: Source, prefix_length: int, tail: bytes, dst: str, dst_fs: Any) -> None:
    """Write source[0:prefix_length] + tail to dst; dst == source path means in place."""
    in_place = dst == source.path and dst_fs is source.fs
    if isinstance(dst_fs, fsspec.implementations.local.LocalFileSystem):
        _commit_local(source, prefix_length, tail, dst, in_place)
    elif is_s3(dst_fs) and is_s3(source.fs):
        _commit_s3(source, prefix_length, tail, dst, dst_fs, in_place)
    else:
        _commit_remote(source, prefix_length, tail, dst, dst_fs, in_place)


def is_s3(fs: Any) -> bool:
    return "s3" in (fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,))


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
            # The replacement keeps the original's permissions, not the umask's.
            os.chmod(tmp, stat.S_IMODE(os.stat(source.path).st_mode))
        # Also when writing elsewhere: the index must describe the prefix bytes that were copied.
        _check_unchanged(source)
        _drop_stale_checksum(dst)
        os.replace(tmp, dst)
        _fsync_dir(parent)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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


def _commit_remote(source: Source, prefix_length: int, tail: bytes, dst: str, fs: Any,
                   in_place: bool) -> None:
    # An object store makes the object visible only when the upload completes.
    _check_unchanged(source)
    with storage_errors("upload", dst):
        with fs.open(dst, "wb") as out:
            _copy_prefix(source, out, prefix_length)
            out.write(tail)


# S3 refuses parts under 5 MiB except the last, and copies at most 5 GiB per part.
S3_MIN_PART = 5 << 20
S3_MAX_PART = 5 << 30


def _commit_s3(source: Source, prefix_length: int, tail: bytes, dst: str, fs: Any,
               in_place: bool) -> None:
    """The object appears whole at CompleteMultipartUpload; the prefix never leaves S3."""
    bucket, key = fs.split_path(dst)[:2]
    etag = source.version.etag
    if prefix_length < S3_MIN_PART or etag is None:
        # Too small for a copied part: one PUT of the (small) object.
        body = source.read(0, prefix_length, "copy") + tail
        _check_unchanged(source)
        _s3_call(fs, dst, "put_object", Bucket=bucket, Key=key, Body=body)
        return
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
        _check_unchanged(source)
        _s3_call(fs, dst, "complete_multipart_upload", Bucket=bucket, Key=key, UploadId=upload,
                 MultipartUpload={"Parts": parts})
    except BaseException:
        try:
            fs.call_s3("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload)
        except Exception:  # noqa: BLE001 - the original failure is what must surface
            pass  # the bucket's lifecycle rule or the next run's cleanup removes it
        raise
    fs.invalidate_cache(dst)


def _s3_call(fs: Any, path: str, method: str, **kwargs: Any) -> dict:
    try:
        with storage_errors(f"S3 {method}", path):
            return fs.call_s3(method, **kwargs)
    except StorageError as err:
        if "PreconditionFailed" in err.reason or "412" in err.reason:
            raise ConcurrentModificationError(
                "object changed while it was processed; not overwritten", path=path) from err
        raise


def clean_stale_temporaries(fs: Any, path: str, older_than: float) -> int:
    """Remove what dead attempts left for this file: temporary siblings (local) or incomplete
    multipart uploads (S3), if older than `older_than` seconds (younger ones may be live)."""
    now = time.time()
    removed = 0
    if is_s3(fs):
        bucket, key = fs.split_path(path)[:2]
        try:
            with storage_errors("list uploads", path):
                uploads = fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=key).get("Uploads", [])
        except StorageError:
            return 0  # cleanup is best effort; the next run tries again
        for upload in uploads:
            initiated = upload.get("Initiated")
            if upload.get("Key") == key and initiated is not None and now - initiated.timestamp() > older_than:
                fs.call_s3("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload["UploadId"])
                removed += 1
        return removed
    head, name = posixpath.split(path)
    for candidate in fs.glob(posixpath.join(head, f".{name}{TEMP_TAG}*")):
        try:
            info = fs.info(candidate)
            if now - float(info.get("mtime") or now) > older_than:
                fs.rm(candidate)
                removed += 1
        except FileNotFoundError:
            continue
    return removed

