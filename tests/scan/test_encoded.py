"""The encoded-page path (scan/encoded.py, its kernels) against Arrow's decode, chunk by chunk:
generated edge cases and the corpus must give identical ColumnIndex and OffsetIndex bytes."""
from __future__ import annotations

import decimal
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex.errors import PageIndexError
from pageindex.format.column_order import Kind, Order
from pageindex.format.footer import read_footer
from pageindex.io.storage import open_source
from pageindex.scan import encoded
from pageindex.scan.page_walk import walk_chunk
from tests.helpers.both_paths import indexes, same_on_both_paths, scan_kernel
from tests.helpers.corpus import corpus_path, load_catalog
from tests.helpers.writers import pyarrow_each


ROWS = 3000


def _with_nulls(values: list, every: int, rng: np.random.Generator) -> list:
    """Values with a null at every `every`-th row and a stretch of nulls (an all-null page)."""
    out = [None if i % every == 0 else v for i, v in enumerate(values)]
    out[1000:1400] = [None] * 400
    return out


def _table(rng: np.random.Generator) -> pa.Table:
    i32 = rng.integers(-2**31, 2**31, ROWS, dtype=np.int64).astype(np.int32)
    i32[:2] = [np.iinfo(np.int32).min, np.iinfo(np.int32).max]
    i64 = rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, ROWS, dtype=np.int64)
    i64[5:7] = [np.iinfo(np.int64).min, np.iinfo(np.int64).max]
    u64 = rng.integers(0, np.iinfo(np.uint64).max, ROWS, dtype=np.uint64)
    u64[3] = np.iinfo(np.uint64).max  # negative as a signed number: the order must be unsigned
    small = rng.integers(-5, 5, ROWS)  # few distinct values: dictionary pages
    zeros = rng.choice([-0.0, 0.0, 1.5, -2.5], ROWS)
    doubles = rng.normal(size=ROWS)
    doubles[7:9] = [math.inf, -math.inf]
    words = [("w%03d" % v) * (v % 30) for v in rng.integers(0, 400, ROWS)]
    long = [bytes([0xFF] * 70) if i % 97 == 0 else ("é" * 40 + str(i)).encode() for i in range(ROWS)]
    return pa.table({
        "i32": pa.array(i32),
        "i32_opt": pa.array(_with_nulls(i32.tolist(), 7, rng), pa.int32()),
        "i64": pa.array(i64),
        "u32": pa.array(rng.integers(0, 2**32, ROWS, dtype=np.uint64).astype(np.uint32)),
        "u64_opt": pa.array(_with_nulls(u64.tolist(), 5, rng), pa.uint64()),
        "u8": pa.array(rng.integers(0, 256, ROWS).astype(np.uint8)),
        "small": pa.array(_with_nulls(small.tolist(), 3, rng), pa.int64()),
        "f32": pa.array(rng.normal(size=ROWS).astype(np.float32)),
        "zeros": pa.array(_with_nulls(zeros.tolist(), 11, rng), pa.float64()),
        "f64": pa.array(doubles),
        "date": pa.array(rng.integers(-20000, 20000, ROWS).astype(np.int32), pa.int32()).cast(pa.date32()),
        "ts": pa.array(rng.integers(-2**50, 2**50, ROWS), pa.int64()).cast(pa.timestamp("us", "UTC")),
        "dec9": pa.array([decimal.Decimal(int(v)).scaleb(-2) for v in rng.integers(-10**8, 10**8, ROWS)],
                         pa.decimal128(9, 2)),
        "dec18": pa.array(_with_nulls([decimal.Decimal(int(v)).scaleb(-4) for v in i64 // 1000], 13, rng),
                          pa.decimal128(18, 4)),
        "words": pa.array(_with_nulls(words, 9, rng), pa.string()),
        "long": pa.array(long, pa.binary()),
        "few": pa.array(_with_nulls([("k%02d" % v) * (1 + v % 3) for v in rng.integers(0, 20, ROWS)], 4, rng)),
        "all_null": pa.array([None] * ROWS, pa.int64()),
    })


WRITES = {
    "v1-dict-snappy": dict(data_page_version="1.0", compression="snappy"),
    "v2-dict-zstd": dict(data_page_version="2.0", compression="zstd"),
    "v1-plain-none": dict(data_page_version="1.0", use_dictionary=False, compression="none"),
    "v2-plain-gzip": dict(data_page_version="2.0", use_dictionary=False, compression="gzip"),
    "v1-brotli": dict(data_page_version="1.0", compression="brotli"),
    "v2-lz4": dict(data_page_version="2.0", compression="lz4"),
    # A dictionary page limit this small makes the writer fall back to PLAIN pages mid-chunk.
    "v1-fallback": dict(data_page_version="1.0", dictionary_pagesize_limit=512, compression="snappy"),
    "v2-fallback": dict(data_page_version="2.0", dictionary_pagesize_limit=512, compression="none"),
}


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("encoded")
    table = _table(np.random.default_rng(40))
    return pyarrow_each(directory, table, WRITES, row_group_size=2000, data_page_size=1024, write_batch_size=100,
                        write_page_index=False, store_decimal_as_integer=True)



@pytest.mark.parametrize("name", sorted(WRITES))
def test_generated_same_index_bytes(written, name):
    both = same_on_both_paths(written[name])
    # Every flat column of a supported type was bounded by the kernels, not handed back to Arrow.
    assert both.planned == both.read_encoded == 2 * 18


@pytest.mark.parametrize("name", ["v1-dict-snappy", "v2-plain-gzip", "v1-fallback"])
def test_generated_same_bytes_when_truncating(written, name):
    same_on_both_paths(written[name], truncate_length=5)


@pytest.mark.parametrize("rank_below", [0, 10**9])
@pytest.mark.parametrize("name", ["v1-dict-snappy", "v2-dict-zstd", "v1-fallback"])
def test_byte_dictionaries_ranked_or_compared(written, name, rank_below, monkeypatch):
    """Every byte-array dictionary ranked once (0), or none (their entries compared as bytes)."""
    monkeypatch.setattr(encoded, "RANK_BELOW", rank_below)
    same_on_both_paths(written[name])
    same_on_both_paths(written[name], truncate_length=5)


def test_pages_really_are_mixed(written):
    """The fallback files hold dictionary and PLAIN pages in one chunk."""
    for name in ("v1-fallback", "v2-fallback"):
        source = open_source(str(written[name]))
        footer = read_footer(source)
        chunk = next(c for c in footer.chunks[0] if c.leaf.dotted == "i64")
        kinds = {p.value_encoding for p in walk_chunk(source, chunk, footer.footer_start).pages}
        assert len(kinds) == 2, kinds
        source.close()


def test_nan_refused_on_both_paths(tmp_path):
    path = tmp_path / "nan.parquet"
    values = np.arange(5000, dtype=np.float64)
    values[4321] = math.nan
    for dictionary in (False, True):
        pq.write_table(pa.table({"f": values, "g": np.tile([1.0, math.nan], 2500)}), path,
                       use_dictionary=dictionary, data_page_size=1024, write_page_index=False)
        both = same_on_both_paths(path)
        assert both.read_encoded == 2
        assert [r.column_index for _, _, r in both.kernels] == [False, False]
        assert "NaN" in both.kernels[0][2].reason


def test_without_the_kernels_nothing_is_read_encoded(written):
    """PAGEINDEX_SCAN_KERNEL=arrow: the plan sends no chunk to the kernels (the path numba's
    absence takes), and the output is the same."""
    with scan_kernel(encoded.ARROW):
        assert encoded.kernels() is None
        source = open_source(str(written["v1-dict-snappy"]))
        footer = read_footer(source)
        chunk = footer.chunks[0][0]
        assert not encoded.readable(chunk, Order(Kind.SIGNED))
        source.close()
    assert indexes(str(written["v1-dict-snappy"]), encoded.ARROW) == indexes(str(written["v1-dict-snappy"]),
                                                                          encoded.COMPILED)


def test_bad_choice_is_refused():
    with scan_kernel("fortran"), pytest.raises(ValueError, match="PAGEINDEX_SCAN_KERNEL"):
        encoded.kernels()


def _outcome(path: Path, choice: str):
    try:
        return indexes(str(path), choice)
    except PageIndexError as err:
        return f"{type(err).__name__}: {err}"


_CORPUS = sorted({row["path"] for row in load_catalog() if row["path"].endswith(".parquet")})


@pytest.mark.slow
@pytest.mark.parametrize("relpath", _CORPUS)
def test_corpus_same_index_bytes_or_same_error(relpath):
    path = corpus_path(relpath)
    assert _outcome(path, encoded.COMPILED) == _outcome(path, encoded.ARROW)


def test_leaves_of_structs(tmp_path):
    """A required leaf of an optional struct (its one definition level is the struct's) and an
    optional leaf of a required struct: flat leaves, bounded by the kernels, same bytes."""
    rng = np.random.default_rng(3)
    inner = pa.struct([pa.field("req", pa.int64(), nullable=False), pa.field("opt", pa.string())])
    values = [None if i % 5 == 0 else {"req": int(v), "opt": None if v % 3 else str(v)}
              for i, v in enumerate(rng.integers(-1000, 1000, 4000))]
    outer = pa.struct([pa.field("x", pa.float32())])
    table = pa.table({"s": pa.array(values, inner),
                      "t": pa.array([{"x": None if i % 7 == 0 else float(i)} for i in range(4000)], outer)},
                     schema=pa.schema([pa.field("s", inner), pa.field("t", outer, nullable=False)]))
    path = tmp_path / "structs.parquet"
    pq.write_table(table, path, data_page_size=1024, write_page_index=False)
    both = same_on_both_paths(path)
    assert (both.planned, both.read_encoded) == (3, 3)  # s.req and t.x; s.opt (two levels) as a nested leaf


ZIPPED_RUN = """
import sys
import pageindex
from pageindex.scan.compiled import path
assert pageindex.__file__.startswith(sys.argv[2]), pageindex.__file__  # imported from the zip
first = pageindex.retrofit(sys.argv[1], bloom_filter="id")
second = pageindex.retrofit(sys.argv[3], bloom_filter="id")
print(first.status, second.status, path())
"""


@pytest.mark.slow
def test_without_the_compiled_kernels_the_fallback_gives_the_same_bytes_and_says_so_once(tmp_path):
    """pageindex shipped as a zip of its sources (a zip cannot hold loadable compiled modules):
    two files are indexed with their bloom filters by Arrow and numpy, with the bytes the compiled
    path writes, and the process says once for the scan and once for the filters why."""
    import os
    import subprocess
    import sys
    import zipfile

    from tests.helpers.paths import REPO_ROOT

    archive = tmp_path / "pageindex.zip"
    with zipfile.ZipFile(archive, "w") as out:
        for source in sorted((REPO_ROOT / "pageindex").rglob("*.py")):
            out.write(source, source.relative_to(REPO_ROOT).as_posix())
    table = pa.table({"id": pa.array(range(50_000), pa.int64()), "v": pa.array(range(50_000, 0, -1), pa.int64())})
    zipped = [tmp_path / "zipped-1.parquet", tmp_path / "zipped-2.parquet"]
    reference = tmp_path / "reference.parquet"
    for path in (*zipped, reference):
        pq.write_table(table, path, write_page_index=False, data_page_size=4096)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAGEINDEX_")}
    env.update(PYTHONPATH=str(archive))
    proc = subprocess.run([sys.executable, "-c", ZIPPED_RUN, str(zipped[0]), str(archive), str(zipped[1])],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["indexed", "indexed", "arrow"], proc.stdout + proc.stderr[-3000:]
    said = proc.stderr.splitlines()
    assert sum("the compiled kernels do not load" in line for line in said) == 1, proc.stderr
    assert sum("the compiled bloom kernel does not load" in line for line in said) == 1, proc.stderr
    with scan_kernel("compiled"):
        import pageindex

        assert pageindex.retrofit(str(reference), bloom_filter="id").status == "indexed"
    assert zipped[0].read_bytes() == reference.read_bytes() == zipped[1].read_bytes()
