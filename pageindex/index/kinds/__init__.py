"""Value kinds: one codec per column-order Kind (integers, floats, decimals, byte arrays, booleans)
that every stage uses; this module picks the codec for a column, a literal or a shown bound.
"""
from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa

from pageindex.format.column_order import Kind, Order, is_decimal
from pageindex.format.parquet_thrift import LogicalType, Type
from pageindex.format.schema import Leaf
from pageindex.index.kinds.base import Codec
from pageindex.index.kinds.booleans import BOOLEANS
from pageindex.index.kinds.byte_arrays import BYTE_ARRAYS
from pageindex.index.kinds.decimals import DECIMALS
from pageindex.index.kinds.floats import FLOATS
from pageindex.index.kinds.integers import INTEGERS

CODECS: dict[Kind, Codec] = {
    Kind.SIGNED: INTEGERS,
    Kind.UNSIGNED: INTEGERS,
    Kind.FLOAT: FLOATS,
    Kind.DECIMAL_BYTES: DECIMALS,
    Kind.BYTES: BYTE_ARRAYS,
    Kind.BOOLEAN: BOOLEANS,
}


def codec_for(order: Order) -> Codec:
    """The codec of an indexable order."""
    return CODECS[order.kind]


def comparable(leaf: Leaf, order: Order, raw: bytes) -> Any:
    """A stored bound as a Python value whose ordering is the column order (None: not decodable)."""
    if not order.indexable:
        return None
    try:
        return CODECS[order.kind].key(leaf, order, raw)
    except (IndexError, struct.error, ValueError):
        return None


def literal_for(value: Any, arrow_type: pa.DataType) -> pa.Scalar | None:
    """A where-clause value as a scalar comparable with a column of this (non-dictionary) Arrow
    type, None when it does not fit; may raise Arrow's and Python's conversion errors."""
    for codec in (INTEGERS, FLOATS, DECIMALS, BYTE_ARRAYS, BOOLEANS):
        if codec.holds(arrow_type):
            return codec.literal(value, arrow_type)
    return pa.scalar(value).cast(arrow_type)


def render(leaf: Leaf, raw: bytes | None, limit: int = 40) -> str:
    """A bound shown by its logical type: numbers, decimals, dates, times, text or hex."""
    if raw is None:
        return ""
    try:
        return _shorten(_shown_by(leaf).render(leaf, raw), limit)
    except (ValueError, OverflowError, struct.error, IndexError):
        return "0x" + _shorten(raw.hex(), limit)


def _shown_by(leaf: Leaf) -> Codec:
    """The codec that shows a leaf's bounds: by its annotation, whether or not it is indexable."""
    ptype = leaf.physical_type
    if ptype == Type.BOOLEAN:
        return BOOLEANS
    if ptype in (Type.FLOAT, Type.DOUBLE) or leaf.logical_id == LogicalType.FLOAT16:
        return FLOATS
    if is_decimal(leaf):
        return DECIMALS
    if ptype in (Type.INT32, Type.INT64):
        return INTEGERS
    return BYTE_ARRAYS


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
