"""Tests of pageindex.format: the Thrift codec, schema, footer, column orders, compression."""
