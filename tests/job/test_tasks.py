"""pageindex.job.tasks: byte-balanced packing of files into Spark tasks, and size parsing."""
from __future__ import annotations

import random
import time

import pytest

from pageindex.io.discovery import InputFile
from pageindex.job.tasks import pack, parse_size


def files(sizes: list[int]) -> list[InputFile]:
    return [InputFile(f"/d/part-{i:06d}.parquet", s, f"part-{i:06d}.parquet") for i, s in enumerate(sizes)]


def load(task: list[InputFile]) -> int:
    return sum(f.size for f in task)


def check_packing(fs: list[InputFile], target: int) -> list[list[InputFile]]:
    tasks = pack(fs, target)
    flat = [f for t in tasks for f in t]
    assert sorted(f.url for f in flat) == sorted(f.url for f in fs), "every file exactly once"
    assert all(t for t in tasks), "no empty task"
    for t in tasks:
        if len(t) > 1:
            assert load(t) <= target, "only a single file may exceed the target"
    # at most one task is at most half full (a new task opens only when nothing else fits)
    total = sum(f.size for f in fs)
    assert len(tasks) <= 2 * -(-total // target) + 1
    return tasks


def test_every_file_once_and_within_target():
    rng = random.Random(1)
    fs = files([rng.randint(1, 1000) for _ in range(2_000)])
    tasks = check_packing(fs, 10_000)
    assert len(tasks) < 110  # ~1,000,000 bytes in 10,000-byte tasks


def test_big_file_alone():
    fs = files([50, 5, 300, 5, 100, 40])
    tasks = check_packing(fs, 100)
    alone = [t for t in tasks if any(f.size >= 100 for f in t)]
    assert sorted(load(t) for t in alone) == [100, 300]
    assert all(len(t) == 1 for t in alone)


def test_balanced_by_bytes():
    # 2 cores, 20 equal files: two equal tasks
    tasks = check_packing(files([10] * 20), 100)
    assert [load(t) for t in tasks] == [100, 100]
    # mixed sizes: every task but the last opened is more than half full
    rng = random.Random(7)
    fs = files([rng.choice([1, 10, 100, 1000]) * rng.randint(1, 9) for _ in range(500)])
    tasks = check_packing(fs, 20_000)
    loads = sorted(load(t) for t in tasks)
    assert sum(1 for x in loads if x <= 10_000) <= 1


def test_deterministic():
    rng = random.Random(3)
    fs = files([rng.randint(1, 50) for _ in range(300)])  # many equal sizes: ties broken by URL
    want = [[f.url for f in t] for t in pack(fs, 200)]
    for seed in range(5):
        shuffled = fs[:]
        random.Random(seed).shuffle(shuffled)
        assert [[f.url for f in t] for t in pack(shuffled, 200)] == want


def test_empty_and_single():
    assert pack([], 100) == []
    (f,) = files([10**12])
    assert pack([f], 1) == [[f]]


def test_ten_thousand_small_files_fast():
    fs = files([1000 + (i * 7919) % 5000 for i in range(10_000)])
    started = time.perf_counter()
    tasks = pack(fs, 256 << 20)
    elapsed = time.perf_counter() - started
    assert elapsed < 0.5, elapsed
    assert sum(len(t) for t in tasks) == 10_000
    # spread over 2 cores the way the job does: target = ceil(total / 2); a greedy packing may
    # leave a last small task
    total = sum(f.size for f in fs)
    tasks = check_packing(fs, -(-total // 2))
    assert len(tasks) <= 3
    assert sorted(load(t) for t in tasks)[-2] >= 0.99 * total / 2


@pytest.mark.parametrize("text, value", [
    ("256m", 256 << 20), ("1g", 1 << 30), ("512k", 512 << 10), ("2t", 2 << 40),
    ("100", 100), (" 64M ", 64 << 20), ("1.5m", 3 << 19),
])
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "0", "-1m", "abc", "12q", "m"])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError):
        parse_size(text)
