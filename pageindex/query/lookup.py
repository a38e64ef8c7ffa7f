"""Lookup: a page-skipping reader that prunes row groups by statistics and pages by the
ColumnIndex, then fetches and decodes only the pages of each column that can hold matching rows.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from pageindex.errors import EncryptedFileError, MalformedFileError, PageIndexError, UnsupportedFileError
from pageindex.format.footer import ENCRYPTED_MAGIC, MAGIC, Footer, read_footer
from pageindex.index.reader import OffsetIndexView, ColumnIndexView, bloom_span, index_spans, read_column_index, read_offset_index
from pageindex.io.storage import Source, normalize_url, open_source, resolve
from pageindex.query.bloom_probe import ruled_out
from pageindex.query.dataset import DataFile, Dataset, conform, discover, unify
from pageindex.query.file_fields import Field, arrow_schema, conform_types, file_fields, no_columns
from pageindex.query.page_fetch import ColumnIO, read_field
from pageindex.query.predicate import Condition, PredicateError, column_path, parse
from pageindex.query.pruning import Plan, arrow_literal, plan_condition, usable
from pageindex.query.ranges import Ranges, intersect
from pageindex.query.row_filter import holds, mask

FOOTER_TAIL = 16 << 10
T = TypeVar("T")


@dataclass
class LookupStats:
    files: int = 0
    row_groups: int = 0
    row_groups_read: int = 0
    row_groups_pruned_by_bloom_filter: int = 0
    files_pruned_by_partition: int = 0  # never opened: their partition values rule them out
    files_skipped: list[tuple[str, str]] = field(default_factory=list)  # path, reason (not Parquet)
    # path, error: files of a directory that could not be read (malformed, encrypted, unsupported)
    files_failed: list[tuple[str, PageIndexError]] = field(default_factory=list)
    requests: int = 0
    bytes_read: int = 0
    # What a full scan of the files opened would read: every row group's column chunks (compressed,
    # as stored) of the columns returned and the columns filtered on; footers and indexes not counted.
    full_scan_bytes: int = 0
    bytes_by_purpose: dict[str, int] = field(default_factory=dict)
    columns: dict[str, ColumnIO] = field(default_factory=dict)
    reads: list[tuple[str, int, int, str]] = field(default_factory=list)  # path, offset, len, purpose

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files, "row_groups": self.row_groups,
            "row_groups_read": self.row_groups_read,
            "row_groups_pruned_by_bloom_filter": self.row_groups_pruned_by_bloom_filter,
            "files_pruned_by_partition": self.files_pruned_by_partition,
            "files_skipped": [{"path": p, "reason": r} for p, r in self.files_skipped],
            "files_failed": [{"path": p, "error": type(e).__name__, "message": e.message(with_path=False)}
                             for p, e in self.files_failed],
            "requests": self.requests,
            "bytes_read": self.bytes_read, "full_scan_bytes": self.full_scan_bytes,
            "bytes_by_purpose": dict(self.bytes_by_purpose),
            "columns": {k: v.__dict__ for k, v in self.columns.items()},
        }


def lookup(path: str, where: str | Sequence[Sequence[Any]], columns: Sequence[str] | None = None,
           filesystem: Any = None, coalesce_gap: int = 0, strict: bool = False) -> tuple[pa.Table, LookupStats]:
    """Rows of `path` (a file, or a directory of files, Hive-partitioned or not) matching
    `where`, and the I/O it took. Partition columns are returned and filterable; a condition on
    them prunes whole files unopened. Files whose schemas evolved are read as one (see unify).
    A directory's file that cannot be read is left out and listed in stats.files_failed;
    `strict` raises its error instead."""
    conditions = parse(where)
    stats = LookupStats()
    if filesystem is None:
        filesystem, inner = resolve(path)
    else:
        inner = normalize_url(path).split("://", 1)[-1]
    dataset = discover(filesystem, inner)
    keys = dataset.partitions.names
    on_partitions = [(c, tuple(arrow_literal(v, dataset.partitions.field(c.column).type, c.column)
                               for v in c.values)) for c in conditions if c.column in keys]
    on_files = [c for c in conditions if c.column not in keys]
    read: list[tuple[DataFile, pa.Schema, pa.Table]] = []
    for file in dataset.files:
        values = dataset.values(file)
        if not all(holds(values[c.column], c.op, literals) for c, literals in on_partitions):
            stats.files_pruned_by_partition += 1
            continue
        found = _read_file(file, dataset, filesystem, stats, strict,
                           lambda source: _lookup_file(source, on_files, columns, stats, coalesce_gap, keys))
        if found is not None:
            stats.files += 1
            read.append((file, *found))
    for file in dataset.files if not read and stats.files_pruned_by_partition else ():
        # Every file pruned: the first one's footer still gives the result its columns.
        schema = _read_file(file, dataset, filesystem, stats, strict, _file_schema)
        if schema is not None:
            read.append((file, schema, schema.empty_table()))
            break
    if not read and stats.files_failed:
        raise stats.files_failed[0][1]  # no file left to give the result its columns
    if not read:
        raise PredicateError("no Parquet files found", path=path)
    return _combine(read, dataset, conditions, columns), stats


def _read_file(file: DataFile, dataset: Dataset, filesystem: Any, stats: LookupStats, strict: bool,
               run: Callable[[Source], T]) -> T | None:
    """`run(source)` on one file with its reads counted; None when a file found in a directory
    is not Parquet (reported in stats.files_skipped, as the job reports it skipped) or, unless
    `strict`, cannot be read (in stats.files_failed, as retrofit and verify go on past it)."""
    with open_source(file.path, filesystem) as source:
        try:
            return run(source)
        except (MalformedFileError, EncryptedFileError, UnsupportedFileError) as err:
            if not dataset.directory:
                raise
            if isinstance(err, MalformedFileError) and source.read(0, 4, "footer") not in (MAGIC, ENCRYPTED_MAGIC):
                stats.files_skipped.append((source.path, "no Parquet magic at start of file"))
                return None
            if strict:
                raise
            stats.files_failed.append((source.path, err.located(path=source.path)))
            return None
        finally:
            stats.requests += source.stats.requests
            stats.bytes_read += source.stats.bytes_read
            for offset, length, purpose in source.stats.ranges:
                stats.bytes_by_purpose[purpose] = stats.bytes_by_purpose.get(purpose, 0) + length
                stats.reads.append((source.path, offset, length, purpose))


def _file_schema(source: Source) -> pa.Schema:
    return arrow_schema(read_footer(source, FOOTER_TAIL, check_head=False))


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
        return no_columns(sum(t.num_rows for _, _, t in read), full.metadata)
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


def _lookup_file(source: Source, conditions: list[Condition], columns: Sequence[str] | None,
                 stats: LookupStats, gap: int, partition_keys: Sequence[str]) -> tuple[pa.Schema, pa.Table]:
    """The file's Arrow schema and its matching rows, of the wanted columns it has."""
    footer = read_footer(source, FOOTER_TAIL, check_head=False)
    schema = arrow_schema(footer)
    fields = file_fields(footer, schema)
    for key in partition_keys:
        if key in fields:
            raise UnsupportedFileError(f"column {key!r} is both in the file and a partition folder name",
                                       path=source.path)
    wanted = [n for n in (columns if columns is not None else fields) if n in fields]
    # A column the file lacks is null in all its rows: IS NULL holds for each, nothing else does.
    # A path into a column the file has is planned: _filtered_leaf refuses a wrong one, with the leaves.
    present = [column_path(c.column, fields) is not None for c in conditions]
    scanned = dict.fromkeys(wanted + [path[0] for c in conditions
                                      if (path := column_path(c.column, fields)) is not None])
    stats.full_scan_bytes += sum(row[leaf.index].total_compressed_size for row in footer.chunks
                                 for name in scanned for leaf in fields[name].leaves)
    if any(not there and c.op != "is_null" for c, there in zip(conditions, present)):
        return schema, pa.schema([schema.field(n) for n in wanted], metadata=schema.metadata).empty_table()
    plans = [plan_condition(c, fields, footer) for c, there in zip(conditions, present) if there]
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
            if oi is not None and ci is not None and usable(ci, oi, plan.leaf):
                ranges = intersect(ranges, plan.page_ranges(ci, oi, rows))
            if not ranges:
                break
        if not ranges:
            continue
        stats.row_groups_read += 1
        arrays = {}
        for name in needed:
            arrays[name] = read_field(source, footer, fields[name], rg, ranges, indexes,
                                      stats.columns.setdefault(name, ColumnIO()),
                                      created_by, gap)
        table = pa.table(arrays)
        pieces.append(table.filter(_exact_filter(table, plans)) if plans else table)
    source.release_prefetch()
    if not pieces:
        return schema, out_schema.empty_table()
    # Selected after concatenating: a table of no columns keeps its row count only until then.
    return schema, conform_types(pa.concat_tables(pieces).select(wanted), out_schema)


def _index_spans(footer: Footer, plans: list[Plan], needed: list[Field]) -> list[tuple[int, int]]:
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


def _exact_filter(table: pa.Table, plans: list[Plan]) -> pa.ChunkedArray:
    """The predicate applied to decoded rows, every condition's row filter ANDed."""
    result = None
    for plan in plans:
        column = table.column(plan.field.name)
        if len(plan.leaf.path) > 1:  # a leaf inside structs; a null struct makes it null
            column = pc.struct_field(column, list(plan.leaf.path[1:]))
        m = mask(column, plan.cond.op, plan.literals)
        result = m if result is None else pc.and_(result, m)
    return result

