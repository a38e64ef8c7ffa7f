"""What engines gain from the index, on a small events lake (bench.engines on 200,000 rows): the
counts each engine reports (rows, pages, row groups, bytes) without an index, retrofitted and with
the writer's own index, and every engine's answer against the rows in memory. The bench section
measures the same on a larger lake; here only counts that do not depend on the machine are asserted."""
from __future__ import annotations

import pytest

from bench.engine_lake import BLOOM_COLUMN, build, events, queries
from bench.engine_probes import answer, arrow_filter, probe
from bench.engines import measure

ROWS = 200_000  # pyarrow: one row group of 20,000-row pages; DuckDB: two row groups of one page each
INDEXED = ("after", "after_bloom", "native", "native_bloom")


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    return measure(ROWS, tmp_path_factory.mktemp("engine_lake"))


def _shape(results: dict, prefix: str) -> str:
    (name,) = [q["name"] for q in results["queries"] if q["shape"].startswith(prefix)]
    return name


def _counts(lake: dict, writer: str, prefix: str, engine: str) -> dict[str, dict]:
    return lake["results"][writer][_shape(lake, prefix)][engine]


def test_every_engine_answers_as_the_rows_in_memory(lake):
    assert {w: sorted(q) for w, q in lake["results"].items()} == {
        w: sorted(q.name for q in queries(events(ROWS))) for w in ("pyarrow", "duckdb")}
    for writer, by_query in lake["results"].items():
        for name, by_engine in by_query.items():
            assert sorted(by_engine) == ["datafusion", "duckdb", "lookup", "polars", "pyarrow.dataset"]
            for engine, by_variant in by_engine.items():
                assert all(m["equal"] for m in by_variant.values()), (writer, name, engine, by_variant)
                assert len({str(m["result"]) for m in by_variant.values()}) == 1


def test_datafusion_prunes_what_pyarrows_own_index_prunes(lake):
    for shape in ("point lookup on a sorted key", "narrow range", "rare value"):
        m = _counts(lake, "pyarrow", shape, "datafusion")
        assert m["before"].get("page_index_pages_pruned_total", 0) == 0
        pruned = {v: (m[v]["page_index_pages_pruned"], m[v]["page_index_pages_pruned_total"],
                      m[v]["page_index_rows_pruned"]) for v in INDEXED}
        assert len(set(pruned.values())) == 1, (shape, pruned)
        pages, total, _ = pruned["native"]
        assert 0 < pages < total
        assert m["after"]["bytes_scanned"] < m["before"]["bytes_scanned"] * 0.75
    # a point lookup on the sorted key keeps one page of the filter column (pageindex inspect's count)
    point = _counts(lake, "pyarrow", "point lookup on a sorted key", "datafusion")["after"]
    (pages, _), = {lake["layout"]["pyarrow"]["after"]["pages_per_chunk"]["event_id"]}
    assert (point["page_index_pages_pruned"], point["page_index_pages_pruned_total"]) == (pages - 1, pages)


def test_a_full_scan_reads_the_same_with_or_without_the_index(lake):
    for writer in ("pyarrow", "duckdb"):
        df = _counts(lake, writer, "full scan", "datafusion")
        assert len({m["bytes_scanned"] for m in df.values()}) == 1, writer
        duck = _counts(lake, writer, "full scan", "duckdb")
        assert {m["row_groups_scanned"] for m in duck.values()} == {duck["before"]["row_groups_total"]}


def test_duckdb_and_lookup_read_the_index_pyarrow_dataset_and_polars_do_not(lake):
    for engine in ("duckdb", "lookup"):
        m = _counts(lake, "pyarrow", "point lookup on a sorted key", engine)
        assert m["after"]["bytes_read"] < m["before"]["bytes_read"] * 0.6, engine
        assert m["after"]["bytes_read"] == pytest.approx(m["native"]["bytes_read"], rel=0.02), engine
    grown = lake["layout"]["pyarrow"]["after"]["bytes"] - lake["layout"]["pyarrow"]["before"]["bytes"]
    for engine in ("pyarrow.dataset", "polars"):
        m = _counts(lake, "pyarrow", "point lookup on a sorted key", engine)
        # the same data pages read: only the footer (and the index before it) differs
        assert abs(m["after"]["bytes_read"] - m["before"]["bytes_read"]) <= grown + (64 << 10), engine


def test_one_page_per_chunk_skips_no_page_but_bloom_filters_skip_row_groups(lake):
    shapes = lake["layout"]["duckdb"]
    assert set(shapes) == {"before", "after", "after_bloom"}  # DuckDB writes no page index
    assert shapes["after"]["pages_per_chunk"]["event_id"] == (1, 1) and shapes["after"]["row_groups"] == 2
    assert shapes["after"]["skipping"].startswith("no page skipping: one data page per column chunk")
    assert BLOOM_COLUMN in shapes["after_bloom"]["bloom_columns"]
    df = _counts(lake, "duckdb", "lookup on an unsorted key", "datafusion")
    assert df["after"].get("page_index_pages_pruned", 0) == 0
    assert df["after_bloom"]["row_groups_pruned_bloom_filter"] == 1
    duck = _counts(lake, "duckdb", "lookup on an unsorted key", "duckdb")
    assert [duck[v]["row_groups_scanned"] for v in ("before", "after", "after_bloom")] == [2, 2, 1]
    assert _counts(lake, "duckdb", "lookup on an unsorted key", "lookup")["after_bloom"][
        "row_groups_pruned_bloom_filter"] == 1


def test_bloom_filters_skip_every_row_group_for_an_absent_key(lake):
    for writer, groups in (("pyarrow", 1), ("duckdb", 2)):
        df = _counts(lake, writer, "lookup of an absent key", "datafusion")
        blooms = [v for v in df if v.endswith("bloom")]
        assert {v: df[v]["row_groups_pruned_bloom_filter"] for v in blooms} == dict.fromkeys(blooms, groups)
        assert df["after"].get("row_groups_pruned_bloom_filter", 0) == 0
        duck = _counts(lake, writer, "lookup of an absent key", "duckdb")
        assert {v: duck[v]["row_groups_scanned"] for v in blooms} == dict.fromkeys(blooms, 0)
        looked = _counts(lake, writer, "lookup of an absent key", "lookup")
        assert {v: looked[v]["row_groups_pruned_bloom_filter"] for v in blooms} == dict.fromkeys(blooms, groups)


def test_inspect_names_the_ordered_columns(lake):
    shapes = lake["layout"]["pyarrow"]
    assert shapes["after"]["skipping"].startswith("page skipping: ")
    assert "(here: event_id" in shapes["after"]["skipping"]  # event_time's 5-minute jitter spans pages
    assert shapes["before"]["skipping"].startswith("no page index yet")


def test_spark_prunes_what_its_own_index_prunes(spark, tmp_path):
    table = events(ROWS)
    files = build(table, tmp_path, ("spark",), spark)["spark"]
    point = [q for q in queries(table) if q.shape.startswith("point lookup")][0]
    m = {v: probe("spark", path, point, spark) for v, path in files.items()}
    expected = answer(table.filter(arrow_filter(point)))
    assert {v: r["result"] for v, r in m.items()} == dict.fromkeys(files, expected)
    rows = {v: r["rows_scanned"] for v, r in m.items()}
    assert rows["before"] == ROWS  # one row group, nothing skipped without the index
    assert rows["after"] == rows["after_bloom"] == rows["native"] == rows["native_bloom"] == 20_000
    df = {v: probe("datafusion", path, point) for v, path in files.items()}
    assert {v: df[v]["page_index_pages_pruned"] for v in INDEXED} == dict.fromkeys(INDEXED, 9)
