"""Discovery: expand the job's inputs (files, directories, globs, URLs) into Parquet candidates.

Hidden and underscore entries are ignored; Delta, Iceberg and Hudi table roots are detected.
"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

import fsspec

from .errors import StorageError


@dataclass(frozen=True)
class InputFile:
    """One file to process: its URL, size, and where it sits below the input it came from."""

    url: str
    size: int
    relative: str  # path below the input root, used to mirror the tree under --output


@dataclass(frozen=True)
class Discovery:
    files: tuple[InputFile, ...]
    table_formats: tuple[tuple[str, str], ...]  # (input, "delta" | "iceberg" | "hudi")


def normalize_url(url: str) -> str:
    """s3a:// and s3n:// name the same bucket and key as s3://; file:// is a local path."""
    for scheme in ("s3a://", "s3n://"):
        if url.startswith(scheme):
            return "s3://" + url[len(scheme):]
    if url.startswith("file://"):
        return url[len("file://"):]
    return url


def filesystem_for(url: str, storage_options: dict[str, Any]) -> tuple[Any, str]:
    url = normalize_url(url)
    protocol = url.split("://", 1)[0] if "://" in url else "file"
    options = storage_options if protocol == "s3" else {}
    fs, path = fsspec.core.url_to_fs(url, **options)
    return fs, path


def _with_protocol(fs: Any, path: str, like: str) -> str:
    if "://" in normalize_url(like):
        return normalize_url(like).split("://", 1)[0] + "://" + path
    return path


def is_hidden(relative: str) -> bool:
    """_SUCCESS, .crc files, _temporary/ and _delta_log/ style entries are not data files."""
    return any(part.startswith((".", "_")) for part in relative.split("/") if part)


def table_format(fs: Any, path: str) -> str | None:
    """The table format whose root is `path` or one of its ancestors, if any."""
    current = path.rstrip("/")
    while current and current not in ("/", "."):
        if fs.exists(posixpath.join(current, "_delta_log")):
            return "delta"
        if fs.exists(posixpath.join(current, ".hoodie")):
            return "hudi"
        if fs.glob(posixpath.join(current, "metadata", "*.metadata.json")):
            return "iceberg"
        parent = posixpath.dirname(current)
        if parent == current or (fs.protocol != "file" and "/" not in current):
            break
        current = parent
    return None


def discover(inputs: list[str], storage_options: dict[str, Any] | None = None) -> Discovery:
    storage_options = storage_options or {}
    files: dict[str, InputFile] = {}
    formats = []
    for raw in inputs:
        fs, path = filesystem_for(raw, storage_options)
        matches = fs.glob(path) if any(c in path for c in "*?[") else [path]
        if not matches:
            raise StorageError("input matches nothing", path=raw)
        for match in matches:
            found = _expand(fs, match, raw)
            kind = table_format(fs, match if fs.isdir(match) else posixpath.dirname(match))
            if kind:
                formats.append((raw, kind))
            for f in found:
                files.setdefault(f.url, f)
    return Discovery(tuple(sorted(files.values(), key=lambda f: f.url)), tuple(formats))


def _expand(fs: Any, path: str, like: str) -> list[InputFile]:
    try:
        if not fs.isdir(path):
            info = fs.info(path)
            return [InputFile(_with_protocol(fs, path, like), int(info["size"]), posixpath.basename(path))]
        entries = fs.find(path, withdirs=False, detail=True)
    except FileNotFoundError:
        raise StorageError("input does not exist", path=like) from None
    root = path.rstrip("/") + "/"
    out = []
    for name, info in entries.items():
        relative = name[len(root):] if name.startswith(root) else posixpath.basename(name)
        if is_hidden(relative) or info.get("type") == "directory":
            continue
        out.append(InputFile(_with_protocol(fs, name, like), int(info["size"]), relative))
    return out
