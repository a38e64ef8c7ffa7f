"""Page walk: read a column chunk and list its pages from the page headers, validating each one.

Handles writer quirks (dictionary offset 0, undersized chunk metadata) and verifies page CRCs.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Callable, Protocol

import numpy as np

from pageindex.errors import MalformedFileError, PageIndexError, ThriftTruncatedError, UnsupportedFileError
from pageindex.format.compression import check_expansion
from pageindex.format.footer import DEFAULT_MAX_PAGE_BYTES, ChunkMeta
from pageindex.format.parquet_thrift import (
    DataPageHeader,
    DataPageHeaderV2,
    DictionaryPageHeader,
    Encoding,
    PageHeader,
    PageType,
    Type,
)
from pageindex.format.thrift import Struct, decode_struct
from pageindex.io.storage import Source, StoredRange
from pageindex.scan.compiled import compiled

# No page header may claim more bytes than this (the format's int32 sizes); a run's own, lower
# limit on what it reads (max_page_bytes) is checked once the chunk's pages are listed.
MAX_PAGE_BYTES = 1 << 31
# Bytes a page's decoded form takes per value at least (int16 levels and int32 dictionary
# indices, allocated per value): a page whose count at this size passes max_page_bytes is refused.
BYTES_PER_VALUE = 4
# A windowed walk moves its window on when fewer bytes than this are left for the next page
# header (headers carry statistics, so they are not all small, but are rarely bigger).
HEADER_ROOM = 64 << 10
# Bytes read at a time by a walk of the headers alone (most headers are far smaller).
HEADER_WINDOW = 4 << 10
# PLAIN_DICTIONARY is v1's name for the same dictionary-index encoding.
DICTIONARY_ENCODINGS = (Encoding.PLAIN_DICTIONARY, Encoding.RLE_DICTIONARY)



@dataclass(frozen=True)
class Page:
    """One page of a chunk: where it is and what its header says."""

    kind: int
    offset: int  # absolute file offset of the page header
    header_size: int
    compressed_size: int
    uncompressed_size: int
    num_values: int  # level entries (data pages) or dictionary entries
    num_rows: int | None  # v2 only
    num_nulls: int | None  # v2 only
    def_levels_size: int  # v2 only: bytes of definition levels, stored uncompressed
    rep_levels_size: int
    is_compressed: bool
    encoding: int | None  # as the sub-header states it: a data page's values, a dictionary's entries
    def_encoding: int | None  # v1 data pages: the definition levels' encoding
    rep_encoding: int | None  # v1 data pages: the repetition levels' encoding
    crc: int | None
    raw_header: bytes  # the header as stored

    @cached_property
    def header(self) -> Struct:
        """The whole header, decoded when first asked for (the compiled walk reads only the
        fields above)."""
        return decode_struct(self.raw_header)[0]

    @property
    def size(self) -> int:
        return self.header_size + self.compressed_size

    @property
    def is_data(self) -> bool:
        return self.kind in (PageType.DATA_PAGE, PageType.DATA_PAGE_V2)

    @property
    def value_encoding(self) -> int | None:
        """A data page's value encoding as its header states it (None for other pages)."""
        return self.encoding if self.is_data else None


@dataclass(frozen=True)
class ChunkPages:
    """A chunk's bytes and the pages found in them."""

    start: int  # absolute file offset of `data[0]`
    data: bytes | memoryview | StoredRange  # a StoredRange once left on storage (see `stored`)
    dictionary: Page | None
    pages: tuple[Page, ...]  # data pages in file order
    metadata_too_small: bool  # pages ran past total_compressed_size (writer quirk)

    @property
    def end(self) -> int:
        return self.start + len(self.data)

    @property
    def fully_dictionary(self) -> bool:
        """Every data page refers to the dictionary (the writer never fell back to plain pages)."""
        return self.dictionary is not None and all(p.value_encoding in DICTIONARY_ENCODINGS for p in self.pages)

    def without_data(self) -> "ChunkPages":
        """The page list alone, once the bytes have been handed on (frees them early)."""
        # Built directly: dataclasses.replace costs more than the rest of a small chunk's bookkeeping.
        return ChunkPages(self.start, b"", self.dictionary, self.pages, self.metadata_too_small)

    @property
    def is_stored(self) -> bool:
        return isinstance(self.data, StoredRange)

    def stored(self, source: Source) -> "ChunkPages":
        """The same pages with their bytes left on storage, to be read again by whoever slices
        them (a synthesized file for Arrow): body and raw no longer work."""
        return self if self.is_stored else replace(self, data=source.stored(self.start, len(self.data)))

    def loaded(self) -> "ChunkPages":
        """The same pages with their bytes in memory (read now if they were left on storage)."""
        return replace(self, data=self.data[:]) if self.is_stored else self

    def body(self, page: Page) -> memoryview:
        begin = page.offset - self.start + page.header_size
        return memoryview(self.data)[begin : begin + page.compressed_size]

    def raw(self, page: Page) -> memoryview:
        begin = page.offset - self.start
        return memoryview(self.data)[begin : begin + page.size]


def walk_chunk(source: Source, chunk: ChunkMeta, limit: int, verify_crc: bool = True,
               window: int | None = None, max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES) -> ChunkPages:
    """Read `chunk` and walk its pages; `limit` is the first byte that cannot belong to it
    (Footer.chunk_end). With a `window`, the chunk is read that many bytes at a time (more for
    a bigger page), into memory the source reuses (read_view), and its bytes are left on storage
    (ChunkPages.stored): for a chunk too big to hold. A page bigger than `max_page_bytes`, or
    claiming more than its bytes can hold, is refused before anything is decoded (check_budget)."""
    return _located(source, chunk, limit, max_page_bytes,
                    lambda: _ChunkReader(source, chunk, limit, verify_crc, window))


def walk_headers(source: Source, chunk: ChunkMeta, limit: int,
                 max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES) -> ChunkPages:
    """The chunk's pages from their headers alone, read a small window at a time (no page body is
    read, no CRC checked): the pages come without data."""
    return _located(source, chunk, limit, max_page_bytes, lambda: _HeaderReader(source, chunk, limit))


class _PageReader(Protocol):
    def page_at(self, pos: int) -> Page:
        """The page whose header starts at file offset `pos`, read and checked."""

    def data_until(self, end: int) -> bytes | memoryview | StoredRange:
        """The chunk's bytes from its start to `end`, as ChunkPages holds them."""

    def compiled_walk(self, chunk: ChunkMeta) -> ChunkPages | None:
        """The chunk's pages walked by compiled code, or None for the walk in Python."""


def _located(source: Source, chunk: ChunkMeta, limit: int, max_page_bytes: int,
             reader: Callable[[], _PageReader]) -> ChunkPages:
    try:
        pages = _walk(chunk, limit, reader)
        check_budget(pages, chunk, max_page_bytes)
        return pages
    except PageIndexError as err:
        raise err.located(path=source.path, row_group=chunk.row_group, column=chunk.leaf.dotted) from None


def _walk(chunk: ChunkMeta, limit: int, reader: Callable[[], _PageReader]) -> ChunkPages:
    """The chunk's pages, from its start until they hold its values; a dictionary page may only
    come first. `reader` is called once the chunk is known to have pages."""
    start = chunk.start
    if chunk.num_values == 0:
        return ChunkPages(start, b"", None, (), False)
    if not 4 <= start < limit:
        where = "where another chunk starts" if 4 <= start == limit else "outside the data region"
        raise MalformedFileError(f"chunk starts at {start}, {where}", offset=start)
    pages_of = reader()
    walked = pages_of.compiled_walk(chunk)
    if walked is not None:
        return walked
    pos, values = start, 0
    dictionary: Page | None = None
    pages: list[Page] = []
    while values < chunk.num_values:
        page = pages_of.page_at(pos)
        if page.kind == PageType.DICTIONARY_PAGE:
            if pages or dictionary is not None:
                raise MalformedFileError("dictionary page after the first page", offset=page.offset)
            dictionary = page
        elif page.is_data:
            values += page.num_values
            pages.append(page)
        pos = page.offset + page.size
    if values != chunk.num_values:
        raise MalformedFileError(
            f"pages hold {values} values but the chunk metadata says {chunk.num_values}"
        )
    too_small = pos - start > chunk.total_compressed_size
    return ChunkPages(start, pages_of.data_until(pos), dictionary, tuple(pages), too_small)


class _ChunkReader:
    """Pages read with their bodies: the whole chunk in one read, or through a window."""

    __slots__ = ("source", "start", "limit", "verify_crc", "window", "declared_end", "base", "data")

    def __init__(self, source: Source, chunk: ChunkMeta, limit: int, verify_crc: bool, window: int | None
                 ) -> None:
        self.source, self.start, self.limit = source, chunk.start, limit
        self.verify_crc, self.window = verify_crc, window
        self.declared_end = min(chunk.start + chunk.total_compressed_size, limit)
        size = self.declared_end - self.start
        # Kept as read (no copy); extended only for the rare undersized-chunk quirk.
        self.base = self.start  # file offset of data[0]
        self.data = source.read_view(self.start, min(size, window or size))

    def page_at(self, pos: int) -> Page:
        if self.window is not None and self.base < pos \
                and self.base + len(self.data) < min(pos + HEADER_ROOM, self.declared_end):
            # A new window before a header is cut off: growing a window would copy it.
            self._move_window(pos, min(self.window, self.declared_end - pos))
        page, _, self.data = decode_page_header(self.source, self.data, self.base, pos, self.limit)
        end = pos + page.size
        if end > self.base + len(self.data):
            if self.window is None:
                self.data = bytes(self.data) + self.source.read(self.base + len(self.data),
                                                                end - self.base - len(self.data))
            else:
                self._move_window(pos, max(page.size, min(self.window, self.declared_end - pos)))
        if self.verify_crc:
            _check_crc(page, memoryview(self.data)[end - self.base - page.compressed_size : end - self.base])
        return page

    def _move_window(self, pos: int, size: int) -> None:
        self.data = b""  # the source reuses its buffer only once no view of it is left
        self.base, self.data = pos, self.source.read_view(pos, size)

    def data_until(self, end: int) -> bytes | memoryview | StoredRange:
        if self.window is not None:
            return self.source.stored(self.start, end - self.start)
        return self.data if end - self.start == len(self.data) else self.data[:end - self.start]

    def compiled_walk(self, chunk: ChunkMeta) -> ChunkPages | None:
        """The whole chunk's pages from one call of the compiled header walk (header_kernel),
        when it is there and the chunk is all in memory; None for any chunk it leaves to the
        walk in Python (which then reads the same bytes)."""
        walker = compiled("header_kernel") if self.window is None else None
        if walker is None:
            return None
        buf = np.frombuffer(self.data, np.uint8)
        rows = np.empty((16, walker.COLUMNS), np.int64)
        while True:
            n, end, status = walker.walk(buf, chunk.num_values, rows)
            if status != walker.FULL:
                break
            rows = np.empty((len(rows) * 8, walker.COLUMNS), np.int64)
        if status:
            return None
        dictionary, pages = _pages_of(rows[:n].tolist(), self.data, self.start, walker)
        if self.verify_crc:
            for page in ([dictionary] if dictionary else []) + pages:
                if page.crc is not None:
                    begin = page.offset - self.start + page.header_size
                    _check_crc(page, memoryview(self.data)[begin : begin + page.compressed_size])
        return ChunkPages(self.start, self.data_until(self.start + end), dictionary, tuple(pages), False)


class _HeaderReader:
    """Pages read from their headers alone, HEADER_WINDOW bytes at a time."""

    __slots__ = ("source", "limit", "declared_end", "window", "window_start")

    def __init__(self, source: Source, chunk: ChunkMeta, limit: int) -> None:
        self.source, self.limit = source, limit
        self.declared_end = min(chunk.start + chunk.total_compressed_size, limit)
        self.window: bytes | memoryview = b""
        self.window_start = chunk.start

    def page_at(self, pos: int) -> Page:
        if pos < self.limit and not self.window_start <= pos < self.window_start + len(self.window):
            # Windows stop at the chunk's declared end; a header cut off there is read on.
            end = self.declared_end if pos + 16 <= self.declared_end else self.limit
            self.window = self.source.read(pos, min(HEADER_WINDOW, end - pos), "header")
            self.window_start = pos
        page, _, self.window = decode_page_header(self.source, self.window, self.window_start, pos,
                                                  self.limit, "header")
        return page

    def data_until(self, end: int) -> bytes:
        return b""

    def compiled_walk(self, chunk: ChunkMeta) -> None:
        return None  # headers a window at a time: the walk in Python


def check_budget(pages: ChunkPages, chunk: ChunkMeta, max_page_bytes: int) -> None:
    """Refuse, before any page is decompressed or decoded, a page larger than `max_page_bytes`
    (compressed or not), one whose value count would decode to more than that, one whose
    compressed bytes cannot expand to the size it claims, and a dictionary holding more entries
    than its bytes can."""
    for page in ([pages.dictionary] if pages.dictionary is not None else []) + list(pages.pages):
        size = max(page.uncompressed_size, page.compressed_size)
        if size > max_page_bytes:
            raise UnsupportedFileError(f"page of {size} bytes, above the limit of {max_page_bytes} "
                                       "(--max-page-bytes)", offset=page.offset)
        if page.num_values * BYTES_PER_VALUE > max_page_bytes:
            raise UnsupportedFileError(f"page of {page.num_values} values, above the limit of "
                                       f"{max_page_bytes // BYTES_PER_VALUE} ({max_page_bytes} bytes at "
                                       f"{BYTES_PER_VALUE} a value, --max-page-bytes)", offset=page.offset)
        stored = page.compressed_size - page.def_levels_size - page.rep_levels_size
        produced = page.uncompressed_size - page.def_levels_size - page.rep_levels_size
        if page.is_compressed:
            check_expansion(chunk.codec, stored, produced, page.offset)
        if page.kind == PageType.DICTIONARY_PAGE:
            _check_dictionary(page, chunk)


# Bytes a PLAIN value of each physical type takes at least (a byte array: its length).
_PLAIN_WIDTHS = {Type.INT32: 4, Type.INT64: 8, Type.INT96: 12, Type.FLOAT: 4, Type.DOUBLE: 8,
                 Type.BYTE_ARRAY: 4}


def _check_dictionary(page: Page, chunk: ChunkMeta) -> None:
    """A PLAIN dictionary's entries take at least a fixed width each (a length for byte arrays)."""
    leaf = chunk.leaf
    width = leaf.type_length or 0 if leaf.physical_type == Type.FIXED_LEN_BYTE_ARRAY \
        else _PLAIN_WIDTHS.get(leaf.physical_type, 0)
    if page.num_values * width > page.uncompressed_size:
        raise MalformedFileError(f"dictionary page claims {page.num_values} entries, more than its "
                                 f"{page.uncompressed_size} bytes hold", offset=page.offset)


def decode_page_header(source: Source, buf: bytes | memoryview, buf_start: int, offset: int, limit: int,
                       purpose: str = "data") -> tuple[Page, Struct, bytes | memoryview]:
    """The page whose header starts at file `offset`, decoded from `buf` (the file's bytes from
    `buf_start`), which grows by further reads (4x larger each time, never past `limit`) while
    the header is cut off. Returns the page, its header and the (maybe longer) buffer."""
    if offset >= limit:
        raise MalformedFileError("chunk ends before all its values were read", offset=offset)
    pos = offset - buf_start
    more = 1 << 16
    while True:
        try:
            header, end = decode_struct(buf, pos)
            break
        except ThriftTruncatedError:
            if buf_start + len(buf) >= limit:
                raise MalformedFileError("page header runs past the chunk's region",
                                         offset=offset) from None
            wanted = min(more, limit - buf_start - len(buf))
            extra = source.read(buf_start + len(buf), wanted, purpose)
            if len(extra) < wanted:
                # The file ends before the region its footer describes: it shrank after the
                # footer was read (or lies about its size). Asking again would get nothing more.
                raise MalformedFileError("page header runs past the end of the file", offset=offset)
            buf = bytes(buf) + extra
            more *= 4
        except PageIndexError as err:
            raise MalformedFileError(f"bad page header: {err.reason}", offset=offset) from None
    page = page_from_header(header, offset, end - pos)
    if page.offset + page.size > limit:
        raise MalformedFileError(
            f"page of {page.compressed_size} bytes runs past the chunk's region", offset=page.offset
        )
    return page, header, buf


def read_page_header(buf: bytes, pos: int, file_offset: int) -> Page:
    """The page whose header starts at buf[pos] (at `file_offset` in the file); its body must
    lie within `buf`."""
    try:
        header, end = decode_struct(buf, pos)
    except PageIndexError as err:
        raise MalformedFileError(f"bad page header: {err.reason}", offset=file_offset) from None
    page = page_from_header(header, file_offset, end - pos)
    if pos + page.size > len(buf):
        raise MalformedFileError("page runs past the bytes read for it", offset=file_offset)
    return page


def _int(s: Struct | None, field_id: int, what: str, offset: int, lo: int = 0,
         hi: int = MAX_PAGE_BYTES) -> int:
    if not isinstance(s, Struct):
        raise MalformedFileError(f"page header has no valid struct for {what}", offset=offset)
    value = s.get(field_id)
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise MalformedFileError(f"page header {what} is missing or invalid ({value})", offset=offset)
    return value


def page_from_header(header: Struct, offset: int, header_size: int) -> Page:
    """A validated Page from a decoded PageHeader at `offset`."""
    kind = _int(header, PageHeader.TYPE, "type", offset, 0, PageType.DATA_PAGE_V2)
    compressed = _int(header, PageHeader.COMPRESSED_PAGE_SIZE, "compressed_page_size", offset)
    uncompressed = _int(header, PageHeader.UNCOMPRESSED_PAGE_SIZE, "uncompressed_page_size", offset)
    num_rows = num_nulls = None
    def_size = rep_size = 0
    is_compressed = True
    encoding = def_encoding = rep_encoding = None
    if kind == PageType.DATA_PAGE:
        sub = header.get(PageHeader.DATA_PAGE_HEADER)
        num_values = _int(sub, DataPageHeader.NUM_VALUES, "num_values", offset, 0, 1 << 31)
        encoding = sub.get(DataPageHeader.ENCODING)
        def_encoding = sub.get(DataPageHeader.DEFINITION_LEVEL_ENCODING)
        rep_encoding = sub.get(DataPageHeader.REPETITION_LEVEL_ENCODING)
    elif kind == PageType.DATA_PAGE_V2:
        sub = header.get(PageHeader.DATA_PAGE_HEADER_V2)
        num_values = _int(sub, DataPageHeaderV2.NUM_VALUES, "num_values", offset, 0, 1 << 31)
        num_nulls = _int(sub, DataPageHeaderV2.NUM_NULLS, "num_nulls", offset, 0, num_values)
        num_rows = _int(sub, DataPageHeaderV2.NUM_ROWS, "num_rows", offset, 0, num_values)
        def_size = _int(sub, DataPageHeaderV2.DEFINITION_LEVELS_BYTE_LENGTH, "definition_levels_byte_length",
                        offset)
        rep_size = _int(sub, DataPageHeaderV2.REPETITION_LEVELS_BYTE_LENGTH, "repetition_levels_byte_length",
                        offset)
        if def_size + rep_size > compressed:
            raise MalformedFileError("v2 level bytes exceed the page size", offset=offset)
        is_compressed = sub.get(DataPageHeaderV2.IS_COMPRESSED, True) is not False
        encoding = sub.get(DataPageHeaderV2.ENCODING)
    elif kind == PageType.DICTIONARY_PAGE:
        sub = header.get(PageHeader.DICTIONARY_PAGE_HEADER)
        num_values = _int(sub, DictionaryPageHeader.NUM_VALUES, "dictionary num_values", offset, 0, 1 << 31)
        encoding = sub.get(DictionaryPageHeader.ENCODING)
    else:
        num_values = 0
    crc = header.get(PageHeader.CRC)
    page = Page(kind, offset, header_size, compressed, uncompressed, num_values, num_rows,
                num_nulls, def_size, rep_size, is_compressed, encoding, def_encoding, rep_encoding,
                crc if isinstance(crc, int) else None, header.raw if header.raw is not None else b"")
    page.__dict__["header"] = header  # decoded already: the cached_property's slot
    return page


def _pages_of(rows: list[list[int]], data: bytes | memoryview, start: int, walker
              ) -> tuple[Page | None, list[Page]]:
    """Pages from the compiled walk's rows (see header_kernel's columns)."""
    dictionary, pages = None, []
    for (offset, header_size, kind, compressed, uncompressed, num_values, num_rows, num_nulls, def_size,
         rep_size, is_compressed, encoding, def_encoding, rep_encoding, crc, present) in rows:
        page = Page(kind, start + offset, header_size, compressed, uncompressed, num_values,
                    None if num_rows < 0 else num_rows, None if num_nulls < 0 else num_nulls,
                    def_size, rep_size, is_compressed == 1,
                    encoding if present & walker.HAS_ENCODING else None,
                    def_encoding if present & walker.HAS_DEF_ENCODING else None,
                    rep_encoding if present & walker.HAS_REP_ENCODING else None,
                    crc if present & walker.HAS_CRC else None,
                    bytes(data[offset : offset + header_size]))
        if kind == PageType.DICTIONARY_PAGE:
            dictionary = page
        else:
            pages.append(page)
    return dictionary, pages


def _check_crc(page: Page, body: memoryview) -> None:
    expected = page.crc
    if not isinstance(expected, int):
        return
    if zlib.crc32(body) != expected & 0xFFFFFFFF:
        raise MalformedFileError("page CRC mismatch: the page bytes are corrupt", offset=page.offset)
