"""The listing kept where it is made: past Spark's partition-discovery threshold, an object store's
matches are listed by executors into an RDD of files the driver never collects (counts come back).

discovery.discover_each's result, spread: the same matches, files, table-format checks and errors.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from fsspec.implementations.local import LocalFileSystem

from pageindex.errors import PageIndexError, UsageError
from pageindex.io import discovery
from pageindex.io.storage import resolve, storage_errors
from pageindex.job import lake, listing


@dataclass(frozen=True)
class Spread:
    """A listing on the executors: the files (an RDD of InputFile, each URL once) and their sums."""

    files: Any  # RDD of InputFile
    count: int
    nbytes: int


def list_on_spark(spark: Any, inputs: list[str], storage_options: dict[str, Any], in_place: bool
                  ) -> Spread | None:
    """The inputs' files listed by a Spark job and left there; None when the driver lists them
    (local inputs, or no more matches than the session's threshold). Raises as discover would:
    the first match's PageIndexError in their order, UsageError for a table's files
    (check_modes' rule), or for two files at one path below an --output."""
    resolved = []
    for raw in inputs:
        with storage_errors("list", raw):
            fs, path = resolve(raw, storage_options=storage_options)
            fs.invalidate_cache()
        resolved.append((raw, fs, path))
    if any(isinstance(fs, LocalFileSystem) for _, fs, _ in resolved):
        return None
    matched = discovery.each(lambda item: discovery._guarded(item[0], False, discovery._matches, *item),
                             resolved, discovery.LISTING_THREADS)
    work = [(raw, fs, match, root) for (raw, fs, _), (matches, root) in zip(resolved, matched)
            for match in matches]
    if len(work) <= int(spark.conf.get(listing.THRESHOLD, listing.DEFAULTS[listing.THRESHOLD])):
        return None
    sc = spark.sparkContext
    parallelism = int(spark.conf.get(listing.PARALLELISM, listing.DEFAULTS[listing.PARALLELISM]))
    sc.setJobDescription(f"pageindex: listing {len(work)} directories")
    numbered = list(enumerate(work))
    listed = sc.parallelize(numbered, min(len(numbered), parallelism)).mapPartitions(_list_each).persist()
    try:
        small = listed.filter(lambda x: x[0] != "file").collect()  # per match: where, errors, sums
    finally:
        sc.setJobDescription(None)
    errors = sorted((i, err) for kind, (i, err) in small if kind == "error")
    if errors:
        listed.unpersist()
        raise errors[0][1]
    _check_formats(work, sorted((i, v) for kind, (i, v) in small if kind == "where"), in_place)
    files = (listed.filter(lambda x: x[0] == "file").map(lambda x: (x[1].url, x[1]))
             .reduceByKey(lambda a, b: a if a.relative <= b.relative else b).values())
    files = files.persist()
    count, nbytes = files.map(lambda f: (1, f.size)).fold((0, 0), _add)
    listed.unpersist()
    if not in_place:
        twice = files.map(lambda f: (f.relative, 1)).reduceByKey(operator.add).filter(lambda kv: kv[1] > 1)
        if not twice.isEmpty():
            raise UsageError("the inputs hold files with the same path below their input roots; "
                             "--output cannot mirror them into one tree (give one common parent)")
    return Spread(files, count, nbytes)


def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0] + b[0], a[1] + b[1]


def _list_each(items: Iterable[tuple[int, tuple]]) -> Iterator[tuple[str, Any]]:
    """Each match listed: its files ("file"), where its table-format check starts and the formats
    found below it ("where"), or its PageIndexError ("error")."""
    for i, item in items:
        try:
            # An object store has no links to follow: follow_links changes nothing here.
            files, below, start = discovery._listed(False, False, item)
        except PageIndexError as err:
            yield "error", (i, err)
            continue
        for f in files:
            yield "file", f
        yield "where", (i, (start, [(discovery._with_protocol(item[1], where, item[0]), kind)
                                    for where, kind in below]))


def _check_formats(work: list[tuple], wheres: list[tuple[int, tuple]], in_place: bool) -> None:
    """A table's files given as plain files: the refusal check_modes gives (the checks above each
    match made on the driver, each directory once, as discovery makes them)."""
    starts = [(work[i][0], work[i][1], start) for i, (start, _) in wheres]
    formats = []
    for (raw, _, _), kind, (_, (_, below)) in zip(starts, discovery._table_formats(starts), wheres):
        formats += [(raw, kind)] if kind else below
    if formats:
        raise UsageError(lake.refusal(*formats[0], in_place=in_place))

