"""Bound values: decode a stored min/max into a comparable key, or into text by logical type.

verify compares keys under the column order; inspect shows the text.
"""
from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal
from typing import Any

import numpy as np

from pageindex.format.column_order import UNSIGNED_CONVERTED, Kind, Order
from pageindex.format.parquet_thrift import (
    ConvertedType,
    DecimalType,
    IntType,
    LogicalType,
    TimestampType,
    TimeUnit,
    Type,
)
from pageindex.format.schema import Leaf

_FLOAT_FORMATS = {Type.FLOAT: ("<f", "<i", 32), Type.DOUBLE: ("<d", "<q", 64)}


def _float16(raw: bytes) -> float:
    return float(np.frombuffer(raw, dtype="<f2")[0])


def comparable(leaf: Leaf, order: Order, raw: bytes) -> Any:
    """A Python value whose ordering is the column order (None: not decodable)."""
    kind, ptype = order.kind, leaf.physical_type
    try:
        if kind is Kind.BOOLEAN:
            return raw[0] != 0
        if kind in (Kind.SIGNED, Kind.UNSIGNED):
            width = 4 if ptype == Type.INT32 else 8
            if len(raw) != width:
                return None
            return int.from_bytes(raw, "little", signed=kind is Kind.SIGNED)
        if kind is Kind.FLOAT:
            return _float_key(ptype, raw, order.total_order)
        if kind is Kind.DECIMAL_BYTES:
            return int.from_bytes(raw, "big", signed=True) if raw else 0
        if kind is Kind.BYTES:
            return raw
    except (IndexError, struct.error, ValueError):
        return None
    return None


def _float_key(ptype: int, raw: bytes, total_order: bool) -> Any:
    if ptype == Type.FIXED_LEN_BYTE_ARRAY:
        if len(raw) != 2:
            return None
        value, bits, signed = _float16(raw), 16, int.from_bytes(raw, "little", signed=True)
    else:
        fmt, ifmt, bits = _FLOAT_FORMATS[ptype]
        if len(raw) != bits // 8:
            return None
        value, signed = struct.unpack(fmt, raw)[0], struct.unpack(ifmt, raw)[0]
    if not total_order:
        return value
    return signed ^ ((1 << (bits - 1)) - 1) if signed < 0 else signed


def render(leaf: Leaf, raw: bytes, limit: int = 40) -> str:
    """A bound shown by its logical type: numbers, decimals, dates, times, text or hex."""
    if raw is None:
        return ""
    try:
        return _shorten(_render(leaf, raw), limit)
    except (ValueError, OverflowError, struct.error, IndexError):
        return "0x" + _shorten(raw.hex(), limit)


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _render(leaf: Leaf, raw: bytes) -> str:
    ptype, lid, ct = leaf.physical_type, leaf.logical_id, leaf.converted_type
    logical = leaf.logical_type.fields[0].value if leaf.logical_type and leaf.logical_type.fields else None
    if ptype == Type.BOOLEAN:
        return "true" if raw[0] else "false"
    if ptype in (Type.FLOAT, Type.DOUBLE):
        return repr(struct.unpack(_FLOAT_FORMATS[ptype][0], raw)[0])
    if lid == LogicalType.FLOAT16:
        return repr(_float16(raw))
    if lid == LogicalType.DECIMAL or (lid is None and ct == ConvertedType.DECIMAL):
        scale = (logical.get(DecimalType.SCALE) if logical is not None else leaf.scale) or 0
        unscaled = (int.from_bytes(raw, "little", signed=True) if ptype in (Type.INT32, Type.INT64)
                    else int.from_bytes(raw, "big", signed=True))
        return str(Decimal(unscaled).scaleb(-scale))
    if ptype in (Type.INT32, Type.INT64):
        return _render_int(leaf, raw, lid, ct, logical)
    if lid == LogicalType.UUID and len(raw) == 16:
        h = raw.hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    if lid in (LogicalType.STRING, LogicalType.ENUM, LogicalType.JSON) or ct in (
            ConvertedType.UTF8, ConvertedType.ENUM, ConvertedType.JSON) or (
            lid is None and ct is None and ptype == Type.BYTE_ARRAY):
        try:
            return repr(raw.decode("utf-8"))
        except UnicodeDecodeError:
            pass
    return "0x" + raw.hex()


_EPOCH = dt.datetime(1970, 1, 1)
_UNIT_SCALE = {TimeUnit.MILLIS: 1_000, TimeUnit.MICROS: 1_000_000, TimeUnit.NANOS: 1_000_000_000}


def _unit(logical: Any) -> int:
    unit = logical.get(TimestampType.UNIT) if logical is not None else None
    return unit.fields[0].id if unit is not None and unit.fields else TimeUnit.MILLIS


def _render_int(leaf: Leaf, raw: bytes, lid: int | None, ct: int | None, logical: Any) -> str:
    unsigned = ((lid == LogicalType.INTEGER and logical.get(IntType.IS_SIGNED) is False)
                or (lid is None and ct in UNSIGNED_CONVERTED))
    value = int.from_bytes(raw, "little", signed=not unsigned)
    if lid == LogicalType.DATE or ct == ConvertedType.DATE:
        return (dt.date(1970, 1, 1) + dt.timedelta(days=value)).isoformat()
    if lid == LogicalType.TIMESTAMP or ct in (ConvertedType.TIMESTAMP_MILLIS, ConvertedType.TIMESTAMP_MICROS):
        per_second = _UNIT_SCALE[_unit(logical)] if lid == LogicalType.TIMESTAMP else (
            1_000 if ct == ConvertedType.TIMESTAMP_MILLIS else 1_000_000)
        seconds, frac = divmod(value, per_second)
        stamp = _EPOCH + dt.timedelta(seconds=seconds)
        digits = len(str(per_second)) - 1
        return f"{stamp.isoformat()}.{frac:0{digits}d}"
    if lid == LogicalType.TIME or ct in (ConvertedType.TIME_MILLIS, ConvertedType.TIME_MICROS):
        per_second = _UNIT_SCALE[_unit(logical)] if lid == LogicalType.TIME else (
            1_000 if ct == ConvertedType.TIME_MILLIS else 1_000_000)
        seconds, frac = divmod(value, per_second)
        digits = len(str(per_second)) - 1
        return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{frac:0{digits}d}"
    return str(value)
