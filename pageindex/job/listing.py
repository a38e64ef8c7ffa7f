"""Listing on Spark: the driver's many directory listings run as a Spark job past a threshold,
as Spark's own InMemoryFileIndex lists a table's partitions (its settings, its defaults).
"""
from __future__ import annotations

from typing import Any, Callable

from pageindex.errors import PageIndexError
from pageindex.io.discovery import Mapper, each

THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"
PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
DEFAULTS = {THRESHOLD: "32", PARALLELISM: "10000"}  # Spark's own


def on_spark(spark: Any) -> Mapper:
    """A Mapper for discovery: up to the session's THRESHOLD listings on the driver's threads,
    more in a Spark job of at most PARALLELISM tasks (executors parse the stores' answers, which
    for millions of objects is the driver's largest CPU cost). Results come back in the items'
    order; the first item's PageIndexError (in their order) is raised on the driver, typed as
    it was raised on the executor."""
    def run(fn: Callable[[Any], Any], items: list) -> list:
        # Asked when there is something to list: an input that does not exist is reported first.
        if len(items) <= int(spark.conf.get(THRESHOLD, DEFAULTS[THRESHOLD])):
            return each(fn, items)
        parallelism = int(spark.conf.get(PARALLELISM, DEFAULTS[PARALLELISM]))
        sc = spark.sparkContext
        sc.setJobDescription(f"pageindex: listing {len(items)} directories")
        try:
            outcomes = sc.parallelize(items, min(len(items), parallelism)).map(_outcome(fn)).collect()
        finally:
            sc.setJobDescription(None)
        for ok, value in outcomes:
            if not ok:
                raise value
        return [value for _, value in outcomes]

    return run


def _outcome(fn: Callable[[Any], Any]) -> Callable[[Any], tuple[bool, Any]]:
    """fn as (True, result), or (False, its PageIndexError): a typed error crosses to the driver
    as itself, not as the Py4J error of a failed stage."""
    def outcome(item: Any) -> tuple[bool, Any]:
        try:
            return True, fn(item)
        except PageIndexError as err:
            return False, err
    return outcome
