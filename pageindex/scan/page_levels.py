"""Per-page level facts of a chunk: rows, nulls, defined values and level histograms.

Flat columns get them from page headers and value validity; nested ones decode their levels.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa

from pageindex.errors import MalformedFileError
from pageindex.format.compression import decompress
from pageindex.format.footer import ChunkMeta
from pageindex.format.parquet_thrift import Encoding, PageType
from pageindex.scan.level_streams import decode_hybrid, v1_bit_packed_levels, v1_hybrid_block
from pageindex.scan.page_walk import ChunkPages, Page


@dataclass(frozen=True)
class PageLevels:
    """Per data page counts, as numpy int64 arrays of length = number of pages."""

    rows: np.ndarray
    nulls: np.ndarray | None  # None until known (flat columns learn it from the values)
    defined: np.ndarray | None
    def_histograms: np.ndarray | None  # pages x (max_def + 1)
    rep_histograms: np.ndarray | None  # pages x (max_rep + 1)
    split_record_page: int | None  # first page not starting at a row boundary

    @property
    def first_rows(self) -> np.ndarray:
        """The chunk's row at which each page starts."""
        starts = np.zeros(len(self.rows), dtype=np.int64)
        np.cumsum(self.rows[:-1], out=starts[1:])
        return starts


@dataclass(frozen=True)
class ValueSection:
    """A data page's values without its levels: what the page would hold for a flat, required
    leaf. Still compressed with the chunk's codec only where the (v2) page keeps it that way."""

    data: memoryview
    count: int  # defined values
    encoding: int
    compressed: bool  # as a v2 page's header says
    decompressed: bool  # a v1 page's, decompressed here (levels and values share its compression)
    uncompressed_size: int


def needs_level_decoding(chunk: ChunkMeta) -> bool:
    """Flat leaves (max_def <= 1, no repetition) can be counted without decoding levels."""
    return chunk.leaf.max_rep > 0 or chunk.leaf.max_def > 1


def flat_levels(pages: ChunkPages) -> PageLevels:
    """Rows per page of a non-repeated leaf: v1 pages hold one value per row, v2 say so."""
    rows = []
    for page in pages.pages:
        if page.kind == PageType.DATA_PAGE_V2 and page.num_rows != page.num_values:
            raise MalformedFileError(
                f"v2 page of a flat column has {page.num_rows} rows but {page.num_values} values",
                offset=page.offset,
            )
        rows.append(page.num_values)
    return PageLevels(np.array(rows, dtype=np.int64), None, None, None, None, None)


def flat_counts(levels: PageLevels, array: pa.ChunkedArray, max_def: int) -> PageLevels:
    """Fill in nulls, defined counts and the def histogram of a flat leaf from its values."""
    if array.null_count:
        # Per-page slices count their nulls from the validity bitmap: no per-value array.
        nulls = np.array([array.slice(int(s), int(n)).null_count for s, n in zip(levels.first_rows, levels.rows)],
                         dtype=np.int64)
    else:
        nulls = np.zeros(len(levels.rows), dtype=np.int64)
    return with_nulls(levels, nulls, max_def)


def with_nulls(levels: PageLevels, nulls: np.ndarray, max_def: int) -> PageLevels:
    """A flat leaf's rows completed with its per-page null counts, and what follows from them."""
    defined = levels.rows - nulls
    hist = None
    if max_def == 1:
        hist = np.empty((len(nulls), 2), np.int64)  # as np.stack would make it, at a fraction of its cost
        hist[:, 0], hist[:, 1] = nulls, defined
    return PageLevels(levels.rows, nulls, defined, hist, None, None)


LEVEL_GROUP = 1 << 18


def nested_levels(chunk: ChunkMeta, pages: ChunkPages, with_values: bool = False
                  ) -> tuple[PageLevels, tuple[ValueSection, ...] | None]:
    """Decode each page's levels to count rows, nulls and defined values exactly; with
    `with_values`, also hand back each page's values section (v1 pages are decompressed once
    here, so the values need not be decompressed again). Pages are decoded in runs of about
    LEVEL_GROUP levels: one Arrow call per run, and a run's levels are dropped once counted."""
    leaf = chunk.leaf
    rows, def_h, rep_h = [], [], []
    sections: list[ValueSection] = []
    split = None
    for group in _page_groups(pages.pages):
        laid = [_layout(chunk, pages, page) for page in group]
        reps = _decoded(leaf.max_rep, [lay.rep for lay in laid], group)
        dfns = _decoded(leaf.max_def, [lay.dfn for lay in laid], group)
        for page, lay, rep, dfn in zip(group, laid, reps, dfns):
            def_hist = _histogram(dfn, leaf.max_def, page.num_values)
            rep_hist = _histogram(rep, leaf.max_rep, page.num_values)
            starts = int(rep_hist[0])
            if leaf.max_rep and page.num_values and rep[0] != 0:
                if page is pages.pages[0]:
                    raise MalformedFileError(
                        f"chunk starts with repetition level {rep[0]}, not at a record",
                        offset=page.offset)
                split = len(rows) if split is None else split
            if page.kind == PageType.DATA_PAGE_V2 and page.num_rows != starts:
                raise MalformedFileError(
                    f"v2 page says {page.num_rows} rows but its levels start {starts}",
                    offset=page.offset,
                )
            rows.append(starts)
            def_h.append(def_hist)
            rep_h.append(rep_hist)
            if with_values:
                sections.append(replace(lay.section, count=int(def_hist[leaf.max_def])))
    n = len(pages.pages)
    def_hists = np.array(def_h, dtype=np.int64).reshape(n, leaf.max_def + 1)
    defined = def_hists[:, leaf.max_def]
    levels = PageLevels(
        np.array(rows, dtype=np.int64),
        np.array([p.num_values for p in pages.pages], dtype=np.int64) - defined,
        defined,
        def_hists if leaf.max_def else None,
        np.array(rep_h, dtype=np.int64).reshape(n, leaf.max_rep + 1) if leaf.max_rep else None,
        split,
    )
    return levels, tuple(sections) if with_values else None


def _page_groups(pages: Sequence[Page]) -> Iterator[Sequence[Page]]:
    """Consecutive pages of about LEVEL_GROUP levels together (a bigger page alone)."""
    start = total = 0
    for i, page in enumerate(pages):
        if i > start and total + page.num_values > LEVEL_GROUP:
            yield pages[start:i]
            start, total = i, 0
        total += page.num_values
    if start < len(pages):
        yield pages[start:]


# A page's levels of one kind: its hybrid stream, levels already decoded (BIT_PACKED), or None
# where the maximum level is 0 (every level is 0, nothing is stored).
Levels = memoryview | np.ndarray | None


@dataclass(frozen=True)
class _Layout:
    rep: Levels
    dfn: Levels
    section: ValueSection  # count still 0: known once the levels are decoded


def _layout(chunk: ChunkMeta, pages: ChunkPages, page: Page) -> _Layout:
    """Where the page's level streams and values section are."""
    leaf, count = chunk.leaf, page.num_values
    try:
        if page.kind == PageType.DATA_PAGE_V2:
            body = pages.body(page)
            end = page.rep_levels_size + page.def_levels_size  # within the body: checked by the walk
            rep = body[: page.rep_levels_size] if leaf.max_rep else None
            dfn = body[page.rep_levels_size : end] if leaf.max_def else None
            compressed, decompressed, size = page.is_compressed, False, page.uncompressed_size - end
        else:
            body = memoryview(decompress(chunk.codec, pages.body(page), page.uncompressed_size))
            rep, pos = _v1_levels(page.rep_encoding, body, 0, leaf.max_rep, count)
            dfn, end = _v1_levels(page.def_encoding, body, pos, leaf.max_def, count)
            compressed, decompressed, size = False, True, len(body) - end
    except MalformedFileError as err:
        raise err.located(offset=page.offset) from None
    return _Layout(rep, dfn, ValueSection(body[end:], 0, page.value_encoding, compressed,
                                          decompressed, size))


def _v1_levels(encoding: object, body: memoryview, pos: int, max_level: int, count: int
               ) -> tuple[Levels, int]:
    """v1 pages name their level encoding; RLE is the norm, BIT_PACKED the deprecated form."""
    if max_level == 0:
        return None, pos
    if encoding == Encoding.BIT_PACKED:
        return v1_bit_packed_levels(body, pos, max_level, count)
    if encoding in (Encoding.RLE, None):
        return v1_hybrid_block(body, pos)
    raise MalformedFileError(f"level encoding {encoding} is not RLE or BIT_PACKED")


def _decoded(max_level: int, levels: Sequence[Levels], group: Sequence[Page]
             ) -> list[np.ndarray | None]:
    """Each page's levels, its hybrid streams decoded together."""
    streams = [(data, page.num_values) for data, page in zip(levels, group)
               if isinstance(data, memoryview)]
    if not streams:
        return list(levels)
    try:
        flat = decode_hybrid(streams, max_level)
    except MalformedFileError as err:
        raise _first_bad_page(max_level, levels, group, err) from None
    pieces = iter(np.split(flat, np.cumsum([count for _, count in streams])[:-1]))
    return [next(pieces) if isinstance(data, memoryview) else data for data in levels]


def _first_bad_page(max_level: int, levels: Sequence[Levels], group: Sequence[Page],
                    err: MalformedFileError) -> MalformedFileError:
    """The error located at the first page whose stream fails on its own."""
    for data, page in zip(levels, group):
        if not isinstance(data, memoryview):
            continue
        try:
            decode_hybrid([(data, page.num_values)], max_level)
        except MalformedFileError as own:
            return own.located(offset=page.offset)
    return err.located(offset=group[0].offset)


def _histogram(levels: np.ndarray | None, max_level: int, count: int) -> np.ndarray:
    """How many of `count` levels have each value 0..max_level (np.bincount would first copy them
    widened to int64)."""
    hist = np.empty(max_level + 1, dtype=np.int64)
    for level in range(1, max_level + 1):
        hist[level] = np.count_nonzero(levels == level) if max_level > 1 else np.count_nonzero(levels)
    hist[0] = count - int(hist[1:].sum())
    return hist
