"""Chunks scanned on a pool of threads (index.parallel, compute_indexes and retrofit `threads`):
the same bytes and the same error as one thread, really concurrent, and no pool for one."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex.errors import PageIndexError
from pageindex.index import compute, parallel
from pageindex.retrofit import retrofit
from pageindex.scan import encoded
from tests.helpers.both_paths import indexes, scan_kernel
from tests.helpers.corpus import corpus_path, corpus_rows
from tests.helpers.writers import pyarrow_each
from tests.scan.test_encoded import WRITES, _table

PATHS = [encoded.ARROW, encoded.COMPILED]


@pytest.fixture
def small_chunks_too(monkeypatch):
    """Files of small chunks use the threads too (these tests' files are small)."""
    monkeypatch.setattr(parallel, "MIN_MEAN_CHUNK_BYTES", 0)


@pytest.fixture
def chunk_per_task(monkeypatch, small_chunks_too):
    """Every chunk a task of its own, so small files spread over the threads."""
    monkeypatch.setattr(parallel, "SEGMENT_BYTES", 1)


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> dict[str, Path]:
    """The encoded-path writer matrix (tests/scan/test_encoded.py): 18 columns, 2 row groups."""
    directory = tmp_path_factory.mktemp("parallel")
    table = _table(np.random.default_rng(44))
    return pyarrow_each(directory, table, WRITES, row_group_size=1000, data_page_size=1024, write_batch_size=100,
                        write_page_index=False, store_decimal_as_integer=True)


def _scan_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("pageindex-scan")]


def _written(src: Path, dst: Path, choice: str, threads: int, **options) -> bytes:
    with scan_kernel(choice):
        retrofit(str(src), str(dst), threads=threads, **options)
    return dst.read_bytes()


@pytest.mark.parametrize("choice", PATHS)
@pytest.mark.parametrize("name", sorted(WRITES))
def test_two_threads_write_the_bytes_one_writes(matrix, name, choice, chunk_per_task, tmp_path):
    one = _written(matrix[name], tmp_path / "one.parquet", choice, 1, bloom_filter="auto")
    two = _written(matrix[name], tmp_path / "two.parquet", choice, 2, bloom_filter="auto")
    assert two == one
    assert not _scan_threads(), "the pool's threads outlived the run"


@pytest.mark.parametrize("name", ["v1-dict-snappy", "v2-plain-gzip"])
def test_trusted_page_stats_mixed_with_scans(matrix, name, chunk_per_task, tmp_path):
    """Header statistics read on the calling thread between the pool's scans (floats are scanned)."""
    options = dict(trust_page_stats=True)
    one = _written(matrix[name], tmp_path / "one.parquet", encoded.COMPILED, 1, **options)
    assert _written(matrix[name], tmp_path / "two.parquet", encoded.COMPILED, 2, **options) == one


def test_default_runs_keep_small_chunks_together(matrix, small_chunks_too, tmp_path):
    """Without chunk_per_task the matrix's small chunks are runs of several chunks: same bytes."""
    name = "v1-fallback"
    one = _written(matrix[name], tmp_path / "one.parquet", encoded.ARROW, 1)
    assert _written(matrix[name], tmp_path / "two.parquet", encoded.ARROW, 3) == one


def _outcome(path: Path, choice: str, threads: int):
    try:
        return indexes(str(path), choice, threads=threads)
    except PageIndexError as err:
        return f"{type(err).__name__}: {err}"


@pytest.mark.parametrize("choice", PATHS)
@pytest.mark.parametrize("category", ["candidate", "bad_input"])
def test_corpus_same_indexes_or_same_error(category, choice, chunk_per_task):
    differ = []
    for row in corpus_rows(category):
        if not row["path"].endswith(".parquet"):
            continue
        path = corpus_path(row)
        if _outcome(path, choice, 1) != _outcome(path, choice, 2):
            differ.append(row["path"])
    assert differ == []


def _corrupt(src: Path, dst: Path, chunks: list[tuple[int, int]]) -> None:
    """A copy with a byte of each chunk's last page body flipped: its CRC no longer matches."""
    data = bytearray(src.read_bytes())
    meta = pq.ParquetFile(src).metadata
    for rg, col in chunks:
        c = meta.row_group(rg).column(col)
        start = c.dictionary_page_offset if c.has_dictionary_page else c.data_page_offset
        data[start + c.total_compressed_size - 3] ^= 0xFF
    dst.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def checksummed(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("crc") / "crc.parquet"
    rng = np.random.default_rng(7)
    table = pa.table({name: rng.integers(0, 1 << 40, 4000) for name in "abcdef"})
    pq.write_table(table, path, row_group_size=1000, data_page_size=2048, write_page_checksum=True,
                   compression="snappy")
    return path


@pytest.mark.parametrize("choice", PATHS)
def test_first_error_in_file_order_is_raised(checksummed, choice, chunk_per_task, tmp_path):
    """A middle chunk fails, and a later one too (which a second thread may meet first): the
    middle chunk's error is raised, as one thread raises it; no thread is left running."""
    bad = tmp_path / "bad.parquet"
    _corrupt(checksummed, bad, [(1, 3), (1, 5), (2, 1)])
    raised = {}
    for threads in (1, 2):
        with pytest.raises(PageIndexError) as err, scan_kernel(choice):
            retrofit(str(bad), str(tmp_path / f"out{threads}.parquet"), threads=threads)
        raised[threads] = (type(err.value), str(err.value))
        assert not (tmp_path / f"out{threads}.parquet").exists()
    assert raised[2] == raised[1]
    assert "row group 1" in raised[1][1] and "column d" in raised[1][1], raised[1]
    assert not _scan_threads()


def test_two_threads_scan_two_chunks_at_once(checksummed, chunk_per_task, monkeypatch):
    """The first two chunk scans wait for each other at a barrier: run one after the other they
    would never meet (the barrier breaks), run on two threads they do."""
    barrier = threading.Barrier(2, timeout=60)
    seen: list[str] = []
    lock = threading.Lock()
    from_scan = compute._from_scan

    def meeting(planned, scan, truncate_length):
        with lock:
            seen.append(threading.current_thread().name)
            first_two = len(seen) <= 2
        if first_two:
            barrier.wait()
        return from_scan(planned, scan, truncate_length)

    monkeypatch.setattr(compute, "_from_scan", meeting)
    result = retrofit(str(checksummed), dry_run=True, threads=2)
    assert len(seen) == len(result.chunks) == 24
    assert len(set(seen)) == 2 and all(name.startswith("pageindex-scan") for name in seen)


def test_one_thread_uses_no_pool(checksummed, monkeypatch):
    calls: list[str] = []
    from_scan = compute._from_scan

    def recording(planned, scan, truncate_length):
        calls.append(threading.current_thread().name)
        return from_scan(planned, scan, truncate_length)

    def no_pool(*args, **kwargs):
        raise AssertionError("a pool was made for one thread")

    monkeypatch.setattr(compute, "_from_scan", recording)
    monkeypatch.setattr(parallel.ScanPool, "__init__", no_pool)
    retrofit(str(checksummed), dry_run=True, threads=1)
    retrofit(str(checksummed), dry_run=True)  # the library's default
    assert calls == [threading.main_thread().name] * 48


@pytest.mark.parametrize("bad", [0, -1, "two", 1.5, True, None])
def test_threads_must_be_a_positive_number_or_auto(checksummed, bad):
    with pytest.raises(ValueError, match="threads must be a positive number or 'auto'"):
        retrofit(str(checksummed), dry_run=True, threads=bad)


def test_auto_is_at_most_two_and_what_the_process_may_use(monkeypatch):
    monkeypatch.setattr(parallel.os, "sched_getaffinity", lambda pid: {1}, raising=False)
    assert parallel.threads_option("auto") == 1
    monkeypatch.setattr(parallel.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert parallel.threads_option("auto") == 2


def test_small_chunks_stay_on_one_thread(checksummed, monkeypatch):
    """A file whose chunks average under MIN_MEAN_CHUNK_BYTES is scanned without a pool."""
    def no_pool(*args, **kwargs):
        raise AssertionError("a pool was made for small chunks")

    monkeypatch.setattr(parallel.ScanPool, "__init__", no_pool)
    assert retrofit(str(checksummed), dry_run=True, threads=2).status == "dry_run"
    assert parallel.worth_threads(2, [300 << 10, 220 << 10]) == 2
    assert parallel.worth_threads(2, [300 << 10, 200 << 10]) == 1
    assert parallel.worth_threads(2, [1 << 30]) == 1


def test_segments_cut_runs_by_bytes():
    sizes = [5, 300, 2 << 20, 700 << 10, 400 << 10, 1, 1 << 20]
    runs = parallel.segments(sizes, lambda s: s)
    assert runs == [[5, 300], [2 << 20], [700 << 10, 400 << 10], [1], [1 << 20]]
    assert sum(runs, []) == sizes


@pytest.mark.s3
@pytest.mark.parametrize("transport", ["arrow", "fsspec"])
def test_object_store_reads_from_two_threads(matrix, transport, s3_server, s3_bucket, chunk_per_task, tmp_path):
    """An object's chunks read by two threads through the read plan (Arrow's S3 client or s3fs):
    the bytes one thread writes."""
    import fsspec

    from pageindex.io.transport import mark_fsspec_reads
    from tests.helpers import s3 as s3h

    fs = s3h.make_s3fs(s3_server)
    if transport == "fsspec":
        mark_fsspec_reads(fs)
    src = f"{s3_bucket}/matrix.parquet"
    fs.put(str(matrix["v1-fallback"]), src)
    local = fsspec.filesystem("file")
    outputs = []
    for threads in (1, 2):
        dst = tmp_path / f"{threads}.parquet"
        retrofit(f"s3://{src}", str(dst), filesystem=fs, dst_filesystem=local, threads=threads)
        outputs.append(dst.read_bytes())
    assert outputs[1] == outputs[0]
    assert not _scan_threads()
