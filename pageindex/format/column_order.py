"""Column order: how a leaf's values compare, per the file's declared ColumnOrder and its types.

It decides whether a ColumnIndex may be written at all, and whether its bounds may be truncated.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from pageindex.format.parquet_thrift import ColumnOrder, ConvertedType, IntType, LogicalType, Type
from pageindex.format.schema import Leaf
from pageindex.format.thrift import Struct


class Kind(Enum):
    SIGNED = "signed"
    UNSIGNED = "unsigned"
    FLOAT = "float"  # FLOAT, DOUBLE and FLOAT16 (FLBA(2))
    BYTES = "bytes"  # unsigned lexicographic
    DECIMAL_BYTES = "decimal_bytes"  # big-endian two's complement, compared as numbers
    BOOLEAN = "boolean"


UNSIGNED_CONVERTED = (ConvertedType.UINT_8, ConvertedType.UINT_16, ConvertedType.UINT_32, ConvertedType.UINT_64)
_STRINGLIKE_LOGICAL = (LogicalType.STRING, LogicalType.ENUM, LogicalType.JSON, LogicalType.BSON)
_STRINGLIKE_CONVERTED = (None, ConvertedType.UTF8, ConvertedType.ENUM, ConvertedType.JSON, ConvertedType.BSON)
_SIGNED_LOGICAL = (LogicalType.DATE, LogicalType.TIME, LogicalType.TIMESTAMP, LogicalType.DECIMAL,
                   LogicalType.UNKNOWN)


@dataclass(frozen=True)
class Order:
    """The comparison a ColumnIndex for this leaf must follow, or why there can be none."""

    kind: Kind | None
    total_order: bool = False  # IEEE_754_TOTAL_ORDER declared (floats only)
    truncatable: bool = False  # a prefix of a value is a valid lower bound
    reason: str = ""  # why kind is None

    @property
    def indexable(self) -> bool:
        return self.kind is not None


def _none(reason: str) -> Order:
    return Order(None, reason=reason)


def order_for(leaf: Leaf, declared: Struct | None) -> Order:
    """The order of `leaf` under its declared ColumnOrder (None: the file declares none)."""
    if declared is not None:
        if not isinstance(declared, Struct) or len(declared.fields) != 1:
            return _none("column order is not a single known union member")
        member = declared.fields[0].id
        if member == ColumnOrder.IEEE_754_TOTAL_ORDER:
            base = type_order(leaf)
            if base.kind is not Kind.FLOAT:
                return _none("IEEE_754_TOTAL_ORDER declared for a non-float column")
            return Order(Kind.FLOAT, total_order=True)
        if member != ColumnOrder.TYPE_ORDER:
            return _none(f"column order {member} is not understood")
    return type_order(leaf)


def type_order(leaf: Leaf) -> Order:
    """TYPE_ORDER: the order defined by the physical type and its logical annotation."""
    ptype, lid, ct = leaf.physical_type, leaf.logical_id, leaf.converted_type
    known_logical = lid is None or lid in LogicalType.TYPES
    if not known_logical:
        return _none(f"logical type {lid} is not understood, so its order is unknown")
    if lid in (LogicalType.GEOMETRY, LogicalType.GEOGRAPHY):
        return _none("geospatial columns have no defined sort order")
    if ptype == Type.INT96:
        return _none("INT96 has no defined sort order")
    if ct == ConvertedType.INTERVAL and lid is None:
        return _none("INTERVAL has no defined sort order")
    if ptype == Type.BOOLEAN:
        return Order(Kind.BOOLEAN)
    if ptype in (Type.INT32, Type.INT64):
        return _integer_order(leaf)
    if ptype in (Type.FLOAT, Type.DOUBLE):
        return Order(Kind.FLOAT)
    if is_decimal(leaf):
        return Order(Kind.DECIMAL_BYTES)
    if lid == LogicalType.FLOAT16:
        if ptype != Type.FIXED_LEN_BYTE_ARRAY or leaf.type_length != 2:
            return _none("FLOAT16 annotation on a column that is not FIXED_LEN_BYTE_ARRAY(2)")
        return Order(Kind.FLOAT)
    stringlike = lid in _STRINGLIKE_LOGICAL or (lid is None and ct in _STRINGLIKE_CONVERTED)
    # A prefix of a FIXED_LEN_BYTE_ARRAY value has the wrong length, so it is no valid value of
    # the type (and readers such as DataFusion cannot use it); only BYTE_ARRAY bounds truncate.
    return Order(Kind.BYTES, truncatable=stringlike and ptype == Type.BYTE_ARRAY)


def is_decimal(leaf: Leaf) -> bool:
    """Annotated DECIMAL (by LogicalType, or by ConvertedType where there is none)."""
    return leaf.logical_id == LogicalType.DECIMAL or (leaf.logical_id is None and leaf.converted_type == ConvertedType.DECIMAL)


def _integer_order(leaf: Leaf) -> Order:
    lid, ct = leaf.logical_id, leaf.converted_type
    if lid == LogicalType.INTEGER:
        signed = leaf.logical_type.fields[0].value.get(IntType.IS_SIGNED)
        return Order(Kind.SIGNED if signed is not False else Kind.UNSIGNED)
    if lid is None and ct in UNSIGNED_CONVERTED:
        return Order(Kind.UNSIGNED)
    if lid is None or lid in _SIGNED_LOGICAL:
        return Order(Kind.SIGNED)
    return _none(f"logical type {lid} on an integer column has no known order")
