"""Values of one column chunk, decoded by Arrow C++ from a synthesized single-chunk file whose
schema carries physical types only (never an embedded ARROW:schema), built from validated parts;
values sections of PLAIN numbers are read in place instead (plain_values).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable, Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from pageindex.errors import MalformedFileError
from pageindex.format.compression import decompress
from pageindex.format.footer import MAGIC, ChunkMeta
from pageindex.format.parquet_thrift import (
    CompressionCodec,
    DataPageHeaderV2,
    Encoding,
    FieldRepetitionType,
    PageHeader,
    PageType,
    SchemaElement,
)
from pageindex.format.thrift import Field, Struct, encode_struct
from pageindex.scan import plain_values
from pageindex.scan.memory import trim_heap
from pageindex.scan.page_levels import ValueSection
from pageindex.scan.page_walk import ChunkPages, Page
from pageindex.scan.synthetic import Synthesized, arrow_errors, column_chunk, one_row_group_file

_LEAF_KEPT = (SchemaElement.TYPE, SchemaElement.TYPE_LENGTH, SchemaElement.REPETITION_TYPE, SchemaElement.NAME)
_GROUP_KEPT = (SchemaElement.REPETITION_TYPE, SchemaElement.NAME)


def _bare_element(element: Struct, is_leaf: bool) -> Struct:
    """A schema element reduced to name, repetition and (for the leaf) physical type."""
    keep = _LEAF_KEPT if is_leaf else _GROUP_KEPT
    fields = [f for f in element.fields if f.id in keep]
    if not is_leaf:
        fields.append(SchemaElement.field(SchemaElement.NUM_CHILDREN, 1))
    return Struct(tuple(sorted(fields, key=lambda f: f.id)))


def bare_path(chunk: ChunkMeta, name: bytes | None = None) -> list[Struct]:
    """The leaf's path as schema elements stripped to physical types (one child per group),
    its top-level field renamed to `name` if given."""
    ancestry = chunk.leaf.ancestry
    path = [_bare_element(e, i == len(ancestry) - 1) for i, e in enumerate(ancestry)]
    if name is not None:
        path[0] = Struct(tuple(SchemaElement.field(SchemaElement.NAME, name) if f.id == SchemaElement.NAME else f
                               for f in path[0].fields))
    return path


def synthesize(fields: Sequence[Sequence[Struct]], columns: Sequence[tuple[ChunkMeta, ChunkPages]],
               num_rows: int, created_by: bytes | None) -> Synthesized:
    """A complete Parquet file with one row group holding these chunks' bytes, under a schema of
    top-level fields each given as its depth-first elements (the root is added)."""
    body, chunk_structs = [], []
    pos = len(MAGIC)
    for chunk, pages in columns:
        shift = pos - pages.start
        chunk_structs.append(column_chunk(
            chunk.leaf.physical_type, chunk.leaf.path, chunk.codec, pos,
            num_values=sum(p.num_values for p in pages.pages),
            uncompressed=sum(p.header_size + p.uncompressed_size for p in pages.pages),
            compressed=len(pages.data),
            data_offset=(pages.pages[0].offset if pages.pages else pages.start) + shift,
            dictionary_offset=None if pages.dictionary is None else pages.dictionary.offset + shift))
        body.append(pages.data)
        pos += len(pages.data)
    return one_row_group_file(len(fields), [e for f in fields for e in f], chunk_structs, body, num_rows, created_by)


@dataclass(frozen=True)
class SectionsHead:
    """What every file of one chunk's values sections shares: the codec its pages are in and
    the dictionary page, copied out so that the chunk's compressed bytes need not stay alive."""

    codec: int
    dictionary: bytes | None
    dictionary_uncompressed: int  # header and body, as the column metadata counts them


def sections_head(chunk: ChunkMeta, pages: ChunkPages, sections: Sequence[ValueSection]) -> SectionsHead:
    """The codec and dictionary page for files of these sections."""
    # Sections of v2 pages keep the chunk's codec and their is_compressed, so Arrow applies the
    # same writer workarounds as to the original (some writers set it false and compressed anyway).
    # Sections of v1 pages come decompressed: their files are uncompressed throughout. (A chunk
    # mixing v1 and v2 pages, which no known writer makes, keeps its codec: v1 sections then
    # say is_compressed=false.)
    codec = CompressionCodec.UNCOMPRESSED if all(s.decompressed for s in sections) else chunk.codec
    page = pages.dictionary
    if page is None:
        return SectionsHead(codec, None, 0)
    raw = bytes(pages.raw(page)) if codec == chunk.codec else _decompressed_page(chunk, pages, page)
    return SectionsHead(codec, raw, page.header_size + page.uncompressed_size)


def synthesize_values(chunk: ChunkMeta, head: SectionsHead, sections: Sequence[ValueSection],
                      created_by: bytes | None) -> Synthesized:
    """A file whose single column is the chunk's leaf as a flat, required field: its dictionary
    page, then each data page's values section under a v2 header without levels. Arrow then
    decodes the defined values alone, with no levels to read and no lists to assemble."""
    leaf = _bare_element(chunk.leaf.ancestry[-1], True)
    leaf = Struct(tuple(Field(f.id, f.type, FieldRepetitionType.REQUIRED) if f.id == SchemaElement.REPETITION_TYPE
                        else Field(f.id, f.type, _FLAT_NAME) if f.id == SchemaElement.NAME else f
                        for f in leaf.fields))
    body: list[bytes | memoryview] = [] if head.dictionary is None else [head.dictionary]
    data_offset = len(MAGIC) + sum(len(b) for b in body)
    uncompressed = head.dictionary_uncompressed
    # Pages without a defined value are left out: Arrow takes a page of no values for the end.
    for section in (s for s in sections if s.count):
        header = _v2_header(section)
        body += (header, section.data)
        uncompressed += len(header) + section.uncompressed_size
    values = sum(s.count for s in sections)
    column = column_chunk(
        chunk.leaf.physical_type, (_FLAT_NAME.decode(),), head.codec, len(MAGIC),
        num_values=values, uncompressed=uncompressed, compressed=sum(len(b) for b in body),
        data_offset=data_offset, dictionary_offset=None if head.dictionary is None else len(MAGIC))
    return one_row_group_file(1, [leaf], [column], body, values, created_by)


SECTION_RUN_BYTES = 4 << 20


def decode_sections(chunk: ChunkMeta, head: SectionsHead, sections: list[ValueSection],
                    created_by: bytes | None, as_dictionary: bool, row_batch_bytes: int) -> pa.ChunkedArray:
    """The defined values of these sections, an Arrow chunk per run of whole sections of up to
    SECTION_RUN_BYTES, and per section of PLAIN numbers (read in place). `sections` is emptied
    as it goes, so each run's bytes go once decoded: the sections and the values they decode to
    are never all alive together."""
    several_runs = sum(s.uncompressed_size for s in sections) > SECTION_RUN_BYTES
    parts: list[pa.Array] = []
    ptype = chunk.leaf.physical_type
    arrow_type = None
    for run, in_place in _section_runs(sections, partial(plain_values.readable, ptype)):
        if in_place:
            parts.append(plain_values.plain_values(ptype, chunk.codec, run.pop()))
            continue
        if several_runs:
            # Return what the walk or the run before freed on the C heap: Arrow's pool is mapped
            # apart and would not reuse it.
            trim_heap()
        file = synthesize_values(chunk, head, run, created_by)
        count, size = sum(s.count for s in run), sum(s.uncompressed_size for s in run)
        del run
        column = decode(file, count, size, as_dictionary, row_batch_bytes)
        del file
        parts += column.chunks
        arrow_type = column.type
    return pa.chunked_array(parts, type=arrow_type or parts[0].type)


def _section_runs(sections: list[ValueSection], alone: Callable[[ValueSection], bool]
                  ) -> Iterator[tuple[list[ValueSection], bool]]:
    """Empties `sections` front to back into runs of at most SECTION_RUN_BYTES (a bigger
    section, or one that is `alone`, runs by itself), leaving out sections without values; at
    least one run, maybe empty. Each run comes with whether it is an `alone` section."""
    sections.reverse()
    run: list[ValueSection] = []
    size = 0
    yielded = False
    while sections:
        section = sections.pop()
        if not section.count:
            continue
        solo = alone(section)
        if run and (solo or size + section.uncompressed_size > SECTION_RUN_BYTES):
            yield run, False
            run, size, yielded = [], 0, True
        if solo:
            yield [section], True
            yielded = True
            continue
        run.append(section)
        size += section.uncompressed_size
    if run or not yielded:
        yield run, False


_FLAT_NAME = b"c"


def _decompressed_page(chunk: ChunkMeta, pages: ChunkPages, page: Page) -> bytes:
    """The page with its body decompressed and its header saying so (its CRC, of the compressed
    body, dropped)."""
    body = decompress(chunk.codec, pages.body(page), page.uncompressed_size)
    header = Struct(tuple(Field(f.id, f.type, len(body)) if f.id == PageHeader.COMPRESSED_PAGE_SIZE else f
                          for f in page.header.fields if f.id != PageHeader.CRC))
    return encode_struct(header) + body


def _v2_header(section: ValueSection) -> bytes:
    v2 = DataPageHeaderV2.make(
        NUM_VALUES=section.count,
        NUM_NULLS=0,
        NUM_ROWS=section.count,
        # PLAIN_DICTIONARY is v1's name for the same dictionary-index encoding.
        ENCODING=Encoding.RLE_DICTIONARY if section.encoding == Encoding.PLAIN_DICTIONARY else section.encoding,
        DEFINITION_LEVELS_BYTE_LENGTH=0,
        REPETITION_LEVELS_BYTE_LENGTH=0,
        IS_COMPRESSED=section.compressed,
    )
    return encode_struct(PageHeader.make(
        TYPE=PageType.DATA_PAGE_V2,
        UNCOMPRESSED_PAGE_SIZE=section.uncompressed_size,
        COMPRESSED_PAGE_SIZE=len(section.data),
        DATA_PAGE_HEADER_V2=v2,
    ))


BATCH_ROWS = 1 << 16
BIG_CHUNK = 1 << 30
ROW_BATCH_BYTES = 256 << 20


def synthesize_chunks(columns: Sequence[tuple[ChunkMeta, ChunkPages]], num_rows: int,
                      created_by: bytes | None) -> Synthesized:
    """A synthesized file holding several chunks of one row group, a top-level field each (named
    c0, c1, ...: two leaves of one group would otherwise share a name)."""
    fields = [bare_path(chunk, b"c%d" % i) for i, (chunk, _) in enumerate(columns)]
    return synthesize(fields, columns, num_rows, created_by)


def decode_columns(file: Synthesized, count: int, num_rows: int, dictionary: Sequence[int]
                   ) -> list[pa.ChunkedArray]:
    """All `count` top-level columns of a synthesized file in one Arrow read, so the per-read
    cost is paid once; the `dictionary` columns (BYTE_ARRAY) come back as dictionary indices."""
    with arrow_errors():
        reader = pq.ParquetFile(file.open(), read_dictionary=list(dictionary))
        table = reader.read_row_group(0, use_threads=False)
    if table.num_columns != count:
        raise MalformedFileError(f"{count} chunks decode to {table.num_columns} columns")
    return [_checked_rows(column, num_rows) for column in table.columns]


def decode(file: Synthesized, num_rows: int, decoded_bytes: int = 0, as_dictionary: bool = False,
           row_batch_bytes: int = BIG_CHUNK) -> pa.ChunkedArray:
    """Read a synthesized file's single top-level column: whole, as one array where possible
    (no concatenation later); in row batches when its pages decode to more than `row_batch_bytes`,
    by default BIG_CHUNK (a nested column cannot hold more than 2 GiB of values in one array, so
    a nested row batch whose values pass 2 GiB shrinks until it fits; callers pass less for plain
    strings, whose buffer Arrow grows by doubling). as_dictionary: a BYTE_ARRAY leaf comes back
    as indices into the chunk's dictionary, its values never materialized one by one."""
    with arrow_errors():
        reader = pq.ParquetFile(file.open(), read_dictionary=[0] if as_dictionary else None,
                                **_read_options(file))
        if decoded_bytes > row_batch_bytes:
            rows = max(1, num_rows * min(row_batch_bytes, ROW_BATCH_BYTES) // decoded_bytes)
            column = _decode_in_batches(reader, rows)
        else:
            try:
                table = reader.read_row_group(0, use_threads=False)
            except pa.ArrowNotImplementedError:
                table = None
            if table is not None and table.num_columns != 1:
                raise MalformedFileError(f"the chunk decodes to {table.num_columns} columns, not 1")
            column = table.column(0) if table is not None else _decode_in_batches(reader, BATCH_ROWS)
    return _checked_rows(column, num_rows)


STREAM_BUFFER = 64 << 10


def _read_options(file: Synthesized) -> dict:
    """A file with bytes left on storage is streamed through a small buffer, page by page, so
    its chunk is never read whole (Arrow's default reads a column chunk in one piece)."""
    return {"buffer_size": STREAM_BUFFER, "pre_buffer": False} if file.streamed else {}


def _checked_rows(column: pa.ChunkedArray, num_rows: int) -> pa.ChunkedArray:
    if len(column) != num_rows:
        raise MalformedFileError(f"decoded {len(column)} rows, expected {num_rows}")
    return column


def _decode_in_batches(reader: pq.ParquetFile, batch_rows: int) -> pa.ChunkedArray:
    while True:
        try:
            batches = [b.column(0) for b in reader.iter_batches(batch_size=batch_rows, use_threads=False)]
            return pa.chunked_array(batches, type=reader.schema_arrow.field(0).type)
        except pa.ArrowNotImplementedError as err:
            if batch_rows == 1:
                raise MalformedFileError(f"page data could not be decoded: {err}") from None
            batch_rows = max(1, batch_rows // 16)


def leaf_column(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A flat leaf's values, a null where its definition level says so, out of the structs it
    may sit in (an optional leaf of a required struct: the struct is never null, the leaf may be)."""
    return pa.chunked_array([_flattened(chunk) for chunk in column.chunks], type=_leaf_type(column.type))


def leaf_values(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """The defined (non-null) leaf values of a flat leaf, which may sit in required structs
    (repeated leaves and optional groups are read from their values sections instead)."""
    return pa.chunked_array([_leaf(chunk) for chunk in column.chunks], type=_leaf_type(column.type))


def _leaf_type(t: pa.DataType) -> pa.DataType:
    while pa.types.is_struct(t):
        t = t.field(0).type
    return t


def _flattened(array: pa.Array) -> pa.Array:
    while pa.types.is_struct(array.type):
        array = array.flatten()[0]
    return array


def _leaf(array: pa.Array) -> pa.Array:
    array = _flattened(array)
    return array.drop_null() if array.null_count else array
