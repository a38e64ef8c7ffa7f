"""Index builder: one column chunk's ColumnIndex (null pages, counts, boundary order around the
exact per-page bounds its kind's codec finds in the decoded values) and its OffsetIndex.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pageindex.format.column_order import Order
from pageindex.format.index_blocks import column_index_bytes, offset_index_bytes
from pageindex.format.parquet_thrift import BoundaryOrder
from pageindex.format.schema import Leaf
from pageindex.index.kinds import codec_for
from pageindex.index.kinds.base import Bounds, Refusal, chunk_runs, dictionary_indices
from pageindex.index.kinds.byte_arrays import BYTE_ARRAYS
from pageindex.scan.encoded import PageExtrema
from pageindex.scan.page_levels import PageLevels
from pageindex.scan.page_walk import ChunkPages


def offset_index(pages: ChunkPages, levels: PageLevels, unencoded: np.ndarray | None) -> bytes:
    """The chunk's OffsetIndex, encoded."""
    return offset_index_bytes([p.offset for p in pages.pages], [p.size for p in pages.pages],
                              levels.first_rows.tolist(), None if unencoded is None else unencoded.tolist())


def unencoded_bytes(values: pa.ChunkedArray, defined: np.ndarray) -> np.ndarray:
    """Per page, the bytes of BYTE_ARRAY values without length prefixes or encoding."""
    out = np.zeros(len(defined), dtype=np.int64)
    for chunk, pages, starts, stops in chunk_runs(values.chunks, defined):
        if pa.types.is_dictionary(chunk.type):
            # Page by page: a per-value array of lengths would cost 4-8 bytes a value.
            lengths = pc.binary_length(chunk.dictionary).to_numpy(zero_copy_only=False)
            indices = dictionary_indices(chunk)
            out[pages] += [int(lengths[indices[a:b]].sum(dtype=np.int64)) for a, b in zip(starts, stops)]
        else:
            lengths = pc.binary_length(chunk).to_numpy(zero_copy_only=False)
            out[pages] += np.add.reduceat(lengths, starts, dtype=np.int64)
    return out


def column_index(leaf: Leaf, order: Order, levels: PageLevels, values: pa.ChunkedArray,
                 truncate_length: int) -> bytes | Refusal:
    """The chunk's ColumnIndex, encoded, or why it has none."""
    bounds = page_bounds(leaf, order, values, levels.defined, truncate_length)
    if isinstance(bounds, Refusal):
        return bounds
    return column_index_block(bounds, levels)


def column_index_of_extrema(leaf: Leaf, order: Order, levels: PageLevels, extrema: PageExtrema,
                            truncate_length: int) -> bytes | Refusal:
    """The chunk's ColumnIndex from its pages' extrema: a page's bounds (truncated or not, NaN
    or not) depend on its least and greatest value alone, so they bound it as its values would."""
    if isinstance(extrema.values, list):
        # Straight to the truncation rules: no Arrow call per page to find what is already known.
        pair = extrema.values
        bounds = BYTE_ARRAYS.extrema_bounds(order, len(extrema.counts), np.flatnonzero(extrema.counts).tolist(),
                                            pair[0::2], pair[1::2], truncate_length)
    else:
        bounds = codec_for(order).pair_bounds(leaf, order, extrema.values, extrema.counts, truncate_length)
    if isinstance(bounds, Refusal):
        return bounds
    return column_index_block(bounds, levels)


def column_index_block(bounds: Bounds, levels: PageLevels) -> bytes:
    """The encoded ColumnIndex of these page bounds and level facts (also what page statistics give)."""
    # Python ints from one tolist() each: iterating a numpy array makes a numpy scalar per item.
    return column_index_bytes(
        [d == 0 for d in levels.defined.tolist()],
        [m or b"" for m in bounds.mins],
        [m or b"" for m in bounds.maxs],
        boundary_order(bounds),
        levels.nulls.tolist(),
        None if levels.rep_histograms is None else levels.rep_histograms.ravel().tolist(),
        None if levels.def_histograms is None else levels.def_histograms.ravel().tolist(),
        bounds.nan_counts)


def boundary_order(bounds: Bounds) -> int:
    pairs = [(lo, hi) for lo, hi, m in zip(bounds.keys_min, bounds.keys_max, bounds.mins) if m is not None]
    if not pairs:
        return BoundaryOrder.UNORDERED  # no bounds to order (as Arrow C++ writes it)
    if all(a[0] <= b[0] and a[1] <= b[1] for a, b in zip(pairs, pairs[1:])):
        return BoundaryOrder.ASCENDING
    if all(a[0] >= b[0] and a[1] >= b[1] for a, b in zip(pairs, pairs[1:])):
        return BoundaryOrder.DESCENDING
    return BoundaryOrder.UNORDERED


def page_bounds(leaf: Leaf, order: Order, values: pa.ChunkedArray, defined: np.ndarray,
                truncate_length: int) -> Bounds | Refusal:
    """Per-page bounds of a chunk's defined values. Values that come in Arrow chunks holding
    whole pages (as a nested leaf's runs of values sections do) are bounded chunk by chunk:
    fixed-width values would otherwise be joined into one copy first."""
    if len(values) != int(defined.sum()):
        raise ValueError("value count does not match the defined-level counts")
    parts = _page_aligned_parts(values, defined)
    if parts is None:
        return _bounds(leaf, order, values, defined, truncate_length)
    found = []
    for part, part_defined in parts:
        bounds = _bounds(leaf, order, pa.chunked_array([part], type=values.type), part_defined, truncate_length)
        if isinstance(bounds, Refusal):
            return bounds
        found.append(bounds)
    return Bounds(*(sum((getattr(b, f) for b in found), ()) for f in ("mins", "maxs", "keys_min", "keys_max")),
                  None if found[0].nan_counts is None else sum((b.nan_counts for b in found), ()))


def _page_aligned_parts(values: pa.ChunkedArray, defined: np.ndarray
                        ) -> list[tuple[pa.Array, np.ndarray]] | None:
    """Each Arrow chunk with the defined counts of the pages it holds, if there are several
    chunks and every one ends where a page does (empty pages go with the chunk before them)."""
    if values.num_chunks < 2:
        return None
    ends = np.cumsum(defined)
    parts, first = [], 0
    for end, chunk in zip(np.cumsum([len(c) for c in values.chunks]).tolist(), values.chunks):
        last = int(np.searchsorted(ends, end, side="right"))
        if (int(ends[last - 1]) if last else 0) != end:
            return None
        parts.append((chunk, defined[first:last]))
        first = last
    return parts


def _bounds(leaf: Leaf, order: Order, values: pa.ChunkedArray, defined: np.ndarray,
            truncate_length: int) -> Bounds | Refusal:
    codec = codec_for(order)
    if pa.types.is_dictionary(values.type) and not codec.reads_dictionaries:
        values = values.cast(values.type.value_type)
    return codec.page_bounds(leaf, order, values, defined, truncate_length)
