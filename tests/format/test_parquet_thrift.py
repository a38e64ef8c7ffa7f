"""parquet_thrift: the declarations are consistent, the writers' helpers build canonical structs, and
the names read what pyarrow (an independent implementation of parquet.thrift) wrote."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex.format import parquet_thrift
from pageindex.format.footer import read_footer
from pageindex.format.parquet_thrift import (
    ColumnChunk,
    ColumnMetaData,
    CompressionCodec,
    ConvertedType,
    DataPageHeaderV2,
    Encoding,
    FileMetaData,
    LogicalType,
    PageHeader,
    PageType,
    RowGroup,
    SchemaElement,
    Statistics,
    Type,
)
from pageindex.format.thrift import Field, Struct, T, TList, decode_struct, encode_struct
from pageindex.io.storage import open_source
from pageindex.scan.page_walk import walk_chunk


def _declared(base: type) -> list[type]:
    return [c for c in vars(parquet_thrift).values() if isinstance(c, type) and issubclass(c, base) and c is not base]


@pytest.mark.parametrize("struct", _declared(parquet_thrift._Fields), ids=lambda c: c.__name__)
def test_struct_ids_are_unique_ints_with_a_type(struct):
    assert len(set(struct.IDS.values())) == len(struct.IDS), "two names share a field id"
    assert struct.IDS and all(type(getattr(struct, name)) is int for name in struct.IDS)
    assert all(isinstance(t, T) for t in struct.TYPES.values())


@pytest.mark.parametrize("enum", _declared(parquet_thrift._Values), ids=lambda c: c.__name__)
def test_enum_values_are_unique(enum):
    members = [k for k, v in vars(enum).items() if k.isupper() and isinstance(v, int)]
    assert len(enum.NAMES) == len(members), "two names share a value"


def test_names_of_values():
    assert [CompressionCodec.name(c) for c in range(8)] == [
        "UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW",
    ]
    assert CompressionCodec.name(16) == "UNKNOWN(16)"
    assert Type.NAMES[Type.FIXED_LEN_BYTE_ARRAY] == "FIXED_LEN_BYTE_ARRAY"


def test_make_orders_by_id_skips_none_keeps_false():
    built = DataPageHeaderV2.make(IS_COMPRESSED=False, NUM_VALUES=3, ENCODING=None, NUM_NULLS=0)
    assert built == Struct((Field(1, T.I32, 3), Field(2, T.I32, 0), Field(7, T.TRUE, False)))
    assert decode_struct(encode_struct(built))[0] == built
    with pytest.raises(KeyError):
        PageHeader.make(NOT_A_FIELD=1)


def test_field_and_set_use_the_declared_type():
    assert ColumnChunk.field(ColumnChunk.OFFSET_INDEX_LENGTH, 7) == Field(5, T.I32, 7)
    cc = ColumnChunk.set(Struct((Field(3, T.STRUCT, Struct()),)), ColumnChunk.OFFSET_INDEX_OFFSET, 9)
    assert cc.fields == (Field(3, T.STRUCT, Struct()), Field(4, T.I64, 9))


def test_names_read_what_pyarrow_wrote(tmp_path):
    path = str(tmp_path / "f.parquet")
    table = pa.table({"n": pa.array([1, None, 3], pa.int64()), "s": pa.array(["a", "b", "a"])})
    pq.write_table(table, path, compression="zstd", data_page_version="2.0", use_dictionary=["s"])
    ours = pq.ParquetFile(path).metadata
    with open_source(path) as source:
        footer = read_footer(source)
        meta = footer.metadata
        assert meta.get(FileMetaData.NUM_ROWS) == 3
        schema = meta.get(FileMetaData.SCHEMA).items
        assert [e.get(SchemaElement.NAME) for e in schema] == [b"schema", b"n", b"s"]
        assert schema[2].get(SchemaElement.CONVERTED_TYPE) == ConvertedType.UTF8
        assert schema[2].get(SchemaElement.LOGICAL_TYPE).fields[0].id == LogicalType.STRING
        rg = meta.get(FileMetaData.ROW_GROUPS).items[0]
        assert rg.get(RowGroup.NUM_ROWS) == 3
        for i, cc in enumerate(rg.get(RowGroup.COLUMNS).items):
            theirs = ours.row_group(0).column(i)
            cmd = cc.get(ColumnChunk.META_DATA)
            assert Type.NAMES[cmd.get(ColumnMetaData.TYPE)] == theirs.physical_type
            assert CompressionCodec.name(cmd.get(ColumnMetaData.CODEC)) == theirs.compression
            assert cmd.get(ColumnMetaData.DATA_PAGE_OFFSET) == theirs.data_page_offset
            assert cmd.get(ColumnMetaData.TOTAL_COMPRESSED_SIZE) == theirs.total_compressed_size
            encodings = cmd.get(ColumnMetaData.ENCODINGS)
            assert isinstance(encodings, TList)
            assert {Encoding.name(e) for e in encodings.items} == set(theirs.encodings)
            stats = cmd.get(ColumnMetaData.STATISTICS)
            assert stats.get(Statistics.NULL_COUNT) == theirs.statistics.null_count
        dict_chunk = footer.chunks[0][1]
        assert dict_chunk.dictionary_page_offset == ours.row_group(0).column(1).dictionary_page_offset
        pages = walk_chunk(source, dict_chunk, footer.footer_start)
        assert pages.dictionary.kind == PageType.DICTIONARY_PAGE
        assert [p.kind for p in pages.pages] == [PageType.DATA_PAGE_V2]
        assert pages.pages[0].value_encoding == Encoding.RLE_DICTIONARY
        v2 = pages.pages[0].header.get(PageHeader.DATA_PAGE_HEADER_V2)
        assert v2.get(DataPageHeaderV2.NUM_ROWS) == 3 and v2.get(DataPageHeaderV2.NUM_NULLS) == 0
