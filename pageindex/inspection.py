"""Inspection (`pageindex inspect`): a file's page index per row group, column and page, readable.

Like parquet-cli's column-index command, with bounds rendered by logical type.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from pageindex.errors import PageIndexError
from pageindex.format.column_order import order_for
from pageindex.format.footer import ChunkMeta, Footer, read_footer
from pageindex.format.parquet_thrift import BoundaryOrder, Type
from pageindex.index.kinds import comparable, render
from pageindex.index.marker import MARKER_KEY, is_fully_indexed
from pageindex.index.reader import ColumnIndexView, IndexBytes, read_bloom_filter, read_index_bytes, read_page_indexes
from pageindex.index.soundness import structural_flaws, suspect_writer
from pageindex.io.storage import Source, open_source


@dataclass(frozen=True)
class PageRow:
    index: int
    first_row: int
    size: int
    null_count: int | None
    min: str
    max: str
    null_page: bool


@dataclass(frozen=True)
class BloomView:
    """A chunk's bloom filter: its bytes in the file (header + bitset), the distinct values it
    holds (estimated from its set bits: the file does not store the count) and the false positive
    rate those bits give; `error` says why it could not be read."""

    bytes: int | None
    ndv_estimate: int | None = None
    fpp: float | None = None
    error: str = ""


@dataclass(frozen=True)
class ChunkView:
    row_group: int
    column: str
    physical_type: str
    pages: int
    has_offset_index: bool
    has_column_index: bool
    boundary_order: str | None
    null_pages: int | None
    point_lookup_pages: float | None  # expected fraction of pages a point lookup reads
    page_rows: tuple[PageRow, ...] = field(default_factory=tuple)
    bloom_filter: BloomView | None = None


@dataclass(frozen=True)
class FileView:
    path: str
    created_by: str
    num_rows: int
    fully_indexed: bool
    indexed_by: str | None
    chunks: tuple[ChunkView, ...]
    flaws: tuple[str, ...] = ()  # structural impossibilities in the index: it is broken
    suspect: str | None = None  # why its writer's indexes are not trusted, if they are not

    @property
    def index_state(self) -> str:
        """complete or incomplete, unless the index is broken, or suspect by its writer."""
        if self.flaws:
            return "broken"
        if self.suspect is not None and any(c.has_offset_index or c.has_column_index for c in self.chunks):
            return "suspect"
        return "complete" if self.fully_indexed else "incomplete"

    def skipping_power(self) -> dict[str, float | None]:
        """Per column: the expected fraction of its pages a point lookup on it reads (page-weighted
        over its chunks); None where no chunk has a ColumnIndex."""
        out: dict[str, float | None] = {}
        weights: dict[str, int] = {}
        for c in self.chunks:
            if c.point_lookup_pages is None:
                out.setdefault(c.column, None)
                continue
            total = (out.get(c.column) or 0.0) * weights.get(c.column, 0)
            weights[c.column] = weights.get(c.column, 0) + c.pages
            out[c.column] = (total + c.point_lookup_pages * c.pages) / weights[c.column]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path, "created_by": self.created_by, "num_rows": self.num_rows,
            "fully_indexed": self.fully_indexed, "indexed_by_pageindex": self.indexed_by,
            "index_state": self.index_state, "flaws": list(self.flaws), "suspect": self.suspect,
            "skipping_power": self.skipping_power(),
            "chunks": [
                {**{k: v for k, v in c.__dict__.items() if k not in ("page_rows", "bloom_filter")},
                 "page_rows": [p.__dict__ for p in c.page_rows],
                 "bloom_filter": None if c.bloom_filter is None else c.bloom_filter.__dict__}
                for c in self.chunks
            ],
        }


def inspect_file(path: str, filesystem: Any = None) -> FileView:
    with open_source(path, filesystem) as source:
        footer = read_footer(source)
        held = read_index_bytes(source, footer, bloom_filters=True)  # filters in the same read
        flaws = structural_flaws(source, footer, held)
        chunks = []
        indexes = read_page_indexes(source, (chunk for row in footer.chunks for chunk in row), held)
        for row in footer.chunks:
            for chunk in row:
                oi, ci = indexes[chunk.row_group, chunk.column]
                rows = []
                if oi is not None:
                    for i, loc in enumerate(oi.pages):
                        null_page = bool(ci.null_pages[i]) if ci and i < len(ci) else False
                        rows.append(PageRow(
                            i, loc.first_row_index, loc.compressed_page_size,
                            ci.null_counts[i] if ci and ci.null_counts and i < len(ci.null_counts) else None,
                            "" if ci is None or null_page or i >= len(ci) else render(chunk.leaf, ci.min_values[i]),
                            "" if ci is None or null_page or i >= len(ci) else render(chunk.leaf, ci.max_values[i]),
                            null_page,
                        ))
                chunks.append(ChunkView(
                    chunk.row_group, chunk.leaf.dotted, Type.NAMES[chunk.leaf.physical_type],
                    len(oi.pages) if oi else 0, oi is not None, ci is not None,
                    BoundaryOrder.NAMES.get(ci.boundary_order, str(ci.boundary_order)) if ci else None,
                    sum(ci.null_pages) if ci else None,
                    _point_lookup_fraction(chunk, ci, footer.declared_order(chunk.column)),
                    tuple(rows), _bloom_view(source, chunk, held),
                ))
        return FileView(source.path, footer.created_by, _num_rows(footer), is_fully_indexed(footer),
                        footer.key_value(MARKER_KEY), tuple(chunks), tuple(str(f) for f in flaws),
                        suspect_writer(footer))


def _bloom_view(source: Source, chunk: ChunkMeta, held: IndexBytes | None) -> BloomView | None:
    if chunk.bloom_filter is None:
        return None
    length = chunk.bloom_filter[1]
    try:
        bloom = read_bloom_filter(source, chunk, held)
    except PageIndexError as err:
        return BloomView(length, error=err.message(with_path=False))
    return BloomView(length if length is not None else len(bloom.to_bytes()), bloom.estimated_ndv(),
                     bloom.fill_fpp())


def _point_lookup_fraction(chunk: ChunkMeta, ci: ColumnIndexView | None, declared) -> float | None:
    """For a value taken from a random non-null page, the expected fraction of the chunk's pages
    whose [min, max] holds it, estimated by overlap with that page's bounds: 1/pages for a
    sorted column, 1.0 when every page spans the whole range."""
    if ci is None or not len(ci):
        return None
    order = order_for(chunk.leaf, declared)
    if not order.indexable:
        return None
    pairs = [(comparable(chunk.leaf, order, lo), comparable(chunk.leaf, order, hi))
             for lo, hi, null in zip(ci.min_values, ci.max_values, ci.null_pages) if not null]
    if not pairs:
        return 0.0
    if any(lo is None or hi is None or lo != lo or hi != hi for lo, hi in pairs):
        return None
    lows = sorted(lo for lo, _ in pairs)
    highs = sorted(hi for _, hi in pairs)
    n = len(ci)
    # Pages overlapping [lo, hi] = all - those starting after hi - those ending before lo.
    overlaps = [len(pairs) - (len(lows) - bisect.bisect_right(lows, hi)) - bisect.bisect_left(highs, lo)
                for lo, hi in pairs]
    return sum(overlaps) / len(overlaps) / n


def _num_rows(footer: Footer) -> int:
    return sum(footer.row_group_rows)


def format_text(view: FileView, max_pages: int = 20) -> str:
    lines = [
        f"file: {view.path}",
        f"created_by: {view.created_by}",
        f"rows: {view.num_rows}   page index: {view.index_state}"
        + (f"   (built by pageindex: {view.indexed_by})" if view.indexed_by else ""),
    ]
    if view.flaws:
        lines.append(f"  {len(view.flaws)} structural flaws, e.g. {view.flaws[0]}; "
                     "`pageindex retrofit` rebuilds it")
    elif view.index_state == "suspect":
        lines.append(f"  suspect: {view.suspect}; `pageindex verify` checks it against the data")
    power = view.skipping_power()
    if any(v is not None for v in power.values()):
        lines.append("")
        lines.append("skipping power (expected share of a column's pages a point lookup reads):")
        for column, value in power.items():
            shown = "no ColumnIndex" if value is None else f"{value:.1%}"
            lines.append(f"  {column:<40} {shown}")
    for c in view.chunks:
        lines.append("")
        lines.append(
            f"row group {c.row_group}  column {c.column} ({c.physical_type})  pages={c.pages}  "
            f"offset_index={'yes' if c.has_offset_index else 'no'}  "
            f"column_index={'yes' if c.has_column_index else 'no'}"
            + (f"  boundary_order={c.boundary_order}  null_pages={c.null_pages}" if c.has_column_index else "")
        )
        if c.bloom_filter is not None:
            b = c.bloom_filter
            lines.append(f"  bloom filter: {b.bytes} bytes, " + (f"unreadable: {b.error}" if b.error else
                         f"~{b.ndv_estimate} distinct values, fpp {b.fpp:.2%}"))
        if c.page_rows:
            lines.append(f"  {'page':>5} {'first_row':>10} {'size':>8} {'nulls':>6}  {'min':<30} {'max':<30}")
        for p in c.page_rows[:max_pages]:
            nulls = "" if p.null_count is None else str(p.null_count)
            lo, hi = ("(all null)", "") if p.null_page else (p.min, p.max)
            lines.append(f"  {p.index:>5} {p.first_row:>10} {p.size:>8} {nulls:>6}  {lo:<30} {hi:<30}")
        if len(c.page_rows) > max_pages:
            lines.append(f"  … {len(c.page_rows) - max_pages} more pages (--all-pages to show them)")
    return "\n".join(lines)
