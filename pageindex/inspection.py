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
from pageindex.format.parquet_thrift import (
    BoundaryOrder,
    ColumnChunk,
    ColumnMetaData,
    CompressionCodec,
    ConvertedType,
    FileMetaData,
    LogicalType,
    RowGroup,
    Statistics,
    TimestampType,
    TimeUnit,
    Type,
)
from pageindex.format.schema import Leaf
from pageindex.format.thrift import Struct
from pageindex.index.kinds import comparable, render
from pageindex.index.marker import MARKER_KEY, is_fully_indexed
from pageindex.index.reader import ColumnIndexView, IndexBytes, read_bloom_filter, read_index_bytes, read_page_indexes
from pageindex.index.skipping import no_page_skipping, skipping_advice
from pageindex.index.soundness import structural_flaws, suspect_writer
from pageindex.io.storage import Source, open_source
from pageindex.scan.page_walk import MAX_PAGE_BYTES, walk_headers

NO_INDEX = "none"  # FileView.index_state of a file without any page index
# A column a point lookup reads at most this share of the pages of is "ordered" (sorted or clustered)
# in what inspect says the file allows.
ORDERED_SHARE = 0.25
# ChunkView.statistics: min_value/max_value (what readers prune row groups on), or only the
# deprecated min/max (ignored by readers for strings, and for every type once a column order is declared)
STATS_VALUES, STATS_DEPRECATED = "min_value/max_value", "min/max (deprecated)"


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
    logical_type: str = ""  # e.g. STRING, DECIMAL(9,2), TIMESTAMP(MICROS); "" when none
    codec: str = ""
    compressed_bytes: int = 0
    statistics: str = ""  # the bounds the chunk's Statistics hold: STATS_VALUES, STATS_DEPRECATED or "none"


@dataclass(frozen=True)
class RowGroupView:
    rows: int
    compressed_bytes: int


@dataclass(frozen=True)
class ColumnSummary:
    """One column over all row groups, for files with too many row groups to show chunk by chunk."""

    column: str
    physical_type: str
    logical_type: str
    codec: str  # the chunks' codecs, comma-separated when they differ
    chunks: int
    pages: int
    min_pages: int
    max_pages: int
    compressed_bytes: int
    with_offset_index: int
    with_column_index: int


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
    row_groups: tuple[RowGroupView, ...] = ()

    @property
    def index_state(self) -> str:
        """none, complete or incomplete, unless the index is broken, or suspect by its writer."""
        if self.flaws:
            return "broken"
        if not any(c.has_offset_index or c.has_column_index for c in self.chunks):
            return NO_INDEX
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

    def columns(self) -> tuple[ColumnSummary, ...]:
        """Each column's chunks taken together, in schema order."""
        by_column: dict[str, list[ChunkView]] = {}
        for c in self.chunks:
            by_column.setdefault(c.column, []).append(c)
        return tuple(ColumnSummary(
            name, cs[0].physical_type, cs[0].logical_type, ",".join(dict.fromkeys(c.codec for c in cs)), len(cs),
            sum(c.pages for c in cs), min(c.pages for c in cs), max(c.pages for c in cs),
            sum(c.compressed_bytes for c in cs), sum(c.has_offset_index for c in cs),
            sum(c.has_column_index for c in cs)) for name, cs in by_column.items())

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path, "created_by": self.created_by, "num_rows": self.num_rows,
            "fully_indexed": self.fully_indexed, "indexed_by_pageindex": self.indexed_by,
            "index_state": self.index_state, "flaws": list(self.flaws), "suspect": self.suspect,
            "skipping_power": self.skipping_power(), "skipping": skipping_text(self) if self.chunks else None,
            "row_groups": [g.__dict__ for g in self.row_groups],
            "chunks": [
                {**{k: v for k, v in c.__dict__.items() if k not in ("page_rows", "bloom_filter")},
                 "page_rows": [p.__dict__ for p in c.page_rows],
                 "bloom_filter": None if c.bloom_filter is None else c.bloom_filter.__dict__}
                for c in self.chunks
            ],
        }


def inspect_file(path: str, filesystem: Any = None) -> FileView:
    """The file's page index as it is; chunks without an OffsetIndex have their pages counted
    from their page headers."""
    with open_source(path, filesystem) as source:
        footer = read_footer(source)
        held = read_index_bytes(source, footer, bloom_filters=True)  # filters in the same read
        flaws = structural_flaws(source, footer, held)
        chunks = []
        indexes = read_page_indexes(source, (chunk for row in footer.chunks for chunk in row), held)
        walked = _pages_from_headers(source, footer)
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
                    len(oi.pages) if oi else walked[chunk.row_group, chunk.column], oi is not None, ci is not None,
                    BoundaryOrder.NAMES.get(ci.boundary_order, str(ci.boundary_order)) if ci else None,
                    sum(ci.null_pages) if ci else None,
                    _point_lookup_fraction(chunk, ci, footer.declared_order(chunk.column)),
                    tuple(rows), _bloom_view(source, chunk, held), logical_type_text(chunk.leaf),
                    CompressionCodec.name(chunk.codec), chunk.total_compressed_size,
                    _statistics_bounds(footer, chunk),
                ))
        groups = tuple(RowGroupView(rows, sum(c.total_compressed_size for c in row))
                       for rows, row in zip(footer.row_group_rows, footer.chunks))
        return FileView(source.path, footer.created_by, _num_rows(footer), is_fully_indexed(footer),
                        footer.key_value(MARKER_KEY), tuple(chunks), tuple(str(f) for f in flaws),
                        suspect_writer(footer), groups)


def _statistics_bounds(footer: Footer, chunk: ChunkMeta) -> str:
    """Which bounds the chunk's Statistics hold (ChunkView.statistics)."""
    group = footer.metadata.get(FileMetaData.ROW_GROUPS).items[chunk.row_group]
    meta = group.get(RowGroup.COLUMNS).items[chunk.column].get(ColumnChunk.META_DATA)
    stats = meta.get(ColumnMetaData.STATISTICS) if isinstance(meta, Struct) else None
    if not isinstance(stats, Struct):
        return "none"
    if stats.has(Statistics.MIN_VALUE) and stats.has(Statistics.MAX_VALUE):
        return STATS_VALUES
    return STATS_DEPRECATED if stats.has(Statistics.MIN) and stats.has(Statistics.MAX) else "none"


def _pages_from_headers(source: Source, footer: Footer) -> dict[tuple[int, int], int]:
    """The data pages of each chunk without an OffsetIndex, counted from its page headers. On an
    object store those chunks come in one merged read plan, each row group's bytes dropped once
    walked; locally only the headers are read."""
    todo = [c for row in footer.chunks for c in row if not c.has_offset_index]
    source.prefetch([(c.start, c.total_compressed_size) for c in todo], "header")
    counts = {}
    for chunk in todo:
        # Headers only, nothing decoded: any page size the format allows is shown.
        pages = walk_headers(source, chunk, footer.chunk_end(chunk), MAX_PAGE_BYTES)
        counts[chunk.row_group, chunk.column] = sum(page.is_data for page in pages.pages)
        source.release_prefetched_before(chunk.start + chunk.total_compressed_size)
    source.release_prefetch()
    return counts


def logical_type_text(leaf: Leaf) -> str:
    """The leaf's logical type (or legacy converted type) as text, with a decimal's precision
    and scale and a time's unit; "" when it has none."""
    name = _LOGICAL_NAMES.get(leaf.logical_id) if leaf.logical_id is not None else None
    if name is None and leaf.converted_type is not None:
        name = ConvertedType.name(leaf.converted_type)
    if name is None:
        return ""
    if name == "DECIMAL":
        return f"DECIMAL({leaf.precision},{leaf.scale})"
    if name in ("TIME", "TIMESTAMP") and leaf.logical_type is not None:
        unit = leaf.logical_type.get(leaf.logical_id).get(TimestampType.UNIT)
        if unit is not None and unit.fields:
            return f"{name}({_UNIT_NAMES.get(unit.fields[0].id, '?')})"
    return name


_LOGICAL_NAMES = {field_id: name for name, field_id in LogicalType.IDS.items()}
_UNIT_NAMES = {field_id: name for name, field_id in TimeUnit.IDS.items()}


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


def skipping_text(view: FileView) -> str:
    """The skipping the file allows readers, and what would add some, in a sentence: by pages on
    its ordered columns (ORDERED_SHARE), or why not, and by the bloom filters it holds."""
    filtered = sorted({c.column for c in view.chunks if c.bloom_filter is not None and not c.bloom_filter.error})
    blooms = f"bloom filters on {', '.join(filtered)}" if filtered else ""
    if view.index_state == NO_INDEX:
        # What the file would allow once indexed: its pages are what they are.
        reason = no_page_skipping((c.pages, True) for c in view.chunks)
        return "no page index yet (`pageindex retrofit` adds one); then " + skipping_advice(reason, blooms)
    ordered = [column for column, share in view.skipping_power().items()
               if share is not None and share <= ORDERED_SHARE]
    reason = no_page_skipping((c.pages, c.has_column_index) for c in view.chunks)
    return skipping_advice(reason, blooms, ordered)


def _num_rows(footer: Footer) -> int:
    return sum(footer.row_group_rows)


SHOWN_ROW_GROUPS = 10  # row groups listed one by one in the text; above, their range


def format_text(view: FileView, max_pages: int = 20, summary: bool = False) -> str:
    """The view as text: chunk by chunk, page by page, or (summary) one line per column."""
    lines = [
        f"file: {view.path}",
        f"created_by: {view.created_by}",
        f"rows: {view.num_rows}   {_row_groups_text(view.row_groups)}",
        f"page index: {view.index_state}" + _state_note(view)
        + (f"   (built by pageindex: {view.indexed_by})" if view.indexed_by else ""),
    ]
    if view.flaws:
        lines.append(f"  {len(view.flaws)} structural flaws, e.g. {view.flaws[0]}; "
                     "`pageindex retrofit` rebuilds it")
    elif view.index_state == "suspect":
        lines.append(f"  suspect: {view.suspect}; `pageindex verify` checks it against the data")
    if view.chunks and not view.flaws:
        lines.append(skipping_text(view))
    power = view.skipping_power()
    if any(v is not None for v in power.values()):
        lines.append("")
        lines.append("skipping power (expected share of a column's pages a point lookup reads):")
        for column, value in power.items():
            shown = "no ColumnIndex" if value is None else f"{value:.1%}"
            lines.append(f"  {column:<40} {shown}")
    if summary:
        lines += _column_lines(view)
    else:
        for c in view.chunks:
            lines += _chunk_lines(c, max_pages)
    return "\n".join(lines)


def _row_groups_text(groups: tuple[RowGroupView, ...]) -> str:
    if not groups:
        return "row groups: 0"
    if len(groups) <= SHOWN_ROW_GROUPS:
        return f"row groups: {len(groups)} (" + ", ".join(
            f"{g.rows} rows/{g.compressed_bytes} bytes" for g in groups) + ")"
    rows, sizes = [g.rows for g in groups], [g.compressed_bytes for g in groups]
    return (f"row groups: {len(groups)} ({min(rows)}-{max(rows)} rows, "
            f"{min(sizes)}-{max(sizes)} bytes compressed each)")


def _state_note(view: FileView) -> str:
    if view.index_state != NO_INDEX:
        return ""
    if view.num_rows == 0:
        return " (the file holds no rows: nothing to index)"
    return " (no page index: `pageindex retrofit` adds one; page counts below are from the page headers)"


def _column_lines(view: FileView) -> list[str]:
    columns = view.columns()
    kinds = [c.physical_type + (f" {c.logical_type}" if c.logical_type else "") for c in columns]
    name_w = max([len("column")] + [len(c.column) for c in columns])
    kind_w = max([len("type")] + [len(k) for k in kinds])
    codec_w = max([len("codec")] + [len(c.codec) for c in columns])
    lines = ["", f"  {'column':<{name_w}}  {'type':<{kind_w}}  {'codec':<{codec_w}} {'chunks':>7} {'pages':>8} "
                 f"{'pages/chunk':>12} {'bytes':>12} {'OffsetIndex':>12} {'ColumnIndex':>12}"]
    for col, kind in zip(columns, kinds):
        lines.append(f"  {col.column:<{name_w}}  {kind:<{kind_w}}  {col.codec:<{codec_w}} {col.chunks:>7} "
                     f"{col.pages:>8} {f'{col.min_pages}-{col.max_pages}':>12} {col.compressed_bytes:>12} "
                     f"{col.with_offset_index:>12} {col.with_column_index:>12}")
    return lines


def _chunk_lines(c: ChunkView, max_pages: int) -> list[str]:
    kind = c.physical_type + (f" {c.logical_type}" if c.logical_type else "")
    lines = [
        "",
        f"row group {c.row_group}  column {c.column} ({kind})  codec={c.codec}  bytes={c.compressed_bytes}  "
        f"pages={c.pages}  offset_index={'yes' if c.has_offset_index else 'no'}  "
        f"column_index={'yes' if c.has_column_index else 'no'}"
        + (f"  boundary_order={c.boundary_order}  null_pages={c.null_pages}" if c.has_column_index else "")
        + f"  statistics={c.statistics}",
    ]
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
    return lines
