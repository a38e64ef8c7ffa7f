"""Discovery: expand the job's inputs (files, directories, globs, URLs) into Parquet candidates.

Hidden and underscore entries are ignored; Delta, Iceberg and Hudi table roots are detected.
On a local disk symbolic links are followed: a file reached twice is listed once, by the first of
its paths in sorted order, and a link back to a directory it lies in is not followed (a cycle).
"""
from __future__ import annotations

import logging
import os
import posixpath
import stat
from dataclasses import dataclass
from typing import Any, Iterable

from fsspec.implementations.local import LocalFileSystem

from pageindex.errors import MissingInputError
from pageindex.io.storage import normalize_url, resolve, storage_errors


@dataclass(frozen=True)
class InputFile:
    """One file to process: its URL, size, and where it sits below the input it came from."""

    url: str
    size: int
    relative: str  # path below the input root, used to mirror the tree under --output
    # What the listing says identifies these bytes: the S3 ETag, a local file's mtime in
    # nanoseconds; None where the store gives neither (the state then never skips the file).
    version: str | None = None


@dataclass(frozen=True)
class Discovery:
    files: tuple[InputFile, ...]
    table_formats: tuple[tuple[str, str], ...]  # (input, "delta" | "iceberg" | "hudi")


def _with_protocol(fs: Any, path: str, like: str) -> str:
    if "://" in normalize_url(like):
        return normalize_url(like).split("://", 1)[0] + "://" + path
    return path


def is_hidden(relative: str) -> bool:
    """Spark's rule: names starting with "." or "_" (unless a "_col=value" partition) and
    in-flight "._COPYING_" files are not data: _SUCCESS, .crc, _temporary/, _delta_log/."""
    return any(_hidden_name(part) for part in relative.split("/") if part)


def _hidden_name(name: str) -> bool:
    return (name.startswith("_") and "=" not in name) or name.startswith(".") or name.endswith("._COPYING_")


_MARKERS = {"_delta_log": "delta", ".hoodie": "hudi"}


def _formats_below(root: str, names: list[str]) -> list[tuple[str, str]]:
    """Table roots inside a listing: a _delta_log/ or .hoodie/ directory, or Iceberg's
    metadata/*.metadata.json, found in the files' paths."""
    found = {}
    for name in names:
        parts = name[len(root):].strip("/").split("/")
        for i, part in enumerate(parts[:-1]):
            kind = _MARKERS.get(part)
            if kind is None and part == "metadata" and parts[-1].endswith(".metadata.json") and i == len(parts) - 2:
                kind = "iceberg"
            if kind:
                found.setdefault(posixpath.join(root, *parts[:i]) if i else root.rstrip("/"), kind)
    return sorted(found.items())


def glob_root(path: str) -> str:
    """The directory above the first glob character: partition folders below it are kept."""
    parts = path.split("/")
    for i, part in enumerate(parts):
        if any(c in part for c in "*?["):
            return "/".join(parts[:i])
    return path


def list_files(fs: Any, path: str) -> list[str]:
    """The data files below a directory, in path order, as Spark would see them (no hidden)."""
    return sorted(_visible(find(fs, path), path))


def _visible(entries: dict[str, dict], path: str) -> dict[str, dict]:
    """The files among a listing of `path` that are not hidden below it (Spark's rule), each
    once: of the paths that reach one file through links, the first in sorted order."""
    root = path.rstrip("/") + "/"
    visible = {name: info for name, info in entries.items()
               if info.get("type") != "directory"
               and not is_hidden(name[len(root):] if name.startswith(root) else posixpath.basename(name))}
    return {name: visible[name] for name in _first_of_each(sorted(visible), lambda n: visible[n].get(_REAL))}


# The key of a local listing's entries holding the file's (device, inode): its identity.
_REAL = "pageindex_real"
# The key of a local listing's entries holding the file's mtime in nanoseconds: its version.
_MTIME_NS = "pageindex_mtime_ns"
log = logging.getLogger("pageindex.io")


def _first_of_each(names: Iterable[str], identity: Any) -> list[str]:
    """The names whose identity (None: unknown, always kept) no name before them has."""
    seen: set = set()
    out = []
    for name in names:
        key = identity(name)
        if key is None or key not in seen:
            seen.add(key)
            out.append(name)
    return out


def find(fs: Any, path: str) -> dict[str, dict]:
    """Every file below `path` with its info, as fs.find(withdirs=False, detail=True) gives it,
    except that on a local disk links to directories are followed (fsspec lists them as files)."""
    if not isinstance(fs, LocalFileSystem):
        return fs.find(path, withdirs=False, detail=True)
    root = fs._strip_protocol(path)
    try:
        top = os.stat(root)
    except FileNotFoundError:
        return {}
    if not stat.S_ISDIR(top.st_mode):
        return fs.find(path, withdirs=False, detail=True)
    out: dict[str, dict] = {}
    _walk(root, [(top.st_dev, top.st_ino)], out, set())
    return out


def _walk(directory: str, ancestors: list[tuple[int, int]], out: dict[str, dict], cycles: set) -> None:
    """The files below `directory` into `out`, depth first in name order. `ancestors` are the
    directories the walk is in (by identity): a link to one of them would never end."""
    with os.scandir(directory) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        name = posixpath.join(directory, entry.name)
        try:
            st = os.stat(name)  # through links
        except OSError as err:
            log.warning("pageindex: warning: %s: skipped: cannot follow it (%s)", name, err.strerror or err)
            continue
        identity = (st.st_dev, st.st_ino)
        if stat.S_ISDIR(st.st_mode):
            if identity in ancestors:
                link = os.lstat(name)
                if (link.st_dev, link.st_ino) not in cycles:  # said once, however often it is reached
                    cycles.add((link.st_dev, link.st_ino))
                    log.warning("pageindex: warning: %s: not followed: a symbolic link to %s, a directory "
                                "it lies in (a cycle)", name, os.path.realpath(name))
                continue
            _walk(name, ancestors + [identity], out, cycles)
        else:
            kind = "file" if stat.S_ISREG(st.st_mode) else "other"
            out[name] = {"name": name, "size": st.st_size, "type": kind, _REAL: identity,
                         _MTIME_NS: st.st_mtime_ns}


def listed_version(fs: Any, name: str, info: dict) -> str | None:
    """The version a listing entry gives: the ETag of an object store, a local file's mtime in
    nanoseconds (stat through links, when the entry lacks it), else None."""
    etag = info.get("ETag") or info.get("etag")
    if etag:
        return str(etag)
    if _MTIME_NS in info:
        return str(info[_MTIME_NS])
    if isinstance(fs, LocalFileSystem):
        try:
            return str(os.stat(name).st_mtime_ns)
        except OSError:
            return None
    return None


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


def input_root(raw: str, storage_options: dict[str, Any] | None = None) -> str:
    """What the URL of every file discover() lists under input `raw` starts with (a glob's
    directory above its first wildcard)."""
    fs, path = resolve(raw, storage_options=storage_options or {})
    return _with_protocol(fs, glob_root(path) if any(c in path for c in "*?[") else path, raw)


def discover(inputs: list[str], storage_options: dict[str, Any] | None = None) -> Discovery:
    storage_options = storage_options or {}
    files: dict[str, InputFile] = {}
    formats: list[tuple[str, str]] = []
    for raw in inputs:
        # An unreachable store, bad credentials: a StorageError naming the input, not a traceback.
        with storage_errors("list", raw):
            _discover_one(raw, storage_options, files, formats)
    urls = sorted(files)
    if len(inputs) > 1:  # one file named by two inputs (a link and its target): listed once
        urls = _first_of_each(urls, _local_identity)
    return Discovery(tuple(files[url] for url in urls), tuple(formats))


def _local_identity(url: str) -> tuple[int, int] | None:
    """A local file's (device, inode) through links; None elsewhere."""
    if "://" in url and not url.startswith("file://"):
        return None
    try:
        st = os.stat(url.removeprefix("file://"))
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _discover_one(raw: str, storage_options: dict[str, Any], files: dict[str, InputFile],
                  formats: list[tuple[str, str]]) -> None:
    fs, path = resolve(raw, storage_options=storage_options)
    # A long-lived driver must see the store as it is now, not as an earlier run listed it.
    fs.invalidate_cache()
    is_glob = any(c in path for c in "*?[")
    root = glob_root(path) if is_glob else None
    matches = fs.glob(path) if is_glob else [path]
    if is_glob:
        matches = [m for m in matches if not is_hidden(m[len(root):].strip("/"))]
    if not matches:
        raise MissingInputError("input matches nothing", path=raw)
    for match in matches:
        found, below = _expand(fs, match, raw, root)
        kind = table_format(fs, match if fs.isdir(match) else posixpath.dirname(match))
        if kind:
            formats.append((raw, kind))
        else:
            formats += [(_with_protocol(fs, where, raw), k) for where, k in below]
        for f in found:
            files.setdefault(f.url, f)


def _expand(fs: Any, path: str, like: str, glob_base: str | None
            ) -> tuple[list[InputFile], list[tuple[str, str]]]:
    """The data files under `path` (relative to the glob's base when it came from a glob) and
    the table-format roots found among them."""
    try:
        if not fs.isdir(path):
            info = fs.info(path)
            relative = path[len(glob_base):].strip("/") if glob_base else posixpath.basename(path)
            return [InputFile(_with_protocol(fs, path, like), int(info["size"]), relative,
                              listed_version(fs, path, info))], []
        entries = find(fs, path)
    except FileNotFoundError:
        raise MissingInputError("input does not exist", path=like) from None
    base = (glob_base if glob_base else path).rstrip("/") + "/"
    out = []
    for name, info in _visible(entries, path).items():
        relative = name[len(base):] if name.startswith(base) else posixpath.basename(name)
        out.append(InputFile(_with_protocol(fs, name, like), int(info["size"]), relative,
                             listed_version(fs, name, info)))
    return out, _formats_below(path.rstrip("/"), list(entries))
