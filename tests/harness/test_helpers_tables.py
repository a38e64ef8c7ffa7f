"""Checks that the test-data generator (tests/helpers/tables.py) and engine helpers (engines.py) do what they claim.

Types per kind, writer grids, index twins, determinism, and Spark/DataFusion agreement with pyarrow.
"""
from __future__ import annotations

import hashlib
import math
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.helpers import engines as E
from tests.helpers.page_reader import DATA_PAGE, DATA_PAGE_V2, DICTIONARY_PAGE
from tests.helpers.spark import find_scan_nodes, plan_metric, spark_conf
from tests.helpers.tables import (
    ALL_KINDS,
    FLAT_KINDS,
    FLOAT_KINDS,
    FULL_GRID,
    INT96_KINDS,
    NESTED_KINDS,
    PARQUET_TYPES,
    PARQUET_TYPES_DECIMAL_AS_INTEGER,
    SMALL_GRID,
    data_page_counts,
    expected_readback,
    page_headers,
    random_table,
    same_content,
    write_variants,
)

SEED = 11
ROWS = 1500


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return random_table(SEED, ROWS)


@pytest.fixture(scope="module")
def small_files(table, tmp_path_factory):
    return write_variants(table, tmp_path_factory.mktemp("small-grid"), "small")


def _value_near(table: pa.Table, column: str, row: int) -> pa.Scalar:
    """The first non-null value of `column` at or after `row`."""
    col = table[column]
    while not col[row].is_valid:
        row += 1
    return col[row]


def _chunks(path: Path):
    md = pq.ParquetFile(path).metadata
    for rg in range(md.num_row_groups):
        for ci in range(md.num_columns):
            yield rg, md.row_group(rg).column(ci)


# ------------------------------------------------------------------------------ tables


def test_kind_lists_partition_all_kinds():
    assert set(FLAT_KINDS).isdisjoint(NESTED_KINDS)
    assert ALL_KINDS == FLAT_KINDS + NESTED_KINDS
    assert len(set(ALL_KINDS)) == len(ALL_KINDS)
    assert set(PARQUET_TYPES) == set(FLAT_KINDS) | {"key", "desc"}


def test_one_column_per_kind_and_sorted_keys(table):
    assert table.column_names == ["key", "desc", *ALL_KINDS]
    assert table.num_rows == ROWS
    key = table["key"].to_numpy()
    desc = table["desc"].to_numpy()
    assert table["key"].null_count == 0 and table["desc"].null_count == 0
    assert (np.diff(key) >= 0).all() and key.min() < 0 < key.max()
    assert (np.diff(desc) < 0).all()
    shuffled = random_table(SEED, ROWS, kinds=(), sorted_key=False)["key"].to_numpy()
    assert not (np.diff(shuffled) >= 0).all()
    assert sorted(shuffled) == sorted(key)


def test_kind_subset_leaves_other_columns_unchanged(table):
    # One generator per column: asking for fewer kinds must not change the data of the others.
    subset = random_table(SEED, ROWS, kinds={"uint64", "list_struct"})
    assert subset.column_names == ["key", "desc", "uint64", "list_struct"]
    for name in subset.column_names:
        assert subset[name].equals(table[name]), name
    with pytest.raises(ValueError):
        random_table(SEED, 10, kinds={"no_such_kind"})


def _leaf_types(path: Path) -> dict[str, tuple[str, str | None, int]]:
    schema = pq.ParquetFile(path).schema
    out = {}
    for i in range(len(schema)):
        col = schema.column(i)
        logical = str(col.logical_type)
        out[col.path] = (col.physical_type, None if logical == "None" else logical, col.max_repetition_level)
    return out


NESTED_LEAVES = {
    "list_int32": [("list_int32.list.element", "INT32", 1)],
    "list_string": [("list_string.list.element", "BYTE_ARRAY", 1)],
    "large_list_int64": [("large_list_int64.list.element", "INT64", 1)],
    "fixed_list_int16": [("fixed_list_int16.list.element", "INT32", 1)],
    "map_string_int64": [("map_string_int64.key_value.key", "BYTE_ARRAY", 1), ("map_string_int64.key_value.value", "INT64", 1)],
    "struct": [("struct.a", "INT32", 0), ("struct.b", "BYTE_ARRAY", 0)],
    "list_struct": [("list_struct.list.element.x", "INT32", 1), ("list_struct.list.element.y", "BYTE_ARRAY", 1)],
    "struct_list": [("struct_list.ids.list.element", "INT32", 1), ("struct_list.name", "BYTE_ARRAY", 0)],
    "list_list_int64": [("list_list_int64.list.element.list.element", "INT64", 2)],
}  # fmt: skip


@pytest.mark.parametrize("decimal_as_integer", [False, True])
def test_parquet_type_of_every_kind(table, tmp_path, decimal_as_integer):
    path = tmp_path / "t.parquet"
    pq.write_table(table.slice(0, 200), path, store_decimal_as_integer=decimal_as_integer)
    leaves = _leaf_types(path)
    expected = PARQUET_TYPES_DECIMAL_AS_INTEGER if decimal_as_integer else PARQUET_TYPES
    for kind, (physical, logical) in expected.items():
        assert leaves[kind][:2] == (physical, logical), kind
    assert set(NESTED_LEAVES) == set(NESTED_KINDS)
    for kind, wanted in NESTED_LEAVES.items():
        for path_in_schema, physical, max_rep in wanted:
            got = leaves[path_in_schema]
            assert (got[0], got[2]) == (physical, max_rep), path_in_schema


def test_int96_option_turns_timestamps_into_int96(table, tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(table.slice(0, 50), path, use_deprecated_int96_timestamps=True)
    leaves = _leaf_types(path)
    assert all(leaves[k][0] == "INT96" for k in INT96_KINDS)
    assert leaves["date32"][0] == "INT32"


def test_edge_values_are_present(table):
    def values(name):
        return [v for v in table[name].to_pylist() if v is not None]

    u64, u32 = values("uint64"), values("uint32")
    assert any(v >= 2**63 for v in u64) and any(v < 2**63 for v in u64) and max(u64) == 2**64 - 1
    assert any(v >= 2**31 for v in u32) and any(v < 2**31 for v in u32)
    assert min(values("int64")) == -(2**63)
    for kind in FLOAT_KINDS:
        floats = table[kind].cast(pa.float64()).to_numpy(zero_copy_only=False)
        finite_or_inf = floats[~np.isnan(floats)]  # nulls show up as NaN here
        assert table[kind].null_count > 0
        assert pc.sum(pc.is_nan(table[kind])).as_py() == 0, f"{kind}: NaN only on request"
        assert {math.inf, -math.inf} <= set(finite_or_inf.tolist())
        zeros = finite_or_inf[finite_or_inf == 0]
        assert np.signbit(zeros).any() and (~np.signbit(zeros)).any(), f"{kind}: -0.0 and +0.0"
    for kind in ("decimal5", "decimal15", "decimal30", "decimal50"):
        assert min(values(kind)) < 0 < max(values(kind))
    strings = values("string")
    assert any(len(s.encode()) > 64 for s in strings)
    assert any("\U0010ffff" in s for s in strings) and any(len(s.encode()) != len(s) for s in strings)
    assert "\U0010ffff" * 20 in strings and "\ud7ff" in strings and "\ue000" in strings
    binaries = values("binary")
    assert b"\xff" * 70 in binaries and b"" in binaries
    assert all(len(b) == 16 for b in values("fixed_binary16"))
    assert table["dict_string"].type == pa.dictionary(pa.int32(), pa.string())


def test_nested_edge_cases_are_present(table):
    lists = table["list_string"].to_pylist()
    assert None in lists and [] in lists
    assert any(x is not None and None in x for x in lists)
    assert None in table["struct"].to_pylist()
    assert any(s is not None and s["a"] is None for s in table["struct"].to_pylist())
    assert any(m for m in table["map_string_int64"].to_pylist() if m)
    assert any(x and None in x for x in table["list_list_int64"].to_pylist())


def test_null_run_allows_all_null_pages(table):
    # One contiguous run of nulls covering 5% of the rows sits in every nullable column.
    valid = table["int32"].is_valid().to_numpy(zero_copy_only=False)
    longest = max(len(run) for run in "".join("1" if v else "0" for v in valid).split("1"))
    assert longest >= ROWS // 20


@pytest.mark.parametrize("payloads", [False, True])
def test_nan_injection(payloads):
    t = random_table(3, 2000, kinds=set(FLOAT_KINDS), nan_fraction=0.1, nan_payloads=payloads)
    bits_of = {"float16": np.uint16, "float32": np.uint32, "float64": np.uint64}
    for kind in FLOAT_KINDS:
        arr = t[kind].combine_chunks()
        nan = pc.fill_null(pc.is_nan(arr), False).to_numpy(zero_copy_only=False)
        assert 0.05 < nan.mean() < 0.15
        raw = np.frombuffer(arr.buffers()[1], dtype=bits_of[kind])[arr.offset : arr.offset + len(arr)]
        patterns = set(raw[nan].tolist())
        if payloads:
            sign = 1 << (8 * raw.itemsize - 1)
            assert len(patterns) >= 4 and any(p & sign for p in patterns), kind
        else:
            assert len(patterns) == 1, kind


# ------------------------------------------------------------------------------ writer grids


def test_variants_read_back_equal_to_the_table(table, small_files):
    assert [f.name for f in small_files] == [v.name for v in SMALL_GRID]
    for f in small_files:
        expected = expected_readback(table, f.options)
        assert same_content(pq.read_table(f.path), expected), f.name
        assert same_content(pq.read_table(f.twin), expected), f.name


def test_page_index_only_on_the_twin(small_files):
    for f in small_files:
        assert not any(c.has_column_index or c.has_offset_index for _, c in _chunks(f.path)), f.name
        assert all(c.has_column_index and c.has_offset_index for _, c in _chunks(f.twin)), f.name


# pyarrow names the Parquet LZ4_RAW codec (what its 'lz4' writes; parquet-java confirms) "LZ4".
_CODEC_NAMES = {"none": "UNCOMPRESSED", "snappy": "SNAPPY", "gzip": "GZIP", "zstd": "ZSTD", "lz4": "LZ4", "brotli": "BROTLI"}


def _check_layout(f, min_pages: int = 3) -> None:
    """The written file really has the layout its options ask for."""
    opts = f.options
    md = pq.ParquetFile(f.path).metadata
    assert md.num_row_groups >= 2, f.name
    assert {c.compression for _, c in _chunks(f.path)} == {_CODEC_NAMES[opts["compression"]]}, f.name
    headers = page_headers(f.path)
    types = {p.type for pages in headers.values() for p in pages}
    data_type = DATA_PAGE_V2 if opts["data_page_version"] == "2.0" else DATA_PAGE
    assert types - {DICTIONARY_PAGE} == {data_type}, f.name
    assert (DICTIONARY_PAGE in types) == opts["use_dictionary"], f.name
    crcs = {p.has_crc for pages in headers.values() for p in pages}
    assert crcs == {bool(opts.get("write_page_checksum"))}, f.name
    encodings = {e for _, c in _chunks(f.path) for e in c.encodings}
    if "column_encoding" in opts:
        assert {"DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY"} <= encodings, f.name
    if "use_byte_stream_split" in opts:
        assert "BYTE_STREAM_SPLIT" in encodings, f.name
    counts = data_page_counts(f.path)
    key_pages = [n for (rg, col), n in counts.items() if col == "key"]
    assert min(key_pages) >= min_pages, f"{f.name}: small pages expected, got {key_pages}"
    assert np.median(list(counts.values())) >= min_pages, f.name


def test_small_grid_layout(small_files):
    for f in small_files:
        _check_layout(f)


@pytest.mark.slow
def test_full_grid_covers_the_options_and_round_trips(tmp_path):
    t = random_table(5, 900)
    files = write_variants(t, tmp_path, "full")
    assert len(files) == len(FULL_GRID)
    seen = {(f.options["data_page_version"], f.options["use_dictionary"], f.options["compression"]) for f in files}
    assert len(seen) == 2 * 2 * 6
    assert any(f.options.get("write_page_checksum") for f in files)
    assert any(f.options.get("store_decimal_as_integer") for f in files)
    assert any(f.options.get("use_deprecated_int96_timestamps") for f in files)
    assert any(f.options.get("dictionary_pagesize_limit") for f in files)
    for f in files:
        _check_layout(f, min_pages=2)  # the short last row group has 180 rows: two capped pages
        expected = expected_readback(t, f.options)
        assert same_content(pq.read_table(f.path), expected), f.name
        assert same_content(pq.read_table(f.twin), expected), f.name
        no_index = {c.path_in_schema for _, c in _chunks(f.twin) if not c.has_column_index}
        # pyarrow writes no ColumnIndex for INT96 (undefined sort order), only an OffsetIndex.
        assert no_index == (set(INT96_KINDS) if f.options.get("use_deprecated_int96_timestamps") else set()), f.name
        assert all(c.has_offset_index for _, c in _chunks(f.twin)), f.name


def test_same_seed_same_bytes(tmp_path):
    def digest(directory: Path, seed: int) -> list[str]:
        files = write_variants(random_table(seed, 400), directory, "small")
        return [hashlib.sha256(f.path.read_bytes() + f.twin.read_bytes()).hexdigest() for f in files]

    first = digest(tmp_path / "a", 21)
    assert first == digest(tmp_path / "b", 21)
    assert first != digest(tmp_path / "c", 22)


def test_page_walker_agrees_with_parquet_java(spark, small_files):
    """data_page_counts (our Thrift reader) matches parquet-java's OffsetIndex of the twin."""
    jvm = spark._jvm
    for f in small_files[:3]:
        infile = jvm.org.apache.parquet.hadoop.util.HadoopInputFile.fromPath(
            jvm.org.apache.hadoop.fs.Path(f.twin.resolve().as_uri()), spark._jsc.hadoopConfiguration()
        )
        reader = jvm.org.apache.parquet.hadoop.ParquetFileReader.open(infile)
        try:
            java_counts = {}
            for rg, block in enumerate(reader.getFooter().getBlocks()):
                for chunk in block.getColumns():
                    path = ".".join(chunk.getPath().toArray())
                    java_counts[(rg, path)] = reader.readOffsetIndex(chunk).getPageCount()
        finally:
            reader.close()
        assert java_counts == data_page_counts(f.twin), f.name


# ------------------------------------------------------------------------------ engines: unit level


def test_normalize_rows_makes_engine_outputs_comparable():
    spark_like = pa.table({
        "u": pa.array([Decimal(2**64 - 1), None], pa.decimal128(20, 0)),
        "ts": pa.array([1_500_000, None], pa.timestamp("us", "UTC")),
        "t": pa.array([1_000, 2], pa.time64("us")),
        "f": pa.array([float("nan"), -0.0]),
        "b": pa.array([b"\xff", b""]),
        "s": pa.array([{"a": 1, "b": "x"}, None], pa.struct([("a", pa.int32()), ("b", pa.string())])),
        "m": pa.array([[("k", 1)], []], pa.map_(pa.string(), pa.int64())),
    })  # fmt: skip
    datafusion_like = pa.table({
        "u": pa.array([2**64 - 1, None], pa.uint64()),
        "ts": pa.array([1_500_000_000, None], pa.timestamp("ns", "UTC")),
        "t": pa.array([1_000_000, 2_000], pa.time64("ns")),
        "f": pa.array([float("nan"), 0.0], pa.float32()),
        "b": pa.array([b"\xff", b""], pa.binary_view()),
        "s": pa.array([{"a": 1, "b": "x"}, None], pa.struct([("a", pa.int32()), ("b", pa.string_view())])),
        "m": pa.array([[("k", 1)], []], pa.map_(pa.string(), pa.int64())),
    })  # fmt: skip
    assert E.normalize_rows(spark_like) == E.normalize_rows(datafusion_like)
    rows = E.normalize_rows(spark_like)
    assert rows[0][3] is E.NAN or rows[1][3] is E.NAN


def test_predicates_render_per_engine(table):
    rng = np.random.default_rng(0)
    preds = E.predicates_for(table, "string", rng)
    ops = [p.op for p in preds]
    assert {"=", "<", "<=", ">", ">=", "BETWEEN", "IS NULL", "IS NOT NULL"} <= set(ops)
    assert preds[0].sql("spark").startswith("`string`") and preds[0].sql("datafusion").startswith('"string"')
    quoted = E.Predicate("string", "=", (pa.scalar("it's", pa.string()),))
    assert "X'" in quoted.sql("spark") and "AS STRING" in quoted.sql("spark")
    assert "AS VARCHAR" in quoted.sql("datafusion")
    ts = E.Predicate("ts_us", "=", (pa.scalar(1, pa.timestamp("us")),))
    assert ts.sql("spark") == "`ts_us` = TIMESTAMP_NTZ '1970-01-01 00:00:00.000001'"
    assert ts.sql("datafusion") == "\"ts_us\" = TIMESTAMP '1970-01-01 00:00:00.000001'"
    # unsupported by Spark: nothing for both engines, something for DataFusion alone
    assert E.predicates_for(table, "float16", rng) == []
    assert E.predicates_for(table, "float16", rng, engines=("datafusion",))
    assert E.predicates_for(table, "list_int32", rng, engines=("datafusion",)) == []


# ------------------------------------------------------------------------------ engines: DataFusion

# Plain file of one variant and the indexed twin of another: both must give the true rows.
@pytest.mark.slow
@pytest.mark.parametrize("which", [("v1-dict-snappy", "path"), ("v2-plain-zstd-crc", "twin")])
def test_datafusion_agrees_with_pyarrow_on_every_flat_kind(table, small_files, which):
    name, attr = which
    f = next(x for x in small_files if x.name == name)
    path = getattr(f, attr)
    rng = np.random.default_rng(1)
    checked = 0
    for kind in ("key", "desc", *FLAT_KINDS):
        cols = ["key"] if kind == "key" else ["key", kind]
        for pred in E.predicates_for(table, kind, rng, engines=("datafusion",)):
            assert E.datafusion_rows(path, pred, cols) == E.reference_rows(table, pred, cols, "datafusion"), str(pred)
            checked += 1
    assert checked > 400


def test_datafusion_metrics_show_page_pruning(table, small_files):
    f = small_files[1]
    pred = E.Predicate("key", "=", (table["key"][ROWS // 2],))
    indexed = E.datafusion_metrics(f.twin, pred)
    plain = E.datafusion_metrics(f.path, pred)
    rows_per_group = f.options["row_group_size"]
    assert indexed["page_index_pages_pruned"] > 0
    assert 0 < indexed["rows_decoded"] < rows_per_group
    assert indexed["output_rows"] == plain["output_rows"] >= 1
    assert plain["page_index_pages_pruned_total"] == 0
    assert plain["rows_decoded"] == rows_per_group
    assert indexed["bytes_scanned"] < plain["bytes_scanned"]


def test_nan_semantics_per_engine(spark, tmp_path):
    # No statistics: with Arrow's NaN-less min/max, both engines would prune NaN rows away.
    t = random_table(3, 1200, kinds={"float64"}, nan_fraction=0.05, nan_payloads=True)
    path = tmp_path / "nan.parquet"
    pq.write_table(t, path, write_statistics=False, row_group_size=500)
    pivot = E.Predicate("float64", ">", (pa.scalar(0.5),))
    low = E.Predicate("float64", "<=", (pa.scalar(-1.0),))
    for pred in (pivot, low):
        want_df = E.reference_rows(t, pred, ["key", "float64"], "datafusion")
        want_spark = E.reference_rows(t, pred, ["key", "float64"], "spark")
        assert want_df != want_spark  # -NaN sorts low in DataFusion, high in Spark
        assert E.datafusion_rows(path, pred, ["key", "float64"]) == want_df
        assert E.spark_rows(spark, path, pred, ["key", "float64"]) == want_spark


# ------------------------------------------------------------------------------ engines: Spark

SPARK_SAMPLE = (
    "key", "desc", "bool", "int8", "uint64", "float32", "decimal30", "string", "binary",
    "fixed_binary16", "date64", "time64_us", "ts_ms", "ts_us_tz", "duration_us", "dict_string",
)  # fmt: skip


def test_spark_agrees_with_pyarrow_on_sampled_kinds(spark, table, small_files):
    f = next(x for x in small_files if x.name == "v2-dict-gzip-decint")
    rng = np.random.default_rng(2)
    ops = ["=", "<", ">=", "BETWEEN", "<=", ">", "IS NULL"]
    for i, kind in enumerate(SPARK_SAMPLE):
        preds = E.predicates_for(table, kind, rng)
        pred = next((p for p in preds if p.op == ops[i % len(ops)]), preds[2])
        cols = ["key"] if kind == "key" else ["key", kind]
        assert E.spark_rows(spark, f.twin, pred, cols) == E.reference_rows(table, pred, cols, "spark"), pred.sql("spark")


def test_spark_and_datafusion_agree_on_nested_rows(spark, table, small_files):
    f = small_files[0]
    lo, hi = table["key"][200], table["key"][400]
    pred = E.Predicate("key", "BETWEEN", (lo, hi))
    cols = ["key", *NESTED_KINDS]
    want = E.reference_rows(table, pred, cols)
    assert len(want) > 150
    assert E.spark_rows(spark, f.twin, pred, cols) == want
    assert E.datafusion_rows(f.twin, pred, cols) == want


def test_spark_schema_leaves_out_unreadable_columns(spark, small_files):
    path = small_files[0].path
    with pytest.raises(Exception, match="PARQUET_TYPE_ILLEGAL"):
        _ = spark.read.parquet(str(path)).schema  # why spark_schema exists
    names = set(E.spark_schema(spark, path).fieldNames())
    unsupported = {k for (k, engine) in E.ENGINE_UNSUPPORTED if engine == "spark"}
    assert names == set(pq.read_schema(path).names) - unsupported
    assert E.spark_rows(spark, path, E.Predicate("float16", "IS NULL")) is None


@pytest.mark.parametrize("kind", sorted(k for (k, engine) in E.ENGINE_UNSUPPORTED if engine == "spark"))
def test_spark_really_cannot_read_unsupported_kinds(spark, table, tmp_path, kind):
    path = tmp_path / f"{kind}.parquet"
    pq.write_table(table.select([kind]).slice(0, 10), path)
    refused = "PARQUET_TYPE_ILLEGAL|DECIMAL_PRECISION_EXCEEDS_MAX_PRECISION"
    with spark_conf(spark, **E.SPARK_SQL_CONF), pytest.raises(Exception, match=refused):
        _ = spark.read.parquet(str(path)).schema


def test_spark_scan_rows_reflect_the_page_index(spark, table, small_files):
    f = small_files[0]
    pred = E.Predicate("key", "=", (table["key"][ROWS // 2],))
    rows_per_group = f.options["row_group_size"]
    indexed = E.spark_scan_rows(spark, f.twin, pred)
    plain = E.spark_scan_rows(spark, f.path, pred)
    matches = len(E.reference_rows(table, pred, ["key"]))
    assert plain == rows_per_group  # statistics keep one row group, read whole
    assert matches <= indexed < plain  # the ColumnIndex narrows it to a few pages
    assert E.spark_scan_rows(spark, f.twin, E.Predicate("float16", "IS NULL")) is None


def test_scan_metric_is_found_through_adaptive_execution(spark, table, small_files):
    f = small_files[0]
    pred = E.Predicate("key", "=", (table["key"][ROWS // 2],))
    expected = E.spark_scan_rows(spark, f.twin, pred)
    with spark_conf(spark, **E.SPARK_SQL_CONF, **{"spark.sql.adaptive.enabled": "true", "spark.sql.adaptive.forceApply": "true"}):
        df = E.spark_read(spark, f.twin).where(pred.sql("spark")).groupBy("desc").count()
        df.collect()
        plan = df._jdf.queryExecution().executedPlan()
        assert plan.getClass().getSimpleName() == "AdaptiveSparkPlanExec"
        scans = find_scan_nodes(plan)
        assert len(scans) == 1
        assert plan_metric(scans[0], "numOutputRows") == expected


def test_spark_pushdown_table_is_accurate(spark, table, small_files):
    """SPARK_NOT_PUSHED_DOWN kinds scan the whole file; a pushed kind reads fewer rows."""
    f = small_files[0]
    for kind in (*E.SPARK_NOT_PUSHED_DOWN, "int32", "ts_us_tz"):
        pred = E.Predicate(kind, "=", (_value_near(table, kind, ROWS // 3),))
        scanned = E.spark_scan_rows(spark, f.twin, pred)
        if kind in E.SPARK_NOT_PUSHED_DOWN:
            assert scanned == ROWS, kind
        else:
            assert scanned < ROWS // 2, kind


def test_dictionary_fallback_variant_mixes_encodings(spark, tmp_path):
    """The *-dict-fallback variants really switch from dictionary to plain pages mid-chunk."""
    t = random_table(5, 900, kinds={"string", "int64"})
    variant = next(v for v in FULL_GRID if v.name == "v1-dict-fallback")
    (f,) = write_variants(t, tmp_path, [variant])
    jvm = spark._jvm
    infile = jvm.org.apache.parquet.hadoop.util.HadoopInputFile.fromPath(
        jvm.org.apache.hadoop.fs.Path(f.path.resolve().as_uri()), spark._jsc.hadoopConfiguration()
    )
    reader = jvm.org.apache.parquet.hadoop.ParquetFileReader.open(infile)
    try:
        mixed = {
            chunk.getPath().toDotString()
            for block in reader.getFooter().getBlocks()
            for chunk in block.getColumns()
            if chunk.getEncodingStats().hasDictionaryEncodedPages() and chunk.getEncodingStats().hasNonDictionaryEncodedPages()
        }
    finally:
        reader.close()
    assert {"string", "int64"} <= mixed
