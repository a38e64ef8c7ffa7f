"""pageindex.scan.synthetic: a synthesized file is read from its parts without copying the page bytes."""
from __future__ import annotations

import io

import numpy as np

from pageindex.io.storage import open_source
from pageindex.scan.synthetic import Synthesized, _PartsReader


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
