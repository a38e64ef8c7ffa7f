"""Parquet footer: locate, decode and validate FileMetaData, and give a typed view of its parts.

Validation here is what lets later stages (and pyarrow) trust offsets, sizes and counts.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from pageindex.errors import (EncryptedFileError, FooterMissingError, MalformedFileError, NotParquetError,
                              PageIndexError)
from pageindex.format.collector import collector_paused
from pageindex.format.parquet_thrift import ColumnChunk, ColumnMetaData, FileMetaData, KeyValue, RowGroup, Type
from pageindex.format.schema import Leaf, leaves_of
from pageindex.format.thrift import Struct, T, TList, decode_struct
from pageindex.io.storage import Source

MAGIC = b"PAR1"
ENCRYPTED_MAGIC = b"PARE"
# Footers beyond this are not plausible Parquet metadata; refusing them bounds memory.
MAX_FOOTER_BYTES = 1 << 30
# The largest page (compressed or not) a run accepts by default: far above the pages writers
# make (about 1 MiB, dictionaries capped at 1 MiB), low enough that a page at the limit is read
# within a bounded memory (docs/security.md). Runs change it with --max-page-bytes.
DEFAULT_MAX_PAGE_BYTES = 128 << 20
# One read of the tail usually holds the whole footer; a longer one takes a second read.
TAIL_READ = 64 << 10


@dataclass(frozen=True)
class ChunkMeta:
    """One column chunk as the footer describes it."""

    row_group: int
    column: int
    leaf: Leaf
    codec: int
    num_values: int
    data_page_offset: int
    dictionary_page_offset: int | None
    total_compressed_size: int
    has_offset_index: bool
    has_column_index: bool
    offset_index: tuple[int, int] | None
    column_index: tuple[int, int] | None
    # ColumnMetaData's bloom filter (offset, length; the length may be absent), if it has one.
    bloom_filter: tuple[int, int | None] | None = None

    @property
    def start(self) -> int:
        """First byte of the chunk: its dictionary page if it has one, else its first data page."""
        if self.dictionary_page_offset is not None:
            return min(self.dictionary_page_offset, self.data_page_offset)
        return self.data_page_offset


@dataclass(frozen=True)
class Footer:
    """A validated footer: the raw FileMetaData plus typed views of what pageindex uses."""

    file_size: int
    footer_start: int  # offset of the FileMetaData bytes
    metadata: Struct
    leaves: tuple[Leaf, ...]
    row_group_rows: tuple[int, ...]
    chunks: tuple[tuple[ChunkMeta, ...], ...]  # [row group][column]
    column_orders: tuple[Struct, ...] | None  # one per leaf, or None when the file declares none
    # The bytes before the FileMetaData that the tail read brought along, from held_offset:
    # writers put the index blocks there, so reading them often costs no request.
    held_offset: int = 0
    held: bytes = b""
    # The largest page this run reads of the file (see DEFAULT_MAX_PAGE_BYTES).
    max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES

    def chunk_end(self, chunk: ChunkMeta) -> int:
        """The first byte that cannot belong to `chunk`: where the next chunk with values starts
        (pages may overrun a declared size, PARQUET-816, but never into another chunk), else the
        footer. A chunk that starts where another one with values starts gets none."""
        if chunk.num_values == 0:
            return self.footer_start
        return self._chunk_ends.get(chunk.start, chunk.start)

    @cached_property
    def _chunk_ends(self) -> dict[int, int]:
        """Start -> the next greater start (or the footer), for starts no two chunks share: a
        walk stops there, so walking every chunk reads the file once, whatever the footer says."""
        starts = sorted(c.start for group in self.chunks for c in group if c.num_values > 0)
        shared = {a for a, b in zip(starts, starts[1:]) if a == b}
        unique = sorted(set(starts))
        ends = dict(zip(unique, unique[1:] + [self.footer_start]))
        for start in shared:
            del ends[start]
        return ends

    @property
    def created_by(self) -> str:
        raw = self.metadata.get(FileMetaData.CREATED_BY, b"")
        return raw.decode("utf-8", "replace")

    @property
    def created_by_raw(self) -> bytes | None:
        return self.metadata.get(FileMetaData.CREATED_BY)

    def key_value(self, key: str) -> str | None:
        kvs = self.metadata.get(FileMetaData.KEY_VALUE_METADATA)
        for kv in kvs.items if kvs else ():
            if kv.get(KeyValue.KEY) == key.encode():
                value = kv.get(KeyValue.VALUE)
                return None if value is None else value.decode("utf-8", "replace")
        return None

    def declared_order(self, column: int) -> Struct | None:
        return self.column_orders[column] if self.column_orders is not None else None


def parse_tail(tail: bytes, file_size: int, path: str) -> int:
    """Check the trailing magic and return the FileMetaData length from the last 8 bytes."""
    if file_size < 12:
        raise FooterMissingError(f"file is {file_size} bytes, too small for Parquet", path=path)
    if tail[-4:] == ENCRYPTED_MAGIC:
        raise EncryptedFileError("encrypted footer (PARE magic); pageindex cannot index it", path=path)
    if tail[-4:] != MAGIC:
        raise FooterMissingError("no Parquet magic at end of file", path=path)
    (length,) = struct.unpack("<I", tail[-8:-4])
    if length == 0 or length > file_size - 12 or length > MAX_FOOTER_BYTES:
        raise MalformedFileError(
            f"footer length {length} does not fit in a {file_size}-byte file", path=path
        )
    return length


def decode_footer(raw: bytes, file_size: int, path: str) -> Footer:
    """Decode and validate FileMetaData bytes (which end 8 bytes before end of file)."""
    # The collector waits until the tree and its typed views are built: they hold no cycles, and
    # the full collections a footer's many new objects trigger midway walk the whole heap, the
    # tree so far included, once more for every quarter it grows (bench/RESULTS-objstore.md).
    # Other trees (page headers, index blocks) are small, and a run pauses it throughout.
    with collector_paused():
        return _decoded(raw, file_size, path)


def _decoded(raw: bytes, file_size: int, path: str) -> Footer:
    footer_start = file_size - 8 - len(raw)
    try:
        metadata, end = decode_struct(raw)
    except PageIndexError as err:
        offset = footer_start + err.offset if err.offset is not None else None
        raise MalformedFileError(f"footer: {err.reason}", path=path, offset=offset) from None
    # Checked before the trailing bytes: a signed plaintext footer is followed by its signature.
    if metadata.has(FileMetaData.ENCRYPTION_ALGORITHM):
        raise EncryptedFileError("plaintext footer with encrypted columns", path=path)
    if end != len(raw):
        raise MalformedFileError(
            f"footer has {len(raw) - end} trailing bytes after FileMetaData", path=path,
            offset=footer_start + end,
        )
    try:
        leaves = leaves_of(metadata.get(FileMetaData.SCHEMA))
        _check_types(metadata)
        orders = _column_orders(metadata, len(leaves))
    except PageIndexError as err:
        raise err.located(path=path) from None
    rows, chunks = _row_groups(metadata, leaves, footer_start, path)
    return Footer(file_size, footer_start, metadata, leaves, rows, chunks, orders)


def _check_types(metadata: Struct) -> None:
    """Fields pageindex reads must have their declared Thrift types (a corrupt footer can hold
    any type under any field id)."""
    created_by = metadata.get(FileMetaData.CREATED_BY)
    if created_by is not None and not isinstance(created_by, bytes):
        raise MalformedFileError("created_by is not a string")
    kvs = metadata.get(FileMetaData.KEY_VALUE_METADATA)
    if kvs is None:
        return
    if not _struct_list(kvs):
        raise MalformedFileError("key_value_metadata is not a list of structs")
    for kv in kvs.items:
        if not isinstance(kv.get(KeyValue.KEY), bytes) or not isinstance(kv.get(KeyValue.VALUE, b""), bytes):
            raise MalformedFileError("a key_value_metadata entry has no string key or value")


def _struct_list(value: object) -> bool:
    """A list of structs; an empty list may carry any element type (fastparquet writes 0)."""
    return isinstance(value, TList) and (value.elem_type == T.STRUCT or not value.items)


def _column_orders(metadata: Struct, leaves: int) -> tuple[Struct, ...] | None:
    orders = metadata.get(FileMetaData.COLUMN_ORDERS)
    if orders is None:
        return None
    if not _struct_list(orders):
        raise MalformedFileError("column_orders is not a list of structs")
    if len(orders.items) != leaves:
        raise MalformedFileError(f"{len(orders.items)} column orders for {leaves} columns")
    return orders.items


def _by_id(s: Struct) -> dict[int, Any]:
    """The struct's field values by id, read once for the many lookups of a chunk; of repeated ids
    the first wins, as in Struct.get."""
    return {f.id: f.value for f in reversed(s.fields)}


def _require_int(value: object, what: str, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedFileError(f"{what} is missing")
    if not lo <= value <= hi:
        raise MalformedFileError(f"{what} {value} is outside [{lo}, {hi}]")
    return value


def _row_groups(
    metadata: Struct, leaves: tuple[Leaf, ...], footer_start: int, path: str
) -> tuple[tuple[int, ...], tuple[tuple[ChunkMeta, ...], ...]]:
    groups = metadata.get(FileMetaData.ROW_GROUPS)
    if not isinstance(groups, TList):
        raise MalformedFileError("footer has no row group list", path=path)
    rows, chunks = [], []
    for rg_index, rg in enumerate(groups.items):
        try:
            if not isinstance(rg, Struct):
                raise MalformedFileError("row group is not a struct")
            num_rows = _require_int(rg.get(RowGroup.NUM_ROWS), "row group num_rows", 0, 1 << 62)
            columns = rg.get(RowGroup.COLUMNS)
            if not isinstance(columns, TList) or len(columns.items) != len(leaves):
                raise MalformedFileError(
                    f"row group has {len(columns.items) if isinstance(columns, TList) else 'no'} "
                    f"column chunks for {len(leaves)} leaf columns"
                )
            chunks.append(
                tuple(
                    _chunk(rg_index, i, leaves[i], cc, footer_start, path)
                    for i, cc in enumerate(columns.items)
                )
            )
            rows.append(num_rows)
        except PageIndexError as err:
            raise err.located(path=path, row_group=rg_index) from None
    return tuple(rows), tuple(chunks)


def _chunk(
    rg: int, col: int, leaf: Leaf, cc: Struct, footer_start: int, path: str
) -> ChunkMeta:
    try:
        if not isinstance(cc, Struct):
            raise MalformedFileError("column chunk is not a struct")
        chunk = _by_id(cc)
        if ColumnChunk.CRYPTO_METADATA in chunk or ColumnChunk.ENCRYPTED_COLUMN_METADATA in chunk:
            raise EncryptedFileError("column chunk is encrypted")
        if chunk.get(ColumnChunk.FILE_PATH):
            raise MalformedFileError("column chunk lives in another file (file_path is set)")
        meta = chunk.get(ColumnChunk.META_DATA)
        if not isinstance(meta, Struct):
            raise MalformedFileError("column chunk has no ColumnMetaData")
        meta = _by_id(meta)
        ptype = _require_int(meta.get(ColumnMetaData.TYPE), "physical type", 0, Type.FIXED_LEN_BYTE_ARRAY)
        if ptype != leaf.physical_type:
            raise MalformedFileError(
                f"ColumnMetaData type {ptype} does not match schema type {leaf.physical_type}"
            )
        codec = _require_int(meta.get(ColumnMetaData.CODEC), "codec", 0, 1 << 31)
        num_values = _require_int(meta.get(ColumnMetaData.NUM_VALUES), "num_values", 0, 1 << 62)
        size = _require_int(meta.get(ColumnMetaData.TOTAL_COMPRESSED_SIZE), "total_compressed_size", 0, footer_start)
        data_off = _require_int(meta.get(ColumnMetaData.DATA_PAGE_OFFSET), "data_page_offset", 0, footer_start)
        dict_off = meta.get(ColumnMetaData.DICTIONARY_PAGE_OFFSET)
        # Some writers store 0 (or an offset past the data) to mean "no dictionary page".
        if not isinstance(dict_off, int) or dict_off <= 0 or dict_off >= data_off:
            dict_off = None
        oi = _index_location(chunk, ColumnChunk.OFFSET_INDEX_OFFSET, ColumnChunk.OFFSET_INDEX_LENGTH, footer_start)
        ci = _index_location(chunk, ColumnChunk.COLUMN_INDEX_OFFSET, ColumnChunk.COLUMN_INDEX_LENGTH, footer_start)
        bloom = _bloom_location(meta, footer_start)
    except PageIndexError as err:
        raise err.located(path=path, row_group=rg, column=leaf.dotted) from None
    return ChunkMeta(
        row_group=rg, column=col, leaf=leaf, codec=codec, num_values=num_values,
        data_page_offset=data_off, dictionary_page_offset=dict_off, total_compressed_size=size,
        has_offset_index=oi is not None, has_column_index=ci is not None,
        offset_index=oi, column_index=ci, bloom_filter=bloom,
    )


def _bloom_location(meta: dict[int, Any], limit: int) -> tuple[int, int | None] | None:
    """Where the chunk's bloom filter is; a location outside the data region counts as none (a
    filter is optional, and one asked for replaces it)."""
    offset, length = meta.get(ColumnMetaData.BLOOM_FILTER_OFFSET), meta.get(ColumnMetaData.BLOOM_FILTER_LENGTH)
    if not isinstance(offset, int) or not 4 <= offset < limit:
        return None
    if not isinstance(length, int) or length <= 0 or offset + length > limit:
        return offset, None
    return offset, length


def _index_location(chunk: dict[int, Any], off_id: int, len_id: int, limit: int) -> tuple[int, int] | None:
    offset, length = chunk.get(off_id), chunk.get(len_id)
    if offset is None and length is None:
        return None
    if not isinstance(offset, int) or not isinstance(length, int):
        raise MalformedFileError("page index location has an offset or a length but not both")
    if offset < 4 or length <= 0 or offset + length > limit:
        raise MalformedFileError(
            f"page index block [{offset}, {offset}+{length}) lies outside the data region")
    return offset, length


def read_footer(source: Source, tail_bytes: int | None = None, check_head: bool = True) -> Footer:
    """Read and validate the footer: the head magic (optional), then one read of the tail and a
    second one only when the footer is longer than that tail. The tail read is TAIL_READ locally
    and the read options' tail_bytes on an object store, where the source keeps it; a file no
    longer than it is read once, head included."""
    size = source.size
    if tail_bytes is None:
        tail_bytes = TAIL_READ if source.local else source.read_options.tail_bytes
    tail = source.read(max(0, size - tail_bytes), min(size, tail_bytes), "footer") if size <= tail_bytes else None
    if check_head:
        head = tail[:4] if tail is not None else source.read(0, 4, "footer")
        if head not in (MAGIC, ENCRYPTED_MAGIC):
            raise NotParquetError("no Parquet magic at start of file", path=source.path)
        if head == ENCRYPTED_MAGIC and size >= 12:
            raise EncryptedFileError("encrypted file (PARE magic)", path=source.path)
    if tail is None:
        tail = source.read(max(0, size - tail_bytes), min(size, tail_bytes), "footer")
    source.keep_tail(size - len(tail), tail)
    length = parse_tail(tail, size, source.path)
    if length + 8 <= len(tail):
        raw = tail[len(tail) - 8 - length : len(tail) - 8]
        return replace(decode_footer(raw, size, source.path), held_offset=size - len(tail),
                       held=bytes(tail[:len(tail) - 8 - length]))
    raw = source.read(size - 8 - length, length, "footer")
    return decode_footer(raw, size, source.path)
