"""A serialized bloom filter: the Thrift BloomFilterHeader followed by its bitset.

Builds the bytes a chunk's filter takes in the tail, and reads one back from a file.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pageindex.errors import MalformedFileError, PageIndexError, UnsupportedFileError
from pageindex.format.parquet_thrift import (
    BloomFilterAlgorithm,
    BloomFilterCompression,
    BloomFilterHash,
    BloomFilterHeader,
    Type,
)
from pageindex.format.thrift import Struct, decode_struct, encode_struct
from pageindex.index.bloom.chunk_hashes import chunk_hashes
from pageindex.index.bloom.hashing import xxh64_binary, xxh64_u32, xxh64_u64
from pageindex.index.bloom.sbbf import (
    DEFAULT_FPP,
    DEFAULT_MAX_BYTES,
    MAX_BYTES,
    MIN_BYTES,
    WORDS,
    build,
    contains,
    fold_to_fpp,
    optimal_bytes,
    set_bit_counts,
)
from pageindex.io.storage import Source

# The header is a handful of bytes; a reader takes this much first when field 15 is absent.
HEADER_READ = 256
# (union field, its member, name): each member is an empty struct.
_UNIONS = ((BloomFilterHeader.ALGORITHM, BloomFilterAlgorithm.BLOCK, "algorithm"),
           (BloomFilterHeader.HASH, BloomFilterHash.XXHASH, "hash"),
           (BloomFilterHeader.COMPRESSION, BloomFilterCompression.UNCOMPRESSED, "compression"))


@dataclass(frozen=True)
class BloomFilter:
    """A filter's bitset (little-endian uint32 words) and, when built here, an estimate of the
    distinct values in it, from the set bits before folding (None when read from a file: the
    count is not stored)."""

    words: np.ndarray
    ndv: int | None = None

    @property
    def num_bytes(self) -> int:
        return 4 * len(self.words)

    def header(self) -> bytes:
        return encode_struct(BloomFilterHeader.make(
            NUM_BYTES=self.num_bytes,
            ALGORITHM=BloomFilterAlgorithm.make(BLOCK=Struct()),
            HASH=BloomFilterHash.make(XXHASH=Struct()),
            COMPRESSION=BloomFilterCompression.make(UNCOMPRESSED=Struct())))

    def to_bytes(self) -> bytes:
        """Header then bitset: what the tail holds and ColumnMetaData.bloom_filter_length counts."""
        return self.header() + self.words.astype("<u4", copy=False).tobytes()

    def might_contain_hashes(self, hashes: np.ndarray) -> np.ndarray:
        return contains(self.words, hashes)

    def fill_fpp(self) -> float:
        """The false positive rate the set bits give: a hash absent from the filter finds all
        eight of its bits set with probability prod(bits set / 32) over its block's words."""
        share = np.bitwise_count(self.words.reshape(-1, WORDS)) / 32.0
        return float(share.prod(axis=1).mean())

    def estimated_ndv(self) -> int:
        """The distinct values inserted, estimated from the set bits (a filter does not store
        the count): k hashes in a block leave each of its words' bits unset with probability
        (31/32)^k, so a word with c bits set says k = log(1 - c/32) / log(31/32) (a full word
        counts as 1/64 unset), and a block's k is its words' mean."""
        return _ndv_estimate(set_bit_counts(self.words))


# The hashes a word's count of set bits (0..32) stands for, by estimated_ndv's formula.
_HASHES_BY_SET_BITS = np.log(np.maximum(1.0 - np.arange(33) / 32.0, 1.0 / 64)) / math.log(31.0 / 32.0)


def _ndv_estimate(counts: np.ndarray) -> int:
    """BloomFilter.estimated_ndv from set_bit_counts of the words."""
    return int(round(float(counts @ _HASHES_BY_SET_BITS) / WORDS))


def build_filter(values: pa.Array | pa.ChunkedArray, physical_type: int, fpp: float = DEFAULT_FPP,
                 max_bytes: int = DEFAULT_MAX_BYTES) -> BloomFilter:
    """A chunk's filter, sized as pyarrow 26 sizes one without counting distinct values: every
    hash goes into a filter sized for all the non-null values (at most `max_bytes`), which is then
    folded to the size its set bits say `fpp` needs (sbbf.fold_to_fpp)."""
    hashes = chunk_hashes(values, physical_type)
    unfolded = build(hashes.hashes, optimal_bytes(hashes.inserted, fpp, max_bytes))
    counts = set_bit_counts(unfolded)  # one popcount pass serves the fold and the estimate
    return BloomFilter(fold_to_fpp(unfolded, counts, fpp), _ndv_estimate(counts))


def might_contain(bloom: BloomFilter, value: object, physical_type: int) -> bool:
    """Whether `value` (int, float, bytes or str, as the column stores it) may be in the chunk;
    False means it is certainly absent."""
    return bool(bloom.might_contain_hashes(np.array([probe_hash(value, physical_type)]))[0])


_SCALARS = {Type.INT32: np.int32, Type.INT64: np.int64, Type.FLOAT: np.float32, Type.DOUBLE: np.float64}


def probe_hash(value: object, physical_type: int) -> np.uint64:
    """The hash of one value's plain bytes, exactly as given (a probe adds no other zero or NaN)."""
    if physical_type in (Type.BYTE_ARRAY, Type.FIXED_LEN_BYTE_ARRAY):
        raw = value.encode() if isinstance(value, str) else bytes(value)
        lengths = np.array([len(raw)], dtype=np.int64)
        return xxh64_binary(np.frombuffer(raw, dtype=np.uint8), np.zeros(1, np.int64), lengths)[0]
    if physical_type not in _SCALARS:
        raise ValueError(f"no bloom filter probe for physical type {Type.name(physical_type)}")
    word = np.array([value], dtype=_SCALARS[physical_type])
    return (xxh64_u32 if word.itemsize == 4 else xxh64_u64)(word)[0]


def parse_filter(buf: bytes | memoryview, length: int | None = None) -> BloomFilter:
    """A filter from its bytes (header then bitset). With `length` (field 15) the bytes must be
    exactly header + bitset."""
    num_bytes, pos = _header(buf)
    if length is not None and length != pos + num_bytes:
        raise MalformedFileError(f"bloom filter length {length} is not header {pos} + bitset {num_bytes}")
    if len(buf) < pos + num_bytes:
        raise MalformedFileError(f"bloom filter bitset ends after {len(buf) - pos} of {num_bytes} bytes")
    return BloomFilter(np.frombuffer(bytes(buf[pos:pos + num_bytes]), dtype="<u4"))


def read_filter(source: Source, offset: int, length: int | None) -> BloomFilter:
    """A chunk's filter from ColumnMetaData fields 14 (offset) and 15 (length): one read when
    the length is known, else the header first and then the bitset."""
    try:
        if length is not None:
            return parse_filter(source.read(offset, length, "bloom filter"), length)
        head = source.read(offset, min(HEADER_READ, source.size - offset), "bloom filter")
        num_bytes, pos = _header(head)
        return parse_filter(head[:pos] + source.read(offset + pos, num_bytes, "bloom filter"))
    except PageIndexError as err:
        raise err.located(path=source.path, offset=offset) from None


def _header(buf: bytes | memoryview) -> tuple[int, int]:
    """The bitset size a BloomFilterHeader declares, and where the bitset starts."""
    try:
        header, pos = decode_struct(buf)
    except PageIndexError as err:
        raise MalformedFileError(f"bloom filter header: {err.reason}") from None
    num_bytes = header.get(BloomFilterHeader.NUM_BYTES)
    if not isinstance(num_bytes, int) or not MIN_BYTES <= num_bytes <= MAX_BYTES or num_bytes & (num_bytes - 1):
        raise MalformedFileError(f"bloom filter numBytes {num_bytes!r} is not a power of two in "
                                 f"[{MIN_BYTES}, {MAX_BYTES}]")
    for fid, member, name in _UNIONS:
        union = header.get(fid)
        if not isinstance(union, Struct) or [f.id for f in union.fields] != [member]:
            raise UnsupportedFileError(f"bloom filter {name} is not the one Parquet defines")
    return num_bytes, pos
