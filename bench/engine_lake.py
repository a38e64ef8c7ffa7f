"""The events lake of bench.engines: one table written by pyarrow, Spark and DuckDB, each in the
variants compared (no index, retrofitted, retrofitted with bloom filters, the writer's own index).

Columns: event_id (sorted), event_time (clustered: arrival order with up to 5 minutes of jitter),
user_id (random), country (a few common codes and one rare one), amount (a double payload).
"""
from __future__ import annotations

import datetime as dt
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import pageindex
from tests.helpers.spark import spark_conf, to_uri
from tests.helpers.strip import strip_page_index

EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
EVENT_STEP_US = 10_000  # one event every 10 ms on average
JITTER_US = 300_000_000  # arrival order, up to 5 minutes late
COUNTRIES = ("BR", "DE", "FR", "GB", "IN", "JP", "US")
RARE = "AQ"  # sorts before every common code: pages holding none of it exclude it by their bounds
RARE_EVERY = 100_000  # one row in this many has the rare value (at random places)
BLOOM_COLUMN = "user_id"
WRITERS = ("pyarrow", "spark", "duckdb")
# Variants of each writer's file; "native" is the writer's own page index (none for DuckDB, which
# writes none), "before" the same file without it (stripped: the same data pages, byte for byte).
VARIANTS = ("before", "after", "after_bloom", "native", "native_bloom")
VARIANT_LABELS = {"before": "no index", "after": "retrofit", "after_bloom": f"retrofit + bloom({BLOOM_COLUMN})",
                  "native": "writer's index", "native_bloom": f"writer's index + bloom({BLOOM_COLUMN})"}


@dataclass(frozen=True)
class Condition:
    """One conjunct of a query: column op value (op one of =, >=, <)."""

    column: str
    op: str
    value: Any


@dataclass(frozen=True)
class Query:
    name: str
    shape: str
    conditions: tuple[Condition, ...]


def events(rows: int, seed: int = 49) -> pa.Table:
    """The lake's rows, the same for a given (rows, seed)."""
    rng = np.random.default_rng(seed)
    event_id = np.arange(rows, dtype=np.int64)
    epoch_us = int(EPOCH.timestamp() * 1_000_000)
    event_time = epoch_us + event_id * EVENT_STEP_US + rng.integers(0, JITTER_US, rows)
    country = np.asarray(COUNTRIES, dtype=object)[rng.integers(0, len(COUNTRIES), rows)]
    country[rng.choice(rows, max(1, rows // RARE_EVERY), replace=False)] = RARE
    return pa.table({
        "event_id": event_id,
        "event_time": pa.array(event_time, pa.timestamp("us", tz="UTC")),
        "user_id": rng.integers(0, 1 << 31, rows, dtype=np.int64),
        "country": pa.array(country, pa.string()),
        "amount": np.round(rng.gamma(2.0, 20.0, rows), 2),
    })


def queries(table: pa.Table) -> tuple[Query, ...]:
    """The query shapes, on values the table holds (and one it does not)."""
    rows = table.num_rows
    middle = EPOCH + dt.timedelta(microseconds=rows // 2 * EVENT_STEP_US)
    return (
        Query("event_id =", "point lookup on a sorted key",
              (Condition("event_id", "=", rows // 2 + 17),)),
        Query("event_time 60 s", "narrow range on a clustered column",
              (Condition("event_time", ">=", middle), Condition("event_time", "<", middle + dt.timedelta(seconds=60)))),
        Query("user_id =", "lookup on an unsorted key",
              (Condition("user_id", "=", table.column("user_id")[rows // 3].as_py()),)),
        Query("user_id = absent", "lookup of an absent key", (Condition("user_id", "=", absent_user(table)),)),
        Query(f"country = '{RARE}'", "rare value", (Condition("country", "=", RARE),)),
        Query("user_id >= 0", "full scan (every row matches)", (Condition("user_id", ">=", 0),)),
    )


def absent_user(table: pa.Table) -> int:
    """A user_id inside every row group's [min, max] that no row has: only a bloom filter can tell."""
    present = table.column("user_id")
    start = present[table.num_rows // 3].as_py()
    candidates = pa.array(range(start + 1, start + 1000), pa.int64())
    return pc.filter(candidates, pc.invert(pc.is_in(candidates, present)))[0].as_py()


# ---- writers ---------------------------------------------------------------------------------

def write_pyarrow(table: pa.Table, path: Path, page_index: bool, bloom: bool) -> None:
    """pyarrow's defaults (1 Mi-row row groups, 1 MB pages), its own index and filter on demand."""
    options = {"bloom_filter_options": {BLOOM_COLUMN: {"ndv": table.num_rows, "fpp": 0.01}}} if bloom else {}
    pq.write_table(table, path, write_page_index=page_index, **options)


def write_duckdb(source: Path, path: Path) -> None:
    """DuckDB's defaults (122,880-row row groups); it writes no page index."""
    import duckdb

    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        con.execute(f"COPY (SELECT * FROM read_parquet('{source}')) TO '{path}' (FORMAT parquet)")
    finally:
        con.close()


def write_spark(spark, source: Path, path: Path, bloom: bool) -> None:
    """Spark's defaults (128 MB row groups, 20,000-row pages, its ColumnIndex), one file. The
    caller sets timestamps to INT64 micros: Spark's default INT96 has no statistics readers use."""
    out = path.with_suffix(".dir")
    shutil.rmtree(out, ignore_errors=True)
    writer = spark.read.parquet(to_uri(source)).coalesce(1).write
    if bloom:
        writer = (writer.option(f"parquet.bloom.filter.enabled#{BLOOM_COLUMN}", "true")
                  .option(f"parquet.bloom.filter.expected.ndv#{BLOOM_COLUMN}", str(pq.read_metadata(source).num_rows)))
    writer.parquet(to_uri(out))
    (part,) = out.glob("part-*.parquet")
    part.replace(path)
    shutil.rmtree(out)


def build(table: pa.Table, directory: Path, writers: tuple[str, ...], spark=None) -> dict[str, dict[str, Path]]:
    """Every variant of every writer's file in `directory`: {writer: {variant: path}}."""
    directory.mkdir(parents=True, exist_ok=True)
    files: dict[str, dict[str, Path]] = {}
    source = directory / "pyarrow-native.parquet"
    write_pyarrow(table, source, page_index=True, bloom=False)
    for writer in writers:
        out = files[writer] = {}
        native = directory / f"{writer}-native.parquet"
        if writer == "pyarrow":
            out["native"] = source
            out["native_bloom"] = directory / "pyarrow-native_bloom.parquet"
            write_pyarrow(table, out["native_bloom"], page_index=True, bloom=True)
        elif writer == "spark":
            with spark_conf(spark, **{"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}):
                write_spark(spark, source, native, bloom=False)
                out["native"] = native
                out["native_bloom"] = directory / "spark-native_bloom.parquet"
                write_spark(spark, source, out["native_bloom"], bloom=True)
        else:
            write_duckdb(source, native)
        before = directory / f"{writer}-before.parquet"
        if writer == "duckdb":
            native.replace(before)
        else:
            strip_page_index(native, before)
        out["before"] = before
        out["after"] = directory / f"{writer}-after.parquet"
        pageindex.retrofit(str(before), str(out["after"]))
        out["after_bloom"] = directory / f"{writer}-after_bloom.parquet"
        pageindex.retrofit(str(before), str(out["after_bloom"]), bloom_filter=[BLOOM_COLUMN])
    return {w: {v: files[w][v] for v in VARIANTS if v in files[w]} for w in writers}


def layout(path: Path) -> dict[str, Any]:
    """What the file looks like to an engine: size, row groups, pages per column chunk (from
    pageindex inspect), which columns have bloom filters, and the skipping it allows."""
    from pageindex.inspection import inspect_file, skipping_text

    view = inspect_file(str(path))
    pages = {c.column: (c.min_pages, c.max_pages) for c in view.columns()}
    return {"bytes": path.stat().st_size, "row_groups": len(view.row_groups), "pages_per_chunk": pages,
            "bloom_columns": sorted({c.column for c in view.chunks if c.bloom_filter is not None}),
            "index": view.index_state, "skipping": skipping_text(view)}
