"""lookup on float columns returns what DuckDB and Spark return: NaN equal to NaN and above every
number (infinity included), -0.0 equal to 0.0, nulls never matching; on files without a page
index, with pyarrow's (whose bounds leave NaN out) and with ours, across row groups and pages.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex.query.lookup import lookup
from pageindex.query.predicate import PredicateError
from pageindex.retrofit import retrofit
from tests.helpers.spark import spark_conf

ROWS = 4000
PAGES = {"data_page_size": 512, "write_batch_size": 64, "row_group_size": 1000}
NEGATIVE_NAN = np.array([0xFFF8000000000123], np.uint64).view(np.float64)[0]  # sign bit set, a payload

WHERES = [
    f"{c} {op} {lit}"
    for c in ("d", "s")
    for op in ("=", "!=", "<", "<=", ">", ">=")
    for lit in ("3.5", "0", "-0.0", "'NaN'", "'inf'", "'-inf'", "-2")
] + [
    f"{c} {rest}"
    for c in ("d", "s")
    for rest in ("BETWEEN -1 AND 'NaN'", "BETWEEN 'NaN' AND 'NaN'", "BETWEEN '-inf' AND 3.5",
                 "BETWEEN -0.0 AND 0.0", "BETWEEN 'NaN' AND 1", "IN (1.5, 'NaN')", "IN (0)", "IN (-0.0, 'inf')",
                 "IN ('NaN')", "IS NULL", "IS NOT NULL")
]


def _values(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Numbers with runs of NaN (pages of NaN only, pages mixed), both zeros, both infinities and
    nulls; the last row group holds no NaN, so a NaN-free chunk is there to prune."""
    d = np.round(rng.uniform(-10, 10, ROWS), 1)
    d[100:400] = np.nan  # whole pages of NaN
    d[rng.choice(3000, 150, replace=False)] = np.nan  # NaN among numbers
    d[rng.choice(3000, 10, replace=False)] = NEGATIVE_NAN
    for value, count in ((0.0, 40), (-0.0, 40), (np.inf, 8), (-np.inf, 8), (3.5, 20)):
        d[rng.choice(ROWS, count, replace=False)] = value
    d[3000:] = np.sort(np.nan_to_num(d[3000:], nan=1.0))  # sorted, no NaN
    nulls = rng.random(ROWS) < 0.05
    return d, nulls


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    d, nulls = _values(np.random.default_rng(42))
    with np.errstate(over="ignore"):  # the NaN payload does not fit a float32: it stays NaN
        s = d.astype(np.float32)
    table = pa.table({"k": pa.array(np.arange(ROWS)), "d": pa.array(d, mask=nulls), "s": pa.array(s, mask=nulls)})
    root = tmp_path_factory.mktemp("floats")
    pq.write_table(table, root / "plain.parquet", write_page_index=False, **PAGES)
    pq.write_table(table, root / "pyarrow.parquet", write_page_index=True, **PAGES)
    retrofit(str(root / "plain.parquet"), str(root / "ours.parquet"))
    return {name: str(root / f"{name}.parquet") for name in ("plain", "pyarrow", "ours")}


def _duckdb_keys(path: str, where: str) -> list[int]:
    """DuckDB's semantics on the file's rows (read by pyarrow). Its own Parquet reader is not
    used: DuckDB 2.0 takes footer min/max that leave NaN out as proof of no NaN and folds a
    NaN literal's condition to no rows (`d = 'NaN'`, `isnan(d)`), as Spark's pushdown does."""
    import duckdb

    relation = duckdb.from_arrow(pq.read_table(path))
    return [k for (k,) in relation.filter(where).project("k").order("k").fetchall()]


def _lookup_keys(path: str, where: str) -> list[int]:
    got, _ = lookup(path, where, columns=["k"])
    return sorted(got.column("k").to_pylist())


def test_the_files_hold_what_the_cases_need(files):
    """pyarrow's index leaves NaN out of its page bounds; ours gives NaN-holding chunks none."""
    from pageindex.format.footer import read_footer
    from pageindex.index.reader import read_column_index
    from pageindex.io.storage import open_source

    with open_source(files["pyarrow"]) as src:
        footer = read_footer(src)
        # (pyarrow 26 gives a chunk with a page of NaN only no ColumnIndex, the others one.)
        ci = read_column_index(src, footer.chunks[1][1])
        assert ci is not None and ci.nan_counts is None and len(ci) > 4
    with open_source(files["ours"]) as src:
        footer = read_footer(src)
        assert [footer.chunks[rg][1].has_column_index for rg in range(4)] == [False, False, False, True]


@pytest.mark.parametrize("variant", ["plain", "pyarrow", "ours"])
def test_same_rows_as_duckdb(files, variant):
    problems = []
    for where in WHERES:
        want, got = _duckdb_keys(files["plain"], where), _lookup_keys(files[variant], where)
        if got != want:
            problems.append(f"{where}: {len(got)} rows, DuckDB {len(want)}")
    assert not problems, problems


def test_nan_above_numbers_counted(files):
    """The reported case: `> 3` holds the NaN rows, which pyarrow's bounds leave out."""
    nan_rows = _duckdb_keys(files["plain"], "isnan(d)")
    above = _lookup_keys(files["pyarrow"], "d > 3")
    assert len(nan_rows) > 400 and set(nan_rows) <= set(above)
    assert _lookup_keys(files["ours"], "d = 'nan'") == nan_rows == _lookup_keys(files["plain"], "d = 'NaN'")


def test_our_index_still_prunes_a_nan_free_chunk(files):
    """The last row group holds no NaN and has our ColumnIndex: `d > 9` reads only its last pages
    there, while pyarrow's index (no proof of no NaN) reads every page of it."""
    def pages_read(path: str) -> int:
        _, stats = lookup(path, "d > 9 AND k >= 3000", columns=["k"])
        return stats.columns["k"].pages_read

    ours, theirs = pages_read(files["ours"]), pages_read(files["pyarrow"])
    assert ours < theirs, (ours, theirs)


def test_special_literals_only_for_floats(files):
    with pytest.raises(PredicateError, match="'NaN'"):
        lookup(files["plain"], "k = 'NaN'")
    got, _ = lookup(files["plain"], [("d", ">=", float("nan"))], columns=["k"])
    assert sorted(got.column("k").to_pylist()) == _duckdb_keys(files["plain"], "d >= 'NaN'")


@pytest.mark.slow
def test_same_rows_as_spark(files, spark):
    """Spark's own comparison semantics, on every file. With Parquet filter pushdown on, Spark
    4.3 (parquet-java's statistics filters) drops the row groups of NaN rows for a NaN or
    infinity literal that its own comparison matches; those cases are printed, not asserted."""
    problems, pushed = [], []
    frames = {name: spark.read.parquet(path) for name, path in files.items()}
    for where in WHERES:
        got = _lookup_keys(files["pyarrow"], where)
        for name, frame in frames.items():
            with spark_conf(spark, **{"spark.sql.parquet.filterPushdown": "false"}):
                want = sorted(r.k for r in frame.where(where).select("k").collect())
            if got != want:
                problems.append(f"{where}: {len(got)} rows, Spark on {name} {len(want)}")
        with_pushdown = sorted(r.k for r in frames["plain"].where(where).select("k").collect())
        if with_pushdown != got:
            pushed.append(f"{where}: {len(got)} rows, Spark with pushdown {len(with_pushdown)}")
    print("\n".join(pushed))
    assert not problems, problems


def test_other_writers_bloom_filters_hold_one_zero_and_their_own_nan(tmp_path):
    """pyarrow's filters hash the values as stored: -0.0 only, a NaN with a payload. A probe for
    0 must also try -0.0, and NaN is never probed (its bit patterns are many)."""
    payload_nan = np.array([0x7FF8000000000123], np.uint64).view(np.float64)[0]
    values = np.concatenate([np.full(1000, -0.0), np.full(10, payload_nan), np.arange(1, 491, dtype=np.float64)])
    path = tmp_path / "bloom.parquet"
    pq.write_table(pa.table({"k": np.arange(len(values)), "d": values}), path, row_group_size=500,
                   bloom_filter_options={"d": {"ndv": 600, "fpp": 0.01}})
    assert pq.ParquetFile(path).metadata.row_group(0).column(1).to_dict().get("bloom_filter_offset") is not None
    for where in ("d = 0", "d = -0.0", "d = 'NaN'", "d IN (0, 7)", "d IN ('NaN', 3)"):
        want = _duckdb_keys(str(path), where)
        assert _lookup_keys(str(path), where) == want and want, where


def test_same_rows_as_datafusion_where_every_nan_is_the_canonical_one(tmp_path):
    """DataFusion orders floats by their bits (IEEE totalOrder): for the canonical NaN that is
    Spark's and DuckDB's order, for a negative NaN or one with a payload it is not (lookup
    follows Spark and DuckDB there: every NaN is one value, above every number)."""
    import datafusion

    d, nulls = _values(np.random.default_rng(7))
    d = np.where(np.isnan(d), np.nan, d)
    table = pa.table({"k": pa.array(np.arange(ROWS)), "d": pa.array(d, mask=nulls)})
    path = tmp_path / "canonical.parquet"
    pq.write_table(table, path, write_page_index=True, **PAGES)
    context = datafusion.SessionContext()
    context.register_record_batches("t", [table.to_batches()])
    problems = []
    for where in (w for w in WHERES if w.startswith("d ")):
        want = sorted(r["k"] for r in context.sql(f"SELECT k FROM t WHERE {where}").to_pylist())
        if _lookup_keys(str(path), where) != want:
            problems.append(where)
    assert not problems, problems
