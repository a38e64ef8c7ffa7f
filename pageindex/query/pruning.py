"""Pruning for lookup: one condition planned against a file's leaf, then which row groups (by
their Statistics) and which pages (by the ColumnIndex) may hold rows that satisfy it.

Floats are compared as Spark and DuckDB compare them: every NaN equals NaN and lies above every
number, infinity included. Bounds leave NaN out, so where NaN satisfies the condition
(!=, >, >= a number) a page is skipped only when its index proves it holds no NaN.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from decimal import InvalidOperation, localcontext
from typing import Any

import pyarrow as pa

from pageindex.format.column_order import Order, order_for
from pageindex.format.footer import ChunkMeta, Footer
from pageindex.format.parquet_thrift import BoundaryOrder, ColumnChunk, ColumnMetaData, FileMetaData, RowGroup, Statistics
from pageindex.format.schema import Leaf
from pageindex.format.thrift import Struct
from pageindex.index.kinds import codec_for, comparable, literal_for
from pageindex.index.marker import MARKER_KEY
from pageindex.index.reader import ColumnIndexView, OffsetIndexView
from pageindex.query.bloom_probe import PROBED_OPS, probe_values
from pageindex.query.file_fields import Field
from pageindex.query.predicate import Condition, PredicateError
from pageindex.query.ranges import Ranges, merge


def usable(ci: ColumnIndexView, oi: OffsetIndexView, leaf: Leaf) -> bool:
    """Whether a ColumnIndex (from any writer) is self-consistent enough to prune with. Some
    writers marked pages null with null count -1 on required columns: such an index is ignored."""
    if len(ci) != len(oi.pages) or len(ci.min_values) != len(ci) or len(ci.max_values) != len(ci):
        return False
    if ci.null_counts is not None and (len(ci.null_counts) != len(ci) or min(ci.null_counts, default=0) < 0):
        return False
    if any(ci.null_pages) and leaf.max_def == 0:
        return False
    return ci.null_counts is None or all(n > 0 for n, null in zip(ci.null_counts, ci.null_pages) if null)


@dataclass(frozen=True)
class Plan:
    cond: Condition
    field: Field
    leaf: Leaf
    order: Order
    literals: tuple[pa.Scalar, ...]
    keys: tuple[Any, ...] | None  # comparable keys of the literals, None: cannot prune
    probes: tuple[Any, ...] | None = None  # = and IN: the literals' plain values for bloom filters
    nan_matches: bool = False  # a float column, and NaN satisfies the condition
    # Under TYPE_ORDER in a file pageindex indexed, a float chunk with a ColumnIndex holds no NaN
    # (a chunk with NaN gets none: FORMAT-RULES R7). Other writers' bounds just leave NaN out.
    index_proves_no_nan: bool = False

    def chunk_may_match(self, footer: Footer, chunk: ChunkMeta) -> bool:
        """Row-group pruning by the chunk's Statistics (min/max, null count) when trustworthy."""
        stats = _chunk_statistics(footer, chunk)
        if stats is None:
            return True
        nulls = stats.get(Statistics.NULL_COUNT)
        rows = footer.row_group_rows[chunk.row_group]
        op = self.cond.op
        if op == "is_null":
            return not (isinstance(nulls, int) and nulls == 0)
        if op == "is_not_null":
            return not (isinstance(nulls, int) and nulls >= rows and self.leaf.max_rep == 0)
        if self.keys is None or (self.nan_matches and not (self.index_proves_no_nan and chunk.has_column_index)):
            return True  # Statistics leave NaN out (and have no NaN count): they cannot rule it out
        raw_lo, raw_hi = stats.get(Statistics.MIN_VALUE), stats.get(Statistics.MAX_VALUE)
        # The deprecated min/max are signed: only valid where that is the order.
        if (raw_lo is None or raw_hi is None) and codec_for(self.order).legacy_bounds(self.order):
            raw_lo, raw_hi = stats.get(Statistics.MIN), stats.get(Statistics.MAX)
        if not isinstance(raw_lo, bytes) or not isinstance(raw_hi, bytes):
            return True
        lo, hi = comparable(self.leaf, self.order, raw_lo), comparable(self.leaf, self.order, raw_hi)
        if lo is None or hi is None or lo != lo or hi != hi:
            return True
        return _may_match(self, lo, hi)

    def page_ranges(self, ci: ColumnIndexView, oi: OffsetIndexView, rows: int) -> Ranges:
        pages = matching_pages(self, ci)
        starts = [p.first_row_index for p in oi.pages] + [rows]
        return merge([(starts[i], starts[i + 1]) for i in pages if starts[i] < starts[i + 1]])


def plan_condition(cond: Condition, fields: dict[str, Field], footer: Footer) -> Plan:
    f, leaf = _filtered_leaf(cond.column, fields)
    order = order_for(leaf, footer.declared_order(leaf.index))
    literals = tuple(arrow_literal(v, _leaf_type(f, leaf), cond.column) for v in cond.values)
    keys = None
    if order.indexable:
        try:
            keys = tuple(codec_for(order).literal_keys(leaf, order, lit) for lit in literals)
        except (ValueError, TypeError, OverflowError, InvalidOperation, pa.ArrowException):
            keys = None
    nan_literal = any(lit.is_valid and pa.types.is_floating(lit.type) and lit.as_py() != lit.as_py()
                      for lit in literals)
    if nan_literal:
        keys = None  # NaN has no place among the bounds: such a condition prunes by nulls only
    probes = probe_values(leaf, literals, keys) if cond.op in PROBED_OPS else None
    floats = order.indexable and codec_for(order).nan_values
    nan_matches = floats and not nan_literal and cond.op in _NAN_ABOVE_NUMBERS
    ours = footer.key_value(MARKER_KEY) is not None and not order.total_order
    return Plan(cond, f, leaf, order, literals, keys, probes, nan_matches, floats and ours)


# The conditions with a number that NaN satisfies, NaN being above every number and unequal to it.
_NAN_ABOVE_NUMBERS = ("!=", ">", ">=")


def _filtered_leaf(column: str, fields: dict[str, Field]) -> tuple[Field, Leaf]:
    """The leaf a condition filters: a primitive column by name, or a leaf inside structs by its
    dotted path (point.x); leaves below a list or map have no one value per row and are refused."""
    top = fields.get(column)
    if top is not None and len(top.leaves) == 1 and len(top.leaves[0].path) == 1 and top.leaves[0].max_rep == 0:
        return top, top.leaves[0]
    for f in fields.values():
        for leaf in f.leaves:
            if ".".join(leaf.path) == column and leaf.max_rep == 0:
                return f, leaf
    leaves = [".".join(leaf.path) for f in fields.values() for leaf in f.leaves if leaf.max_rep == 0]
    what = f"column {column!r} is nested or repeated" if top is not None else f"no column {column!r}"
    raise PredicateError(f"{what} to filter on; filterable columns and leaves: {', '.join(leaves)}")


def _leaf_type(f: Field, leaf: Leaf) -> pa.DataType:
    """The Arrow type of a leaf of a field (one without repetition: only structs above it)."""
    typ = f.arrow_type
    for name in leaf.path[1:]:
        typ = typ.field(name).type
    return typ


def arrow_literal(value: Any, typ: pa.DataType, column: str) -> pa.Scalar:
    """The literal as a scalar comparable with the column, or a PredicateError when its type
    does not fit the column (a number for a string column, text for a boolean, ...)."""
    base = typ.value_type if pa.types.is_dictionary(typ) else typ
    try:
        with localcontext() as ctx:
            ctx.prec = 200  # decimal literals of up to 76 digits stay exact
            scalar = literal_for(value, base)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError, TypeError,
            OverflowError, InvalidOperation) as err:
        raise PredicateError(f"value {value!r} does not fit column {column!r} of type {typ}: {err}") from None
    if scalar is None:
        raise PredicateError(f"value {value!r} does not fit column {column!r} of type {typ}")
    return scalar


def _may_match(plan: Plan, lo: Any, hi: Any) -> bool:
    """Whether values within [lo, hi] can satisfy the condition (keys are (low, high) pairs)."""
    op, keys = plan.cond.op, plan.keys
    try:
        if op == "=":
            return lo <= keys[0][1] and hi >= keys[0][0]
        if op == "!=":
            return not (lo == hi == keys[0][0] == keys[0][1])
        if op == "<":
            return lo < keys[0][0]
        if op == "<=":
            return lo <= keys[0][1]
        if op == ">":
            return hi > keys[0][1]
        if op == ">=":
            return hi >= keys[0][0]
        if op == "between":
            return hi >= keys[0][0] and lo <= keys[1][1]
        if op == "in":
            return any(lo <= k[1] and hi >= k[0] for k in keys)
    except TypeError:
        return True
    return True


def matching_pages(plan: Plan, ci: ColumnIndexView) -> list[int]:
    """Indices of pages that may hold matching rows."""
    n = len(ci)
    op = plan.cond.op
    if op == "is_null":
        if ci.null_counts is None:
            return list(range(n))
        return [i for i in range(n) if ci.null_pages[i] or ci.null_counts[i] > 0]
    if op == "is_not_null":
        return [i for i in range(n) if not ci.null_pages[i]]
    non_null = [i for i in range(n) if not ci.null_pages[i]]
    with_nan = _pages_with_nan(plan, ci, non_null)
    if plan.keys is None or len(with_nan) == len(non_null):
        return non_null
    if op == "!=":
        return [i for i in non_null if i in with_nan or not _all_equal(plan, ci, i)]
    lows = [comparable(plan.leaf, plan.order, ci.min_values[i]) for i in non_null]
    highs = [comparable(plan.leaf, plan.order, ci.max_values[i]) for i in non_null]
    if any(v is None or v != v for v in lows + highs):
        return non_null
    if ci.boundary_order in (BoundaryOrder.ASCENDING, BoundaryOrder.DESCENDING) and op in _RANGE_OPS:
        chosen = _ordered_pages(plan, non_null, lows, highs, ci.boundary_order)
    else:
        chosen = [i for i, lo, hi in zip(non_null, lows, highs) if _may_match(plan, lo, hi)]
    # Pages whose NaNs satisfy the condition, whatever their bounds (which leave NaN out).
    return sorted(set(chosen) | with_nan)


def _pages_with_nan(plan: Plan, ci: ColumnIndexView, non_null: list[int]) -> set[int]:
    """The pages that may hold NaN, when NaN satisfies the condition (else none matter): those
    the index counts NaN in; none where the index proves there is none; else every page."""
    if not plan.nan_matches:
        return set()
    if ci.nan_counts is not None and len(ci.nan_counts) == len(ci):
        return {i for i in non_null if ci.nan_counts[i] != 0}
    return set() if plan.index_proves_no_nan else set(non_null)


_RANGE_OPS = ("=", "<", "<=", ">", ">=", "between")


def _all_equal(plan: Plan, ci: ColumnIndexView, page: int) -> bool:
    lo = comparable(plan.leaf, plan.order, ci.min_values[page])
    hi = comparable(plan.leaf, plan.order, ci.max_values[page])
    return lo == hi == plan.keys[0][0] == plan.keys[0][1]


def _ordered_pages(plan: Plan, pages: list[int], lows: list, highs: list, order: int) -> list[int]:
    """Binary search: with bounds sorted, the pages that may match form one contiguous run."""
    op, keys = plan.cond.op, plan.keys
    lower = {"=": keys[0][0], ">": keys[0][1], ">=": keys[0][0], "between": keys[0][0]}.get(op)
    upper = {"=": keys[0][1], "<": keys[0][0], "<=": keys[0][1], "between": keys[-1][1]}.get(op)
    if order == BoundaryOrder.DESCENDING:
        pages, lows, highs = pages[::-1], lows[::-1], highs[::-1]
    first, last = 0, len(pages)
    if lower is not None:  # need max >= lower (max > lower for '>')
        first = (bisect.bisect_right if op == ">" else bisect.bisect_left)(highs, lower)
    if upper is not None:  # need min <= upper (min < upper for '<')
        last = (bisect.bisect_left if op == "<" else bisect.bisect_right)(lows, upper)
    chosen = pages[first:last] if first < last else []
    return sorted(chosen)


def _chunk_statistics(footer: Footer, chunk: ChunkMeta) -> Struct | None:
    group = footer.metadata.get(FileMetaData.ROW_GROUPS).items[chunk.row_group]
    meta = group.get(RowGroup.COLUMNS).items[chunk.column].get(ColumnChunk.META_DATA)
    stats = meta.get(ColumnMetaData.STATISTICS)
    return stats if isinstance(stats, Struct) else None
