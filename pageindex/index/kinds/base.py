"""Codec base: what every value kind's codec provides, the page bounds it returns, and the
vectorized per-page reductions the fixed-width kinds share.
"""
from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Iterable, Iterator

import numpy as np
import pyarrow as pa

from pageindex.format.column_order import Order
from pageindex.format.schema import Leaf
from pageindex.index.fallback import Fallback


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


class NumericText(str):
    """A numeric literal with a fraction or exponent, kept as text until the column type is known."""


# How a number is spelled in a where clause, quoted or not.
NUMBER = r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?"
_INTEGER = re.compile(r"[-+]?\d+")


def parse_number(text: str) -> int | NumericText:
    """A number spelled as NUMBER: an int, or NumericText when it has a fraction or exponent."""
    return int(text) if _INTEGER.fullmatch(text) else NumericText(text)


def number_in_text(value: Any) -> Any:
    """For a numeric column: quoted text that spells a number is that number ('42' is 42, as
    '1.23' is 1.23); any other value is returned as it is."""
    if is_text(value) and re.fullmatch(NUMBER, value.strip()):
        return parse_number(value.strip())
    return value


def is_number(value: Any) -> bool:
    """A literal that compares as a number (bool is not one)."""
    return isinstance(value, (int, float, Decimal, NumericText)) and not isinstance(value, bool)


def is_text(value: Any) -> bool:
    return isinstance(value, str) and not isinstance(value, NumericText)


class Codec(ABC):
    """One kind of value through every stage: page bounds from decoded values (builder), stored
    bound bytes to comparable keys (verify, lookup, inspect), lookup literals, inspect text."""

    # Why page-header statistics cannot give this kind's bounds (None: they can, if trusted).
    header_refusal: Fallback | None = None
    # Whether values may be NaN, which lies outside any bounds but satisfies `!=`.
    nan_values: bool = False
    # Whether page_bounds takes dictionary-encoded values as they are (else they come decoded).
    reads_dictionaries: bool = False

    @abstractmethod
    def page_bounds(self, leaf: Leaf, order: Order, values: pa.ChunkedArray, defined: np.ndarray,
                    truncate_length: int) -> Bounds | Refusal:
        """Per-page bounds of a chunk's defined values (`defined`: values per page)."""

    def pair_bounds(self, leaf: Leaf, order: Order, pairs: np.ndarray, counts: np.ndarray,
                    truncate_length: int) -> Bounds | Refusal:
        """page_bounds of a chunk of fixed-width numbers given as each page's least and greatest
        value (`pairs`: two per page holding values, `counts`: 2 or 0 per page)."""
        return self.page_bounds(leaf, order, pa.chunked_array([pa.array(pairs)]), counts, truncate_length)

    @abstractmethod
    def key(self, leaf: Leaf, order: Order, raw: bytes) -> Any:
        """A stored bound as a Python value ordered as the column order (None: not decodable)."""

    def legacy_bounds(self, order: Order) -> bool:
        """Whether the deprecated Statistics min/max (written in signed order) bound this order."""
        return False

    @abstractmethod
    def holds(self, arrow_type: pa.DataType) -> bool:
        """Whether lookup literals for columns of this Arrow type are this codec's to coerce."""

    @abstractmethod
    def literal(self, value: Any, arrow_type: pa.DataType) -> pa.Scalar | None:
        """A where-clause value as a scalar comparable with the column (None: it does not fit)."""

    @abstractmethod
    def literal_keys(self, leaf: Leaf, order: Order, literal: pa.Scalar) -> tuple[Any, Any]:
        """A literal as (low, high) keys in the domain of key(): equal, except where one literal
        stands for two stored values (a float zero under IEEE_754_TOTAL_ORDER)."""

    @abstractmethod
    def render(self, leaf: Leaf, raw: bytes) -> str:
        """A stored bound as text by the column's logical type (may raise on malformed bytes)."""


def logical_params(leaf: Leaf) -> Any:
    """The fields of the leaf's LogicalType union member (None: no logical type)."""
    lt = leaf.logical_type
    return lt.fields[0].value if lt and lt.fields else None


def segments(defined: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start offsets of the non-empty pages' value runs, and which pages those are."""
    starts = np.concatenate(([0], np.cumsum(defined)[:-1])).astype(np.int64)
    nonempty = np.flatnonzero(defined > 0)
    return starts[nonempty], nonempty


def spread(n: int, pages: np.ndarray, found: list) -> tuple:
    """Per page of `n`, the value found for it (None for pages without values)."""
    out: list = [None] * n
    for page, value in zip(pages, found):
        out[page] = value
    return tuple(out)


def spread_bounds(n: int, pages: np.ndarray, mins: list, maxs: list, keys_min: list, keys_max: list,
                  nan_counts: tuple[int, ...] | None = None) -> Bounds:
    return Bounds(spread(n, pages, mins), spread(n, pages, maxs), spread(n, pages, keys_min),
                  spread(n, pages, keys_max), nan_counts)


def fixed_width(values: pa.ChunkedArray, width: int) -> np.ndarray:
    """The raw fixed-width value bytes of a primitive or fixed-size-binary column, as uint8."""
    parts = [np.frombuffer(c.buffers()[1], dtype=np.uint8)[c.offset * width : (c.offset + len(c)) * width]
             for c in values.chunks if len(c)]
    if not parts:
        return np.zeros(0, dtype=np.uint8)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def split_bytes(packed: np.ndarray) -> list[bytes]:
    """Each element of a fixed-width array as its little-endian bytes."""
    raw, width = packed.tobytes(), packed.dtype.itemsize
    return [raw[i * width : (i + 1) * width] for i in range(len(packed))]


def page_min_max(arr: np.ndarray, defined: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Min and max of each non-empty page of a numeric array, and which pages those are."""
    starts, pages = segments(defined)
    if len(starts) == 0:
        return arr[:0], arr[:0], pages
    return np.minimum.reduceat(arr, starts), np.maximum.reduceat(arr, starts), pages


def pair_min_max(pairs: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """page_min_max of pages of two values each (`counts`: 2 or 0 per page), without the general
    case's segment offsets: a chunk of one or two pages pays for every numpy call."""
    first, second = pairs[0::2], pairs[1::2]
    return np.minimum(first, second), np.maximum(first, second), np.flatnonzero(counts)


def numeric_bounds(n: int, lo: np.ndarray, hi: np.ndarray, pages: np.ndarray) -> Bounds:
    """Bounds of `n` pages from the min and max of the non-empty ones, for numbers whose numpy
    order is the column order: keys are the Python numbers, bounds their bytes."""
    return spread_bounds(n, pages, split_bytes(lo), split_bytes(hi), lo.tolist(), hi.tolist())


def chunk_runs(chunks: Iterable[pa.Array], defined: np.ndarray
               ) -> Iterator[tuple[pa.Array, np.ndarray, np.ndarray, np.ndarray]]:
    """Each non-empty Arrow chunk of a column's values, with the non-empty pages it holds values
    of and where each one's values start and stop within the chunk (`defined`: values per page)."""
    ends = np.cumsum(defined)
    pos = 0
    for chunk in chunks:
        if not len(chunk):
            continue
        first = int(np.searchsorted(ends, pos, side="right"))
        last = int(np.searchsorted(ends, pos + len(chunk), side="left"))
        pages = np.arange(first, min(last, len(ends) - 1) + 1)
        pages = pages[defined[pages] > 0]
        starts = np.maximum(ends[pages] - defined[pages], pos) - pos
        yield chunk, pages, starts, np.minimum(ends[pages], pos + len(chunk)) - pos
        pos += len(chunk)


def dictionary_indices(chunk: pa.DictionaryArray) -> np.ndarray:
    return chunk.indices.to_numpy(zero_copy_only=False)
