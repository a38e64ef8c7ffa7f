"""parquet.thrift by name: the field ids (with their Thrift types) of the structs pageindex reads or
writes, and the enums it uses. Every other module names ids and enum values through these.
"""
from __future__ import annotations

from typing import Any, ClassVar

from pageindex.format.thrift import Field, Struct, T, field_header_to

_new_field = tuple.__new__  # Field(...) without the named tuple's Python-level __new__


class _Fields:
    """Base of the struct declarations: a field is declared `NAME = id, thrift type`, and the
    class keeps NAME as the plain int id (readers compare ints on every page header) and its type
    in TYPES, so writers never restate it. Booleans have type T.TRUE, as format.thrift holds them."""

    TYPES: ClassVar[dict[int, T]]
    IDS: ClassVar[dict[str, int]]

    def __init_subclass__(cls) -> None:
        cls.TYPES, cls.IDS = {}, {}
        for name, value in list(vars(cls).items()):
            if name.isupper() and isinstance(value, tuple):
                field_id, ftype = value
                setattr(cls, name, field_id)
                cls.IDS[name] = field_id
                cls.TYPES[field_id] = ftype

    @classmethod
    def field(cls, field_id: int, value: Any) -> Field:
        return _new_field(Field, (field_id, cls.TYPES[field_id], value))

    @classmethod
    def make(cls, **values: Any) -> Struct:
        """A struct of the fields given by name (None leaves one out), in field-id order as
        Thrift writers put them. Page headers are built with it, hence the plain loop."""
        ids, types = cls.IDS, cls.TYPES
        fields = []
        for name, value in values.items():
            if value is not None:
                field_id = ids[name]
                fields.append(_new_field(Field, (field_id, types[field_id], value)))
        fields.sort()  # ids are unique, so no two values are ever compared
        return Struct(tuple(fields))

    @classmethod
    def header_to(cls, out: bytearray, last_id: int, field_id: int) -> int:
        """Append this field's header after field `last_id`, for a struct written straight to
        bytes (thrift.field_header_to); return field_id."""
        return field_header_to(out, last_id, field_id, cls.TYPES[field_id])

    @classmethod
    def headers(cls, *field_ids: int) -> bytes:
        """The headers of these fields, each after the one before (the first opens the struct):
        what a struct written straight to bytes appends, computed once."""
        out, last_id = bytearray(), 0
        for field_id in field_ids:
            last_id = cls.header_to(out, last_id, field_id)
        return bytes(out)

    @classmethod
    def set(cls, struct: Struct, field_id: int, value: Any) -> Struct:
        """`struct` with this field replaced or inserted (see Struct.set)."""
        return struct.set(field_id, cls.TYPES[field_id], value)


class _Values:
    """Base of the enum declarations: plain int class attributes (an IntEnum member costs more in
    the loops that compare them), with NAMES from each value back to its name."""

    NAMES: ClassVar[dict[int, str]]

    def __init_subclass__(cls) -> None:
        cls.NAMES = {v: k for k, v in vars(cls).items() if k.isupper() and isinstance(v, int)}

    @classmethod
    def name(cls, value: int) -> str:
        return cls.NAMES.get(value, f"UNKNOWN({value})")


# ---------------------------------------------------------------- enums


class Type(_Values):
    """Physical types."""

    BOOLEAN = 0
    INT32 = 1
    INT64 = 2
    INT96 = 3
    FLOAT = 4
    DOUBLE = 5
    BYTE_ARRAY = 6
    FIXED_LEN_BYTE_ARRAY = 7


class ConvertedType(_Values):
    UTF8 = 0
    MAP = 1
    MAP_KEY_VALUE = 2
    LIST = 3
    ENUM = 4
    DECIMAL = 5
    DATE = 6
    TIME_MILLIS = 7
    TIME_MICROS = 8
    TIMESTAMP_MILLIS = 9
    TIMESTAMP_MICROS = 10
    UINT_8 = 11
    UINT_16 = 12
    UINT_32 = 13
    UINT_64 = 14
    INT_8 = 15
    INT_16 = 16
    INT_32 = 17
    INT_64 = 18
    JSON = 19
    BSON = 20
    INTERVAL = 21


class FieldRepetitionType(_Values):
    REQUIRED = 0
    OPTIONAL = 1
    REPEATED = 2


class Encoding(_Values):
    PLAIN = 0
    PLAIN_DICTIONARY = 2
    RLE = 3
    BIT_PACKED = 4
    DELTA_BINARY_PACKED = 5
    DELTA_LENGTH_BYTE_ARRAY = 6
    DELTA_BYTE_ARRAY = 7
    RLE_DICTIONARY = 8
    BYTE_STREAM_SPLIT = 9


class CompressionCodec(_Values):
    UNCOMPRESSED = 0
    SNAPPY = 1
    GZIP = 2
    LZO = 3
    BROTLI = 4
    LZ4 = 5
    ZSTD = 6
    LZ4_RAW = 7


class PageType(_Values):
    """Page types pageindex handles (INDEX_PAGE, never written by anyone, is passed over)."""

    DATA_PAGE = 0
    DICTIONARY_PAGE = 2
    DATA_PAGE_V2 = 3


class BoundaryOrder(_Values):
    UNORDERED = 0
    ASCENDING = 1
    DESCENDING = 2


# ---------------------------------------------------------------- footer structs


class FileMetaData(_Fields):
    VERSION = 1, T.I32
    SCHEMA = 2, T.LIST
    NUM_ROWS = 3, T.I64
    ROW_GROUPS = 4, T.LIST
    KEY_VALUE_METADATA = 5, T.LIST
    CREATED_BY = 6, T.BINARY
    COLUMN_ORDERS = 7, T.LIST
    ENCRYPTION_ALGORITHM = 8, T.STRUCT


class KeyValue(_Fields):
    KEY = 1, T.BINARY
    VALUE = 2, T.BINARY


class SchemaElement(_Fields):
    TYPE = 1, T.I32
    TYPE_LENGTH = 2, T.I32
    REPETITION_TYPE = 3, T.I32
    NAME = 4, T.BINARY
    NUM_CHILDREN = 5, T.I32
    CONVERTED_TYPE = 6, T.I32
    SCALE = 7, T.I32
    PRECISION = 8, T.I32
    LOGICAL_TYPE = 10, T.STRUCT


class LogicalType(_Fields):
    """A union: one member is set, each a struct (most of them empty)."""

    STRING = 1, T.STRUCT
    MAP = 2, T.STRUCT
    LIST = 3, T.STRUCT
    ENUM = 4, T.STRUCT
    DECIMAL = 5, T.STRUCT
    DATE = 6, T.STRUCT
    TIME = 7, T.STRUCT
    TIMESTAMP = 8, T.STRUCT
    INTEGER = 10, T.STRUCT
    UNKNOWN = 11, T.STRUCT
    JSON = 12, T.STRUCT
    BSON = 13, T.STRUCT
    UUID = 14, T.STRUCT
    FLOAT16 = 15, T.STRUCT
    VARIANT = 16, T.STRUCT
    GEOMETRY = 17, T.STRUCT
    GEOGRAPHY = 18, T.STRUCT


class DecimalType(_Fields):
    SCALE = 1, T.I32


class IntType(_Fields):
    IS_SIGNED = 2, T.TRUE


class TimestampType(_Fields):
    """TimeType has the same fields."""

    UNIT = 2, T.STRUCT


class TimeUnit(_Fields):
    """A union of empty structs."""

    MILLIS = 1, T.STRUCT
    MICROS = 2, T.STRUCT
    NANOS = 3, T.STRUCT


class ColumnOrder(_Fields):
    """A union of empty structs."""

    TYPE_ORDER = 1, T.STRUCT
    IEEE_754_TOTAL_ORDER = 2, T.STRUCT


class RowGroup(_Fields):
    COLUMNS = 1, T.LIST
    TOTAL_BYTE_SIZE = 2, T.I64
    NUM_ROWS = 3, T.I64


class ColumnChunk(_Fields):
    FILE_PATH = 1, T.BINARY
    FILE_OFFSET = 2, T.I64
    META_DATA = 3, T.STRUCT
    OFFSET_INDEX_OFFSET = 4, T.I64
    OFFSET_INDEX_LENGTH = 5, T.I32
    COLUMN_INDEX_OFFSET = 6, T.I64
    COLUMN_INDEX_LENGTH = 7, T.I32
    CRYPTO_METADATA = 8, T.STRUCT
    ENCRYPTED_COLUMN_METADATA = 9, T.BINARY


class ColumnMetaData(_Fields):
    TYPE = 1, T.I32
    ENCODINGS = 2, T.LIST
    PATH_IN_SCHEMA = 3, T.LIST
    CODEC = 4, T.I32
    NUM_VALUES = 5, T.I64
    TOTAL_UNCOMPRESSED_SIZE = 6, T.I64
    TOTAL_COMPRESSED_SIZE = 7, T.I64
    DATA_PAGE_OFFSET = 9, T.I64
    DICTIONARY_PAGE_OFFSET = 11, T.I64
    STATISTICS = 12, T.STRUCT
    BLOOM_FILTER_OFFSET = 14, T.I64
    BLOOM_FILTER_LENGTH = 15, T.I32


class Statistics(_Fields):
    """max/min are the deprecated signed-order bounds; max_value/min_value follow the column order."""

    MAX = 1, T.BINARY
    MIN = 2, T.BINARY
    NULL_COUNT = 3, T.I64
    MAX_VALUE = 5, T.BINARY
    MIN_VALUE = 6, T.BINARY


class BloomFilterHeader(_Fields):
    """Precedes a bloom filter's bitset at ColumnMetaData.BLOOM_FILTER_OFFSET."""

    NUM_BYTES = 1, T.I32
    ALGORITHM = 2, T.STRUCT
    HASH = 3, T.STRUCT
    COMPRESSION = 4, T.STRUCT


class BloomFilterAlgorithm(_Fields):
    """A union of empty structs."""

    BLOCK = 1, T.STRUCT


class BloomFilterHash(_Fields):
    """A union of empty structs."""

    XXHASH = 1, T.STRUCT


class BloomFilterCompression(_Fields):
    """A union of empty structs."""

    UNCOMPRESSED = 1, T.STRUCT


# ---------------------------------------------------------------- page headers


class PageHeader(_Fields):
    TYPE = 1, T.I32
    UNCOMPRESSED_PAGE_SIZE = 2, T.I32
    COMPRESSED_PAGE_SIZE = 3, T.I32
    CRC = 4, T.I32
    DATA_PAGE_HEADER = 5, T.STRUCT
    DICTIONARY_PAGE_HEADER = 7, T.STRUCT
    DATA_PAGE_HEADER_V2 = 8, T.STRUCT


class DataPageHeader(_Fields):
    NUM_VALUES = 1, T.I32
    ENCODING = 2, T.I32
    DEFINITION_LEVEL_ENCODING = 3, T.I32
    REPETITION_LEVEL_ENCODING = 4, T.I32
    STATISTICS = 5, T.STRUCT


class DictionaryPageHeader(_Fields):
    NUM_VALUES = 1, T.I32
    ENCODING = 2, T.I32


class DataPageHeaderV2(_Fields):
    NUM_VALUES = 1, T.I32
    NUM_NULLS = 2, T.I32
    NUM_ROWS = 3, T.I32
    ENCODING = 4, T.I32
    DEFINITION_LEVELS_BYTE_LENGTH = 5, T.I32
    REPETITION_LEVELS_BYTE_LENGTH = 6, T.I32
    IS_COMPRESSED = 7, T.TRUE
    STATISTICS = 8, T.STRUCT


# ---------------------------------------------------------------- page index


class ColumnIndex(_Fields):
    NULL_PAGES = 1, T.LIST
    MIN_VALUES = 2, T.LIST
    MAX_VALUES = 3, T.LIST
    BOUNDARY_ORDER = 4, T.I32
    NULL_COUNTS = 5, T.LIST
    REPETITION_LEVEL_HISTOGRAMS = 6, T.LIST
    DEFINITION_LEVEL_HISTOGRAMS = 7, T.LIST
    NAN_COUNTS = 8, T.LIST


class OffsetIndex(_Fields):
    PAGE_LOCATIONS = 1, T.LIST
    UNENCODED_BYTE_ARRAY_DATA_BYTES = 2, T.LIST


class PageLocation(_Fields):
    OFFSET = 1, T.I64
    COMPRESSED_PAGE_SIZE = 2, T.I32
    FIRST_ROW_INDEX = 3, T.I64
