"""A nested leaf's per-page level facts and extrema straight from its encoded pages: levels counted
by the compiled level kernel, the values after them bounded as a flat leaf's are (scan.encoded).

Only chunks whose every page is plain sailing are read here: anything else (BIT_PACKED levels, a
record split across pages, rows that do not add up) goes to the Arrow path, which judges it.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Callable, TypeVar

import numpy as np

from pageindex.errors import MalformedFileError
from pageindex.format.column_order import Order
from pageindex.format.footer import ChunkMeta
from pageindex.format.parquet_thrift import Encoding, PageType
from pageindex.scan.compiled import compiled
from pageindex.scan.encoded import Kernels, PageBodies, PageExtrema, Scanner, Unread, kernels
from pageindex.scan.page_levels import PageLevels
from pageindex.scan.page_walk import ChunkPages, Page

T = TypeVar("T")


def level_kernels() -> ModuleType | None:
    """The compiled level kernel, or None for Arrow's decode (see pageindex.scan.compiled)."""
    return compiled("level_kernels")


def nested_extrema(chunk: ChunkMeta, order: Order, pages: ChunkPages, rows: int
                   ) -> tuple[PageLevels, PageExtrema] | None:
    """The nested chunk's page levels and extrema, or None to leave it to the Arrow path: a page
    beyond this path, or anything the Arrow path would report (its pages hold other than `rows`
    rows, a page starts inside a record). `pages` must hold their bytes."""
    values, levels = kernels(), level_kernels()
    if values is None or levels is None:
        return None
    found = _unless_unread(lambda: NestedScanner(values, levels, chunk, order, pages).run_nested())
    return found if found is not None and int(found[0].rows.sum()) == rows else None


def nested_levels_counted(chunk: ChunkMeta, pages: ChunkPages, rows: int) -> PageLevels | None:
    """The nested chunk's page levels alone (no value is read), or None to leave them to the
    Arrow decode, on the same terms as nested_extrema. `pages` must hold their bytes."""
    levels = level_kernels()
    if levels is None:
        return None
    found = _unless_unread(lambda: LevelCounter(levels, chunk, pages, PageBodies(chunk.codec)).run())
    return found if found is not None and int(found.rows.sum()) == rows else None


def _unless_unread(run: Callable[[], T]) -> T | None:
    """run(), or None where its pages are left to the Arrow path (which reports what is wrong)."""
    try:
        return run()
    except (MalformedFileError, Unread, MemoryError):
        return None


class NestedScanner(Scanner):
    """One nested chunk's pages, one at a time: levels first, then the values they define."""

    def __init__(self, compiled: Kernels, levels: ModuleType, chunk: ChunkMeta, order: Order,
                 pages: ChunkPages) -> None:
        super().__init__(compiled, chunk, order, pages)
        self.counter = LevelCounter(levels, chunk, pages, self.bodies)

    def run_nested(self) -> tuple[PageLevels, PageExtrema]:
        counts = self.counter.empty()

        def section(i: int, page: Page) -> tuple[np.ndarray, int]:
            values = self.counter.page(page, i, counts, True)
            return values, int(counts.def_h[i, self.max_def])

        extrema = self.bound(section, counts.nulls)
        return counts.levels(), extrema


@dataclass(frozen=True)
class _Counts:
    """Each page's level histograms and nulls, filled page by page."""

    def_h: np.ndarray
    rep_h: np.ndarray
    nulls: np.ndarray
    max_def: int
    max_rep: int

    def levels(self) -> PageLevels:
        return PageLevels(self.rep_h[:, 0].copy(), self.nulls, self.def_h[:, self.max_def].copy(),
                          self.def_h if self.max_def else None, self.rep_h if self.max_rep else None, None)


class LevelCounter:
    """A nested chunk's repetition and definition level streams, counted page by page."""

    def __init__(self, levels: ModuleType, chunk: ChunkMeta, pages: ChunkPages, bodies: PageBodies) -> None:
        self.levels, self.pages, self.bodies = levels, pages, bodies
        self.max_def, self.max_rep = chunk.leaf.max_def, chunk.leaf.max_rep

    def empty(self) -> _Counts:
        n = len(self.pages.pages)
        return _Counts(np.zeros((n, self.max_def + 1), np.int64), np.zeros((n, self.max_rep + 1), np.int64),
                       np.zeros(n, np.int64), self.max_def, self.max_rep)

    def run(self) -> PageLevels:
        counts = self.empty()
        for i, page in enumerate(self.pages.pages):
            self.page(page, i, counts, False)
        return counts.levels()

    def page(self, page: Page, i: int, counts: _Counts, values: bool) -> np.ndarray | None:
        """Count page i's levels into `counts`; its values section (uncompressed) when `values`."""
        def_hist, rep_hist = counts.def_h[i], counts.rep_h[i]
        body = self.pages.body(page)
        count = page.num_values
        if count < 0:
            raise Unread()
        if page.kind == PageType.DATA_PAGE_V2:
            rep_end = page.rep_levels_size
            end = rep_end + page.def_levels_size
            if rep_end < 0 or end < rep_end or end > len(body):
                raise Unread()  # the kernel reads only within buf[:end]
            levels = np.frombuffer(body[:end], np.uint8)
            self._count(levels, 0, rep_end, count, self.max_rep, rep_hist, True)
            self._count(levels, rep_end, end, count, self.max_def, def_hist, False)
            if page.num_rows != rep_hist[0]:
                raise Unread()  # the Arrow path names the page
            counts.nulls[i] = count - def_hist[self.max_def]
            size = page.uncompressed_size - end
            if not values:
                return None  # v2 levels are never compressed: the values need not be either
            if page.is_compressed:
                return self.bodies.body(body[end:], size)
            if len(body) - end != size:
                raise Unread()
            return np.frombuffer(body[end:], np.uint8)
        if page.kind != PageType.DATA_PAGE:
            raise Unread()
        whole = self.bodies.body(body, page.uncompressed_size)
        pos = self._v1_block(whole, 0, page.rep_encoding, count, self.max_rep, rep_hist, True)
        pos = self._v1_block(whole, pos, page.def_encoding, count, self.max_def, def_hist, False)
        counts.nulls[i] = count - def_hist[self.max_def]
        return whole[pos:]

    def _v1_block(self, whole: np.ndarray, pos: int, encoding: object, count: int, max_level: int,
                  hist: np.ndarray, rep: bool) -> int:
        """Count a v1 page's level block at whole[pos:] (a 4-byte length, then the hybrid
        stream); the position after it."""
        if max_level == 0:
            hist[0] = count
            return pos
        if encoding not in (Encoding.RLE, None) or len(whole) - pos < 4:
            raise Unread()  # BIT_PACKED, or a block the Arrow path reports
        length = int(whole[pos:pos + 4].view("<u4")[0])
        start = pos + 4
        if length > len(whole) - start:
            raise Unread()
        self._count(whole, start, start + length, count, max_level, hist, rep)
        return start + length

    def _count(self, buf: np.ndarray, start: int, end: int, count: int, max_level: int,
               hist: np.ndarray, rep: bool) -> None:
        if max_level == 0:
            hist[0] = count
            return
        first = self.levels.level_histogram(buf, start, end, count, max_level, hist)
        if first < 0 or (rep and first != 0):
            # A page starting inside a record (or a chunk that does): the Arrow path says where.
            raise Unread()
