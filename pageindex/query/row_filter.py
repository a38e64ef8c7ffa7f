"""Row filter: one condition applied to decoded values, the lookup's exact last step; the same
rule decides a partition's single value. Nulls never match; floats compare as Spark and DuckDB
compare them (every NaN equals NaN and is above every number); IN is the OR of its equalities."""
from __future__ import annotations

from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

_COMPARE = {"=": pc.equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal,
            ">": pc.greater, ">=": pc.greater_equal}


def mask(column: pa.Array | pa.ChunkedArray, op: str, literals: Sequence[pa.Scalar]) -> pa.ChunkedArray:
    """Which values satisfy `op` with `literals` (a boolean per value, never null)."""
    if column.type == pa.float16():
        column = column.cast(pa.float32())
    if op == "is_null":
        m = pc.is_null(column)
    elif op == "is_not_null":
        m = pc.is_valid(column)
    elif op == "between":
        m = pc.and_(_compare(column, ">=", literals[0]), _compare(column, "<=", literals[1]))
    elif op == "in":
        m = _compare(column, "=", literals[0])
        for lit in literals[1:]:
            m = pc.or_(m, _compare(column, "=", lit))
    else:
        m = _compare(column, op, literals[0])
    return pc.fill_null(m, False)


def _compare(column: pa.Array | pa.ChunkedArray, op: str, literal: pa.Scalar) -> pa.ChunkedArray:
    """`column op literal`, IEEE 754 but for NaN: IEEE makes every comparison with NaN false
    (but !=), the engines order NaN above every number and equal to itself."""
    m = _COMPARE[op](column, literal)
    if not pa.types.is_floating(column.type) or not literal.is_valid:
        return m
    nan = pc.is_nan(column)
    if literal.as_py() != literal.as_py():  # NaN: only NaN is equal, everything else below
        return {"=": nan, "!=": pc.invert(nan), "<": pc.invert(nan), "<=": pc.is_valid(column),
                ">": m, ">=": nan}[op]
    return pc.or_(m, nan) if op in (">", ">=") else m


def holds(value: pa.Scalar, op: str, literals: Sequence[pa.Scalar]) -> bool:
    """Whether one value (a partition's) satisfies the condition."""
    return bool(mask(pa.array([value.as_py()], value.type), op, literals)[0].as_py())
