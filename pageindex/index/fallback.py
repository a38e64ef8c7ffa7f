"""Fallback: why a chunk's page-header statistics were not used under --trust-page-stats, named once.

Every such chunk is decoded exactly instead; the report counts them by these reasons.
"""
from __future__ import annotations

from enum import StrEnum


class Fallback(StrEnum):
    """Why a chunk was decoded exactly although header statistics were trusted."""

    FLOAT = "float column: page headers cannot tell whether a page holds NaN"
    PARQUET_251 = "parquet-mr before 1.8.0 wrote wrong binary statistics (PARQUET-251)"
    BLOOM_FILTER = "a bloom filter is built from the decoded values"
    NO_NULL_COUNT = "a page header has no null_count"
    NULL_COUNT_OUT_OF_RANGE = "a page header's null_count is out of range"
    NULL_COUNT_DIFFERS = "a page header's null_count differs from its levels"
    NO_MIN_MAX = "a page header has no min_value/max_value"
    UNDECODABLE_BOUND = "a page header's min or max cannot be decoded for this type"
    # Pages no index can describe, or rows that do not add up: the exact scan says which.
    UNINDEXABLE_PAGES = "the pages cannot be indexed as their headers describe them"
