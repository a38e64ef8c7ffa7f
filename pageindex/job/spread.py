"""The listing kept where it is made: an object store's inputs, or a catalog table's partitions, are
listed by executors into an RDD of files the driver never collects (counts and sums come back).

discovery.discover_each's result, spread: the same matches, files, table-format checks and errors.
"""
from __future__ import annotations

import operator
import posixpath
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from fsspec.implementations.local import LocalFileSystem

from pageindex.errors import PageIndexError, UsageError
from pageindex.io import discovery
from pageindex.io.discovery import InputFile
from pageindex.io.storage import resolve
from pageindex.job import catalog, lake

# Spark's own setting and default for its listing jobs (InMemoryFileIndex): at most this many tasks.
PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
DEFAULT_PARALLELISM = "10000"
# Listing tasks per core: a Python task costs some 0.1 s to start, more than listing a directory of
# a thousand files, so ten thousand directories are listed in a few tasks per core, not one each.
TASKS_PER_CORE = 4


@dataclass(frozen=True)
class Work:
    """One listing an executor makes: a match of an input, or a partition of a catalog table."""

    raw: str  # the input or location as given: the files' URLs take its scheme, errors name it
    fs: Any
    match: str  # the directory (or file) listed
    root: str | None  # relative paths are below it (a glob's base, a table's location); None: below `match`
    prefix: str = ""  # put before each relative path (a partition outside its table's location)
    missing_ok: bool = False  # a location that does not exist holds no files (a catalog's partition)


@dataclass(frozen=True)
class Spread:
    """A listing on the executors: the files (an RDD of InputFile, each URL once) and their sums."""

    files: Any  # RDD of InputFile
    count: int
    nbytes: int
    persisted: Any  # the RDD kept on the executors' disks, released by `release`

    def release(self) -> None:
        self.persisted.unpersist()


def list_inputs(spark: Any, inputs: list[str], storage_options: dict[str, Any], in_place: bool
                ) -> Spread | None:
    """The inputs' files listed by a Spark job and left there; None for local inputs (the
    driver's own disk: listed there). Raises as discover would: the first match's
    PageIndexError in their order, UsageError for a table's files (check_modes' rule), or for
    two files at one path below an --output."""
    resolved = _resolved(inputs, storage_options)
    if resolved is None:
        return None
    matched = discovery.matched_inputs(resolved, False, discovery.LISTING_THREADS)
    work = [Work(raw, fs, match, root) for (raw, fs, _), (matches, root) in zip(resolved, matched)
            for match in matches]
    return _spread(spark, work, in_place)


def list_table(spark: Any, table: catalog.CatalogTable, storage_options: dict[str, Any], in_place: bool
               ) -> Spread | None:
    """catalog.table_files' files, listed by a Spark job: below the table's location, or in each
    partition the catalog lists (relative paths as table_files gives them); None when the table
    lives on a local disk."""
    partitions = table.partitions or ()
    locations = [table.location] if table.partitions is None else [p.location for p in partitions]
    resolved = _resolved(locations or [table.location], storage_options)
    if resolved is None:
        return None
    if table.partitions is None:
        return _spread(spark, [Work(raw, fs, path, None, missing_ok=True) for raw, fs, path in resolved], in_place)
    root = resolve(table.location, storage_options=storage_options)[1].rstrip("/")
    work = []
    for part, (raw, fs, path) in zip(partitions, resolved):
        inside = path.rstrip("/") == root or path.startswith(root + "/")
        work.append(Work(raw, fs, path, root if inside else None, "" if inside else part.spec_path, True))
    return _spread(spark, work, in_place)


def _resolved(inputs: list[str], storage_options: dict[str, Any]) -> list[tuple[str, Any, str]] | None:
    """discovery.resolved_inputs, or None when one of them is on a local disk (the driver's)."""
    resolved = discovery.resolved_inputs(inputs, storage_options)
    return None if any(isinstance(fs, LocalFileSystem) for _, fs, _ in resolved) else resolved


def _spread(spark: Any, work: list[Work], in_place: bool) -> Spread:
    sc = spark.sparkContext
    parallelism = int(spark.conf.get(PARALLELISM, DEFAULT_PARALLELISM))
    sc.setJobDescription(f"pageindex: listing {len(work)} directories")
    numbered = list(enumerate(work))
    from pyspark import StorageLevel

    # On the executors' disks, not in memory: ten million files do not fit a small heap, and
    # listing them twice would ask the store twice.
    tasks = min(len(numbered), parallelism, TASKS_PER_CORE * max(1, sc.defaultParallelism))
    listed = (sc.parallelize(numbered, max(1, tasks)).mapPartitions(_list_each)
              .persist(StorageLevel.DISK_ONLY))
    try:
        small = listed.filter(lambda x: x[0] != "file").collect()  # per match: where, sums, errors
    finally:
        sc.setJobDescription(None)
    errors = sorted(value for kind, value in small if kind == "error")
    if errors:
        listed.unpersist()
        raise errors[0][1]
    sums = [value for kind, value in small if kind == "where"]  # (i, where, files, bytes)
    wheres = sorted((i, where) for i, where, _, _ in sums if where is not None)
    try:
        _check_formats(work, wheres, in_place)
    except UsageError:
        listed.unpersist()
        raise
    files = listed.filter(lambda x: x[0] == "file").map(lambda x: x[1])
    count, nbytes = sum(n for _, _, n, _ in sums), sum(b for _, _, _, b in sums)
    if _may_overlap(work):  # one file reached by two matches (nested inputs): listed once
        files = (files.map(lambda f: (f.url, f)).reduceByKey(lambda a, b: a if a.relative <= b.relative else b)
                 .values())
        count, nbytes = files.map(lambda f: (1, f.size)).fold((0, 0), _add)
    if not in_place:
        twice = files.map(lambda f: (f.relative, 1)).reduceByKey(operator.add).filter(lambda kv: kv[1] > 1)
        if not twice.isEmpty():
            listed.unpersist()
            raise UsageError("the inputs hold files with the same path below their input roots; "
                             "--output cannot mirror them into one tree (give one common parent)")
    return Spread(files, count, nbytes, listed)


def _may_overlap(work: list[Work]) -> bool:
    """Whether two listings may reach one file: one's match is the other's or lies below it."""
    paths = sorted(f"{w.raw.split('://', 1)[0]}://{w.match.rstrip('/')}/" for w in work)
    return any(b.startswith(a) for a, b in zip(paths, paths[1:]))


def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0] + b[0], a[1] + b[1]


def _list_each(items: Iterable[tuple[int, Work]]) -> Iterator[tuple[str, Any]]:
    """Each listing made: its files ("file"), then where its table-format check starts, the formats
    found below it and its files' count and bytes ("where"), or its PageIndexError ("error")."""
    for i, work in items:
        try:
            # An object store has no links to follow: follow_links changes nothing here.
            got = discovery.listed_match(work.missing_ok, False, (work.raw, work.fs, work.match, work.root))
        except PageIndexError as err:
            yield "error", (i, err)
            continue
        if got is None:  # a partition's location that does not exist: no files
            yield "where", (i, None, 0, 0)
            continue
        files, below, start = got
        count = nbytes = 0
        for f in files:
            if work.prefix:
                f = InputFile(f.url, f.size, posixpath.join(work.prefix, f.relative), f.version)
            count, nbytes = count + 1, nbytes + f.size
            yield "file", f
        yield "where", (i, (start, [(discovery.with_protocol(work.fs, where, work.raw), kind)
                                    for where, kind in below]), count, nbytes)


def _check_formats(work: list[Work], wheres: list[tuple[int, tuple]], in_place: bool) -> None:
    """A table's files given as plain files: the refusal check_modes gives (the checks above each
    match made on the driver, each directory once, as discovery makes them)."""
    starts = [(work[i].raw, work[i].fs, start) for i, (start, _) in wheres]
    formats = []
    for (raw, _, _), kind, (_, (_, below)) in zip(starts, discovery.table_formats(starts), wheres):
        formats += [(raw, kind)] if kind else below
    if formats:
        raise UsageError(lake.refusal(*formats[0], in_place=in_place))
