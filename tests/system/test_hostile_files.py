"""Hostile files (tests.helpers.hostile): decompression bombs of every codec pageindex reads,
lying sizes, huge counts, overlapping chunks, deep schemas. Each is refused with one line naming
the file and the page, the file unchanged, or indexed when it stays within --max-page-bytes.

The runs are the CLI in a child, as users run it; their memory and CPU are measured by
`python -m bench.hostile` (bench/README.md), not asserted here.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from tests.helpers import hostile as h

pytestmark = pytest.mark.slow  # a child process per file

# Generous: a refusal takes about a second of CPU, an indexed page at the limit a few.
TIMEOUT = 300
LIMIT = 128 * h.MiB


def _refusal(tmp_path: Path, build: Callable[[], bytes], *args: str) -> str:
    """The one error line of a retrofit in place refused with exit code 3, the file unchanged."""
    path = tmp_path / "hostile.parquet"
    data = build()
    path.write_bytes(data)
    run = h.measured(path, *args, timeout=TIMEOUT)
    assert run.returncode == 3, run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"pageindex: error: {path}: failed: "), run.stderr
    assert path.read_bytes() == data
    return lines[0].split(": failed: ", 1)[1]


def _indexed(tmp_path: Path, build: Callable[[], bytes]) -> None:
    path = tmp_path / "hostile.parquet"
    data = build()
    path.write_bytes(data)
    run = h.measured(path, timeout=TIMEOUT)
    assert run.returncode == 0 and run.stdout.startswith(f"{path}: indexed"), run.stderr
    assert path.read_bytes()[:len(data)] == data  # the original kept byte for byte, the index after it


def _too_big(size: int) -> str:
    return (f"UnsupportedFileError: row group 0, column s, byte 4: page of {size} bytes, above the "
            f"limit of {LIMIT} (--max-page-bytes)")


@pytest.mark.parametrize("build, size", [
    (lambda: h.zstd_bomb(h.GiB), h.GiB),  # 33 KB on disk
    (lambda: h.snappy_bomb(256 * h.MiB), 256 * h.MiB),
    (lambda: h.gzip_bomb(512 * h.MiB), 512 * h.MiB),
    (lambda: h.brotli_bomb(512 * h.MiB), 512 * h.MiB),
    (lambda: h.lz4_raw_bomb(h.GiB), h.GiB),
    (lambda: h.lz4_hadoop_bomb(h.GiB), h.GiB),
], ids=["zstd", "snappy", "gzip", "brotli", "lz4_raw", "lz4"])
def test_a_page_above_the_limit_is_refused_before_it_is_decompressed(tmp_path, build, size):
    assert _refusal(tmp_path, build) == _too_big(size)


def test_the_limit_is_an_option(tmp_path):
    """A lower limit refuses a page the default reads; a higher one reads a page the default refuses."""
    assert _refusal(tmp_path, lambda: h.zstd_bomb(2 * h.MiB), "--max-page-bytes", "1m") == (
        f"UnsupportedFileError: row group 0, column s, byte 4: page of {2 * h.MiB} bytes, above the "
        f"limit of {h.MiB} (--max-page-bytes)")
    path = tmp_path / "big.parquet"
    path.write_bytes(h.zstd_bomb(160 * h.MiB))
    assert h.measured(path, "--max-page-bytes", "256m", timeout=TIMEOUT).returncode == 0


@pytest.mark.parametrize("build", [lambda: h.zstd_bomb(LIMIT), lambda: h.snappy_bomb(LIMIT)], ids=["zstd", "snappy"])
def test_a_page_at_the_limit_is_indexed(tmp_path, build):
    _indexed(tmp_path, build)


def test_a_size_the_bytes_cannot_hold_is_refused(tmp_path):
    """20 snappy bytes cannot become 100 MiB (a 3-byte copy yields 64 bytes at most)."""
    assert _refusal(tmp_path, lambda: h.lying_snappy(100 * h.MiB)) == (
        f"MalformedFileError: row group 0, column s, byte 4: page claims {100 * h.MiB} bytes from 22 "
        "SNAPPY bytes, more than the codec can produce from them")


def test_a_value_count_above_the_limit_is_refused(tmp_path):
    """2^30 nulls in one 10-byte run of levels: 2 GiB of decoded levels."""
    assert _refusal(tmp_path, lambda: h.null_page(1 << 30)) == (
        f"UnsupportedFileError: row group 0, column n, byte 4: page of {1 << 30} values, above the limit "
        f"of {LIMIT // 4} ({LIMIT} bytes at 4 a value, --max-page-bytes)")


def test_a_value_count_at_the_limit_is_indexed(tmp_path):
    _indexed(tmp_path, lambda: h.null_page(LIMIT // 4))


def test_a_dictionary_claiming_more_entries_than_its_bytes_hold_is_refused(tmp_path):
    assert _refusal(tmp_path, lambda: h.huge_dictionary(1 << 24)) == (
        "MalformedFileError: row group 0, column i, byte 4: dictionary page claims 16777216 entries, "
        "more than its 8 bytes hold")


def test_chunks_sharing_their_pages_are_refused_at_once(tmp_path):
    """5000 row groups whose chunks all start at one page and claim 2^62 values (an 800 KB file):
    walking each to the footer would read 10^8 page headers."""
    assert _refusal(tmp_path, lambda: h.claimed_values(5000, 20000)) == (
        "MalformedFileError: row group 0, column s, byte 4: chunk starts at 4, where another chunk starts")


def test_a_deep_schema_is_indexed(tmp_path):
    _indexed(tmp_path, lambda: h.deep_schema(60))
