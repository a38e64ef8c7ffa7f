"""Page index reader: decode existing ColumnIndex and OffsetIndex blocks of a file into views.

Used by inspect, verify and lookup (with the bloom filters beside them); it works on indexes written by any writer.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, TypeVar

from pageindex.errors import MalformedFileError, PageIndexError
from pageindex.format.footer import ChunkMeta, Footer
from pageindex.format.parquet_thrift import ColumnIndex, OffsetIndex, PageLocation
from pageindex.format.thrift import Struct, TList, decode_struct
from pageindex.index.bloom.blob import BloomFilter, parse_filter, read_filter
from pageindex.io.storage import Source

# Bytes between index blocks read along with them rather than in a request of their own.
SPREAD_SLACK = 1 << 20
T = TypeVar("T")


@dataclass(frozen=True)
class PageLocationView:
    offset: int
    compressed_page_size: int
    first_row_index: int


@dataclass(frozen=True)
class OffsetIndexView:
    pages: tuple[PageLocationView, ...]
    unencoded_byte_array_data_bytes: tuple[int, ...] | None


@dataclass(frozen=True)
class ColumnIndexView:
    null_pages: tuple[bool, ...]
    min_values: tuple[bytes, ...]
    max_values: tuple[bytes, ...]
    boundary_order: int
    null_counts: tuple[int, ...] | None
    repetition_level_histograms: tuple[int, ...] | None
    definition_level_histograms: tuple[int, ...] | None
    nan_counts: tuple[int, ...] | None

    def __len__(self) -> int:
        return len(self.null_pages)


@dataclass(frozen=True)
class IndexBytes:
    """The file's bytes from its first index block to the end of its last, read at once."""

    offset: int
    data: bytes

    def block(self, location: tuple[int, int]) -> bytes | None:
        start = location[0] - self.offset
        return self.data[start:start + location[1]] if 0 <= start and start + location[1] <= len(self.data) else None


def read_index_bytes(source: Source, footer: Footer, bloom_filters: bool = False) -> IndexBytes | None:
    """Every index block of the file (and, if asked, every bloom filter of known length) in one
    read, where they lie together (as writers put them, between the data and the footer), or none
    when the footer's tail read holds them; None where they are spread out or there are none."""
    blocks = [loc for row in footer.chunks for c in row
              for loc in (c.offset_index, c.column_index, bloom_span(c) if bloom_filters else None)
              if loc is not None]
    if not blocks:
        return None
    start, end = min(o for o, _ in blocks), max(o + n for o, n in blocks)
    if footer.held_offset <= start and end <= footer.held_offset + len(footer.held):
        return IndexBytes(footer.held_offset, footer.held)
    if end - start > 2 * sum(n for _, n in blocks) + SPREAD_SLACK:
        return None
    return IndexBytes(start, source.read(start, end - start, "index"))


def _list(s: Struct, field_id: int, kind: type, what: str) -> tuple | None:
    value = s.get(field_id)
    if value is None:
        return None
    if not isinstance(value, TList) or not all(isinstance(v, kind) for v in value.items):
        raise MalformedFileError(f"{what} is not a list of {kind.__name__}")
    return value.items


def _read_block(source: Source, chunk: ChunkMeta, location: tuple[int, int] | None, what: str,
                held: IndexBytes | None, view: Callable[[Struct], T]) -> T | None:
    """The chunk's index block at `location` (from `held` where it holds it) decoded whole and
    made a view; None where the chunk has no such block. Errors name the file, row group and column."""
    if location is None:
        return None
    offset, length = location
    try:
        raw = held.block(location) if held is not None else None
        if raw is None:
            raw = source.read(offset, length, "index")
        try:
            block, end = decode_struct(raw)
        except PageIndexError as err:
            raise MalformedFileError(f"{what}: {err.reason}", offset=offset) from None
        if end != len(raw):
            raise MalformedFileError(f"{what} is {end} bytes, its location says {len(raw)}", offset=offset)
        return view(block)
    except PageIndexError as err:
        raise err.located(path=source.path, row_group=chunk.row_group, column=chunk.leaf.dotted) from None


def _offset_index(block: Struct) -> OffsetIndexView:
    raw_pages = _list(block, OffsetIndex.PAGE_LOCATIONS, Struct, "OffsetIndex.page_locations")
    if raw_pages is None:
        raise MalformedFileError("OffsetIndex has no page_locations")
    pages = []
    for p in raw_pages:
        fields = (p.get(PageLocation.OFFSET), p.get(PageLocation.COMPRESSED_PAGE_SIZE),
                  p.get(PageLocation.FIRST_ROW_INDEX))
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in fields):
            raise MalformedFileError("PageLocation is missing a field")
        pages.append(PageLocationView(*fields))
    return OffsetIndexView(tuple(pages), _list(block, OffsetIndex.UNENCODED_BYTE_ARRAY_DATA_BYTES, int,
                                               "unencoded_byte_array_data_bytes"))


def _column_index(block: Struct) -> ColumnIndexView:
    null_pages = _list(block, ColumnIndex.NULL_PAGES, bool, "null_pages")
    mins = _list(block, ColumnIndex.MIN_VALUES, bytes, "min_values")
    maxs = _list(block, ColumnIndex.MAX_VALUES, bytes, "max_values")
    order = block.get(ColumnIndex.BOUNDARY_ORDER)
    if null_pages is None or mins is None or maxs is None or not isinstance(order, int):
        raise MalformedFileError("ColumnIndex misses a required field")
    if not len(null_pages) == len(mins) == len(maxs):
        raise MalformedFileError("ColumnIndex lists differ in length")
    return ColumnIndexView(
        null_pages, mins, maxs, order, _list(block, ColumnIndex.NULL_COUNTS, int, "null_counts"),
        _list(block, ColumnIndex.REPETITION_LEVEL_HISTOGRAMS, int, "repetition_level_histograms"),
        _list(block, ColumnIndex.DEFINITION_LEVEL_HISTOGRAMS, int, "definition_level_histograms"),
        _list(block, ColumnIndex.NAN_COUNTS, int, "nan_counts"),
    )


def column_index_of(raw: bytes) -> ColumnIndexView:
    """A ColumnIndex block pageindex has just encoded, as a view."""
    block, _ = decode_struct(raw)
    return _column_index(block)


def read_offset_index(source: Source, chunk: ChunkMeta, held: IndexBytes | None = None) -> OffsetIndexView | None:
    return _read_block(source, chunk, chunk.offset_index, "OffsetIndex", held, _offset_index)


def read_column_index(source: Source, chunk: ChunkMeta, held: IndexBytes | None = None) -> ColumnIndexView | None:
    return _read_block(source, chunk, chunk.column_index, "ColumnIndex", held, _column_index)


def bloom_span(chunk: ChunkMeta) -> tuple[int, int] | None:
    """Where the chunk's bloom filter is, when its length is known (field 15)."""
    if chunk.bloom_filter is None or chunk.bloom_filter[1] is None:
        return None
    return chunk.bloom_filter[0], chunk.bloom_filter[1]


def read_bloom_filter(source: Source, chunk: ChunkMeta, held: IndexBytes | None = None) -> BloomFilter | None:
    """The chunk's bloom filter, from `held` (read_index_bytes with bloom_filters) where it holds it."""
    if chunk.bloom_filter is None:
        return None
    span = bloom_span(chunk)
    raw = held.block(span) if held is not None and span is not None else None
    if raw is None:
        return read_filter(source, *chunk.bloom_filter)
    try:
        return parse_filter(raw, span[1])
    except PageIndexError as err:
        raise err.located(path=source.path, offset=span[0]) from None


IndexPair = tuple[OffsetIndexView | None, ColumnIndexView | None]


def index_spans(chunk: ChunkMeta, column_index: bool = True) -> list[tuple[int, int]]:
    """Where the chunk's OffsetIndex (and ColumnIndex, if asked for) blocks are, as (offset, length)."""
    spans = [chunk.offset_index, chunk.column_index if column_index else None]
    return [span for span in spans if span is not None]


def read_page_indexes(source: Source, chunks: Iterable[ChunkMeta], held: IndexBytes | None = None
                      ) -> dict[tuple[int, int], IndexPair]:
    """The OffsetIndex and ColumnIndex of each chunk, by (row group, column), decoded from `held`
    (read_index_bytes: all blocks in one read) where given; else, on an object store, all their
    blocks are fetched first in a few merged requests, as arrow-rs reads a file's page indexes in
    one ranged read, instead of one request per block."""
    chunks = list(chunks)
    if held is None:
        source.prefetch([span for chunk in chunks for span in index_spans(chunk)], "index")
    try:
        return {(chunk.row_group, chunk.column): (read_offset_index(source, chunk, held),
                                                  read_column_index(source, chunk, held))
                for chunk in chunks}
    finally:
        if held is None:
            source.release_prefetch()
