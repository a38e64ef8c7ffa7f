"""Byte-array codec: BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY values in unsigned lexicographic order
(strings, binary, UUIDs); string bounds may be truncated.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pageindex.format.column_order import Order
from pageindex.format.parquet_thrift import ConvertedType, LogicalType, Type
from pageindex.format.schema import Leaf
from pageindex.index.kinds.base import Bounds, Codec, chunk_runs, dictionary_indices, is_text, spread
from pageindex.index.truncation import truncate_max, truncate_min

MAX_CAP = 1 << 30
FEW_PAGES = 256
_STRING_LOGICAL = (LogicalType.STRING, LogicalType.ENUM, LogicalType.JSON)
_STRING_CONVERTED = (ConvertedType.UTF8, ConvertedType.ENUM, ConvertedType.JSON)


class ByteArrayCodec(Codec):
    reads_dictionaries = True

    def page_bounds(self, leaf: Leaf, order: Order, values: pa.ChunkedArray, defined: np.ndarray,
                    truncate_length: int) -> Bounds:
        # Aggregating the prefixes (not the values) keeps memory at pages x cap, however long the
        # values are; prefixes order like their values except in ties, which truncate alike.
        cap = _cap(order, truncate_length)
        lo, hi, pages = grouped_min_max(values, defined, cap)
        return _bounds(order, len(defined), pages, lo, hi, cap, truncate_length,
                       lambda page: _page_max(values, defined, page))

    def extrema_bounds(self, order: Order, n: int, pages: list[int], lows: list[bytes], highs: list[bytes],
                       truncate_length: int) -> Bounds:
        """The bounds page_bounds finds, from each non-null page's least and greatest value (whole)."""
        cap = _cap(order, truncate_length)
        whole = dict(zip(pages, highs))
        if cap is not None:
            lows, highs = [v[:cap] for v in lows], [v[:cap] for v in highs]
        return _bounds(order, n, pages, lows, highs, cap, truncate_length, whole.__getitem__)

    def key(self, leaf: Leaf, order: Order, raw: bytes) -> Any:
        return raw

    def holds(self, arrow_type: pa.DataType) -> bool:
        return _is_string(arrow_type) or _is_binary(arrow_type)

    def literal(self, value: Any, arrow_type: pa.DataType) -> pa.Scalar | None:
        if _is_string(arrow_type):
            return pa.scalar(value, arrow_type) if is_text(value) else None
        if is_text(value):
            value = value.encode()
        return pa.scalar(value, arrow_type) if isinstance(value, bytes) else None

    def literal_keys(self, leaf: Leaf, order: Order, literal: pa.Scalar) -> tuple[Any, Any]:
        value = literal.as_py()
        key = value.encode() if isinstance(value, str) else bytes(value)
        return key, key

    def render(self, leaf: Leaf, raw: bytes) -> str:
        lid, ct = leaf.logical_id, leaf.converted_type
        if lid == LogicalType.UUID and len(raw) == 16:
            h = raw.hex()
            return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        if lid in _STRING_LOGICAL or ct in _STRING_CONVERTED or (
                lid is None and ct is None and leaf.physical_type == Type.BYTE_ARRAY):
            try:
                return repr(raw.decode("utf-8"))
            except UnicodeDecodeError:
                pass
        return "0x" + raw.hex()


def _cap(order: Order, truncate_length: int) -> int | None:
    """Prefixes of cap bytes decide the truncated bounds: values sharing them truncate alike.
    (Arrow's binary_slice must get a stop it can represent: no cap for "no truncation".)"""
    return truncate_length + 4 if order.truncatable and truncate_length < MAX_CAP else None


def _bounds(order: Order, n: int, pages: list, lo: list, hi: list, cap: int | None, truncate_length: int,
            page_max: Callable[[int], bytes]) -> Bounds:
    """Bounds of `n` pages from the min and max (cut to `cap` bytes) of the non-null `pages`;
    `page_max` reads a page's whole max when no shorter upper bound exists."""
    if order.truncatable:
        lo = [truncate_min(v, truncate_length, partial=len(v) == cap) for v in lo]
        maxes = []
        for page, v in zip(pages, hi):
            bound = truncate_max(v, truncate_length, partial=len(v) == cap)
            if len(v) == cap and bound == v:
                # No shorter upper bound exists, so the whole value is kept: read it in full.
                bound = page_max(page)
            maxes.append(bound)
        hi = maxes
    lo_s, hi_s = spread(n, pages, lo), spread(n, pages, hi)
    return Bounds(lo_s, hi_s, lo_s, hi_s, None)


def _is_string(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def _is_binary(t: pa.DataType) -> bool:
    return (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
            or pa.types.is_binary_view(t))


def grouped_min_max(values: pa.Array | pa.ChunkedArray, defined: np.ndarray, cap: int | None = None
                    ) -> tuple[list, list, list]:
    """Per non-empty page, the min and max value under Arrow's (unsigned byte-wise) order, cut to
    their first `cap` bytes if given (the bounds of the values' prefixes: cutting is monotone).

    Aggregated one Arrow chunk at a time (a column can exceed what one aggregation holds), then
    merged: a page split across chunks takes the min of mins and the max of maxes."""
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    merged: dict[int, list] = {}
    for chunk, pages, starts, stops in chunk_runs(chunks, defined):
        if pa.types.is_dictionary(chunk.type):
            lows, highs = _dictionary_min_max(chunk, starts, stops)
        elif len(pages) <= FEW_PAGES:
            lows, highs = _sliced_min_max(chunk, starts, stops)
        else:
            # Many pages: one grouped aggregation over the values' prefixes (memory: pages x cap).
            ids = np.repeat(pages.astype(np.int32), stops - starts)
            prefixes = chunk if cap is None else pc.binary_slice(chunk, 0, cap)
            agg = pa.table({"p": ids, "v": prefixes}).group_by("p", use_threads=False).aggregate([("v", "min_max")])
            mm = agg.column("v_min_max").combine_chunks()
            pages, lows, highs = agg.column("p").to_numpy(), mm.field("min").to_pylist(), mm.field("max").to_pylist()
        if cap is not None:
            lows, highs = [v[:cap] for v in lows], [v[:cap] for v in highs]
        for page, lo, hi in zip(pages.tolist(), lows, highs):
            seen = merged.get(page)
            merged[page] = [lo, hi] if seen is None else [min(seen[0], lo), max(seen[1], hi)]
    pages = sorted(merged)
    return [merged[p][0] for p in pages], [merged[p][1] for p in pages], pages


def _sliced_min_max(chunk: pa.Array, starts: np.ndarray, stops: np.ndarray) -> tuple[list, list]:
    """Per run of values [start, stop), the min and max, reduced in place on zero-copy slices."""
    lows, highs = [], []
    for a, b in zip(starts.tolist(), stops.tolist()):
        mm = pc.min_max(chunk.slice(a, b - a))
        lows.append(mm["min"].as_py())
        highs.append(mm["max"].as_py())
    return lows, highs


def _dictionary_min_max(chunk: pa.DictionaryArray, starts: np.ndarray, stops: np.ndarray
                        ) -> tuple[list, list]:
    """Per run of values [start, stop), the min and max: the dictionary is ranked once and each
    run reduces its values' ranks, so no value but the bounds is materialized."""
    by_rank = pc.array_sort_indices(chunk.dictionary).to_numpy(zero_copy_only=False)
    rank = np.empty(len(by_rank), dtype=np.int32)
    rank[by_rank] = np.arange(len(by_rank), dtype=np.int32)
    indices = dictionary_indices(chunk)
    lo, hi = [], []
    for a, b in zip(starts, stops):
        ranks = rank[indices[a:b]]  # page by page: no per-value array for the whole chunk
        lo.append(ranks.min())
        hi.append(ranks.max())
    lows = chunk.dictionary.take(by_rank[np.array(lo, dtype=np.int64)]).to_pylist()
    highs = chunk.dictionary.take(by_rank[np.array(hi, dtype=np.int64)]).to_pylist()
    return lows, highs


def _page_max(values: pa.ChunkedArray, defined: np.ndarray, page: int) -> bytes:
    start = int(defined[:page].sum())
    page_values = values.slice(start, int(defined[page]))
    if pa.types.is_dictionary(values.type):
        page_values = page_values.cast(values.type.value_type)
    return pc.max(page_values).as_py()


BYTE_ARRAYS = ByteArrayCodec()
