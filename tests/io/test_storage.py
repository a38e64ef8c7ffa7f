"""storage: Source.read_view reuses one buffer for big local reads, and never while a view of it
is alive; a retrofit whose every chunk goes through that buffer writes the same bytes."""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest

import pageindex
from pageindex.index import compute
from pageindex.io import storage
from pageindex.io.storage import open_source
from tests.helpers.corpus import corpus_files

SIZE = 64 << 10


@pytest.fixture
def small_reuse(monkeypatch):
    """Reads of 1 KiB to 16 KiB go through the spare, so small files exercise it."""
    monkeypatch.setattr(storage, "REUSE_MIN_BYTES", 1 << 10)
    monkeypatch.setattr(storage, "REUSE_MAX_BYTES", 16 << 10)


@pytest.fixture
def data_file(tmp_path):
    data = os.urandom(SIZE)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    return path, data


@pytest.mark.parametrize("offset,length", [
    (0, 4 << 10), (123, 16 << 10), (SIZE - 3000, 8 << 10), (5, 100), (0, 40 << 10), (SIZE, 5000),
])
def test_read_view_returns_what_read_returns(small_reuse, data_file, offset, length):
    path, data = data_file
    with open_source(str(path)) as source:
        got = source.read_view(offset, length)
        assert source.stats.ranges == ([(offset, len(got), "data")] if got else [])
        assert bytes(got) == source.read(offset, length) == data[offset:offset + length]


def test_a_live_view_is_never_overwritten(small_reuse, data_file):
    path, data = data_file
    with open_source(str(path)) as source:
        first = source.read_view(0, 8 << 10)
        piece = first[100:200]
        arrow = pa.py_buffer(first[1000:1100])
        buffer = id(first.obj)  # not the buffer itself: a reference to it marks it in use
        del first
        second = source.read_view(10 << 10, 8 << 10)
        assert isinstance(second, bytes), "a slice still refers to the first read"
        del piece
        third = source.read_view(20 << 10, 8 << 10)
        assert isinstance(third, bytes), "an Arrow buffer still refers to the first read"
        assert bytes(second) + third == data[10 << 10:18 << 10] + data[20 << 10:28 << 10]
        assert arrow.to_pybytes() == data[1000:1100]
        del arrow, third
        view = source.read_view(40 << 10, 8 << 10)
        assert id(view.obj) == buffer, "no view is left: the buffer is reused"
        array = np.frombuffer(view, np.uint8)[7:9]  # the spare now held by numpy alone
        del view
        fourth = source.read_view(30 << 10, 8 << 10)
        assert isinstance(fourth, bytes), "a numpy array still refers to the fourth read"
        assert bytes(array) == data[(40 << 10) + 7:(40 << 10) + 9]
        del array
        fifth = source.read_view(30 << 10, 8 << 10)
        assert id(fifth.obj) == buffer, "no view is left: the buffer is reused"
        assert bytes(fifth) == bytes(fourth) == data[30 << 10:38 << 10]


def test_views_are_read_only(small_reuse, data_file):
    path, _ = data_file
    with open_source(str(path)) as source:
        view = source.read_view(0, 4 << 10)
        with pytest.raises(TypeError):
            view[0] = 1


def test_a_read_too_big_to_reuse_lets_the_spare_go(small_reuse, data_file):
    path, data = data_file
    with open_source(str(path)) as source:
        spare = source.read_view(0, 8 << 10).obj
        big = source.read_view(0, 32 << 10)
        assert isinstance(big, bytes) and big == data[:32 << 10]
        assert source.read_view(0, 8 << 10).obj is not spare


@pytest.mark.slow
def test_retrofit_through_the_spare_is_byte_identical(small_reuse, tmp_path, monkeypatch,
                                                      paged_parquet):
    """Every chunk of 1 KiB to 16 KiB is read into the one spare buffer while earlier chunks'
    pages may still be in Arrow's hands; the output must not change by a byte."""
    files = [f for f in corpus_files("candidate") if f.stat().st_size > 2000]
    files.append(paged_parquet.without_index)
    reused = []
    read_view = storage.Source.read_view

    def counting(self, offset, length, purpose="data"):
        view = read_view(self, offset, length, purpose)
        # The spare is a numpy buffer; a view of bytes is a range read at once (Source.holding).
        reused.append(isinstance(view, memoryview) and isinstance(view.obj, np.ndarray))
        return view

    # Every chunk read by itself (not a run of small chunks at once), so that small ones take the spare.
    monkeypatch.setattr(compute, "HOLD_CHUNK_BYTES", 0)
    outputs = {}
    for mode in ("spare", "fresh"):
        if mode == "fresh":
            monkeypatch.setattr(storage, "REUSE_MIN_BYTES", 1 << 40)
        monkeypatch.setattr(storage.Source, "read_view", counting)
        for i, f in enumerate(files):
            out = tmp_path / f"{mode}-{i}.parquet"
            result = pageindex.retrofit(str(f), str(out))
            outputs[mode, i] = (result.status, out.read_bytes() if out.exists() else None)
        if mode == "spare":
            # Small chunks decoded together (chunk_scan.GROUP_CHUNKS) come in one read, so a
            # minority of reads takes the spare; enough to prove it changes no byte.
            assert sum(reused) >= 10, "the spare buffer was hardly used"
            reused.clear()
    assert not any(reused)
    for i, f in enumerate(files):
        assert outputs["spare", i] == outputs["fresh", i], f


def test_storage_options_from_the_command_line():
    from pageindex.io.storage import storage_options_from

    assert storage_options_from(None) == {}
    assert storage_options_from("http://127.0.0.1:9000", ["anon=true", "client_kwargs.region_name=eu-west-1",
                                                          "default_block_size=1048576", "profile=prod"]) == {
        "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000", "region_name": "eu-west-1"},
        "anon": True, "default_block_size": 1048576, "profile": "prod"}
    for bad in ("novalue", "=x"):
        with pytest.raises(ValueError, match="KEY=VALUE"):
            storage_options_from(None, [bad])
    with pytest.raises(ValueError, match="already set"):
        storage_options_from(None, ["profile=a", "profile.x=1"])


def test_each_thread_reads_into_a_spare_of_its_own(small_reuse, data_file):
    """Two threads' views are alive at once: neither overwrites the other's bytes, and each
    thread's next read reuses its own buffer."""
    import threading

    path, data = data_file
    barrier = threading.Barrier(2, timeout=30)
    found: dict[int, tuple] = {}

    def reader(i: int) -> None:
        offset = i * (16 << 10)
        first = source.read_view(offset, 8 << 10)
        barrier.wait()  # both views alive now
        same = bytes(first) == data[offset:offset + (8 << 10)]
        buffer = id(first.obj)
        del first
        again = source.read_view(offset + 100, 8 << 10)
        found[i] = (same, buffer, id(again.obj), bytes(again) == data[offset + 100:offset + 100 + (8 << 10)])

    with open_source(str(path)) as source:
        threads = [threading.Thread(target=reader, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert all(same and reread and buffer == reused for same, buffer, reused, reread in found.values())
    assert found[0][1] != found[1][1], "both threads read into one buffer"
