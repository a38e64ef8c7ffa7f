"""Storage: ranged reads of one file through the local OS, Arrow's S3 client or any fsspec
filesystem, counted.

Every byte pageindex reads goes through a Source, so I/O claims can be asserted from its stats.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import stat
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import fsspec
import numpy as np

from pageindex.errors import PageIndexError, StorageError
from pageindex.io.read_plan import ReadOptions, ReadPlan
from pageindex.io.transport import (
    TRANSPORT_OPTION,
    Transport,
    mark_fsspec_reads,
    open_arrow,
    transport_option,
)


@contextmanager
def storage_errors(what: str, path: str, offset: int | None = None) -> Iterator[None]:
    """Any failure of the filesystem layer (OSError, but also botocore's and aiohttp's own
    exceptions once retries are exhausted) as a StorageError naming the file."""
    try:
        yield
    except PageIndexError:
        raise
    except FileNotFoundError:
        raise StorageError(f"{what}: not found", path=path, offset=offset) from None
    except Exception as err:  # noqa: BLE001 - only filesystem calls run inside
        raise StorageError(f"{what} failed: {type(err).__name__}: {err}", path=path,
                           offset=offset) from err


@dataclass
class IOStats:
    """Bytes and requests a Source has served (mutable: it counts as reads happen)."""

    requests: int = 0
    bytes_read: int = 0
    ranges: list[tuple[int, int, str]] = field(default_factory=list)  # offset, length, purpose
    # The commit's background copy reads while the pipeline does: no lost increments.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record(self, offset: int, length: int, purpose: str) -> None:
        with self._lock:
            self.requests += 1
            self.bytes_read += length
            self.ranges.append((offset, length, purpose))


@dataclass(frozen=True)
class FileVersion:
    """What identifies the exact bytes read, to detect a concurrent rewrite before commit."""

    size: int
    mtime: float | None
    etag: str | None


class Source:
    """A file opened for ranged reads."""

    def __init__(self, path: str, fs: Any, version: FileVersion,
                 read_options: ReadOptions = ReadOptions()) -> None:
        self.path = path
        self.fs = fs
        self.version = version
        self.stats = IOStats()
        self.read_options = read_options
        self._local = isinstance(fs, fsspec.implementations.local.LocalFileSystem)
        self._fd: int | None = None
        self._plan: ReadPlan | None = None
        self._kept: tuple[int, bytes] | None = None  # the end of the file, read once (keep_tail)
        self._spares = threading.local()  # each thread's reused read buffer (read_view)
        self._held = threading.local()  # each thread's range read at once (holding)
        self._remote: Callable[[int, int], bytes] | None = None  # Arrow's reads (open_source)

    @property
    def size(self) -> int:
        return self.version.size

    @property
    def local(self) -> bool:
        return self._local

    def fileno(self) -> int:
        """The OS file descriptor of a local source (opened on first use)."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY)
        return self._fd

    def read(self, offset: int, length: int, purpose: str = "data") -> bytes:
        """Exactly `length` bytes at `offset` (fewer only if the file is shorter); `purpose`
        labels the read in the stats (footer, index, dictionary, data)."""
        if offset < 0 or length < 0:
            raise StorageError(f"invalid read of {length} bytes at {offset}", path=self.path)
        end = min(offset + length, self.size)
        if end <= offset:
            return b""
        planned = self._in_memory(offset, end)
        if planned is not None:
            return bytes(planned)
        with storage_errors("read", self.path, offset):
            if self._local:
                data = os.pread(self.fileno(), end - offset, offset)
            else:
                data = self._remote_read(offset, end - offset)
        self.stats.record(offset, len(data), purpose)
        return data

    def _remote_read(self, offset: int, length: int) -> bytes:
        """One ranged request: through Arrow's S3 client when open_source opened the object with
        it, else through the fsspec filesystem. Thread-safe."""
        if self._remote is not None:
            return self._remote(offset, length)
        return self.fs.cat_file(self.path, start=offset, end=offset + length)

    def read_view(self, offset: int, length: int, purpose: str = "data") -> bytes | memoryview:
        """`read`, but a big local read lands in a buffer this Source keeps for the calling thread,
        returned as a read-only view. Fresh memory is faulted in page by page on every read:
        reading each chunk into the same warm pages saves those faults (see bench/RESULTS.md), for
        at most REUSE_MAX_BYTES held between reads per thread that reads."""
        end = min(offset + length, self.size)
        planned = self._in_memory(offset, end) if end > offset >= 0 else None
        if planned is not None:
            return planned.toreadonly()
        if end - offset > REUSE_MAX_BYTES:
            self.drop_spare()  # this read's bytes are held fresh; the spare must not add to them
        if not (self._local and REUSE_MIN_BYTES <= end - offset <= REUSE_MAX_BYTES):
            return self.read(offset, length, purpose)
        view = self._take_spare(end - offset)
        if view is None:
            return self.read(offset, length, purpose)
        got = self.read_into(offset, view)
        self.stats.record(offset, got, purpose)
        return view.toreadonly()[:got]

    def prefetch(self, ranges: Iterable[tuple[int, int]], purpose: str = "data") -> None:
        """Plan the (offset, length) ranges about to be read and start fetching them (merged,
        concurrently, ahead within the read options); reads of their bytes are then served from
        memory, and the stats count the requests made. Replaces the previous plan. A no-op on a
        local file, where a read costs no request."""
        self.release_prefetch()
        if self._local:
            return
        limit = self.size if self._kept is None else self._kept[0]
        clipped = [(o, min(o + n, limit) - o) for o, n in ranges if 0 <= o < limit]
        if clipped:
            self._plan = ReadPlan(lambda o, n: self._fetch(o, n, purpose), clipped, self.read_options)

    def release_prefetched_before(self, offset: int) -> None:
        """Drop what the plan holds of the bytes before `offset` (the plan goes on past it)."""
        if self._plan is not None:
            self._plan.drop_before(offset)

    def release_prefetched(self, offset: int, length: int) -> None:
        """Count these planned bytes as read: a caller done with a range it read only part of
        lets the plan drop them (or skip fetching them)."""
        if self._plan is not None:
            self._plan.discard(offset, length)

    def release_prefetch(self) -> None:
        """Drop what the plan holds (unread bytes are read again if asked for)."""
        plan, self._plan = self._plan, None
        if plan is not None:
            plan.close()

    def keep_tail(self, offset: int, data: bytes) -> None:
        """Keep the file's last bytes, from `offset`, to serve reads of them (and of a planned
        range running into them) without a request. Remote files only: a local read costs none."""
        if not self._local and offset + len(data) == self.size:
            self._kept = (offset, data)

    @contextmanager
    def holding(self, offset: int, length: int, purpose: str = "data") -> Iterator[None]:
        """Read a local file's range in one request, and serve the calling thread's reads inside
        it from those bytes until the block ends: many small chunks read as one (into the spare
        buffer where read_view would use it). A no-op on an object store, whose plan merges
        reads already."""
        if not self._local or getattr(self._held, "range", None) is not None:
            yield
            return
        self._held.range = (offset, self.read_view(offset, length, purpose))
        try:
            yield
        finally:
            self._held.range = None

    def _in_memory(self, offset: int, end: int) -> memoryview | None:
        """The bytes from the held range, the kept tail, the plan, or both, if they hold all of them."""
        held = getattr(self._held, "range", None)
        if held is not None and held[0] <= offset and end <= held[0] + len(held[1]):
            return memoryview(held[1])[offset - held[0]:end - held[0]]
        if self._kept is None:
            return self._planned(offset, end)
        start, data = self._kept
        if start <= offset:
            return memoryview(data)[offset - start:end - start]
        if end <= start:
            return self._planned(offset, end)
        head = self._planned(offset, start)
        return None if head is None else memoryview(bytes(head) + data[:end - start])

    def _planned(self, offset: int, end: int) -> memoryview | None:
        plan = self._plan
        if plan is None:
            return None
        with storage_errors("read", self.path, offset):
            return plan.read(offset, end - offset)

    def _fetch(self, offset: int, length: int, purpose: str) -> bytes:
        """One request of a plan (on its threads; errors are raised by the read that needs them)."""
        data = self._remote_read(offset, length)
        self.stats.record(offset, len(data), purpose)
        return data

    def read_into(self, offset: int, view: memoryview) -> int:
        """Read a local source's bytes at `offset` into `view`, as many as fit before the end of
        the file; how many. Not counted in the stats: the caller records what the read was for."""
        with storage_errors("read", self.path, offset):
            return os.preadv(self.fileno(), [view], offset)

    def _take_spare(self, size: int) -> memoryview | None:
        """A writable view of the first `size` bytes of this thread's spare buffer, or None while
        a view of it is still alive anywhere (ours, a slice, or an Arrow buffer made from one)."""
        spare = getattr(self._spares, "buffer", None)
        # Every view of the buffer (a memoryview, its slices, what wraps them) holds it through
        # one export: references beyond the holder, this name and getrefcount's argument are
        # views still alive, whose bytes a new read would overwrite.
        if spare is not None and sys.getrefcount(spare) > _SPARE_UNSHARED:
            return None
        if spare is None or len(spare) < size:
            # Not zeroed (a bytearray would be, page by page, holding the GIL): the read itself
            # faults the pages in, outside it.
            spare = self._spares.buffer = np.empty(size, np.uint8)
        return memoryview(spare)[:size]

    def drop_spare(self) -> None:
        """Free the calling thread's buffer that read_view reuses (it is made again on the next
        read that needs it); other threads' go when they end."""
        self._spares.buffer = None

    def stored(self, offset: int, length: int) -> "StoredRange":
        """`length` bytes at `offset`, left on storage until sliced."""
        return StoredRange(self, offset, length)

    def close(self) -> None:
        self.release_prefetch()
        self._kept = None
        self.drop_spare()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "Source":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# Below this a read's page faults cost little; above it the spare would hold a chunk that
# chunk_scan streams from storage instead of keeping (STREAM_CHUNK_BYTES).
REUSE_MIN_BYTES = 1 << 20
REUSE_MAX_BYTES = 32 << 20
# References to an idle spare buffer inside _take_spare: its holder, the local name, the argument.
_SPARE_UNSHARED = 3


@dataclass(frozen=True)
class StoredRange:
    """Bytes of a source not held in memory: each slice is a read. Lets a big chunk that was
    walked be decoded from storage again instead of being kept whole while Arrow decodes it."""

    source: Source
    offset: int
    length: int

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, span: slice) -> bytes:
        start, stop, _ = span.indices(self.length)
        return self.source.read(self.offset + start, max(0, stop - start))


# Throttling (503 SlowDown), server errors and dropped connections are retried by botocore with
# capped exponential backoff and jitter; a request that still fails surfaces as an error.
S3_RETRIES = {"config_kwargs": {"retries": {"max_attempts": 8, "mode": "standard"}}}


def normalize_url(url: str) -> str:
    """s3a:// and s3n:// name the same bucket and key as s3://; file:// is a local path."""
    for scheme in ("s3a://", "s3n://"):
        if url.startswith(scheme):
            return "s3://" + url[len(scheme):]
    for prefix in ("file://localhost/", "file://"):
        if url.startswith(prefix):
            return "/" + url[len(prefix):].lstrip("/")
    return url


def s3_options(storage_options: dict[str, Any] | None) -> dict[str, Any]:
    """The caller's S3 options over pageindex's retry defaults (config_kwargs merged)."""
    options = dict(storage_options or {})
    # A copy: botocore rewrites the retries dict it is given (max_attempts -> total_max_attempts).
    config = {**copy.deepcopy(S3_RETRIES["config_kwargs"]), **options.get("config_kwargs", {})}
    options["config_kwargs"] = config
    return options


def add_transport_argument(parser: argparse.ArgumentParser) -> None:
    """`--s3-transport`, the same for every CLI command and the Spark job."""
    parser.add_argument("--s3-transport", choices=[t.value for t in Transport], metavar="arrow|fsspec",
                        help="how s3:// objects' bytes are read: Arrow's C++ S3 client (default; "
                             "s3fs whenever a storage option has no exact Arrow equivalent) or s3fs")


def storage_options_from(endpoint_url: str | None, pairs: Iterable[str] = (),
                         transport: str | None = None) -> dict[str, Any]:
    """fsspec storage options from the command line: `--s3-endpoint-url URL` and repeated
    `--storage-option KEY=VALUE`, where a dotted KEY nests (client_kwargs.region_name=...) and a
    VALUE that is JSON (true, 3, {"a": 1}) is taken as such, any other as text; `--s3-transport`
    as the s3_transport option."""
    options: dict[str, Any] = {}
    if transport:
        options[TRANSPORT_OPTION] = Transport(transport).value
    if endpoint_url:
        options["client_kwargs"] = {"endpoint_url": endpoint_url}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"storage option {pair!r} is not KEY=VALUE")
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        *parents, leaf = key.strip().split(".")
        node = options
        for name in parents:
            child = node.setdefault(name, {})
            if not isinstance(child, dict):
                raise ValueError(f"storage option {pair!r}: {name} is already set to a value")
            node = child
        node[leaf] = value
    for name in _NESTED_OPTIONS:
        if name in options and not isinstance(options[name], dict):
            raise ValueError(f"storage option {name}={options[name]!r}: {name} takes a JSON object "
                             f"({name}={{\"key\": ...}}) or dotted keys ({name}.KEY=VALUE)")
    return options


# The s3fs options that are dictionaries passed on to botocore: a text there fails deep inside.
_NESTED_OPTIONS = ("client_kwargs", "config_kwargs", "s3_additional_kwargs")


def resolve(path: str, filesystem: Any = None, storage_options: dict[str, Any] | None = None
            ) -> tuple[Any, str]:
    """The fsspec filesystem and the path within it for a local path or URL. The storage option
    `s3_transport` (a Transport: arrow, the default, or fsspec) chooses how a Source of an s3://
    object reads its bytes; it is not passed to s3fs."""
    if filesystem is not None:
        return filesystem, path
    url = normalize_url(path)
    protocol = url.split("://", 1)[0] if "://" in url else "file"
    transport, rest = transport_option(storage_options or {})
    options = s3_options(rest) if protocol == "s3" else {}
    if transport is Transport.FSSPEC and protocol == "s3":
        return _fsspec_reading_s3(url, options)
    fs, inner = fsspec.core.url_to_fs(url, **options)
    return fs, inner


# s3_transport=fsspec filesystems, one per distinct options (and process), as fsspec caches its
# own s3fs instances: a run over many files builds one. They stay out of fsspec's cache, whose
# instances other callers in the process share and read through Arrow: only these carry the mark.
_fsspec_reading_lock = threading.Lock()
_fsspec_reading: dict[str, Any] = {}


def _fsspec_reading_s3(url: str, options: dict[str, Any]) -> tuple[Any, str]:
    """The marked s3fs instance for these options (and what the URL itself sets, as a versionId
    does), and the path within it."""
    cls = fsspec.get_filesystem_class("s3")
    token = json.dumps([os.getpid(), cls._get_kwargs_from_urls(url), options], sort_keys=True, default=repr)
    with _fsspec_reading_lock:
        fs = _fsspec_reading.get(token)
        if fs is None:
            fs, inner = fsspec.core.url_to_fs(url, skip_instance_cache=True, **options)
            mark_fsspec_reads(fs)
            _fsspec_reading[token] = fs
            return fs, inner
    return fs, fs._strip_protocol(url)


def file_version(fs: Any, path: str) -> FileVersion:
    """Size, mtime and ETag of a file, as its filesystem reports them now (never cached)."""
    with storage_errors("stat", path):
        fs.invalidate_cache(path)
        info = fs.info(path)
    if info.get("type") not in ("file", None):
        raise StorageError("not a regular file", path=path)
    mtime = info.get("mtime") or info.get("LastModified") or info.get("created")
    if hasattr(mtime, "timestamp"):
        mtime = mtime.timestamp()
    etag = info.get("ETag") or info.get("etag")
    return FileVersion(int(info["size"]), float(mtime) if mtime is not None else None,
                       str(etag) if etag else None)


def open_source(path: str, filesystem: Any = None) -> Source:
    fs, inner = resolve(path, filesystem)
    if isinstance(fs, fsspec.implementations.local.LocalFileSystem):
        # Open first, then stat the open file: a rename into place in between cannot pair
        # one file's size with another file's bytes.
        try:
            fd = os.open(inner, os.O_RDONLY)
        except FileNotFoundError:
            raise StorageError("file not found", path=inner) from None
        except OSError as err:
            raise StorageError(f"cannot open file: {err}", path=inner) from err
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise StorageError("not a regular file", path=inner)
        source = Source(inner, fs, local_version(st))
        source._fd = fd
        return source
    with storage_errors("stat", inner):
        remote = open_arrow(fs, inner)
    if remote is None:
        return Source(inner, fs, file_version(fs, inner))
    # Arrow's open made the HEAD that gives the version: s3fs does not make another.
    source = Source(inner, fs, FileVersion(remote.size, remote.mtime, remote.etag))
    source._remote = remote.read
    return source


def local_version(st: os.stat_result) -> FileVersion:
    """A local file's version from its stat; the inode stands in for an ETag (a file renamed
    into place is another file)."""
    return FileVersion(st.st_size, st.st_mtime, f"inode:{st.st_dev}:{st.st_ino}")


def current_version(source: Source) -> FileVersion:
    """The version of the file at the source's path now (to compare with source.version)."""
    if source.local:
        try:
            return local_version(os.stat(source.path))
        except FileNotFoundError:
            return FileVersion(-1, None, None)
    return file_version(source.fs, source.path)
