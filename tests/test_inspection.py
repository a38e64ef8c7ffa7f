"""pageindex.inspection on files without a page index: real page counts from the page headers,
logical types, codecs, row group sizes, the per-column summary, and a zero-row file."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq

from pageindex.cli import main
from pageindex.inspection import NO_INDEX, RowGroupView, format_text, inspect_file

ROWS = 2000


def _table() -> pa.Table:
    return pa.table({
        "i": pa.array(range(ROWS), pa.int64()),
        "ts": pa.array([dt.datetime(2024, 1, 1) + dt.timedelta(seconds=k) for k in range(ROWS)],
                       pa.timestamp("ms", tz="UTC")),
        "dec": pa.array([Decimal(k) / 100 for k in range(ROWS)], pa.decimal128(12, 2)),
        "s": pa.array([f"v{k:05d}" for k in range(ROWS)]),
    })


def test_a_file_without_index_shows_its_pages_types_codecs_and_row_groups(tmp_path):
    path = tmp_path / "plain.parquet"
    pq.write_table(_table(), path, row_group_size=1000, data_page_size=512, write_batch_size=100,
                   use_dictionary=False, compression="zstd", write_page_index=False)
    meta = pq.ParquetFile(path).metadata
    view = inspect_file(str(path))
    assert view.index_state == NO_INDEX
    assert all(c.pages == 10 for c in view.chunks)  # 1000 rows per row group, 100 rows per page
    assert {c.column: c.logical_type for c in view.chunks} == {
        "i": "", "ts": "TIMESTAMP(MILLIS)", "dec": "DECIMAL(12,2)", "s": "STRING"}
    assert {c.codec for c in view.chunks} == {"ZSTD"}
    assert view.row_groups == tuple(
        RowGroupView(1000, sum(meta.row_group(g).column(c).total_compressed_size for c in range(4)))
        for g in range(2))
    text = format_text(view)
    assert "page index: none (no page index" in text and "rows: 2000   row groups: 2 (1000 rows/" in text
    assert "column ts (INT64 TIMESTAMP(MILLIS))  codec=ZSTD" in text and "pages=10 " in text
    assert view.to_dict()["row_groups"][0]["rows"] == 1000


def test_the_summary_shows_one_line_per_column(tmp_path, capsys):
    path = tmp_path / "many.parquet"
    pq.write_table(_table(), path, row_group_size=10, write_page_index=False)  # 200 row groups
    assert main(["inspect", "--summary", str(path)]) == 0
    out = capsys.readouterr().out
    assert "row group 0 " not in out and "row groups: 200 (10-10 rows," in out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["column", "type"])
    assert [line.split()[0] for line in lines[header + 1:]] == ["i", "ts", "dec", "s"]
    assert lines[header + 1].split()[1:5] == ["INT64", "SNAPPY", "200", "200"]  # chunks, pages


def test_the_summary_counts_indexes_per_column(tmp_path):
    path = tmp_path / "indexed.parquet"
    pq.write_table(_table(), path, row_group_size=500, data_page_size=512, write_batch_size=100,
                   write_page_index=True)
    (i, *_) = inspect_file(str(path)).columns()
    assert (i.chunks, i.pages, i.min_pages, i.max_pages) == (4, 20, 5, 5)
    assert (i.with_offset_index, i.with_column_index) == (4, 4)


def test_a_zero_row_file_renders(tmp_path, capsys):
    path = tmp_path / "empty.parquet"
    pq.write_table(_table().slice(0, 0), path)
    view = inspect_file(str(path))
    assert view.num_rows == 0 and all(c.pages == 0 for c in view.chunks)
    assert main(["inspect", str(path)]) == 0
    assert main(["inspect", "--summary", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.count("page index: none (the file holds no rows: nothing to index)") == 2


def test_a_chunk_shows_which_statistics_bounds_it_has_and_a_retrofit_fills_them(tmp_path, capsys):
    import fastparquet

    import pageindex

    path = tmp_path / "fp.parquet"  # fastparquet: deprecated min/max only; by default none for strings, booleans
    table = _table().select(["i", "s"]).append_column("b", pa.array([k % 2 == 0 for k in range(ROWS)]))
    fastparquet.write(str(path), table.to_pandas())
    before = {c.column: c.statistics for c in inspect_file(str(path)).chunks}
    assert before == {"i": "min/max (deprecated)", "s": "none", "b": "none"}
    pageindex.retrofit(str(path))
    view = inspect_file(str(path))
    assert {c.statistics for c in view.chunks} == {"min_value/max_value"}
    assert {c["statistics"] for c in view.to_dict()["chunks"]} == {"min_value/max_value"}
    assert main(["inspect", str(path)]) == 0
    assert "column_index=yes  boundary_order=ASCENDING  null_pages=0  statistics=min_value/max_value" \
        in capsys.readouterr().out
