"""Tests for pageindex.format.compression: round trips, hand-built framings and real corpus pages.

Expected outputs come from the original data or from pyarrow's reading of the corpus files.
"""
from __future__ import annotations

import gzip
import os
import random
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex.errors import MalformedFileError, UnsupportedFileError
from pageindex.format.compression import decompress
from tests.helpers.corpus import require_corpus
from tests.helpers.page_reader import chunk_pages

# Codec number -> pyarrow name of a format it accepts.
PYARROW_CODECS = {1: "snappy", 2: "gzip", 4: "brotli", 5: "lz4", 6: "zstd", 7: "lz4_raw"}


def sample(size: int, seed: int = 0) -> bytes:
    """Compressible but not trivial bytes."""
    rng = random.Random(seed)
    words = [bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 12))) for _ in range(50)]
    out = bytearray()
    while len(out) < size:
        out += rng.choice(words)
    return bytes(out[:size])


def compress(name: str, data: bytes) -> bytes:
    return pa.Codec(name).compress(data, asbytes=True)


def hadoop_lz4(data: bytes, block: int) -> bytes:
    """Hadoop framing: per block, big-endian raw and compressed sizes, then a raw LZ4 block."""
    out = bytearray()
    for start in range(0, len(data), block):
        piece = data[start : start + block]
        packed = compress("lz4_raw", piece)
        out += struct.pack(">II", len(piece), len(packed)) + packed
    return bytes(out)


# --- round trips -----------------------------------------------------------------------


@pytest.mark.parametrize("codec", sorted(PYARROW_CODECS))
@pytest.mark.parametrize("size", [0, 1, 100, 70_000, 1 << 20])
def test_round_trip(codec: int, size: int) -> None:
    data = sample(size, seed=size)
    body = compress(PYARROW_CODECS[codec], data)
    assert decompress(codec, body, size) == data
    assert decompress(codec, memoryview(b"??" + body)[2:], size) == data


def test_uncompressed() -> None:
    assert decompress(0, memoryview(b"abc"), 3) == b"abc"
    with pytest.raises(MalformedFileError):
        decompress(0, b"abc", 4)


def test_empty_section_with_no_bytes() -> None:
    for codec in PYARROW_CODECS:
        assert decompress(codec, b"", 0) == b""


@pytest.mark.parametrize("codec", [5, 7])
def test_lz4_block_larger_than_a_frame_block(codec: int) -> None:
    data = sample(5 << 20, seed=3) + os.urandom(1 << 20)
    body = compress("lz4_raw", data)
    assert decompress(codec, body, len(data)) == data
    with pytest.raises(MalformedFileError):
        decompress(codec, body, len(data) + 1)
    with pytest.raises(MalformedFileError):
        decompress(codec, body, len(data) - 1)


@pytest.mark.parametrize("block", [1 << 20, 64 << 10, 1000])
def test_hadoop_lz4(block: int) -> None:
    data = sample(300_000, seed=block)
    assert decompress(5, hadoop_lz4(data, block), len(data)) == data


def test_hadoop_lz4_with_wrong_total_size() -> None:
    data = sample(10_000)
    body = hadoop_lz4(data, 4096)
    for size in (len(data) - 1, len(data) + 1):
        with pytest.raises(MalformedFileError):
            decompress(5, body, size)


def test_lz4_frame_under_codec_5() -> None:
    data = sample(200_000)
    assert decompress(5, compress("lz4", data), len(data)) == data


def test_gzip_with_several_members() -> None:
    a, b = sample(5000, 1), sample(7000, 2)
    body = gzip.compress(a) + gzip.compress(b) + gzip.compress(b"")
    assert decompress(2, body, len(a) + len(b)) == a + b
    with pytest.raises(MalformedFileError):
        decompress(2, body + b"\x00", len(a) + len(b))  # trailing garbage


# --- errors ----------------------------------------------------------------------------


@pytest.mark.parametrize("codec", sorted(PYARROW_CODECS))
def test_wrong_size_is_malformed(codec: int) -> None:
    data = sample(50_000)
    body = compress(PYARROW_CODECS[codec], data)
    for size in (len(data) - 1, len(data) + 1, 0, 2 * len(data)):
        with pytest.raises(MalformedFileError):
            decompress(codec, body, size)


@pytest.mark.parametrize("codec", sorted(PYARROW_CODECS))
def test_corrupt_input_is_malformed(codec: int) -> None:
    data = sample(50_000)
    body = compress(PYARROW_CODECS[codec], data)
    for bad in (body[: len(body) // 2], body[:-1], body[1:], b"\xff" * 64, b"\x00", body + body[:7]):
        with pytest.raises(MalformedFileError):
            decompress(codec, bad, len(data))


@pytest.mark.parametrize("codec", sorted(PYARROW_CODECS))
def test_bit_flips_raise_malformed_or_keep_the_size(codec: int) -> None:
    # Most codecs carry no checksum, so a flipped literal byte can still decode; what must
    # never happen is another exception type or a result of the wrong length.
    data = sample(50_000)
    body = compress(PYARROW_CODECS[codec], data)
    rng = random.Random(codec)
    for _ in range(200):
        mangled = bytearray(body)
        for _ in range(rng.randint(1, 8)):
            mangled[rng.randrange(len(mangled))] ^= 1 << rng.randrange(8)
        try:
            assert len(decompress(codec, bytes(mangled), len(data))) == len(data)
        except MalformedFileError:
            pass


def test_decompression_bomb_stops_at_declared_size() -> None:
    zeros = bytes(64 << 20)
    for codec, name in PYARROW_CODECS.items():
        with pytest.raises(MalformedFileError):
            decompress(codec, compress(name, zeros), 1000)
    with pytest.raises(MalformedFileError):
        decompress(5, hadoop_lz4(zeros, 1 << 20), 1000)


def test_unsupported_codecs() -> None:
    with pytest.raises(UnsupportedFileError):
        decompress(3, b"anything", 8)
    for codec in (8, 16, -3):
        with pytest.raises(UnsupportedFileError):
            decompress(codec, b"anything", 8)


def test_negative_size_is_malformed() -> None:
    with pytest.raises(MalformedFileError):
        decompress(1, b"\x00", -1)


# --- real pages --------------------------------------------------------------------------


def corpus_path(name: str) -> Path:
    return require_corpus() / "parquet-testing" / "data" / name


def corpus_pages(name: str, column: int):
    """(page type, header fields, body) for each page of row group 0's column."""
    path = corpus_path(name)
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(column)
    return [(header[1], header, body) for header, _, body in chunk_pages(path.read_bytes(), chunk)]


def plain_byte_arrays(data: bytes) -> list[bytes]:
    values, pos = [], 0
    while pos < len(data):
        (size,) = struct.unpack_from("<I", data, pos)
        values.append(data[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return values


@pytest.mark.parametrize(
    "name", ["hadoop_lz4_compressed.parquet", "non_hadoop_lz4_compressed.parquet"]
)
def test_corpus_lz4_codec_5_pages(name: str) -> None:
    table = pq.read_table(corpus_path(name))
    decoded = {}
    for column in range(3):
        for page_type, header, body in corpus_pages(name, column):
            result = decompress(5, body, header[2])
            assert len(result) == header[2]
            decoded.setdefault(column, []).append(result)
    # Dictionary pages hold the distinct values, PLAIN encoded.
    c0, c1, c2 = (pages[0] for pages in decoded.values())
    assert sorted(np.frombuffer(c0, "<i8").tolist()) == sorted(set(table.column("c0").to_pylist()))
    assert sorted(plain_byte_arrays(bytes(c1))) == sorted(set(table.column("c1").to_pylist()))
    assert sorted(np.frombuffer(c2, "<f8").tolist()) == sorted(set(table.column("v11").to_pylist()))


def test_corpus_hadoop_and_plain_lz4_files_decode_identically() -> None:
    hadoop = corpus_pages("hadoop_lz4_compressed.parquet", 1)
    plain = corpus_pages("non_hadoop_lz4_compressed.parquet", 1)
    assert hadoop[0][2][:8] != plain[0][2][:8]  # framed differently on disk
    assert decompress(5, hadoop[0][2], hadoop[0][1][2]) == decompress(5, plain[0][2], plain[0][1][2])


def test_corpus_hadoop_lz4_larger_page() -> None:
    (page_type, header, body), = corpus_pages("hadoop_lz4_compressed_larger.parquet", 0)
    assert struct.unpack(">I", body[:4])[0] < header[2]  # several Hadoop blocks
    values = plain_byte_arrays(decompress(5, body, header[2]))
    expected = pq.read_table(corpus_path("hadoop_lz4_compressed_larger.parquet")).column("a").to_pylist()
    assert [v.decode() for v in values] == expected


def test_corpus_concatenated_gzip_members() -> None:
    (page_type, header, body), = corpus_pages("concatenated_gzip_members.parquet", 0)
    v2 = header[8]
    assert page_type == 3 and v2[7]  # data page v2, compressed
    levels = v2[5] + v2[6]  # v2 level sections are stored uncompressed before the values
    values = decompress(2, body[levels:], header[2] - levels)
    assert body[levels:].count(b"\x1f\x8b\x08") >= 2
    expected = pq.read_table(corpus_path("concatenated_gzip_members.parquet")).column("long_col")
    assert np.frombuffer(values, "<u8").tolist() == expected.to_pylist()


@pytest.mark.parametrize("codec, name", [(1, "snappy"), (2, "gzip"), (6, "zstd"), (7, "lz4_raw")])
def test_expansion_bound_holds_for_the_most_compressible_data(codec, name):
    """Zeros compress best: each codec's real output passes the check, a claim above its bound
    fails before anything is allocated."""
    from pageindex.format.compression import _MAX_EXPANSION, check_expansion

    size = 64 << 20
    stored = len(pa.Codec(name).compress(bytes(size), asbytes=True))
    check_expansion(codec, stored, size)
    with pytest.raises(MalformedFileError, match="more than the codec can produce"):
        check_expansion(codec, stored, stored * _MAX_EXPANSION[codec] + 1, offset=4)
    check_expansion(4, 1, 1 << 40)  # brotli: no bound of its own (the page limit applies)
