"""pageindex.scan.page_walk: pages of a chunk from its headers, writer quirks, CRCs, v2 and index pages."""
from __future__ import annotations

import itertools
import struct
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pageindex
from pageindex.errors import MalformedFileError
from pageindex.format.footer import read_footer
from pageindex.format.parquet_thrift import FileMetaData, PageType
from pageindex.format.thrift import Field, Struct, T, TList, decode_struct, encode_struct
from pageindex.index.reader import read_column_index, read_offset_index
from pageindex.io.storage import open_source
from pageindex.scan.page_walk import walk_chunk
from pageindex.verify import verify
from tests.helpers.corpus import corpus_path, corpus_rows
from tests.helpers.page_reader import INDEX_PAGE
from tests.helpers.tables import page_headers

DATA = "parquet-testing/data/"


def walk_all(path, verify_crc: bool = True, window: int | None = None) -> dict:
    with open_source(str(path)) as s:
        footer = read_footer(s)
        return {(c.row_group, c.leaf.dotted): (c, walk_chunk(s, c, footer.footer_start, verify_crc, window))
                for row in footer.chunks for c in row}


def writer_offset_index(path) -> dict:
    with open_source(str(path)) as s:
        footer = read_footer(s)
        return {(c.row_group, c.leaf.dotted): read_offset_index(s, c) for row in footer.chunks for c in row}


@pytest.mark.parametrize("path", [corpus_path(r) for r in corpus_rows("candidate")
                                  # 40,000 pages: own test; 0-row chunks: the reference reader
                                  # cannot parse them (test_empty_chunk)
                                  if "overflow_i16" not in r["path"]
                                  and "column_chunk_key_value" not in r["path"]], ids=lambda p: p.name)
def test_matches_independent_header_reader(path):
    """On every candidate, the walk finds the same pages as tests/helpers/tables.page_headers."""
    walked = walk_all(path)
    reference = page_headers(path)
    for key, (chunk, pages) in walked.items():
        ref = reference[(key[0], chunk.leaf.dotted)]
        kinds = ([PageType.DICTIONARY_PAGE] if pages.dictionary else []) + [p.kind for p in pages.pages]
        ref_kinds = [p.type for p in ref if p.type != INDEX_PAGE]
        if chunk.num_values == 0:
            assert pages.pages == () and pages.dictionary is None
            continue
        assert kinds == ref_kinds, key
        assert [p.size for p in pages.pages] == [r.header_size + r.compressed_size for r in ref
                                                 if r.type in (PageType.DATA_PAGE, PageType.DATA_PAGE_V2)]
        assert not pages.metadata_too_small
        assert pages.start == chunk.start and pages.end <= chunk.start + chunk.total_compressed_size


@pytest.mark.parametrize("path", [corpus_path(r) for r in corpus_rows("oracle")], ids=lambda p: p.name)
def test_matches_writer_offset_index(path):
    """On every oracle, page offsets/sizes equal the ones the writer put in its OffsetIndex."""
    walked = walk_all(path)
    for key, oi in writer_offset_index(path).items():
        if oi is None:
            continue
        pages = walked[key][1].pages
        assert [(p.offset, p.size) for p in pages] == [(l.offset, l.compressed_page_size) for l in oi.pages]


WINDOWED = [corpus_path(r) for r in corpus_rows("candidate")
            if "overflow_i16" not in r["path"]]  # its 40,000 pages: test_overflow_i16_page_count


@pytest.mark.parametrize("path", WINDOWED + [corpus_path(DATA + "nation.dict-malformed.parquet")],
                         ids=lambda p: p.name)
def test_windowed_walk_matches_whole_walk(path):
    """Walked through windows (of 1 byte: every page read on its own; of 100 bytes: headers cut
    off at a window's end), a chunk has the same pages as walked whole, and its bytes are left
    on storage, where they equal the bytes read whole."""
    whole = walk_all(path)
    for window in (1, 100):
        for key, (chunk, pages) in walk_all(path, window=window).items():
            held = whole[key][1]
            assert (pages.dictionary, pages.pages, pages.start) == (held.dictionary, held.pages, held.start)
            assert pages.metadata_too_small == held.metadata_too_small
            if chunk.num_values:
                assert pages.is_stored and not held.is_stored
                assert bytes(pages.loaded().data) == bytes(held.data)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("window", [None, 4096])
def test_file_that_shrank_after_its_footer_was_read(tmp_path, window):
    """A file cut short while it is walked (another writer truncating it) fails the walk with a
    typed error; it must not wait forever for page-header bytes the file no longer has."""
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": np.arange(200_000)}), path, data_page_size=8192, use_dictionary=False)
    with open_source(str(path)) as s:
        footer = read_footer(s)
        chunk = footer.chunks[0][0]
        with open(path, "r+b") as f:
            f.truncate(chunk.start + 100)
        with pytest.raises(MalformedFileError, match="end of the file"):
            walk_chunk(s, chunk, footer.footer_start, window=window)


def test_dict_page_offset_zero():
    path = corpus_path(DATA + "dict-page-offset-zero.parquet")
    ((chunk, pages),) = walk_all(path).values()
    assert chunk.dictionary_page_offset is None  # the footer says 0: treated as absent
    assert pages.dictionary is None and chunk.start == chunk.data_page_offset == 4
    assert len(pages.pages) == 1 and pages.pages[0].num_values == 39
    oi = next(iter(writer_offset_index(path).values()))
    assert [p.offset for p in pages.pages] == [l.offset for l in oi.pages]


def test_nation_dict_malformed():
    """Old parquet-mr (PARQUET-816): total_compressed_size too small; pages still found."""
    path = corpus_path(DATA + "nation.dict-malformed.parquet")
    walked = walk_all(path)
    assert any(p.metadata_too_small for _, p in walked.values())
    table = pq.read_table(path)
    for (chunk, pages) in walked.values():
        assert pages.pages
        assert sum(p.num_values for p in pages.pages) == chunk.num_values
        if pages.metadata_too_small:
            assert pages.end > chunk.start + chunk.total_compressed_size
    assert table.num_rows == 25


def test_nation_dict_malformed_retrofits(tmp_path):
    src = corpus_path(DATA + "nation.dict-malformed.parquet")
    out = tmp_path / "nation.parquet"
    pageindex.retrofit(str(src), str(out))
    assert verify(str(out)).ok
    assert pq.read_table(out).equals(pq.read_table(src))


@pytest.mark.parametrize("name", ["datapage_v1-corrupt-checksum.parquet",
                                  "rle-dict-uncompressed-corrupt-checksum.parquet"])
def test_corrupt_crc(name):
    path = corpus_path(DATA + name)
    with pytest.raises(MalformedFileError, match="CRC") as err:
        walk_all(path)
    assert err.value.path and name in err.value.path
    assert err.value.row_group == 0 and err.value.column is not None and err.value.offset is not None
    with pytest.raises(MalformedFileError, match="CRC"):
        walk_all(path, window=100)
    walk_all(path, verify_crc=False)  # without the check the structure itself is fine


@pytest.mark.parametrize("name", ["datapage_v1-uncompressed-checksum.parquet",
                                  "datapage_v1-snappy-compressed-checksum.parquet",
                                  "plain-dict-uncompressed-checksum.parquet",
                                  "rle-dict-snappy-checksum.parquet"])
def test_good_crc(name):
    walk_all(corpus_path(DATA + name), window=100)
    walked = walk_all(corpus_path(DATA + name))
    crcs = [p.header.get(4) for _, pages in walked.values()
            for p in ((pages.dictionary,) if pages.dictionary else ()) + pages.pages]
    assert any(isinstance(c, int) for c in crcs)  # really checked (rle-dict-snappy: dict pages only)


def test_overflow_i16_page_count():
    path = corpus_path(DATA + "overflow_i16_page_cnt.parquet")
    started = time.perf_counter()
    ((_chunk, pages),) = walk_all(path).values()
    assert len(pages.pages) == 40_000
    assert time.perf_counter() - started < 20
    offsets = [p.offset for p in pages.pages]
    assert offsets == sorted(offsets) and len(set(offsets)) == 40_000


def test_v2_pages():
    path = corpus_path(DATA + "datapage_v2.snappy.parquet")
    walked = walk_all(path)
    v2 = [p for _, pages in walked.values() for p in pages.pages]
    assert v2 and all(p.kind == PageType.DATA_PAGE_V2 for p in v2)
    for p in v2:
        assert p.num_rows is not None and p.num_nulls is not None
        assert p.def_levels_size + p.rep_levels_size <= p.compressed_size
    # the list column has repetition levels, the flat ones do not
    rep = {key[1]: max(p.rep_levels_size for p in pages.pages) for key, (_, pages) in walked.items()}
    assert rep["e.list.element"] > 0 and rep["a"] == 0


def test_empty_chunk():
    path = corpus_path(DATA + "column_chunk_key_value_metadata.parquet")
    for chunk, pages in walk_all(path).values():
        assert chunk.num_values == 0 and pages.pages == ()


# ------------------------------------------------------------------ index pages

def _uncompressed_file(path: Path) -> Path:
    table = pa.table({"k": np.arange(3000, dtype=np.int64)})
    pq.write_table(table, path, compression="none", use_dictionary=False, data_page_size=4096,
                   write_statistics=False, write_page_index=False)
    return path


def _insert_page(src: Path, dst: Path, header: Struct, body: bytes) -> tuple[int, int]:
    """Copy `src` (one column chunk) with a page (header + body) inserted after its first data
    page, fixing the chunk's and row group's sizes. Returns (insert offset, data pages before)."""
    data = src.read_bytes()
    ((_chunk, pages),) = walk_all(src).values()
    first = pages.pages[0]
    at = first.offset + first.size
    inserted = encode_struct(header) + body
    (n,) = struct.unpack("<I", data[-8:-4])
    meta, _ = decode_struct(data[-8 - n : -8])
    rg = meta.get(FileMetaData.ROW_GROUPS).items[0]
    cc = rg.get(1).items[0]
    cmd = cc.get(3)
    cmd = cmd.set(6, T.I64, cmd.get(6) + len(inserted)).set(7, T.I64, cmd.get(7) + len(inserted))
    cc = cc.set(3, T.STRUCT, cmd)
    rg = rg.set(1, T.LIST, TList(T.STRUCT, (cc,))).set(2, T.I64, rg.get(2) + len(inserted))
    if rg.has(6):
        rg = rg.set(6, T.I64, rg.get(6) + len(inserted))
    meta = meta.set(FileMetaData.ROW_GROUPS, T.LIST, TList(T.STRUCT, (rg,)))
    footer = encode_struct(meta)
    body_end = len(data) - 8 - n
    dst.write_bytes(data[:at] + inserted + data[at:body_end] + footer + struct.pack("<I", len(footer)) + b"PAR1")
    return at, len(pages.pages)


def _with_index_page(src: Path, dst: Path) -> tuple[int, int]:
    body = b"index page body, never read"
    header = Struct((Field(1, T.I32, INDEX_PAGE), Field(2, T.I32, len(body)),
                     Field(3, T.I32, len(body)), Field(6, T.STRUCT, Struct())))
    return _insert_page(src, dst, header, body)


def test_index_pages_are_skipped(tmp_path):
    src = _uncompressed_file(tmp_path / "plain.parquet")
    dst = tmp_path / "with_index_page.parquet"
    at, n_data = _with_index_page(src, dst)
    assert pq.read_table(dst).equals(pq.read_table(src))  # Arrow C++ skips it too
    ((_chunk, pages),) = walk_all(dst).values()
    assert len(pages.pages) == n_data
    assert all(p.kind == PageType.DATA_PAGE for p in pages.pages)
    assert at not in [p.offset for p in pages.pages]
    assert pages.pages[1].offset > at
    out = tmp_path / "indexed.parquet"
    pageindex.retrofit(str(dst), str(out))
    oi = next(iter(writer_offset_index(out).values()))
    assert [l.offset for l in oi.pages] == [p.offset for p in pages.pages]
    assert verify(str(out)).ok


def test_empty_data_page(tmp_path):
    """A v1 data page holding 0 values (Arrow C++ reads the file fine). It has no rows, so it
    cannot get a strictly increasing first_row_index, and as a "null page" its null count is 0,
    which parquet-java 1.18 rejects. The index written must not break either rule (e.g. leave
    the chunk unindexed). LIBRARY BUG at the time of writing: both rules are broken and verify()
    accepts the result."""
    table = pa.table({"k": pa.array([None if i % 5 == 0 else i for i in range(3000)], pa.int64())})
    src = tmp_path / "src.parquet"
    pq.write_table(table, src, compression="none", use_dictionary=False, data_page_size=4096,
                   write_statistics=False)
    body = struct.pack("<I", 0)  # RLE definition levels: 4-byte length 0, no values
    v1 = Struct((Field(1, T.I32, 0), Field(2, T.I32, 0), Field(3, T.I32, 3), Field(4, T.I32, 3)))
    header = Struct((Field(1, T.I32, PageType.DATA_PAGE), Field(2, T.I32, len(body)), Field(3, T.I32, len(body)),
                     Field(5, T.STRUCT, v1)))
    dst = tmp_path / "empty_page.parquet"
    _insert_page(src, dst, header, body)
    assert pq.read_table(dst).equals(pq.read_table(src))
    ((_chunk, pages),) = walk_all(dst).values()
    assert pages.pages[1].num_values == 0  # the walk lists it as a data page
    out = tmp_path / "out.parquet"
    pageindex.retrofit(str(dst), str(out))
    with open_source(str(out)) as s:
        c = read_footer(s).chunks[0][0]
        oi, ci = read_offset_index(s, c), read_column_index(s, c)
    if oi is not None:
        firsts = [p.first_row_index for p in oi.pages]
        assert all(a < b for a, b in itertools.pairwise(firsts)), firsts[:4]
    if ci is not None:
        assert not any(null and count == 0 for null, count in zip(ci.null_pages, ci.null_counts))


# ------------------------------------------------------------------ malformed chunks

def _corrupt(src: Path, dst: Path, offset: int, raw: bytes) -> Path:
    data = bytearray(src.read_bytes())
    data[offset : offset + len(raw)] = raw
    dst.write_bytes(bytes(data))
    return dst


def test_page_running_past_the_footer(tmp_path):
    src = _uncompressed_file(tmp_path / "plain.parquet")
    ((_chunk, pages),) = walk_all(src).values()
    last = pages.pages[-1]
    # rewrite the last page header's compressed_page_size (field 3) to a huge value
    header, end = decode_struct(src.read_bytes(), last.offset)
    big = encode_struct(header.set(3, T.I32, 8191))  # same 2-byte varint width as the original
    assert len(big) == end - last.offset and last.offset + 8191 > src.stat().st_size
    bad = _corrupt(src, tmp_path / "bad.parquet", last.offset, big)
    with pytest.raises(MalformedFileError, match="runs past") as err:
        walk_all(bad)
    assert err.value.offset == last.offset and err.value.column == "k"


def test_garbage_header(tmp_path):
    src = _uncompressed_file(tmp_path / "plain.parquet")
    ((_chunk, pages),) = walk_all(src).values()
    bad = _corrupt(src, tmp_path / "bad.parquet", pages.pages[1].offset, b"\xff\xff\xff\xff")
    with pytest.raises(MalformedFileError) as err:
        walk_all(bad)
    assert err.value.row_group == 0 and err.value.column == "k"


def test_bad_inputs_never_escape_as_other_errors():
    """Walking every chunk of every bad_input file raises only PageIndexError."""
    for row in corpus_rows("bad_input"):
        path = corpus_path(row)
        try:
            with open_source(str(path)) as s:
                footer = read_footer(s)
                for r in footer.chunks:
                    for c in r:
                        walk_chunk(s, c, footer.footer_start)
        except pageindex.PageIndexError:
            pass
