"""The read planner (pageindex/io/read_plan.py) and Source.prefetch: merging of ranges (holes,
caps, overlaps, order), the concurrency and read-ahead bounds on a real fsspec filesystem,
errors of a merged request surfacing as the StorageError a direct read gives, bytes served equal
to direct reads for random range sets, and the requests a prefetch makes on the moto S3 server
behind the counting proxy."""
from __future__ import annotations

import random
import threading
import time
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from pageindex.errors import StorageError
from pageindex.format.footer import read_footer
from pageindex.io.read_plan import ReadOptions, ReadPlan, merge_ranges
from pageindex.io.storage import open_source
from tests.helpers import s3 as s3h
from tests.helpers.big_files import wide_table
from tests.helpers.fault_proxy import FaultProxy

# ---------------------------------------------------------------- merging


def test_merge_joins_holes_up_to_the_limit():
    ranges = [(0, 10), (18, 10), (37, 10)]  # holes of 8 and 9 bytes
    assert merge_ranges(ranges, hole_limit=8, range_cap=1000) == [(0, 28), (37, 10)]
    assert merge_ranges(ranges, hole_limit=9, range_cap=1000) == [(0, 47)]
    assert merge_ranges(ranges, hole_limit=0, range_cap=1000) == ranges


def test_merge_touching_ranges_are_one_request():
    assert merge_ranges([(0, 10), (10, 5)], hole_limit=0, range_cap=100) == [(0, 15)]


def test_merge_stops_at_the_cap():
    ranges = [(i * 10, 10) for i in range(10)]
    assert merge_ranges(ranges, hole_limit=0, range_cap=30) == [(0, 30), (30, 30), (60, 30), (90, 10)]
    # a range longer than the cap is one request of its own, not split
    assert merge_ranges([(0, 5), (5, 100), (105, 5)], hole_limit=0, range_cap=50) == [(0, 5), (5, 100), (105, 5)]


def test_merge_overlaps_are_always_one_even_past_the_cap():
    assert merge_ranges([(0, 60), (40, 60)], hole_limit=0, range_cap=50) == [(0, 100)]
    assert merge_ranges([(0, 100), (10, 5), (20, 5)], hole_limit=0, range_cap=50) == [(0, 100)]


def test_merge_sorts_and_drops_empty():
    assert merge_ranges([(50, 10), (0, 10), (30, 0), (12, 10)], hole_limit=4, range_cap=100) == [(0, 22), (50, 10)]
    assert merge_ranges([], hole_limit=4, range_cap=100) == []
    assert merge_ranges([(7, 0)], hole_limit=4, range_cap=100) == []


def test_options_reject_nonsense():
    ReadOptions()
    for bad in (dict(hole_limit=-1), dict(range_cap=0), dict(max_concurrency=0),
                dict(range_cap=100, max_ahead_bytes=99)):
        with pytest.raises(ValueError):
            ReadOptions(**bad)


# ---------------------------------------------------------------- a real filesystem, instrumented


class CountingMemoryFS(MemoryFileSystem):
    """fsspec's in-memory filesystem, counting cat_file calls in flight (each takes `delay`) and
    failing those that start in `fail_at` (an offset range) with OSError."""

    def __init__(self, delay: float = 0.0, fail_at: range | None = None) -> None:
        super().__init__(skip_instance_cache=True)
        self.store, self.pseudo_dirs = {}, [""]  # not the class-wide store other tests share
        self.delay, self.fail_at = delay, fail_at
        self.lock = threading.Lock()
        self.in_flight = self.max_in_flight = self.calls = 0

    def cat_file(self, path, start=None, end=None, **kwargs):
        with self.lock:
            self.calls += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            time.sleep(self.delay)
            if self.fail_at is not None and start in self.fail_at:
                raise OSError(5, "Input/output error")
            return super().cat_file(path, start=start, end=end, **kwargs)
        finally:
            with self.lock:
                self.in_flight -= 1


def _file(fs: CountingMemoryFS, size: int, seed: int = 0) -> tuple[str, bytes]:
    data = random.Random(seed).randbytes(size)
    path = f"/plan-{uuid.uuid4().hex}.bin"
    fs.pipe_file(path, data)
    return path, data


def test_concurrency_limit_is_reached_and_never_exceeded():
    fs = CountingMemoryFS(delay=0.05)
    path, data = _file(fs, 100_000)
    ranges = [(i * 1000, 500) for i in range(40)]  # 500-byte holes: 40 requests
    options = ReadOptions(hole_limit=100, range_cap=1000, max_concurrency=3, max_ahead_bytes=1 << 20)
    with open_source(path, fs) as source:
        source.read_options = options
        source.prefetch(ranges)
        for offset, length in ranges:
            assert source.read(offset, length) == data[offset:offset + length]
        assert source.stats.requests == fs.calls == 40
    assert fs.max_in_flight == 3


def test_read_ahead_stays_within_its_bound_and_consumed_blocks_are_dropped():
    fetched: list[int] = []
    held: list[int] = []
    data = random.Random(1).randbytes(10_000)
    made = threading.Event()

    def fetch(offset: int, length: int) -> bytes:
        made.wait()
        fetched.append(offset)
        held.append(plan.held_bytes)
        return data[offset:offset + length]

    ranges = [(i * 1000, 1000) for i in range(10)]
    plan = ReadPlan(fetch, ranges, ReadOptions(hole_limit=0, range_cap=1000, max_concurrency=8,
                                                max_ahead_bytes=3000))
    made.set()
    try:
        deadline = time.monotonic() + 5
        while len(fetched) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)
        assert sorted(fetched) == [0, 1000, 2000]  # nothing read yet: three blocks ahead, no more
        for offset, length in ranges:
            assert bytes(plan.read(offset, length)) == data[offset:offset + length]
            assert plan.held_bytes <= 3000
        assert sorted(fetched) == [o for o, _ in ranges]
        assert max(held) <= 3000
        assert plan.held_bytes == 0
        assert plan.read(0, 10) is None  # read once, dropped: the caller reads it again
    finally:
        plan.close()


def test_a_block_is_kept_until_every_planned_range_in_it_was_read():
    fs = CountingMemoryFS()
    path, data = _file(fs, 5_000)
    with open_source(path, fs) as source:
        source.prefetch([(0, 100), (200, 100), (400, 100)])  # one request (holes under 8 KiB)
        assert source.read(200, 100) == data[200:300]
        assert bytes(source.read_view(0, 50)) == data[:50]
        assert bytes(source.read_view(50, 50)) == data[50:100]
        assert source.stats.requests == 1
        assert source.read(400, 100) == data[400:500]  # the last planned bytes: the block goes
        assert source._plan.held_bytes == 0
        assert source.read(0, 100) == data[:100]
        assert source.stats.requests == 2


@pytest.mark.parametrize("seed", range(5))
def test_a_block_of_many_planned_ranges_goes_exactly_when_their_last_byte_is_read(seed):
    """Overlapping, touching and separate ranges in one block, read in random pieces and order:
    held while any planned byte is unread, dropped on the read of the last one."""
    rng = random.Random(seed)
    data = rng.randbytes(20_000)
    ranges = [(o, rng.randrange(1, 1000)) for o in rng.sample(range(19_000), 60)]  # any order
    plan = ReadPlan(lambda o, n: data[o:o + n], ranges, ReadOptions(hole_limit=20_000, range_cap=20_000))
    try:
        assert len(plan.requests) == 1
        unread = {b for o, n in ranges for b in range(o, o + n)}
        reads = [(o + cut, n - cut) for o, n in ranges for cut in {0, n // 2}]
        rng.shuffle(reads)
        for offset, length in reads:
            view = plan.read(offset, length)
            if not unread:  # dropped: the caller reads it again
                assert view is None
                continue
            assert view is not None and bytes(view) == data[offset:offset + length]
            unread -= set(range(offset, offset + length))
            assert (plan.held_bytes == 0) == (not unread)
        assert not unread
    finally:
        plan.close()


def test_dropping_the_blocks_before_an_offset_frees_them_read_or_not():
    fs = CountingMemoryFS()
    path, data = _file(fs, 100_000)
    options = ReadOptions(hole_limit=0, range_cap=10_000, max_ahead_bytes=20_000)
    with open_source(path, fs) as source:
        source.read_options = options
        source.prefetch([(0, 10_000), (10_000, 10_000), (20_000, 10_000), (30_000, 10_000)])
        assert source.read(0, 100) == data[:100]  # partly read: the block stays held
        assert source._plan.held_bytes == 20_000  # and the read-ahead is full
        source.release_prefetched_before(10_000)
        assert source._plan.held_bytes == 20_000  # the next block was started in its place
        assert source.read(20_000, 100) == data[20_000:20_100]
        source.release_prefetched_before(25_000)  # a block ending past the offset stays
        assert source._plan.held_bytes == 20_000  # [20_000, 30_000) and the last block
        assert source.read(20_100, 100) == data[20_100:20_200]
        assert source.read(30_000, 100) == data[30_000:30_100]
        assert source.stats.requests == 4
        assert source.read(0, 100) == data[:100]  # dropped: read again
        assert source.stats.requests == 5


def test_bytes_counted_as_read_free_their_block_or_spare_its_fetch():
    fs = CountingMemoryFS()
    path, data = _file(fs, 100_000)
    options = ReadOptions(hole_limit=0, range_cap=10_000, max_ahead_bytes=10_000)
    with open_source(path, fs) as source:
        source.read_options = options
        source.prefetch([(0, 6_000), (6_000, 4_000), (10_000, 10_000), (20_000, 10_000)])
        assert source.read(0, 100) == data[:100]  # a header of the first range, its body unread
        source.release_prefetched(0, 6_000)
        assert source._plan.held_bytes == 10_000  # [6_000, 10_000) is still planned in the block
        source.release_prefetched(6_000, 4_000)
        assert source._plan.held_bytes == 10_000  # dropped, and the next block started instead
        source.release_prefetched(20_000, 10_000)  # never needed: never fetched
        assert source.read(10_000, 10_000) == data[10_000:20_000]
        assert source._plan.held_bytes == 0 and source.stats.requests == 2


def test_the_kept_tail_serves_reads_of_the_end_and_of_a_planned_range_running_into_it():
    fs = CountingMemoryFS()
    path, data = _file(fs, 100_000)
    with open_source(path, fs) as source:
        source.read_options = ReadOptions(hole_limit=0, range_cap=10_000, max_ahead_bytes=20_000)
        source.keep_tail(90_000, data[90_000:])
        source.prefetch([(80_000, 15_000)])  # clipped where the tail begins
        assert source.read(85_000, 10_000) == data[85_000:95_000]
        assert source.read(99_000, 5_000) == data[99_000:]
        assert source.stats.ranges == [(80_000, 10_000, "data")]


def test_a_remote_footer_is_one_read_with_the_index_blocks_and_a_small_file_one_with_its_head(tmp_path):
    fs = CountingMemoryFS()
    local = tmp_path / "wide.parquet"
    columns = {f"c{i:03d}": np.arange(2000, dtype=np.int64) * i for i in range(150)}
    pq.write_table(pa.table(columns), local, row_group_size=500, write_page_index=True)
    fs.pipe_file("/wide.parquet", local.read_bytes())
    with open_source("/wide.parquet", fs) as source:
        footer = read_footer(source)
        assert source.size - footer.footer_start > 64 << 10  # longer than a local tail read
        assert [r[1] for r in source.stats.ranges] == [4, source.read_options.tail_bytes]
        blocks = [loc for row in footer.chunks for c in row for loc in (c.offset_index, c.column_index)]
        for offset, length in blocks:
            source.read(offset, length)
        assert source.stats.requests == 2  # the index blocks came with the tail
    with open_source("/wide.parquet", fs) as source:
        source.read_options = ReadOptions(tail_bytes=source.size)
        read_footer(source)
        assert source.stats.ranges == [(0, source.size, "footer")]


def test_prefetch_is_a_no_op_on_a_local_file(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 1000)
    with open_source(str(path)) as source:
        source.prefetch([(0, 1000)])
        assert source._plan is None and source.stats.requests == 0
        assert source.read(0, 10) == b"x" * 10
        assert source.stats.requests == 1


# ---------------------------------------------------------------- errors


def test_error_mid_batch_is_the_storage_error_of_a_direct_read():
    fs = CountingMemoryFS(fail_at=range(3000, 4000))
    path, data = _file(fs, 10_000)
    ranges = [(i * 1000, 1000) for i in range(10)]
    with open_source(path, fs) as source:
        with pytest.raises(StorageError) as direct:
            source.read(3000, 1000)
        source.read_options = ReadOptions(hole_limit=0, range_cap=1000, max_concurrency=4)
        source.prefetch(ranges)
        for offset, length in ranges[:3]:
            assert source.read(offset, length) == data[offset:offset + length]
        with pytest.raises(StorageError) as planned:
            source.read_view(3200, 100)
    assert planned.value.path == direct.value.path == path
    assert planned.value.offset == 3200 and direct.value.offset == 3000
    assert planned.value.reason == direct.value.reason == "read failed: OSError: [Errno 5] Input/output error"


# ---------------------------------------------------------------- served bytes = direct reads


@pytest.mark.parametrize("seed", range(30))
def test_random_range_sets_serve_the_bytes_of_direct_reads(seed):
    rng = random.Random(seed)
    fs = CountingMemoryFS()
    size = rng.randrange(1, 50_000)
    path, data = _file(fs, size, seed)
    ranges = []
    for _ in range(rng.randrange(0, 40)):
        offset = rng.randrange(0, size)
        ranges.append((offset, rng.randrange(0, min(size - offset, 3000) + 1)))
    cap = rng.choice([1, 100, 1000, 10_000])
    options = ReadOptions(hole_limit=rng.choice([0, 10, 500, 8192]), range_cap=cap,
                          max_concurrency=rng.randrange(1, 9),
                          max_ahead_bytes=cap * rng.choice([1, 2, 5]))
    direct = set()
    with open_source(path, fs) as source:
        source.read_options = options
        source.prefetch(ranges)
        reads = list(ranges)
        rng.shuffle(reads)
        for offset, length in reads:
            # a planned range, or a part of one, in any order; some reads overrun the file
            if length and rng.random() < 0.5:
                start = rng.randrange(offset, offset + length)
                offset, length = start, rng.randrange(0, offset + length - start + 1)
            extra = rng.choice([0, 0, 0, 5000])
            assert source.read(offset, length + extra) == data[offset:offset + length + extra]
            assert bytes(source.read_view(offset, length)) == data[offset:offset + length]
            direct |= {(offset, min(length + extra, size - offset)), (offset, min(length, size - offset))}
        source.release_prefetch()
    merged = set(merge_ranges(ranges, options.hole_limit, options.range_cap))
    # every request was a merged range of the plan or a read the plan could not serve
    assert {(o, n) for o, n, _ in source.stats.ranges} <= merged | direct


def test_a_read_across_adjacent_requests_joins_them():
    fs = CountingMemoryFS()
    path, data = _file(fs, 1000)
    with open_source(path, fs) as source:
        source.read_options = ReadOptions(hole_limit=0, range_cap=100, max_ahead_bytes=300)
        source.prefetch([(0, 100), (100, 100), (200, 100)])
        assert bytes(source.read_view(50, 200)) == data[50:250]
        assert source.read(0, 50) + source.read(250, 50) == data[:50] + data[250:300]
        assert sorted((o, n) for o, n, _ in source.stats.ranges) == [(0, 100), (100, 100), (200, 100)]


# ---------------------------------------------------------------- S3, through the counting proxy


def test_prefetch_on_s3_reads_a_row_group_in_few_gets(s3_server, s3_bucket, tmp_path):
    local = tmp_path / "wide.parquet"
    pq.write_table(wide_table(2_000), local, row_group_size=500)
    data = local.read_bytes()
    s3h.boto3_client(s3_server).put_object(Bucket=s3_bucket, Key="wide.parquet", Body=data)
    with FaultProxy(s3_server) as proxy:
        fs = s3h.make_s3fs(proxy.endpoint)
        with open_source(f"{s3_bucket}/wide.parquet", fs) as source:
            # a footer-sized tail: the kept tail would otherwise serve the last row groups
            source.read_options = ReadOptions(tail_bytes=1 << 10)
            footer = read_footer(source)
            proxy.reset()
            for row in footer.chunks:
                spans = [(c.start, c.total_compressed_size) for c in row]
                source.prefetch(spans)
                for offset, length in spans:
                    assert bytes(source.read_view(offset, length)) == data[offset:offset + length]
        gets = proxy.stats.count("GetObject")
        assert gets == len(footer.chunks) == 4  # one merged request per row group
        assert proxy.stats.by_operation() == {"GetObject": gets}
        assert proxy.stats.bytes_returned("GetObject") == sum(
            max(c.start + c.total_compressed_size for c in row) - min(c.start for c in row)
            for row in footer.chunks)


def test_exact_retrofit_on_s3_reads_the_row_groups_in_merged_gets(s3_server, s3_bucket, tmp_path):
    import numpy as np
    import pyarrow as pa

    import pageindex

    local = tmp_path / "many.parquet"
    rng = np.random.default_rng(5)
    pq.write_table(pa.table({f"c{i}": rng.integers(0, 1 << 40, 2_000) for i in range(60)}), local,
                   row_group_size=500, write_page_index=False)
    s3h.boto3_client(s3_server).put_object(Bucket=s3_bucket, Key="many.parquet", Body=local.read_bytes())
    pageindex.retrofit(str(local), str(tmp_path / "expected.parquet"))
    with FaultProxy(s3_server) as proxy:
        with open_source(f"{s3_bucket}/many.parquet", s3h.make_s3fs(proxy.endpoint)) as source:
            read_footer(source)
        footer_gets = proxy.stats.count("GetObject")
        proxy.reset()
        result = pageindex.retrofit(f"{s3_bucket}/many.parquet", filesystem=s3h.make_s3fs(proxy.endpoint),
                                    dry_run=True)
        # one plan for the file: its four contiguous row groups (1 MiB) in one GET; was one per chunk: 240
        assert proxy.stats.count("GetObject") == footer_gets + 1
        assert result.status == "dry_run" and len(result.chunks) == 240
        pageindex.retrofit(f"{s3_bucket}/many.parquet", str(tmp_path / "out.parquet"),
                           filesystem=s3h.make_s3fs(proxy.endpoint), dst_filesystem=LocalFileSystem())
    assert (tmp_path / "out.parquet").read_bytes() == (tmp_path / "expected.parquet").read_bytes()
