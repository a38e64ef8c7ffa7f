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
from pageindex.format.parquet_thrift import Encoding, Type
from pageindex.io.storage import Source
from pageindex.scan.page_levels import (
    PageLevels,
    ValueSection,
    flat_counts,
    flat_levels,
    needs_level_decoding,
    nested_levels,
)
from pageindex.scan.page_walk import ChunkPages, walk_chunk
from pageindex.scan.values import (
    BIG_CHUNK,
    bare_path,
    decode,
    decode_columns,
    decode_sections,
    leaf_values,
    sections_head,
    synthesize,
    synthesize_chunks,
)

T = TypeVar("T")
# PLAIN_DICTIONARY is v1's name for the same dictionary-index encoding.
_DICTIONARY_ENCODINGS = (Encoding.PLAIN_DICTIONARY, Encoding.RLE_DICTIONARY)


@dataclass(frozen=True)
class ChunkScan:
    pages: ChunkPages
    levels: PageLevels
    values: pa.ChunkedArray | None  # defined leaf values (maybe dictionary-typed), when decoded

    @property
    def rows(self) -> int:
        return int(self.levels.rows.sum())


def needs_values(chunk: ChunkMeta, order: Order) -> bool:
    """Values are decoded for a ColumnIndex, and for BYTE_ARRAY's unencoded sizes in the
    OffsetIndex; other chunks are only walked and counted."""
    return order.indexable or chunk.leaf.physical_type == Type.BYTE_ARRAY


def scan_chunk(source: Source, footer: Footer, chunk: ChunkMeta, decode: bool) -> ChunkScan:
    """Walk and count; decode values too when `decode` (and the chunk allows an index)."""
    return next(scan_chunks(source, footer, [(chunk, decode)]))


def scan_chunks(source: Source, footer: Footer, requests: Iterable[tuple[ChunkMeta, bool]]
                ) -> Iterator[ChunkScan]:
    """scan_chunk over chunks of one row group, in order. Small chunks are decoded together,
    up to BATCH_BYTES of decoded pages and BATCH_CHUNKS chunks per Arrow read: a wide table pays
    the per-read cost once per batch, not once per column."""
    batch: list[_Walked] = []
    batch_bytes = 0
    for chunk, wanted in requests:
        if batch and (not wanted or chunk.total_compressed_size > BATCH_BYTES // 4):
            # Finish the batch before a big chunk is read, so the two are never held together.
            yield from _finish_batch(source, footer, batch)
            batch_bytes = 0
        walked = _located(source, chunk, lambda: _walk(source, footer, chunk, wanted))
        if batch and (not walked.decode or walked.sections is not None
                      or batch_bytes + walked.decoded_bytes > BATCH_BYTES or len(batch) == BATCH_CHUNKS):
            yield from _finish_batch(source, footer, batch)
            batch_bytes = 0
        if walked.decode:
            batch.append(walked)
            batch_bytes += walked.decoded_bytes
        else:
            yield ChunkScan(walked.pages.without_data(), walked.levels, None)
        del walked  # the batch owns the page bytes now; its synthesized file hands them to Arrow
        if batch and batch[-1].sections is not None:
            # Values sections make a file of their own: it has a row per defined value.
            yield from _finish_batch(source, footer, batch)
            batch_bytes = 0
    yield from _finish_batch(source, footer, batch)


# Arrow holds a page buffer per column while it reads, so a batch is capped in columns too.
BATCH_BYTES = 8 << 20
BATCH_CHUNKS = 16
STRING_BATCH_BYTES = 16 << 20


@dataclass(frozen=True)
class _Walked:
    chunk: ChunkMeta
    pages: ChunkPages
    levels: PageLevels
    decode: bool  # values are wanted and can be had (no record split across pages)
    sections: tuple[ValueSection, ...] | None  # a nested leaf's values, decoded without levels

    @property
    def decoded_bytes(self) -> int:
        return sum(p.uncompressed_size for p in self.pages.pages)

    @property
    def as_dictionary(self) -> bool:
        """Strings whose every data page refers to the dictionary stay indices: bounds and sizes
        come from the dictionary. (After a fallback to plain pages Arrow would hash every value
        into a new dictionary, which costs more than reading them.)"""
        return (self.chunk.leaf.physical_type == Type.BYTE_ARRAY and self.pages.dictionary is not None
                and all(p.value_encoding in _DICTIONARY_ENCODINGS for p in self.pages.pages))

    @property
    def batch_bytes(self) -> int:
        """Plain strings are decoded in row batches of this size (values of other types are
        reduced over one contiguous array)."""
        plain_strings = self.chunk.leaf.physical_type == Type.BYTE_ARRAY and not self.as_dictionary
        return STRING_BATCH_BYTES if plain_strings else BIG_CHUNK

    def without_data(self) -> "_Walked":
        return replace(self, pages=self.pages.without_data(), sections=None)


def _located(source: Source, chunk: ChunkMeta, step: Callable[[], T]) -> T:
    try:
        return step()
    except PageIndexError as err:
        raise err.located(path=source.path, row_group=chunk.row_group, column=chunk.leaf.dotted) from None


def _walk(source: Source, footer: Footer, chunk: ChunkMeta, decode: bool) -> _Walked:
    nested = needs_level_decoding(chunk)
    # A big flat chunk is walked through a window: its levels need no page bytes, and its
    # values are most likely streamed, so reading it whole would fault in fresh memory for nothing.
    windowed = source.local and chunk.total_compressed_size >= STREAM_CHUNK_BYTES and not nested
    pages = walk_chunk(source, chunk, footer.footer_start, window=WALK_WINDOW if windowed else None)
    if nested:
        levels, sections = nested_levels(chunk, pages, keep_values=decode)
    else:
        levels, sections = flat_levels(pages), None
    rows = int(levels.rows.sum())
    expected = footer.row_group_rows[chunk.row_group]
    if rows != expected:
        raise MalformedFileError(f"pages hold {rows} rows but the row group has {expected}")
    decode = decode and levels.split_record_page is None
    if decode and sections is None:
        if _stream(source, pages):
            pages = pages.stored(source)
            source.drop_spare()  # Arrow reads the pages again while it decodes: nothing else is held
        else:
            pages = pages.loaded()
    return _Walked(chunk, pages, levels, decode, sections if decode else None)


def _finish_batch(source: Source, footer: Footer, batch: list[_Walked]) -> Iterator[ChunkScan]:
    """Decode a batch (emptied here: the synthesized file is then the only holder of the page
    bytes, which go once Arrow has decoded them) and yield its scans."""
    if not batch:
        return
    walked = [w.without_data() for w in batch]
    rows = footer.row_group_rows[walked[0].chunk.row_group]
    created_by = footer.created_by_raw
    if len(batch) == 1:
        w, first = batch.pop(), walked[0]
        if w.sections is None:
            file = synthesize([bare_path(w.chunk)], [(w.chunk, w.pages)], rows, created_by)
            del w
            step = partial(decode, file, rows, first.decoded_bytes, first.as_dictionary, first.batch_bytes)
            del file
        else:
            head = _located(source, first.chunk, partial(sections_head, w.chunk, w.pages, w.sections))
            sections = list(w.sections)
            del w
            step = partial(decode_sections, first.chunk, head, sections, created_by, first.as_dictionary,
                           first.batch_bytes)
            del sections  # decode_sections empties the list, freeing each run of sections once decoded
        array = _located(source, first.chunk, step)
        del step
        scan = _located(source, first.chunk, lambda: _finish(first, array))
        del array  # the caller frees the chunk's memory while this generator waits here
        yield scan
        return
    file = synthesize_chunks([(w.chunk, w.pages) for w in batch], rows, created_by)
    batch.clear()
    try:
        arrays: list[pa.ChunkedArray | None] = decode_columns(
            file, len(walked), rows, [i for i, w in enumerate(walked) if w.as_dictionary])
    except MalformedFileError:
        arrays = [None] * len(walked)  # read again one by one below, to name the chunk at fault
    del file
    for i, w in enumerate(walked):
        array, arrays[i] = arrays[i], None  # the caller frees each chunk once done with it
        if array is None:
            yield from _finish_batch(source, footer, [_located(source, w.chunk, lambda: _walk(
                source, footer, w.chunk, True))])
        else:
            scan = _located(source, w.chunk, lambda: _finish(w, array))
            del array
            yield scan


# Local chunks this big are read again from the page cache while Arrow decodes them rather than
# held: the copy costs less than having the chunk and its decoded values in memory together.
STREAM_CHUNK_BYTES = 32 << 20
# Bytes read at a time by a windowed walk (into memory the source reuses, see read_view).
WALK_WINDOW = 8 << 20
# Arrow reads a streamed chunk page by page, a Python call each: a chunk of small pages is held
# instead (the bench's scale case of 40,000 pages of 900 bytes peaked at 372 MiB streamed, 250 held).
STREAM_PAGE_BYTES = 64 << 10


def _stream(source: Source, pages: ChunkPages) -> bool:
    size = len(pages.data)
    return source.local and size >= STREAM_CHUNK_BYTES and size >= STREAM_PAGE_BYTES * len(pages.pages)


def _finish(walked: _Walked, array: pa.ChunkedArray) -> ChunkScan:
    chunk, levels = walked.chunk, walked.levels
    if not needs_level_decoding(chunk):
        levels = flat_counts(levels, array, chunk.leaf.max_def)
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
