"""Engine-agreement helpers: typed SQL predicates, and rows / pruning metrics from Spark and DataFusion.

All rows are normalized the same way (normalize_rows), so Spark, DataFusion and a pyarrow reference compare.
"""
from __future__ import annotations

import datetime as dt
import decimal
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tests.helpers.datafusion import parse_scan_metrics
from tests.helpers.spark import collected_scan_rows, spark_conf, to_uri
from tests.helpers.tables import FLAT_KINDS

Engine = Literal["spark", "datafusion"]
ENGINES: tuple[Engine, ...] = ("spark", "datafusion")

# (kind, engine) pairs an engine cannot read or compare, with the observed behaviour
# (Spark 4.3.0 / parquet-java 1.17.0, DataFusion 55). Columns are named after their kind.
ENGINE_UNSUPPORTED: Mapping[tuple[str, Engine], str] = {
    ("float16", "spark"): "PARQUET_TYPE_ILLEGAL: FIXED_LEN_BYTE_ARRAY (FLOAT16); fails schema inference of the whole file",
    ("decimal50", "spark"): "DECIMAL_PRECISION_EXCEEDS_MAX_PRECISION: precision 50 > 38",
    ("uuid", "spark"): "PARQUET_TYPE_ILLEGAL: FIXED_LEN_BYTE_ARRAY (UUID)",
    ("time32_ms", "spark"): "PARQUET_TYPE_ILLEGAL: INT32 (TIME(MILLIS,false)), even with spark.sql.timeType.enabled",
    ("ts_ns", "spark"): "PARQUET_TYPE_ILLEGAL: INT64 (TIMESTAMP(NANOS,false)) unless spark.sql.legacy.parquet.nanosAsLong",
    ("ts_ns_tz", "spark"): "PARQUET_TYPE_ILLEGAL: INT64 (TIMESTAMP(NANOS,true)) unless spark.sql.legacy.parquet.nanosAsLong",
}  # fmt: skip

# Kinds Spark reads but never pushes a filter on: no row-group or page skipping at all, so their
# "Scan parquet" numOutputRows is always the whole file. Page-index tests on Spark need other kinds.
SPARK_NOT_PUSHED_DOWN: Mapping[str, str] = {
    "uint8": "UINT_8 read as smallint; ParquetFilters skips unsigned types",
    "uint16": "UINT_16 read as int; not pushed",
    "uint32": "UINT_32 read as bigint; not pushed",
    "uint64": "UINT_64 read as decimal(20,0); not pushed",
    "json": "BYTE_ARRAY (JSON) read as string, but only STRING/ENUM annotations are pushed",
    "fixed_binary16": "FIXED_LEN_BYTE_ARRAY without annotation read as binary; not pushed",
    "time64_ns": "TIME(NANOS) read as time(9); only TIME(MICROS) is pushed",
    "ts_s": "TIMESTAMP(MILLIS, isAdjustedToUTC=false) read as timestamp_ntz; NTZ is not pushed",
    "ts_ms": "TIMESTAMP(MILLIS, isAdjustedToUTC=false) read as timestamp_ntz; NTZ is not pushed",
    "ts_us": "TIMESTAMP(MICROS, isAdjustedToUTC=false) read as timestamp_ntz; NTZ is not pushed",
}

# Other behaviours measured with these helpers that tests must allow for.
ENGINE_NOTES: Mapping[str, str] = {
    "nan_order": "Spark orders every NaN above +inf; DataFusion uses IEEE totalOrder, so -NaN (sign "
    "bit set) sorts below -inf. Both treat -0.0 = +0.0 and never match NaN with =. "
    "Predicate.mask(table, engine) models both.",
    "nan_statistics": "pyarrow leaves NaN out of chunk (and page) min/max, so on files with "
    "statistics both engines drop NaN rows for > / >= (and DataFusion -NaN rows for < / <=) "
    "whenever row-group statistics exclude the literal, index or not. Compare NaN results "
    "against the same engine on the unindexed file, or write without statistics.",
    "datafusion_counts": "EXPLAIN ANALYZE prints counts >= 1000 rounded ('10.00 K'); "
    "datafusion_metrics takes bytes_scanned, output_rows and rows_decoded from the plan instead.",
    "datafusion_fully_matched": "DataFusion does not consult the page index of a row group "
    "whose statistics prove every row matches (page_index_pages_pruned_total is then 0).",
    "datafusion_types": "DataFusion reads strings/binaries as Utf8View/BinaryView, uuid as "
    "FixedSizeBinary(16), json as Utf8View, and restores date64 and durations from ARROW:schema.",
    "spark_types": "Spark reads uint8/16/32/64 as smallint/int/bigint/decimal(20,0), duration as "
    "bigint (ARROW:schema ignored), date64 as date, isAdjustedToUTC=false timestamps as "
    "timestamp_ntz, INT96 as timestamp; TIME(MICROS/NANOS) needs spark.sql.timeType.enabled.",
    "spark_whole_file": "One unreadable column makes spark.read.parquet fail for the whole file, "
    "even when not selected; spark_read passes an explicit schema without such columns.",
    "lz4": "pyarrow's compression='lz4' writes the LZ4_RAW codec; its metadata calls it 'LZ4'.",
}

# Spark settings every helper query runs with. TIME(MICROS/NANOS) is readable only behind
# spark.sql.timeType.enabled (UNSUPPORTED_TIME_TYPE otherwise).
SPARK_SQL_CONF: Mapping[str, str] = {
    "spark.sql.parquet.filterPushdown": "true",
    "spark.sql.timeType.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
}
# Passed as data source options, which Spark copies into the Hadoop conf of the scan.
SPARK_READ_OPTIONS: Mapping[str, str] = {"parquet.filter.columnindex.enabled": "true"}

DATAFUSION_CONF: Mapping[str, str] = {
    "datafusion.execution.parquet.enable_page_index": "true",
    "datafusion.execution.parquet.pushdown_filters": "true",
    "datafusion.execution.parquet.pruning": "true",
    "datafusion.execution.time_zone": "+00:00",
}


def supported(kind: str, engine: Engine) -> bool:
    """Whether `engine` can read and filter a column of this kind (see ENGINE_UNSUPPORTED)."""
    return (kind, engine) not in ENGINE_UNSUPPORTED


# --------------------------------------------------------------------------------------------
# Row normalization
# --------------------------------------------------------------------------------------------


class _NaN:
    """The one NaN of normalized rows: equal to itself, so rows holding NaN still compare."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _NaN)

    def __hash__(self) -> int:
        return 0x7FF8

    def __repr__(self) -> str:
        return "NaN"


NAN = _NaN()
_NS_PER: Mapping[str, int] = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


def _to_int64(x):
    """Raw stored integer of a temporal array or scalar (32-bit types cast via int32)."""
    if pa.types.is_time32(x.type) or pa.types.is_date32(x.type):
        return x.cast(pa.int32()).cast(pa.int64())
    return x.cast(pa.int64())


def _canon_value(v: Any) -> Any:
    """Plain Python value: tuples for lists/structs/maps, bytes for binaries, NAN for NaN."""
    if isinstance(v, float) and math.isnan(v):
        return NAN
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, decimal.Decimal) and v.as_tuple().exponent == 0:
        return int(v)  # Spark reads UINT_64 as decimal(20,0); DataFusion as uint64
    if isinstance(v, dict):
        return tuple(_canon_value(x) for x in v.values())
    if isinstance(v, (list, tuple)):
        return tuple(_canon_value(x) for x in v)
    return v


def _canon_column(col: pa.ChunkedArray) -> list:
    """A column as comparable Python values, identical whichever engine produced it.

    Timestamps and times become integer nanoseconds (Spark stops at microseconds, pyarrow cannot
    make datetimes of nanoseconds), durations their raw stored integer (Spark reads them as
    bigint), dates datetime.date, dictionaries their decoded values.
    """
    typ = col.type
    if isinstance(typ, pa.BaseExtensionType):
        col = pa.chunked_array([c.storage for c in col.chunks], typ.storage_type)
        typ = col.type
    if pa.types.is_dictionary(typ):
        col, typ = col.cast(typ.value_type), typ.value_type
    if pa.types.is_timestamp(typ) or pa.types.is_time(typ):
        scale = _NS_PER[typ.unit]
        return [None if v is None else v * scale for v in _to_int64(col).to_pylist()]
    if pa.types.is_duration(typ):
        return _to_int64(col).to_pylist()
    if pa.types.is_date(typ):
        col = col.cast(pa.date32())
    if pa.types.is_float16(typ):
        col = col.cast(pa.float64())
    return [_canon_value(v) for v in col.to_pylist()]


def _sort_key(v: Any) -> tuple:
    if v is None:
        return (0,)
    if v is NAN:
        return (2,)
    if isinstance(v, tuple):
        return (1, tuple(_sort_key(x) for x in v))
    return (1, v)


def normalize_rows(table: pa.Table) -> list[tuple]:
    """Rows of `table` as tuples of canonical values, sorted (engine output order is arbitrary)."""
    columns = [_canon_column(c) for c in table.columns]
    rows = list(zip(*columns)) if columns else []
    return sorted(rows, key=lambda r: tuple(_sort_key(v) for v in r))


# --------------------------------------------------------------------------------------------
# Predicates
# --------------------------------------------------------------------------------------------

Op = Literal["=", "<", "<=", ">", ">=", "BETWEEN", "IS NULL", "IS NOT NULL"]
_COMPARE = {"=": pc.equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater, ">=": pc.greater_equal}


def _quote(column: str, engine: Engine) -> str:
    if engine == "spark":
        return "`" + column.replace("`", "``") + "`"
    return '"' + column.replace('"', '""') + '"'


def _fraction(value: int, unit: str) -> str:
    digits = {"s": 0, "ms": 3, "us": 6, "ns": 9}[unit]
    return f".{value:0{digits}d}" if digits else ""


def _clock(value: int, unit: str) -> tuple[dt.datetime, str]:
    """Whole-second UTC datetime and fractional-second text of an integer in `unit`."""
    per_second = 1_000_000_000 // _NS_PER[unit]
    seconds, sub = divmod(value, per_second)
    return dt.datetime(1970, 1, 1) + dt.timedelta(seconds=seconds), _fraction(sub, unit)


_DF_TIME_UNIT = {"s": "Second", "ms": "Millisecond", "us": "Microsecond", "ns": "Nanosecond"}


def _storage_type(typ: pa.DataType) -> pa.DataType:
    if isinstance(typ, pa.BaseExtensionType):
        return typ.storage_type
    if pa.types.is_dictionary(typ):
        return typ.value_type
    return typ


def _string_literal(text: str, engine: Engine) -> str:
    # Plain quoting only for printable text without quote or backslash: Spark processes
    # backslash escapes and concatenates adjacent literals ('a''b' is 'ab'), DataFusion doubles
    # quotes. Anything else goes through a UTF-8 hex literal, which both constant-fold.
    if text.isprintable() and "'" not in text and "\\" not in text:
        return f"'{text}'"
    cast_to = "STRING" if engine == "spark" else "VARCHAR"
    return f"CAST(X'{text.encode('utf-8').hex().upper()}' AS {cast_to})"


def _literal(value: pa.Scalar, engine: Engine) -> str:
    """`value` as a SQL literal of the column's type that both engines accept and push down."""
    typ = _storage_type(value.type)
    if isinstance(value, pa.ExtensionScalar):
        value = value.value
    if isinstance(value, pa.DictionaryScalar):
        value = value.value
    if pa.types.is_boolean(typ):
        return "TRUE" if value.as_py() else "FALSE"
    if pa.types.is_integer(typ):
        return str(value.as_py())
    if pa.types.is_floating(typ):
        f = float(value.cast(pa.float64()).as_py())
        text = "Infinity" if f == float("inf") else "-Infinity" if f == float("-inf") else repr(f)
        return f"CAST('{text}' AS DOUBLE)"
    if pa.types.is_decimal(typ):
        return f"CAST('{format(value.as_py(), 'f')}' AS DECIMAL({typ.precision},{typ.scale}))"
    if pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_string_view(typ):
        return _string_literal(value.as_py(), engine)
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ) or pa.types.is_binary_view(typ) or pa.types.is_fixed_size_binary(typ):
        return f"X'{value.as_py().hex().upper()}'"
    if pa.types.is_date(typ):
        return f"DATE '{value.cast(pa.date32()).as_py().isoformat()}'"
    raw = _to_int64(value).as_py()
    if pa.types.is_timestamp(typ):
        when, frac = _clock(raw, typ.unit)
        text = when.strftime("%Y-%m-%d %H:%M:%S") + frac
        if typ.tz is not None:
            return f"TIMESTAMP '{text}+00:00'"
        return f"TIMESTAMP_NTZ '{text}'" if engine == "spark" else f"TIMESTAMP '{text}'"
    if pa.types.is_time(typ):
        when, frac = _clock(raw, typ.unit)
        text = when.strftime("%H:%M:%S") + frac
        if engine == "spark":
            return f"TIME '{text}'"
        arrow = f"Time{typ.bit_width}({_DF_TIME_UNIT[typ.unit]})"
        return f"arrow_cast('{text}', '{arrow}')"
    if pa.types.is_duration(typ):
        # Spark sees the raw INT64 (no logical type): compare the stored integer.
        return str(raw) if engine == "spark" else f"arrow_cast({raw}, 'Duration({_DF_TIME_UNIT[typ.unit]})')"
    raise TypeError(f"no SQL literal for {typ}")


@dataclass(frozen=True)
class Predicate:
    """An engine-neutral filter on one flat column; render with sql(engine), check with mask()."""

    column: str
    op: Op
    values: tuple[pa.Scalar, ...] = field(default=(), hash=False)

    def __post_init__(self) -> None:
        wanted = {"IS NULL": 0, "IS NOT NULL": 0, "BETWEEN": 2}.get(self.op, 1)
        if len(self.values) != wanted or any(not v.is_valid for v in self.values):
            raise ValueError(f"{self.op} needs {wanted} non-null values, got {self.values!r}")

    def sql(self, engine: Engine) -> str:
        col = _quote(self.column, engine)
        if self.op in ("IS NULL", "IS NOT NULL"):
            return f"{col} {self.op}"
        if self.op == "BETWEEN":
            lo, hi = (_literal(v, engine) for v in self.values)
            return f"{col} BETWEEN {lo} AND {hi}"
        return f"{col} {self.op} {_literal(self.values[0], engine)}"

    def __str__(self) -> str:
        return self.sql("datafusion")

    def mask(self, table: pa.Table, engine: Engine = "spark") -> pa.ChunkedArray:
        """Rows `engine` returns, computed with pyarrow.compute (nulls never match).

        Engines differ from IEEE for NaN, and from each other: Spark orders every NaN above
        +inf; DataFusion uses IEEE totalOrder, so a NaN with the sign bit set (-NaN) sorts
        below -inf and only a positive NaN above +inf. In both, -0.0 = +0.0 and NaN never
        equals a literal. (This is the truth for the data; engines reading files whose
        statistics leave NaN out can prune NaN rows away, see ENGINE_NOTES.)
        """
        col = _comparable(table.column(self.column))
        if self.op == "IS NULL":
            return col.is_null()
        if self.op == "IS NOT NULL":
            return col.is_valid()
        scalars = [_comparable_scalar(v, col.type) for v in self.values]
        if self.op == "BETWEEN":
            hit = pc.and_(pc.greater_equal(col, scalars[0]), pc.less_equal(col, scalars[1]))
        else:
            hit = _COMPARE[self.op](col, scalars[0])
        if pa.types.is_floating(col.type) and self.op in ("<", "<=", ">", ">="):
            nan = pc.fill_null(pc.is_nan(col), False)
            negative = pa.chunked_array([np.signbit(col.to_numpy())], pa.bool_())
            if engine == "spark":
                low, high = pc.and_(nan, False), nan
            else:
                low, high = pc.and_(nan, negative), pc.and_(nan, pc.invert(negative))
            hit = pc.or_(hit, low if self.op in ("<", "<=") else high)
        return pc.fill_null(hit, False)


def _comparable(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """A column pyarrow.compute can compare: decoded, float16 widened, temporal as raw ints."""
    typ = col.type
    if isinstance(typ, pa.BaseExtensionType):
        col = pa.chunked_array([c.storage for c in col.chunks], typ.storage_type)
    elif pa.types.is_dictionary(typ):
        col = col.cast(typ.value_type)
    typ = col.type
    if pa.types.is_float16(typ):
        return col.cast(pa.float64())
    if pa.types.is_string_view(typ):
        return col.cast(pa.large_string())
    if pa.types.is_binary_view(typ):
        return col.cast(pa.large_binary())
    if pa.types.is_fixed_size_binary(typ):
        return col.cast(pa.binary())
    if pa.types.is_date(typ):
        return _to_int64(col.cast(pa.date32()))
    if pa.types.is_timestamp(typ) or pa.types.is_time(typ) or pa.types.is_duration(typ):
        return _to_int64(col)
    return col


def _comparable_scalar(value: pa.Scalar, comparable_type: pa.DataType) -> pa.Scalar:
    if isinstance(value, pa.ExtensionScalar):
        value = value.value
    if isinstance(value, pa.DictionaryScalar):
        value = value.value
    if pa.types.is_date(value.type):
        return _to_int64(value.cast(pa.date32()))
    if pa.types.is_temporal(value.type):
        return _to_int64(value)
    if pa.types.is_float16(value.type):
        return value.cast(pa.float64())
    return pa.scalar(value.as_py(), comparable_type)


def predicates_for(
    table: pa.Table,
    column: str,
    rng: np.random.Generator,
    engines: Iterable[Engine] = ENGINES,
) -> list[Predicate]:
    """Point, range, BETWEEN and null predicates on existing values of a flat column.

    Empty when the column is not flat or any of `engines` cannot handle its kind. Literals
    come from rows of the table, chosen with `rng`, and include the column's min and max so
    the page holding an extreme is targeted too.
    """
    if column not in FLAT_KINDS and column not in ("key", "desc"):
        return []
    if any(not supported(column, e) for e in engines):
        return []
    col = table.column(column)
    comparable = _comparable(col)
    usable = comparable.is_valid()
    if pa.types.is_floating(comparable.type):
        usable = pc.and_(usable, pc.invert(pc.is_nan(comparable)))
    usable_np = np.asarray(usable.to_numpy(), dtype=bool)
    order = pc.sort_indices(comparable).to_numpy()
    order = order[usable_np[order]]  # ranks of the non-null, non-NaN rows, smallest first
    preds: list[Predicate] = [Predicate(column, "IS NULL"), Predicate(column, "IS NOT NULL")]
    n = len(order)
    if n == 0:
        return preds

    def at(rank: int) -> pa.Scalar:
        return col[int(order[rank])]

    picks = sorted(int(i) for i in rng.integers(0, n, size=3))
    lo, mid, hi = (at(i) for i in picks)
    preds += [
        Predicate(column, "=", (mid,)),
        Predicate(column, "=", (at(n - 1),)),
        Predicate(column, "<", (lo,)),
        Predicate(column, "<=", (at(0),)),
        Predicate(column, ">", (hi,)),
        Predicate(column, ">=", (mid,)),
        Predicate(column, "BETWEEN", (lo, hi)),
    ]
    if not pa.types.is_boolean(comparable.type):
        preds.append(Predicate(column, "BETWEEN", (mid, mid)))
    return preds


def reference_rows(
    table: pa.Table, predicate: Predicate, columns: Sequence[str] | None = None, engine: Engine = "spark"
) -> list[tuple]:
    """What `engine` must return for `predicate`, computed from the table with pyarrow."""
    mask = predicate.mask(table, engine)
    if columns is not None:
        table = table.select(list(columns))
    # pyarrow 26 has no take/filter kernel for view types; the values are what matter here.
    views = {pa.string_view(): pa.large_string(), pa.binary_view(): pa.large_binary()}
    table = table.cast(pa.schema([f.with_type(views.get(f.type, f.type)) for f in table.schema]))
    return normalize_rows(table.filter(mask))


# --------------------------------------------------------------------------------------------
# Spark
# --------------------------------------------------------------------------------------------


_SCHEMA_CACHE: dict[tuple[str, int, int, int], Any] = {}


def spark_schema(spark, path: str | Path):
    """Spark's schema of `path` with the top-level columns Spark cannot read left out.

    Spark refuses the whole file when one column has an unsupported type, even if it is not
    selected; reading with this explicit schema skips those columns. Each field is converted
    alone by Spark's own ParquetToSparkSchemaConverter (with the session's SQLConf). Cached per
    file version, as it costs a few hundred Py4J calls.
    """
    stat = Path(path).stat()
    key = (str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size, id(spark))
    if key not in _SCHEMA_CACHE:
        _SCHEMA_CACHE[key] = _convert_schema(spark, path)
    return _SCHEMA_CACHE[key]


def _convert_schema(spark, path: str | Path):
    from pyspark.sql.types import StructType

    jvm = spark._jvm
    hadoop = spark._jsc.hadoopConfiguration()
    infile = jvm.org.apache.parquet.hadoop.util.HadoopInputFile.fromPath(jvm.org.apache.hadoop.fs.Path(to_uri(path)), hadoop)
    reader = jvm.org.apache.parquet.hadoop.ParquetFileReader.open(infile)
    try:
        message = reader.getFooter().getFileMetaData().getSchema()
    finally:
        reader.close()
    with spark_conf(spark, **SPARK_SQL_CONF):
        converter = jvm.org.apache.spark.sql.execution.datasources.parquet.ParquetToSparkSchemaConverter(
            spark._jsparkSession.sessionState().conf()
        )
        fields = []
        for parquet_field in message.getFields():
            single = jvm.org.apache.parquet.schema.MessageType(message.getName(), jvm.java.util.List.of(parquet_field))
            converted = _spark_field(converter, single)
            if converted is not None:
                fields.append(converted)
    return StructType.fromJson({"type": "struct", "fields": fields})


def _spark_field(converter, single_field_message) -> dict | None:
    """The Spark field JSON of a one-field Parquet schema, or None when Spark rejects its type."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    try:
        return json.loads(converter.convert(single_field_message).json())["fields"][0]
    except (PySparkException, Py4JJavaError):  # pyspark turns most JVM errors into its own types
        return None


def spark_read(spark, path: str | Path, columns: Sequence[str] | None = None):
    """A DataFrame over `path` (readable columns only, or `columns`) with index filtering on."""
    schema = spark_schema(spark, path)
    reader = spark.read.schema(schema)
    for key, value in SPARK_READ_OPTIONS.items():
        reader = reader.option(key, value)
    df = reader.parquet(to_uri(path))
    if columns is not None:
        df = df.select(*[_quote(c, "spark") for c in columns])
    return df


def _predicate_text(predicate: Predicate | str, engine: Engine) -> str | None:
    if isinstance(predicate, Predicate):
        return predicate.sql(engine) if supported(predicate.column, engine) else None
    return predicate


def _spark_columns(path: str | Path, columns: Sequence[str] | None) -> list[str] | None:
    names = columns if columns is not None else pq.read_schema(path).names
    if any(not supported(c, "spark") for c in names):
        return None if columns is not None else [c for c in names if supported(c, "spark")]
    return list(names)


def spark_rows(spark, path: str | Path, predicate: Predicate | str, columns: Sequence[str] | None = None) -> list[tuple] | None:
    """Normalized, sorted rows Spark returns for `predicate` (a Predicate or Spark SQL text).

    None when the predicate column or a requested column is unsupported by Spark; with
    columns=None every Spark-readable column is returned.
    """
    where = _predicate_text(predicate, "spark")
    cols = _spark_columns(path, columns)
    if where is None or cols is None:
        return None
    with spark_conf(spark, **SPARK_SQL_CONF):
        df = spark_read(spark, path, cols).where(where)
        return normalize_rows(df.toArrow())


def spark_scan_rows(
    spark, path: str | Path, predicate: Predicate | str, columns: Sequence[str] | None = None
) -> int | None:
    """numOutputRows of the "Scan parquet" node after running the query.

    That is the rows left after row-group statistics and ColumnIndex filtering, before
    Spark's own Filter (record-level filtering is off by default). Projection does not change
    it, so only `columns` (default: the Predicate's column, or all for SQL text) are read.
    None if unsupported.
    """
    where = _predicate_text(predicate, "spark")
    if where is None:
        return None
    if columns is None and isinstance(predicate, Predicate):
        columns = [predicate.column]
    with spark_conf(spark, **SPARK_SQL_CONF):
        return collected_scan_rows(spark_read(spark, path, columns).where(where))


# --------------------------------------------------------------------------------------------
# DataFusion
# --------------------------------------------------------------------------------------------


def datafusion_context(path: str | Path, table: str = "t"):
    """A fresh SessionContext (page index and filter pushdown on, 2 partitions) with `path` as `table`."""
    from datafusion import SessionConfig, SessionContext

    config = SessionConfig().with_target_partitions(2)
    for key, value in DATAFUSION_CONF.items():
        config = config.set(key, value)
    ctx = SessionContext(config)
    ctx.register_parquet(table, str(path))
    return ctx


def _datafusion_query(path: str | Path, where: str, columns: Sequence[str] | None) -> str:
    projection = "*" if columns is None else ", ".join(_quote(c, "datafusion") for c in columns)
    return f"SELECT {projection} FROM t WHERE {where}"


def datafusion_rows(path: str | Path, predicate: Predicate | str, columns: Sequence[str] | None = None) -> list[tuple] | None:
    """Normalized, sorted rows DataFusion returns for `predicate` (Predicate or SQL text)."""
    where = _predicate_text(predicate, "datafusion")
    if where is None or (columns is not None and any(not supported(c, "datafusion") for c in columns)):
        return None
    ctx = datafusion_context(path)
    return normalize_rows(ctx.sql(_datafusion_query(path, where, columns)).to_arrow_table())


def _scan_node(plan):
    stack = [plan]
    while stack:
        node = stack.pop()
        if node.display().startswith("DataSourceExec"):
            return node
        stack.extend(node.children())
    raise AssertionError("no DataSourceExec in DataFusion plan")


def datafusion_metrics(path: str | Path, predicate: Predicate | str) -> dict[str, int] | None:
    """Scan counters of DataFusion for `SELECT * FROM t WHERE predicate` (None if unsupported).

    Parsed from EXPLAIN ANALYZE by tests.helpers.datafusion.parse_scan_metrics: for each
    `x=N total → M matched` counter, `x` = pruned (N - M), `x_total`, `x_matched`; notably
    page_index_pages_pruned*, page_index_rows_pruned*, row_groups_pruned_statistics*.
    DataFusion prints counts of 1000 and more rounded ("10.00 K"), so those are approximate.
    Exact, from the executed plan's metrics: bytes_scanned, output_rows, and rows_decoded = rows
    that reached the pushed-down row filter, i.e. the rows left after row-group and page-index
    pruning. DataFusion skips the page index for row groups whose statistics already prove
    every row matches, so page counts depend on the predicate.
    """
    where = _predicate_text(predicate, "datafusion")
    if where is None:
        return None
    query = _datafusion_query(path, where, None)
    ctx = datafusion_context(path)
    text = "\n".join(str(r["plan"]) for r in ctx.sql(f"EXPLAIN ANALYZE {query}").to_arrow_table().to_pylist())
    out = parse_scan_metrics(text)
    df = ctx.sql(query)
    df.collect()
    metrics = _scan_node(df.execution_plan()).metrics()
    out["bytes_scanned"] = metrics.sum_by_name("bytes_scanned") or 0
    out["output_rows"] = metrics.output_rows or 0
    decoded = [metrics.sum_by_name(n) or 0 for n in ("pushdown_rows_matched", "pushdown_rows_pruned")]
    out["rows_decoded"] = sum(decoded)
    return out
