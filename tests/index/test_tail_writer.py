"""pageindex.index.tail_writer: tail layout, marker, column_orders, stale index pointers, footer preservation."""
from __future__ import annotations

import random
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pageindex
from pageindex import __version__
from pageindex.format.footer import decode_footer, read_footer
from pageindex.format.parquet_thrift import ColumnChunk, FileMetaData
from pageindex.format.thrift import Field, Struct, T, TList, decode_struct, encode_struct
from pageindex.index.marker import MARKER_KEY, marker_value
from pageindex.index.tail_writer import TYPE_ORDER, ChunkIndexes, _with_index_locations, build_tail
from pageindex.io.storage import open_source
from pageindex.verify import verify
from tests.helpers.corpus import corpus_path
from tests.helpers.strip import strip_page_index

DATA = "parquet-testing/data/"


def footer_of(path):
    with open_source(str(path)) as s:
        return read_footer(s)


def kv_pairs(footer) -> list[tuple[bytes, bytes | None]]:
    kvs = footer.metadata.get(FileMetaData.KEY_VALUE_METADATA)
    return [(kv.get(1), kv.get(2)) for kv in (kvs.items if kvs else ())]


@pytest.fixture
def three_groups(tmp_path) -> Path:
    """3 row groups x 3 columns, one of them a float column with NaN (no ColumnIndex)."""
    n = 3000
    table = pa.table({
        "k": np.arange(n, dtype=np.int64),
        "s": [f"s{i:05d}" for i in range(n)],
        "f": np.where(np.arange(n) % 97 == 0, np.nan, np.arange(n, dtype=np.float64)),
    })
    path = tmp_path / "three.parquet"
    pq.write_table(table, path, row_group_size=1000, data_page_size=1024, write_page_index=False,
                   write_batch_size=100)
    return path


def test_tail_layout(three_groups, tmp_path):
    out = tmp_path / "out.parquet"
    original = three_groups.read_bytes()
    pageindex.retrofit(str(three_groups), str(out))
    after = footer_of(out)
    assert out.read_bytes()[: len(original)] == original  # the whole file, its footer included
    chunks = [c for row in after.chunks for c in row]  # row group by row group, column by column
    assert all(c.has_offset_index for c in chunks)
    cis = [c.column_index for c in chunks if c.column_index]
    ois = [c.offset_index for c in chunks]
    assert len(cis) == 6  # the NaN float column has none in any row group
    pos = len(original)
    for off, length in cis + ois:  # all ColumnIndexes, then all OffsetIndexes, contiguous
        assert off == pos
        pos += length
    assert pos == after.footer_start  # then the footer
    size = out.stat().st_size
    assert size == after.footer_start + len(encode_struct(after.metadata)) + 8
    assert out.read_bytes()[-4:] == b"PAR1"
    assert verify(str(out)).ok


def test_marker_has_no_timestamp_and_output_is_deterministic(three_groups, tmp_path):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    pageindex.retrofit(str(three_groups), str(a))
    pageindex.retrofit(str(three_groups), str(b), truncate_length=64)
    assert a.read_bytes() == b.read_bytes()
    footer = footer_of(a)
    size = three_groups.stat().st_size
    assert footer.key_value(MARKER_KEY) == marker_value(__version__, 64, original_length=size)
    assert marker_value("1.2.3", 17) == "version=1.2.3;truncate_length=17"
    assert marker_value("1.2.3", 17, original_length=9) == "version=1.2.3;truncate_length=17;original_length=9"
    value = footer.key_value(MARKER_KEY)
    assert not any(ch.isdigit() for ch in value.replace(__version__, "").replace("64", "").replace(str(size), ""))


def test_existing_marker_replaced_not_duplicated(three_groups, tmp_path):
    once, twice = tmp_path / "once.parquet", tmp_path / "twice.parquet"
    pageindex.retrofit(str(three_groups), str(once))
    kv_once = kv_pairs(footer_of(once))
    result = pageindex.retrofit(str(once), str(twice), truncate_length=16, force=True)
    assert result.status == "indexed"
    kv_twice = kv_pairs(footer_of(twice))
    markers = [v for k, v in kv_twice if k == MARKER_KEY.encode()]
    original = three_groups.read_bytes()
    assert markers == [marker_value(__version__, 16, original_length=len(original)).encode()]
    # other entries (ARROW:schema) kept, in their order, marker in the same position
    assert [k for k, _ in kv_twice] == [k for k, _ in kv_once]
    assert [kv for kv in kv_twice if kv[0] != MARKER_KEY.encode()] == \
        [kv for kv in kv_once if kv[0] != MARKER_KEY.encode()]
    # The original file is kept whole and what the first run appended is replaced: the second
    # run's blocks follow the original footer, and the file does not grow.
    assert twice.read_bytes()[: len(original)] == original
    # (its strings are shorter than 16 bytes: the same blocks, a marker of the same length)
    assert twice.stat().st_size == once.stat().st_size
    assert verify(str(twice)).ok


def test_kv_list_created_when_absent(three_groups, tmp_path):
    before = footer_of(three_groups)
    meta = before.metadata.without(FileMetaData.KEY_VALUE_METADATA)
    raw = encode_struct(meta)
    src = tmp_path / "nokv.parquet"
    src.write_bytes(three_groups.read_bytes()[: before.footer_start] + raw + struct.pack("<I", len(raw)) + b"PAR1")
    out = tmp_path / "o.parquet"
    pageindex.retrofit(str(src), str(out))
    marker = marker_value(__version__, 64, original_length=src.stat().st_size)
    assert kv_pairs(footer_of(out)) == [(MARKER_KEY.encode(), marker.encode())]


def test_column_orders_added_only_when_absent(tmp_path):
    # alltypes_plain (old parquet-mr) declares no column_orders: TYPE_ORDER per leaf is added
    src = corpus_path(DATA + "alltypes_plain.parquet")
    before = footer_of(src)
    assert not before.metadata.has(FileMetaData.COLUMN_ORDERS)
    out = tmp_path / "plain.parquet"
    pageindex.retrofit(str(src), str(out))
    orders = footer_of(out).metadata.get(FileMetaData.COLUMN_ORDERS)
    assert orders.items == (TYPE_ORDER,) * len(before.leaves)
    # floating_orders_nan_count declares IEEE_754_TOTAL_ORDER on some columns: kept untouched
    src = corpus_path(DATA + "floating_orders_nan_count.parquet")
    stripped = strip_page_index(src, tmp_path / "fo.parquet")
    out = tmp_path / "fo_out.parquet"
    pageindex.retrofit(str(stripped), str(out))
    assert footer_of(out).metadata.get(FileMetaData.COLUMN_ORDERS) == footer_of(src).metadata.get(FileMetaData.COLUMN_ORDERS)


def test_footer_otherwise_preserved(three_groups, tmp_path):
    """Only ColumnChunk fields 4-7, key_value_metadata and column_orders may change."""
    out = tmp_path / "o.parquet"
    before = footer_of(three_groups)
    # add unknown fields to prove they survive
    meta = before.metadata.set(300, T.BINARY, b"future").set(FileMetaData.CREATED_BY, T.BINARY, b"me")
    data = three_groups.read_bytes()
    raw = encode_struct(meta)
    src = tmp_path / "unknown.parquet"
    src.write_bytes(data[: before.footer_start] + raw + struct.pack("<I", len(raw)) + b"PAR1")
    pageindex.retrofit(str(src), str(out))
    after = footer_of(out).metadata

    def normalize(m: Struct) -> Struct:
        groups = m.get(FileMetaData.ROW_GROUPS)
        rows = tuple(g.set(1, T.LIST, TList(T.STRUCT, tuple(cc.without(4, 5, 6, 7) for cc in g.get(1).items)))
                     for g in groups.items)
        return m.set(FileMetaData.ROW_GROUPS, T.LIST, TList(T.STRUCT, rows)).without(
            FileMetaData.KEY_VALUE_METADATA, FileMetaData.COLUMN_ORDERS)

    assert normalize(after) == normalize(meta)
    assert after.get(300) == b"future"


def test_stale_index_fields_removed_for_chunks_without_new_index(tmp_path):
    """pyarrow writes a ColumnIndex for a float column with NaN (unsafe); a forced retrofit must
    drop that pointer, not leave it aiming at the old (now dead) block."""
    n = 2000
    table = pa.table({"k": np.arange(n, dtype=np.int64),
                      "f": np.where(np.arange(n) == 500, np.nan, np.arange(n, dtype=np.float64))})
    src = tmp_path / "pyarrow.parquet"
    pq.write_table(table, src, write_page_index=True, data_page_size=1024, write_batch_size=100)
    assert pq.ParquetFile(src).metadata.row_group(0).column(1).has_column_index
    out = tmp_path / "forced.parquet"
    pageindex.retrofit(str(src), str(out), force=True)
    f_chunk = footer_of(out).chunks[0][1]
    assert f_chunk.has_offset_index and not f_chunk.has_column_index
    cc = footer_of(out).metadata.get(FileMetaData.ROW_GROUPS).items[0].get(1).items[1]
    assert not cc.has(ColumnChunk.COLUMN_INDEX_OFFSET) and not cc.has(ColumnChunk.COLUMN_INDEX_LENGTH)
    assert verify(str(out)).ok
    assert not pq.ParquetFile(out).metadata.row_group(0).column(1).has_column_index


def test_build_tail_unit(three_groups):
    footer = footer_of(three_groups)
    # give the footer fake stale pointers on every chunk, then build a tail with mixed indexes
    meta = footer.metadata
    groups = meta.get(FileMetaData.ROW_GROUPS)
    rows = []
    for g in groups.items:
        ccs = tuple(cc.set(4, T.I64, 4).set(5, T.I32, 1).set(6, T.I64, 4).set(7, T.I32, 1) for cc in g.get(1).items)
        rows.append(g.set(1, T.LIST, TList(T.STRUCT, ccs)))
    meta = meta.set(FileMetaData.ROW_GROUPS, T.LIST, TList(T.STRUCT, tuple(rows)))
    stale = decode_footer(encode_struct(meta), footer.footer_start + len(encode_struct(meta)) + 8, "x")
    ci = Struct((Field(1, T.LIST, TList(T.TRUE, (True,))),))
    oi = Struct((Field(1, T.LIST, TList(T.STRUCT, ())),))
    ci_raw, oi_raw = encode_struct(ci), encode_struct(oi)
    plan = [[ChunkIndexes(ci_raw, oi_raw), ChunkIndexes(None, oi_raw), ChunkIndexes(None, None)] for _ in range(3)]
    base = footer.file_size + 100  # wherever the kept prefix ends
    tail = build_tail(stale, plan, "m", base)
    (n,) = struct.unpack("<I", tail[-8:-4])
    new_meta, _ = decode_struct(tail[-8 - n : -8])
    ci_len, oi_len = len(encode_struct(ci)), len(encode_struct(oi))
    for r, g in enumerate(new_meta.get(FileMetaData.ROW_GROUPS).items):
        a, b, c = g.get(1).items
        assert (a.get(6), a.get(7)) == (base + r * ci_len, ci_len)
        assert (a.get(4), a.get(5)) == (base + 3 * ci_len + 2 * r * oi_len, oi_len)
        assert (b.get(4), b.get(5)) == (base + 3 * ci_len + (2 * r + 1) * oi_len, oi_len)
        assert not b.has(6) and not b.has(7)
        assert not any(c.has(i) for i in (4, 5, 6, 7))
    assert len(tail) == 3 * ci_len + 6 * oi_len + n + 8
    assert tail[: ci_len] == encode_struct(ci)


def test_index_locations_go_where_struct_set_puts_them():
    """One pass gives what removing the old locations and setting each new one would, whatever
    order the writer put the chunk's fields in; a chunk left as it was keeps its decoded bytes."""
    rng = random.Random(28)
    for _ in range(300):
        ids = rng.sample([1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 40], rng.randint(0, 8))
        cc = Struct(tuple(Field(i, T.I64, i) for i in ids))
        oi = (rng.randrange(1 << 40), rng.randrange(1 << 20)) if rng.random() < 0.7 else None
        ci = (rng.randrange(1 << 40), rng.randrange(1 << 20)) if rng.random() < 0.7 else None
        expected = cc.without(4, 5, 6, 7)
        for located, first in ((oi, ColumnChunk.OFFSET_INDEX_OFFSET), (ci, ColumnChunk.COLUMN_INDEX_OFFSET)):
            if located is not None:
                expected = ColumnChunk.set(ColumnChunk.set(expected, first, located[0]), first + 1, located[1])
        assert _with_index_locations(cc, oi, ci) == expected
    decoded = decode_struct(encode_struct(Struct((Field(2, T.I64, 4),))))[0]
    assert _with_index_locations(decoded, None, None).raw == decoded.raw
