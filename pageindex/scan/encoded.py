"""Page extrema straight from a flat chunk's encoded pages: null counts from the definition levels,
each page's least and greatest value from PLAIN values or dictionary indices, no values decoded.

DELTA_* and BYTE_STREAM_SPLIT pages are decoded a page at a time by pageindex.scan.delta_values.
The compiled kernels (pageindex.scan.hybrid_kernels and plain_kernels, built into the wheel) do the
streams; where they cannot load, or for any chunk or page this path does not read, the caller
decodes the chunk with Arrow instead. PAGEINDEX_SCAN_KERNEL=arrow forces Arrow for every chunk,
=compiled insists on them.
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from types import ModuleType
from typing import Callable, ClassVar

import numpy as np

from pageindex.errors import MalformedFileError
from pageindex.format.column_order import Kind, Order
from pageindex.format.compression import decompress
from pageindex.format.thrift import uleb128
from pageindex.format.footer import ChunkMeta
from pageindex.format.parquet_thrift import (
    CompressionCodec,
    Encoding,
    PageType,
    Type,
)
# ENV and the choices stay importable from here (tests, the bench and users' scripts name them so).
from pageindex.scan.compiled import ARROW, AUTO, COMPILED, ENV, compiled  # noqa: F401
from pageindex.scan import delta_values
from pageindex.scan.page_levels import needs_level_decoding
from pageindex.scan.page_walk import DICTIONARY_ENCODINGS, ChunkPages, Page

# Fixed-width values as numpy reads them little-endian, by physical type and signedness.
_NUMBERS = {(Type.INT32, Kind.SIGNED): "<i4", (Type.INT32, Kind.UNSIGNED): "<u4",
            (Type.INT64, Kind.SIGNED): "<i8", (Type.INT64, Kind.UNSIGNED): "<u8",
            (Type.FLOAT, Kind.FLOAT): "<f4", (Type.DOUBLE, Kind.FLOAT): "<f8"}
# A byte-array dictionary is ranked once (then each value is a rank lookup) when the chunk has at
# least this many values per entry; a bigger one is not (each value is then compared as bytes).
RANK_BELOW = 16


@dataclass(frozen=True)
class PageExtrema:
    """A flat chunk's per-page facts found without decoding its values: null counts, and each
    page's least and greatest value as `values` (two per page holding values, none for a null
    page: `counts`), which bound the page exactly as all its values would. A float page holding
    NaN has a NaN among its two."""

    nulls: np.ndarray
    values: np.ndarray | list[bytes]  # numbers: an array of the column's dtype; byte arrays: the bytes
    counts: np.ndarray
    unencoded: np.ndarray | None  # BYTE_ARRAY: per page, the bytes of its values


@dataclass(frozen=True)
class Kernels:
    """The compiled kernels a flat chunk's scan calls, from their two modules: hybrid_kernels
    (definition levels, dictionary indices) and plain_kernels (PLAIN values, dictionary pages)."""

    level_zeros: Callable
    index_values: Callable
    index_ranks: Callable
    index_bytes: Callable
    plain_integers: Callable
    plain_bytes: Callable
    entry_spans: Callable
    ranked_entries: Callable


def kernels() -> Kernels | None:
    """The compiled kernels, or None for Arrow's decode (see pageindex.scan.compiled)."""
    hybrid, plain = compiled("hybrid_kernels"), compiled("plain_kernels")
    return None if hybrid is None or plain is None else _joined(hybrid, plain)


@functools.cache
def _joined(hybrid: ModuleType, plain: ModuleType) -> Kernels:
    """The two modules' kernels as one (asked for per chunk, so joined once)."""
    return Kernels(hybrid.level_zeros, hybrid.index_values, hybrid.index_ranks, hybrid.index_bytes,
                   plain.plain_integers, plain.plain_bytes, plain.entry_spans, plain.ranked_entries)


def readable(chunk: ChunkMeta, order: Order) -> bool:
    """Whether this path may bound the chunk, from the footer alone: a leaf of INT32, INT64,
    FLOAT or DOUBLE, or of a BYTE_ARRAY compared byte-wise, under its type order; and the kernels
    are there (for a nested leaf, repeated or below optional groups, the level kernel too: see
    scan.nested_encoded)."""
    leaf = chunk.leaf
    if order.total_order or (needs_level_decoding(chunk) and compiled("level_kernels") is None):
        return False
    fits = ((leaf.physical_type, order.kind) in _NUMBERS
            or (leaf.physical_type == Type.BYTE_ARRAY and order.kind is Kind.BYTES))
    return fits and kernels() is not None


def page_extrema(chunk: ChunkMeta, order: Order, pages: ChunkPages) -> PageExtrema | None:
    """The chunk's per-page extrema, or None when a page is beyond this path (another encoding,
    a writer quirk, a stream or page it cannot read): Arrow then decodes the chunk, and reports
    whatever is wrong with it. `pages` must hold their bytes."""
    compiled = kernels()
    if compiled is None or needs_level_decoding(chunk):
        return None  # nested leaves: scan.nested_encoded reads their levels first
    try:
        return Scanner(compiled, chunk, order, pages).run()
    except (MalformedFileError, Unread, MemoryError):
        # MemoryError: a header claiming a page far bigger than its bytes could hold; Arrow's
        # decode of the chunk reports it as what it is.
        return None


class Unread(Exception):
    """A page this path does not read."""


@functools.cache
def _into() -> dict:
    """cramjam's decompressors that write into a given buffer, by codec (none without cramjam):
    its snappy runs at up to twice the speed of pyarrow's on these pages (bench/RESULTS-scan.md)."""
    try:
        import cramjam
    except ImportError:
        return {}
    # zstd: pyarrow's is as fast on these pages, and cramjam's gains nothing from the buffer.
    return {CompressionCodec.SNAPPY: cramjam.snappy.decompress_raw_into}


# Decompressed pages and dictionaries go into buffers each thread keeps from chunk to chunk (up to
# this size): fresh memory for every chunk would be faulted in afresh each time.
KEEP_BYTES = 16 << 20
_BUFFERS = threading.local()


def _buffer(slot: str, size: int) -> np.ndarray:
    held = getattr(_BUFFERS, slot, None)
    if held is not None and len(held) >= size:
        return held[:size]
    fresh = np.empty(size, np.uint8)
    if size <= KEEP_BYTES:
        setattr(_BUFFERS, slot, fresh)
    return fresh


class PageBodies:
    """A chunk's page bodies decompressed into this thread's buffers (exactly their declared
    size, as format.compression checks it; anything else is left to that check)."""

    def __init__(self, codec: int) -> None:
        self.codec = codec
        self.into = _into().get(codec)

    def body(self, data: memoryview, size: int, slot: str = "page") -> np.ndarray:
        """The decompressed body, valid until the next one of its `slot` on this thread."""
        if self.codec == CompressionCodec.UNCOMPRESSED and len(data) == size:
            return np.frombuffer(data, np.uint8)  # read in place
        if self.into is None or size <= 0 or (self.codec == CompressionCodec.SNAPPY and not _snappy_says(data, size)):
            return np.frombuffer(decompress(self.codec, data, size), np.uint8)
        out = _buffer(slot, size)
        try:
            written = self.into(data, out)
        except Exception:  # noqa: BLE001 - cramjam's errors: the checked decompress names the fault
            written = -1
        if written != size:
            return np.frombuffer(decompress(self.codec, data, size), np.uint8)
        return out


def _snappy_says(data: memoryview, size: int) -> bool:
    """The snappy stream's length preamble states `size` (the raw decoder does not check it)."""
    preamble = uleb128(data, 0, 5)
    return preamble is not None and preamble[0] == size


class Scanner:
    """One chunk's pages, one at a time."""

    def __init__(self, compiled: Kernels, chunk: ChunkMeta, order: Order, pages: ChunkPages) -> None:
        self.k, self.chunk, self.pages = compiled, chunk, pages
        leaf = chunk.leaf
        self.bytes = leaf.physical_type == Type.BYTE_ARRAY
        self.dtype = None if self.bytes else np.dtype(_NUMBERS[(leaf.physical_type, order.kind)])
        self.max_def = leaf.max_def
        self.dictionary: _Dictionary | None = None
        self.bodies = PageBodies(chunk.codec)
        self.no_lengths = np.zeros(0, np.int64)

    def run(self) -> PageExtrema:
        nulls = np.zeros(len(self.pages.pages), np.int64)

        def section(i: int, page: Page) -> tuple[np.ndarray | memoryview, int]:
            values, page_nulls = self._sections(page)
            nulls[i] = page_nulls
            return values, page.num_values - page_nulls

        return self.bound(section, nulls)

    def bound(self, section: Callable[[int, Page], tuple[np.ndarray | memoryview, int]],
              nulls: np.ndarray) -> PageExtrema:
        """Each page's two extrema, from the values section and defined values `section(i, page)`
        gives (which fills nulls[i])."""
        n = len(self.pages.pages)
        counts = np.zeros(n, np.int64)
        unencoded = np.zeros(n, np.int64) if self.bytes else None
        found: list = []
        if self.pages.dictionary is not None:
            self._dictionary()  # read even if no page refers to it, as Arrow reads it (and may refuse it)
        for i, page in enumerate(self.pages.pages):
            values, defined = section(i, page)
            if defined == 0:
                continue
            low, high, size = self._extrema(page, values, defined)
            found += (low, high)
            counts[i] = 2
            if unencoded is not None:
                unencoded[i] = size
        return PageExtrema(nulls, self._array(found), counts, unencoded)

    def _sections(self, page: Page) -> tuple[np.ndarray | memoryview, int]:
        """The page's values section (uncompressed) and its nulls, counted from its definition
        levels (no closure or numpy scalar per page: the Python between compiled calls holds the
        GIL that another thread's scan waits for)."""
        body = self.pages.body(page)
        if page.kind == PageType.DATA_PAGE_V2:
            end = page.rep_levels_size + page.def_levels_size
            if page.rep_levels_size or (self.max_def == 0 and page.def_levels_size):
                raise Unread()
            values = body[end:]
            size = page.uncompressed_size - end
            if page.is_compressed:
                values = self.bodies.body(values, size)
            elif len(values) != size:
                raise Unread()  # a writer that says uncompressed and compresses: Arrow's to judge
            levels = np.frombuffer(body[:end], np.uint8)
            return values, self._nulls(levels, 0, len(levels), page.num_values)
        if page.kind != PageType.DATA_PAGE:
            raise Unread()
        whole = self.bodies.body(body, page.uncompressed_size)
        if self.max_def == 0:
            return whole, 0
        if page.def_encoding not in (Encoding.RLE, None) or len(whole) < 4:
            raise Unread()
        length = int.from_bytes(whole[:4], "little")
        if 4 + length > len(whole):
            raise Unread()
        return whole[4 + length:], self._nulls(whole, 4, 4 + length, page.num_values)

    def _nulls(self, levels: np.ndarray, start: int, end: int, count: int) -> int:
        if self.max_def == 0:
            return 0
        zeros = self.k.level_zeros(levels, start, end, count)
        if zeros < 0:
            raise Unread()
        return int(zeros)

    def _extrema(self, page: Page, values, defined: int) -> tuple:
        """The least and greatest of the page's `defined` values, and (byte arrays) their bytes."""
        buf = values if isinstance(values, np.ndarray) else np.frombuffer(values, np.uint8)
        encoding = page.value_encoding
        if encoding == Encoding.PLAIN:
            return self._plain(buf, defined)
        if encoding in DICTIONARY_ENCODINGS and not self.bytes:
            entries = self._dictionary().ordered
            if len(entries) == 0:
                raise Unread()
            low, high, nan, status = self.k.index_values(buf, 0, len(buf), defined, entries)
            if status < 0:
                raise Unread()
            # A NaN among the page's values stays among its two, so it is seen (R7).
            return (low, self.dtype.type(np.nan) if nan else high, 0)
        if encoding in DICTIONARY_ENCODINGS:  # byte arrays: by rank where ranked, else as bytes
            dictionary = self._dictionary()
            if dictionary.ranked:
                low, high, size, status = self.k.index_ranks(buf, 0, len(buf), defined, dictionary.rank,
                                                             dictionary.lengths)
            else:
                low, high, size, status = self.k.index_bytes(buf, 0, len(buf), defined, dictionary.ordered.body,
                                                             dictionary.ordered.starts, dictionary.lengths)
            if status < 0:
                raise Unread()
            return dictionary.by_rank(low), dictionary.by_rank(high), int(size)
        if encoding in delta_values.DELTA_ENCODINGS:
            return self._delta(encoding, buf, defined)
        raise Unread()

    def _delta(self, encoding: int, buf: np.ndarray, defined: int) -> tuple:
        """DELTA_* and BYTE_STREAM_SPLIT values (scan.delta_values): numbers made PLAIN and
        bounded as PLAIN ones are, byte arrays' extrema found as PLAIN ones' are."""
        found = (delta_values.byte_arrays(encoding, buf, defined) if self.bytes
                 else delta_values.numbers(encoding, buf, defined, self.dtype))
        if found is None:
            raise Unread()
        return found if self.bytes else self._plain(found, len(found) // self.dtype.itemsize)

    def _plain(self, buf: np.ndarray, defined: int) -> tuple:
        if self.bytes:
            low, low_len, high, high_len, size, status = self.k.plain_bytes(buf, 0, len(buf), defined)
            if status < 0:
                raise Unread()
            least = bytes(buf[low:low + low_len])
            # One value both least and greatest (a page of one big value) is held once.
            greatest = least if (high, high_len) == (low, low_len) else bytes(buf[high:high + high_len])
            return least, greatest, int(size)
        if len(buf) < defined * self.dtype.itemsize:
            raise Unread()
        numbers = buf[: defined * self.dtype.itemsize].view(self.dtype)
        if self.dtype.kind in "iu":
            low, high = self.k.plain_integers(numbers)
            return low, high, 0
        # numpy's min and max propagate NaN: a page holding one reports it.
        return numbers.min(), numbers.max(), 0

    def _dictionary(self) -> "_Dictionary":
        if self.dictionary is None:
            page = self.pages.dictionary
            if page is None or page.kind != PageType.DICTIONARY_PAGE:
                raise Unread()
            if page.encoding not in (Encoding.PLAIN, Encoding.PLAIN_DICTIONARY):
                raise Unread()
            body = self.bodies.body(self.pages.body(page), page.uncompressed_size, "dictionary")
            count = page.num_values
            self.dictionary = self._bytes_dictionary(body, count) if self.bytes else self._number_dictionary(body, count)
        return self.dictionary

    def _number_dictionary(self, body: np.ndarray, count: int) -> "_Dictionary":
        if count < 0 or len(body) < count * self.dtype.itemsize:
            raise Unread()
        # Not ranked: the kernel compares the entries a page refers to as numbers.
        return _Dictionary(_Dictionary.NOT_RANKED, self.no_lengths, body[: count * self.dtype.itemsize].view(self.dtype))

    def _bytes_dictionary(self, body: np.ndarray, count: int) -> "_Dictionary":
        if count < 0 or count * 4 > len(body):  # each entry has its 4-byte length at least
            raise Unread()
        starts, lengths, status = self.k.entry_spans(body, count)
        if status < 0:
            raise Unread()
        if count * RANK_BELOW > self.chunk.num_values:
            # Too many entries to rank for the values: the kernel compares the ones pages refer to.
            return _Dictionary(_Dictionary.NOT_RANKED, lengths, _Spans(body, starts, lengths))
        # Ranked where the page holds them, by a compiled sort: no Arrow array and call per chunk.
        by_rank = self.k.ranked_entries(body, starts, lengths)
        return _Dictionary(_ranks(by_rank), lengths, _Spans(body, starts[by_rank], lengths[by_rank]))

    def _array(self, found: list) -> np.ndarray | list[bytes]:
        return found if self.bytes else np.array(found, dtype=self.dtype)


@dataclass(frozen=True)
class _Dictionary:
    NOT_RANKED: ClassVar[np.ndarray] = np.zeros(0, np.int64)  # entries compared as they are
    rank: np.ndarray  # byte arrays: per entry, its place in the column's order
    lengths: np.ndarray  # byte arrays: per entry, its length
    ordered: object  # byte arrays: the entries (_Spans), in rank order when ranked; numbers: the entries

    @property
    def ranked(self) -> bool:
        return self.rank is not self.NOT_RANKED

    def by_rank(self, r: int):
        return self.ordered[r]


@dataclass(frozen=True)
class _Spans:
    """Byte-array entries where the dictionary page holds them (on this thread's buffer), in
    the order of `starts`."""

    body: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray

    def __getitem__(self, i: int) -> bytes:
        start = int(self.starts[i])
        return self.body[start: start + int(self.lengths[i])].tobytes()


def _ranks(by_rank: np.ndarray) -> np.ndarray:
    rank = np.empty(len(by_rank), np.int64)
    rank[by_rank] = np.arange(len(by_rank), dtype=np.int64)
    return rank
