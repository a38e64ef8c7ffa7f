"""Boolean codec: BOOLEAN values, false before true; a bound is one byte, 0 or 1.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from pageindex.format.column_order import Order
from pageindex.format.schema import Leaf
from pageindex.index.kinds.base import Bounds, Codec, numeric_bounds, page_min_max


class BooleanCodec(Codec):
    def page_bounds(self, leaf: Leaf, order: Order, values: pa.ChunkedArray, defined: np.ndarray,
                    truncate_length: int) -> Bounds:
        flags = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.uint8)
        return numeric_bounds(len(defined), *page_min_max(flags, defined))

    def key(self, leaf: Leaf, order: Order, raw: bytes) -> Any:
        return raw[0] != 0

    def legacy_bounds(self, order: Order) -> bool:
        return True

    def holds(self, arrow_type: pa.DataType) -> bool:
        return pa.types.is_boolean(arrow_type)

    def literal(self, value: Any, arrow_type: pa.DataType) -> pa.Scalar | None:
        return pa.scalar(value, arrow_type) if isinstance(value, bool) else None

    def literal_keys(self, leaf: Leaf, order: Order, literal: pa.Scalar) -> tuple[Any, Any]:
        value = bool(literal.as_py())
        return value, value

    def render(self, leaf: Leaf, raw: bytes) -> str:
        return "true" if raw[0] else "false"


BOOLEANS = BooleanCodec()
