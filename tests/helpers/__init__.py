"""Shared test helpers: corpus access, Spark/parquet-java oracles, S3 (moto) and DataFusion probes.

Fixtures wrapping these live in tests/conftest.py; the plain functions can be imported directly,
e.g. ``from tests.helpers.spark import scan_output_rows``.
"""
