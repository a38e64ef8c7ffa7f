"""The original file inside a retrofitted one: the prefix a retrofit keeps, its own footer included.

A retrofit appends after the whole original file; a rerun finds where it ends and replaces the rest.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from pageindex.errors import PageIndexError
from pageindex.format.footer import ChunkMeta, Footer, decode_footer, parse_tail
from pageindex.index.marker import recorded_original_length
from pageindex.index.plan import ChunkPlan
from pageindex.index.tail_writer import ChunkIndexes
from pageindex.io.storage import Source


@dataclass(frozen=True)
class KeptPrefix:
    """The bytes [0, length) a retrofit keeps, and the chunks whose kept bloom filter lies past
    them (an earlier retrofit wrote it in the part now replaced): copied into the new tail."""

    length: int
    moved_filters: tuple[ChunkMeta, ...] = ()


def kept_prefix(source: Source, footer: Footer, plan: tuple[tuple[ChunkPlan, ...], ...]) -> KeptPrefix:
    """The original file as our marker records it, when a footer describing the same data ends
    there; else the whole file as it is (never retrofitted, indexed by an older version or by
    another writer, or a marker that does not fit): a reader that holds either length, the
    original's or the current one, goes on reading a whole, valid file."""
    length = recorded_original_length(footer)
    if length is None or not _original_ends_at(source, footer, length):
        return KeptPrefix(footer.file_size)
    moved = tuple(p.chunk for row in plan for p in row
                  if p.bloom is None and p.chunk.bloom_filter is not None and p.chunk.bloom_filter[0] >= length)
    if any(chunk.bloom_filter[1] is None for chunk in moved):  # type: ignore[index]
        return KeptPrefix(footer.file_size)  # a filter whose end is unknown cannot be moved
    return KeptPrefix(length, moved)


def with_moved_filters(source: Source, kept: KeptPrefix, indexes: list[list[ChunkIndexes]]) -> None:
    """Give each chunk in kept.moved_filters its filter's bytes, written anew in the tail."""
    for chunk in kept.moved_filters:
        offset, length = chunk.bloom_filter  # type: ignore[misc]
        raw = source.read(offset, length, "index")
        row = indexes[chunk.row_group]
        row[chunk.column] = replace(row[chunk.column], bloom_filter=raw)


def _original_ends_at(source: Source, footer: Footer, length: int) -> bool:
    """Whether a valid footer ends at `length`, before the current one, describing the same row
    groups and column chunks (a copied marker, e.g. in a file rewritten with its metadata, must not
    cut a file short)."""
    if not 12 <= length <= footer.footer_start:
        return False
    try:
        meta_length = parse_tail(source.read(length - 8, 8, "footer"), length, source.path)
        original = decode_footer(source.read(length - 8 - meta_length, meta_length, "footer"), length, source.path)
    except PageIndexError:
        return False
    return (original.leaves, original.row_group_rows) == (footer.leaves, footer.row_group_rows) and all(
        _same_chunk(a, b) and a.start + a.total_compressed_size <= original.footer_start
        for row_a, row_b in zip(original.chunks, footer.chunks) for a, b in zip(row_a, row_b))


def _same_chunk(a: ChunkMeta, b: ChunkMeta) -> bool:
    return (a.leaf, a.codec, a.num_values, a.data_page_offset, a.dictionary_page_offset, a.total_compressed_size) \
        == (b.leaf, b.codec, b.num_values, b.data_page_offset, b.dictionary_page_offset, b.total_compressed_size)
