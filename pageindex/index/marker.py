"""The key-value entry pageindex adds to a footer: what it records, and files recognized by it.

Records the options that shape the output (never a timestamp, so output stays byte-identical).
"""
from __future__ import annotations

from urllib.parse import quote

from pageindex.format.column_order import order_for
from pageindex.format.footer import ChunkMeta, Footer
from pageindex.index.bloom.options import AUTO, NONE, BloomOptions

MARKER_KEY = "pageindex"


def marker_value(version: str, truncate_length: int, trust_page_stats: bool = False,
                 bloom: BloomOptions = BloomOptions()) -> str:
    """What the key-value entry records: no timestamp, so output stays deterministic. Options
    left at what earlier versions always used (no trusted statistics, no filters) are not
    written, so such files keep the bytes they had."""
    fields = [f"version={version}", f"truncate_length={truncate_length}"]
    if trust_page_stats:
        fields.append("trust_page_stats=true")
    if bloom.columns != NONE:
        fields += [f"bloom_filter={_bloom_spec(bloom)}", f"bloom_fpp={bloom.fpp!r}", f"bloom_max_bytes={bloom.max_bytes}"]
    return ";".join(fields)


def _bloom_spec(bloom: BloomOptions) -> str:
    """auto, or the columns quoted so that no name can break the marker's "," ";" "=" syntax."""
    return AUTO if bloom.auto else ",".join(quote(name, safe="") for name in bloom.named)


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
