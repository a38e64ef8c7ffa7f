"""Naming: the file name an indexed copy of a table's data file gets, next to the original.

Table formats forbid overwriting a logged file, so every copy gets a new name of its own.
"""
from __future__ import annotations

import hashlib

from pageindex.index.bloom.options import BloomOptions
from pageindex.index.marker import marker_value
from pageindex.version import __version__

SUFFIX = ".parquet"
TAG = ".pageindex-"


def indexed_name(path: str, size: int, truncate_length: int, trust_page_stats: bool,
                 bloom: BloomOptions = BloomOptions(), chunk_statistics: bool = True) -> str:
    """`<stem>.pageindex-<hash>.parquet` for the file `path` of `size` bytes.

    Deterministic, so a rerun after a failed commit rewrites its own orphan instead of leaving
    another; the hash covers everything the output bytes depend on (the source and the marker),
    so two runs can only ever write the same name with the same bytes.
    """
    marker = marker_value(__version__, truncate_length, trust_page_stats, bloom, chunk_statistics=chunk_statistics)
    digest = hashlib.sha256(f"{path}\0{size}\0{marker}".encode())
    stem = path[:-len(SUFFIX)] if path.endswith(SUFFIX) else path
    return f"{stem}{TAG}{digest.hexdigest()[:16]}{SUFFIX}"
