"""pageindex.scan.header_kernel: the compiled page-header walk finds exactly the pages (and errors)
of the walk in Python, on every corpus file and on crafted headers, and leaves it what it does not read."""
from __future__ import annotations

import dataclasses
import zlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest


from pageindex.errors import PageIndexError
from pageindex.format.footer import read_footer  # noqa: E402
from pageindex.format.parquet_thrift import CompressionCodec, Encoding, PageType  # noqa: E402
from pageindex.format.thrift import Field, Struct, T, TList, encode_struct  # noqa: E402
from pageindex.io.storage import open_source  # noqa: E402
from pageindex.scan import header_kernel  # noqa: E402
from pageindex.scan.page_walk import walk_chunk  # noqa: E402
from tests.helpers.both_paths import scan_kernel  # noqa: E402
from tests.helpers.corpus import corpus_path, corpus_rows  # noqa: E402


def _walks(path, **kwargs) -> list:
    """Every chunk's walk (or the error it raises), in file order."""
    out = []
    with open_source(str(path)) as s:
        try:
            footer = read_footer(s)
        except PageIndexError as err:
            return [str(err)]
        for row in footer.chunks:
            for chunk in row:
                try:
                    out.append(walk_chunk(s, chunk, footer.footer_start, **kwargs))
                except PageIndexError as err:
                    out.append(str(err))
    return out


def _compiled_chunks(path) -> int:
    """Chunks the compiled walk reads itself (the rest it leaves to the walk in Python)."""
    done = 0
    with open_source(str(path)) as s:
        try:
            footer = read_footer(s)
        except PageIndexError:
            return 0
        for row in footer.chunks:
            for chunk in row:
                if chunk.num_values == 0:
                    continue
                size = min(chunk.total_compressed_size, footer.footer_start - chunk.start)
                buf = np.frombuffer(s.read(chunk.start, size), np.uint8)
                rows = np.empty((1 << 16, header_kernel.COLUMNS), np.int64)
                done += header_kernel.walk(buf, chunk.num_values, rows)[2] == 0
    return done


def _same_walks(path, **kwargs) -> list:
    with scan_kernel("arrow"):
        python = _walks(path, **kwargs)
    with scan_kernel("compiled"):
        compiled = _walks(path, **kwargs)
    assert compiled == python
    return compiled


CORPUS = [corpus_path(r) for r in corpus_rows("candidate") + corpus_rows("oracle") + corpus_rows("bad_input")
          if "overflow_i16" not in r["path"]]  # 40,000 pages: test_many_pages


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_corpus_walks_equal(path):
    """Every corpus file: the same pages, bytes and errors with the compiled walk as without."""
    _same_walks(path)


def test_compiled_walk_reads_the_clean_corpus():
    """The equality above is not vacuous: the compiled walk reads every chunk of the corpus's
    oracle files (Arrow, parquet-java, Spark and other writers) itself."""
    total = done = 0
    for path in [corpus_path(r) for r in corpus_rows("oracle")]:
        with open_source(str(path)) as s:
            footer = read_footer(s)
        total += sum(1 for row in footer.chunks for c in row if c.num_values)
        done += _compiled_chunks(path)
    assert done == total > 100


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict:
    """Files of the edge cases writers produce: v2 pages (compressed or not), CRCs, dictionary
    fallback mid-chunk, statistics on every page, many small pages, nulls."""
    d = tmp_path_factory.mktemp("headers")
    rng = np.random.default_rng(7)
    n = 30_000
    words = np.array([f"w{i:05d}" for i in rng.integers(0, 20_000, n)])
    table = pa.table({
        "i": pa.array(rng.integers(-1000, 1000, n), mask=rng.random(n) < 0.2),
        "f": rng.normal(size=n),
        "s": pa.array(words, pa.string()),
        "b": pa.array(rng.random(n) < 0.5),
    })
    out = {}
    for name, opts in {
        "v1-crc": dict(data_page_version="1.0", write_page_checksum=True, compression="snappy"),
        "v2-crc": dict(data_page_version="2.0", write_page_checksum=True, compression="zstd"),
        "v2-none": dict(data_page_version="2.0", compression="none"),
        "dict-fallback": dict(dictionary_pagesize_limit=4096, compression="snappy"),
        "tiny-pages": dict(data_page_size=256, write_batch_size=32, compression="none", write_statistics=False),
    }.items():
        path = d / f"{name}.parquet"
        pq.write_table(table, path, row_group_size=12_000, **opts)
        out[name] = path
    return out


@pytest.mark.parametrize("name", ["v1-crc", "v2-crc", "v2-none", "dict-fallback", "tiny-pages"])
def test_written_edge_cases(written, name):
    path = written[name]
    walks = _same_walks(path)
    assert _compiled_chunks(path) == len(walks)  # every chunk read by the compiled walk
    pages = [p for w in walks for p in w.pages]
    if name.startswith("v2"):
        assert {p.kind for p in pages} == {PageType.DATA_PAGE_V2}
        assert any(p.num_nulls for p in pages)
    if name.endswith("crc"):
        assert all(p.crc is not None for p in pages)
    if name == "dict-fallback":
        assert {p.value_encoding for p in pages} >= {Encoding.RLE_DICTIONARY, Encoding.PLAIN}
    if name == "tiny-pages":
        assert max(len(w.pages) for w in walks) > 128  # past the first two sizes of the rows array


def test_windowed_and_unchecked_walks(written):
    """A windowed walk stays in Python; a walk without CRC checks equals the one with them."""
    path = written["v1-crc"]
    with scan_kernel("compiled"):
        walks = [[(w.dictionary, w.pages) for w in _walks(path, **kwargs)]
                 for kwargs in ({}, {"window": 4096}, {"verify_crc": False})]
    assert walks[0] == walks[1] == walks[2]


def test_corrupt_crc_is_reported_the_same(written, tmp_path):
    """A page body changed under its CRC: the same error from both walks."""
    path = written["v1-crc"]
    with open_source(str(path)) as s:
        footer = read_footer(s)
        chunk = footer.chunks[0][1]
    with scan_kernel("arrow"):
        page = _walks(path)[1].pages[-1]
    data = bytearray(path.read_bytes())
    data[page.offset + page.header_size + 5] ^= 0xFF
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(bytes(data))
    walks = _same_walks(bad)
    assert "CRC mismatch" in walks[1] and chunk.leaf.dotted in walks[1]


# ------------------------------------------------------------------ crafted headers


def _v1(num_values: int, body: bytes, *extra: Field, crc: bool = True, sub: tuple = ()) -> bytes:
    header = Struct((Field(1, T.I32, PageType.DATA_PAGE), Field(2, T.I32, len(body)),
                     Field(3, T.I32, len(body)))
                    + ((Field(4, T.I32, _signed_crc(body)),) if crc else ())
                    + (Field(5, T.STRUCT, Struct((Field(1, T.I32, num_values), Field(2, T.I32, Encoding.PLAIN),
                                                  Field(3, T.I32, Encoding.RLE), Field(4, T.I32, Encoding.RLE))
                                                 + sub)),)
                    + extra)
    return encode_struct(header) + body


def _signed_crc(body: bytes) -> int:
    crc = zlib.crc32(body)
    return crc - (1 << 32) if crc >= 1 << 31 else crc


STATS = Struct((Field(1, T.BINARY, b"\x09" * 8), Field(2, T.BINARY, b"\x01" * 8), Field(3, T.I64, 0),
                Field(4, T.I64, 3), Field(5, T.BINARY, b"\x09" * 8), Field(6, T.BINARY, b"\x01" * 8),
                Field(7, T.TRUE, True), Field(8, T.TRUE, False)))
BODY = bytes(range(40))  # a PLAIN page of five int64 (max_def 0: no levels)


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A required int64 column's chunk, to be pointed at crafted pages."""
    path = tmp_path_factory.mktemp("template") / "t.parquet"
    pq.write_table(pa.table({"x": pa.array(range(5), pa.int64())}), path, compression="none",
                   use_dictionary=False)
    with open_source(str(path)) as s:
        return read_footer(s).chunks[0][0]


def _h(*fields: Field) -> bytes:
    return encode_struct(Struct(fields))


def _i(field_id: int, value: int) -> Field:
    return Field(field_id, T.I32, value)


def _sub(field_id: int, *fields: Field) -> Field:
    return Field(field_id, T.STRUCT, Struct(fields))


V2_SUB = (_i(1, 5), _i(2, 0), _i(3, 5), _i(4, 0), _i(5, 2), _i(6, 0), Field(7, T.TRUE, False),
          Field(8, T.STRUCT, STATS))
DICTIONARY = _h(_i(1, 2), _i(2, 16), _i(3, 16), _sub(7, _i(1, 2), _i(2, 0), Field(3, T.TRUE, True))) + BODY[:16]

# name -> (the chunk's pages, its num_values, whether the compiled walk reads it itself)
CRAFTED = {
    "plain": ([_v1(5, BODY)], 5, True),
    "no crc": ([_v1(5, BODY, crc=False)], 5, True),
    "two pages": ([_v1(2, BODY[:16]), _v1(3, BODY[16:])], 5, True),
    "statistics": ([_v1(5, BODY, sub=(Field(5, T.STRUCT, STATS),))], 5, True),
    "unknown simple fields": ([_v1(5, BODY, Field(9, T.I64, 1 << 40), Field(10, T.BINARY, b"later"),
                                   Field(11, T.DOUBLE, 1.5), Field(12, T.BYTE, -3), Field(13, T.I16, 300),
                                   Field(300, T.TRUE, True), sub=(Field(9, T.UUID, b"u" * 16),))], 5, True),
    "unknown list field": ([_v1(5, BODY, Field(9, T.LIST, TList(T.I32, (1, 2))))], 5, False),
    "unknown struct field": ([_v1(5, BODY, _sub(9))], 5, False),
    "repeated size": ([_v1(5, BODY, _i(3, 40))], 5, False),
    "size as i64": ([_h(_i(1, 0), Field(2, T.I64, 40), _i(3, 40), _sub(5, _i(1, 5))) + BODY], 5, False),
    "no encoding": ([_h(_i(1, 0), _i(2, 40), _i(3, 40), _sub(5, _i(1, 5))) + BODY], 5, True),
    "index page": ([_h(_i(1, 1), _i(2, 4), _i(3, 4), _sub(6)) + b"abcd", _v1(5, BODY)], 5, False),
    "dictionary then data": ([DICTIONARY, _v1(5, BODY)], 5, True),
    "dictionary after data": ([_v1(5, BODY), DICTIONARY], 10, False),
    "v2": ([_h(_i(1, 3), _i(2, 42), _i(3, 42), _sub(8, *V2_SUB)) + b"\x02\x00" + BODY], 5, True),
    "v2 levels past the page": ([_h(_i(1, 3), _i(2, 40), _i(3, 40),
                                    _sub(8, _i(1, 5), _i(2, 0), _i(3, 5), _i(5, 30), _i(6, 30))) + BODY], 5, False),
    "v2 more nulls than values": ([_h(_i(1, 3), _i(2, 40), _i(3, 40),
                                      _sub(8, _i(1, 5), _i(2, 6), _i(3, 5), _i(5, 0), _i(6, 0))) + BODY], 5, False),
    "too few values": ([_v1(4, BODY)], 5, False),
    "too many values": ([_v1(6, BODY)], 5, False),
    "i64 of ten bytes": ([_v1(5, BODY, Field(9, T.I64, 1 << 62))], 5, False),
    "binary past the chunk": ([_h(_i(1, 0), _i(2, 40), _i(3, 40), _sub(5, _i(1, 5)))[:-1] + b"\x48\x7f\x00"
                               + BODY], 5, False),
    "negative size": ([b"\x15\x00\x15\x01\x15\x50\x2c\x15\x0a\x00\x00" + BODY], 5, False),
    "i32 varint too long": ([b"\x15\x00\x15\x80\x80\x80\x80\x10\x15\x50\x2c\x15\x0a\x00\x00" + BODY], 5, False),
    "header cut off": ([b"\x15\x00\x15\x50\x15"], 5, False),
    "garbage type": ([b"\x1e\x00" + BODY], 5, False),
    "page past the chunk": ([_v1(5, BODY)[:-8]], 5, False),
}


@pytest.mark.parametrize("name", list(CRAFTED), ids=str)
def test_crafted_headers(tmp_path, template, name):
    """Crafted pages after a magic: both walks give the same pages or the same error, and the
    compiled walk reads the chunk itself exactly where it should."""
    pages, num_values, compiled = CRAFTED[name]
    body = b"".join(pages)
    path = tmp_path / "crafted.bin"
    path.write_bytes(b"PAR1" + body + b"\x00" * 64)
    chunk = dataclasses.replace(template, data_page_offset=4, dictionary_page_offset=None,
                                total_compressed_size=len(body), num_values=num_values,
                                codec=CompressionCodec.UNCOMPRESSED)
    limit = 4 + len(body) + (64 if name == "page past the chunk" else 0)
    walked = []
    for choice in ("arrow", "compiled"):
        with scan_kernel(choice), open_source(str(path)) as s:
            try:
                walked.append(walk_chunk(s, chunk, limit))
            except PageIndexError as err:
                walked.append(str(err))
    assert walked[0] == walked[1]
    rows = np.empty((4, header_kernel.COLUMNS), np.int64)
    status = header_kernel.walk(np.frombuffer(body, np.uint8), num_values, rows)[2]
    assert (status == 0) == compiled
    if compiled:
        page = walked[1].pages[-1]
        assert page.header.get(1) == page.kind  # the lazily decoded header is the stored one


def test_many_pages():
    """40,000 pages in one chunk: the rows array grows until they fit."""
    path = next(corpus_path(r) for r in corpus_rows("candidate") if "overflow_i16" in r["path"])
    assert len(_same_walks(path)[0].pages) > 30_000


def test_rows_full_exactly():
    """As many rows as pages is enough; one fewer says FULL at the page that did not fit."""
    pages = [DICTIONARY] + [_v1(1, BODY[:8]) for _ in range(5)]
    buf = np.frombuffer(b"".join(pages), np.uint8)
    rows = np.full((6, header_kernel.COLUMNS), -7, np.int64)
    assert header_kernel.walk(buf, 5, rows) == (6, len(buf), 0)
    assert rows[:, header_kernel.OFFSET].tolist() == [sum(map(len, pages[:i])) for i in range(6)]
    assert rows[:, header_kernel.KIND].tolist() == [PageType.DICTIONARY_PAGE] + [PageType.DATA_PAGE] * 5
    assert header_kernel.walk(buf, 5, rows[:5]) == (5, len(buf) - len(pages[-1]), header_kernel.FULL)
    assert header_kernel.walk(buf, 5, rows[:0]) == (0, 0, header_kernel.FULL)


def test_rows_too_narrow():
    with pytest.raises(ValueError, match="columns"):
        header_kernel.walk(np.frombuffer(_v1(5, BODY), np.uint8), 5, np.empty((4, 3), np.int64))
