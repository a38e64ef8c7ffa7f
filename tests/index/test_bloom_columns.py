"""What the columns named for bloom filters mean in one file (pageindex.index.bloom.columns): a
leaf's dotted path, a list or map by its own name, and notes (not errors) for the rest."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pageindex.format.footer import read_footer
from pageindex.index.bloom.columns import choose
from pageindex.index.bloom.options import bloom_options
from pageindex.io.storage import open_source


def leaves(tmp_path: Path, table: pa.Table, **options):
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, **options)
    with open_source(str(path)) as source:
        return read_footer(source).leaves


def chosen(all_leaves, spec: str) -> tuple[set[str], tuple[str, ...]]:
    picked = choose(bloom_options(spec), all_leaves)
    return {leaf.dotted for leaf in all_leaves if leaf.index in picked.leaves}, picked.notes


NESTED = pa.table({
    "id": pa.array([1, 2], pa.int64()),
    "flag": pa.array([True, False]),
    "lst": pa.array([[1, 2], None], pa.list_(pa.int32())),
    "m": pa.array([[("k", 1.5)], []], pa.map_(pa.string(), pa.float64())),
    "s": pa.array([{"x": 1, "y": "a"}, None], pa.struct([("x", pa.int64()), ("y", pa.string())])),
    "ls": pa.array([[{"x": 1}], []], pa.list_(pa.struct([("x", pa.int64())]))),
})


def test_lists_and_maps_by_their_own_names(tmp_path):
    found = leaves(tmp_path, NESTED)
    assert chosen(found, "lst") == ({"lst.list.element"}, ())
    assert chosen(found, "lst.list.element") == ({"lst.list.element"}, ())
    assert chosen(found, "m") == ({"m.key_value.key", "m.key_value.value"}, ())
    assert chosen(found, "m.key_value.key,s.x") == ({"m.key_value.key", "s.x"}, ())


def test_a_list_whose_element_has_another_name(tmp_path):
    found = leaves(tmp_path, NESTED.select(["lst"]), use_compliant_nested_type=False)
    assert [leaf.dotted for leaf in found] == ["lst.list.item"]
    assert chosen(found, "lst") == ({"lst.list.item"}, ())


def test_what_gets_no_filter_is_noted(tmp_path):
    found = leaves(tmp_path, NESTED)
    assert chosen(found, "id,gone,flag,s,ls") == ({"id"}, (
        "bloom filter: column gone not in this file",
        "bloom filter: column flag is BOOLEAN, which has no bloom filter (of two values, min/max "
        "statistics already skip what a filter could)",
        "bloom filter: s is a group of columns, not a column; name the ones to filter: s.x, s.y",
        "bloom filter: ls is a list of groups; name the columns to filter: ls.list.element.x",
    ))
    int96 = leaves(tmp_path, pa.table({"t": pa.array([0], pa.timestamp("ns"))}),
                   use_deprecated_int96_timestamps=True)
    assert chosen(int96, "t")[0] == set() and "t is INT96" in chosen(int96, "t")[1][0]


def test_auto_takes_the_types_where_a_filter_may_pay(tmp_path):
    found = leaves(tmp_path, NESTED)
    assert chosen(found, "auto") == ({"id", "lst.list.element", "m.key_value.key", "s.x", "s.y",
                                      "ls.list.element.x"}, ())
