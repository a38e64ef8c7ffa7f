"""The XXH64 hashes a column chunk's values put in its bloom filter.

Each value is hashed over its plain-encoded bytes; nulls are skipped and booleans get no filter.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import numpy as np
import pyarrow as pa

from pageindex.format.parquet_thrift import Type
from pageindex.index.bloom import hashing
from pageindex.index.bloom.path import kernel

# INT96 is left out: Arrow decodes it to nanoseconds, which need not round-trip to its 12 bytes.
ELIGIBLE = frozenset({Type.INT32, Type.INT64, Type.FLOAT, Type.DOUBLE, Type.BYTE_ARRAY, Type.FIXED_LEN_BYTE_ARRAY})

# An engine probes with the literal's bytes: 0.0 must find -0.0 and the other way round, and a
# NaN literal is the canonical quiet NaN whatever payload the data holds.
FLOAT_ZEROS = np.array([0x00000000, 0x80000000], dtype=np.uint32)
DOUBLE_ZEROS = np.array([0, 1 << 63], dtype=np.uint64)
FLOAT_NAN = np.uint32(0x7FC00000)
DOUBLE_NAN = np.uint64(0x7FF8000000000000)


def eligible(physical_type: int) -> bool:
    return physical_type in ELIGIBLE


@dataclass(frozen=True)
class ChunkHashes:
    """What a chunk puts in its filter: `hashes`, one per non-null value in no order (a
    dictionary's entries in use once each) plus the float extras, and `inserted`, the non-null
    values plus those extras: the count the unfolded filter is sized for (whatever the encoding,
    so a chunk gets the same filter dictionary-encoded or not)."""

    hashes: np.ndarray
    inserted: int


def chunk_hashes(values: pa.Array | pa.ChunkedArray, physical_type: int, float_extras: bool = True) -> ChunkHashes:
    """The hashes of the non-null values. float_extras adds the other zero and the canonical NaN
    as a filter holds them, without it only the values' own."""
    xxh64 = kernel() or hashing
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    parts = [_hashes(chunk, physical_type, float_extras, xxh64) for chunk in chunks if len(chunk)]
    if len(parts) == 1:
        hashes = parts[0][0]  # the usual case, one Arrow chunk: no copy
    else:
        hashes = np.concatenate([h for h, _ in parts]) if parts else np.empty(0, dtype=np.uint64)
    return ChunkHashes(hashes, sum(n for _, n in parts))


def _hashes(array: pa.Array, physical_type: int, float_extras: bool, xxh64: ModuleType) -> tuple[np.ndarray, int]:
    """The values' hashes, by `xxh64` (pageindex.index.bloom.hashing or the compiled kernel: the
    same functions), and the count of values they stand for (ChunkHashes.inserted)."""
    if isinstance(array, pa.DictionaryArray) and physical_type in (Type.FLOAT, Type.DOUBLE):
        array = array.dictionary_decode()  # the extras depend on the values used, not the dictionary's
    if isinstance(array, pa.DictionaryArray):
        # Only the entries in use: marked in one pass over the indices, where np.unique would sort them.
        used = np.zeros(len(array.dictionary), dtype=bool)
        used[array.indices.drop_null().to_numpy(zero_copy_only=False)] = True
        hashes, _ = _hashes(array.dictionary.filter(pa.array(used)), physical_type, float_extras, xxh64)
        return hashes, len(array) - array.null_count
    hashes = _plain_hashes(array, physical_type, float_extras, xxh64)
    return hashes, len(hashes)


def _plain_hashes(array: pa.Array, physical_type: int, float_extras: bool, xxh64: ModuleType) -> np.ndarray:
    """The hashes of a plain (not dictionary) array's non-null values, with the float extras."""
    array = array.drop_null() if array.null_count else array
    if pa.types.is_integer(array.type) and array.type.bit_width < 32:
        array = array.cast(pa.int32())  # INT8/16 and UINT8/16 are stored as INT32 (extended)
    if physical_type in (Type.INT32, Type.FLOAT):
        words = _words(array, 4, np.uint32)
        return xxh64.xxh64_u32(_float_extras(words, FLOAT_ZEROS, FLOAT_NAN, 8, 23)
                         if physical_type == Type.FLOAT and float_extras else words)
    if physical_type in (Type.INT64, Type.DOUBLE):
        words = _words(array, 8, np.uint64)
        return xxh64.xxh64_u64(_float_extras(words, DOUBLE_ZEROS, DOUBLE_NAN, 11, 52)
                         if physical_type == Type.DOUBLE and float_extras else words)
    if physical_type == Type.FIXED_LEN_BYTE_ARRAY:
        width = array.type.byte_width
        data = _buffer(array, 1, np.uint8)[array.offset * width:(array.offset + len(array)) * width]
        return xxh64.xxh64_fixed(data, width)
    if physical_type == Type.BYTE_ARRAY:
        large = pa.types.is_large_binary(array.type) or pa.types.is_large_string(array.type)
        offsets = _buffer(array, 1, np.int64 if large else np.int32)[array.offset:array.offset + len(array) + 1]
        return xxh64.xxh64_offsets(_buffer(array, 2, np.uint8), offsets)
    raise ValueError(f"no bloom filter for physical type {Type.name(physical_type)}")


def _buffer(array: pa.Array, index: int, dtype: type) -> np.ndarray:
    buf = array.buffers()[index]
    return np.empty(0, dtype=dtype) if buf is None else np.frombuffer(buf, dtype=dtype)


def _words(array: pa.Array, width: int, dtype: type) -> np.ndarray:
    """The values' plain bytes as unsigned words (floats by bit pattern)."""
    if array.type.bit_width != 8 * width:
        raise ValueError(f"{array.type} values are not {width}-byte words")
    return _buffer(array, 1, dtype)[array.offset:array.offset + len(array)]


def _float_extras(bits: np.ndarray, zeros: np.ndarray, nan: np.unsignedinteger, exponent_bits: int,
                  mantissa_bits: int) -> np.ndarray:
    """The bit patterns plus both zeros when either occurs and the canonical NaN when any NaN does."""
    magnitude = bits & ~zeros[1]
    extras = []
    if np.any(magnitude == 0):
        extras.append(zeros)
    exponent_mask = ((1 << exponent_bits) - 1) << mantissa_bits
    if np.any(magnitude > type(nan)(exponent_mask)):
        extras.append(np.array([nan], dtype=bits.dtype))
    return np.concatenate([bits, *extras]) if extras else bits
