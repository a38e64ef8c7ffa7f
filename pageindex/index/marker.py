"""The key-value entry pageindex adds to a footer: what it records, and files recognized by it.

No timestamp is recorded, so the same input and options always give byte-identical output.
"""
from __future__ import annotations

from pageindex.format.column_order import order_for
from pageindex.format.footer import ChunkMeta, Footer

MARKER_KEY = "pageindex"


def marker_value(version: str, truncate_length: int, trust_page_stats: bool = False) -> str:
    """What the key-value entry records: no timestamp, so output stays deterministic."""
    value = f"version={version};truncate_length={truncate_length}"
    return value + ";trust_page_stats=true" if trust_page_stats else value


def is_fully_indexed(footer: Footer) -> bool:
    """Every chunk has an OffsetIndex, and a ColumnIndex unless none could be valid (its column
    has no defined order, e.g. Spark's default INT96 timestamps) or pageindex left it out on
    purpose. Decided from the footer alone: no index block is read."""
    ours = footer.key_value(MARKER_KEY) is not None
    return all(
        c.has_offset_index and (c.has_column_index or ours or not _may_have_column_index(footer, c))
        for row in footer.chunks for c in row
    )


def _may_have_column_index(footer: Footer, chunk: ChunkMeta) -> bool:
    return order_for(chunk.leaf, footer.declared_order(chunk.column)).indexable
