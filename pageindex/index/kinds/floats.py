"""Float codec: FLOAT, DOUBLE and FLOAT16 (FIXED_LEN_BYTE_ARRAY(2)) under TYPE_ORDER (numeric,
no NaN) or IEEE_754_TOTAL_ORDER (the sign-magnitude bits as a signed integer).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa

from pageindex.format.column_order import Order
from pageindex.format.parquet_thrift import Type
from pageindex.format.schema import Leaf
from pageindex.index.fallback import Fallback
from pageindex.index.kinds.base import (
    Bounds,
    Codec,
    NumericText,
    Refusal,
    fixed_width,
    is_number,
    is_text,
    number_in_text,
    numeric_bounds,
    page_min_max,
    pair_min_max,
    segments,
    split_bytes,
    spread_bounds,
)


@dataclass(frozen=True)
class FloatFormat:
    bits: int
    floats: str  # numpy dtype of the values
    ints: str  # numpy dtype of their bit patterns
    packed: str  # struct format of one value


FORMATS = {
    Type.FLOAT: FloatFormat(32, "<f4", "<i4", "<f"),
    Type.DOUBLE: FloatFormat(64, "<f8", "<i8", "<d"),
    Type.FIXED_LEN_BYTE_ARRAY: FloatFormat(16, "<f2", "<i2", "<e"),
}


# Text for the floats no number spells, as Spark and DuckDB cast it to DOUBLE (any case).
_NAN_REFUSAL = "chunk holds NaN: bounds under TYPE_ORDER would hide those rows"
_SPECIAL = {"nan": float("nan"), **{sign + name: float(sign + "inf") for sign in ("", "+", "-")
                                    for name in ("inf", "infinity")}}


def total_order_key(bits: Any, width: int) -> Any:
    """IEEE 754 totalOrder as a signed integer: the magnitude bits of negative numbers flipped.
    Its own inverse; works on Python ints and on numpy integer arrays alike."""
    return bits ^ ((bits < 0) * ((1 << (width - 1)) - 1))


class FloatCodec(Codec):
    header_refusal = Fallback.FLOAT
    nan_values = True

    def page_bounds(self, leaf: Leaf, order: Order, values: pa.ChunkedArray, defined: np.ndarray,
                    truncate_length: int) -> Bounds | Refusal:
        fmt = FORMATS[leaf.physical_type]
        raw = fixed_width(values, fmt.bits // 8)
        floats = raw.view(fmt.floats)
        nan = np.isnan(floats)
        if order.total_order:
            return _total_order_bounds(fmt, raw.view(fmt.ints).astype(np.int64), nan, defined)
        if nan.any():
            return Refusal(_NAN_REFUSAL)
        return _type_order_bounds(floats.dtype, len(defined), *page_min_max(floats, defined))

    def pair_bounds(self, leaf: Leaf, order: Order, pairs: np.ndarray, counts: np.ndarray,
                    truncate_length: int) -> Bounds | Refusal:
        if order.total_order or leaf.physical_type not in (Type.FLOAT, Type.DOUBLE):
            return super().pair_bounds(leaf, order, pairs, counts, truncate_length)
        floats = pairs.view(FORMATS[leaf.physical_type].floats)
        if np.isnan(floats).any():
            return Refusal(_NAN_REFUSAL)
        return _type_order_bounds(floats.dtype, len(counts), *pair_min_max(floats, counts))

    def key(self, leaf: Leaf, order: Order, raw: bytes) -> Any:
        fmt = FORMATS.get(leaf.physical_type)
        if fmt is None or len(raw) != fmt.bits // 8:
            return None
        if order.total_order:
            return total_order_key(int.from_bytes(raw, "little", signed=True), fmt.bits)
        return struct.unpack(fmt.packed, raw)[0]

    def holds(self, arrow_type: pa.DataType) -> bool:
        return pa.types.is_floating(arrow_type)

    def literal(self, value: Any, arrow_type: pa.DataType) -> pa.Scalar | None:
        value = number_in_text(value)
        if is_text(value):
            value = _SPECIAL.get(value.strip().lower(), value)
        if not is_number(value):
            return None
        # float16 is compared as float32 (pyarrow has no float16 kernels)
        return pa.scalar(float(Decimal(value) if isinstance(value, NumericText) else value),
                         pa.float32() if arrow_type == pa.float16() else arrow_type)

    def literal_keys(self, leaf: Leaf, order: Order, literal: pa.Scalar) -> tuple[Any, Any]:
        value = float(literal.as_py())
        if not order.total_order:
            return value, value
        fmt = FORMATS[leaf.physical_type]
        # Zero stands for both signed zeros, which totalOrder tells apart.
        low, high = (-0.0, 0.0) if value == 0 else (value, value)
        return tuple(self.key(leaf, order, np.array([v], fmt.floats).tobytes()) for v in (low, high))

    def render(self, leaf: Leaf, raw: bytes) -> str:
        if leaf.physical_type in (Type.FLOAT, Type.DOUBLE):
            return repr(struct.unpack(FORMATS[leaf.physical_type].packed, raw)[0])
        return repr(float(np.frombuffer(raw, FORMATS[Type.FIXED_LEN_BYTE_ARRAY].floats)[0]))


def _type_order_bounds(dtype: np.dtype, n: int, lo: np.ndarray, hi: np.ndarray, pages: np.ndarray) -> Bounds:
    """TYPE_ORDER (the chunk holds no NaN): the non-empty pages' numeric min/max, with zero bounds
    written as -0.0 (min) and +0.0 (max) so either sign of zero in the data stays inside them."""
    lo = np.where(lo == 0, np.array(-0.0, dtype=dtype), lo).astype(dtype)
    hi = np.where(hi == 0, np.array(0.0, dtype=dtype), hi).astype(dtype)
    return numeric_bounds(n, lo, hi, pages)


def _total_order_bounds(fmt: FloatFormat, ints: np.ndarray, nan: np.ndarray, defined: np.ndarray) -> Bounds:
    key = total_order_key(ints, fmt.bits)
    n = len(defined)
    starts, pages = segments(defined)
    ends = np.append(starts[1:], len(key)) if len(starts) else starts
    cum_nan = np.concatenate(([0], np.cumsum(nan)))
    bounds_all = np.concatenate(([0], np.cumsum(defined)))
    nan_counts = tuple(int(x) for x in cum_nan[bounds_all[1:]] - cum_nan[bounds_all[:-1]])
    # Pages with numbers bound the numbers only; all-NaN pages bound their NaNs.
    masked = np.where(nan, np.iinfo(np.int64).max, key)
    lo_key = np.minimum.reduceat(masked, starts) if len(starts) else masked[:0]
    masked = np.where(nan, np.iinfo(np.int64).min, key)
    hi_key = np.maximum.reduceat(masked, starts) if len(starts) else masked[:0]
    for i, (s, e) in enumerate(zip(starts, ends)):
        if lo_key[i] == np.iinfo(np.int64).max:
            lo_key[i] = key[s:e].min()
            hi_key[i] = key[s:e].max()
    lo_b = split_bytes(total_order_key(lo_key, fmt.bits).astype(fmt.ints))
    hi_b = split_bytes(total_order_key(hi_key, fmt.bits).astype(fmt.ints))
    return spread_bounds(n, pages, lo_b, hi_b, lo_key.tolist(), hi_key.tolist(), nan_counts)


FLOATS = FloatCodec()
