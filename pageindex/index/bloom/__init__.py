"""Split block bloom filters (Parquet BloomFilter.md): hashing, bitsets, the serialized filter.

hashing -> kernel (its compiled twin) -> path (which of the two) -> chunk_hashes -> sbbf -> blob, lowest first.
"""
