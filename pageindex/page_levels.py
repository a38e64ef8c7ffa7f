"""Per-page level facts of a chunk: rows, nulls, defined values and level histograms.

Flat columns get them from page headers and value validity; nested ones decode their levels.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .compression import decompress
from .errors import MalformedFileError
from .footer import ChunkMeta
from .levels import read_v1_bit_packed_levels, read_v1_levels, read_v2_levels
from .page_walk import DATA_PAGE_V2, PH, ChunkPages, Page

RLE, BIT_PACKED = 3, 4


@dataclass(frozen=True)
class PageLevels:
    """Per data page counts, as numpy int64 arrays of length = number of pages."""

    rows: np.ndarray
    nulls: np.ndarray | None  # None until known (flat columns learn it from the values)
    defined: np.ndarray | None
    def_histograms: np.ndarray | None  # pages x (max_def + 1)
    rep_histograms: np.ndarray | None  # pages x (max_rep + 1)
    split_record_page: int | None  # first page not starting at a row boundary


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
        if page.kind == DATA_PAGE_V2 and page.num_rows != page.num_values:
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
        starts = np.concatenate(([0], np.cumsum(levels.rows)[:-1]))
        nulls = np.array([array.slice(int(s), int(n)).null_count for s, n in zip(starts, levels.rows)],
                         dtype=np.int64)
    else:
        nulls = np.zeros(len(levels.rows), dtype=np.int64)
    defined = levels.rows - nulls
    hist = np.stack([nulls, defined], axis=1) if max_def == 1 else None
    return PageLevels(levels.rows, nulls, defined, hist, None, None)


def nested_levels(chunk: ChunkMeta, pages: ChunkPages, keep_values: bool = False
                  ) -> tuple[PageLevels, tuple[ValueSection, ...] | None]:
    """Decode each page's levels to count rows, nulls and defined values exactly; with
    `keep_values`, also hand back each page's values section (v1 pages are decompressed once
    here, so the values need not be decompressed again)."""
    leaf = chunk.leaf
    rows, nulls, defined, def_h, rep_h = [], [], [], [], []
    sections: list[ValueSection] = []
    split = None
    for i, page in enumerate(pages.pages):
        rep, def_hist, section = _page_levels(chunk, pages, page)
        if leaf.max_rep > 0:
            starts = int(np.count_nonzero(rep == 0))
            if page.num_values and rep[0] != 0:
                if i == 0:
                    raise MalformedFileError(
                        f"chunk starts with repetition level {rep[0]}, not at a record",
                        offset=page.offset)
                split = i if split is None else split
            if page.kind == DATA_PAGE_V2 and page.num_rows != starts:
                raise MalformedFileError(
                    f"v2 page says {page.num_rows} rows but its levels start {starts}",
                    offset=page.offset,
                )
        else:
            starts = page.num_values
        rows.append(starts)
        defined.append(section.count)
        nulls.append(page.num_values - section.count)
        def_h.append(def_hist)
        rep_h.append(np.bincount(rep, minlength=leaf.max_rep + 1)[: leaf.max_rep + 1])
        if keep_values:
            sections.append(section)
    n = len(pages.pages)
    levels = PageLevels(
        np.array(rows, dtype=np.int64),
        np.array(nulls, dtype=np.int64),
        np.array(defined, dtype=np.int64),
        np.array(def_h, dtype=np.int64).reshape(n, leaf.max_def + 1) if leaf.max_def else None,
        np.array(rep_h, dtype=np.int64).reshape(n, leaf.max_rep + 1) if leaf.max_rep else None,
        split,
    )
    return levels, tuple(sections) if keep_values else None


def _page_levels(chunk: ChunkMeta, pages: ChunkPages, page: Page
                 ) -> tuple[np.ndarray, np.ndarray, ValueSection]:
    """The page's repetition levels, its definition-level histogram and its values section
    (whose count, the defined values, is the histogram's top bin)."""
    leaf, count = chunk.leaf, page.num_values
    try:
        if page.kind == DATA_PAGE_V2:
            body = pages.body(page)
            end = page.rep_levels_size + page.def_levels_size
            rep = read_v2_levels(body[: page.rep_levels_size], leaf.max_rep, count)
            dfn = read_v2_levels(body[page.rep_levels_size : end], leaf.max_def, count)
            compressed, decompressed, size = page.is_compressed, False, page.uncompressed_size - end
        else:
            body = memoryview(decompress(chunk.codec, pages.body(page), page.uncompressed_size))
            header = page.header.get(PH.DATA_V1)
            rep, pos = _v1_reader(header.get(PH.V1_REP_ENCODING))(body, 0, leaf.max_rep, count)
            dfn, end = _v1_reader(header.get(PH.V1_DEF_ENCODING))(body, pos, leaf.max_def, count)
            compressed, decompressed, size = False, True, len(body) - end
    except MalformedFileError as err:
        raise err.located(offset=page.offset) from None
    def_hist = np.bincount(dfn, minlength=leaf.max_def + 1)[: leaf.max_def + 1]
    section = ValueSection(body[end:], int(def_hist[leaf.max_def]), page.value_encoding, compressed,
                           decompressed, size)
    return rep, def_hist, section


def _v1_reader(encoding: object):
    """v1 pages name their level encoding; RLE is the norm, BIT_PACKED the deprecated form."""
    if encoding == BIT_PACKED:
        return read_v1_bit_packed_levels
    if encoding in (RLE, None):
        return read_v1_levels
    raise MalformedFileError(f"level encoding {encoding} is not RLE or BIT_PACKED")
