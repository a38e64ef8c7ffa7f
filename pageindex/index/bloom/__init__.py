"""Split block bloom filters (Parquet BloomFilter.md): hashing, bitsets, the serialized filter.

hashing -> chunk_hashes -> sbbf -> blob, lowest first.
"""
