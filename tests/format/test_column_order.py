"""pageindex.format.column_order: the order (and truncatability) of every type, legacy and declared orders."""
from __future__ import annotations

import pytest

from pageindex.format.column_order import Kind, order_for, type_order
from pageindex.format.footer import read_footer
from pageindex.format.parquet_thrift import ConvertedType, FieldRepetitionType, FileMetaData, LogicalType, Type
from pageindex.format.schema import leaves_of
from pageindex.format.thrift import Field, Struct, T
from pageindex.io.storage import open_source
from tests.format.test_schema import el, root, schema
from tests.helpers.corpus import corpus_path

TYPE_ORDER = Struct((Field(1, T.STRUCT, Struct()),))
TOTAL_ORDER = Struct((Field(2, T.STRUCT, Struct()),))


def logical(member: int, value: Struct | None = None) -> Struct:
    return Struct((Field(member, T.STRUCT, Struct() if value is None else value),))


def integer(bits: int, signed: bool) -> Struct:
    return logical(LogicalType.INTEGER, Struct((Field(1, T.BYTE, bits), Field(2, T.TRUE, signed))))


def leaf(ptype: int, **kw):
    (one,) = leaves_of(schema(root(1), el("c", FieldRepetitionType.OPTIONAL, ptype=ptype, **kw)))
    return one


S, U, FL, B, DB, BO = Kind.SIGNED, Kind.UNSIGNED, Kind.FLOAT, Kind.BYTES, Kind.DECIMAL_BYTES, Kind.BOOLEAN

CASES = [
    # (id, ptype, schema kwargs, kind or None, truncatable)
    ("boolean", Type.BOOLEAN, {}, BO, False),
    ("int32", Type.INT32, {}, S, False),
    ("int64", Type.INT64, {}, S, False),
    ("int8_signed", Type.INT32, {"logical": integer(8, True)}, S, False),
    ("uint8_logical", Type.INT32, {"logical": integer(8, False)}, U, False),
    ("uint32_logical", Type.INT32, {"logical": integer(32, False)}, U, False),
    ("uint64_logical", Type.INT64, {"logical": integer(64, False)}, U, False),
    ("integer_without_signed_field", Type.INT32, {"logical": logical(LogicalType.INTEGER, Struct((Field(1, T.BYTE, 8),)))}, S, False),
    # converted-type-only legacy files
    ("uint8_converted", Type.INT32, {"converted": 11}, U, False),
    ("uint16_converted", Type.INT32, {"converted": 12}, U, False),
    ("uint32_converted", Type.INT32, {"converted": 13}, U, False),
    ("uint64_converted", Type.INT64, {"converted": 14}, U, False),
    ("int8_converted", Type.INT32, {"converted": 15}, S, False),
    ("int64_converted", Type.INT64, {"converted": 18}, S, False),
    ("date_converted", Type.INT32, {"converted": 6}, S, False),
    ("time_millis_converted", Type.INT32, {"converted": 7}, S, False),
    ("timestamp_micros_converted", Type.INT64, {"converted": 10}, S, False),
    ("decimal_int32_converted", Type.INT32, {"converted": ConvertedType.DECIMAL, "scale": 2, "precision": 9}, S, False),
    ("decimal_int64_converted", Type.INT64, {"converted": ConvertedType.DECIMAL, "scale": 2, "precision": 18}, S, False),
    ("decimal_flba_converted", Type.FIXED_LEN_BYTE_ARRAY, {"converted": ConvertedType.DECIMAL, "type_length": 9}, DB, False),
    ("decimal_binary_converted", Type.BYTE_ARRAY, {"converted": ConvertedType.DECIMAL}, DB, False),
    ("utf8_converted", Type.BYTE_ARRAY, {"converted": ConvertedType.UTF8}, B, True),
    ("enum_converted", Type.BYTE_ARRAY, {"converted": ConvertedType.ENUM}, B, True),
    ("json_converted", Type.BYTE_ARRAY, {"converted": ConvertedType.JSON}, B, True),
    ("bson_converted", Type.BYTE_ARRAY, {"converted": ConvertedType.BSON}, B, True),
    ("interval_converted", Type.FIXED_LEN_BYTE_ARRAY, {"converted": ConvertedType.INTERVAL, "type_length": 12}, None, False),
    # logical types
    ("date", Type.INT32, {"logical": logical(LogicalType.DATE)}, S, False),
    ("time", Type.INT64, {"logical": logical(LogicalType.TIME)}, S, False),
    ("timestamp", Type.INT64, {"logical": logical(LogicalType.TIMESTAMP)}, S, False),
    ("decimal_int32", Type.INT32, {"logical": logical(LogicalType.DECIMAL)}, S, False),
    ("decimal_flba", Type.FIXED_LEN_BYTE_ARRAY, {"logical": logical(LogicalType.DECIMAL), "type_length": 16}, DB, False),
    ("decimal_binary", Type.BYTE_ARRAY, {"logical": logical(LogicalType.DECIMAL)}, DB, False),
    ("null_type_int32", Type.INT32, {"logical": logical(LogicalType.UNKNOWN)}, S, False),
    ("string_on_int", Type.INT32, {"logical": logical(LogicalType.STRING)}, None, False),
    ("float", Type.FLOAT, {}, FL, False),
    ("double", Type.DOUBLE, {}, FL, False),
    ("float16", Type.FIXED_LEN_BYTE_ARRAY, {"logical": logical(LogicalType.FLOAT16), "type_length": 2}, FL, False),
    ("float16_bad_width", Type.FIXED_LEN_BYTE_ARRAY, {"logical": logical(LogicalType.FLOAT16), "type_length": 4}, None, False),
    ("float16_on_binary", Type.BYTE_ARRAY, {"logical": logical(LogicalType.FLOAT16)}, None, False),
    ("binary", Type.BYTE_ARRAY, {}, B, True),
    ("string", Type.BYTE_ARRAY, {"logical": logical(LogicalType.STRING)}, B, True),
    ("enum", Type.BYTE_ARRAY, {"logical": logical(LogicalType.ENUM)}, B, True),
    ("json", Type.BYTE_ARRAY, {"logical": logical(LogicalType.JSON)}, B, True),
    ("bson", Type.BYTE_ARRAY, {"logical": logical(LogicalType.BSON)}, B, True),
    ("uuid", Type.FIXED_LEN_BYTE_ARRAY, {"logical": logical(LogicalType.UUID), "type_length": 16}, B, False),
    # A prefix of a fixed-length value is no valid value of the type: FLBA bounds never truncate.
    ("flba_plain", Type.FIXED_LEN_BYTE_ARRAY, {"type_length": 7}, B, False),
    ("int96", Type.INT96, {}, None, False),
    ("geometry", Type.BYTE_ARRAY, {"logical": logical(LogicalType.GEOMETRY)}, None, False),
    ("geography", Type.BYTE_ARRAY, {"logical": logical(LogicalType.GEOGRAPHY)}, None, False),
    ("unknown_logical_99", Type.BYTE_ARRAY, {"logical": logical(99)}, None, False),
    ("unknown_logical_2555", Type.INT64, {"logical": logical(2555)}, None, False),
    ("reserved_logical_9", Type.INT32, {"logical": logical(9)}, None, False),
]


@pytest.mark.parametrize("name,ptype,kw,kind,truncatable", CASES, ids=[c[0] for c in CASES])
def test_type_order(name, ptype, kw, kind, truncatable):
    order = type_order(leaf(ptype, **kw))
    assert order.kind is kind
    assert order.indexable == (kind is not None)
    assert order.truncatable is truncatable
    assert not order.total_order
    if kind is None:
        assert order.reason  # always says why
    # With no declared order, and with TYPE_ORDER declared, the result is the same.
    assert order_for(leaf(ptype, **kw), None) == order
    assert order_for(leaf(ptype, **kw), TYPE_ORDER) == order


@pytest.mark.parametrize("ptype,kw", [(Type.FLOAT, {}), (Type.DOUBLE, {}),
                                      (Type.FIXED_LEN_BYTE_ARRAY, {"logical": logical(LogicalType.FLOAT16), "type_length": 2})])
def test_total_order_on_floats(ptype, kw):
    order = order_for(leaf(ptype, **kw), TOTAL_ORDER)
    assert order.kind is Kind.FLOAT and order.total_order and not order.truncatable


@pytest.mark.parametrize("ptype,kw", [(Type.INT32, {}), (Type.INT64, {}), (Type.BYTE_ARRAY, {}), (Type.BOOLEAN, {}),
                                      (Type.INT96, {}),
                                      (Type.FIXED_LEN_BYTE_ARRAY, {"logical": logical(LogicalType.DECIMAL), "type_length": 4})])
def test_total_order_on_non_float_refused(ptype, kw):
    order = order_for(leaf(ptype, **kw), TOTAL_ORDER)
    assert order.kind is None and "IEEE_754_TOTAL_ORDER" in order.reason


@pytest.mark.parametrize("declared", [
    Struct((Field(3, T.STRUCT, Struct()),)),  # a future ColumnOrder member
    Struct(),  # empty union
    Struct((Field(1, T.STRUCT, Struct()), Field(2, T.STRUCT, Struct()))),  # two members
])
def test_unknown_declared_order(declared):
    order = order_for(leaf(Type.INT32), declared)
    assert order.kind is None and order.reason


def test_declared_not_a_struct():
    assert order_for(leaf(Type.INT32), 5).kind is None  # type: ignore[arg-type]


@pytest.mark.parametrize("file,column,kind,total,truncatable", [
    # converted-type-only legacy files from the corpus
    ("parquet-testing/data/nested_structs.rust.parquet", "roll_num.count", U, False, False),  # UINT_64
    ("parquet-testing/data/nested_structs.rust.parquet", "roll_num.min", S, False, False),  # INT_64
    ("parquet-testing/data/concatenated_gzip_members.parquet", "long_col", U, False, False),
    ("parquet-testing/data/datapage_v2.snappy.parquet", "a", B, False, True),  # UTF8
    ("parquet-testing/data/fixed_length_decimal_legacy.parquet", "value", DB, False, False),
    ("parquet-testing/data/byte_array_decimal.parquet", "value", DB, False, False),
    ("parquet-testing/data/int32_decimal.parquet", "value", S, False, False),
    ("parquet-testing/data/unknown-logical-type.parquet", "column with unknown type", None, False, False),
    ("parquet-testing/data/alltypes_plain.parquet", "timestamp_col", None, False, False),  # INT96
    ("parquet-testing/data/geospatial/geospatial.parquet", "geometry", None, False, False),
    ("parquet-testing/data/floating_orders_nan_count.parquet", "float16_ieee754", FL, True, False),
    ("parquet-testing/data/floating_orders_nan_count.parquet", "double_typedef", FL, False, False),
    ("arrow-testing/alltypes-java.parquet", "uint8", U, False, False),
    ("arrow-testing/alltypes-java.parquet", "float16", FL, False, False),
    ("arrow-testing/alltypes-java.parquet", "decimal128", DB, False, False),
])
def test_corpus_orders(file, column, kind, total, truncatable):
    with open_source(str(corpus_path(file))) as s:
        footer = read_footer(s)
    orders = footer.metadata.get(FileMetaData.COLUMN_ORDERS)
    (lf,) = [l for l in footer.leaves if l.dotted == column]
    order = order_for(lf, orders.items[lf.index] if orders else None)
    assert (order.kind, order.total_order, order.truncatable) == (kind, total, truncatable)
