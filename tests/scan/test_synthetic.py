"""pageindex.scan.synthetic: a synthesized file is read from its parts without copying the page bytes,
and its column chunks are written as the generic encoder writes them."""
from __future__ import annotations

import io
import random

import numpy as np

from pageindex.format.parquet_thrift import ColumnChunk, ColumnMetaData, Encoding
from pageindex.format.thrift import Struct, T, TList, decode_struct, encode_struct
from pageindex.io.storage import open_source
from pageindex.scan.synthetic import Synthesized, _PartsReader, column_chunk


def _reads_like(reader: _PartsReader, joined: bytes, seed: int, reads: int, max_size: int) -> None:
    """Random seeks and reads (whole-rest reads too) return what the joined bytes hold."""
    rng = np.random.default_rng(seed)
    for _ in range(reads):
        start = int(rng.integers(0, len(joined) + 5))
        size = int(rng.integers(-1, max_size))
        reader.seek(start)
        assert bytes(reader.read(size)) == (joined[start:] if size < 0 else joined[start:start + size])
        end = len(joined) if size < 0 else min(len(joined), start + size)
        assert reader.tell() == max(start, end)  # a read past the end leaves the position alone


def test_parts_reader_reads_like_the_joined_bytes():
    parts = (b"PAR1", bytes(range(200)), b"", b"tail-bytes")
    joined = b"".join(parts)
    reader = _PartsReader(parts)
    _reads_like(reader, joined, seed=3, reads=300, max_size=60)
    assert reader.seek(-4, io.SEEK_END) == len(joined) - 4
    assert bytes(reader.read(10)) == b"ytes"


def test_parts_left_on_storage_read_like_the_joined_bytes(tmp_path):
    data = bytes(range(256)) * 4
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    with open_source(str(path)) as source:
        parts = (b"PAR1", source.stored(100, 500), b"tail")
        assert Synthesized(parts).streamed and not Synthesized((b"PAR1", b"x")).streamed
        _reads_like(_PartsReader(parts), b"PAR1" + data[100:600] + b"tail", seed=5, reads=200, max_size=700)


def test_reads_within_a_part_are_views_not_copies():
    data = bytes(1000)
    reader = _PartsReader((b"PAR1", data, b"end"))
    reader.seek(4)
    view = reader.read(1000)
    assert isinstance(view, memoryview) and view.obj is data


def _column_chunk_tree(physical_type, path, codec, pos, *, num_values, uncompressed, compressed, data_offset,
                       dictionary_offset) -> Struct:
    """The ColumnChunk column_chunk writes, built as a tree for the generic encoder."""
    meta = ColumnMetaData.make(
        TYPE=physical_type, ENCODINGS=TList(T.I32, (Encoding.PLAIN,)),
        PATH_IN_SCHEMA=TList(T.BINARY, tuple(p.encode() for p in path)), CODEC=codec, NUM_VALUES=num_values,
        TOTAL_UNCOMPRESSED_SIZE=uncompressed, TOTAL_COMPRESSED_SIZE=compressed, DATA_PAGE_OFFSET=data_offset,
        DICTIONARY_PAGE_OFFSET=dictionary_offset)
    return ColumnChunk.make(FILE_OFFSET=pos, META_DATA=meta)


def test_column_chunk_bytes_are_the_generic_encoder_s():
    rng = random.Random(28)
    for _ in range(300):
        big = rng.choice([0, 1, 127, 128, 1 << 20, (1 << 63) - 1])
        args = (rng.randrange(8), tuple(rng.choice(["c0", "a", "é" * 70, ""]) for _ in range(rng.randint(1, 17))),
                rng.randrange(8), rng.randrange(big + 1))
        sizes = {"num_values": rng.randrange(big + 1), "uncompressed": rng.randrange(big + 1),
                 "compressed": rng.randrange(big + 1), "data_offset": rng.randrange(big + 1),
                 "dictionary_offset": rng.choice([None, 4, big])}
        raw = column_chunk(*args, **sizes).raw
        assert raw == encode_struct(_column_chunk_tree(*args, **sizes))
        assert decode_struct(raw) == (_column_chunk_tree(*args, **sizes), len(raw))
