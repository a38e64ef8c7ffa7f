"""lookup: the page-skipping reader, checked against pyarrow's full read plus filter.

* Random predicates (seeded) on generated files of many types: retrofitted by pageindex, written
  with pyarrow's page index, without any index (fallback path), and a directory of files.
* Corpus `oracle` files that carry a page index.
* I/O claims from the counted reads (LookupStats.reads / .columns) against the OffsetIndex.
* Binary search over ordered ColumnIndexes against a linear pass and a brute-force page filter.
* S3 (moto), the CLI, and inspect's skipping power.

The reference semantics live in tests/helpers/predicates.py (nulls never match; IEEE 754
comparisons: NaN false except for !=, -0.0 = 0.0; IN = OR of equalities).
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
import math
import os
import random
import re
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from pageindex.format.footer import read_footer
from pageindex.format.parquet_thrift import BoundaryOrder
from pageindex.index.reader import ColumnIndexView, read_column_index, read_offset_index
from pageindex.inspection import inspect_file
from pageindex.io.storage import open_source
from pageindex.query.file_fields import arrow_schema, file_fields
from pageindex.query.lookup import lookup
from pageindex.query.pruning import matching_pages, plan_condition
from pageindex.query.predicate import PredicateError, parse
from pageindex.retrofit import retrofit
from tests.helpers.corpus import corpus_path, corpus_rows
from tests.helpers.paths import REPO_ROOT
from tests.helpers.predicates import (
    Cond,
    PredicateGen,
    as_sql,
    as_tuples,
    reference,
    reference_mask,
    show,
    table_difference,
)
from tests.helpers.predicates import quote_column as quote
from tests.helpers.tables import random_table

FUZZ_KINDS = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "decimal5", "decimal15", "decimal30", "decimal50",
    "string", "large_string", "binary", "large_binary", "fixed_binary16",
    "date32", "date64", "time32_ms", "time64_us", "time64_ns",
    "ts_s", "ts_ms", "ts_us", "ts_ns", "ts_s_tz", "ts_ms_tz", "ts_us_tz", "ts_ns_tz",
    "dict_string",
    # retrieved only (nested columns cannot be filtered on)
    "list_int32", "struct", "map_string_int64",
)  # fmt: skip
FUZZ_ROWS = 1200
SMALL_PAGES = {"data_page_size": 512, "write_batch_size": 32, "row_group_size": 400}


def _table(seed: int, *, sorted_key: bool = True) -> pa.Table:
    return random_table(seed, FUZZ_ROWS, kinds=FUZZ_KINDS, null_fraction=0.1, sorted_key=sorted_key,
                        nan_fraction=0.05, nan_payloads=True)


def _retrofitted(table: pa.Table, raw: Path, out: Path, truncate_length: int = 64, **options) -> Path:
    pq.write_table(table, raw, **{**SMALL_PAGES, **options})
    retrofit(str(raw), str(out), truncate_length=truncate_length)
    return out


@pytest.fixture(scope="module")
def fuzz_files(tmp_path_factory) -> dict[str, tuple[str, pa.Table]]:
    """name -> (path given to lookup, what pyarrow reads from it)."""
    d = tmp_path_factory.mktemp("lookup_fuzz")
    a, b = _table(11), _table(12, sorted_key=False)
    files = {
        "retrofit-plain": _retrofitted(a, d / "a.raw.parquet", d / "a.parquet", use_dictionary=False),
        "retrofit-dict-v2-decint-unsorted": _retrofitted(
            b, d / "b.raw.parquet", d / "b.parquet", use_dictionary=True, data_page_version="2.0",
            compression="zstd", store_decimal_as_integer=True),
        "retrofit-truncate4": _retrofitted(a, d / "t.raw.parquet", d / "t.parquet", truncate_length=4,
                                           use_dictionary=False, compression="snappy"),
    }
    pq.write_table(a, d / "pa.parquet", write_page_index=True, store_decimal_as_integer=True, **SMALL_PAGES)
    files["pyarrow-index-decint"] = d / "pa.parquet"
    pq.write_table(b, d / "noindex.parquet", use_dictionary=False, **SMALL_PAGES)
    files["no-index"] = d / "noindex.parquet"
    # A directory: one retrofitted file, one pyarrow-indexed, one without index (in a Hive
    # partition folder: column part, null in the other two), plus files discovery must skip.
    root = d / "dir"
    (root / "part=1").mkdir(parents=True)
    _retrofitted(_table(21), d / "c1.raw.parquet", root / "c1.parquet", use_dictionary=False)
    pq.write_table(_table(22), root / "c2.parquet", write_page_index=True, **SMALL_PAGES)
    pq.write_table(_table(23, sorted_key=False), root / "part=1" / "c3.parquet", **SMALL_PAGES)
    (root / "_SUCCESS").write_bytes(b"")
    (root / ".c1.parquet.crc").write_bytes(b"junk")
    files["directory"] = root
    out = {}
    for name, path in files.items():
        if path.is_dir():
            ref = ds.dataset(path, partitioning="hive").to_table()
        else:
            ref = pq.read_table(path)
        out[name] = (str(path), ref)
    return out


def _check(path: str, where, conds, ref: pa.Table, columns=None, nullability: bool = True,
           **kwargs) -> str | None:
    """None if lookup equals the reference, else what went wrong."""
    try:
        got, stats = lookup(path, where, columns=columns, **kwargs)
    except Exception as err:  # noqa: BLE001 - every failure is reported with its predicate
        return f"{show(where)} columns={columns}: {type(err).__name__}: {str(err)[:200]}"
    diff = table_difference(got, reference(ref, conds, columns), nullability)
    return f"{show(where)} columns={columns}: {diff}" if diff else None


def _fuzz(path: str, ref: pa.Table, seed: int, count: int) -> tuple[list[str], int]:
    rng = random.Random(seed)
    gen = PredicateGen(ref, rng)
    failures, runs = [], 0
    for _ in range(count):
        conds = gen.where()
        columns = None
        if rng.random() < 0.85:  # a subset, not necessarily holding the filtered columns
            columns = rng.sample(ref.column_names, rng.randrange(1, 5))
        forms = [as_tuples(conds)]
        text = as_sql(conds, rng)
        if text is not None:
            forms.append(text)
        for where in forms:
            runs += 1
            problem = _check(path, where, conds, ref, columns)
            if problem:
                failures.append(problem)
    return failures, runs


def _report(failures: list[str], runs: int) -> str:
    shown = "\n  ".join(failures[:12])
    return f"{len(failures)} of {runs} lookups differ from pyarrow, e.g.:\n  {shown}"


@pytest.mark.parametrize("variant", [
    "retrofit-plain", "retrofit-dict-v2-decint-unsorted", "retrofit-truncate4",
    "pyarrow-index-decint", "no-index", "directory",
])
@pytest.mark.slow
def test_random_predicates_match_pyarrow(fuzz_files, variant):
    path, ref = fuzz_files[variant]
    count = 20 if variant in ("no-index", "directory") else 45
    failures, runs = _fuzz(path, ref, seed=zlib.crc32(variant.encode()), count=count)
    assert runs >= count
    assert not failures, _report(failures, runs)


def test_fuzz_files_are_what_they_claim(fuzz_files):
    """The variants really exercise index / fallback paths and the listed types."""
    def indexed(path):
        with open_source(path) as src:
            footer = read_footer(src)
            chunks = [c for row in footer.chunks for c in row]
            return (sum(c.column_index is not None for c in chunks), sum(c.offset_index is not None for c in chunks),
                    len(chunks), len(footer.row_group_rows))
    ci, oi, n, groups = indexed(fuzz_files["retrofit-plain"][0])
    assert groups >= 3 and oi == n and ci > n // 2
    ci, oi, n, _ = indexed(fuzz_files["no-index"][0])
    assert ci == oi == 0
    ci, oi, n, _ = indexed(fuzz_files["pyarrow-index-decint"][0])
    assert oi == n and ci > n // 2
    schema = pq.ParquetFile(fuzz_files["pyarrow-index-decint"][0]).schema
    physical = {schema.column(i).path: schema.column(i).physical_type for i in range(len(schema))}
    assert physical["decimal5"] == "INT32" and physical["decimal15"] == "INT64"
    assert physical["decimal30"] == "FIXED_LEN_BYTE_ARRAY"
    ref = fuzz_files["retrofit-plain"][1]
    assert pc.sum(pc.is_nan(ref.column("float64"))).as_py() > 0
    assert pc.max(pc.binary_length(ref.column("string"))).as_py() > 64
    assert {"ts_s", "ts_ms", "ts_us", "ts_ns", "ts_ns_tz"} <= set(ref.column_names)


# ---------------------------------------------------------------- targeted semantics


@pytest.fixture(scope="module")
def semantics_file(fuzz_files):
    return fuzz_files["retrofit-plain"]


def _typed(ref: pa.Table, column: str, value) -> pa.Scalar:
    typ = ref.schema.field(column).type
    typ = typ.value_type if pa.types.is_dictionary(typ) else typ
    return value if isinstance(value, pa.Scalar) else pa.scalar(value, typ)


@pytest.mark.parametrize("where, conds", [
    ([("float64", "=", math.nan)], [Cond("float64", "=", (math.nan,))]),
    ([("float64", "!=", math.nan)], [Cond("float64", "!=", (math.nan,))]),
    ([("float64", "<", math.nan)], [Cond("float64", "<", (math.nan,))]),
    ([("float64", ">=", math.nan)], [Cond("float64", ">=", (math.nan,))]),
    ([("float32", "between", [-math.inf, math.nan])], [Cond("float32", "between", (-math.inf, math.nan))]),
    ([("float64", "=", -0.0)], [Cond("float64", "=", (-0.0,))]),
    ([("float64", "=", 0.0)], [Cond("float64", "=", (0.0,))]),
    ([("float32", "<=", -0.0)], [Cond("float32", "<=", (-0.0,))]),
    ([("float32", ">=", 0.0)], [Cond("float32", ">=", (0.0,))]),
    ([("float64", "!=", 0.0)], [Cond("float64", "!=", (0.0,))]),
    ([("float64", "=", math.inf)], [Cond("float64", "=", (math.inf,))]),
    ([("float64", ">", -math.inf)], [Cond("float64", ">", (-math.inf,))]),
    ("float64 = -0.0", [Cond("float64", "=", (-0.0,))]),
    ("float32 BETWEEN -0.0 AND 0.0", [Cond("float32", "between", (-0.0, 0.0))]),
], ids=str)
def test_nan_and_signed_zero(semantics_file, where, conds):
    path, ref = semantics_file
    conds = [Cond(c.column, c.op, tuple(_typed(ref, c.column, v) for v in c.lits)) for c in conds]
    assert _check(path, where, conds, ref, columns=["key", conds[0].column]) is None


@pytest.mark.parametrize("where, conds", [
    # IN is a disjunction of equalities: NaN never matches, -0.0 matches 0.0 and vice versa.
    ([("float64", "in", [math.nan])], [Cond("float64", "in", (math.nan,))]),
    ([("float64", "in", [math.nan, 1.5])], [Cond("float64", "in", (math.nan, 1.5))]),
    ([("float64", "in", [0.0])], [Cond("float64", "in", (0.0,))]),
    ([("float32", "in", [-0.0])], [Cond("float32", "in", (-0.0,))]),
    ("float64 IN (0.0, 7.0)", [Cond("float64", "in", (0.0, 7.0))]),
], ids=str)
def test_in_on_floats_means_equality(semantics_file, where, conds):
    """BUG: IN uses hash-set membership (pc.is_in), so `x IN (0.0)` misses -0.0 rows that
    `x = 0.0` returns, and `x IN (NaN)` returns the NaN rows that `x = NaN` does not."""
    path, ref = semantics_file
    conds = [Cond(c.column, c.op, tuple(_typed(ref, c.column, v) for v in c.lits)) for c in conds]
    assert _check(path, where, conds, ref, columns=["key", conds[0].column]) is None


@pytest.mark.parametrize("text", [
    "decimal5 IN (-0.02, 2.11)",              # literals of different precision
    "decimal50 IN (-0.0102325973, -15217152582630477783741.6599895929)",
    "decimal15 IN (1.5, 12345.678)",
    "decimal5 IN (1.005, 2.5)",              # a literal with more digits than the column's scale
])
def test_sql_in_on_decimals(semantics_file, text):
    """BUG: SQL decimal literals become pa.scalar(Decimal) with the literal's own precision, and
    the IN value set is typed by the first one: ArrowInvalid 'does not fit into precision'."""
    path, ref = semantics_file
    (cond,) = parse(text)
    typ = ref.schema.field(cond.column).type
    # the exact reference: literals that are not representable at the column's scale match nothing
    lits = []
    for v in cond.values:
        d = decimal.Decimal(v)
        with decimal.localcontext() as ctx:
            ctx.prec = 200  # the default 28 digits cannot quantize a decimal256 value
            exact = d == d.quantize(decimal.Decimal(1).scaleb(-typ.scale))
        if exact:
            lits.append(pa.scalar(d, typ))
    conds = [Cond(cond.column, "in", tuple(lits))] if lits else [Cond(cond.column, "is_null"), Cond(cond.column, "is_not_null")]
    assert _check(path, text, conds, ref, columns=["key", cond.column]) is None


def test_in_on_nanosecond_timestamps(semantics_file):
    """BUG: IN builds its value set from literal.as_py(); without pandas that raises ValueError
    for a timestamp[ns] with a sub-microsecond part."""
    path, ref = semantics_file
    col = ref.column("ts_ns").drop_null()
    lits = (col[3], col[10])
    assert lits[0].cast(pa.int64()).as_py() % 1000  # a genuine nanosecond value
    for where in ([("ts_ns", "in", list(lits))],
                  as_sql([Cond("ts_ns", "in", lits)])):
        assert _check(path, where, [Cond("ts_ns", "in", lits)], ref, columns=["key", "ts_ns"]) is None


def test_mixed_numeric_literals(semantics_file):
    """Literals outside the column type's range or of another numeric type compare by value."""
    path, ref = semantics_file
    cases = [
        ("int8 < 1000", [Cond("int8", "<", (pa.scalar(1000),))]),
        ("int8 > -1000", [Cond("int8", ">", (pa.scalar(-1000),))]),
        ("int8 = 1000", [Cond("int8", "=", (pa.scalar(1000),))]),
        ("uint8 >= -1", [Cond("uint8", ">=", (pa.scalar(-1),))]),
        ("int32 > 2.5", [Cond("int32", ">", (pa.scalar(2.5),))]),
        ("int32 <= 2147483648", [Cond("int32", "<=", (pa.scalar(2147483648),))]),
        ("float64 > 5", [Cond("float64", ">", (pa.scalar(5.0),))]),
        ("decimal15 > 1.5", [Cond("decimal15", ">", (pa.scalar(decimal.Decimal("1.5")),))]),
        ("decimal15 >= 3", [Cond("decimal15", ">=", (pa.scalar(decimal.Decimal(3)),))]),
        ("uint64 > 9223372036854775807", [Cond("uint64", ">", (pa.scalar(2**63 - 1, pa.uint64()),))]),
        ("uint64 = 18446744073709551615", [Cond("uint64", "=", (pa.scalar(2**64 - 1, pa.uint64()),))]),
    ]
    problems = [p for text, conds in cases if (p := _check(path, text, conds, ref, columns=["key"]))]
    assert not problems, problems


def test_temporal_literal_forms(semantics_file):
    path, ref = semantics_file
    day = dt.date(2020, 1, 1)
    noon = dt.datetime(2020, 1, 1, 12)
    cases = [
        ([("date32", ">=", day)], [Cond("date32", ">=", (pa.scalar(day),))]),
        ([("date32", ">=", "2020-01-01")], [Cond("date32", ">=", (pa.scalar(day),))]),
        ("date64 < DATE '1950-06-01'", [Cond("date64", "<", (pa.scalar(dt.date(1950, 6, 1)),))]),
        ([("ts_us", "<", noon)], [Cond("ts_us", "<", (pa.scalar(noon, pa.timestamp("us")),))]),
        ("ts_ms >= DATE '2020-01-01'", [Cond("ts_ms", ">=", (pa.scalar(noon.replace(hour=0), pa.timestamp("ms")),))]),
        ([("ts_us_tz", ">=", noon.replace(tzinfo=dt.timezone.utc))],
         [Cond("ts_us_tz", ">=", (pa.scalar(noon, pa.timestamp("us", "UTC")),))]),
        ("ts_s_tz <= TIMESTAMP '2020-01-01 12:00:00Z'", [Cond("ts_s_tz", "<=", (pa.scalar(noon, pa.timestamp("ms", "UTC")),))]),
        ([("time32_ms", "<", dt.time(6, 30))], [Cond("time32_ms", "<", (pa.scalar(dt.time(6, 30), pa.time32("ms")),))]),
    ]
    problems = [p for where, conds in cases if (p := _check(path, where, conds, ref, columns=["key"]))]
    assert not problems, problems


@pytest.mark.slow
def test_truncated_string_and_binary_bounds(fuzz_files):
    """Values longer than the truncation length, and the ones whose upper bound cannot be
    incremented (all U+10FFFF / all 0xFF), are found by every operator."""
    for variant in ("retrofit-plain", "retrofit-truncate4"):
        path, ref = fuzz_files[variant]
        problems = []
        for column, values in (("string", ["z" * 70, "\U0010ffff" * 20, "é" * 40, "zz" + "\uffff" * 30,
                                           "a" * 63 + "\U0010ffff" * 3, "\U0010ffff" * 16 + "a", "z" * 64]),
                               ("binary", [b"\xff" * 70, b"\xfe" + b"\xff" * 70, b"\x00" * 70, b"\xff" * 64])):
            for value in values:
                for op in ("=", "<", "<=", ">", ">="):
                    lit = pa.scalar(value, ref.schema.field(column).type)
                    p = _check(path, [(column, op, value)], [Cond(column, op, (lit,))], ref, columns=["key", column])
                    if p:
                        problems.append(p)
        assert not problems, f"{variant}: {problems[:5]}"


def test_directory_of_files_keeps_file_order(fuzz_files):
    path, ref = fuzz_files["directory"]
    got, stats = lookup(path, "key IS NOT NULL", columns=["key", "desc"])
    assert stats.files == 3
    assert table_difference(got, ref.select(["key", "desc"])) is None
    assert {os.path.basename(r[0]) for r in stats.reads} == {"c1.parquet", "c2.parquet", "c3.parquet"}


def test_empty_file_and_empty_result(tmp_path):
    p = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"k": pa.array([], pa.int64()), "s": pa.array([], pa.string())}), p,
                   write_page_index=True)
    got, stats = lookup(str(p), "k = 1")
    assert got.num_rows == 0 and got.schema.equals(pq.read_table(p).schema, check_metadata=False)
    got, _ = lookup(str(p), "k = 1", columns=["s"])
    assert got.column_names == ["s"] and got.num_rows == 0


def test_no_columns_still_counts_rows(tmp_path):
    """BUG (minor): columns=[] returns 0 rows instead of a table of the matching row count
    (what pq.read_table(columns=[]) plus a filter gives)."""
    p = tmp_path / "small.parquet"
    pq.write_table(pa.table({"k": [1, 2, 3, 4]}), p, write_page_index=True)
    got, _ = lookup(str(p), "k >= 2", columns=[])
    assert got.column_names == [] and got.num_rows == 3


def test_required_columns_stay_required(tmp_path):
    """BUG: the result schema loses nullability: a required (not null) column comes back
    nullable, so the schema differs from pyarrow's read."""
    p = tmp_path / "required.parquet"
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("s", pa.string(), nullable=False)])
    pq.write_table(pa.table({"k": [1, 2, 3], "s": ["a", "b", "c"]}, schema=schema), p, write_page_index=True)
    got, _ = lookup(str(p), "k >= 2")
    expected = pq.read_table(p).filter(pc.greater_equal(pc.field("k"), 2))
    assert table_difference(got, expected) is None


@pytest.mark.parametrize("where, match", [
    ("nope = 1", "nope"),
    ([("nope", "=", 1)], "nope"),
    ("list_int32 = 1", "list_int32"),          # nested: cannot filter
    ("int32 = 'abc'", "int32"),
    ("key = ", "ends early"),
    ("key = 1 OR key = 2", "OR|AND"),
])
def test_bad_where_raises_predicate_error(semantics_file, where, match):
    path, _ = semantics_file
    with pytest.raises(PredicateError, match=match):
        lookup(path, where)


def test_unknown_output_column_names_it(semantics_file):
    path, _ = semantics_file
    with pytest.raises(PredicateError, match="nope"):
        lookup(path, "key = 1", columns=["key", "nope"])


@pytest.mark.parametrize("where", [
    "string = 5", "bool = 1", [("string", "=", 5)], [("binary", ">", 3)],
    "int8 = 99999999999999999999999",
])
def test_type_mismatch_is_a_predicate_error(semantics_file, where):
    """BUG: a literal of the wrong type leaks a raw pyarrow error (ArrowNotImplementedError from
    the compute kernel, OverflowError for an over-long integer) instead of a PredicateError, so the
    CLI prints a traceback."""
    path, _ = semantics_file
    with pytest.raises(PredicateError):
        lookup(path, where, columns=["key"])


# ---------------------------------------------------------------- corpus oracle files


def _oracle_rows():
    return [r for r in corpus_rows("oracle") if r["pyarrow_read"] == "ok"]


def _filterable_columns(table: pa.Table) -> list[str]:
    gen = PredicateGen(table, random.Random(0))
    return gen.columns


@pytest.mark.slow
@pytest.mark.parametrize("row", _oracle_rows(), ids=lambda r: r["path"].split("/")[-1])
def test_corpus_oracle_files_match_pyarrow(row):
    """Rows and column types equal pyarrow's (nullability is checked file by file in
    test_corpus_schemas_match_pyarrow, so that one bug does not hide the others)."""
    path = str(corpus_path(row))
    ref = pq.read_table(path)
    columns = _filterable_columns(ref)
    if not columns:
        # nothing flat to filter on: comparing a nested (or bare repeated) column is refused cleanly.
        # BUG (repeated_primitive_no_list): a repeated primitive without a LIST group passes the
        # "nested" check and the comparison leaks ArrowNotImplementedError.
        with pytest.raises(PredicateError):
            lookup(path, f"{quote(ref.column_names[0])} = 1")
        return
    rng = random.Random(row["path"])
    gen = PredicateGen(ref, rng, columns)
    failures, runs = [], 0
    big = int(row["total_pages"] or 0) > 1000  # tiny-page files: decode a few columns only
    for i, column in enumerate(columns * 2):  # every column at least once, then combinations
        conds = [gen.condition(column)] if i < len(columns) else gen.where()
        out = None
        if big or rng.random() < 0.5:
            out = list(dict.fromkeys([column] + rng.sample(ref.column_names, min(2, ref.num_columns))))
        for where in (as_tuples(conds), as_sql(conds, rng)):
            if where is None:
                continue
            runs += 1
            if problem := _check(path, where, conds, ref, columns=out, nullability=False):
                failures.append(problem)
        if runs >= (12 if big else 30):
            break
    assert not failures, _report(failures, runs)


def test_corpus_schemas_match_pyarrow():
    """BUG: lookup's result schema drops `not null` (and any field metadata): every corpus file
    with required columns comes back with a different schema than pq.read_table's."""
    problems = []
    for row in _oracle_rows():
        path = str(corpus_path(row))
        ref = pq.read_table(path)
        columns = _filterable_columns(ref)
        if not columns:
            continue
        got, _ = lookup(path, f"{quote(columns[0])} IS NOT NULL")
        expected = ref.filter(pc.is_valid(ref.column(columns[0])))
        if diff := table_difference(got, expected):
            problems.append(f"{row['path']}: {diff.splitlines()[0]} "
                            f"{[f.name for f in ref.schema if not f.nullable]} are required")
    assert not problems, "\n".join(problems)


def test_corpus_index_claiming_null_pages_on_required_column():
    """BUG: datapage_v1-*-checksum.parquet (parquet-mr 1.13) has a ColumnIndex with
    null_pages=[true, true] and null_counts=[-1, -1] for REQUIRED columns. lookup trusts it,
    prunes every page and returns 0 rows; pyarrow returns 200 for `a > 1970698104`."""
    path = str(corpus_path("parquet-testing/data/datapage_v1-uncompressed-checksum.parquet"))
    ref = pq.read_table(path)
    got, _ = lookup(path, "a > 1970698104")
    assert table_difference(got, ref.filter(pc.greater(ref.column("a"), 1970698104)), nullability=False) is None
    got, _ = lookup(path, "a IS NOT NULL", columns=["b"])
    assert got.num_rows == ref.num_rows


FLOAT_ORDERS = "parquet-testing/data/floating_orders_nan_count.parquet"


@pytest.mark.parametrize("columns", [("float_ieee754", "double_ieee754"), ("float_typedef", "double_typedef")],
                         ids=["ieee754_total_order", "type_defined_order"])
def test_signed_zero_under_each_column_order(columns):
    """BUG (ieee754_total_order): with ColumnOrder IEEE_754_TOTAL_ORDER, lookup compares the
    literal with the bounds in total order (-0.0 < +0.0), so a row group whose bounds end at -0.0
    is skipped for `= 0.0` / `>= 0.0`, and one starting at +0.0 for `= -0.0` / `<= -0.0`:
    `float_ieee754 = 0.0` gives 7 rows where pyarrow has 10."""
    path = str(corpus_path(FLOAT_ORDERS))
    ref = pq.read_table(path)
    problems = []
    for column in columns:
        typ = ref.schema.field(column).type
        for op in ("=", "<=", ">=", "<", ">", "!=", "between"):
            for literal in ("0.0", "-0.0"):
                zero = pa.scalar(float(literal), typ)
                conds = [Cond(column, op, (zero, zero) if op == "between" else (zero,))]
                where = f"{column} BETWEEN {literal} AND {literal}" if op == "between" else f"{column} {op} {literal}"
                if p := _check(path, where, conds, ref, nullability=False):
                    problems.append(p)
    assert not problems, "\n".join(problems)


def test_float16_columns_can_be_filtered():
    """BUG: filtering a FLOAT16 column raises ArrowNotImplementedError (pyarrow compute has no
    halffloat kernels; the exact filter must compare them as float32)."""
    path = str(corpus_path(FLOAT_ORDERS))
    ref = pq.read_table(path)
    problems = []
    for column in ("float16_ieee754", "float16_typedef"):
        for op, value in (("=", 1.0), (">", 0.5), ("!=", 3.0), ("<=", -0.0)):
            conds = [Cond(column, op, (pa.scalar(np.float16(value), pa.float16()),))]
            if p := _check(path, f"{column} {op} {value!r}", conds, ref, nullability=False):
                problems.append(p)
    assert not problems, problems


def test_not_equal_keeps_pages_with_nans_under_total_order():
    """BUG: under IEEE_754_TOTAL_ORDER, parquet-java leaves NaN out of the page bounds and counts
    it in nan_counts (row group 1 of floating_orders_nan_count.parquet: bounds [-2, 3], 4 NaNs).
    For a page holding only 5.0 and NaNs, `!= 5.0` must keep the page (NaN != 5.0 is true), but
    matching_pages drops it because min == max == 5.0."""
    path = str(corpus_path(FLOAT_ORDERS))
    with open_source(path) as src:
        footer = read_footer(src)
        rg1 = footer.chunks[1][footer.leaves.index(next(l for l in footer.leaves if l.path == ("double_ieee754",)))]
        ci = read_column_index(src, rg1)
    assert ci.nan_counts == (4,) and struct.unpack("<d", ci.max_values[0])[0] == 3.0  # NaN not in bounds
    fields = file_fields(footer, arrow_schema(footer))
    for column, fmt in (("double_ieee754", "<d"), ("float_ieee754", "<f")):
        plan = plan_condition(parse(f"{column} != 5.0")[0], fields, footer)
        five = struct.pack(fmt, 5.0)
        page = ColumnIndexView((False,), (five,), (five,), BoundaryOrder.UNORDERED, (0,), None, None, (3,))
        assert matching_pages(plan, page) == [0], column
        no_nan = dataclasses.replace(page, nan_counts=(0,))
        assert matching_pages(plan, no_nan) == []


# ---------------------------------------------------------------- I/O claims

IO_ROWS = 300_000


def _io_table() -> pa.Table:
    i = np.arange(IO_ROWS)
    rng = np.random.default_rng(5)
    return pa.table({
        "k": pa.array(i * 3 - 1000, pa.int64()),            # sorted key, unique
        "v": pa.array(i * 0.5),
        "s": pa.array([f"s{x:09d}" for x in i]),
        "c": pa.array((i % 97).astype(np.int32)),           # every page spans the whole range
        "r": pa.array(rng.integers(0, 1 << 40, IO_ROWS)),   # random
    })


@pytest.fixture(scope="module")
def io_files(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("lookup_io")
    t = _io_table()
    pq.write_table(t, d / "plain.raw.parquet", use_dictionary=False, compression="none",
                   data_page_size=8192, row_group_size=IO_ROWS)
    retrofit(str(d / "plain.raw.parquet"), str(d / "plain.parquet"))
    pq.write_table(t, d / "dict.parquet", use_dictionary=True, compression="none", data_page_size=2048,
                   row_group_size=IO_ROWS, dictionary_pagesize_limit=64 << 20, write_page_index=True)
    return {"plain": str(d / "plain.parquet"), "dict": str(d / "dict.parquet")}


@dataclasses.dataclass
class _Layout:
    name: str
    chunk: tuple[int, int]          # [start, end) of the column chunk
    dictionary: tuple[int, int] | None
    pages: list[tuple[int, int, int, int]]  # offset, end, first_row, last_row (exclusive)
    column_index: tuple[int, int] | None
    offset_index: tuple[int, int]


def _layout(path: str) -> dict[str, _Layout]:
    out = {}
    with open_source(path) as src:
        footer = read_footer(src)
        assert len(footer.chunks) == 1
        rows = footer.row_group_rows[0]
        for chunk in footer.chunks[0]:
            oi = read_offset_index(src, chunk)
            starts = [p.first_row_index for p in oi.pages] + [rows]
            pages = [(p.offset, p.offset + p.compressed_page_size, starts[i], starts[i + 1])
                     for i, p in enumerate(oi.pages)]
            first = oi.pages[0].offset
            out[chunk.leaf.path[0]] = _Layout(
                chunk.leaf.path[0], (chunk.start, chunk.start + chunk.total_compressed_size),
                (chunk.start, first) if chunk.start < first else None, pages,
                chunk.column_index, chunk.offset_index)
    return out


def _union(ranges) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for start, end in sorted(ranges):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [tuple(r) for r in out]


def _column_ranges(stats, layout: _Layout) -> list[tuple[int, int]]:
    lo, hi = layout.chunk
    return _union((off, off + n) for _, off, n, purpose in stats.reads
                  if purpose in ("data", "dictionary") and lo <= off < hi)


def _expected_pages(layout: _Layout, row_lo: int, row_hi: int) -> list[tuple[int, int, int, int]]:
    """Pages holding any row in [row_lo, row_hi)."""
    return [p for p in layout.pages if p[2] < row_hi and row_lo < p[3]]


def _check_reads(stats, layouts: dict[str, _Layout], pages_by_column: dict[str, list]) -> None:
    for name, pages in pages_by_column.items():
        layout = layouts[name]
        io = stats.columns[name]
        assert io.pages_read == len(pages), (name, io.pages_read, len(pages))
        assert io.pages_total == len(layout.pages)
        expected = [(p[0], p[1]) for p in pages] + ([layout.dictionary] if layout.dictionary else [])
        assert _column_ranges(stats, layout) == _union(expected), name
    # every data/dictionary byte read belongs to a retrieved column's wanted pages
    data_bytes = sum(n for _, _, n, purpose in stats.reads if purpose in ("data", "dictionary"))
    assert data_bytes == sum(b - a for name in pages_by_column for a, b in _column_ranges(stats, layouts[name]))
    purposes = {purpose for *_, purpose in stats.reads}
    assert purposes <= {"footer", "index", "data", "dictionary"}


@pytest.mark.parametrize("variant", ["plain", "dict"])
def test_point_lookup_reads_one_page_per_column(io_files, variant):
    path = io_files[variant]
    layouts = _layout(path)
    if variant == "plain":
        assert all(l.dictionary is None for l in layouts.values())
    else:
        assert all(l.dictionary is not None for l in layouts.values())
    assert len(layouts["k"].pages) > 100
    file_size = os.path.getsize(path)
    footer_start = file_size - 8 - struct.unpack("<I", Path(path).read_bytes()[-8:-4])[0]
    k_pages = layouts["k"].pages
    rows = sorted({0, IO_ROWS - 1, k_pages[1][2], k_pages[1][2] - 1, k_pages[len(k_pages) // 2][3] - 1, 123_457})
    for row in rows:
        key = row * 3 - 1000
        got, stats = lookup(path, f"k = {key}")
        assert got.num_rows == 1 and got.column("k")[0].as_py() == key
        assert got.column("s")[0].as_py() == f"s{row:09d}"
        _check_reads(stats, layouts, {n: _expected_pages(l, row, row + 1) for n, l in layouts.items()})
        assert all(stats.columns[n].pages_read == 1 for n in layouts)
        # footer: the file's tail (one read: the footer is smaller than the tail read);
        # index: exactly the blocks needed, each once
        footer_reads = [(off, n) for _, off, n, purpose in stats.reads if purpose == "footer"]
        assert len(footer_reads) == 1
        assert footer_reads[0][0] + footer_reads[0][1] == file_size and footer_reads[0][0] <= footer_start
        index_reads = sorted((off, n) for _, off, n, purpose in stats.reads if purpose == "index")
        needed = sorted([layouts["k"].column_index] + [l.offset_index for l in layouts.values()])
        assert index_reads == needed
        assert stats.row_groups_read == 1 and stats.files == 1


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["plain", "dict"])
def test_range_scans_read_only_overlapping_pages(io_files, variant):
    path = io_files[variant]
    layouts = _layout(path)
    key_pages = layouts["k"].pages
    rng = random.Random(3)
    scans = [(0, 0), (IO_ROWS - 1, IO_ROWS - 1), (key_pages[3][2], key_pages[5][3] - 1)]
    scans += [tuple(sorted((rng.randrange(IO_ROWS), rng.randrange(IO_ROWS)))) for _ in range(3)]
    scans += [(a, min(IO_ROWS - 1, a + rng.randrange(1, 5000))) for a in (rng.randrange(IO_ROWS) for _ in range(3))]
    for lo_row, hi_row in scans:
        lo_key, hi_key = lo_row * 3 - 1000, hi_row * 3 - 1000
        for where in (f"k BETWEEN {lo_key} AND {hi_key}", [("k", ">=", lo_key - 2), ("k", "<=", hi_key + 1)],
                      f"k > {lo_key - 1} AND k < {hi_key + 1}"):
            got, stats = lookup(path, where, columns=["k", "s", "c"])
            assert got.column("k").to_pylist() == list(range(lo_key, hi_key + 1, 3)), show(where)
            # the key pages holding the range, then each column's pages overlapping those rows
            k_sel = _expected_pages(layouts["k"], lo_row, hi_row + 1)
            span_lo, span_hi = k_sel[0][2], k_sel[-1][3]
            expected = {"k": k_sel, "s": _expected_pages(layouts["s"], span_lo, span_hi),
                        "c": _expected_pages(layouts["c"], span_lo, span_hi)}
            _check_reads(stats, layouts, expected)
    # open-ended ranges
    tail_row = IO_ROWS - 2500
    got, stats = lookup(path, f"k >= {tail_row * 3 - 1000}", columns=["k"])
    assert got.num_rows == 2500
    _check_reads(stats, layouts, {"k": _expected_pages(layouts["k"], tail_row, IO_ROWS)})
    got, stats = lookup(path, "k < -990", columns=["v"])  # rows 0..3
    assert got.column("v").to_pylist() == [0.0, 0.5, 1.0, 1.5]
    _check_reads(stats, layouts, {"k": _expected_pages(layouts["k"], 0, 4), "v": _expected_pages(layouts["v"], 0, 4)})


@pytest.mark.parametrize("variant", ["plain", "dict"])
def test_coalescing_makes_fewer_requests_same_result(io_files, variant):
    path = io_files[variant]
    layouts = _layout(path)
    rows = [5, 77_777, 150_001, 299_000]
    where = f"k IN ({', '.join(str(r * 3 - 1000) for r in rows)})"
    apart, s0 = lookup(path, where)
    together, s1 = lookup(path, where, coalesce_gap=1 << 30)
    assert apart.equals(together) and apart.num_rows == len(rows)
    assert s1.requests < s0.requests
    data_requests = lambda s: sum(p in ("data", "dictionary") for *_, p in s.reads)  # noqa: E731
    assert data_requests(s1) == len(layouts)          # one request per column
    assert data_requests(s0) >= len(layouts) * len(rows)
    for name in layouts:
        assert s0.columns[name].pages_read == s1.columns[name].pages_read == len(
            {p for r in rows for p in _expected_pages(layouts[name], r, r + 1)})
    # small gaps coalesce less than a huge one, and never change the result
    mid, s2 = lookup(path, where, coalesce_gap=64 << 10)
    assert mid.equals(apart) and s1.requests <= s2.requests <= s0.requests


def test_nanosecond_timestamp_keys_prune_pages(tmp_path):
    """BUG: _key() calls literal.as_py(), which (without pandas) raises for a timestamp[ns]
    with a sub-microsecond part; the plan then has no keys and every page is read (98 of 98
    instead of 1). Microsecond-aligned values prune fine."""
    n = 100_000
    v = np.arange(n, dtype=np.int64) * 1_000_003 + 1_577_836_800_123_456_789
    p = tmp_path / "ts.parquet"
    pq.write_table(pa.table({"ts": pa.array(v, pa.timestamp("ns")), "tz": pa.array(v, pa.timestamp("ns", "UTC"))}),
                   p, write_page_index=True, data_page_size=4096, use_dictionary=False)
    target = int(v[500])
    text = pa.scalar(target, pa.timestamp("ns")).cast(pa.string()).as_py()  # 2020-01-01 00:00:00.623458289
    for column in ("ts", "tz"):
        for where in ([(column, "=", pa.scalar(target, pa.timestamp("ns", "UTC" if column == "tz" else None)))],
                      f"{column} = TIMESTAMP '{text}{'Z' if column == 'tz' else ''}'"):
            got, stats = lookup(str(p), where, columns=[column])
            assert got.num_rows == 1 and got.column(column)[0].cast(pa.int64()).as_py() == target, show(where)
            io = stats.columns[column]
            assert io.pages_read == 1, f"{show(where)}: read {io.pages_read} of {io.pages_total} pages"


# ---------------------------------------------------------------- binary search over ordered bounds


def _ordered_table(seed: int) -> pa.Table:
    """Ascending values with duplicate runs crossing page boundaries (100-row pages), whole null
    pages in between, and a few scattered nulls."""
    rng = np.random.default_rng(seed)
    n = 60 * 100
    runs = rng.integers(1, 260, 400)
    vals = np.repeat(np.cumsum(rng.integers(1, 4, 400)) - 300, runs)[:n]
    mask = np.zeros(n, bool)
    for page in (0, 7, 8, 20, 33, 59):
        mask[page * 100:(page + 1) * 100] = True
    mask[rng.integers(0, n, 40)] = True
    return pa.table({
        "i": pa.array(vals, pa.int64(), mask=mask),
        "f": pa.array(vals * 0.25, pa.float64(), mask=mask),
        "s": pa.array([f"{v + 1000:06d}" for v in vals], mask=mask),
        "long": pa.array(["L" * 70 + f"{v + 1000:06d}" for v in vals], mask=mask),
    })


@pytest.fixture(scope="module")
def ordered_files(tmp_path_factory) -> list[tuple[str, int, pa.Table]]:
    d = tmp_path_factory.mktemp("ordered")
    opts = {"max_rows_per_page": 100, "write_batch_size": 100, "use_dictionary": False}
    out = []
    base = _ordered_table(9)
    for name, table, order in (("asc", base, BoundaryOrder.ASCENDING),
                               ("desc", base.take(pa.array(np.arange(base.num_rows)[::-1])), BoundaryOrder.DESCENDING)):
        pq.write_table(table, d / f"{name}.pa.parquet", write_page_index=True, **opts)
        pq.write_table(table, d / f"{name}.raw.parquet", **opts)
        retrofit(str(d / f"{name}.raw.parquet"), str(d / f"{name}.rt.parquet"))
        out += [(str(d / f"{name}.pa.parquet"), order, table), (str(d / f"{name}.rt.parquet"), order, table)]
    return out


_DECODE = {"i": lambda b: struct.unpack("<q", b)[0], "f": lambda b: struct.unpack("<d", b)[0],
           "s": bytes, "long": bytes}


def _brute_pages(ci: ColumnIndexView, column: str, op: str, keys: list, ours: bool) -> list[int]:
    """Pages that may match, one by one. NaN (never in the bounds) is != and > every number:
    for those a page is kept unless nan_counts, or our index under TYPE_ORDER (R7), rule NaN out."""
    out = []
    for i in range(len(ci)):
        if ci.null_pages[i]:
            continue
        lo, hi = _DECODE[column](ci.min_values[i]), _DECODE[column](ci.max_values[i])
        no_nan = ci.nan_counts[i] == 0 if ci.nan_counts is not None else ours
        if op in ("!=", ">", ">=") and column == "f" and not no_nan:
            out.append(i)
            continue
        ok = {"=": lambda: lo <= keys[0] <= hi, "<": lambda: lo < keys[0], "<=": lambda: lo <= keys[0],
              ">": lambda: hi > keys[0], ">=": lambda: hi >= keys[0],
              "between": lambda: hi >= keys[0] and lo <= keys[1],
              "in": lambda: any(lo <= k <= hi for k in keys), "!=": lambda: not (lo == hi == keys[0])}[op]()
        if ok:
            out.append(i)
    return out


def test_binary_search_matches_linear_pass(ordered_files):
    rng = random.Random(17)
    checked = 0
    for path, order, table in ordered_files:
        with open_source(path) as src:
            footer = read_footer(src)
            fields = file_fields(footer, arrow_schema(footer))
            rows = footer.row_group_rows[0]
            for leaf in footer.leaves:
                column = leaf.path[0]
                chunk = footer.chunks[0][leaf.index]
                ci, oi = read_column_index(src, chunk), read_offset_index(src, chunk)
                if column != "long":
                    assert ci.boundary_order == order, (path, column)
                assert sum(ci.null_pages) >= 5
                values = table.column(column).combine_chunks()
                present = values.drop_null().to_pylist()
                bounds = [_DECODE[column](b) for b, null in zip(ci.min_values + ci.max_values, ci.null_pages * 2) if not null]
                starts = [p.first_row_index for p in oi.pages] + [rows]
                for _ in range(120):
                    op = rng.choice(["=", "=", "<", "<=", ">", ">=", "between", "in", "!="])
                    def pick():
                        r = rng.random()
                        if column in ("i", "f"):
                            base = rng.choice(present + bounds)
                            step = 1 if column == "i" else 0.25
                            return rng.choice([base, base, base - step, base + step, base * 10 - 5000, base + 10**6 * step])
                        if r < 0.8:
                            return rng.choice(present)
                        return rng.choice(["", "0", "999999", "L" * 80, "L" * 64, "L" * 63 + "M"]) if column == "long" \
                            else rng.choice(["", "000", "9", "000700", "001000"])
                    lits = [pick() for _ in range(2 if op == "between" else rng.randrange(1, 4) if op == "in" else 1)]
                    if op == "between" and rng.random() < 0.85:
                        lits.sort()
                    where = [(column, op, lits if op in ("between", "in") else lits[0])]
                    plan = plan_condition(parse(where)[0], fields, footer)
                    got = matching_pages(plan, ci)
                    linear = matching_pages(plan, dataclasses.replace(ci, boundary_order=BoundaryOrder.UNORDERED))
                    keys = [k.encode() if isinstance(k, str) else k for k in lits]
                    brute = _brute_pages(ci, column, op, keys, footer.key_value("pageindex") is not None)
                    assert got == linear == brute, (path, column, where, got, linear, brute)
                    # sound: every page holding a matching row is kept
                    conds = [Cond(column, op, tuple(pa.scalar(x, values.type) for x in lits))]
                    mask = np.asarray(reference_mask(table, conds))
                    hit = {i for i in range(len(oi.pages)) if mask[starts[i]:starts[i + 1]].any()}
                    assert hit <= set(got), (path, column, where)
                    checked += 1
    assert checked >= 1000


def test_lookup_on_ordered_files_matches_pyarrow(ordered_files):
    rng = random.Random(4)
    failures, runs = [], 0
    for path, _, _ in ordered_files:
        ref = pq.read_table(path)
        gen = PredicateGen(ref, rng)
        for _ in range(12):
            conds = gen.where()
            for where in (as_tuples(conds), as_sql(conds, rng)):
                runs += 1
                if p := _check(path, where, conds, ref):
                    failures.append(p)
    assert not failures, _report(failures, runs)


# ---------------------------------------------------------------- S3


def test_lookup_on_s3(fuzz_files, s3fs_fs):
    fs, bucket = s3fs_fs, s3fs_fs.test_bucket
    path, ref = fuzz_files["retrofit-plain"]
    fs.put(path, f"{bucket}/data/a.parquet")
    rng = random.Random(8)
    gen = PredicateGen(ref, rng)
    failures, runs = [], 0
    for i in range(6):
        conds = gen.where()
        target = f"{bucket}/data/a.parquet" if i % 2 else f"s3://{bucket}/data/a.parquet"
        columns = list(dict.fromkeys(["key"] + [c.column for c in conds] + rng.sample(ref.column_names, 2)))
        for where in (as_tuples(conds), as_sql(conds, rng)):
            if where is None:
                continue
            runs += 1
            if p := _check(target, where, conds, ref, columns=columns, filesystem=fs, coalesce_gap=1 << 20):
                failures.append(f"{target}: {p}")
    assert not failures, _report(failures, runs)
    # page skipping works remotely too: a point lookup on the sorted key reads a fraction of the
    # file, the same page ranges as locally; the index blocks come merged, in fewer requests
    key = ref.column("key")[600].as_py()
    got, stats = lookup(f"{bucket}/data/a.parquet", f"key = {key}", columns=["key", "string"], filesystem=fs)
    local, local_stats = lookup(path, f"key = {key}", columns=["key", "string"])
    assert got.equals(local) and got.num_rows >= 1
    assert [r[1:] for r in stats.reads if r[3] != "index"] == [r[1:] for r in local_stats.reads if r[3] != "index"]
    remote_index = [r[1:3] for r in stats.reads if r[3] == "index"]
    local_index = [r[1:3] for r in local_stats.reads if r[3] == "index"]
    assert len(remote_index) < len(local_index)
    assert all(any(o <= lo and lo + n <= o + size for o, size in remote_index) for lo, n in local_index)
    assert all(r[0].endswith(f"{bucket}/data/a.parquet") for r in stats.reads)
    assert stats.bytes_read < fs.size(f"{bucket}/data/a.parquet") / 4


@pytest.mark.parametrize("form", ["s3://{bucket}/dir", "{bucket}/dir"])
def test_lookup_on_s3_directory(fuzz_files, s3fs_fs, form):
    """BUG for "{bucket}/dir": lookup checks isdir() on the given filesystem but then discovers
    the files with discover([inner]), which builds its own (local) filesystem: StorageError
    'input does not exist'. (The s3:// form only works because discovery makes a new s3fs from the
    environment, ignoring the filesystem passed in.)"""
    fs, bucket = s3fs_fs, s3fs_fs.test_bucket
    root, ref = fuzz_files["directory"]
    for local in sorted(Path(root).rglob("*")):
        if local.is_file():
            fs.put(str(local), f"{bucket}/dir/{local.relative_to(root).as_posix()}")
    got, stats = lookup(form.format(bucket=bucket), "key >= 0", columns=["key", "string"], filesystem=fs,
                        coalesce_gap=1 << 20)
    assert stats.files == 3
    expected = reference(ref, [Cond("key", ">=", (pa.scalar(0, pa.int64()),))], ["key", "string"])
    assert table_difference(got, expected) is None


# ---------------------------------------------------------------- CLI


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pageindex", "lookup", *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)


def test_cli_prints_rows_and_pages_per_column(io_files):
    path = io_files["plain"]
    layouts = _layout(path)
    run = _cli(path, "--where", "k = 29000", "--columns", "k,s")
    assert run.returncode == 0, run.stderr
    assert "s000010000" in run.stdout and "29000" in run.stdout
    assert re.search(rf"^\s*k: 1 of {len(layouts['k'].pages)} pages read; ", run.stdout, re.M), run.stdout
    assert re.search(rf"^\s*s: 1 of {len(layouts['s'].pages)} pages read; ", run.stdout, re.M), run.stdout
    assert re.search(r"^1 rows", run.stdout, re.M)


def test_cli_compares_its_reads_with_a_full_scan(tmp_path):
    path = tmp_path / "groups.parquet"
    n = 40_000
    pq.write_table(pa.table({"a": pa.array(range(n), pa.int64()), "b": pa.array([f"v{i:08d}" for i in range(n)]),
                             "c": pa.array([float(i) for i in range(n)])}),
                   path, row_group_size=10_000, data_page_size=4096, write_page_index=True)
    table, stats = lookup(str(path), "a = 12345", columns=["b"])
    assert table.column("b").to_pylist() == ["v00012345"]
    meta = pq.ParquetFile(path).metadata
    # the reference: pyarrow's sizes of the chunks a full scan of b (returned) and a (filtered) reads
    full = sum(meta.row_group(rg).column(col).total_compressed_size
               for rg in range(meta.num_row_groups) for col in (0, 1))
    assert stats.full_scan_bytes == full
    assert 0 < stats.bytes_read < full
    run = _cli(str(path), "--where", "a = 12345", "--columns", "b")
    assert run.returncode == 0, run.stderr
    share = f"{100 * stats.bytes_read / full:.1f}%"
    assert re.search(rf"^1 rows; read \S+ \S+ \({re.escape(share)} of the \S+ \S+ a full scan of these "
                     r"columns reads\) in \d+ requests from 1 file\(s\); 1 of 4 row groups read$",
                     run.stdout, re.M), run.stdout
    assert re.search(r"^  b: 1 of \d+ pages read; \S+ \S+ read for the column in all$", run.stdout, re.M), run.stdout


def test_cli_json(io_files):
    path = io_files["plain"]
    run = _cli(path, "--where", "k BETWEEN 2 AND 2999 AND c < 50", "--columns", "k,v,c", "--limit", "5", "--json")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    t = pq.read_table(path, columns=["k", "v", "c"])
    expected = t.filter(pc.and_(pc.and_(pc.greater_equal(t["k"], 2), pc.less_equal(t["k"], 2999)), pc.less(t["c"], 50)))
    assert out["num_rows"] == expected.num_rows
    assert out["rows"] == expected.slice(0, 5).to_pylist()
    io = out["io"]
    assert io["files"] == 1 and io["requests"] >= 3 and io["bytes_read"] > 0
    assert set(io["columns"]) == {"k", "v", "c"}
    assert all({"pages_read", "pages_total", "bytes_read"} <= set(c) for c in io["columns"].values())
    assert io["columns"]["k"]["pages_read"] < io["columns"]["k"]["pages_total"] / 10


def test_cli_bad_where_exits_2_with_message(io_files):
    run = _cli(io_files["plain"], "--where", "k = 1 OR k = 2")
    assert run.returncode == 2 and run.stdout == ""  # usage
    assert "Traceback" not in run.stderr
    assert re.search(r"PredicateError.*(OR|AND)", run.stderr), run.stderr


@pytest.mark.parametrize("args, match", [
    (["--where", "k = "], r"PredicateError.*ends early"),
    (["--where", "k IN 1"], r"PredicateError"),
    (["--where", "k NOT IN (1)"], r"PredicateError.*NOT IN"),
    (["--where", "nope = 1"], r"PredicateError.*'nope'"),
    (["--where", "k = 1", "--columns", "k,nope"], r"PredicateError.*'nope'"),
    (["--where", "k = 2", "--json"], None),
    (["--where", "s = 5"], r"PredicateError"),  # BUG: type mismatch -> raw pyarrow traceback
])
def test_cli_errors(io_files, capsys, args, match):
    """The same main() as `python -m pageindex`, in-process."""
    from pageindex.cli import main
    try:
        code = main(["lookup", io_files["plain"], *args])
    except Exception as err:  # noqa: BLE001 - an escaping exception is a traceback for the user
        pytest.fail(f"main() raised {type(err).__name__}: {err}")
    out, err = capsys.readouterr()
    if match is None:
        assert code == 0 and json.loads(out)["num_rows"] == 1
        return
    assert code == 2  # usage
    assert re.search(match, err), err


def test_cli_prints_nanosecond_timestamps(tmp_path):
    """BUG: without pandas, the text and --json outputs go through to_pylist(), which raises
    ValueError for timestamp[ns] values with a sub-microsecond part: a traceback, no rows."""
    p = tmp_path / "ns.parquet"
    pq.write_table(pa.table({"k": [1, 2], "ts": pa.array([1_577_836_800_123_456_789, 5], pa.timestamp("ns"))}), p,
                   write_page_index=True)
    problems = []
    run = _cli(str(p), "--where", "k = 1")
    if run.returncode != 0 or "123456789" not in run.stdout:
        problems.append(f"text: exit {run.returncode}: {run.stderr.strip().splitlines()[-1:]}")
    from pageindex.cli import main
    try:
        main(["lookup", str(p), "--where", "k = 1", "--json"])
    except ValueError as err:
        problems.append(f"--json: ValueError: {err}")
    assert not problems, problems


# ---------------------------------------------------------------- inspect skipping power


def test_skipping_power(io_files, fuzz_files):
    for variant in ("plain", "dict"):
        view = inspect_file(io_files[variant])
        power = view.skipping_power()
        pages = {c.column: c.pages for c in view.chunks}
        assert power["k"] == pytest.approx(1 / pages["k"])
        assert power["s"] == pytest.approx(1 / pages["s"])
        assert power["c"] == pytest.approx(1.0)   # every page holds 0..96
        assert power["r"] > 0.95                  # random values: nearly every page spans it all
    # a generated file: the sorted key prunes to about one page per chunk, the strictly descending
    # `desc` to exactly one (page-weighted over the chunks: n_chunks / total pages)
    view = inspect_file(fuzz_files["retrofit-plain"][0])
    power = view.skipping_power()

    def one_page(column):
        chunks = [c for c in view.chunks if c.column == column]
        assert all(c.pages >= 3 for c in chunks)
        return len(chunks) / sum(c.pages for c in chunks)

    assert one_page("key") <= power["key"] <= 2 * one_page("key")
    assert power["desc"] == pytest.approx(one_page("desc"))
    # the unsorted variant's shuffled key: every page spans the whole range
    view = inspect_file(fuzz_files["retrofit-dict-v2-decint-unsorted"][0])
    assert view.skipping_power()["key"] > 0.9
