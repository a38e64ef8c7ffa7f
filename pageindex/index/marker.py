"""The key-value entry pageindex adds to a footer: what it records, and files recognized by it.

Records the options that shape the output (never a timestamp, so output stays byte-identical).
"""
from __future__ import annotations

from urllib.parse import quote

from pageindex.format.column_order import order_for
from pageindex.format.footer import ChunkMeta, Footer
from pageindex.index.bloom.options import AUTO, NONE, BloomOptions

MARKER_KEY = "pageindex"


ORIGINAL_LENGTH = "original_length"


def marker_value(version: str, truncate_length: int, trust_page_stats: bool = False,
                 bloom: BloomOptions = BloomOptions(), original_length: int | None = None,
                 chunk_statistics: bool = True) -> str:
    """What the key-value entry records: no timestamp, so output stays deterministic. Options
    left at what earlier versions always used (no trusted statistics, no filters) are not
    written, so such files keep the bytes they had. original_length: where the file as it was
    before any retrofit ends (its own footer kept), so that a rerun replaces only what follows.
    chunk_statistics=False (statistics left untouched) is written as chunk_statistics=kept."""
    fields = [f"version={version}", options_key(truncate_length, trust_page_stats, bloom, chunk_statistics)]
    if original_length is not None:
        fields.append(f"{ORIGINAL_LENGTH}={original_length}")
    return ";".join(fields)


def options_key(truncate_length: int, trust_page_stats: bool = False, bloom: BloomOptions = BloomOptions(),
                chunk_statistics: bool = True) -> str:
    """The options that shape an index, as the marker writes them (without the version and the
    original length): two runs with equal keys build the same index from the same file (the run
    state and a table copy's name compare it: job.state, table.naming)."""
    fields = [f"truncate_length={truncate_length}"]
    if trust_page_stats:
        fields.append("trust_page_stats=true")
    if bloom.columns != NONE:
        fields += [f"bloom_filter={_bloom_spec(bloom)}", f"bloom_fpp={bloom.fpp!r}", f"bloom_max_bytes={bloom.max_bytes}"]
    if not chunk_statistics:
        fields.append("chunk_statistics=kept")
    return ";".join(fields)


def recorded_original_length(footer: Footer) -> int | None:
    """The original length our marker records, if it records one (older versions did not)."""
    value = footer.key_value(MARKER_KEY)
    for item in (value or "").split(";"):
        key, _, number = item.partition("=")
        if key == ORIGINAL_LENGTH and number.isascii() and number.isdigit():
            return int(number)
    return None


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
