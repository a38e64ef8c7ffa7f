"""The benchmark's query worker (bench.worker.op_queries): DataFusion's pruning and pageindex lookup
on a retrofitted file give the rows pyarrow's own filter gives, and the lookup reads less."""
from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import pageindex
from bench.worker import op_queries


def test_point_query_on_the_sort_key(tmp_path):
    path = tmp_path / "sorted.parquet"
    ids = pa.array(range(200_000), pa.int64())
    pq.write_table(pa.table({"id": ids, "u": pc.multiply(ids, 7)}), path, data_page_size=8192, use_dictionary=False,
                   row_group_size=100_000)
    before = tmp_path / "before.parquet"
    before.write_bytes(path.read_bytes())
    pageindex.retrofit(str(path))
    spec = {"queries": [{"where": "id = 123457", "columns": ["id", "u"], "path": str(p)}
                        for p in (before, path)]}
    got = op_queries(json.dumps(spec))["queries"]
    assert [q["lookup_rows"] for q in got] == [1, 1]
    assert got[1]["lookup_bytes_read"] < got[0]["lookup_bytes_read"] / 10
    assert got[1]["df"]["page_index_pages_pruned"] > 0
