"""pageindex.format.schema: leaves, paths, max levels and types, checked against pyarrow on the corpus."""
from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from pageindex.errors import MalformedFileError
from pageindex.format.footer import read_footer
from pageindex.format.parquet_thrift import FieldRepetitionType, SchemaElement, Type
from pageindex.format.schema import MAX_SCHEMA_DEPTH, leaves_of
from pageindex.format.thrift import Field, Struct, T, TList
from pageindex.io.storage import open_source
from tests.helpers.corpus import corpus_path, corpus_rows

VALID = [corpus_path(r) for cat in ("candidate", "oracle", "candidate_reader_limited")
         for r in corpus_rows(cat)]


def el(name: str, rep: int | None = FieldRepetitionType.REQUIRED, *, ptype: int | None = None,
       children: int | None = None, type_length: int | None = None, converted: int | None = None, logical: Struct | None = None,
       scale: int | None = None, precision: int | None = None) -> Struct:
    fields = []
    if ptype is not None:
        fields.append(Field(SchemaElement.TYPE, T.I32, ptype))
    if type_length is not None:
        fields.append(Field(SchemaElement.TYPE_LENGTH, T.I32, type_length))
    if rep is not None:
        fields.append(Field(SchemaElement.REPETITION_TYPE, T.I32, rep))
    fields.append(Field(SchemaElement.NAME, T.BINARY, name.encode()))
    if children is not None:
        fields.append(Field(SchemaElement.NUM_CHILDREN, T.I32, children))
    if converted is not None:
        fields.append(Field(SchemaElement.CONVERTED_TYPE, T.I32, converted))
    if scale is not None:
        fields.append(Field(SchemaElement.SCALE, T.I32, scale))
    if precision is not None:
        fields.append(Field(SchemaElement.PRECISION, T.I32, precision))
    if logical is not None:
        fields.append(Field(SchemaElement.LOGICAL_TYPE, T.STRUCT, logical))
    return Struct(tuple(fields))


def schema(*elements: Struct) -> TList:
    return TList(T.STRUCT, elements)


def root(n: int) -> Struct:
    return el("schema", None, children=n)


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_leaves_match_pyarrow(path):
    with open_source(str(path)) as s:
        leaves = read_footer(s).leaves
    if path.name == "incorrect_map_schema.parquet":
        # pyarrow refuses this schema (map key not required); check it by hand.
        assert [(l.dotted, l.max_def, l.max_rep) for l in leaves] == [
            ("my_map.key_value.key", 3, 1), ("my_map.key_value.value", 3, 1)]
        return
    pa_schema = pq.ParquetFile(path).schema
    assert len(leaves) == len(pa_schema)
    for i, leaf in enumerate(leaves):
        col = pa_schema.column(i)
        assert leaf.index == i
        assert leaf.dotted == col.path, (i, leaf.path)
        assert leaf.max_def == col.max_definition_level, leaf.dotted
        assert leaf.max_rep == col.max_repetition_level, leaf.dotted
        assert Type.NAMES[leaf.physical_type] == col.physical_type
        if col.physical_type == "FIXED_LEN_BYTE_ARRAY":
            assert leaf.type_length == col.length
        else:
            assert leaf.type_length is None
        assert leaf.ancestry[-1].get(SchemaElement.NAME).decode() == col.name


def test_nested_levels_by_hand():
    # message { optional group a (LIST) { repeated group list { optional group element {
    #   required int32 x; repeated binary y; } } } required int64 z; }
    s = schema(
        root(2),
        el("a", FieldRepetitionType.OPTIONAL, children=1, converted=3),
        el("list", FieldRepetitionType.REPEATED, children=1),
        el("element", FieldRepetitionType.OPTIONAL, children=2),
        el("x", FieldRepetitionType.REQUIRED, ptype=Type.INT32),
        el("y", FieldRepetitionType.REPEATED, ptype=Type.BYTE_ARRAY, converted=0),
        el("z", FieldRepetitionType.REQUIRED, ptype=Type.INT64),
    )
    leaves = leaves_of(s)
    assert [(l.path, l.max_def, l.max_rep) for l in leaves] == [
        (("a", "list", "element", "x"), 3, 1),
        (("a", "list", "element", "y"), 4, 2),
        (("z",), 0, 0),
    ]
    assert [l.index for l in leaves] == [0, 1, 2]
    y = leaves[1]
    assert [e.get(SchemaElement.NAME) for e in y.ancestry] == [b"a", b"list", b"element", b"y"]
    assert y.converted_type == 0 and y.logical_type is None and y.logical_id is None


def test_leaf_type_details():
    decimal = Struct((Field(5, T.STRUCT, Struct((Field(1, T.I32, 2), Field(2, T.I32, 9)))),))
    s = schema(root(2), el("d", FieldRepetitionType.OPTIONAL, ptype=Type.FIXED_LEN_BYTE_ARRAY, type_length=4,
                           converted=5, scale=2, precision=9, logical=decimal),
               el("e", FieldRepetitionType.OPTIONAL, ptype=Type.INT32, logical=Struct()))
    d, e = leaves_of(s)
    assert d.type_length == 4 and d.scale == 2 and d.precision == 9 and d.logical_id == 5
    assert e.logical_type == Struct() and e.logical_id is None  # an empty union is "no logical type"


def test_empty_group_is_not_a_leaf():
    s = schema(root(2), el("g", FieldRepetitionType.OPTIONAL, children=0), el("v", FieldRepetitionType.OPTIONAL, ptype=Type.INT32))
    assert [l.dotted for l in leaves_of(s)] == ["v"]


def test_deep_schema_within_limit():
    depth = MAX_SCHEMA_DEPTH - 1
    elements = [root(1)] + [el(f"g{i}", FieldRepetitionType.OPTIONAL, children=1) for i in range(depth)]
    elements.append(el("leaf", FieldRepetitionType.OPTIONAL, ptype=Type.INT32))
    (leaf,) = leaves_of(schema(*elements))
    assert leaf.max_def == depth + 1 and len(leaf.path) == depth + 1


@pytest.mark.parametrize("elements,match", [
    ((), "no schema"),
    ((el("schema", None),), "num_children"),
    ((el("schema", None, children=-1),), "num_children"),
    ((root(2), el("a", FieldRepetitionType.OPTIONAL, ptype=Type.INT32)), "ends before"),
    ((root(1), el("a", FieldRepetitionType.OPTIONAL, ptype=Type.INT32), el("b", FieldRepetitionType.OPTIONAL, ptype=Type.INT32)), "outside the tree"),
    ((root(1), el("g", FieldRepetitionType.OPTIONAL, children=5), el("a", FieldRepetitionType.OPTIONAL, ptype=Type.INT32)), "claims 5 children"),
    ((root(1), el("a", None, ptype=Type.INT32)), "repetition"),
    ((root(1), el("a", 7, ptype=Type.INT32)), "repetition"),
    ((root(1), el("a", FieldRepetitionType.OPTIONAL, ptype=8)), "physical type"),
    ((root(1), el("a", FieldRepetitionType.OPTIONAL, ptype=-1)), "physical type"),
    ((root(1), el("a", FieldRepetitionType.OPTIONAL, ptype=Type.FIXED_LEN_BYTE_ARRAY)), "type_length"),
    ((root(1), el("a", FieldRepetitionType.OPTIONAL, ptype=Type.FIXED_LEN_BYTE_ARRAY, type_length=0)), "type_length"),
    ((root(1), el("a", FieldRepetitionType.OPTIONAL, ptype=Type.FIXED_LEN_BYTE_ARRAY, type_length=1 << 24)), "type_length"),
])
def test_malformed_schemas(elements, match):
    with pytest.raises(MalformedFileError, match=match):
        leaves_of(schema(*elements))


def test_schema_not_a_list_or_not_structs():
    with pytest.raises(MalformedFileError):
        leaves_of(None)
    with pytest.raises(MalformedFileError):
        leaves_of(TList(T.I32, (1, 2)))


def test_too_deep_schema():
    depth = MAX_SCHEMA_DEPTH + 5
    elements = [root(1)] + [el(f"g{i}", FieldRepetitionType.OPTIONAL, children=1) for i in range(depth)]
    elements.append(el("leaf", FieldRepetitionType.OPTIONAL, ptype=Type.INT32))
    with pytest.raises(MalformedFileError, match="deeper"):
        leaves_of(schema(*elements))


def test_many_leaves_fast():
    n = 20_000
    elements = [root(n)] + [el(f"c{i}", FieldRepetitionType.OPTIONAL, ptype=Type.INT64) for i in range(n)]
    leaves = leaves_of(schema(*elements))
    assert len(leaves) == n and leaves[-1].dotted == f"c{n - 1}"


def test_non_utf8_name_does_not_crash():
    s = schema(root(1), Struct((Field(SchemaElement.TYPE, T.I32, Type.INT32),
                                Field(SchemaElement.REPETITION_TYPE, T.I32, FieldRepetitionType.OPTIONAL),
                                Field(SchemaElement.NAME, T.BINARY, b"\xff\xfe"))))
    (leaf,) = leaves_of(s)
    assert leaf.dotted == "\ufffd\ufffd"
