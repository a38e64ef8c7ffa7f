"""Bloom filter pruning for lookup: an = or IN literal as the plain value a filter was hashed from,
and whether a chunk's filter rules out every literal.

A literal whose stored form cannot be had exactly is not probed: the chunk is then read.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any

from pageindex.errors import PageIndexError
from pageindex.format.column_order import is_decimal
from pageindex.format.footer import ChunkMeta
from pageindex.format.parquet_thrift import Type
from pageindex.format.schema import Leaf
from pageindex.index.bloom.blob import might_contain, read_filter
from pageindex.io.storage import Source

PROBED_OPS = ("=", "in")
_WIDTH_BITS = {Type.INT32: 32, Type.INT64: 64}


def probe_values(leaf: Leaf, literals: tuple[Any, ...], keys: tuple[tuple[Any, Any], ...] | None
                 ) -> tuple[Any, ...] | None:
    """The literals as a filter's plain values (int, float or bytes), or None when any cannot be
    had exactly. `keys` are the codec's (low, high) keys of the literals (None: none)."""
    out = []
    for i, literal in enumerate(literals):
        if not literal.is_valid:
            continue  # a null literal matches no row
        value = _plain(leaf, literal, None if keys is None else keys[i])
        if value is None:
            return None
        # 0.0 = -0.0, and other writers' filters hold only the zero the chunk has.
        out += [value, -value] if isinstance(value, float) and value == 0 else [value]
    return tuple(out)


def _plain(leaf: Leaf, literal: Any, key: tuple[Any, Any] | None) -> Any:
    ptype = leaf.physical_type
    if ptype in (Type.FLOAT, Type.DOUBLE):
        value = literal.as_py()
        # NaN is not probed: NaNs of other bit patterns are equal to it but hash differently.
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value:
            return None
        return float(value)
    if key is None or key[0] != key[1]:
        return None
    exact = key[0]
    if isinstance(exact, Fraction):
        if exact.denominator != 1:
            return None
        exact = int(exact)
    if ptype in _WIDTH_BITS:
        if not isinstance(exact, int) or isinstance(exact, bool):
            return None
        bits = _WIDTH_BITS[ptype]
        if not -(1 << (bits - 1)) <= exact < (1 << bits):
            return None
        return exact - (1 << bits) if exact >= 1 << (bits - 1) else exact  # unsigned: the same bits
    if ptype == Type.FIXED_LEN_BYTE_ARRAY and is_decimal(leaf) and isinstance(exact, int):
        try:
            return exact.to_bytes(leaf.type_length, "big", signed=True)
        except OverflowError:
            return None
    if ptype in (Type.BYTE_ARRAY, Type.FIXED_LEN_BYTE_ARRAY) and isinstance(exact, bytes) and not is_decimal(leaf):
        return exact
    return None


def ruled_out(source: Source, chunk: ChunkMeta, values: tuple[Any, ...]) -> bool:
    """Whether the chunk's bloom filter holds none of `values` (False without a readable filter:
    a filter only ever lets a reader skip)."""
    if chunk.bloom_filter is None:
        return False
    try:
        bloom = read_filter(source, *chunk.bloom_filter)
    except PageIndexError:
        return False
    return not any(might_contain(bloom, value, chunk.leaf.physical_type) for value in values)
