"""Index builder: exact per-page bounds, null counts and boundary order of one column chunk,
vectorized over its decoded values, serialized as ColumnIndex and OffsetIndex structs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pageindex.format.column_order import Kind, Order
from pageindex.format.schema import PT, Leaf
from pageindex.format.thrift import Field, Struct, T, TList
from pageindex.index.truncation import truncate_max, truncate_min
from pageindex.scan.page_levels import PageLevels
from pageindex.scan.page_walk import ChunkPages

UNORDERED, ASCENDING, DESCENDING = 0, 1, 2
MAX_CAP = 1 << 30


@dataclass(frozen=True)
class Bounds:
    """Per-page encoded min/max (None on null pages) and, for total-order floats, NaN counts."""

    mins: tuple[bytes | None, ...]
    maxs: tuple[bytes | None, ...]
    keys_min: tuple  # comparable keys of the stored bounds (for boundary order)
    keys_max: tuple
    nan_counts: tuple[int, ...] | None


@dataclass(frozen=True)
class Refusal:
    """Why a chunk gets no ColumnIndex."""

    reason: str


def offset_index(pages: ChunkPages, levels: PageLevels, unencoded: np.ndarray | None) -> Struct:
    locations = tuple(
        Struct((
            Field(1, T.I64, p.offset),
            Field(2, T.I32, p.size),
            Field(3, T.I64, int(first)),
        ))
        for p, first in zip(pages.pages, levels.first_rows)
    )
    fields = [Field(1, T.LIST, TList(T.STRUCT, locations))]
    if unencoded is not None:
        fields.append(Field(2, T.LIST, TList(T.I64, tuple(int(x) for x in unencoded))))
    return Struct(tuple(fields))


def unencoded_bytes(values: pa.ChunkedArray, defined: np.ndarray) -> np.ndarray:
    """Per page, the bytes of BYTE_ARRAY values without length prefixes or encoding."""
    ends = np.cumsum(defined)
    out = np.zeros(len(defined), dtype=np.int64)
    pos = 0
    for chunk in values.chunks:
        if not len(chunk):
            continue
        pages, starts, stops = _runs_in(ends, defined, pos, len(chunk))
        pos += len(chunk)
        if pa.types.is_dictionary(chunk.type):
            # Page by page: a per-value array of lengths would cost 4-8 bytes a value.
            lengths = pc.binary_length(chunk.dictionary).to_numpy(zero_copy_only=False)
            indices = _indices(chunk)
            out[pages] += [int(lengths[indices[a:b]].sum(dtype=np.int64)) for a, b in zip(starts, stops)]
        else:
            lengths = pc.binary_length(chunk).to_numpy(zero_copy_only=False)
            out[pages] += np.add.reduceat(lengths, starts, dtype=np.int64)
    return out


def _indices(chunk: pa.DictionaryArray) -> np.ndarray:
    return chunk.indices.to_numpy(zero_copy_only=False)


def column_index(leaf: Leaf, order: Order, levels: PageLevels, values: pa.ChunkedArray,
                 truncate_length: int) -> Struct | Refusal:
    bounds = page_bounds(leaf, order, values, levels.defined, truncate_length)
    if isinstance(bounds, Refusal):
        return bounds
    return column_index_struct(bounds, levels)


def column_index_struct(bounds: Bounds, levels: PageLevels) -> Struct:
    """The ColumnIndex of these page bounds and level facts (also what page statistics give)."""
    null_pages = tuple(bool(d == 0) for d in levels.defined)
    fields = [
        Field(1, T.LIST, TList(T.TRUE, null_pages)),
        Field(2, T.LIST, TList(T.BINARY, tuple(m or b"" for m in bounds.mins))),
        Field(3, T.LIST, TList(T.BINARY, tuple(m or b"" for m in bounds.maxs))),
        Field(4, T.I32, boundary_order(bounds)),
        Field(5, T.LIST, TList(T.I64, tuple(int(n) for n in levels.nulls))),
    ]
    if levels.rep_histograms is not None:
        fields.append(Field(6, T.LIST, TList(T.I64, tuple(int(x) for x in levels.rep_histograms.ravel()))))
    if levels.def_histograms is not None:
        fields.append(Field(7, T.LIST, TList(T.I64, tuple(int(x) for x in levels.def_histograms.ravel()))))
    if bounds.nan_counts is not None:
        fields.append(Field(8, T.LIST, TList(T.I64, bounds.nan_counts)))
    return Struct(tuple(fields))


def boundary_order(bounds: Bounds) -> int:
    pairs = [(lo, hi) for lo, hi, m in zip(bounds.keys_min, bounds.keys_max, bounds.mins) if m is not None]
    if not pairs:
        return UNORDERED  # no bounds to order (as Arrow C++ writes it)
    if all(a[0] <= b[0] and a[1] <= b[1] for a, b in zip(pairs, pairs[1:])):
        return ASCENDING
    if all(a[0] >= b[0] and a[1] >= b[1] for a, b in zip(pairs, pairs[1:])):
        return DESCENDING
    return UNORDERED


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
    kind = order.kind
    if pa.types.is_dictionary(values.type) and kind is not Kind.BYTES:
        values = values.cast(values.type.value_type)
    if kind in (Kind.SIGNED, Kind.UNSIGNED, Kind.BOOLEAN):
        return _integer_bounds(leaf, kind, values, defined)
    if kind is Kind.FLOAT:
        return _float_bounds(leaf, order, values, defined)
    if kind is Kind.DECIMAL_BYTES:
        return _decimal_bytes_bounds(leaf, values, defined)
    return _bytes_bounds(order, values, defined, truncate_length)


def _segments(defined: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start offsets of the non-empty pages' value runs, and which pages those are."""
    starts = np.concatenate(([0], np.cumsum(defined)[:-1])).astype(np.int64)
    nonempty = np.flatnonzero(defined > 0)
    return starts[nonempty], nonempty


def _spread(n: int, pages: np.ndarray, found: list) -> list:
    out: list = [None] * n
    for page, value in zip(pages, found):
        out[page] = value
    return out


def _fixed_width(values: pa.ChunkedArray, width: int) -> np.ndarray:
    """The raw fixed-width value bytes of a primitive or fixed-size-binary column, as uint8."""
    parts = [np.frombuffer(c.buffers()[1], dtype=np.uint8)[c.offset * width : (c.offset + len(c)) * width]
             for c in values.chunks if len(c)]
    if not parts:
        return np.zeros(0, dtype=np.uint8)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _integer_bounds(leaf: Leaf, kind: Kind, values: pa.ChunkedArray, defined: np.ndarray) -> Bounds:
    n = len(defined)
    if leaf.physical_type == PT.BOOLEAN:
        arr = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.uint8)
        width, dtype = 1, np.uint8
    else:
        width = 4 if leaf.physical_type == PT.INT32 else 8
        dtype = {(4, Kind.SIGNED): "<i4", (8, Kind.SIGNED): "<i8",
                 (4, Kind.UNSIGNED): "<u4", (8, Kind.UNSIGNED): "<u8"}[(width, kind)]
        arr = _fixed_width(values, width).view(dtype)
    starts, pages = _segments(defined)
    if len(starts) == 0:
        return Bounds((None,) * n, (None,) * n, (None,) * n, (None,) * n, None)
    lo = np.minimum.reduceat(arr, starts)
    hi = np.maximum.reduceat(arr, starts)
    enc = (lambda v: v.astype(dtype).tobytes()) if width > 1 else (lambda v: v.tobytes())
    lo_b = [enc(lo[i : i + 1]) for i in range(len(lo))]
    hi_b = [enc(hi[i : i + 1]) for i in range(len(hi))]
    return Bounds(tuple(_spread(n, pages, lo_b)), tuple(_spread(n, pages, hi_b)),
                  tuple(_spread(n, pages, lo.tolist())), tuple(_spread(n, pages, hi.tolist())), None)


_FLOAT_DTYPES = {PT.FLOAT: ("<f4", "<i4", 32), PT.DOUBLE: ("<f8", "<i8", 64),
                 PT.FIXED_LEN_BYTE_ARRAY: ("<f2", "<i2", 16)}


def _float_bounds(leaf: Leaf, order: Order, values: pa.ChunkedArray, defined: np.ndarray) -> Bounds | Refusal:
    fdtype, idtype, bits = _FLOAT_DTYPES[leaf.physical_type]
    raw = _fixed_width(values, bits // 8)
    floats = raw.view(fdtype)
    nan = np.isnan(floats)
    n = len(defined)
    if not order.total_order and nan.any():
        return Refusal("chunk holds NaN: bounds under TYPE_ORDER would hide those rows")
    starts, pages = _segments(defined)
    if not order.total_order:
        return _type_order_float_bounds(floats, fdtype, starts, pages, n)
    ints = raw.view(idtype).astype(np.int64)
    # IEEE 754 totalOrder as a signed integer: flip the magnitude bits of negative numbers.
    key = np.where(ints < 0, ints ^ ((1 << (bits - 1)) - 1), ints)
    ends = np.append(starts[1:], len(key)) if len(starts) else starts
    lo_b, hi_b, lo_k, hi_k = [], [], [], []
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
    for lo, hi in zip(lo_key.tolist(), hi_key.tolist()):
        lo_b.append(_key_to_bytes(lo, idtype, bits))
        hi_b.append(_key_to_bytes(hi, idtype, bits))
        lo_k.append(lo)
        hi_k.append(hi)
    return Bounds(tuple(_spread(n, pages, lo_b)), tuple(_spread(n, pages, hi_b)),
                  tuple(_spread(n, pages, lo_k)), tuple(_spread(n, pages, hi_k)), nan_counts)


def _type_order_float_bounds(floats: np.ndarray, fdtype: str, starts: np.ndarray, pages: np.ndarray,
                             n: int) -> Bounds:
    """TYPE_ORDER (the chunk holds no NaN): numeric min/max, with zero bounds written as -0.0
    (min) and +0.0 (max) so either sign of zero in the data stays inside them."""
    if len(starts):
        lo = np.minimum.reduceat(floats, starts)
        hi = np.maximum.reduceat(floats, starts)
    else:
        lo = hi = floats[:0]
    lo = np.where(lo == 0, np.array(-0.0, dtype=fdtype), lo).astype(fdtype)
    hi = np.where(hi == 0, np.array(0.0, dtype=fdtype), hi).astype(fdtype)
    width = lo.dtype.itemsize
    lo_raw, hi_raw = lo.tobytes(), hi.tobytes()
    lo_b = [lo_raw[i * width : (i + 1) * width] for i in range(len(lo))]
    hi_b = [hi_raw[i * width : (i + 1) * width] for i in range(len(hi))]
    lo_k, hi_k = lo.astype(np.float64).tolist(), hi.astype(np.float64).tolist()
    return Bounds(tuple(_spread(n, pages, lo_b)), tuple(_spread(n, pages, hi_b)),
                  tuple(_spread(n, pages, lo_k)), tuple(_spread(n, pages, hi_k)), None)


def _key_to_bytes(key: int, idtype: str, bits: int) -> bytes:
    raw = key ^ ((1 << (bits - 1)) - 1) if key < 0 else key
    return np.array([raw], dtype=np.int64).astype(idtype).tobytes()


def _decimal_bytes_bounds(leaf: Leaf, values: pa.ChunkedArray, defined: np.ndarray) -> Bounds:
    """Big-endian two's complement values, compared as integers: sign-extend every value to one
    width and flip its sign bit, so unsigned byte order equals numeric order."""
    n = len(defined)
    if leaf.physical_type == PT.FIXED_LEN_BYTE_ARRAY:
        width = leaf.type_length
        keys = _fixed_width(values, width).reshape(-1, width).copy()
    else:
        keys, width = _sign_extend(values.combine_chunks())
    keys[:, 0] ^= 0x80
    key_array = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), len(keys), [None, pa.py_buffer(keys.tobytes())])
    lo, hi, pages = _grouped_min_max(key_array, defined)
    lo_i = [_signed_int(v) for v in lo]
    hi_i = [_signed_int(v) for v in hi]
    if leaf.physical_type == PT.FIXED_LEN_BYTE_ARRAY:
        encode = lambda v: v.to_bytes(width, "big", signed=True)  # noqa: E731
    else:
        encode = lambda v: v.to_bytes(v.bit_length() // 8 + 1, "big", signed=True)  # noqa: E731
    return Bounds(tuple(_spread(n, pages, [encode(v) for v in lo_i])),
                  tuple(_spread(n, pages, [encode(v) for v in hi_i])),
                  tuple(_spread(n, pages, lo_i)), tuple(_spread(n, pages, hi_i)), None)


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


def _grouped_min_max(values: pa.Array | pa.ChunkedArray, defined: np.ndarray, cap: int | None = None
                     ) -> tuple[list, list, list]:
    """Per non-empty page, the min and max value under Arrow's (unsigned byte-wise) order, cut to
    their first `cap` bytes if given (the bounds of the values' prefixes: cutting is monotone).

    Aggregated one Arrow chunk at a time (a column can exceed what one aggregation holds), then
    merged: a page split across chunks takes the min of mins and the max of maxes."""
    ends = np.cumsum(defined)
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    merged: dict[int, list] = {}
    pos = 0
    for chunk in chunks:
        if not len(chunk):
            continue
        pages, starts, stops = _runs_in(ends, defined, pos, len(chunk))
        pos += len(chunk)
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


def _runs_in(ends: np.ndarray, defined: np.ndarray, pos: int, length: int
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The non-empty pages with values in [pos, pos + length), and where each one's values
    start and stop relative to pos."""
    first = int(np.searchsorted(ends, pos, side="right"))
    last = int(np.searchsorted(ends, pos + length, side="left"))
    pages = np.arange(first, min(last, len(ends) - 1) + 1)
    pages = pages[defined[pages] > 0]
    starts = np.maximum(ends[pages] - defined[pages], pos) - pos
    return pages, starts, np.minimum(ends[pages], pos + length) - pos


FEW_PAGES = 256


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
    indices = _indices(chunk)
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


def _bytes_bounds(order: Order, values: pa.ChunkedArray, defined: np.ndarray, truncate_length: int) -> Bounds:
    n = len(defined)
    # Prefixes of cap bytes decide the truncated bounds: values sharing them truncate alike.
    # (Arrow's binary_slice must get a stop it can represent: no cap for "no truncation".)
    cap = truncate_length + 4 if order.truncatable and truncate_length < MAX_CAP else None
    # Aggregating the prefixes (not the values) keeps memory at pages x cap, however long the
    # values are; prefixes order like their values except in ties, which truncate alike.
    lo, hi, pages = _grouped_min_max(values, defined, cap)
    if order.truncatable:
        lo = [truncate_min(v, truncate_length, partial=len(v) == cap) for v in lo]
        maxes = []
        for page, v in zip(pages, hi):
            bound = truncate_max(v, truncate_length, partial=len(v) == cap)
            if len(v) == cap and bound == v:
                # No shorter upper bound exists, so the whole value is kept: read it in full.
                bound = _page_max(values, defined, page)
            maxes.append(bound)
        hi = maxes
    lo_s, hi_s = _spread(n, pages, lo), _spread(n, pages, hi)
    return Bounds(tuple(lo_s), tuple(hi_s), tuple(lo_s), tuple(hi_s), None)
