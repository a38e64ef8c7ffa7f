"""The key-value entry pageindex adds to a footer: what it records, and files recognized by it.

No timestamp is recorded, so the same input and options always give byte-identical output.
"""
from __future__ import annotations

from pageindex.format.footer import Footer

MARKER_KEY = "pageindex"


def marker_value(version: str, truncate_length: int, trust_page_stats: bool = False) -> str:
    """What the key-value entry records: no timestamp, so output stays deterministic."""
    value = f"version={version};truncate_length={truncate_length}"
    return value + ";trust_page_stats=true" if trust_page_stats else value


def is_fully_indexed(footer: Footer) -> bool:
    """Every chunk has an OffsetIndex, and a ColumnIndex unless pageindex left it out on purpose."""
    ours = footer.key_value(MARKER_KEY) is not None
    return all(
        c.has_offset_index and (c.has_column_index or ours)
        for row in footer.chunks for c in row
    )
