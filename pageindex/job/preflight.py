"""Checks made before any file is touched: here, that the report, summary and state paths can
be written at the end (proven by writing a probe beside each), and those paths made absolute.

A run must not change every file and then fail on its report (the CLI's and the job's --report).
"""
from __future__ import annotations

import os
import posixpath
import uuid
from typing import Any

from pageindex.errors import StorageError, UsageError
from pageindex.io.discovery import tidy_local
from pageindex.io.storage import normalize_url, resolve


def check_report_path(url: str | None, storage_options: dict[str, Any], what: str = "the report") -> None:
    """Raises UsageError when `what` (the report, the summary, the state) could not be written at
    `url`: a directory there, a parent that is a file, no permission, a read-only filesystem. It
    is proven by writing: an empty probe file (object) is created next to it and removed, its
    missing parent directories with it (a denied access or a missing bucket: UsageError; another
    failure on an object store: StorageError, which a retry may mend)."""
    if url is None:
        return
    try:
        fs, path = resolve(url, storage_options=storage_options)
    except (ValueError, ImportError) as err:
        raise UsageError(f"{what} cannot be written here: {err}", path=url) from None
    if "file" in _protocols(fs):
        _check_local(url, os.path.abspath(path), what)
    else:
        _probe(url, fs, path, what)


def normalised(url: str | None) -> str | None:
    """A local output path made absolute with its `.` and `..` resolved (io.discovery.tidy_local):
    the same place from whichever working directory it is written (the job's executors may not
    share the driver's). A URL of an object store as it is."""
    if url is None or ("://" in url and not url.startswith("file://")):
        return url
    return tidy_local(normalize_url(url))


def _protocols(fs: Any) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def _check_local(url: str, path: str, what: str) -> None:
    """Create a probe beside `path` (and the directories it needs), then remove them; an
    existing file at `path` is opened for writing, unchanged. Judging by permission bits is not
    enough: root passes every access() check, and a read-only mount or /proc refuses anyway."""
    if os.path.isdir(path):
        raise UsageError(f"{what} cannot be written here: it is a directory", path=url)
    if os.path.exists(path) and not os.path.isfile(path):  # /dev/stdout, a named pipe: opened at the end
        if not os.access(path, os.W_OK):
            raise UsageError(f"{what} cannot be written here: permission denied", path=url)
        return
    parent = os.path.dirname(path)
    ancestor = parent
    while not os.path.lexists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise UsageError(f"{what} cannot be written here: {ancestor} is not a directory", path=url)
    created: list[str] = []
    try:
        probe = parent
        while not os.path.isdir(probe):
            created.append(probe)
            probe = os.path.dirname(probe)
        for directory in reversed(created):
            os.mkdir(directory)
        probe = os.path.join(parent, f".{os.path.basename(path)}.probe-{uuid.uuid4().hex}")
        with open(probe, "xb"):
            pass
        os.unlink(probe)
        if os.path.isfile(path):
            with open(path, "ab"):  # nothing written: its mtime and bytes stay
                pass
    except OSError as err:
        where = f" ({err.filename})" if err.filename and err.filename != path else ""
        raise UsageError(f"{what} cannot be written here: {err.strerror or err}{where}", path=url) from None
    finally:
        for directory in created:  # deepest first; written again at the end of the run
            try:
                os.rmdir(directory)
            except OSError:
                break


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
