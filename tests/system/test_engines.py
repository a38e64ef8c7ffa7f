"""Engines agree: Spark (parquet-java) and DataFusion return the same rows from a generated file
retrofitted by pageindex ("ours") as from the same file without any page index ("plain"), for
point and range predicates on every flat column type each engine supports; and they really use
our index (fewer rows scanned / pages pruned on a sorted key).

A NaN-holding float column shows why pageindex writes no ColumnIndex for such chunks: both engines
return the same rows from ours as from plain, while pyarrow's NaN-blind index (the "twin")
makes them lose NaN rows.

Spark work is batched: one Spark action per file (a UNION ALL with one branch per predicate,
each branch a separate pushed-down Parquet scan). The values of the
filtered column are compared as Spark strings (CAST) between ours and plain; against pyarrow's
reference the row identities (`desc` is unique) are compared.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pageindex.retrofit import retrofit
from tests.helpers import engines as E
from tests.helpers.spark import spark_conf
from tests.helpers.tables import (
    DESC_COLUMN,
    FLAT_KINDS,
    KEY_COLUMN,
    SMALL_GRID,
    WrittenFile,
    random_table,
    write_variants,
)

pytestmark = pytest.mark.slow  # DataFusion queries over a matrix of generated files

ROWS = 2400
SEED = 21
# A few nested columns ride along, so reads that skip pages also have to stay aligned in
# repeated columns (large_list_int64 gets pyarrow's empty data pages in dictionary variants).
NESTED = ("list_int32", "large_list_int64", "struct", "map_string_int64")
# v1 + dictionary, v2 + plain, v2 + dictionary (row-capped pages), v1 + delta encodings.
# No brotli: Spark ships no Hadoop BrotliCodec.
VARIANTS = ("v1-dict-snappy", "v2-plain-zstd-crc", "v2-dict-gzip-decint", "v1-delta-none")
# Spark costs ~0.1-0.3 s per Parquet scan on 2 cores, so it gets two variants and a rotating
# sample of each column's predicates (DataFusion gets every predicate on every variant):
# 2 per pushed-down column and variant (4 different ones over the two variants), 1 for columns
# Spark never pushes down (SPARK_NOT_PUSHED_DOWN: the index cannot change their rows).
SPARK_VARIANTS = ("v1-dict-snappy", "v2-plain-zstd-crc")
SPARK_PREDICATES_PER_COLUMN = 2
FLAT_COLUMNS = (KEY_COLUMN, DESC_COLUMN, *FLAT_KINDS)


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return random_table(SEED, ROWS, kinds=[*FLAT_KINDS, *NESTED])


@pytest.fixture(scope="module")
def files(table, tmp_path_factory) -> dict[str, tuple[WrittenFile, Path]]:
    grid = [v for v in SMALL_GRID if v.name in VARIANTS]
    out = {}
    for w in write_variants(table, tmp_path_factory.mktemp("engines"), grid):
        ours = w.path.with_name(f"{w.name}.ours.parquet")
        assert retrofit(str(w.path), str(ours)).status == "indexed"
        out[w.name] = (w, ours)
    return out


@functools.cache
def _predicates(engine: str) -> dict[str, list[E.Predicate]]:
    t = random_table(SEED, ROWS, kinds=FLAT_KINDS)
    out = {}
    for i, column in enumerate(FLAT_COLUMNS):
        preds = E.predicates_for(t, column, np.random.default_rng([SEED, i]), engines=(engine,))
        if preds:
            out[column] = preds
    return out


def test_every_flat_kind_is_covered():
    """Each engine filters every flat kind it can read; the rest are exactly ENGINE_UNSUPPORTED."""
    for engine in E.ENGINES:
        unsupported = {k for (k, e) in E.ENGINE_UNSUPPORTED if e == engine}
        assert set(_predicates(engine)) == set(FLAT_COLUMNS) - unsupported, engine
    assert sum(len(p) for p in _predicates("spark").values()) > 300


# ------------------------------------------------------------------------------ running engines


def spark_batch(spark, path: Path, preds: list[E.Predicate]) -> list[list[tuple]]:
    """Rows (desc, column as text) per predicate, from ONE Spark action: a UNION ALL of one
    filtered scan per predicate. Binary values become hex, others CAST(... AS STRING)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType

    with spark_conf(spark, **E.SPARK_SQL_CONF):
        branches = []
        for i, p in enumerate(preds):
            df = E.spark_read(spark, path, [DESC_COLUMN, p.column]).where(p.sql("spark"))
            col = F.col(f"`{p.column}`")
            text = F.hex(col) if isinstance(df.schema[p.column].dataType, BinaryType) else col.cast("string")
            branches.append(df.select(F.lit(i).alias("q"), F.col(DESC_COLUMN).alias("d"), text.alias("v")))
        result = functools.reduce(lambda a, b: a.unionAll(b), branches).toArrow()
    out: list[list[tuple]] = [[] for _ in preds]
    for q, d, v in zip(*(result.column(n).to_pylist() for n in ("q", "d", "v"))):
        out[q].append((d, v))
    return [sorted(rows, key=lambda r: (r[0], r[1] is None, r[1] or "")) for rows in out]


def datafusion_batch(path: Path, column: str, preds: list[E.Predicate]) -> list[list[tuple]]:
    """Normalized rows (desc, column) per predicate on one column, from one DataFusion query."""
    select = ", ".join('"' + c + '"' for c in dict.fromkeys([DESC_COLUMN, column]))
    sql = " UNION ALL ".join(
        f"SELECT {i} AS q, {select} FROM t WHERE {p.sql('datafusion')}" for i, p in enumerate(preds))
    result = E.datafusion_context(path).sql(sql).to_arrow_table()
    q = result.column("q").to_numpy()
    data = result.drop_columns(["q"])
    # pyarrow 26 cannot filter view types; the values are what matter.
    views = {pa.string_view(): pa.large_string(), pa.binary_view(): pa.large_binary()}
    data = data.cast(pa.schema([f.with_type(views.get(f.type, f.type)) for f in data.schema]))
    return [E.normalize_rows(data.filter(pa.array(q == i))) for i in range(len(preds))]


# ------------------------------------------------------------------------------ same rows


def spark_sample(variant: str) -> list[E.Predicate]:
    """The Spark predicates run on `variant`: a rotating sample (see SPARK_VARIANTS)."""
    v = SPARK_VARIANTS.index(variant)
    out = []
    for column, preds in sorted(_predicates("spark").items()):
        k = 1 if column in E.SPARK_NOT_PUSHED_DOWN else SPARK_PREDICATES_PER_COLUMN
        start = (v * k + 2) % len(preds)  # skip IS NULL / IS NOT NULL first: ranges matter most
        out += [preds[(start + i) % len(preds)] for i in range(k)]
    return out


def test_spark_sample_covers_every_pushed_column_with_four_operators():
    for column in set(_predicates("spark")) - set(E.SPARK_NOT_PUSHED_DOWN):
        ops = [p.op for v in SPARK_VARIANTS for p in spark_sample(v) if p.column == column]
        assert len(ops) == 2 * SPARK_PREDICATES_PER_COLUMN, column
    assert sum(len(spark_sample(v)) for v in SPARK_VARIANTS) * 2 <= 260  # scans: ours + plain


@pytest.mark.parametrize("variant", SPARK_VARIANTS)
def test_spark_same_rows_with_and_without_our_index(spark, table, files, variant):
    written, ours = files[variant]
    preds = spark_sample(variant)
    got_ours = spark_batch(spark, ours, preds)
    got_plain = spark_batch(spark, written.path, preds)
    mismatches = []
    for p, a, b in zip(preds, got_ours, got_plain):
        want = E.reference_rows(table, p, [DESC_COLUMN], "spark")
        if a != b:
            mismatches.append(f"{p.sql('spark')}: ours {len(a)} rows, plain {len(b)} rows")
        elif [(d,) for d, _ in a] != want:
            mismatches.append(f"{p.sql('spark')}: {len(a)} rows, reference {len(want)}")
    assert not mismatches, "\n".join(mismatches[:20])
    pruned = [p for p, rows in zip(preds, got_ours) if 0 < len(rows) < ROWS // 20]
    assert len(pruned) > 20  # plenty of selective predicates, where the index skips pages


@pytest.mark.parametrize("variant", VARIANTS)
def test_datafusion_same_rows_with_and_without_our_index(table, files, variant):
    written, ours = files[variant]
    mismatches = []
    for column, preds in _predicates("datafusion").items():
        got_ours = datafusion_batch(ours, column, preds)
        got_plain = datafusion_batch(written.path, column, preds)
        for p, a, b in zip(preds, got_ours, got_plain):
            want = E.reference_rows(table, p, list(dict.fromkeys([DESC_COLUMN, column])), "datafusion")
            if a != b:
                mismatches.append(f"{p}: ours {len(a)} rows, plain {len(b)} rows")
            elif a != want:
                mismatches.append(f"{p}: {len(a)} rows, reference {len(want)}")
    assert not mismatches, "\n".join(mismatches[:20])


@pytest.mark.parametrize("variant", VARIANTS)
def test_nested_columns_read_the_same_through_our_index(spark, table, files, variant):
    """A key range (pages skipped by the index) returning the nested columns too."""
    written, ours = files[variant]
    lo, hi = table[KEY_COLUMN][ROWS // 3], table[KEY_COLUMN][ROWS // 3 + 150]
    pred = E.Predicate(KEY_COLUMN, "BETWEEN", (lo, hi))
    cols = [DESC_COLUMN, *NESTED]
    want = E.reference_rows(table, pred, cols)
    assert 150 <= len(want) < ROWS // 4
    assert E.spark_rows(spark, ours, pred, cols) == E.spark_rows(spark, written.path, pred, cols) == want
    assert E.datafusion_rows(ours, pred, cols) == E.datafusion_rows(written.path, pred, cols) == want


# ------------------------------------------------------------------------------ the index is used


@pytest.mark.parametrize("variant", VARIANTS)
def test_spark_point_lookup_reads_fewer_rows_with_our_index(spark, table, files, variant):
    written, ours = files[variant]
    pred = E.Predicate(KEY_COLUMN, "=", (table[KEY_COLUMN][ROWS // 2],))
    matches = len(E.reference_rows(table, pred, [KEY_COLUMN]))
    with_index = E.spark_scan_rows(spark, ours, pred)
    without = E.spark_scan_rows(spark, written.path, pred)
    assert without >= written.options["row_group_size"] // 2  # row-group statistics only
    assert matches <= with_index <= 2 * 120  # one or two pages (pages hold at most 120 rows)
    assert with_index * 4 < without


@pytest.mark.parametrize("variant", VARIANTS)
def test_datafusion_prunes_pages_only_with_our_index(table, files, variant):
    written, ours = files[variant]
    pred = E.Predicate(KEY_COLUMN, "=", (table[KEY_COLUMN][ROWS // 2],))
    with_index = E.datafusion_metrics(ours, pred)
    without = E.datafusion_metrics(written.path, pred)
    assert with_index["page_index_pages_pruned"] > 0
    assert without.get("page_index_pages_pruned", 0) == 0
    assert with_index["rows_decoded"] < without["rows_decoded"]
    assert with_index["output_rows"] == without["output_rows"] == len(E.reference_rows(table, pred, [KEY_COLUMN]))


def test_chunk_without_offset_index_is_read_correctly(spark, tmp_path):
    """pageindex leaves chunks holding an empty data page (which pyarrow writes in dictionary list
    columns with tiny pages) without any index, so a row group is only partly indexed. Both
    engines still return the right rows; Spark filters pages only when the index-less column is
    not projected (parquet-java needs an OffsetIndex for every projected column)."""
    n = 400
    t = pa.table({KEY_COLUMN: pa.array(range(n), pa.int64()), DESC_COLUMN: pa.array(range(n), pa.int32()),
                  "l": pa.array([[i] for i in range(n)], pa.list_(pa.int64()))})
    plain, ours = tmp_path / "plain.parquet", tmp_path / "ours.parquet"
    pq.write_table(t, plain, use_dictionary=["l.list.element"], write_batch_size=1,
                   max_rows_per_page=1, data_page_size=1, row_group_size=200)
    reports = {(c.row_group, c.column): (c.offset_index, c.column_index)
               for c in retrofit(str(plain), str(ours)).chunks}
    assert reports[(1, "l.list.element")] == (False, False)
    assert reports[(1, KEY_COLUMN)] == (True, True)
    pred = E.Predicate(KEY_COLUMN, "=", (pa.scalar(250, pa.int64()),))
    for cols in ([KEY_COLUMN, DESC_COLUMN], [KEY_COLUMN, "l"]):
        want = E.reference_rows(t, pred, cols)
        assert E.spark_rows(spark, ours, pred, cols) == E.spark_rows(spark, plain, pred, cols) == want
        assert E.datafusion_rows(ours, pred, cols) == E.datafusion_rows(plain, pred, cols) == want
    assert E.spark_scan_rows(spark, ours, pred, [KEY_COLUMN, DESC_COLUMN]) == 1
    assert E.spark_scan_rows(spark, ours, pred, [KEY_COLUMN, "l"]) == 200


# ------------------------------------------------------------------------------ NaN

NAN_ROWS = 3000


@pytest.fixture(scope="module")
def nan_files(tmp_path_factory):
    """float32/float64 with 0.5% NaN (mixed payloads and signs), clustered values, one row group
    per file (so row-group statistics keep every range predicate below the max)."""
    table = random_table(SEED + 1, NAN_ROWS, kinds=["float32", "float64"], nan_fraction=0.005,
                         nan_payloads=True)
    d = tmp_path_factory.mktemp("nan")
    options = {"data_page_version": "1.0", "use_dictionary": False, "compression": "snappy",
               "max_rows_per_page": 100, "write_batch_size": 100, "row_group_size": NAN_ROWS}
    plain, twin, ours = d / "plain.parquet", d / "twin.parquet", d / "ours.parquet"
    pq.write_table(table, plain, **options)
    pq.write_table(table, twin, write_page_index=True, **options)
    result = retrofit(str(plain), str(ours))
    assert {c.column: c.column_index for c in result.chunks} == {
        KEY_COLUMN: True, DESC_COLUMN: True, "float32": False, "float64": False}
    return table, plain, twin, ours


def _nan_predicates(table: pa.Table) -> list[E.Predicate]:
    preds = []
    for column in ("float32", "float64"):
        values = table[column].filter(pc.invert(pc.is_nan(table[column]))).drop_null()
        ordered = pc.sort_indices(values).to_numpy()
        for q in (0.1, 0.5, 0.9):
            v = values[int(ordered[int(q * (len(ordered) - 1))])]
            preds += [E.Predicate(column, ">", (v,)), E.Predicate(column, "<", (v,)),
                      E.Predicate(column, ">=", (v,)), E.Predicate(column, "<=", (v,))]
    return preds


def test_nan_rows_same_on_our_file_and_lost_through_pyarrows_index(spark, nan_files):
    """Same rows from ours as from plain in both engines, for <, <=, >, >= at three quantiles.
    pyarrow's bounds leave NaN out, so its index skips pages holding NaN for predicates the
    engine considers NaN to match: Spark orders every NaN above all numbers (> and >=, so Spark
    runs only those), DataFusion +NaN above and -NaN below (all four operators)."""
    table, plain, twin, ours = nan_files
    preds = _nan_predicates(table)
    spark_preds = [p for p in preds if p.op in (">", ">=")]
    paths = {"ours": ours, "plain": plain, "twin": twin}
    results = {
        "spark": (spark_preds, {n: spark_batch(spark, path, spark_preds) for n, path in paths.items()}),
        "datafusion": (preds, {n: [E.datafusion_rows(path, p, [DESC_COLUMN, p.column]) for p in preds]
                               for n, path in paths.items()}),
    }
    for engine, (used, rows) in results.items():
        assert rows["ours"] == rows["plain"], engine
        fewer = [str(p) for p, t, o in zip(used, rows["twin"], rows["ours"]) if len(t) < len(o)]
        more = [str(p) for p, t, o in zip(used, rows["twin"], rows["ours"]) if len(t) > len(o)]
        assert not more, (engine, more)
        assert fewer, f"{engine}: pyarrow's NaN-blind index lost no rows"
    lost_low = [p for p, t, o in zip(preds, results["datafusion"][1]["twin"], results["datafusion"][1]["ours"])
                if p.op in ("<", "<=") and len(t) < len(o)]
    assert lost_low, "DataFusion lost no -NaN row through pyarrow's index"
