"""pageindex.values: a synthesized file is read from its parts without copying the page bytes,
and decodes to the original chunk's values."""
from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pageindex.page_walk import walk_chunk
from pageindex.retrofit import read_footer
from pageindex.storage import open_source
from pageindex.values import Synthesized, _PartsReader, bare_path, decode, synthesize


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


def test_synthesized_chunk_decodes_to_the_original_values(tmp_path):
    values = pa.array([None if i % 11 == 0 else i * 7 for i in range(20_000)], pa.int64())
    path = tmp_path / "v.parquet"
    pq.write_table(pa.table({"v": values}), path, data_page_size=4096, write_page_index=False)
    with open_source(str(path)) as source:
        footer = read_footer(source)
        chunk = footer.chunks[0][0]
        pages = walk_chunk(source, chunk, footer.footer_start)
    rows = footer.row_group_rows[0]
    file = synthesize([bare_path(chunk)], [(chunk, pages)], rows, footer.created_by_raw)
    assert isinstance(file, Synthesized) and any(part is pages.data for part in file.parts)
    assert decode(file, rows).combine_chunks().equals(values)
