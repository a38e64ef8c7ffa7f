"""Level streams: Parquet repetition and definition levels decoded into numpy int16 arrays.

RLE/bit-packed hybrid streams are decoded by Arrow C++; the deprecated BIT_PACKED form here.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pageindex.errors import MalformedFileError
from pageindex.format.footer import MAGIC
from pageindex.format.parquet_thrift import (
    CompressionCodec,
    ConvertedType,
    DataPageHeader,
    DictionaryPageHeader,
    Encoding,
    FieldRepetitionType,
    PageHeader,
    PageType,
    SchemaElement,
    Type,
)
from pageindex.format.thrift import encode_struct, uleb128
from pageindex.scan.synthetic import arrow_errors, column_chunk, one_row_group_file

MAX_LEVEL = np.iinfo(np.int16).max


def v1_hybrid_block(body: bytes | memoryview, pos: int) -> tuple[memoryview, int]:
    """The hybrid stream of a data page v1 level block at body[pos:] (a 4-byte little-endian
    length, then the stream) and the position after the block."""
    if len(body) - pos < 4:
        raise MalformedFileError("level block length is truncated")
    length = int.from_bytes(body[pos : pos + 4], "little")
    start = pos + 4
    if length > len(body) - start:
        raise MalformedFileError(
            f"level block of {length} bytes overruns the page ({len(body) - start} bytes left)"
        )
    return memoryview(body)[start : start + length], start + length


def v1_bit_packed_levels(
    body: bytes | memoryview, pos: int, max_level: int, count: int
) -> tuple[np.ndarray, int]:
    """Data page v1 levels in the deprecated BIT_PACKED encoding: no length prefix, values packed
    most significant bit first in ceil(count * bit_width / 8) bytes."""
    _check(max_level, count)
    width = max_level.bit_length()
    size = (count * width + 7) // 8
    if size > len(body) - pos:
        raise MalformedFileError(f"BIT_PACKED levels need {size} bytes, {len(body) - pos} left")
    bits = np.unpackbits(np.frombuffer(body, dtype=np.uint8, count=size, offset=pos), bitorder="big")
    bits = bits[: count * width].reshape(count, width).astype(np.int32)
    values = (bits << np.arange(width - 1, -1, -1, dtype=np.int32)).sum(axis=1)
    if count and int(values.max()) > max_level:
        raise MalformedFileError(f"level {int(values.max())} exceeds the maximum level {max_level}")
    return values.astype(np.int16), pos + size


def decode_hybrid(streams: Sequence[tuple[bytes | memoryview, int]], max_level: int) -> np.ndarray:
    """Decode hybrid streams, each (bytes, level count), into one array of all their levels.

    Levels above max_level, truncated streams and zero-length runs are malformed.
    """
    for _, count in streams:
        _check(max_level, count)
    total = sum(count for _, count in streams)
    if total == 0:
        return np.zeros(0, dtype=np.int16)
    runs = [_single_run(data, count, max_level) for data, count in streams if count]
    if None not in runs:
        # The common case (a page without nulls, or of a required group's leaf): each stream is
        # one run of one level, and Arrow would be called only to repeat it.
        return np.repeat(np.array(runs, dtype=np.int16), [count for _, count in streams if count])
    # A hybrid level stream is, byte for byte, a dictionary-index stream once the bit width
    # byte is put in front: Arrow then decodes the runs in C++ and looks each level up in a
    # dictionary of 0..max_level, which also rejects any level above it.
    width = bytes((max_level.bit_length(),))
    dictionary = np.arange(max_level + 1, dtype="<i4").tobytes()
    body = [_page_header(PageType.DICTIONARY_PAGE, len(dictionary), max_level + 1), dictionary]
    for data, count in streams:
        if count:
            body += (_page_header(PageType.DATA_PAGE, len(data) + 1, count), width, data)
    dictionary_size = len(body[0]) + len(dictionary)
    size = sum(len(b) for b in body)
    chunk = column_chunk(Type.INT32, (_NAME.decode(),), CompressionCodec.UNCOMPRESSED, len(MAGIC), num_values=total,
                         uncompressed=size, compressed=size, data_offset=len(MAGIC) + dictionary_size,
                         dictionary_offset=len(MAGIC))
    file = one_row_group_file(1, [_LEVEL_ELEMENT], [chunk], body, total, None)
    with arrow_errors():
        # Streams are small: one joined buffer is cheaper than Python file calls per read.
        reader = pq.ParquetFile(pa.BufferReader(b"".join(file.parts)))
        column = reader.read_row_group(0, use_threads=False).column(0)
    if len(column) != total:
        raise MalformedFileError(f"decoded {len(column)} levels, expected {total}")
    return column.to_numpy()


def _single_run(data: bytes | memoryview, count: int, max_level: int) -> int | None:
    """The level of a stream that starts with one RLE run of exactly `count` valid levels (what
    follows is never read, as in Arrow), else None."""
    run = uleb128(data, 0, 5)
    if run is None:
        return None
    header, pos = run
    width = (max_level.bit_length() + 7) // 8
    if header & 1 or header >> 1 != count or len(data) < pos + width:
        return None
    level = int.from_bytes(data[pos : pos + width], "little")
    return level if level <= max_level else None


def _check(max_level: int, count: int) -> None:
    if not 0 < max_level <= MAX_LEVEL:
        raise MalformedFileError(f"maximum level {max_level} is out of range")
    if count < 0:
        raise MalformedFileError(f"negative level count {count}")


_NAME = b"levels"
# INT32 annotated INT_16: Arrow hands back int16 levels, the width the callers count in.
_LEVEL_ELEMENT = SchemaElement.make(
    TYPE=Type.INT32,
    REPETITION_TYPE=FieldRepetitionType.REQUIRED,
    NAME=_NAME,
    CONVERTED_TYPE=ConvertedType.INT_16,
)


def _page_header(kind: int, size: int, count: int) -> bytes:
    dictionary = kind == PageType.DICTIONARY_PAGE
    return encode_struct(PageHeader.make(
        TYPE=kind,
        UNCOMPRESSED_PAGE_SIZE=size,
        COMPRESSED_PAGE_SIZE=size,
        DATA_PAGE_HEADER=None if dictionary else DataPageHeader.make(
            NUM_VALUES=count, ENCODING=Encoding.RLE_DICTIONARY, DEFINITION_LEVEL_ENCODING=Encoding.RLE,
            REPETITION_LEVEL_ENCODING=Encoding.RLE),
        DICTIONARY_PAGE_HEADER=DictionaryPageHeader.make(NUM_VALUES=count, ENCODING=Encoding.PLAIN) if dictionary
        else None,
    ))
