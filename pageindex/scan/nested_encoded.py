"""A nested leaf's per-page level facts and extrema straight from its encoded pages: levels counted
by the compiled level kernel, the values after them bounded as a flat leaf's are (scan.encoded).

Only chunks whose every page is plain sailing are read here: anything else (BIT_PACKED levels, a
record split across pages, rows that do not add up) goes to the Arrow path, which judges it.
"""
from __future__ import annotations

from types import ModuleType

import numpy as np

from pageindex.errors import MalformedFileError
from pageindex.format.column_order import Order
from pageindex.format.footer import ChunkMeta
from pageindex.format.parquet_thrift import Encoding, PageType
from pageindex.scan.compiled import compiled, unsaved
from pageindex.scan.encoded import PageExtrema, Scanner, Unread, kernels
from pageindex.scan.page_levels import PageLevels
from pageindex.scan.page_walk import ChunkPages, Page


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
    try:
        found = NestedScanner(values, levels, chunk, order, pages).run_nested()
    except (MalformedFileError, Unread, MemoryError):
        return None
    except OSError as err:  # numba could not save a kernel it compiled (as in scan.encoded)
        unsaved(err)
        return None
    return found if int(found[0].rows.sum()) == rows else None


class NestedScanner(Scanner):
    """One nested chunk's pages, one at a time: levels first, then the values they define."""

    def __init__(self, compiled: ModuleType, levels: ModuleType, chunk: ChunkMeta, order: Order,
                 pages: ChunkPages) -> None:
        super().__init__(compiled, chunk, order, pages)
        self.levels = levels
        self.max_rep = chunk.leaf.max_rep

    def run_nested(self) -> tuple[PageLevels, PageExtrema]:
        n = len(self.pages.pages)
        def_h = np.zeros((n, self.max_def + 1), np.int64)
        rep_h = np.zeros((n, self.max_rep + 1), np.int64)
        nulls = np.zeros(n, np.int64)

        def section(i: int, page: Page) -> tuple[np.ndarray, int]:
            values = self._levels(page, def_h[i], rep_h[i])
            defined = int(def_h[i, self.max_def])
            nulls[i] = page.num_values - defined
            return values, defined

        extrema = self.bound(section, nulls)
        levels = PageLevels(rep_h[:, 0].copy(), nulls, def_h[:, self.max_def].copy(),
                            def_h if self.max_def else None, rep_h if self.max_rep else None, None)
        return levels, extrema

    def _levels(self, page: Page, def_hist: np.ndarray, rep_hist: np.ndarray) -> np.ndarray:
        """Count the page's levels into the two histograms; its values section (uncompressed)."""
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
            size = page.uncompressed_size - end
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
