"""The Parquet format: the Thrift codec, the footer and schema, and the rules of each value type.

Everything here describes what bytes mean; nothing here reads page data or computes an index.
"""
