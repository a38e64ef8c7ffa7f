"""Checks made before any file is touched: here, that a report path can be written at the end.

A run must not change every file and then fail on its report (the CLI's and the job's --report).
"""
from __future__ import annotations

import os
import posixpath
import uuid
from typing import Any

from pageindex.errors import StorageError, UsageError
from pageindex.io.storage import resolve


def check_report_path(url: str | None, storage_options: dict[str, Any], what: str = "the report") -> None:
    """Raises UsageError when `what` (the report, the summary) could not be written at `url`: a
    directory there, a parent that is a file, no permission. A local path is judged without writing anything; on
    an object store a probe object is written and removed next to it (a denied access or a
    missing bucket: UsageError; another failure: StorageError, which a retry may mend)."""
    if url is None:
        return
    try:
        fs, path = resolve(url, storage_options=storage_options)
    except (ValueError, ImportError) as err:
        raise UsageError(f"{what} cannot be written here: {err}", path=url) from None
    if "file" in _protocols(fs):
        _check_local(url, path, what)
    else:
        _probe(url, fs, path, what)


def _protocols(fs: Any) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def _check_local(url: str, path: str, what: str) -> None:
    if os.path.isdir(path):
        raise UsageError(f"{what} cannot be written here: it is a directory", path=url)
    if os.path.exists(path):
        if not os.access(path, os.W_OK):
            raise UsageError(f"{what} cannot be written here: permission denied", path=url)
        return
    # The report's directory is created at the end: its nearest existing ancestor must be a
    # directory this process may create entries in.
    ancestor = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise UsageError(f"{what} cannot be written here: {ancestor} is not a directory", path=url)
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise UsageError(f"{what} cannot be written here: {ancestor} is not writable", path=url)


def _probe(url: str, fs: Any, path: str, what: str) -> None:
    """Write and remove an empty object next to the report: what the store allows, learned now."""
    probe = posixpath.join(posixpath.dirname(path), f".{posixpath.basename(path)}.probe-{uuid.uuid4().hex}")
    try:
        if fs.isdir(path):
            raise UsageError(f"{what} cannot be written here: it is a directory", path=url)
        fs.pipe_file(probe, b"")
        fs.rm_file(probe)
    except (PermissionError, FileNotFoundError) as err:  # access denied, no such bucket
        raise UsageError(f"{what} cannot be written here: {type(err).__name__}: {err}",
                         path=url) from None
    except UsageError:
        raise
    except Exception as err:  # noqa: BLE001 - botocore/aiohttp errors once retries are spent
        raise StorageError(f"writing a probe next to {what} failed: {type(err).__name__}: {err}",
                           path=url) from err
