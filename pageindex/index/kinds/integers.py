"""Integer codec: INT32/INT64 values, signed or unsigned, with the dates, times, timestamps and
decimals annotated on them; bounds are the little-endian integers.
"""
from __future__ import annotations

import datetime as dt
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa

from pageindex.format.column_order import Kind, Order, is_decimal, type_order
from pageindex.format.parquet_thrift import ConvertedType, LogicalType, TimestampType, TimeUnit, Type
from pageindex.format.schema import Leaf
from pageindex.index.kinds.base import (
    Bounds,
    Codec,
    NumericText,
    fixed_width,
    is_number,
    logical_params,
    number_in_text,
    numeric_bounds,
    page_min_max,
    pair_min_max,
)
from pageindex.index.kinds.decimals import scaled_key

_PER_SECOND = {"ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_TIME_UNITS = {TimeUnit.MILLIS: "ms", TimeUnit.MICROS: "us", TimeUnit.NANOS: "ns"}
_CONVERTED_UNITS = {ConvertedType.TIME_MILLIS: "ms", ConvertedType.TIME_MICROS: "us",
                    ConvertedType.TIMESTAMP_MILLIS: "ms", ConvertedType.TIMESTAMP_MICROS: "us"}
_CONVERTED_TIMESTAMPS = (ConvertedType.TIMESTAMP_MILLIS, ConvertedType.TIMESTAMP_MICROS)
_CONVERTED_TIMES = (ConvertedType.TIME_MILLIS, ConvertedType.TIME_MICROS)
_EPOCH = dt.datetime(1970, 1, 1)


def _width(leaf: Leaf) -> int:
    return 4 if leaf.physical_type == Type.INT32 else 8


def time_unit(leaf: Leaf) -> str:
    """The unit of a TIME or TIMESTAMP leaf: its LogicalType's, else its ConvertedType's."""
    logical = logical_params(leaf)
    unit = logical.get(TimestampType.UNIT) if logical is not None and leaf.logical_id in (LogicalType.TIME, LogicalType.TIMESTAMP) else None
    if unit is not None and unit.fields:
        if unit.fields[0].id not in _TIME_UNITS:
            raise ValueError(f"time unit {unit.fields[0].id} is not understood")
        return _TIME_UNITS[unit.fields[0].id]
    return _CONVERTED_UNITS.get(leaf.converted_type, "ms")


class IntegerCodec(Codec):
    def page_bounds(self, leaf: Leaf, order: Order, values: pa.ChunkedArray, defined: np.ndarray,
                    truncate_length: int) -> Bounds:
        width = _width(leaf)
        dtype = f"<{'i' if order.kind is Kind.SIGNED else 'u'}{width}"
        return numeric_bounds(len(defined), *page_min_max(fixed_width(values, width).view(dtype), defined))

    def pair_bounds(self, leaf: Leaf, order: Order, pairs: np.ndarray, counts: np.ndarray,
                    truncate_length: int) -> Bounds:
        dtype = f"<{'i' if order.kind is Kind.SIGNED else 'u'}{_width(leaf)}"
        return numeric_bounds(len(counts), *pair_min_max(pairs.view(dtype), counts))

    def key(self, leaf: Leaf, order: Order, raw: bytes) -> Any:
        if len(raw) != _width(leaf):
            return None
        return int.from_bytes(raw, "little", signed=order.kind is Kind.SIGNED)

    def legacy_bounds(self, order: Order) -> bool:
        return order.kind is Kind.SIGNED

    def holds(self, arrow_type: pa.DataType) -> bool:
        return pa.types.is_integer(arrow_type) or pa.types.is_temporal(arrow_type)

    def literal(self, value: Any, arrow_type: pa.DataType) -> pa.Scalar | None:
        if pa.types.is_temporal(arrow_type):
            if is_number(value) or isinstance(value, bool):
                return None
            return _temporal_literal(value, arrow_type)
        value = number_in_text(value)
        if not is_number(value):
            return None
        number = Decimal(value) if isinstance(value, (NumericText, float)) else value
        if isinstance(number, Decimal) and number != number.to_integral_value():
            return pa.scalar(float(number))  # compares as a number, matches no integer exactly
        number = int(number)
        try:
            return pa.scalar(number, arrow_type)
        except (pa.ArrowInvalid, OverflowError):
            # Outside the column's type (int8 < 1000): compare in a wider integer type.
            return pa.scalar(number, pa.uint64() if number > 0 else pa.int64())

    def literal_keys(self, leaf: Leaf, order: Order, literal: pa.Scalar) -> tuple[Any, Any]:
        if pa.types.is_temporal(literal.type):
            key = _temporal_key(leaf, literal)
        elif is_decimal(leaf):
            key = scaled_key(leaf, literal.as_py())
        else:
            value = literal.as_py()
            if not is_number(value):
                raise ValueError(f"cannot compare {value!r} with the column's bounds")
            key = Fraction(value) if isinstance(value, Decimal) else value
        return key, key

    def render(self, leaf: Leaf, raw: bytes) -> str:
        value = int.from_bytes(raw, "little", signed=type_order(leaf).kind is not Kind.UNSIGNED)
        lid, ct = leaf.logical_id, leaf.converted_type
        if lid == LogicalType.DATE or ct == ConvertedType.DATE:
            return (dt.date(1970, 1, 1) + dt.timedelta(days=value)).isoformat()
        if lid == LogicalType.TIMESTAMP or ct in _CONVERTED_TIMESTAMPS:
            seconds, frac, digits = _split_seconds(leaf, value)
            return f"{(_EPOCH + dt.timedelta(seconds=seconds)).isoformat()}.{frac:0{digits}d}"
        if lid == LogicalType.TIME or ct in _CONVERTED_TIMES:
            seconds, frac, digits = _split_seconds(leaf, value)
            return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{frac:0{digits}d}"
        return str(value)


def _split_seconds(leaf: Leaf, value: int) -> tuple[int, int, int]:
    """Whole seconds, the fraction in the leaf's unit, and that unit's digits."""
    per_second = _PER_SECOND[time_unit(leaf)]
    seconds, frac = divmod(value, per_second)
    return seconds, frac, len(str(per_second)) - 1


def _temporal_literal(value: Any, arrow_type: pa.DataType) -> pa.Scalar:
    """Text as an ISO date, time or timestamp. For a UTC-adjusted timestamp column, text without
    a zone offset is a UTC time, as Spark reads it in a UTC session; an offset is honoured."""
    if not (pa.types.is_timestamp(arrow_type) and arrow_type.tz and isinstance(value, str)):
        return pa.scalar(value).cast(arrow_type)
    try:
        wall = pa.scalar(value).cast(pa.timestamp(arrow_type.unit))
    except pa.ArrowInvalid:  # the text carries its zone offset
        return pa.scalar(value).cast(arrow_type)
    return pa.scalar(wall.value, arrow_type)


def _temporal_key(leaf: Leaf, literal: pa.Scalar) -> int:
    """A date, time or timestamp literal as the stored integer: days, or the leaf's time unit."""
    if pa.types.is_date(literal.type):
        return literal.cast(pa.date32()).cast(pa.int32()).as_py()
    unit = time_unit(leaf)
    if pa.types.is_timestamp(literal.type):
        target = pa.timestamp(unit, literal.type.tz)
    else:
        target = pa.time32(unit) if unit in ("s", "ms") else pa.time64(unit)
    return literal.cast(target, safe=False).cast(pa.int64()).as_py()


INTEGERS = IntegerCodec()
