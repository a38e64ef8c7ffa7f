"""Lookup: a page-skipping reader that prunes row groups by statistics and pages by the
ColumnIndex, then fetches and decodes only the pages of each column that can hold matching rows.
"""
from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass, field
from decimal import InvalidOperation, localcontext
from typing import Any, Callable, Sequence, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pageindex.errors import MalformedFileError, UnsupportedFileError
from pageindex.format.column_order import Order, order_for
from pageindex.format.footer import ENCRYPTED_MAGIC, MAGIC, ChunkMeta, Footer, read_footer
from pageindex.format.parquet_thrift import (
    BoundaryOrder,
    ColumnChunk,
    ColumnMetaData,
    FileMetaData,
    PageType,
    RowGroup,
    SchemaElement,
    Statistics,
)
from pageindex.format.schema import Leaf, element_name
from pageindex.format.thrift import Struct, encode_struct
from pageindex.index.kinds import codec_for, comparable, literal_for
from pageindex.index.reader import (
    ColumnIndexView,
    OffsetIndexView,
    bloom_span,
    index_spans,
    read_column_index,
    read_offset_index,
)
from pageindex.io.storage import Source, normalize_url, open_source, resolve
from pageindex.query.bloom_probe import PROBED_OPS, probe_values, ruled_out
from pageindex.query.dataset import DataFile, Dataset, conform, discover, unify
from pageindex.query.predicate import Condition, PredicateError, column_path, parse
from pageindex.query.row_filter import holds, mask
from pageindex.scan.page_walk import ChunkPages, read_page_header, walk_chunk
from pageindex.scan.values import decode, synthesize

FOOTER_TAIL = 16 << 10
T = TypeVar("T")
Ranges = list[tuple[int, int]]  # sorted, disjoint, half-open row ranges within a row group


@dataclass
class ColumnIO:
    """Pages of one column: how many were fetched and decoded, of how many in the chunks read."""

    pages_read: int = 0
    pages_total: int = 0
    bytes_read: int = 0


@dataclass
class LookupStats:
    files: int = 0
    row_groups: int = 0
    row_groups_read: int = 0
    row_groups_pruned_by_bloom_filter: int = 0
    files_pruned_by_partition: int = 0  # never opened: their partition values rule them out
    files_skipped: list[tuple[str, str]] = field(default_factory=list)  # path, reason (not Parquet)
    requests: int = 0
    bytes_read: int = 0
    bytes_by_purpose: dict[str, int] = field(default_factory=dict)
    columns: dict[str, ColumnIO] = field(default_factory=dict)
    reads: list[tuple[str, int, int, str]] = field(default_factory=list)  # path, offset, len, purpose

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files, "row_groups": self.row_groups,
            "row_groups_read": self.row_groups_read,
            "row_groups_pruned_by_bloom_filter": self.row_groups_pruned_by_bloom_filter,
            "files_pruned_by_partition": self.files_pruned_by_partition,
            "files_skipped": [{"path": p, "reason": r} for p, r in self.files_skipped], "requests": self.requests,
            "bytes_read": self.bytes_read, "bytes_by_purpose": dict(self.bytes_by_purpose),
            "columns": {k: v.__dict__ for k, v in self.columns.items()},
        }


def lookup(path: str, where: str | Sequence[Sequence[Any]], columns: Sequence[str] | None = None,
           filesystem: Any = None, coalesce_gap: int = 0) -> tuple[pa.Table, LookupStats]:
    """Rows of `path` (a file, or a directory of files, Hive-partitioned or not) matching
    `where`, and the I/O it took. Partition columns are returned and filterable; a condition on
    them prunes whole files unopened. Files whose schemas evolved are read as one (see unify)."""
    conditions = parse(where)
    stats = LookupStats()
    if filesystem is None:
        filesystem, inner = resolve(path)
    else:
        inner = normalize_url(path).split("://", 1)[-1]
    dataset = discover(filesystem, inner)
    keys = dataset.partitions.names
    on_partitions = [(c, tuple(_arrow_literal(v, dataset.partitions.field(c.column).type, c.column)
                               for v in c.values)) for c in conditions if c.column in keys]
    on_files = [c for c in conditions if c.column not in keys]
    read: list[tuple[DataFile, pa.Schema, pa.Table]] = []
    for file in dataset.files:
        values = dataset.values(file)
        if not all(holds(values[c.column], c.op, literals) for c, literals in on_partitions):
            stats.files_pruned_by_partition += 1
            continue
        found = _read_file(file, dataset, filesystem, stats,
                           lambda source: _lookup_file(source, on_files, columns, stats, coalesce_gap, keys))
        if found is not None:
            stats.files += 1
            read.append((file, *found))
    for file in dataset.files if not read and stats.files_pruned_by_partition else ():
        # Every file pruned: the first one's footer still gives the result its columns.
        schema = _read_file(file, dataset, filesystem, stats, _file_schema)
        if schema is not None:
            read.append((file, schema, schema.empty_table()))
            break
    if not read:
        raise PredicateError("no Parquet files found", path=path)
    return _combine(read, dataset, conditions, columns), stats


def _read_file(file: DataFile, dataset: Dataset, filesystem: Any, stats: LookupStats,
               run: Callable[[Source], T]) -> T | None:
    """`run(source)` on one file with its reads counted; None when a file found in a directory
    is not Parquet (reported in stats.files_skipped, as the job reports it skipped)."""
    with open_source(file.path, filesystem) as source:
        try:
            return run(source)
        except MalformedFileError:
            if not dataset.directory or source.read(0, 4, "footer") in (MAGIC, ENCRYPTED_MAGIC):
                raise
            stats.files_skipped.append((source.path, "no Parquet magic at start of file"))
            return None
        finally:
            stats.requests += source.stats.requests
            stats.bytes_read += source.stats.bytes_read
            for offset, length, purpose in source.stats.ranges:
                stats.bytes_by_purpose[purpose] = stats.bytes_by_purpose.get(purpose, 0) + length
                stats.reads.append((source.path, offset, length, purpose))


def _file_schema(source: Source) -> pa.Schema:
    return _arrow_schema(read_footer(source, FOOTER_TAIL, check_head=False))


def _combine(read: list[tuple[DataFile, pa.Schema, pa.Table]], dataset: Dataset,
             conditions: list[Condition], columns: Sequence[str] | None) -> pa.Table:
    """The files' rows as one table: the unified schema, then the partition columns."""
    unified = unify([(file.path, schema) for file, schema, _ in read])
    full = pa.schema(list(unified) + list(dataset.partitions), metadata=unified.metadata)
    wanted = list(columns) if columns is not None else full.names
    missing = [n for n in wanted if n not in full.names] + [
        c.column for c in conditions if not _struct_field(full, column_path(c.column, full.names))]
    if missing:
        raise PredicateError(f"no column {missing[0]!r} (columns: {', '.join(full.names)})",
                             path=read[0][0].path if len(dataset.files) == 1 else None)
    if not wanted:
        return _no_columns(sum(t.num_rows for _, _, t in read), full.metadata)
    out = pa.schema([full.field(n) for n in wanted], metadata=full.metadata)
    tables = [conform(table, out, dataset.values(file)) for file, _, table in read]
    return pa.concat_tables(tables, promote_options="default")


def _struct_field(schema: pa.Schema, path: tuple[str, ...] | None) -> bool:
    """Whether a column_path is in the schema: a top-level column, or a field inside its structs."""
    if path is None:
        return False
    typ = schema.field(path[0]).type
    for name in path[1:]:
        if not pa.types.is_struct(typ) or typ.get_field_index(name) < 0:
            return False
        typ = typ.field(name).type
    return True


def _no_columns(rows: int, metadata: dict | None) -> pa.Table:
    """A table of no columns but `rows` rows (pyarrow keeps the count only through select)."""
    return pa.table({"": pa.nulls(rows)}).replace_schema_metadata(metadata).select([])


@dataclass(frozen=True)
class _Field:
    name: str
    elements: tuple[Struct, ...]  # the field's schema subtree, depth first
    leaves: tuple[Leaf, ...]
    arrow_type: pa.DataType


def _fields(footer: Footer, schema: pa.Schema) -> dict[str, _Field]:
    """Top-level fields with their schema subtrees (children counted as schema.leaves_of does)."""
    items = footer.metadata.get(FileMetaData.SCHEMA).items
    by_name: dict[str, list[Leaf]] = {}
    for leaf in footer.leaves:
        by_name.setdefault(leaf.path[0], []).append(leaf)
    out, pos = {}, 1
    for _ in range(items[0].get(SchemaElement.NUM_CHILDREN)):
        start, pending = pos, 1
        while pending:
            children = items[pos].get(SchemaElement.NUM_CHILDREN)
            pending += (children if isinstance(children, int) and children > 0 else 0) - 1
            pos += 1
        name = element_name(items[start])
        arrow_type = schema.field(name).type if name in schema.names else None
        out[name] = _Field(name, tuple(items[start:pos]), tuple(by_name.get(name, ())), arrow_type)
    return out


def _arrow_schema(footer: Footer) -> pa.Schema:
    """The schema pyarrow would give the file (ARROW:schema applied), from our validated footer."""
    raw = encode_struct(footer.metadata)
    buf = MAGIC + raw + struct.pack("<I", len(raw)) + MAGIC
    try:
        return pq.ParquetFile(pa.BufferReader(buf)).schema_arrow
    except (OSError, pa.ArrowException) as err:
        raise UnsupportedFileError(f"pyarrow cannot map this schema: {err}") from None


def _lookup_file(source: Source, conditions: list[Condition], columns: Sequence[str] | None,
                 stats: LookupStats, gap: int, partition_keys: Sequence[str]) -> tuple[pa.Schema, pa.Table]:
    """The file's Arrow schema and its matching rows, of the wanted columns it has."""
    footer = read_footer(source, FOOTER_TAIL, check_head=False)
    schema = _arrow_schema(footer)
    fields = _fields(footer, schema)
    for key in partition_keys:
        if key in fields:
            raise UnsupportedFileError(f"column {key!r} is both in the file and a partition folder name",
                                       path=source.path)
    wanted = [n for n in (columns if columns is not None else fields) if n in fields]
    # A column the file lacks is null in all its rows: IS NULL holds for each, nothing else does.
    # A path into a column the file has is planned: _filtered_leaf refuses a wrong one, with the leaves.
    present = [column_path(c.column, fields) is not None for c in conditions]
    if any(not there and c.op != "is_null" for c, there in zip(conditions, present)):
        return schema, pa.schema([schema.field(n) for n in wanted], metadata=schema.metadata).empty_table()
    plans = [_plan(c, fields, footer) for c, there in zip(conditions, present) if there]
    needed = list(dict.fromkeys(wanted + [p.field.name for p in plans]))
    out_schema = pa.schema([schema.field(n) for n in wanted], metadata=schema.metadata)
    created_by = footer.created_by_raw
    source.prefetch(_index_spans(footer, plans, [fields[name] for name in needed]), "index")
    pieces = []
    for rg, rows in enumerate(footer.row_group_rows):
        stats.row_groups += 1
        ranges: Ranges = [(0, rows)] if rows else []
        indexes: dict[int, tuple[OffsetIndexView | None, ColumnIndexView | None]] = {}
        for plan in plans:
            chunk = footer.chunks[rg][plan.leaf.index]
            if not plan.chunk_may_match(footer, chunk):
                ranges = []
                break
            if plan.probes is not None and ruled_out(source, chunk, plan.probes):
                stats.row_groups_pruned_by_bloom_filter += 1
                ranges = []
                break
            oi, ci = read_offset_index(source, chunk), read_column_index(source, chunk)
            indexes[plan.leaf.index] = (oi, ci)
            if oi is not None and ci is not None and _usable(ci, oi, plan.leaf):
                ranges = _intersect(ranges, plan.page_ranges(ci, oi, rows))
            if not ranges:
                break
        if not ranges:
            continue
        stats.row_groups_read += 1
        arrays = {}
        for name in needed:
            arrays[name] = _read_field(source, footer, fields[name], rg, ranges, indexes, stats,
                                       created_by, gap)
        table = pa.table(arrays)
        pieces.append(table.filter(_exact_filter(table, plans)) if plans else table)
    source.release_prefetch()
    if not pieces:
        return schema, out_schema.empty_table()
    # Selected after concatenating: a table of no columns keeps its row count only until then.
    return schema, _conform(pa.concat_tables(pieces).select(wanted), out_schema)


def _index_spans(footer: Footer, plans: list[_Plan], needed: list[_Field]) -> list[tuple[int, int]]:
    """The index blocks the row groups that footer statistics do not prune may read: the
    predicate columns' OffsetIndex and ColumnIndex (and bloom filter, for = and IN), the single-leaf
    read columns' OffsetIndex. Prefetched together, they come in one or a few requests instead of one per block."""
    spans = []
    for row in footer.chunks:
        if all(plan.chunk_may_match(footer, row[plan.leaf.index]) for plan in plans):
            spans += [span for plan in plans for span in index_spans(row[plan.leaf.index])]
            probed = (bloom_span(row[plan.leaf.index]) for plan in plans if plan.probes is not None)
            spans += [span for span in probed if span is not None]
            spans += [span for f in needed if len(f.leaves) == 1
                      for span in index_spans(row[f.leaves[0].index], column_index=False)]
    return spans


def _usable(ci: ColumnIndexView, oi: OffsetIndexView, leaf: Leaf) -> bool:
    """Whether a ColumnIndex (from any writer) is self-consistent enough to prune with. Some
    writers marked pages null with null count -1 on required columns: such an index is ignored."""
    if len(ci) != len(oi.pages) or len(ci.min_values) != len(ci) or len(ci.max_values) != len(ci):
        return False
    if ci.null_counts is not None and (len(ci.null_counts) != len(ci) or min(ci.null_counts, default=0) < 0):
        return False
    if any(ci.null_pages) and leaf.max_def == 0:
        return False
    return ci.null_counts is None or all(n > 0 for n, null in zip(ci.null_counts, ci.null_pages) if null)


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """The types, nullability and metadata pyarrow gives the file (its ARROW:schema, if any)."""
    if not schema.names:
        return _no_columns(table.num_rows, schema.metadata)
    columns, fields = [], []
    for target in schema:
        column = table.column(target.name)
        try:
            column = column.cast(target.type) if column.type != target.type else column
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            target = target.with_type(column.type)
        columns.append(column)
        fields.append(target)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields, metadata=schema.metadata))


# ---------------------------------------------------------------- predicates on one column

@dataclass(frozen=True)
class _Plan:
    cond: Condition
    field: _Field
    leaf: Leaf
    order: Order
    literals: tuple[pa.Scalar, ...]
    keys: tuple[Any, ...] | None  # comparable keys of the literals, None: cannot prune
    probes: tuple[Any, ...] | None = None  # = and IN: the literals' plain values for bloom filters

    def chunk_may_match(self, footer: Footer, chunk: ChunkMeta) -> bool:
        """Row-group pruning by the chunk's Statistics (min/max, null count) when trustworthy."""
        stats = _chunk_statistics(footer, chunk)
        if stats is None:
            return True
        nulls = stats.get(Statistics.NULL_COUNT)
        rows = footer.row_group_rows[chunk.row_group]
        op = self.cond.op
        if op == "is_null":
            return not (isinstance(nulls, int) and nulls == 0)
        if op == "is_not_null":
            return not (isinstance(nulls, int) and nulls >= rows and self.leaf.max_rep == 0)
        if self.keys is None or (op == "!=" and codec_for(self.order).nan_values):
            return True
        raw_lo, raw_hi = stats.get(Statistics.MIN_VALUE), stats.get(Statistics.MAX_VALUE)
        # The deprecated min/max are signed: only valid where that is the order.
        if (raw_lo is None or raw_hi is None) and codec_for(self.order).legacy_bounds(self.order):
            raw_lo, raw_hi = stats.get(Statistics.MIN), stats.get(Statistics.MAX)
        if not isinstance(raw_lo, bytes) or not isinstance(raw_hi, bytes):
            return True
        lo, hi = comparable(self.leaf, self.order, raw_lo), comparable(self.leaf, self.order, raw_hi)
        if lo is None or hi is None or lo != lo or hi != hi:
            return True
        return _may_match(self, lo, hi)

    def page_ranges(self, ci: ColumnIndexView, oi: OffsetIndexView, rows: int) -> Ranges:
        pages = _matching_pages(self, ci)
        starts = [p.first_row_index for p in oi.pages] + [rows]
        return _merge([(starts[i], starts[i + 1]) for i in pages if starts[i] < starts[i + 1]])


def _plan(cond: Condition, fields: dict[str, _Field], footer: Footer) -> _Plan:
    f, leaf = _filtered_leaf(cond.column, fields)
    order = order_for(leaf, footer.declared_order(leaf.index))
    literals = tuple(_arrow_literal(v, _leaf_type(f, leaf), cond.column) for v in cond.values)
    keys = None
    if order.indexable:
        try:
            keys = tuple(codec_for(order).literal_keys(leaf, order, lit) for lit in literals)
        except (ValueError, TypeError, OverflowError, InvalidOperation, pa.ArrowException):
            keys = None
    probes = probe_values(leaf, literals, keys) if cond.op in PROBED_OPS else None
    return _Plan(cond, f, leaf, order, literals, keys, probes)


def _filtered_leaf(column: str, fields: dict[str, _Field]) -> tuple[_Field, Leaf]:
    """The leaf a condition filters: a primitive column by name, or a leaf inside structs by its
    dotted path (point.x); leaves below a list or map have no one value per row and are refused."""
    top = fields.get(column)
    if top is not None and len(top.leaves) == 1 and len(top.leaves[0].path) == 1 and top.leaves[0].max_rep == 0:
        return top, top.leaves[0]
    for f in fields.values():
        for leaf in f.leaves:
            if ".".join(leaf.path) == column and leaf.max_rep == 0:
                return f, leaf
    leaves = [".".join(leaf.path) for f in fields.values() for leaf in f.leaves if leaf.max_rep == 0]
    what = f"column {column!r} is nested or repeated" if top is not None else f"no column {column!r}"
    raise PredicateError(f"{what} to filter on; filterable columns and leaves: {', '.join(leaves)}")


def _leaf_type(f: _Field, leaf: Leaf) -> pa.DataType:
    """The Arrow type of a leaf of a field (one without repetition: only structs above it)."""
    typ = f.arrow_type
    for name in leaf.path[1:]:
        typ = typ.field(name).type
    return typ


def _arrow_literal(value: Any, typ: pa.DataType, column: str) -> pa.Scalar:
    """The literal as a scalar comparable with the column, or a PredicateError when its type
    does not fit the column (a number for a string column, text for a boolean, ...)."""
    base = typ.value_type if pa.types.is_dictionary(typ) else typ
    try:
        with localcontext() as ctx:
            ctx.prec = 200  # decimal literals of up to 76 digits stay exact
            scalar = literal_for(value, base)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError, TypeError,
            OverflowError, InvalidOperation) as err:
        raise PredicateError(f"value {value!r} does not fit column {column!r} of type {typ}: {err}") from None
    if scalar is None:
        raise PredicateError(f"value {value!r} does not fit column {column!r} of type {typ}")
    return scalar


def _may_match(plan: _Plan, lo: Any, hi: Any) -> bool:
    """Whether values within [lo, hi] can satisfy the condition (keys are (low, high) pairs)."""
    op, keys = plan.cond.op, plan.keys
    try:
        if op == "=":
            return lo <= keys[0][1] and hi >= keys[0][0]
        if op == "!=":
            return not (lo == hi == keys[0][0] == keys[0][1])
        if op == "<":
            return lo < keys[0][0]
        if op == "<=":
            return lo <= keys[0][1]
        if op == ">":
            return hi > keys[0][1]
        if op == ">=":
            return hi >= keys[0][0]
        if op == "between":
            return hi >= keys[0][0] and lo <= keys[1][1]
        if op == "in":
            return any(lo <= k[1] and hi >= k[0] for k in keys)
    except TypeError:
        return True
    return True


def _matching_pages(plan: _Plan, ci: ColumnIndexView) -> list[int]:
    """Indices of pages that may hold matching rows."""
    n = len(ci)
    op = plan.cond.op
    if op == "is_null":
        if ci.null_counts is None:
            return list(range(n))
        return [i for i in range(n) if ci.null_pages[i] or ci.null_counts[i] > 0]
    if op == "is_not_null":
        return [i for i in range(n) if not ci.null_pages[i]]
    non_null = [i for i in range(n) if not ci.null_pages[i]]
    if plan.keys is None or (op == "!=" and codec_for(plan.order).nan_values and ci.nan_counts is None):
        return non_null
    if op == "!=" and ci.nan_counts is not None:
        # NaN != x holds, and NaN lies outside a total-order page's bounds: keep pages with NaN.
        with_nan = {i for i in non_null if ci.nan_counts[i] > 0}
        return [i for i in non_null if i in with_nan or not _all_equal(plan, ci, i)]
    lows = [comparable(plan.leaf, plan.order, ci.min_values[i]) for i in non_null]
    highs = [comparable(plan.leaf, plan.order, ci.max_values[i]) for i in non_null]
    if any(v is None or v != v for v in lows + highs):
        return non_null
    if ci.boundary_order in (BoundaryOrder.ASCENDING, BoundaryOrder.DESCENDING) and op in _RANGE_OPS:
        return _ordered_pages(plan, non_null, lows, highs, ci.boundary_order)
    return [i for i, lo, hi in zip(non_null, lows, highs) if _may_match(plan, lo, hi)]


_RANGE_OPS = ("=", "<", "<=", ">", ">=", "between")


def _all_equal(plan: _Plan, ci: ColumnIndexView, page: int) -> bool:
    lo = comparable(plan.leaf, plan.order, ci.min_values[page])
    hi = comparable(plan.leaf, plan.order, ci.max_values[page])
    return lo == hi == plan.keys[0][0] == plan.keys[0][1]


def _ordered_pages(plan: _Plan, pages: list[int], lows: list, highs: list, order: int) -> list[int]:
    """Binary search: with bounds sorted, the pages that may match form one contiguous run."""
    op, keys = plan.cond.op, plan.keys
    lower = {"=": keys[0][0], ">": keys[0][1], ">=": keys[0][0], "between": keys[0][0]}.get(op)
    upper = {"=": keys[0][1], "<": keys[0][0], "<=": keys[0][1], "between": keys[-1][1]}.get(op)
    if order == BoundaryOrder.DESCENDING:
        pages, lows, highs = pages[::-1], lows[::-1], highs[::-1]
    first, last = 0, len(pages)
    if lower is not None:  # need max >= lower (max > lower for '>')
        first = (bisect.bisect_right if op == ">" else bisect.bisect_left)(highs, lower)
    if upper is not None:  # need min <= upper (min < upper for '<')
        last = (bisect.bisect_left if op == "<" else bisect.bisect_right)(lows, upper)
    chosen = pages[first:last] if first < last else []
    return sorted(chosen)


def _chunk_statistics(footer: Footer, chunk: ChunkMeta) -> Struct | None:
    group = footer.metadata.get(FileMetaData.ROW_GROUPS).items[chunk.row_group]
    meta = group.get(RowGroup.COLUMNS).items[chunk.column].get(ColumnChunk.META_DATA)
    stats = meta.get(ColumnMetaData.STATISTICS)
    return stats if isinstance(stats, Struct) else None


# ---------------------------------------------------------------- row ranges

def _merge(ranges: Ranges) -> Ranges:
    out: Ranges = []
    for start, end in sorted(ranges):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def _intersect(a: Ranges, b: Ranges) -> Ranges:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _positions(covered: Ranges, wanted: Ranges) -> np.ndarray:
    """Positions, within the concatenation of `covered` rows, of every row in `wanted` (both
    sorted and disjoint; every wanted row lies in a covered range). One merge pass."""
    out = []
    i, base = 0, 0
    for start, end in wanted:
        while i < len(covered) and covered[i][1] <= start:
            base += covered[i][1] - covered[i][0]
            i += 1
        j, j_base = i, base
        while j < len(covered) and covered[j][0] < end:
            lo, hi = max(start, covered[j][0]), min(end, covered[j][1])
            if lo < hi:
                out.append(np.arange(j_base + lo - covered[j][0], j_base + hi - covered[j][0], dtype=np.int64))
            j_base += covered[j][1] - covered[j][0]
            j += 1
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


# ---------------------------------------------------------------- reading columns

def _read_field(source: Source, footer: Footer, f: _Field, rg: int, ranges: Ranges,
                indexes: dict, stats: LookupStats, created_by: bytes | None, gap: int) -> pa.ChunkedArray:
    rows = footer.row_group_rows[rg]
    chunks = [footer.chunks[rg][leaf.index] for leaf in f.leaves]
    io = stats.columns.setdefault(f.name, ColumnIO())
    if len(chunks) == 1:
        chunk = chunks[0]
        oi = indexes[chunk.column][0] if chunk.column in indexes else read_offset_index(source, chunk)
        if oi is not None and oi.pages and _locations_valid(oi, chunk):
            pages, covered = _fetch_pages(source, chunk, oi, ranges, rows, gap, io)
            num = sum(end - start for start, end in covered)
            array = decode(synthesize([f.elements], [(chunk, pages)], num, created_by), num)
            return array.take(_positions(covered, ranges))
    parts = []
    for chunk in chunks:
        walked = walk_chunk(source, chunk, footer.footer_start, verify_crc=False)
        io.pages_read += len(walked.pages)
        io.pages_total += len(walked.pages)
        io.bytes_read += len(walked.data)
        parts.append((chunk, walked))
    array = decode(synthesize([f.elements], parts, rows, created_by), rows)
    return array.take(_positions([(0, rows)], ranges))


def _locations_valid(oi: OffsetIndexView, chunk: ChunkMeta) -> bool:
    firsts = [p.first_row_index for p in oi.pages]
    return firsts[0] == 0 and all(a < b for a, b in zip(firsts, firsts[1:])) and all(
        p.offset >= chunk.start and p.compressed_page_size > 0 for p in oi.pages)


def _fetch_pages(source: Source, chunk: ChunkMeta, oi: OffsetIndexView, ranges: Ranges,
                 rows: int, gap: int, io: ColumnIO) -> tuple[ChunkPages, Ranges]:
    starts = [p.first_row_index for p in oi.pages] + [rows]
    chosen = [i for i in range(len(oi.pages))
              if _intersect([(starts[i], starts[i + 1])], ranges)]
    wanted: list[tuple[int, int, str]] = []
    first_page = oi.pages[0].offset
    if chunk.start < first_page:  # a dictionary page precedes the data pages
        wanted.append((chunk.start, first_page - chunk.start, "dictionary"))
    wanted += [(oi.pages[i].offset, oi.pages[i].compressed_page_size, "data") for i in chosen]
    blobs = _read_coalesced(source, wanted, gap)
    io.pages_read += len(chosen)
    io.pages_total += len(oi.pages)
    io.bytes_read += sum(len(b) for b in blobs)
    data = b"".join(blobs)
    dictionary, pages, pos = None, [], 0
    for (offset, length, purpose), blob in zip(wanted, blobs):
        page = read_page_header(data, pos, pos)
        if purpose == "dictionary":
            if page.kind != PageType.DICTIONARY_PAGE:
                raise MalformedFileError("the bytes before the first indexed page are not a dictionary page",
                                         path=source.path, offset=offset)
            dictionary = page
        else:
            pages.append(page)
        pos += len(blob)
    covered = _merge([(starts[i], starts[i + 1]) for i in chosen])
    return ChunkPages(0, data, dictionary, tuple(pages), False), covered


def _read_coalesced(source: Source, wanted: list[tuple[int, int, str]], gap: int) -> list[bytes]:
    """Each wanted range's bytes; ranges closer than `gap` bytes are fetched in one request."""
    out: list[bytes] = []
    i = 0
    while i < len(wanted):
        j = i
        while j + 1 < len(wanted) and wanted[j + 1][0] - (wanted[j][0] + wanted[j][1]) <= gap \
                and wanted[j + 1][0] >= wanted[j][0] + wanted[j][1]:
            j += 1
        start = wanted[i][0]
        end = wanted[j][0] + wanted[j][1]
        purposes = {w[2] for w in wanted[i : j + 1]}
        blob = source.read(start, end - start, "data" if "data" in purposes else purposes.pop())
        if len(blob) != end - start:
            raise MalformedFileError("page index points past the end of the file", path=source.path, offset=start)
        out.extend(blob[w[0] - start : w[0] - start + w[1]] for w in wanted[i : j + 1])
        i = j + 1
    return out


def _exact_filter(table: pa.Table, plans: list[_Plan]) -> pa.ChunkedArray:
    """The predicate applied to decoded rows, every condition's row filter ANDed."""
    result = None
    for plan in plans:
        column = table.column(plan.field.name)
        if len(plan.leaf.path) > 1:  # a leaf inside structs; a null struct makes it null
            column = pc.struct_field(column, list(plan.leaf.path[1:]))
        m = mask(column, plan.cond.op, plan.literals)
        result = m if result is None else pc.and_(result, m)
    return result
