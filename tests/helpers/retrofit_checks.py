"""Checks of a retrofitted file against its source, independent of pageindex's own reader.

Footer bytes are located from the last 8 bytes of the file and decoded with the generic Thrift
codec (``pageindex.format.thrift.decode_struct``), which maps nothing onto a schema, so the comparison
sees every field of FileMetaData, including unknown ones.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pageindex.format.thrift import Field, Struct, T, TList, decode_struct

# parquet.thrift field ids
FMD_ROW_GROUPS, FMD_KV, FMD_COLUMN_ORDERS = 4, 5, 7
RG_COLUMNS = 1
CC_META, CMD_STATISTICS = 3, 12
ST_MAX, ST_MIN, ST_NULL_COUNT, ST_MAX_VALUE, ST_MIN_VALUE = 1, 2, 3, 5, 6
CC_OI_OFFSET, CC_OI_LENGTH, CC_CI_OFFSET, CC_CI_LENGTH = 4, 5, 6, 7
KV_KEY = 1
MARKER_KEY = b"pageindex"
TYPE_ORDER = Struct((Field(1, T.STRUCT, Struct()),))


@dataclass(frozen=True)
class FooterBytes:
    size: int
    start: int  # first byte of the serialized FileMetaData
    length: int
    metadata: Struct


def read_footer(path: str | Path) -> FooterBytes:
    data = Path(path).read_bytes()
    return footer_of(data)


def footer_of(data: bytes) -> FooterBytes:
    assert data[-4:] == b"PAR1", "no trailing PAR1 magic"
    (length,) = struct.unpack("<I", data[-8:-4])
    start = len(data) - 8 - length
    assert 4 <= start, f"footer length {length} does not fit"
    meta, end = decode_struct(data[start : start + length])
    assert end == length, f"FileMetaData is {end} bytes, the file says {length}"
    return FooterBytes(len(data), start, length, meta)


def chunks_of(meta: Struct) -> list[list[Struct]]:
    return [list(rg.get(RG_COLUMNS).items) for rg in meta.get(FMD_ROW_GROUPS).items]


def _strip_index_fields(meta: Struct) -> Struct:
    groups = []
    for rg in meta.get(FMD_ROW_GROUPS).items:
        cols = tuple(cc.without(CC_OI_OFFSET, CC_OI_LENGTH, CC_CI_OFFSET, CC_CI_LENGTH)
                     for cc in rg.get(RG_COLUMNS).items)
        groups.append(rg.set(RG_COLUMNS, T.LIST, TList(T.STRUCT, cols)))
    return meta.set(FMD_ROW_GROUPS, T.LIST, TList(T.STRUCT, tuple(groups)))


def kv_entries(meta: Struct) -> list[Struct]:
    kvs = meta.get(FMD_KV)
    return list(kvs.items) if kvs is not None else []


def marker_values(meta: Struct) -> list[bytes]:
    return [kv.get(2) for kv in kv_entries(meta) if kv.get(KV_KEY) == MARKER_KEY]


def _strip_new_bounds(old: Struct, new: Struct, orders_added: bool) -> Struct:
    """`new` without the Statistics fields a retrofit gives a chunk that had no min_value/max_value
    (5/6): copied from the deprecated min/max (2/1) when column_orders is added (asserted to be
    those bytes exactly), or filled from the exact bounds (5/6, and 3 null_count if absent: only
    added, every other field as it was); then removed. Whether filled bounds hold the data is
    checked against the data (assert_statistics_bound_the_data)."""
    groups = []
    for old_rg, rg in zip(old.get(FMD_ROW_GROUPS).items, new.get(FMD_ROW_GROUPS).items, strict=True):
        cols = []
        for old_cc, cc in zip(old_rg.get(RG_COLUMNS).items, rg.get(RG_COLUMNS).items, strict=True):
            old_stats = old_cc.get(CC_META).get(CMD_STATISTICS)
            stats = cc.get(CC_META).get(CMD_STATISTICS)
            if stats is not None and stats != old_stats:
                old_stats = old_stats if old_stats is not None else Struct(())
                assert not old_stats.has(ST_MIN_VALUE) and not old_stats.has(ST_MAX_VALUE), old_stats
                copied = (stats.get(ST_MIN_VALUE), stats.get(ST_MAX_VALUE)) == (old_stats.get(ST_MIN), old_stats.get(ST_MAX))
                assert copied and orders_added or stats.has(ST_MIN_VALUE) and stats.has(ST_MAX_VALUE), stats
                stats = stats.without(ST_MIN_VALUE, ST_MAX_VALUE)
                if not old_stats.has(ST_NULL_COUNT):
                    stats = stats.without(ST_NULL_COUNT)
                meta = cc.get(CC_META)
                meta = meta.set(CMD_STATISTICS, T.STRUCT, stats) if old_cc.get(CC_META).has(CMD_STATISTICS) \
                    else meta.without(CMD_STATISTICS)
                cc = cc.set(CC_META, T.STRUCT, meta)
            cols.append(cc)
        groups.append(rg.set(RG_COLUMNS, T.LIST, TList(T.STRUCT, tuple(cols))))
    return new.set(FMD_ROW_GROUPS, T.LIST, TList(T.STRUCT, tuple(groups)))


def footer_difference(old: Struct, new: Struct, num_leaves: int) -> tuple[Struct, Struct]:
    """(old, new) with everything a retrofit may change removed; they must then be equal.

    Allowed changes: ColumnChunk fields 4-7 (removed from both), column_orders added with
    TYPE_ORDER per leaf when the old footer had none (asserted here, then removed), Statistics
    min_value/max_value given to chunks that had none (_strip_new_bounds),
    and exactly one key-value entry with key "pageindex" (asserted here, then removed; the
    key-value list itself is removed when the old footer had none).
    """
    old_s, new_s = _strip_index_fields(old), _strip_index_fields(new)
    new_s = _strip_new_bounds(old_s, new_s, not old_s.has(FMD_COLUMN_ORDERS))
    if not old_s.has(FMD_COLUMN_ORDERS):
        added = new_s.get(FMD_COLUMN_ORDERS)
        assert added == TList(T.STRUCT, (TYPE_ORDER,) * num_leaves), (
            f"column_orders added to a footer without them must be TYPE_ORDER per leaf, got {added}")
        new_s = new_s.without(FMD_COLUMN_ORDERS)
    markers = [kv for kv in kv_entries(new_s) if kv.get(KV_KEY) == MARKER_KEY]
    assert len(markers) == 1, f"expected one 'pageindex' key-value entry, found {len(markers)}"
    old_markers = [kv for kv in kv_entries(old_s) if kv.get(KV_KEY) == MARKER_KEY]
    rest = tuple(kv for kv in kv_entries(new_s) if kv.get(KV_KEY) != MARKER_KEY)
    if old_markers:
        # a rebuild replaces the entry; compare the footers without it
        old_rest = tuple(kv for kv in kv_entries(old_s) if kv.get(KV_KEY) != MARKER_KEY)
        old_s = old_s.set(FMD_KV, T.LIST, TList(T.STRUCT, old_rest)) if old_rest else old_s.without(FMD_KV)
    if old_s.has(FMD_KV):
        new_s = new_s.set(FMD_KV, T.LIST, TList(new_s.get(FMD_KV).elem_type, rest,
                                                new_s.get(FMD_KV).is_set))
    else:
        assert not rest, "key-value entries other than 'pageindex' appeared"
        new_s = new_s.without(FMD_KV)
    return old_s, new_s


@dataclass(frozen=True)
class Block:
    kind: str  # "column_index" | "offset_index"
    row_group: int
    column: int
    offset: int
    length: int


def index_blocks(meta: Struct) -> list[Block]:
    """Every ColumnIndex and OffsetIndex location of a footer, in the order the reference
    writers lay them out: all ColumnIndexes (row group by row group, column by column), then
    all OffsetIndexes."""
    blocks = []
    for kind, off_id, len_id in (("column_index", CC_CI_OFFSET, CC_CI_LENGTH),
                                 ("offset_index", CC_OI_OFFSET, CC_OI_LENGTH)):
        for rg, row in enumerate(chunks_of(meta)):
            for col, cc in enumerate(row):
                off, length = cc.get(off_id), cc.get(len_id)
                assert (off is None) == (length is None), f"{kind} rg {rg} col {col}: half a location"
                if off is not None:
                    blocks.append(Block(kind, rg, col, off, length))
    return blocks


def check_layout(data: bytes, old_footer_start: int) -> list[Block]:
    """Assert the tail after `old_footer_start` is exactly: the index blocks in reference-writer
    order, contiguous, then the footer; and that each block is one whole Thrift struct."""
    new = footer_of(data)
    blocks = index_blocks(new.metadata)
    pos = old_footer_start
    for b in blocks:
        assert b.offset == pos, f"{b}: expected at {pos} (blocks must be contiguous, CI then OI)"
        _, end = decode_struct(data[b.offset : b.offset + b.length])
        assert end == b.length, f"{b}: the struct is {end} bytes"
        pos += b.length
    assert new.start == pos, f"footer starts at {new.start}, the last index block ends at {pos}"
    return blocks


# ---------------------------------------------------------------- data comparison

def _ipc_bytes(table: pa.Table | pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write(table)
    return sink.getvalue().to_pybytes()


def _without_marker(md: dict | None) -> dict:
    return {k: v for k, v in (md or {}).items() if k != MARKER_KEY}


def assert_same_data(src: str | Path, dst: str | Path) -> None:
    """pyarrow reads identical tables from both files (NaN-safe: IPC bytes), with the same schema,
    and the same schema metadata except for the "pageindex" key."""
    a, b = pq.read_table(src), pq.read_table(dst)
    assert a.schema.equals(b.schema, check_metadata=False), f"schema differs:\n{a.schema}\n{b.schema}"
    assert _without_marker(a.schema.metadata) == _without_marker(b.schema.metadata)
    for fa, fb in zip(a.schema, b.schema):
        assert fa.metadata == fb.metadata, f"field metadata of {fa.name} differs"
    a, b = a.replace_schema_metadata(None), b.replace_schema_metadata(None)
    assert a.num_rows == b.num_rows
    assert _ipc_bytes(a) == _ipc_bytes(b), "pyarrow reads different data from the output"


def assert_same_batches(src: str | Path, dst: str | Path, batch_size: int = 1) -> int:
    """Like assert_same_data for files pyarrow cannot read as one table: compare row batches."""
    fa, fb = pq.ParquetFile(src), pq.ParquetFile(dst)
    assert fa.schema_arrow.equals(fb.schema_arrow, check_metadata=False)
    assert _without_marker(fa.schema_arrow.metadata) == _without_marker(fb.schema_arrow.metadata)
    rows = 0
    it_b = fb.iter_batches(batch_size=batch_size, use_threads=False)
    for ba in fa.iter_batches(batch_size=batch_size, use_threads=False):
        bb = next(it_b)
        assert ba.num_rows == bb.num_rows
        if not ba.equals(bb):  # equals() treats NaN != NaN; fall back to exact bytes
            assert _ipc_bytes(ba.replace_schema_metadata(None)) == _ipc_bytes(bb.replace_schema_metadata(None)), (
                f"batch at row {rows} differs")
        rows += ba.num_rows
        del ba, bb
    assert next(it_b, None) is None, "the output has more rows"
    assert rows == fa.metadata.num_rows
    return rows


# ---------------------------------------------------------------- NaN detection (pyarrow side)

def float_arrays(arr: pa.Array) -> list[pa.Array]:
    """The non-null floating-point leaf values under `arr` (through struct, list, map, dictionary)."""
    t = arr.type
    if isinstance(arr, pa.ExtensionArray):
        return float_arrays(arr.storage)
    if pa.types.is_floating(t):
        return [arr.drop_null()]
    if pa.types.is_dictionary(t):
        return float_arrays(arr.dictionary_decode())
    if pa.types.is_struct(t):
        return [x for i in range(t.num_fields) for x in float_arrays(arr.field(i))]
    if pa.types.is_map(t):
        return float_arrays(arr.keys) + float_arrays(arr.items)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or \
            pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return float_arrays(arr.flatten())
    return []


def has_nan(column: pa.ChunkedArray | pa.Array) -> bool:
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    for chunk in chunks:
        for floats in float_arrays(chunk):
            values = floats.to_numpy(zero_copy_only=False)
            if np.isnan(values.astype(np.float64)).any():
                return True
    return False


# ---------------------------------------------------------------- parquet-java oracle

def spark_read_error(spark, path: str | Path) -> str | None:
    """Why parquet-java (through Spark) cannot read `path` at all, or None if it can."""
    from tests.helpers.spark import to_uri

    try:
        spark.read.parquet(to_uri(path)).collect()
    except Exception as err:  # noqa: BLE001
        causes = [line.strip() for line in str(err).splitlines() if line.strip().startswith("Caused by")]
        return (causes[-1] if causes else str(err).splitlines()[0])[:300]
    return None


def validator_violations_or_skip(spark, dst: str | Path, src: str | Path) -> list[str]:
    """parquet-java's ColumnIndexValidator on `dst`. If it throws, that is acceptable only when
    parquet-java cannot read the untouched `src` either (a codec it lacks, a writer bug it does
    not work around, a footer it cannot parse): then the test is skipped, naming the cause."""
    import pytest

    from tests.helpers.spark import column_index_violations

    try:
        return column_index_violations(spark, dst)
    except Exception:  # noqa: BLE001
        why = spark_read_error(spark, src)
        if why is None:
            raise
        pytest.skip(f"{Path(src).name}: parquet-java cannot read the source file either: {why}")


# ---------------------------------------------------------------- chunk statistics against the data

def assert_new_statistics_bound_the_data(src: str | Path, dst: str | Path) -> int:
    """Every flat chunk whose min/max pyarrow reads in dst but not in src (bounds a retrofit gave
    it) encloses the values pyarrow decodes, and its null count is theirs. Returns the number of
    chunks checked (values pyarrow cannot order, e.g. FLOAT16, are not checked)."""
    a, b = pq.ParquetFile(src), pq.ParquetFile(dst)
    checked = 0
    for rg in range(b.metadata.num_row_groups):
        for col in range(b.metadata.num_columns):
            old, new = a.metadata.row_group(rg).column(col), b.metadata.row_group(rg).column(col)
            if not (new.is_stats_set and new.statistics.has_min_max) or "." in new.path_in_schema:
                continue
            if old.is_stats_set and old.statistics.has_min_max:
                continue
            values = b.read_row_group(rg, columns=[new.path_in_schema]).column(0)
            if pa.types.is_dictionary(values.type):
                values = values.cast(values.type.value_type)
            low, high = pa.compute.min_max(values).values()
            try:
                ok = new.statistics.min <= low.as_py() and high.as_py() <= new.statistics.max
            except TypeError:
                continue
            assert ok, (rg, new.path_in_schema, new.statistics.min, new.statistics.max, low, high)
            if new.statistics.has_null_count:
                assert new.statistics.null_count == values.null_count, (rg, new.path_in_schema)
            checked += 1
    return checked
