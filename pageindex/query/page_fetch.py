"""Page fetching for lookup: one field's values in a row group's wanted row ranges, reading only
the pages the OffsetIndex places over them (and the dictionary), coalescing close reads.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from pageindex.errors import MalformedFileError
from pageindex.format.footer import ChunkMeta, Footer
from pageindex.format.parquet_thrift import PageType
from pageindex.index.reader import OffsetIndexView, read_offset_index
from pageindex.io.storage import Source
from pageindex.query.file_fields import Field
from pageindex.query.ranges import Ranges, intersect, merge, positions
from pageindex.scan.page_walk import ChunkPages, read_page_header, walk_chunk
from pageindex.scan.values import decode, synthesize


@dataclass
class ColumnIO:
    """Pages of one column: how many were fetched and decoded, of how many in the chunks read."""

    pages_read: int = 0
    pages_total: int = 0
    bytes_read: int = 0


def read_field(source: Source, footer: Footer, f: Field, rg: int, ranges: Ranges,
               indexes: dict, io: ColumnIO, created_by: bytes | None, gap: int) -> pa.ChunkedArray:
    """The field's values in `ranges` of row group `rg`: only the pages over them when its one
    leaf has a usable OffsetIndex, else the whole chunks; pages counted in `io`."""
    rows = footer.row_group_rows[rg]
    chunks = [footer.chunks[rg][leaf.index] for leaf in f.leaves]
    if len(chunks) == 1:
        chunk = chunks[0]
        oi = indexes[chunk.column][0] if chunk.column in indexes else read_offset_index(source, chunk)
        if oi is not None and oi.pages and _locations_valid(oi, chunk):
            pages, covered = _fetch_pages(source, chunk, oi, ranges, rows, gap, io)
            num = sum(end - start for start, end in covered)
            array = decode(synthesize([f.elements], [(chunk, pages)], num, created_by), num)
            return array.take(positions(covered, ranges))
    parts = []
    for chunk in chunks:
        walked = walk_chunk(source, chunk, footer.chunk_end(chunk), verify_crc=False)
        io.pages_read += len(walked.pages)
        io.pages_total += len(walked.pages)
        io.bytes_read += len(walked.data)
        parts.append((chunk, walked))
    array = decode(synthesize([f.elements], parts, rows, created_by), rows)
    return array.take(positions([(0, rows)], ranges))


def _locations_valid(oi: OffsetIndexView, chunk: ChunkMeta) -> bool:
    firsts = [p.first_row_index for p in oi.pages]
    return firsts[0] == 0 and all(a < b for a, b in zip(firsts, firsts[1:])) and all(
        p.offset >= chunk.start and p.compressed_page_size > 0 for p in oi.pages)


def _fetch_pages(source: Source, chunk: ChunkMeta, oi: OffsetIndexView, ranges: Ranges,
                 rows: int, gap: int, io: ColumnIO) -> tuple[ChunkPages, Ranges]:
    starts = [p.first_row_index for p in oi.pages] + [rows]
    chosen = [i for i in range(len(oi.pages))
              if intersect([(starts[i], starts[i + 1])], ranges)]
    wanted: list[tuple[int, int, str]] = []
    first_page = oi.pages[0].offset
    if chunk.start < first_page:  # a dictionary page precedes the data pages
        wanted.append((chunk.start, first_page - chunk.start, "dictionary"))
    wanted += [(oi.pages[i].offset, oi.pages[i].compressed_page_size, "data") for i in chosen]
    blobs = _read_coalesced(source, wanted, gap)
    io.pages_read += len(chosen)
    io.pages_total += len(oi.pages)
    io.bytes_read += sum(len(b) for b in blobs)
    data = b"".join(blobs)
    dictionary, pages, pos = None, [], 0
    for (offset, length, purpose), blob in zip(wanted, blobs):
        page = read_page_header(data, pos, pos)
        if purpose == "dictionary":
            if page.kind != PageType.DICTIONARY_PAGE:
                raise MalformedFileError("the bytes before the first indexed page are not a dictionary page",
                                         path=source.path, offset=offset)
            dictionary = page
        else:
            pages.append(page)
        pos += len(blob)
    covered = merge([(starts[i], starts[i + 1]) for i in chosen])
    return ChunkPages(0, data, dictionary, tuple(pages), False), covered


def _read_coalesced(source: Source, wanted: list[tuple[int, int, str]], gap: int) -> list[bytes]:
    """Each wanted range's bytes; ranges closer than `gap` bytes are fetched in one request."""
    out: list[bytes] = []
    i = 0
    while i < len(wanted):
        j = i
        while j + 1 < len(wanted) and wanted[j + 1][0] - (wanted[j][0] + wanted[j][1]) <= gap \
                and wanted[j + 1][0] >= wanted[j][0] + wanted[j][1]:
            j += 1
        start = wanted[i][0]
        end = wanted[j][0] + wanted[j][1]
        purposes = {w[2] for w in wanted[i : j + 1]}
        blob = source.read(start, end - start, "data" if "data" in purposes else purposes.pop())
        if len(blob) != end - start:
            raise MalformedFileError("page index points past the end of the file", path=source.path, offset=start)
        out.extend(blob[w[0] - start : w[0] - start + w[1]] for w in wanted[i : j + 1])
        i = j + 1
    return out
