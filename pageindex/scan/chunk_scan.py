"""Chunk scan: walk a column chunk's pages, count rows and nulls per page, decode its values.

The shared first half of retrofit and verify: everything that is learned by reading the data.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Callable, Iterable, Iterator, TypeVar

import pyarrow as pa

from pageindex.errors import MalformedFileError, PageIndexError
from pageindex.format.column_order import Order
from pageindex.format.footer import ChunkMeta, Footer
from pageindex.format.parquet_thrift import Type
from pageindex.io.storage import Source
from pageindex.scan.encoded import PageExtrema, page_extrema
from pageindex.scan.nested_encoded import nested_extrema
from pageindex.scan.page_levels import (
    PageLevels,
    ValueSection,
    flat_counts,
    flat_levels,
    needs_level_decoding,
    nested_levels,
    with_nulls,
)
from pageindex.scan.page_walk import ChunkPages, walk_chunk
from pageindex.scan.values import (
    BIG_CHUNK,
    bare_path,
    decode,
    decode_columns,
    decode_sections,
    leaf_column,
    leaf_values,
    sections_head,
    synthesize,
    synthesize_chunks,
)

Result = TypeVar("Result")


@dataclass(frozen=True)
class ChunkScan:
    pages: ChunkPages
    levels: PageLevels
    values: pa.ChunkedArray | None  # defined leaf values (maybe dictionary-typed), when decoded
    extrema: PageExtrema | None = None  # instead of values: each page's extrema, read encoded


def needs_values(chunk: ChunkMeta, order: Order) -> bool:
    """Values are decoded for a ColumnIndex, and for BYTE_ARRAY's unencoded sizes in the
    OffsetIndex; other chunks are only walked and counted."""
    return order.indexable or chunk.leaf.physical_type == Type.BYTE_ARRAY


def scan_chunk(source: Source, footer: Footer, chunk: ChunkMeta, with_values: bool) -> ChunkScan:
    """Walk and count; decode values too when `with_values` (and the chunk allows an index)."""
    return next(scan_chunks(source, footer, [(chunk, with_values)]))


# A request: a chunk, whether its values are wanted, and optionally the order under which its
# page extrema may be read from the encoded pages instead (see scan/encoded.py).
Request = tuple[ChunkMeta, bool] | tuple[ChunkMeta, bool, Order | None]


def scan_chunks(source: Source, footer: Footer, requests: Iterable[Request]) -> Iterator[ChunkScan]:
    """scan_chunk over chunks of one row group, in order. Small chunks are decoded in groups of
    up to GROUP_BYTES of decoded pages and GROUP_CHUNKS chunks per Arrow read: a wide table pays
    the per-read cost once per group, not once per column. A chunk requested with an order gets
    its page extrema from its encoded pages where it can (no values), else it is decoded."""
    group = _Group()
    for chunk, with_values, *encoded in requests:
        order = encoded[0] if encoded and with_values else None
        if group.walked and (not with_values or order is not None or chunk.total_compressed_size > GROUP_BYTES // 4):
            # Finish the group before a big chunk is read, so the two are never held together.
            yield from _decode_group(source, footer, group.take())
        walked = _located(source, chunk, lambda: _walk(source, footer, chunk, with_values, order))
        if isinstance(walked, ChunkScan):  # a nested chunk read from its encoded pages
            yield walked
            continue
        if order is not None and walked.with_values and walked.sections is None:
            found = _extrema(walked, order)
            if found is not None:
                del walked  # its bytes may be the source's reused buffer: free for the next read
                yield found
                continue
        if group.walked and not group.admits(walked):
            yield from _decode_group(source, footer, group.take())
        if walked.with_values:
            group.add(walked)
        else:
            yield ChunkScan(walked.pages.without_data(), walked.levels, None)
        del walked  # the group owns the page bytes now; its synthesized file hands them to Arrow
        if group.walked and group.walked[-1].sections is not None:
            # Values sections make a file of their own: it has a row per defined value.
            yield from _decode_group(source, footer, group.take())
    yield from _decode_group(source, footer, group.take())


# A group is capped by what Arrow holds to decode it (_Walked.held_bytes) and in columns. Each
# read costs a fixed overhead (opening the synthesized file, Arrow's read set-up), so the column
# cap is wide; the byte cap bounds memory (see bench/RESULTS-objstore.md).
GROUP_BYTES = 8 << 20
GROUP_CHUNKS = 256
# Plain strings are decoded in row batches of this many decoded bytes: Arrow grows their buffer
# by doubling.
STRING_ROW_BATCH_BYTES = 16 << 20
# Bytes Arrow holds per decoded value: fixed-width types their width (INT96 becomes a timestamp),
# byte arrays an offset or a dictionary index (their bytes are counted with the pages).
_VALUE_BYTES = {Type.BOOLEAN: 1, Type.INT32: 4, Type.FLOAT: 4, Type.INT64: 8, Type.DOUBLE: 8, Type.INT96: 8,
                Type.BYTE_ARRAY: 4}


def _value_bytes(chunk: ChunkMeta) -> int:
    leaf = chunk.leaf
    if leaf.physical_type == Type.FIXED_LEN_BYTE_ARRAY:
        return leaf.type_length or 0
    return _VALUE_BYTES.get(leaf.physical_type, 0)


@dataclass(frozen=True)
class _Walked:
    chunk: ChunkMeta
    pages: ChunkPages
    levels: PageLevels
    with_values: bool  # values are wanted and can be had (no record split across pages)
    sections: tuple[ValueSection, ...] | None  # a nested leaf's values, decoded without levels

    @property
    def decoded_bytes(self) -> int:
        return sum(p.uncompressed_size for p in self.pages.pages)

    @property
    def held_bytes(self) -> int:
        """What Arrow holds while it decodes the chunk: its pages decompressed, the dictionary
        included, and its values (a dictionary-encoded page of a few bytes can decode to many)."""
        dictionary = self.pages.dictionary.uncompressed_size if self.pages.dictionary else 0
        entries = sum(p.num_values for p in self.pages.pages)  # level entries: at least the values
        return self.decoded_bytes + dictionary + entries * _value_bytes(self.chunk)

    @property
    def as_dictionary(self) -> bool:
        """Strings whose every data page refers to the dictionary stay indices: bounds and sizes
        come from the dictionary. (After a fallback to plain pages Arrow would hash every value
        into a new dictionary, which costs more than reading them.)"""
        return self.chunk.leaf.physical_type == Type.BYTE_ARRAY and self.pages.fully_dictionary

    @property
    def row_batch_bytes(self) -> int:
        """Plain strings are decoded in row batches of this size (values of other types are
        reduced over one contiguous array)."""
        plain_strings = self.chunk.leaf.physical_type == Type.BYTE_ARRAY and not self.as_dictionary
        return STRING_ROW_BATCH_BYTES if plain_strings else BIG_CHUNK

    def without_data(self) -> "_Walked":
        return replace(self, pages=self.pages.without_data(), sections=None)


class _Group:
    """Walked chunks of one row group that wait to be decoded together, in one Arrow read."""

    __slots__ = ("walked", "held_bytes")

    def __init__(self) -> None:
        self.walked: list[_Walked] = []
        self.held_bytes = 0

    def admits(self, walked: _Walked) -> bool:
        return (walked.with_values and walked.sections is None and len(self.walked) < GROUP_CHUNKS
                and self.held_bytes + walked.held_bytes <= GROUP_BYTES)

    def add(self, walked: _Walked) -> None:
        self.walked.append(walked)
        self.held_bytes += walked.held_bytes

    def take(self) -> list[_Walked]:
        """The chunks, leaving the group empty: the list returned is their only holder."""
        walked, self.walked, self.held_bytes = self.walked, [], 0
        return walked


def _located(source: Source, chunk: ChunkMeta, step: Callable[[], Result]) -> Result:
    try:
        return step()
    except PageIndexError as err:
        raise err.located(path=source.path, row_group=chunk.row_group, column=chunk.leaf.dotted) from None


def _extrema(walked: _Walked, order: Order) -> ChunkScan | None:
    """The scan of a flat chunk from its encoded pages, or None to decode it with Arrow."""
    found = page_extrema(walked.chunk, order, walked.pages)
    if found is None:
        return None
    levels = with_nulls(walked.levels, found.nulls, walked.chunk.leaf.max_def)
    return ChunkScan(walked.pages.without_data(), levels, None, found)


def _walk(source: Source, footer: Footer, chunk: ChunkMeta, with_values: bool, order: Order | None = None
          ) -> _Walked | ChunkScan:
    """The chunk walked and counted; with an `order` (its values are wanted and may be bounded
    from its encoded pages), a nested chunk's whole scan where its encoded pages allow."""
    nested = needs_level_decoding(chunk)
    in_memory = order is not None
    # A big flat chunk is walked through a window: its levels need no page bytes, and its
    # values are most likely streamed, so reading it whole would fault in fresh memory for nothing
    # (`in_memory`: its encoded pages are read here, so it is read whole once).
    windowed = (source.local and chunk.total_compressed_size >= STREAM_CHUNK_BYTES and not nested
                and not in_memory)
    pages = walk_chunk(source, chunk, footer.chunk_end(chunk), window=WALK_WINDOW if windowed else None,
                       max_page_bytes=footer.max_page_bytes)
    expected = footer.row_group_rows[chunk.row_group]
    if nested and order is not None:
        found = nested_extrema(chunk, order, pages, expected)
        if found is not None:
            return ChunkScan(pages.without_data(), found[0], None, found[1])
    if nested:
        levels, sections = nested_levels(chunk, pages, with_values=with_values)
    else:
        levels, sections = flat_levels(pages), None
    rows = int(levels.rows.sum())
    if rows != expected:
        raise MalformedFileError(f"pages hold {rows} rows but the row group has {expected}")
    with_values = with_values and levels.split_record_page is None
    if with_values and sections is None:
        if _stream(source, pages) and not in_memory:
            pages = pages.stored(source)
            source.drop_spare()  # Arrow reads the pages again while it decodes: nothing else is held
        else:
            pages = pages.loaded()
    return _Walked(chunk, pages, levels, with_values, sections if with_values else None)


def _decode_group(source: Source, footer: Footer, group: list[_Walked]) -> Iterator[ChunkScan]:
    """Decode a group (emptied here: the synthesized file is then the only holder of the page
    bytes, which go once Arrow has decoded them) and yield its scans."""
    if len(group) == 1:
        yield _decode_one(source, footer, group)
    elif group:
        yield from _decode_together(source, footer, group)


def _decode_one(source: Source, footer: Footer, group: list[_Walked]) -> ChunkScan:
    """The scan of a group's single chunk, decoded by itself."""
    first = group[0].without_data()
    step = _decoder(source, footer, group.pop())
    array = _located(source, first.chunk, step)
    del step
    return _located(source, first.chunk, lambda: _finish(first, array))


def _decoder(source: Source, footer: Footer, walked: _Walked) -> Callable[[], pa.ChunkedArray]:
    """What decodes one chunk's values; it holds the page bytes, this function's caller does not."""
    rows = footer.row_group_rows[walked.chunk.row_group]
    created_by = footer.created_by_raw
    if walked.sections is None:
        file = synthesize([bare_path(walked.chunk)], [(walked.chunk, walked.pages)], rows, created_by)
        return partial(decode, file, rows, walked.decoded_bytes, walked.as_dictionary, walked.row_batch_bytes)
    head = _located(source, walked.chunk, partial(sections_head, walked.chunk, walked.pages, walked.sections))
    # decode_sections empties the list, freeing each run of sections once decoded.
    return partial(decode_sections, walked.chunk, head, list(walked.sections), created_by,
                   walked.as_dictionary, walked.row_batch_bytes)


def _decode_together(source: Source, footer: Footer, group: list[_Walked]) -> Iterator[ChunkScan]:
    """The scans of a group's chunks, decoded in one Arrow read; if that read fails, each chunk is
    walked and decoded again by itself, so that the error names the chunk at fault."""
    walked = [w.without_data() for w in group]
    rows = footer.row_group_rows[walked[0].chunk.row_group]
    file = synthesize_chunks([(w.chunk, w.pages) for w in group], rows, footer.created_by_raw)
    group.clear()
    try:
        arrays: list[pa.ChunkedArray | None] = decode_columns(
            file, len(walked), rows, [i for i, w in enumerate(walked) if w.as_dictionary])
    except MalformedFileError:
        arrays = [None] * len(walked)
    del file
    for i, w in enumerate(walked):
        array, arrays[i] = arrays[i], None  # the caller frees each chunk once done with it
        if array is None:
            # The list is the walk's only holder, so _decode_one can hand its bytes on.
            scan = _decode_one(source, footer, [
                _located(source, w.chunk, partial(_walk, source, footer, w.chunk, True))])
        else:
            scan = _located(source, w.chunk, partial(_finish, w, array))
        del array
        yield scan


# Local chunks this big are read again from the page cache while Arrow decodes them rather than
# held: the copy costs less than having the chunk and its decoded values in memory together.
STREAM_CHUNK_BYTES = 32 << 20
# Bytes read at a time by a windowed walk (into memory the source reuses, see read_view).
WALK_WINDOW = 8 << 20
# Arrow reads a streamed chunk page by page, a Python call each: a chunk of small pages is held
# instead, as streaming it would cost more memory than holding it (see bench/RESULTS.md, scale).
STREAM_PAGE_BYTES = 64 << 10


def _stream(source: Source, pages: ChunkPages) -> bool:
    size = len(pages.data)
    return source.local and size >= STREAM_CHUNK_BYTES and size >= STREAM_PAGE_BYTES * len(pages.pages)


def _finish(walked: _Walked, array: pa.ChunkedArray) -> ChunkScan:
    chunk, levels = walked.chunk, walked.levels
    if not needs_level_decoding(chunk):
        # The leaf's nulls, not its column's: a required struct is never null, its leaf may be.
        levels = flat_counts(levels, leaf_column(array), chunk.leaf.max_def)
    values = leaf_values(array)
    if pa.types.is_dictionary(values.type):
        _check_indices(values)
    if len(values) != int(levels.defined.sum()):
        raise MalformedFileError(
            f"decoded {len(values)} values but the levels define {int(levels.defined.sum())}")
    return ChunkScan(walked.pages, levels, values)


def _check_indices(values: pa.ChunkedArray) -> None:
    """Arrow hands dictionary indices over unchecked; a corrupt one must not index past the end."""
    for part in values.chunks:
        indices = part.indices.to_numpy(zero_copy_only=False)
        if len(indices) and (int(indices.min()) < 0 or int(indices.max()) >= len(part.dictionary)):
            raise MalformedFileError(
                f"a dictionary index is out of range for the {len(part.dictionary)}-entry dictionary")
