"""Chunk statistics in the new footer: bounds readers can prune row groups on, where a chunk lacks them.

Deprecated min/max that a declared column order would hide are copied; missing ones come from the new ColumnIndex.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from pageindex.format.column_order import Kind, type_order
from pageindex.format.footer import Footer
from pageindex.format.parquet_thrift import ColumnChunk, ColumnMetaData, FileMetaData, RowGroup, Statistics, Type
from pageindex.format.schema import Leaf
from pageindex.format.thrift import Struct
from pageindex.index.kinds import comparable
from pageindex.index.plan import ChunkPlan
from pageindex.index.reader import column_index_of
from pageindex.index.tail_writer import ChunkIndexes

# The physical types whose deprecated (signed) order is their TYPE_ORDER, with their value widths.
_SIGNED_WIDTH = {Type.BOOLEAN: 1, Type.INT32: 4, Type.INT64: 8, Type.FLOAT: 4, Type.DOUBLE: 8}
_FLOAT_FORMAT = {Type.FLOAT: "<f", Type.DOUBLE: "<d"}


def with_visible_bounds(cc: Struct, leaf: Leaf) -> Struct:
    """The chunk with its deprecated min/max given again as min_value/max_value, for a file that
    declared no column order and now declares TYPE_ORDER: readers used those bounds before (their
    order was signed, the same as TYPE_ORDER's) and would ignore them after. Unchanged when the
    chunk has min_value/max_value already, or bounds no reader used before (strings: their
    deprecated order is not TYPE_ORDER's), or bounds that are not plausible (NaN, a wrong width,
    min above max)."""
    meta = cc.get(ColumnChunk.META_DATA)
    stats = meta.get(ColumnMetaData.STATISTICS) if isinstance(meta, Struct) else None
    if not isinstance(stats, Struct) or stats.has(Statistics.MIN_VALUE) or stats.has(Statistics.MAX_VALUE):
        return cc
    lo, hi = stats.get(Statistics.MIN), stats.get(Statistics.MAX)
    if not (isinstance(lo, bytes) and isinstance(hi, bytes) and _comparable(leaf, lo, hi)):
        return cc
    stats = Statistics.set(Statistics.set(stats, Statistics.MAX_VALUE, hi), Statistics.MIN_VALUE, lo)
    return with_statistics(cc, stats)


def with_statistics(cc: Struct, stats: Struct) -> Struct:
    """The chunk with these Statistics (ColumnMetaData field 12)."""
    meta = ColumnMetaData.set(cc.get(ColumnChunk.META_DATA), ColumnMetaData.STATISTICS, stats)
    return ColumnChunk.set(cc, ColumnChunk.META_DATA, meta)


def _comparable(leaf: Leaf, lo: bytes, hi: bytes) -> bool:
    """Whether lo and hi are bounds of this leaf's values under both its deprecated signed order
    and TYPE_ORDER (so readers took them before and may take them as min_value/max_value)."""
    kind = type_order(leaf).kind
    width = _SIGNED_WIDTH.get(leaf.physical_type)
    if kind not in (Kind.SIGNED, Kind.BOOLEAN, Kind.FLOAT) or width is None or len(lo) != width or len(hi) != width:
        return False
    if leaf.physical_type in _FLOAT_FORMAT:
        fmt = _FLOAT_FORMAT[leaf.physical_type]
        low, high = struct.unpack(fmt, lo)[0], struct.unpack(fmt, hi)[0]
        return not (math.isnan(low) or math.isnan(high)) and low <= high
    if leaf.physical_type == Type.BOOLEAN:
        return lo[0] <= 1 and hi[0] <= 1 and lo[0] <= hi[0]
    return int.from_bytes(lo, "little", signed=True) <= int.from_bytes(hi, "little", signed=True)


COPIED, FILLED, REPLACED = "copied", "filled", "replaced"
STATISTICS_CHANGES = (COPIED, FILLED, REPLACED)


@dataclass(frozen=True)
class NewStatistics:
    """A chunk's Statistics in the new footer, and how they came about (COPIED, FILLED, REPLACED)."""

    stats: Struct
    how: str


def new_statistics(footer: Footer, plan: tuple[tuple[ChunkPlan, ...], ...], indexes: list[list[ChunkIndexes]],
                   fill: bool = True, wrong: frozenset[tuple[int, str]] = frozenset()
                   ) -> dict[tuple[int, int], NewStatistics]:
    """The chunks whose Statistics change, by (row group, column). REPLACED: the chunks in `wrong`
    (row group, dotted column: verify found a min_value/max_value that drops a value) lose those
    bounds and get the ColumnIndex's, as FILLED below, whatever `fill` says. The others change
    only if `fill`. COPIED: the deprecated bounds, where the retrofit declares column_orders
    (with_visible_bounds). FILLED:
    a chunk no reader could prune on (no min_value/max_value, none copied) that gets a
    ColumnIndex: the least page minimum and the greatest page maximum in the order the
    ColumnIndex follows (exact, or truncated as its bounds are: never a bound that drops a row),
    and a missing null_count as the pages' sum. Every field a chunk has is kept as it is."""
    adds_orders = footer.column_orders is None
    groups = footer.metadata.get(FileMetaData.ROW_GROUPS).items
    changed: dict[tuple[int, int], NewStatistics] = {}
    for row in plan:
        for planned in row:
            chunk = planned.chunk
            key = (chunk.row_group, chunk.column)
            cc = groups[chunk.row_group].get(RowGroup.COLUMNS).items[chunk.column]
            stats = _stats_of(cc) or Statistics.make()
            replaced = (chunk.row_group, chunk.leaf.dotted) in wrong
            if replaced:
                stats = stats.without(Statistics.MIN_VALUE, Statistics.MAX_VALUE)
                changed[key] = NewStatistics(stats, REPLACED)
            elif not fill:
                continue
            else:
                copied = with_visible_bounds(cc, chunk.leaf) if adds_orders else cc
                if copied is not cc:
                    changed[key] = NewStatistics(_stats_of(copied), COPIED)
                    continue
            raw = indexes[chunk.row_group][chunk.column].column_index
            # Under IEEE_754_TOTAL_ORDER a NaN may be a bound: not a chunk statistic readers expect.
            if raw is None or planned.order.total_order:
                continue
            if stats.has(Statistics.MIN_VALUE) or stats.has(Statistics.MAX_VALUE):
                continue
            new = _from_column_index(stats, chunk.leaf, planned, raw)
            if new is not None:
                changed[key] = NewStatistics(new, REPLACED if replaced else FILLED)
    return changed


def _stats_of(cc: Struct) -> Struct | None:
    stats = cc.get(ColumnChunk.META_DATA).get(ColumnMetaData.STATISTICS)
    return stats if isinstance(stats, Struct) else None


def _from_column_index(stats: Struct, leaf: Leaf, planned: ChunkPlan, raw: bytes) -> Struct | None:
    view = column_index_of(raw)
    pages = [i for i, null in enumerate(view.null_pages) if not null]
    if not pages:
        return None
    lows = [(comparable(leaf, planned.order, view.min_values[i]), view.min_values[i]) for i in pages]
    highs = [(comparable(leaf, planned.order, view.max_values[i]), view.max_values[i]) for i in pages]
    if any(key is None for key, _ in lows + highs):
        return None
    # The first of equal keys: a zero minimum is stored as -0.0 on every page that holds one.
    low = min(lows, key=lambda pair: pair[0])[1]
    high = max(highs, key=lambda pair: pair[0])[1]
    if not stats.has(Statistics.NULL_COUNT) and view.null_counts is not None:
        stats = Statistics.set(stats, Statistics.NULL_COUNT, sum(view.null_counts))
    return Statistics.set(Statistics.set(stats, Statistics.MAX_VALUE, high), Statistics.MIN_VALUE, low)

