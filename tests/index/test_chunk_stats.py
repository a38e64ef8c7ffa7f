"""Row-group pruning is never lost (index/chunk_stats.py): declaring column_orders hides the
deprecated min/max from pyarrow and parquet-java, so where readers used them before, the retrofit
gives the same bounds as min_value/max_value; where no reader used them, nothing changes."""
from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import pageindex
from pageindex.format.footer import read_footer
from pageindex.format.parquet_thrift import ColumnChunk, ColumnMetaData, FileMetaData, RowGroup, Statistics
from pageindex.format.schema import Leaf
from pageindex.format.thrift import Struct, T, TList, encode_struct
from pageindex.index.chunk_stats import with_visible_bounds
from pageindex.io.storage import open_source
from pageindex.verify import verify
from tests.helpers import engines as E
from tests.helpers.writers import duckdb_writer, fastparquet_writer, polars_writer

ROWS, GROUP = 80_000, 10_000


def _table() -> pa.Table:
    ids = np.arange(ROWS, dtype=np.int64)
    return pa.table({"id": ids, "s": pa.array([f"k{i:06d}" for i in ids]), "f": ids / 3.0,
                     "small": pa.array((ids // 1000).astype(np.int32)), "flag": pa.array(ids >= ROWS // 2)})


def _pyarrow(**options) -> Callable[[pa.Table, Path], None]:
    def write(table: pa.Table, path: Path) -> None:
        pq.write_table(table, path, row_group_size=GROUP, data_page_size=4096, write_page_index=False, **options)
    return write


WRITERS = {"fastparquet": fastparquet_writer(GROUP),
           "fastparquet-snappy": fastparquet_writer(GROUP, compression="SNAPPY"),
           "fastparquet-stats-on": fastparquet_writer(GROUP, stats=True), "pyarrow": _pyarrow(),
           "pyarrow-no-statistics": _pyarrow(write_statistics=False), "duckdb": duckdb_writer(GROUP),
           "polars": polars_writer(GROUP, statistics=True),
           "polars-no-statistics": polars_writer(GROUP, statistics=False)}
PREDICATES = {
    "id = k": ds.field("id") == 12_345,
    "id range": (ds.field("id") >= 30_500) & (ds.field("id") < 41_000),
    "f < x": ds.field("f") < 100.0,
    "small = k": ds.field("small") == 17,
    "flag": ds.field("flag") == False,  # noqa: E712 - an expression, not a comparison
    "s = k": ds.field("s") == "k012345",
}
SQL = {"id = k": "id = 12345", "id range": "id >= 30500 AND id < 41000", "small = k": "small = 17"}


def _row_groups_kept(path: Path, expression: ds.Expression) -> int:
    (fragment,) = ds.dataset(path, format="parquet").get_fragments()
    return len(fragment.split_by_row_group(expression))


def _datafusion_kept(path: Path, where: str) -> int:
    metrics = E.datafusion_metrics(path, where)
    if metrics.get("files_ranges_pruned_statistics_matched") == 0:
        return 0  # the whole file was pruned, from its row groups' statistics, before any row group
    # The row groups that reach the bloom filter stage are those the statistics kept (the
    # statistics counter itself is not always printed in a form the parser reads).
    return metrics["row_groups_pruned_bloom_filter_total"]


def _duckdb_kept(path: Path, where: str) -> int:
    """Row groups DuckDB scans for `SELECT * ... WHERE where`, from its JSON profile."""
    import duckdb
    profile = path.with_suffix(".profile.json")
    con = duckdb.connect()
    con.execute("PRAGMA enable_profiling='json'")
    con.execute(f"PRAGMA profiling_output='{profile}'")
    con.execute(f"SELECT * FROM read_parquet('{path}') WHERE {where}").fetchall()
    con.close()
    return json.loads(profile.read_text())["query"]["total_row_groups_scanned"]


def _duckdb_rows(path: Path, where: str) -> list[tuple]:
    import duckdb
    with duckdb.connect() as con:
        return con.execute(f"SELECT id FROM read_parquet('{path}') WHERE {where} ORDER BY id").fetchall()


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_no_reader_keeps_more_row_groups_after_the_retrofit(writer, tmp_path):
    path = tmp_path / f"{writer}.parquet"
    WRITERS[writer](_table(), path)
    # polars writes its own page index with statistics on: nothing to do, nothing may get worse
    status = "already_indexed" if writer == "polars" else "indexed"
    _assert_no_reader_keeps_more(path, writer.endswith("no-statistics"), status)


@pytest.mark.parametrize("statistics", [True, False])
def test_no_reader_keeps_more_row_groups_after_the_retrofit_of_a_spark_file(spark, statistics, tmp_path):
    """parquet-java as Spark writes it: with statistics it writes its own page index (nothing to
    do); without, it writes neither."""
    out = tmp_path / "spark"
    (spark.range(ROWS).selectExpr("id", "concat('k', lpad(cast(id AS STRING), 6, '0')) AS s", "id / 3.0D AS f",
                                  "CAST(id DIV 1000 AS INT) AS small", f"id >= {ROWS // 2} AS flag")
     .repartition(1).sortWithinPartitions("id").write
     .option("parquet.block.size", str(256 << 10)).option("parquet.page.size", "8192")
     .option("parquet.column.statistics.enabled", str(statistics).lower()).parquet(str(out)))
    [part] = out.glob("part-*.parquet")
    path = tmp_path / ("spark.parquet" if statistics else "spark-no-statistics.parquet")
    part.rename(path)
    assert pq.ParquetFile(path).metadata.num_row_groups > 1
    _assert_no_reader_keeps_more(path, not statistics, "already_indexed" if statistics else "indexed")


def _assert_no_reader_keeps_more(path: Path, no_statistics: bool, status: str) -> None:
    """pyarrow's dataset, DataFusion and DuckDB keep no more row groups after the retrofit and
    return the same rows; where the file had no usable statistics, `id = k` keeps one."""
    writer, groups = path.stem, pq.ParquetFile(path).metadata.num_row_groups
    before = {name: _row_groups_kept(path, e) for name, e in PREDICATES.items()}
    rows = {name: ds.dataset(path).to_table(filter=e) for name, e in PREDICATES.items()}
    df_before = {name: _datafusion_kept(path, where) for name, where in SQL.items()}
    df_rows = {name: E.datafusion_rows(path, where, ["id"]) for name, where in SQL.items()}
    duck_before = {name: _duckdb_kept(path, where) for name, where in SQL.items()}
    duck_rows = {name: _duckdb_rows(path, where) for name, where in SQL.items()}
    assert pageindex.retrofit(str(path)).status == status
    assert {name: E.datafusion_rows(path, where, ["id"]) for name, where in SQL.items()} == df_rows
    after = {name: _row_groups_kept(path, e) for name, e in PREDICATES.items()}
    assert all(after[name] <= before[name] for name in PREDICATES), (before, after)
    if writer.startswith("fastparquet"):
        # the measured case: the sort key was pruned to one row group before, and still is
        assert before["id = k"] == after["id = k"] == 1
    for name, e in PREDICATES.items():
        assert ds.dataset(path).to_table(filter=e).equals(rows[name]), name
    df_after = {name: _datafusion_kept(path, where) for name, where in SQL.items()}
    assert all(df_after[name] <= df_before[name] for name in SQL), (df_before, df_after)
    assert {name: _duckdb_rows(path, where) for name, where in SQL.items()} == duck_rows
    duck_after = {name: _duckdb_kept(path, where) for name, where in SQL.items()}
    assert all(duck_after[name] <= duck_before[name] for name in SQL), (duck_before, duck_after)
    assert duck_rows["id = k"] == [(12_345,)] and duck_after["id = k"] == 1
    if no_statistics:
        assert before["id = k"] == duck_before["id = k"] == groups
        assert after["id = k"] == df_after["id = k"] == 1
    assert verify(str(path)).ok


def _chunk(path: Path, column: int) -> tuple[Struct, Leaf]:
    with open_source(str(path)) as source:
        footer = read_footer(source)
    rg = footer.metadata.get(FileMetaData.ROW_GROUPS).items[0]
    return rg.get(RowGroup.COLUMNS).items[column], footer.leaves[column]


def _with_stats(cc: Struct, **fields: bytes | None) -> Struct:
    stats = Statistics.make(**{name.upper(): value for name, value in fields.items()})
    meta = ColumnMetaData.set(cc.get(ColumnChunk.META_DATA), ColumnMetaData.STATISTICS, stats)
    return ColumnChunk.set(cc, ColumnChunk.META_DATA, meta)


def _bounds(cc: Struct) -> tuple[bytes | None, bytes | None]:
    stats = cc.get(ColumnChunk.META_DATA).get(ColumnMetaData.STATISTICS)
    return stats.get(Statistics.MIN_VALUE), stats.get(Statistics.MAX_VALUE)


def test_bounds_are_copied_only_where_both_orders_agree(tmp_path):
    path = tmp_path / "t.parquet"
    table = pa.table({"i": pa.array([1, 2], pa.int64()), "u": pa.array([1, 2], pa.uint32()),
                      "d": pa.array([0.5, 1.5]), "s": pa.array(["a", "b"]), "b": pa.array([False, True])})
    pq.write_table(table, path, write_statistics=False)
    i64 = struct.Struct("<q").pack
    cc, leaf = _chunk(path, 0)
    assert _bounds(with_visible_bounds(_with_stats(cc, min=i64(-5), max=i64(9)), leaf)) == (i64(-5), i64(9))
    assert _bounds(with_visible_bounds(_with_stats(cc, min=i64(9), max=i64(-5)), leaf)) == (None, None)
    assert _bounds(with_visible_bounds(_with_stats(cc, min=b"\0", max=i64(9)), leaf)) == (None, None)
    kept = _with_stats(cc, min=i64(-5), max=i64(9), min_value=i64(1), max_value=i64(2))
    assert with_visible_bounds(kept, leaf) is kept  # a chunk with min_value/max_value is left as it is
    cc, leaf = _chunk(path, 1)  # UINT_32: the deprecated order was signed, TYPE_ORDER is unsigned
    assert _bounds(with_visible_bounds(_with_stats(cc, min=b"\1\0\0\0", max=b"\2\0\0\0"), leaf)) == (None, None)
    cc, leaf = _chunk(path, 2)
    f64 = struct.Struct("<d").pack
    assert _bounds(with_visible_bounds(_with_stats(cc, min=f64(-0.0), max=f64(2)), leaf)) == (f64(-0.0), f64(2))
    assert _bounds(with_visible_bounds(_with_stats(cc, min=f64(float("nan")), max=f64(2)), leaf)) == (None, None)
    cc, leaf = _chunk(path, 3)  # strings: signed byte order then, unsigned now
    assert _bounds(with_visible_bounds(_with_stats(cc, min=b"a", max=b"b"), leaf)) == (None, None)
    cc, leaf = _chunk(path, 4)
    assert _bounds(with_visible_bounds(_with_stats(cc, min=b"\0", max=b"\1"), leaf)) == (b"\0", b"\1")
    bare = _chunk(path, 0)[0]
    assert with_visible_bounds(bare, _chunk(path, 0)[1]) is bare  # no statistics at all


def test_a_file_that_declares_orders_keeps_its_statistics(tmp_path):
    """Readers already ignored the deprecated fields there: the retrofit changes no statistics."""
    path, out = tmp_path / "t.parquet", tmp_path / "o.parquet"
    pq.write_table(_table(), path, row_group_size=GROUP, write_page_index=False)
    pageindex.retrofit(str(path), str(out))
    old, new = pq.ParquetFile(path).metadata, pq.ParquetFile(out).metadata
    for rg in range(old.num_row_groups):
        for col in range(old.num_columns):
            assert old.row_group(rg).column(col).statistics == new.row_group(rg).column(col).statistics


# ---------------------------------------------------------------- statistics filled from the exact bounds

def test_a_file_without_statistics_gets_them_from_the_exact_bounds(tmp_path):
    """Written with statistics off: pyarrow and DataFusion read every row group for id = k before;
    after, the chunks carry the ColumnIndex's bounds and both keep only the row groups that match."""
    path = tmp_path / "nostats.parquet"
    _pyarrow(write_statistics=False)(_table(), path)
    before = {name: _row_groups_kept(path, e) for name, e in PREDICATES.items()}
    assert before["id = k"] == ROWS // GROUP
    rows = {name: ds.dataset(path).to_table(filter=e) for name, e in PREDICATES.items()}
    df_rows = {name: E.datafusion_rows(path, where, ["id"]) for name, where in SQL.items()}
    result = pageindex.retrofit(str(path))
    assert {c.statistics for c in result.chunks} == {"filled"}
    assert {name: E.datafusion_rows(path, where, ["id"]) for name, where in SQL.items()} == df_rows
    after = {name: _row_groups_kept(path, e) for name, e in PREDICATES.items()}
    assert after == {"id = k": 1, "id range": 2, "f < x": 1, "small = k": 1, "flag": 4, "s = k": 1}
    assert {name: _datafusion_kept(path, where) for name, where in SQL.items()} == {
        "id = k": 1, "id range": 2, "small = k": 1}
    for name, e in PREDICATES.items():
        assert ds.dataset(path).to_table(filter=e).equals(rows[name]), name
    _assert_statistics_bound_the_data(path)


def _assert_statistics_bound_the_data(path: Path) -> None:
    """Every chunk's min/max as pyarrow reads them enclose the chunk's values, and its null
    count is theirs (independent of pageindex: pyarrow decodes the data)."""
    file = pq.ParquetFile(path)
    for rg in range(file.metadata.num_row_groups):
        data = file.read_row_group(rg)
        for col in range(file.metadata.num_columns):
            stats = file.metadata.row_group(rg).column(col).statistics
            values = data.column(col)
            assert stats is not None and stats.has_min_max, (rg, col)
            assert stats.null_count == values.null_count
            assert stats.min <= pa.compute.min(values).as_py() and pa.compute.max(values).as_py() <= stats.max


def test_fastparquet_strings_get_bounds_too(tmp_path):
    """fastparquet's string bounds are deprecated ones no reader trusts: filled from the exact bounds."""
    path = tmp_path / "fp.parquet"
    fastparquet_writer(GROUP)(_table(), path)
    assert _row_groups_kept(path, PREDICATES["s = k"]) == ROWS // GROUP
    result = pageindex.retrofit(str(path))
    how = {c.column: c.statistics for c in result.chunks if c.row_group == 0}
    # (fastparquet writes no statistics for booleans: filled too)
    assert how == {"id": "copied", "s": "filled", "f": "copied", "small": "copied", "flag": "filled"}
    assert _row_groups_kept(path, PREDICATES["s = k"]) == 1
    _assert_statistics_bound_the_data(path)


def test_statistics_already_usable_are_kept_byte_for_byte(tmp_path):
    path, out = tmp_path / "t.parquet", tmp_path / "o.parquet"
    _pyarrow()(_table(), path)
    result = pageindex.retrofit(str(path), str(out))
    assert {c.statistics for c in result.chunks} == {""}
    assert _statistics(out) == _statistics(path)


def test_chunk_statistics_can_be_left_untouched(tmp_path):
    for writer in ("pyarrow-no-statistics", "fastparquet"):
        path, out = tmp_path / f"{writer}.parquet", tmp_path / f"{writer}-out.parquet"
        WRITERS[writer](_table(), path)
        result = pageindex.retrofit(str(path), str(out), chunk_statistics=False)
        assert {c.statistics for c in result.chunks} == {""}
        assert _statistics(out) == _statistics(path)
        pageindex.retrofit(str(path), str(out), force=True)  # the default: they change
        assert _statistics(out) != _statistics(path)


def _statistics(path: Path) -> list[Struct | None]:
    with open_source(str(path)) as source:
        footer = read_footer(source)
    return [cc.get(ColumnChunk.META_DATA).get(ColumnMetaData.STATISTICS)
            for rg in footer.metadata.get(FileMetaData.ROW_GROUPS).items for cc in rg.get(RowGroup.COLUMNS).items]


def test_a_float_column_with_nan_gets_no_bounds(tmp_path):
    """No ColumnIndex can hold bounds over NaN under TYPE_ORDER: no chunk statistics either."""
    path = tmp_path / "nan.parquet"
    values = np.arange(1000, dtype=np.float64)
    values[7] = np.nan
    pq.write_table(pa.table({"f": values}), path, write_statistics=False, data_page_size=1024)
    result = pageindex.retrofit(str(path))
    assert [c.statistics for c in result.chunks] == [""]
    assert not pq.ParquetFile(path).metadata.row_group(0).column(0).is_stats_set


# ---------------------------------------------------------------- verify and repair of wrong chunk bounds

def _with_wrong_min(src: Path, dst: Path, row_group: int, column: int, value: bytes) -> Path:
    """`src` with one chunk's min_value replaced by `value` (the index blocks and data untouched)."""
    data = src.read_bytes()
    with open_source(str(src)) as source:
        footer = read_footer(source)
    groups = list(footer.metadata.get(FileMetaData.ROW_GROUPS).items)
    ccs = list(groups[row_group].get(RowGroup.COLUMNS).items)
    stats = ccs[column].get(ColumnChunk.META_DATA).get(ColumnMetaData.STATISTICS)
    meta = ColumnMetaData.set(ccs[column].get(ColumnChunk.META_DATA), ColumnMetaData.STATISTICS,
                              Statistics.set(stats, Statistics.MIN_VALUE, value))
    ccs[column] = ColumnChunk.set(ccs[column], ColumnChunk.META_DATA, meta)
    groups[row_group] = RowGroup.set(groups[row_group], RowGroup.COLUMNS, TList(T.STRUCT, tuple(ccs)))
    raw = encode_struct(FileMetaData.set(footer.metadata, FileMetaData.ROW_GROUPS, TList(T.STRUCT, tuple(groups))))
    dst.write_bytes(data[:footer.footer_start] + raw + struct.pack("<I", len(raw)) + b"PAR1")
    return dst


def test_verify_finds_a_chunk_min_that_drops_rows_and_a_repair_replaces_it(tmp_path):
    good = tmp_path / "good.parquet"
    pq.write_table(_table(), good, row_group_size=GROUP, data_page_size=4096, write_page_index=True)
    bad = _with_wrong_min(good, tmp_path / "bad.parquet", 1, 0, struct.pack("<q", GROUP + 100))
    lost = ds.field("id") == GROUP + 5
    assert ds.dataset(bad).to_table(filter=lost).num_rows == 0  # what the wrong bound does to readers
    assert verify(str(good)).ok
    found = verify(str(bad)).violations
    assert [(v.row_group, v.column, v.check) for v in found] == [(1, "id", "chunk statistics")]
    result = pageindex.retrofit(str(bad), verify_existing=True)
    assert result.status == "repaired"
    assert [(c.row_group, c.column) for c in result.chunks if c.statistics == "replaced"] == [(1, "id")]
    assert verify(str(bad)).ok
    assert ds.dataset(bad).to_table(filter=lost).num_rows == 1
    assert pq.ParquetFile(bad).metadata.row_group(1).column(0).statistics.min == GROUP
    assert pageindex.retrofit(str(bad), verify_existing=True).status == "already_indexed"


def test_the_cli_option_keeps_chunk_statistics_and_the_marker_says_so(tmp_path):
    from pageindex.cli import main

    path, out = tmp_path / "nostats.parquet", tmp_path / "out.parquet"
    _pyarrow(write_statistics=False)(_table(), path)
    assert main(["retrofit", "--keep-chunk-statistics", str(path), "--output", str(out)]) == 0
    assert _statistics(out) == _statistics(path)
    marker = pq.ParquetFile(out).metadata.metadata[b"pageindex"].decode()
    assert f";chunk_statistics=kept;original_length={path.stat().st_size}" in marker
    assert main(["retrofit", "--force", str(path), "--output", str(out), "--overwrite"]) == 0
    assert _statistics(out) != _statistics(path)
    assert "chunk_statistics" not in pq.ParquetFile(out).metadata.metadata[b"pageindex"].decode()


# ---------------------------------------------------------------- what was filled, in the report and the CLI

def test_the_report_record_and_the_cli_say_which_chunk_statistics_changed(tmp_path, capsys):
    from pageindex.cli import main
    from pageindex.io.discovery import InputFile
    from pageindex.job.process import failed_record
    from pageindex.job.report import report_table, summary

    path = tmp_path / "fp.parquet"
    fastparquet_writer(GROUP)(_table(), path)
    groups = ROWS // GROUP  # per row group: id, f, small copied; s, flag filled
    record = pageindex.retrofit(str(path), str(tmp_path / "a.parquet")).to_dict()
    assert record["chunk_statistics"] == {"copied": 3 * groups, "filled": 2 * groups, "replaced": 0}
    job_record = {**failed_record(InputFile(str(path), path.stat().st_size, path.name), None, ""), **record}
    [row] = report_table([job_record]).to_pylist()
    assert json.loads(row["chunk_statistics"]) == record["chunk_statistics"]
    lines = summary([{**job_record, "status": "indexed"}] * 2, 1.0).splitlines()
    assert f"  chunk statistics {4 * groups:>8} filled, {6 * groups} copied, 0 replaced" in lines
    assert main(["retrofit", str(path), "--output", str(tmp_path / "b.parquet")]) == 0
    text = capsys.readouterr().out
    assert (f"  chunk statistics: {2 * groups} chunks filled from the page bounds, "
            f"{3 * groups} copied from the deprecated min/max\n") in text
    assert main(["retrofit", "--json", str(path), "--output", str(tmp_path / "c.parquet")]) == 0
    assert json.loads(capsys.readouterr().out)["chunk_statistics"] == record["chunk_statistics"]
    kept = pageindex.retrofit(str(path), str(tmp_path / "d.parquet"), chunk_statistics=False).to_dict()
    assert kept["chunk_statistics"] == {"copied": 0, "filled": 0, "replaced": 0}
    assert main(["retrofit", "--keep-chunk-statistics", str(path), "--output", str(tmp_path / "e.parquet")]) == 0
    assert "chunk statistics" not in capsys.readouterr().out
