"""Discovery: expand the job's inputs (files, directories, globs, URLs) into Parquet candidates.

Hidden and underscore entries are ignored; Delta, Iceberg and Hudi table roots are detected.
On a local disk symbolic links that stay inside the input's real path are followed (all of them
with follow_links): a file reached twice is listed once, a link back to a directory it lies in is not.
"""
from __future__ import annotations

import functools
import logging
import os
import posixpath
import stat
from dataclasses import dataclass
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, TypeVar

from fsspec.implementations.local import LocalFileSystem

from pageindex.errors import MissingInputError
from pageindex.io.confinement import outside
from pageindex.io.storage import normalize_url, resolve, storage_errors


@dataclass(frozen=True, slots=True)  # slots: a million of them in a driver
class InputFile:
    """One file to process: its URL, size, and where it sits below the input it came from."""

    url: str
    size: int
    relative: str  # path below the input root, used to mirror the tree under --output
    # What the listing says identifies these bytes: the S3 ETag, a local file's mtime in
    # nanoseconds; None where the store gives neither (the state then never skips the file).
    version: str | None = None

    def __reduce__(self) -> tuple[type, tuple[str, int, str, str | None]]:
        # A plain tuple: a Spark job pickles millions of these; the dataclass default is 3x slower.
        return InputFile, (self.url, self.size, self.relative, self.version)


@dataclass(frozen=True)
class Discovery:
    files: tuple[InputFile, ...]
    table_formats: tuple[tuple[str, str], ...]  # (input, "delta" | "iceberg" | "hudi")


def with_protocol(fs: Any, path: str, like: str) -> str:
    return _protocol_of(like) + path


@functools.lru_cache(maxsize=64)  # once per input, not per file
def _protocol_of(like: str) -> str:
    """"s3://" when `like` is an s3:// (s3a://, ...) URL, "" for a local path."""
    url = normalize_url(like)
    return url.split("://", 1)[0] + "://" if "://" in url else ""


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
        if "_delta_log" not in name and ".hoodie" not in name and "metadata" not in name:
            continue  # no marker in it: most names of a big listing, passed without a split
        parts = name[len(root):].strip("/").split("/")
        for i, part in enumerate(parts[:-1]):
            kind = _MARKERS.get(part)
            if kind is None and part == "metadata" and parts[-1].endswith(".metadata.json") and i == len(parts) - 2:
                kind = "iceberg"
            if kind:
                found.setdefault(posixpath.join(root, *parts[:i]) if i else root.rstrip("/"), kind)
    return sorted(found.items())


def tidy_local(path: str) -> str:
    """A local path absolute, with its `.` and `..` resolved as the OS resolves them (a `..`
    after a link leads to the parent of the link's target): the prefix up to the last of them
    is resolved whole, the rest kept as typed, links included. Without them: the path as typed,
    made absolute."""
    joined = path if os.path.isabs(path) else os.path.join(os.getcwd(), path)
    parts = joined.split("/")
    dots = [i for i, part in enumerate(parts) if part in (".", "..")]
    if not dots:
        return os.path.normpath(joined)
    head, rest = "/".join(parts[: dots[-1] + 1]), [p for p in parts[dots[-1] + 1:] if p]
    return os.path.join(_real_directory(head), *rest)


def canonical_local(path: str) -> str:
    """A local path absolute, with `.`, `..` and the links among its directories resolved as the
    OS resolves them, its own name kept (a link named stays a link; a glob's pattern, below its
    directory, stays as typed): the same path however it was typed and from wherever."""
    path = os.path.abspath(path)
    root = glob_root(path) if any(c in path for c in "*?[") else path
    head, name = os.path.split(root)
    real = _real_directory(root) if name in ("", ".", "..") else os.path.join(_real_directory(head), name)
    return real + path[len(root):]


@functools.lru_cache(maxsize=4096)  # a million files in a few thousand directories
def _real_directory(path: str) -> str:
    return os.path.realpath(path)


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
    hidden_dirs: dict[str, bool] = {}  # a directory's files share its verdict: one check each
    visible = {}
    for name, info in entries.items():
        if info.get("type") == "directory":
            continue
        folder, _, base = (name[len(root):] if name.startswith(root) else posixpath.basename(name)).rpartition("/")
        hidden = hidden_dirs.get(folder)
        if hidden is None:
            hidden = hidden_dirs[folder] = is_hidden(folder)
        if not hidden and not _hidden_name(base):
            visible[name] = info
    names = sorted(visible)
    if _REAL in next(iter(visible.values()), {}):  # a local walk's (it marks every entry): links may repeat a file
        names = _first_of_each(names, lambda n: visible[n].get(_REAL))
    return {name: visible[name] for name in names}


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


def find(fs: Any, path: str, confine: str | None = None) -> dict[str, dict]:
    """Every file below `path` with its info, as fs.find(withdirs=False, detail=True) gives it,
    except that on a local disk links to directories are followed (fsspec lists them as files),
    and, with `confine` (a real path), a link leading outside it is skipped with a warning."""
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
    _walk(root, [(top.st_dev, top.st_ino)], out, set(), confine)
    return out


def _skip_outside(name: str, real: str, confine: str) -> None:
    log.warning("pageindex: warning: %s: skipped: a symbolic link to %s, outside the input %s "
                "(--follow-links follows it)", name, real, confine)


def _walk(directory: str, ancestors: list[tuple[int, int]], out: dict[str, dict], cycles: set,
          confine: str | None) -> None:
    """The files below `directory` into `out`, depth first in name order. `ancestors` are the
    directories the walk is in (by identity): a link to one of them would never end. A link
    leading outside `confine` (when given) is neither followed nor listed."""
    with os.scandir(directory) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        name = posixpath.join(directory, entry.name)
        if confine is not None and entry.is_symlink():
            real = outside(name, confine)
            if real is not None:
                _skip_outside(name, real, confine)
                continue
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
            _walk(name, ancestors + [identity], out, cycles, confine)
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
    return table_formats([(path, fs, path)])[0]


def table_formats(starts: list[tuple[str, Any, str]]) -> list[str | None]:
    """table_format of each (input, fs, directory), each directory checked once however many
    starts lie below it (a glob's thousand partitions share their ancestors), a level at a time,
    the directories of one level at once: the same checks whatever the threads' timing. An
    error names the first input whose check met it."""
    chains = [(raw, fs, _ancestors(fs, path)) for raw, fs, path in starts]
    known: dict[tuple[int, str], str | None] = {}
    for level in range(max((len(chain) for _, _, chain in chains), default=0)):
        todo: dict[tuple[int, str], tuple[str, Any, str]] = {}
        for raw, fs, chain in chains:
            if level < len(chain) and not any(known[(id(fs), d)] for d in chain[:level]):
                todo.setdefault((id(fs), chain[level]), (raw, fs, chain[level]))
        todo = {key: where for key, where in todo.items() if key not in known}
        known.update(zip(todo, each(lambda where: _guarded(where[0], False, _marked, *where),
                                    list(todo.values()))))
    return [next((known[(id(fs), d)] for d in chain if known.get((id(fs), d))), None)
            for _, fs, chain in chains]


def _ancestors(fs: Any, path: str) -> list[str]:
    """`path` and the directories above it that may be a table's root, nearest first."""
    out, current = [], path.rstrip("/")
    while current and current not in ("/", "."):
        out.append(current)
        parent = posixpath.dirname(current)
        if parent == current or (fs.protocol != "file" and "/" not in current):
            break
        current = parent
    return out


def _marked(raw: str, fs: Any, directory: str) -> str | None:
    """The table format whose root `directory` is, if any."""
    if fs.exists(posixpath.join(directory, "_delta_log")):
        return "delta"
    if fs.exists(posixpath.join(directory, ".hoodie")):
        return "hudi"
    if fs.glob(posixpath.join(directory, "metadata", "*.metadata.json")):
        return "iceberg"
    return None


def input_root(raw: str, storage_options: dict[str, Any] | None = None) -> str:
    """What the URL of every file discover() lists under input `raw` starts with (a glob's
    directory above its first wildcard)."""
    fs, path = resolve(raw, storage_options=storage_options or {})
    if isinstance(fs, LocalFileSystem):
        path = tidy_local(path)
    return with_protocol(fs, glob_root(path) if any(c in path for c in "*?[") else path, raw)


# Listings in flight at once on the driver: an object store answers each request after a
# latency, so a thousand partitions listed one by one wait a thousand latencies.
LISTING_THREADS = 16
T = TypeVar("T")
R = TypeVar("R")


def each(fn: Callable[[T], R], items: list[T], threads: int | None = None) -> list[R]:
    """fn of each item, in their order, up to `threads` (LISTING_THREADS) at once; the first
    item's error (in their order) is raised, as a loop would raise it."""
    threads = LISTING_THREADS if threads is None else threads
    if threads <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(min(threads, len(items)), thread_name_prefix="pageindex-list") as pool:
        return list(pool.map(fn, items))


def discover(inputs: list[str], storage_options: dict[str, Any] | None = None,
             follow_links: bool = False) -> Discovery:
    """The files of every input (each once, in path order) and the table roots among them.
    follow_links: also follow local symbolic links that lead outside the input's real path."""
    found = discover_each(inputs, storage_options, follow_links=follow_links)
    if len(found) == 1:  # each file once, in path order already
        assert found[0] is not None
        return found[0]
    files: dict[str, InputFile] = {}
    formats: list[tuple[str, str]] = []
    for one in found:
        assert one is not None
        formats += one.table_formats
        for f in one.files:
            files.setdefault(f.url, f)
    urls = sorted(files)
    if len(inputs) > 1:  # one file named by two inputs (a link and its target): listed once
        urls = _first_of_each(urls, _local_identity)
    return Discovery(tuple(files[url] for url in urls), tuple(formats))


def discover_each(inputs: list[str], storage_options: dict[str, Any] | None = None,
                  missing_ok: bool = False, follow_links: bool = False) -> list[Discovery | None]:
    """Each input's Discovery (None for one that does not exist, with `missing_ok`), its inputs
    and their globs' matches listed LISTING_THREADS at once on an object store: the same
    requests and the same result as one by one (the Spark job lists an object store's matches
    on its executors instead: pageindex.job.spread)."""
    resolved = resolved_inputs(inputs, storage_options or {})
    local = all(isinstance(fs, LocalFileSystem) for _, fs, _ in resolved)  # a disk, not a store's latency
    threads = 1 if local else LISTING_THREADS
    matched = matched_inputs(resolved, missing_ok, threads)
    work = [(raw, fs, match, root) for (raw, fs, _), (matches, root) in zip(resolved, matched) if matches
            for match in matches]
    listed = each(functools.partial(listed_match, missing_ok, follow_links), work, threads)
    kinds = iter(_guarded_formats(work, listed))
    out: dict[str, tuple[list[InputFile], list[tuple[str, str]]] | None] = {}
    for (raw, fs, match, _), got, kind in zip(work, listed, kinds):
        if got is None or out.get(raw, 0) is None:
            out[raw] = None
            continue
        files, formats = out.setdefault(raw, ([], []))
        files += got[0]
        formats += [(raw, kind)] if kind else [(with_protocol(fs, where, raw), k) for where, k in got[1]]
    return [None if out.get(raw) is None else _one(*out[raw]) for raw in inputs]


def resolved_inputs(inputs: list[str], storage_options: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """Each input as (as given, its filesystem, its path), the filesystem's listing cache dropped
    and a local path tidied; a StorageError names the input."""
    resolved = []
    for raw in inputs:
        with storage_errors("list", raw):
            fs, path = resolve(raw, storage_options=storage_options)
            # A long-lived driver must see the store as it is now, not as an earlier run listed it.
            fs.invalidate_cache()
        if isinstance(fs, LocalFileSystem):  # `../lake` and `/abs/lake` list the same URLs
            path = tidy_local(path)
        resolved.append((raw, fs, path))
    return resolved


def matched_inputs(resolved: list[tuple[str, Any, str]], missing_ok: bool, threads: int
                   ) -> list[tuple[list[str], str | None] | None]:
    """What each resolved input names, `threads` at once: its glob's matches (or itself) and the
    glob's base; None for a missing input when allowed."""
    return each(lambda item: _guarded(item[0], missing_ok, _matches, *item), resolved, threads)


def listed_match(missing_ok: bool, follow_links: bool, item: tuple[str, Any, str, str | None]
            ) -> tuple[list[InputFile], list[tuple[str, str]], str] | None:
    return _guarded(item[0], missing_ok, _listing, *item, follow_links)


def _one(files: list[InputFile], formats: list[tuple[str, str]]) -> Discovery:
    if all(a.url < b.url for a, b in zip(files, files[1:])):  # one match's files (or disjoint, in order)
        return Discovery(tuple(files), tuple(formats))
    unique = {f.url: f for f in reversed(files)}  # the first of a URL two matches reach
    return Discovery(tuple(unique[url] for url in sorted(unique)), tuple(formats))


def _guarded(raw: str, missing_ok: bool, fn: Callable[..., R], *args: Any) -> R | None:
    """fn(*args) with storage errors naming the input `raw`; None for a missing input when allowed."""
    try:
        # An unreachable store, bad credentials: a StorageError naming the input, not a traceback.
        with storage_errors("list", raw):
            return fn(*args)
    except MissingInputError:
        if missing_ok:
            return None
        raise


def _guarded_formats(work: list[tuple[str, Any, str, str | None]], listed: list[Any]) -> list[str | None]:
    """The table format above each listed match (None for the rest)."""
    kinds = iter(table_formats([(raw, fs, got[2]) for (raw, fs, _, _), got in zip(work, listed)
                                 if got is not None]))
    return [next(kinds) if got is not None else None for got in listed]


def _local_identity(url: str) -> tuple[int, int] | None:
    """A local file's (device, inode) through links; None elsewhere."""
    if "://" in url and not url.startswith("file://"):
        return None
    try:
        st = os.stat(url.removeprefix("file://"))
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _matches(raw: str, fs: Any, path: str) -> tuple[list[str], str | None]:
    """What an input names (a glob's matches, not hidden below its base) and the glob's base."""
    is_glob = any(c in path for c in "*?[")
    root = glob_root(path) if is_glob else None
    matches = fs.glob(path) if is_glob else [path]
    if is_glob:
        matches = [m for m in matches if not is_hidden(m[len(root):].strip("/"))]
    if not matches:
        raise MissingInputError("input matches nothing", path=raw)
    return matches, root


def _listing(raw: str, fs: Any, match: str, root: str | None, follow_links: bool = False
             ) -> tuple[list[InputFile], list[tuple[str, str]], str]:
    """_expand of one match, and the directory its table-format check starts from."""
    found, below = _expand(fs, match, raw, root, follow_links)
    return found, below, match if fs.isdir(match) else posixpath.dirname(match)


def _expand(fs: Any, path: str, like: str, glob_base: str | None, follow_links: bool = False
            ) -> tuple[list[InputFile], list[tuple[str, str]]]:
    """The data files under `path` (relative to the glob's base when it came from a glob) and
    the table-format roots found among them. On a local disk, unless `follow_links`, nothing
    outside the input's real path (the glob base's) is listed: a link leading out is skipped."""
    confine = None
    if isinstance(fs, LocalFileSystem) and not follow_links:
        confine = os.path.realpath(glob_base if glob_base else path)
        real = outside(path, confine) if glob_base else None  # a glob's match may be such a link
        if real is not None:
            _skip_outside(path, real, confine)
            return [], []
    try:
        if not fs.isdir(path):
            info = fs.info(path)
            relative = path[len(glob_base):].strip("/") if glob_base else posixpath.basename(path)
            return [InputFile(with_protocol(fs, path, like), int(info["size"]), relative,
                              listed_version(fs, path, info))], []
        entries = find(fs, path, confine)
    except FileNotFoundError:
        raise MissingInputError("input does not exist", path=like) from None
    base = (glob_base if glob_base else path).rstrip("/") + "/"
    out = []
    for name, info in _visible(entries, path).items():
        relative = name[len(base):] if name.startswith(base) else posixpath.basename(name)
        out.append(InputFile(with_protocol(fs, name, like), int(info["size"]), relative,
                             listed_version(fs, name, info)))
    return out, _formats_below(path.rstrip("/"), list(entries))
