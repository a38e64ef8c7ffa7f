"""Catalog tables: a table's files found through the Spark catalog, every partition wherever it lives.

A partitioned table is read as Spark reads it: the files of each partition the catalog lists.
"""
from __future__ import annotations

import posixpath
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote

from pageindex.errors import MissingInputError, UsageError
from pageindex.io.discovery import Discovery, InputFile, discover, discover_each
from pageindex.io.storage import normalize_url, resolve

# Table formats that keep their own list of files: their catalog entry's location is their root.
LOG_FORMATS = ("delta", "iceberg", "hudi")
SESSION_CATALOG = "spark_catalog"  # the name of Spark's session catalog in a three-part name


@dataclass(frozen=True)
class Partition:
    """One partition the catalog lists: where its files are and its values as a path (k=v/...)."""

    location: str
    spec_path: str


@dataclass(frozen=True)
class CatalogTable:
    name: str
    location: str
    provider: str | None  # parquet, hive, delta, iceberg, ...
    partitions: tuple[Partition, ...] | None  # None: Spark reads the files below the location


def describe(spark: Any, name: str) -> CatalogTable:
    """The catalog's entry for `name`: location, provider and its partitions' locations.
    Raises UsageError for a table the catalog does not know or one with no location."""
    try:
        exists = spark.catalog.tableExists(name)
    except Exception as err:  # noqa: BLE001 - a name Spark cannot parse: a py4j/pyspark error
        raise UsageError(f"--table {name}: not a table name: {spark_message(err)}") from None
    if not exists:
        raise UsageError(f"table {name} does not exist in the catalog")
    if getattr(spark, "_jsparkSession", None) is None:  # Spark Connect: SQL only
        return _described_table(spark, name)
    # None: a table of another (v2) catalog, whose DESCRIBE says where it is
    return _session_catalog_table(spark, name) or _described_table(spark, name, partitions=False)


def _session_catalog_table(spark: Any, name: str) -> CatalogTable | None:
    """The table from Spark's session catalog (Hive metastore or in-memory) through the JVM, with
    every partition in one metastore call; None when the name lives in another catalog."""
    jvm = spark._jvm
    state = spark._jsparkSession.sessionState()
    try:
        parts = [str(p) for p in _seq(state.sqlParser().parseMultipartIdentifier(name))]
        if len(parts) == 3 and parts[0].lower() == SESSION_CATALOG:
            parts = parts[1:]
        if len(parts) > 2:
            return None
        ident = state.sqlParser().parseTableIdentifier(".".join(f"`{p.replace('`', '``')}`" for p in parts))
        catalog = state.catalog()
        meta = catalog.getTableMetadata(ident)
    except Exception:  # noqa: BLE001 - not a session catalog table (e.g. catalog.db.table in a v2 catalog)
        return None
    if meta.tableType().name() == "VIEW":
        raise UsageError(f"table {name} is a view: give the table it reads")
    location = str(jvm.org.apache.spark.sql.catalyst.catalog.CatalogUtils.URIToString(meta.location()))
    provider = str(meta.provider().get()) if meta.provider().isDefined() else None
    columns = [str(c) for c in _seq(meta.partitionColumnNames())]
    if not columns or (provider or "").lower() in LOG_FORMATS or not meta.tracksPartitionsInCatalog():
        return CatalogTable(name, location, provider, None)
    partitions = []
    for part in _seq(catalog.listPartitions(ident, jvm.scala.Option.empty())):
        spec = part.spec()
        values = [str(spec.apply(c)) for c in columns]
        where = str(jvm.org.apache.spark.sql.catalyst.catalog.CatalogUtils.URIToString(part.location()))
        partitions.append(Partition(where, "/".join(f"{c}={_escape(v)}" for c, v in zip(columns, values))))
    return CatalogTable(name, location, provider, tuple(sorted(partitions, key=lambda p: p.spec_path)))


def _described_table(spark: Any, name: str, partitions: bool = True) -> CatalogTable:
    """The table as DESCRIBE TABLE EXTENDED tells it; with `partitions`, each partition SHOW
    PARTITIONS lists, located by a DESCRIBE of it (one query per partition: for sessions with
    no JVM to ask the catalog in one call)."""
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()
    info = {r[0].strip(): (r[1] or "").strip() for r in rows if r[0]}
    if "Location" not in info:
        raise UsageError(f"table {name} has no location in the catalog")
    if info.get("Type", "").upper() == "VIEW":
        raise UsageError(f"table {name} is a view: give the table it reads")
    location, provider = info["Location"], info.get("Provider")
    if not partitions or "# Partition Information" not in info or (provider or "").lower() in LOG_FORMATS:
        return CatalogTable(name, location, provider, None)
    try:
        specs = [str(r[0]) for r in spark.sql(f"SHOW PARTITIONS {name}").collect()]
    except Exception:  # noqa: BLE001 - a table whose partitions the catalog does not track
        return CatalogTable(name, location, provider, None)
    found = []
    for spec in specs:
        clause = ", ".join(f"`{key}` = '{value}'" for key, value in _spec_values(spec))
        described = spark.sql(f"DESCRIBE TABLE EXTENDED {name} PARTITION ({clause})").collect()
        where = _partition_location([(r[0] or "").strip(), (r[1] or "").strip()] for r in described)
        if where is None:
            raise UsageError(f"table {name}: the catalog gives partition {spec} no location")
        found.append(Partition(where, spec))
    return CatalogTable(name, location, provider, tuple(sorted(found, key=lambda p: p.spec_path)))


def _partition_location(rows: Any) -> str | None:
    """The Location of the "# Detailed Partition Information" section (the table's own comes
    after it, under "# Storage Information")."""
    inside = False
    for key, value in rows:
        if key.startswith("#"):
            inside = key == "# Detailed Partition Information"
        elif inside and key == "Location":
            return value
    return None


def _spec_values(spec: str) -> list[tuple[str, str]]:
    """("day", "1") pairs of SHOW PARTITIONS' "day=1/hour=2", Hive's escapes undone, quotes
    escaped for a SQL string literal."""
    pairs = []
    for part in spec.split("/"):
        key, _, value = part.partition("=")
        value = unquote(value).replace("\\", "\\\\").replace("'", "\\'")
        pairs.append((unquote(key), value))
    return pairs


def _seq(scala_seq: Any) -> list[Any]:
    it = scala_seq.iterator()
    out = []
    while it.hasNext():
        out.append(it.next())
    return out


# Hive's escapePathName: the characters a partition value cannot carry in a directory name.
_HIVE_ESCAPED = set('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(0x20)}


def _escape(value: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _HIVE_ESCAPED else c for c in value)


def spark_message(err: BaseException) -> str:
    """The line of a Spark or Py4J error that says what failed: not py4j's "An error occurred
    while calling o42.sql" preamble, nor the JVM stack or the plan that follow it."""
    for line in str(err).splitlines():
        line = line.strip().lstrip(":").strip()
        if line and not line.startswith(("An error occurred while calling", "at ", "JVM stacktrace")):
            return line
    return type(err).__name__


def table_files(table: CatalogTable, storage_options: dict[str, Any], follow_links: bool = False) -> Discovery:
    """The files Spark reads for `table`: below its location, or in each listed partition
    (those below the location found in one listing of it, each other one listed on its own).
    A location that does not exist holds no files, as Spark reads it. `relative` is the path
    below the table location, or for a partition elsewhere its values' path (k=v/...) and the
    path below its location: an --output tree mirrors the table."""
    if table.partitions is None:
        return _discover_or_empty(table.location, storage_options, follow_links)
    root = _url(table.location, storage_options)
    inside = {p for p in table.partitions if _below(_url(p.location, storage_options), root)}
    files: dict[str, InputFile] = {}
    formats: list[tuple[str, str]] = []
    if inside:
        found = _discover_or_empty(table.location, storage_options, follow_links)
        prefixes = {_url(p.location, storage_options).rstrip("/") + "/" for p in inside}
        files.update((f.url, f) for f in found.files if _in_one_of(f.url, prefixes))
        formats += found.table_formats
    outside = [p for p in table.partitions if p not in inside]
    # listed LISTING_THREADS at once: a thousand partitions elsewhere wait a few latencies, not a thousand
    for part, found in zip(outside, discover_each([p.location for p in outside], storage_options,
                                                       missing_ok=True, follow_links=follow_links)):
        if found is None:  # a location that does not exist holds no files
            continue
        formats += found.table_formats
        for f in found.files:
            files.setdefault(f.url, replace(f, relative=posixpath.join(part.spec_path, f.relative)))
    return Discovery(tuple(sorted(files.values(), key=lambda f: f.url)), tuple(formats))


def _in_one_of(url: str, folders: set[str]) -> bool:
    """Whether `url` lies below one of `folders` (each ending in "/"): a set lookup per level of
    its path, not a comparison per partition (a million files, ten thousand partitions)."""
    end = url.find("/")
    while end != -1:
        if url[:end + 1] in folders:
            return True
        end = url.find("/", end + 1)
    return False


def _discover_or_empty(location: str, storage_options: dict[str, Any], follow_links: bool) -> Discovery:
    try:
        return discover([location], storage_options, follow_links=follow_links)
    except MissingInputError:
        return Discovery((), ())


def _url(location: str, storage_options: dict[str, Any]) -> str:
    """`location` as discovery names the files below it: a path, or scheme://bucket/key."""
    path = resolve(location, storage_options=storage_options)[1]
    normalized = normalize_url(location)
    return normalized.split("://", 1)[0] + "://" + path if "://" in normalized else path


def _below(path: str, root: str) -> bool:
    return path.rstrip("/") == root.rstrip("/") or path.startswith(root.rstrip("/") + "/")
