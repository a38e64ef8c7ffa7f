"""Naming: the file name an indexed copy of a table's data file gets, next to the original.

Table formats forbid overwriting a logged file, so every copy gets a new name of its own.
"""
from __future__ import annotations

import hashlib
import posixpath
import re

from pageindex.index.bloom.options import BloomOptions
from pageindex.index.marker import marker_value, options_key
from pageindex.version import __version__

SUFFIX = ".parquet"
TAG = ".pageindex-"
# A copy's name since options are part of it: the digest, then the options tag.
_COPY = re.compile(r"\.pageindex-[0-9a-f]{16}-([0-9a-f]{8})\.parquet$")
# What a copy's name adds to its source's stem, with or without the options tag (older versions).
_ADDED = re.compile(r"\.pageindex-[0-9a-f]{16}(?:-[0-9a-f]{8})?$")


def options_tag(truncate_length: int, trust_page_stats: bool, bloom: BloomOptions = BloomOptions(),
                chunk_statistics: bool = True) -> str:
    """Eight hex digits naming the options that shape an index (index.marker.options_key)."""
    key = options_key(truncate_length, trust_page_stats, bloom, chunk_statistics)
    return hashlib.sha256(key.encode()).hexdigest()[:8]


def indexed_name(path: str, size: int, truncate_length: int, trust_page_stats: bool,
                 bloom: BloomOptions = BloomOptions(), chunk_statistics: bool = True) -> str:
    """`<stem>.pageindex-<hash>-<options tag>.parquet` for the file `path` of `size` bytes.

    Deterministic, so a rerun after a failed commit rewrites its own orphan instead of leaving
    another; the hash covers everything the output bytes depend on (the source and the marker),
    so two runs can only ever write the same name with the same bytes (the hash of a copy's copy
    covers the copy's path, so it differs from the copy's own). The options tag lets a
    later run with the same options tell, from the table's metadata alone, that the file needs
    nothing (indexed_with).
    """
    marker = marker_value(__version__, truncate_length, trust_page_stats, bloom, chunk_statistics=chunk_statistics)
    digest = hashlib.sha256(f"{path}\0{size}\0{marker}".encode())
    stem = path[:-len(SUFFIX)] if path.endswith(SUFFIX) else path
    stem = _ADDED.sub("", stem)  # a copy of a copy (--force, other options) does not grow its name
    tag = options_tag(truncate_length, trust_page_stats, bloom, chunk_statistics)
    return f"{stem}{TAG}{digest.hexdigest()[:16]}-{tag}{SUFFIX}"


def indexed_with(path: str) -> str | None:
    """The options tag in the name of a copy indexed_name gave, None for any other file (copies
    named by versions before the tag included)."""
    match = _COPY.search(posixpath.basename(path))
    return match.group(1) if match else None
