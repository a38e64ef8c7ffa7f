"""Decimal codec: DECIMAL on BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY, big-endian two's complement
compared as numbers; also the scale and the text of every decimal, INT32/INT64 ones included.
"""
from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa

from pageindex.format.column_order import Order
from pageindex.format.parquet_thrift import DecimalType, Type
from pageindex.format.schema import Leaf
from pageindex.index.kinds.base import (
    Bounds,
    Codec,
    fixed_width,
    is_number,
    logical_params,
    number_in_text,
    spread_bounds,
)
from pageindex.index.kinds.byte_arrays import grouped_min_max


def scale(leaf: Leaf) -> int:
    logical = logical_params(leaf)
    return (logical.get(DecimalType.SCALE) if logical is not None else leaf.scale) or 0


def scaled_key(leaf: Leaf, value: Any) -> Fraction:
    """A number as the unscaled integer it would be stored as (a fraction between two)."""
    return Fraction(Decimal(str(value))) * 10 ** scale(leaf)


class DecimalCodec(Codec):
    def page_bounds(self, leaf: Leaf, order: Order, values: pa.ChunkedArray, defined: np.ndarray,
                    truncate_length: int) -> Bounds:
        """Sign-extend every value to one width and flip its sign bit, so that unsigned byte
        order equals numeric order; the bounds are the shortest (BYTE_ARRAY) or the fixed width."""
        if leaf.physical_type == Type.FIXED_LEN_BYTE_ARRAY:
            width = leaf.type_length
            keys = fixed_width(values, width).reshape(-1, width).copy()
        else:
            keys, width = _sign_extend(values.combine_chunks())
        keys[:, 0] ^= 0x80
        key_array = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(keys),
                                                         [None, pa.py_buffer(keys.tobytes())])
        lo, hi, pages = grouped_min_max(key_array, defined)
        lo_i = [_signed_int(v) for v in lo]
        hi_i = [_signed_int(v) for v in hi]
        if leaf.physical_type == Type.FIXED_LEN_BYTE_ARRAY:
            encode = lambda v: v.to_bytes(width, "big", signed=True)  # noqa: E731
        else:
            encode = lambda v: v.to_bytes(v.bit_length() // 8 + 1, "big", signed=True)  # noqa: E731
        return spread_bounds(len(defined), pages, [encode(v) for v in lo_i], [encode(v) for v in hi_i],
                             lo_i, hi_i)

    def key(self, leaf: Leaf, order: Order, raw: bytes) -> Any:
        return int.from_bytes(raw, "big", signed=True) if raw else 0

    def holds(self, arrow_type: pa.DataType) -> bool:
        return pa.types.is_decimal(arrow_type)

    def literal(self, value: Any, arrow_type: pa.DataType) -> pa.Scalar | None:
        value = number_in_text(value)
        if not is_number(value):
            return None
        return pa.scalar(Decimal(str(value)))

    def literal_keys(self, leaf: Leaf, order: Order, literal: pa.Scalar) -> tuple[Any, Any]:
        key = scaled_key(leaf, literal.as_py())
        return key, key

    def render(self, leaf: Leaf, raw: bytes) -> str:
        if leaf.physical_type in (Type.INT32, Type.INT64):
            unscaled = int.from_bytes(raw, "little", signed=True)
        else:
            unscaled = int.from_bytes(raw, "big", signed=True)
        return str(Decimal(unscaled).scaleb(-scale(leaf)))


def _signed_int(flipped: bytes) -> int:
    return int.from_bytes(bytes([flipped[0] ^ 0x80]) + flipped[1:], "big", signed=True)


def _sign_extend(values: pa.Array) -> tuple[np.ndarray, int]:
    """BYTE_ARRAY values right-aligned into a (n, width) uint8 matrix, sign-extended."""
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int32)[values.offset : values.offset + len(values) + 1]
    data = np.frombuffer(values.buffers()[2], dtype=np.uint8) if values.buffers()[2] else np.zeros(0, np.uint8)
    lengths = np.diff(offsets).astype(np.int64)
    width = max(int(lengths.max()) if len(lengths) else 1, 1)
    first = data[offsets[:-1][lengths > 0]] if len(data) else np.zeros(0, np.uint8)
    negative = np.zeros(len(lengths), dtype=bool)
    negative[lengths > 0] = first >= 0x80
    out = np.where(negative[:, None], np.uint8(0xFF), np.uint8(0)).astype(np.uint8)
    out = np.broadcast_to(out, (len(lengths), width)).copy()
    rows = np.repeat(np.arange(len(lengths)), lengths)
    within = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    out[rows, width - lengths[rows] + within] = data[offsets[0] : offsets[-1]]
    return out, width


DECIMALS = DecimalCodec()
