"""Synthesized Parquet files: page bytes we pick under a footer we write, one row group, read by
Arrow C++ without a copy. Values and levels are both decoded through such files.
"""
from __future__ import annotations

import bisect
import io
import struct
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Sequence

import pyarrow as pa

from pageindex.errors import MalformedFileError
from pageindex.format.footer import MAGIC
from pageindex.format.parquet_thrift import (
    ColumnChunk,
    ColumnMetaData,
    Encoding,
    FileMetaData,
    RowGroup,
    SchemaElement,
)
from pageindex.format.thrift import Encoded, Struct, T, TList, binary_to, encode_struct, list_header_to, signed_to
from pageindex.io.storage import StoredRange


@dataclass(frozen=True)
class Synthesized:
    """A synthesized file as the buffers it is made of, in order: the chunks' page bytes are
    referenced, never copied (a join would hold every chunk twice and cost a pass over it), or
    left on storage and read again as Arrow streams through them."""

    parts: tuple[bytes | memoryview | StoredRange, ...]

    def open(self) -> pa.PythonFile:
        return pa.PythonFile(_PartsReader(self.parts), mode="r")

    @property
    def streamed(self) -> bool:
        return any(isinstance(p, StoredRange) for p in self.parts)


class _PartsReader(io.RawIOBase):
    """A read-only file over concatenated buffers. A read within one buffer is a zero-copy view,
    which Arrow keeps as is; only reads across buffers (the footer's last bytes) are copied, and
    a part left on storage (StoredRange) is read from it."""

    def __init__(self, parts: Sequence[bytes | memoryview | StoredRange]) -> None:
        super().__init__()
        self._parts = [p if isinstance(p, StoredRange) else memoryview(p) for p in parts]
        self._starts = [0]
        for part in self._parts:
            self._starts.append(self._starts[-1] + len(part))
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._starts[-1]}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, size: int = -1) -> memoryview | bytes:
        end = self._starts[-1] if size < 0 else min(self._starts[-1], self._pos + size)
        pieces = []
        i = bisect.bisect_right(self._starts, self._pos) - 1
        while self._pos < end:
            start, part = self._starts[i], self._parts[i]
            pieces.append(part[self._pos - start : min(len(part), end - start)])
            self._pos = min(start + len(part), end)
            i += 1
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    read_buffer = read  # Arrow prefers read_buffer and wraps its result without a copy


# A synthesized ColumnChunk's fields in order, and the headers each takes after the one before.
_CHUNK_HEADERS = ColumnChunk.headers(ColumnChunk.FILE_OFFSET, ColumnChunk.META_DATA)
_META_FIELDS = (ColumnMetaData.TYPE, ColumnMetaData.ENCODINGS, ColumnMetaData.PATH_IN_SCHEMA, ColumnMetaData.CODEC,
                ColumnMetaData.NUM_VALUES, ColumnMetaData.TOTAL_UNCOMPRESSED_SIZE, ColumnMetaData.TOTAL_COMPRESSED_SIZE,
                ColumnMetaData.DATA_PAGE_OFFSET, ColumnMetaData.DICTIONARY_PAGE_OFFSET)
_TYPE, _ENCODINGS, _PATH, *_SIZES, _DICTIONARY = ColumnMetaData.headers(*_META_FIELDS)
_PLAIN_ONLY = bytearray()
list_header_to(_PLAIN_ONLY, T.I32, 1)
signed_to(_PLAIN_ONLY, Encoding.PLAIN)


def column_chunk(physical_type: int, path: Sequence[str], codec: int, pos: int, *, num_values: int,
                 uncompressed: int, compressed: int, data_offset: int,
                 dictionary_offset: int | None) -> Encoded:
    """A ColumnChunk whose pages start at file offset `pos`, with what Arrow needs to read them.
    Only ever written, a few hundred per synthesized file: encoded straight to bytes, no tree."""
    out = bytearray()
    out.append(_CHUNK_HEADERS[0])
    signed_to(out, pos)
    out.append(_CHUNK_HEADERS[1])
    out.append(_TYPE)
    signed_to(out, physical_type)
    out.append(_ENCODINGS)
    out += _PLAIN_ONLY
    out.append(_PATH)
    list_header_to(out, T.BINARY, len(path))
    for name in path:
        binary_to(out, name.encode())
    for header, value in zip(_SIZES, (codec, num_values, uncompressed, compressed, data_offset)):
        out.append(header)
        signed_to(out, value)
    if dictionary_offset is not None:
        out.append(_DICTIONARY)
        signed_to(out, dictionary_offset)
    out.append(T.STOP)  # ColumnMetaData ends
    out.append(T.STOP)  # and ColumnChunk
    return Encoded(bytes(out))


def one_row_group_file(top_level: int, elements: Sequence[Struct], chunk_structs: Sequence[Encoded],
                        body: Sequence[bytes | memoryview], num_rows: int, created_by: bytes | None
                        ) -> Synthesized:
    """Magic, the body's buffers and a footer describing one row group of these chunks, under
    `top_level` fields given depth-first as `elements`."""
    root = SchemaElement.make(NAME=b"schema", NUM_CHILDREN=top_level)
    row_group = RowGroup.make(
        COLUMNS=TList(T.STRUCT, tuple(chunk_structs)),
        TOTAL_BYTE_SIZE=sum(len(b) for b in body),
        NUM_ROWS=num_rows,
    )
    footer = encode_struct(FileMetaData.make(
        VERSION=1,
        SCHEMA=TList(T.STRUCT, (root, *elements)),
        NUM_ROWS=num_rows,
        ROW_GROUPS=TList(T.STRUCT, (row_group,)),
        # Arrow C++ keys workarounds for known writer bugs on created_by; keep it.
        CREATED_BY=created_by or None,
    ))
    return Synthesized((MAGIC, *body, footer + struct.pack("<I", len(footer)) + MAGIC))


@contextmanager
def arrow_errors() -> Iterator[None]:
    """Whatever Arrow raises while decoding page data becomes a MalformedFileError."""
    try:
        yield
    except MalformedFileError:
        raise
    except (OSError, pa.ArrowException, ValueError, IndexError) as err:
        raise MalformedFileError(f"page data could not be decoded: {err}") from None
