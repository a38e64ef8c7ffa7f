"""Row filter: one condition applied to decoded values, the lookup's exact last step; the same
rule decides a partition's single value. Nulls never match, comparisons are IEEE (NaN matches
only !=), IN is the OR of its equalities."""
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
        m = pc.and_(pc.greater_equal(column, literals[0]), pc.less_equal(column, literals[1]))
    elif op == "in":
        m = pc.equal(column, literals[0])
        for lit in literals[1:]:
            m = pc.or_(m, pc.equal(column, lit))
    else:
        m = _COMPARE[op](column, literals[0])
    return pc.fill_null(m, False)


def holds(value: pa.Scalar, op: str, literals: Sequence[pa.Scalar]) -> bool:
    """Whether one value (a partition's) satisfies the condition."""
    return bool(mask(pa.array([value.as_py()], value.type), op, literals)[0].as_py())
