"""Split block bloom filter bitsets: sizing, building from hashes, probing.

A filter is an array of 32-byte blocks of eight little-endian uint32 words (BloomFilter.md).
"""
from __future__ import annotations

import math

import numpy as np

from pageindex.index.bloom.path import kernel

SALT = np.array([0x47B6137B, 0x44974D91, 0x8824AD5B, 0xA2B7289D,
                 0x705495C7, 0x2DF1424B, 0x9EFC4947, 0x5C6BFB31], dtype=np.uint32)
BLOCK_BYTES = 32
WORDS = 8
MIN_BYTES = BLOCK_BYTES
MAX_BYTES = 128 << 20  # the largest filter Arrow C++ and parquet-java read
DEFAULT_FPP = 0.01
DEFAULT_MAX_BYTES = 1 << 20  # parquet-java's default cap per filter


def check_options(fpp: float, max_bytes: int) -> None:
    if not 0.0 < fpp < 1.0:
        raise ValueError(f"bloom filter fpp must lie in (0, 1), not {fpp}")
    if not MIN_BYTES <= max_bytes <= MAX_BYTES or max_bytes & (max_bytes - 1):
        raise ValueError(f"bloom filter max bytes must be a power of two in [{MIN_BYTES}, {MAX_BYTES}],"
                         f" not {max_bytes}")


def optimal_bytes(ndv: int, fpp: float, max_bytes: int = DEFAULT_MAX_BYTES) -> int:
    """Bitset size for `ndv` distinct values at false positive rate `fpp`, as Arrow C++,
    parquet-java and arrow-rs size it: bits = -8 ndv / ln(1 - fpp^(1/8)), truncated, clamped,
    then rounded up to a power of two."""
    check_options(fpp, max_bytes)
    bits = -8.0 * ndv / math.log(1.0 - fpp ** (1.0 / 8.0))
    bits = min(max(int(bits), 8 * MIN_BYTES), 8 * max_bytes)
    return (1 << (bits - 1).bit_length()) // 8


def expected_fpp(ndv: int, num_bytes: int) -> float:
    """The false positive rate `ndv` distinct values give in `num_bytes`, by the same formula
    read backwards (an estimate; it ignores blocks filling unevenly)."""
    if ndv == 0:
        return 0.0
    return (1.0 - math.exp(-ndv / num_bytes)) ** 8


def build(hashes: np.ndarray, num_bytes: int) -> np.ndarray:
    """The bitset words holding `hashes`, in any order, duplicates allowed. The numpy path sorts
    them first: a sorted hash gives a non-decreasing block index, so each block's bits are
    OR-reduced over a run of neighbours and written once, with no scratch proportional to the
    filter's bits (measured against np.bitwise_or.at and grouping by the 32-bit block index, both
    slower: bench/RESULTS-bloom.md)."""
    nblocks = num_bytes // BLOCK_BYTES
    compiled = kernel()
    if compiled:
        return compiled.insert(hashes, nblocks, SALT)
    words = np.zeros((nblocks, WORDS), dtype=np.uint32)
    if not len(hashes):
        return words.ravel()
    hashes = np.sort(hashes)
    repeated = hashes[1:] == hashes[:-1]
    if repeated.any():  # a repeated hash sets no new bit: fewer to reduce, for one compare each
        hashes = hashes[np.concatenate(([True], ~repeated))]
    blocks = block_index(hashes, nblocks)
    first = np.empty(len(blocks), dtype=bool)
    first[0] = True
    np.not_equal(blocks[1:], blocks[:-1], out=first[1:])
    runs = np.flatnonzero(first)
    targets = blocks[runs]
    key = hashes.astype(np.uint32)  # the low 32 bits
    mask = np.empty(len(key), dtype=np.uint32)
    for i in range(WORDS):
        _lane_mask(key, i, mask)
        words[targets, i] = np.bitwise_or.reduceat(mask, runs)
    return words.ravel()


def fold_to_fpp(words: np.ndarray, counts: np.ndarray, fpp: float) -> np.ndarray:
    """The bitset folded as far as `fpp` allows, exactly as Arrow C++ (pyarrow 26) folds its
    filters (BlockSplitBloomFilter::FoldToTargetFpp): no bit set gives the minimum size, else
    fold_count folds, each ORing consecutive groups of blocks. The result is the filter that
    size would have built from the same hashes, as ((h >> 32) * n/2^k) >> 32 ==
    (((h >> 32) * n) >> 32) >> k. `counts` is set_bit_counts(words), which the caller also
    estimates the distinct values from."""
    set_bits = int(counts @ np.arange(len(counts)))
    if set_bits == 0:
        return np.zeros(MIN_BYTES // 4, dtype=np.uint32)
    folds = fold_count(len(words) // WORDS, set_bits / (32 * len(words)), fpp)
    if not folds:
        return words
    # Fold by halving, once per fold: numpy's OR-reduce over a middle axis of 2^folds blocks runs an
    # inner loop per block and was slower (bench/RESULTS-bloom.md). A block is four uint64 pairs of
    # words: half the elements to touch.
    pairs = words.view(np.uint64)
    for _ in range(folds):
        halves = pairs.reshape(-1, 2, WORDS // 2)
        pairs = halves[:, 0] | halves[:, 1]
    return pairs.view(np.uint32).ravel()


def set_bit_counts(words: np.ndarray) -> np.ndarray:
    """How many of the bitset's words have each number of bits set, 0 to 32 (33 counts)."""
    compiled = kernel()
    if compiled:
        return compiled.set_bit_counts(words)
    return np.bincount(np.bitwise_count(words), minlength=33)


def fold_count(nblocks: int, fill: float, fpp: float) -> int:
    """Arrow C++'s NumFoldsForTargetFpp, in the same double arithmetic: each fold turns the
    share of unset bits u into u^2, and the estimated fpp is (1 - u)^8 (math.pow is libm's pow,
    as std::pow); fold while that stays within `fpp`, at most down to one block."""
    folds = 0
    unset = 1.0 - fill
    for _ in range(nblocks.bit_length() - 1 if nblocks >= 2 else 0):
        unset *= unset
        if math.pow(1.0 - unset, WORDS) > fpp:
            break
        folds += 1
    return folds


def contains(words: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """For each hash, whether all eight of its bits are set in the bitset `words`."""
    grid = np.asarray(words, dtype=np.uint32).reshape(-1, WORDS)
    hashes = np.asarray(hashes, dtype=np.uint64)
    blocks = block_index(hashes, len(grid))
    key = hashes.astype(np.uint32)
    mask = np.empty(len(key), dtype=np.uint32)
    found = np.ones(len(hashes), dtype=bool)
    for i in range(WORDS):
        _lane_mask(key, i, mask)
        found &= (grid[blocks, i] & mask) == mask
    return found


def block_index(hashes: np.ndarray, nblocks: int) -> np.ndarray:
    """((h >> 32) * nblocks) >> 32: the top 32 bits pick the block (fits in 64 bits, as
    nblocks < 2^32)."""
    return ((hashes >> np.uint64(32)) * np.uint64(nblocks)) >> np.uint64(32)


def _lane_mask(key: np.ndarray, lane: int, out: np.ndarray) -> None:
    """The one-bit mask of word `lane`: bit (key * salt) >> 27, in 32-bit arithmetic."""
    np.multiply(key, SALT[lane], out=out)
    np.right_shift(out, np.uint32(27), out=out)
    np.left_shift(np.uint32(1), out, out=out)
