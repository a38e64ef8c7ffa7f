"""I/O: bytes in and out of files, local or on object stores, with no Parquet knowledge.

Ranged reads (storage), atomic writes of prefix + tail (commit), and the job's file discovery.
"""
