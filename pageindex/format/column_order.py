"""Column order: how a leaf's values compare, per the file's declared ColumnOrder and its types.

It decides whether a ColumnIndex may be written at all, and whether its bounds may be truncated.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from pageindex.format.schema import PT, Leaf
from pageindex.format.thrift import Struct


class Kind(Enum):
    SIGNED = "signed"
    UNSIGNED = "unsigned"
    FLOAT = "float"  # FLOAT, DOUBLE and FLOAT16 (FLBA(2))
    BYTES = "bytes"  # unsigned lexicographic
    DECIMAL_BYTES = "decimal_bytes"  # big-endian two's complement, compared as numbers
    BOOLEAN = "boolean"


TYPE_ORDER_ID = 1
IEEE_754_TOTAL_ORDER_ID = 2


class LT:
    """LogicalType union member ids."""

    STRING, MAP, LIST, ENUM, DECIMAL, DATE, TIME, TIMESTAMP = 1, 2, 3, 4, 5, 6, 7, 8
    INTEGER, UNKNOWN, JSON, BSON, UUID, FLOAT16, VARIANT, GEOMETRY, GEOGRAPHY = (
        10, 11, 12, 13, 14, 15, 16, 17, 18)
    INTEGER_SIGNED = 2


class CT:
    """ConvertedType values that change the order or the truncation."""

    UTF8, ENUM, DECIMAL = 0, 4, 5
    UINT = (11, 12, 13, 14)
    SIGNED = (6, 7, 8, 9, 10, 15, 16, 17, 18)
    JSON, BSON, INTERVAL = 19, 20, 21


_STRINGLIKE_LOGICAL = (LT.STRING, LT.ENUM, LT.JSON, LT.BSON)
_SIGNED_LOGICAL = (LT.DATE, LT.TIME, LT.TIMESTAMP, LT.DECIMAL, LT.UNKNOWN)


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
        if member == IEEE_754_TOTAL_ORDER_ID:
            base = type_order(leaf)
            if base.kind is not Kind.FLOAT:
                return _none("IEEE_754_TOTAL_ORDER declared for a non-float column")
            return Order(Kind.FLOAT, total_order=True)
        if member != TYPE_ORDER_ID:
            return _none(f"column order {member} is not understood")
    return type_order(leaf)


def type_order(leaf: Leaf) -> Order:
    """TYPE_ORDER: the order defined by the physical type and its logical annotation."""
    ptype, lid, ct = leaf.physical_type, leaf.logical_id, leaf.converted_type
    known_logical = lid is None or lid <= LT.GEOGRAPHY and lid != 9
    if not known_logical:
        return _none(f"logical type {lid} is not understood, so its order is unknown")
    if lid in (LT.GEOMETRY, LT.GEOGRAPHY):
        return _none("geospatial columns have no defined sort order")
    if ptype == PT.INT96:
        return _none("INT96 has no defined sort order")
    if ct == CT.INTERVAL and lid is None:
        return _none("INTERVAL has no defined sort order")
    if ptype == PT.BOOLEAN:
        return Order(Kind.BOOLEAN)
    if ptype in (PT.INT32, PT.INT64):
        return _integer_order(leaf)
    if ptype in (PT.FLOAT, PT.DOUBLE):
        return Order(Kind.FLOAT)
    if is_decimal(leaf):
        return Order(Kind.DECIMAL_BYTES)
    if lid == LT.FLOAT16:
        if ptype != PT.FIXED_LEN_BYTE_ARRAY or leaf.type_length != 2:
            return _none("FLOAT16 annotation on a column that is not FIXED_LEN_BYTE_ARRAY(2)")
        return Order(Kind.FLOAT)
    stringlike = lid in _STRINGLIKE_LOGICAL or (
        lid is None and ct in (None, CT.UTF8, CT.ENUM, CT.JSON, CT.BSON)
    )
    # A prefix of a FIXED_LEN_BYTE_ARRAY value has the wrong length, so it is no valid value of
    # the type (and readers such as DataFusion cannot use it); only BYTE_ARRAY bounds truncate.
    return Order(Kind.BYTES, truncatable=stringlike and ptype == PT.BYTE_ARRAY)


def is_decimal(leaf: Leaf) -> bool:
    """Annotated DECIMAL (by LogicalType, or by ConvertedType where there is none)."""
    return leaf.logical_id == LT.DECIMAL or (leaf.logical_id is None and leaf.converted_type == CT.DECIMAL)


def _integer_order(leaf: Leaf) -> Order:
    lid, ct = leaf.logical_id, leaf.converted_type
    if lid == LT.INTEGER:
        signed = leaf.logical_type.fields[0].value.get(LT.INTEGER_SIGNED)
        return Order(Kind.SIGNED if signed is not False else Kind.UNSIGNED)
    if lid is None and ct in CT.UINT:
        return Order(Kind.UNSIGNED)
    if lid is None or lid in _SIGNED_LOGICAL:
        return Order(Kind.SIGNED)
    return _none(f"logical type {lid} on an integer column has no known order")
