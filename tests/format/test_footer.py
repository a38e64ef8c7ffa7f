"""pageindex.format.footer: tail parsing and FileMetaData validation; errors name path / row group / column."""
from __future__ import annotations

import gc
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex.errors import EncryptedFileError, MalformedFileError, PageIndexError
from pageindex.format import footer
from pageindex.format.footer import decode_footer, parse_tail, read_footer
from pageindex.format.parquet_thrift import ColumnChunk, ColumnMetaData, FileMetaData, RowGroup
from pageindex.format.thrift import Field, Struct, T, TList, decode_struct, encode_struct
from pageindex.io.storage import open_source
from tests.helpers.corpus import corpus_path, corpus_rows

PATH = "some/dir/file.parquet"


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A 2-row-group, 2-column pyarrow file with a page index: (bytes, footer_start, metadata)."""
    path = tmp_path_factory.mktemp("footer") / "small.parquet"
    table = pa.table({"a": np.arange(100, dtype=np.int64), "b": [f"s{i}" for i in range(100)]})
    pq.write_table(table, path, row_group_size=50, write_page_index=True)
    data = path.read_bytes()
    (n,) = struct.unpack("<I", data[-8:-4])
    start = len(data) - 8 - n
    meta, _ = decode_struct(data[start:-8])
    return data, start, meta


def decode(meta: Struct, footer_start: int, path: str = PATH):
    raw = encode_struct(meta)
    return decode_footer(raw, footer_start + len(raw) + 8, path)


def with_cc(meta: Struct, rg: int, col: int, fn) -> Struct:
    groups = meta.get(FileMetaData.ROW_GROUPS)
    group = groups.items[rg]
    chunks = list(group.get(RowGroup.COLUMNS).items)
    chunks[col] = fn(chunks[col])
    group = group.set(RowGroup.COLUMNS, T.LIST, TList(T.STRUCT, tuple(chunks)))
    items = list(groups.items)
    items[rg] = group
    return meta.set(FileMetaData.ROW_GROUPS, T.LIST, TList(T.STRUCT, tuple(items)))


def with_cmd(meta: Struct, rg: int, col: int, field_id: int, ftype: T, value) -> Struct:
    return with_cc(meta, rg, col, lambda cc: cc.set(ColumnChunk.META_DATA, T.STRUCT,
                                                    cc.get(ColumnChunk.META_DATA).set(field_id, ftype, value)))


def assert_located(err: PageIndexError, rg: int | None = None, column: str | None = None):
    text = str(err)
    assert err.path == PATH and PATH in text
    if rg is not None:
        assert err.row_group == rg and f"row group {rg}" in text
    if column is not None:
        assert err.column == column and f"column {column}" in text


# ------------------------------------------------------------------ the valid case

def test_valid_footer_views(small):
    data, start, meta = small
    footer = decode(meta, start)
    assert footer.footer_start == start and footer.file_size == len(data)
    assert footer.row_group_rows == (50, 50)
    assert [leaf.dotted for leaf in footer.leaves] == ["a", "b"]
    c = footer.chunks[1][1]
    assert (c.row_group, c.column, c.leaf.dotted) == (1, 1, "b")
    assert c.has_offset_index and c.has_column_index
    md = pq.ParquetFile(pa.BufferReader(data)).metadata.row_group(1).column(1)
    assert c.data_page_offset == md.data_page_offset
    assert c.total_compressed_size == md.total_compressed_size
    assert c.start == md.dictionary_page_offset
    assert footer.created_by.startswith("parquet-cpp-arrow")


def test_key_value_lookup(small):
    _, start, meta = small
    kv = TList(T.STRUCT, (Struct((Field(1, T.BINARY, b"k"), Field(2, T.BINARY, b"v"))),
                          Struct((Field(1, T.BINARY, b"novalue"),))))
    footer = decode(meta.set(FileMetaData.KEY_VALUE_METADATA, T.LIST, kv), start)
    assert footer.key_value("k") == "v"
    assert footer.key_value("novalue") is None
    assert footer.key_value("absent") is None


# ------------------------------------------------------------------ parse_tail

def test_parse_tail_valid():
    tail = b"x" * 100 + struct.pack("<I", 50) + b"PAR1"
    assert parse_tail(tail, 1000, PATH) == 50


@pytest.mark.parametrize("size", [0, 4, 8, 11])
def test_too_small(size):
    with pytest.raises(MalformedFileError, match="too small") as err:
        parse_tail(b"PAR1"[:size], size, PATH)
    assert err.value.path == PATH


def test_wrong_magic():
    with pytest.raises(MalformedFileError, match="magic") as err:
        parse_tail(b"\x00" * 20 + struct.pack("<I", 5) + b"PAR2", 1000, PATH)
    assert not isinstance(err.value, EncryptedFileError)


def test_encrypted_footer_magic():
    with pytest.raises(EncryptedFileError, match="PARE") as err:
        parse_tail(b"\x00" * 20 + struct.pack("<I", 5) + b"PARE", 1000, PATH)
    assert err.value.path == PATH


@pytest.mark.parametrize("length,size", [(0, 100), (89, 100), (2**32 - 1, 100), (2**31, 2**40)])
def test_footer_length_does_not_fit(length, size):
    with pytest.raises(MalformedFileError, match="footer length"):
        parse_tail(struct.pack("<I", length) + b"PAR1", size, PATH)


def test_footer_length_exactly_fits():
    assert parse_tail(struct.pack("<I", 88) + b"PAR1", 100, PATH) == 88


# ------------------------------------------------------------------ decode_footer

def test_decoding_a_footer_pauses_the_collector_and_leaves_it_as_it_was(small, monkeypatch):
    """decode_footer builds the tree with the garbage collector paused, also when it fails."""
    _, start, meta = small
    raw = encode_struct(meta)
    seen = []

    def noting(*args):
        seen.append(gc.isenabled())
        return decode_struct(*args)

    monkeypatch.setattr(footer, "decode_struct", noting)
    for data, size in ((raw, start + len(raw) + 8), (raw[:-5], start + len(raw) + 3)):
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            try:
                decode_footer(data, size, PATH)
            except MalformedFileError:
                pass
            assert gc.isenabled() is enabled
    gc.enable()
    assert seen == [False] * 4


def test_garbage_and_trailing_bytes(small):
    _, start, meta = small
    raw = encode_struct(meta)
    with pytest.raises(MalformedFileError, match="trailing") as err:
        decode_footer(raw + b"\x00\x00", start + len(raw) + 10, PATH)
    assert err.value.offset == start + len(raw)
    with pytest.raises(MalformedFileError, match="footer") as err:
        decode_footer(raw[:-5], start + len(raw) + 3, PATH)
    assert err.value.path == PATH


def test_encryption_algorithm_field(small):
    _, start, meta = small
    with pytest.raises(EncryptedFileError):
        decode(meta.set(FileMetaData.ENCRYPTION_ALGORITHM, T.STRUCT, Struct()), start)


@pytest.mark.parametrize("field_id", [ColumnChunk.CRYPTO_METADATA, ColumnChunk.ENCRYPTED_COLUMN_METADATA])
def test_encrypted_column(small, field_id):
    _, start, meta = small
    bad = with_cc(meta, 1, 0, lambda cc: cc.set(field_id, T.STRUCT if field_id == ColumnChunk.CRYPTO_METADATA else T.BINARY,
                                                 Struct() if field_id == ColumnChunk.CRYPTO_METADATA else b"x"))
    with pytest.raises(EncryptedFileError) as err:
        decode(bad, start)
    assert_located(err.value, 1, "a")


def test_column_count_mismatch(small):
    _, start, meta = small
    bad = meta
    groups = meta.get(FileMetaData.ROW_GROUPS)
    g1 = groups.items[1]
    g1 = g1.set(RowGroup.COLUMNS, T.LIST, TList(T.STRUCT, g1.get(RowGroup.COLUMNS).items[:1]))
    bad = meta.set(FileMetaData.ROW_GROUPS, T.LIST, TList(T.STRUCT, (groups.items[0], g1)))
    with pytest.raises(MalformedFileError, match="1 column chunks for 2 leaf columns") as err:
        decode(bad, start)
    assert_located(err.value, 1)


def test_missing_row_groups_and_schema(small):
    _, start, meta = small
    with pytest.raises(MalformedFileError, match="row group"):
        decode(meta.without(FileMetaData.ROW_GROUPS), start)
    with pytest.raises(MalformedFileError, match="schema") as err:
        decode(meta.without(FileMetaData.SCHEMA), start)
    assert err.value.path == PATH


def test_file_path_set(small):
    _, start, meta = small
    bad = with_cc(meta, 0, 1, lambda cc: cc.set(ColumnChunk.FILE_PATH, T.BINARY, b"other.parquet"))
    with pytest.raises(MalformedFileError, match="file_path") as err:
        decode(bad, start)
    assert_located(err.value, 0, "b")
    # an empty file_path is harmless (some writers emit it)
    decode(with_cc(meta, 0, 1, lambda cc: cc.set(ColumnChunk.FILE_PATH, T.BINARY, b"")), start)


@pytest.mark.parametrize("off_id,len_id", [(ColumnChunk.OFFSET_INDEX_OFFSET, ColumnChunk.OFFSET_INDEX_LENGTH),
                                           (ColumnChunk.COLUMN_INDEX_OFFSET, ColumnChunk.COLUMN_INDEX_LENGTH)])
@pytest.mark.parametrize("case", ["past_footer", "into_footer", "before_magic", "zero_length",
                                  "negative_length", "offset_only", "length_only"])
def test_index_location_out_of_range(small, off_id, len_id, case):
    _, start, meta = small

    def mutate(cc: Struct) -> Struct:
        if case == "past_footer":
            return cc.set(off_id, T.I64, start + 10).set(len_id, T.I32, 5)
        if case == "into_footer":
            return cc.set(off_id, T.I64, start - 3).set(len_id, T.I32, 4)
        if case == "before_magic":
            return cc.set(off_id, T.I64, 2).set(len_id, T.I32, 4)
        if case == "zero_length":
            return cc.set(len_id, T.I32, 0)
        if case == "negative_length":
            return cc.set(len_id, T.I32, -5)
        if case == "offset_only":
            return cc.without(len_id)
        return cc.without(off_id)

    with pytest.raises(MalformedFileError) as err:
        decode(with_cc(meta, 1, 1, mutate), start)
    assert_located(err.value, 1, "b")
    assert "page index" in str(err.value)


def test_index_block_ending_at_footer_is_fine(small):
    _, start, meta = small
    footer = decode(with_cc(meta, 1, 1, lambda cc: cc.set(ColumnChunk.COLUMN_INDEX_OFFSET, T.I64, start - 4)
                            .set(ColumnChunk.COLUMN_INDEX_LENGTH, T.I32, 4)), start)
    assert footer.chunks[1][1].column_index == (start - 4, 4)


@pytest.mark.parametrize("field_id,value,match", [
    (ColumnMetaData.TYPE, 5, "does not match schema type"),
    (ColumnMetaData.NUM_VALUES, -1, "num_values"),
    (ColumnMetaData.DATA_PAGE_OFFSET, 10**12, "data_page_offset"),
    (ColumnMetaData.TOTAL_COMPRESSED_SIZE, -1, "total_compressed_size"),
    (ColumnMetaData.CODEC, -1, "codec"),
])
def test_column_metadata_checks(small, field_id, value, match):
    _, start, meta = small
    ftype = T.I32 if field_id in (ColumnMetaData.TYPE, ColumnMetaData.CODEC) else T.I64
    with pytest.raises(MalformedFileError, match=match) as err:
        decode(with_cmd(meta, 0, 1, field_id, ftype, value), start)
    assert_located(err.value, 0, "b")


def test_missing_column_metadata(small):
    _, start, meta = small
    with pytest.raises(MalformedFileError, match="ColumnMetaData") as err:
        decode(with_cc(meta, 1, 0, lambda cc: cc.without(ColumnChunk.META_DATA)), start)
    assert_located(err.value, 1, "a")


def test_dictionary_offset_quirks(small):
    _, start, meta = small
    for bogus in (0, -1):
        footer = decode(with_cmd(meta, 0, 0, ColumnMetaData.DICTIONARY_PAGE_OFFSET, T.I64, bogus), start)
        assert footer.chunks[0][0].dictionary_page_offset is None
        assert footer.chunks[0][0].start == footer.chunks[0][0].data_page_offset
    data_off = decode(meta, start).chunks[0][0].data_page_offset
    footer = decode(with_cmd(meta, 0, 0, ColumnMetaData.DICTIONARY_PAGE_OFFSET, T.I64, data_off + 10), start)
    assert footer.chunks[0][0].dictionary_page_offset is None


def test_negative_row_count(small):
    _, start, meta = small
    groups = meta.get(FileMetaData.ROW_GROUPS)
    g = groups.items[0].set(RowGroup.NUM_ROWS, T.I64, -1)
    with pytest.raises(MalformedFileError, match="num_rows") as err:
        decode(meta.set(FileMetaData.ROW_GROUPS, T.LIST, TList(T.STRUCT, (g, groups.items[1]))), start)
    assert_located(err.value, 0)


# ------------------------------------------------------------------ read_footer on files

def test_read_footer_truncated_and_bad_magic(tmp_path, small):
    data, _, _ = small
    for name, content in [("cut.parquet", data[:-3]), ("half.parquet", data[: len(data) // 2]),
                          ("nostart.parquet", b"XXXX" + data[4:]), ("tiny.parquet", b"PAR1")]:
        p = tmp_path / name
        p.write_bytes(content)
        with pytest.raises(MalformedFileError) as err, open_source(str(p)) as s:
            read_footer(s)
        assert err.value.path is not None and name in err.value.path


@pytest.mark.parametrize("path", [corpus_path(r) for r in corpus_rows("encrypted")], ids=lambda p: p.name)
def test_encrypted_corpus_files_refused(path):
    with pytest.raises(EncryptedFileError), open_source(str(path)) as s:
        read_footer(s)


def test_bad_inputs_fail_cleanly():
    """Footers of malformed corpus files either decode or raise a PageIndexError, nothing else."""
    outcomes = {"ok": 0, "refused": 0}
    for row in corpus_rows("bad_input"):
        path = corpus_path(row)
        try:
            with open_source(str(path)) as s:
                read_footer(s)
            outcomes["ok"] += 1
        except PageIndexError:
            outcomes["refused"] += 1
    assert outcomes["refused"] > 20 and outcomes["ok"] > 20


def test_every_valid_corpus_footer_decodes():
    for cat in ("candidate", "oracle", "candidate_reader_limited"):
        for row in corpus_rows(cat):
            path = corpus_path(row)
            with open_source(str(path)) as s:
                footer = read_footer(s)
            md = pq.ParquetFile(path).metadata if path.name != "incorrect_map_schema.parquet" else None
            if md is not None:
                assert len(footer.chunks) == md.num_row_groups
                assert len(footer.leaves) == md.num_columns
                # (per row group: repeated_no_annotation.parquet says num_rows 0 at file level)
                assert footer.row_group_rows == tuple(md.row_group(i).num_rows
                                                      for i in range(md.num_row_groups))


def test_footer_path_named_in_errors(tmp_path):
    p = Path(tmp_path) / "named.parquet"
    p.write_bytes(b"PAR1" + b"\x00" * 20 + struct.pack("<I", 5) + b"PARE")
    with pytest.raises(EncryptedFileError) as err, open_source(str(p)) as s:
        read_footer(s)
    assert "named.parquet" in str(err.value)


def test_repeated_field_ids_read_the_first_one(small):
    """A corrupt footer may repeat a field id: the chunk's view reads the first, as Struct.get does."""
    _, start, meta = small
    good = decode(meta, start).chunks[1][1]

    def repeat(cc: Struct) -> Struct:
        md = cc.get(ColumnChunk.META_DATA)
        md = Struct(md.fields + (Field(ColumnMetaData.DATA_PAGE_OFFSET, T.I64, -1),))
        second = Field(ColumnChunk.META_DATA, T.STRUCT, Struct())
        return Struct(cc.set(ColumnChunk.META_DATA, T.STRUCT, md).fields + (second,))

    again = decode(with_cc(meta, 1, 1, repeat), start).chunks[1][1]
    assert again == good
