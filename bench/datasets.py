"""Benchmark datasets: legacy-style Parquet files written by pyarrow without a page index.

Every dataset has a sort key `id` (0..N-1, sorted within the file, so row-group statistics already
order the row groups) and an unsorted int64 `u` (a bijective scramble of `id`, so a value known to
exist can be computed for point lookups). Files are cached under bench/data/, keyed by a hash of
their spec, so reruns reuse them.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import time
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

GEN_VERSION = 5  # bump when a generator changes: the spec hash changes and files are rebuilt
DATA_DIR = Path(__file__).resolve().parent / "data"
MiB = 1 << 20

# u = (id * SCRAMBLE) mod 2**40: a bijection on [0, 2**40), far from sorted.
U_MOD = 1 << 40
SCRAMBLE = 0x9E3779B97F4A7C15 & (U_MOD - 1) | 1

ALPHABET = np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_", dtype=np.uint8)
WORDS = [f"{a}{b}" for a in ("north", "south", "east", "west", "central", "upper", "lower", "new")
         for b in ("land", "field", "ton", "burg", "ville", "port", "mouth", "stead", "ford", "wick",
                   "ham", "bury", "shire", "dale", "holm", "by", "thorpe", "worth", "ley", "minster",
                   "gate", "bridge", "castle", "haven", "cliff")]  # 200 distinct


@dataclass(frozen=True)
class Kind:
    name: str
    description: str
    compression: str
    use_dictionary: bool
    data_page_version: str
    payload: str  # a third column the queries return
    sample_rows: int = 100_000


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("numeric", "int64/double/timestamp columns, snappy, v1 pages", "snappy", True, "1.0", "x"),
    Kind("strings_low", "low-cardinality strings (dictionary encoded), snappy", "snappy", True, "1.0", "country"),
    Kind("strings_high", "high-cardinality strings, PLAIN (use_dictionary=False), snappy", "snappy", False, "1.0", "name"),
    Kind("nested", "list<int64>, list<string>, struct columns, snappy", "snappy", True, "1.0", "tags"),
    Kind("v2_zstd", "numeric + strings, data page v2, zstd", "zstd", True, "2.0", "s"),
    Kind("wide", "500 columns (int64/double/low-card strings), snappy", "snappy", True, "1.0", "c004", 10_000),
)}


def _scramble(ids: np.ndarray) -> np.ndarray:
    return ((ids.astype(np.uint64) * np.uint64(SCRAMBLE)) & np.uint64(U_MOD - 1)).astype(np.int64)


def u_of(row: int) -> int:
    """The unsorted column's value in row `row`."""
    return (row * SCRAMBLE) % U_MOD


def random_strings(rng: np.random.Generator, n: int, lo: int, hi: int) -> pa.Array:
    """n random strings of lo..hi characters, built from buffers (no Python objects)."""
    lengths = rng.integers(lo, hi + 1, n, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = ALPHABET[rng.integers(0, len(ALPHABET), int(offsets[-1]), dtype=np.int32)]
    typ = pa.string() if offsets[-1] < (1 << 31) - 1 else pa.large_string()
    off = offsets.astype(np.int32) if typ == pa.string() else offsets
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(off), pa.py_buffer(data.tobytes())])


def _lists(rng: np.random.Generator, n: int, values: pa.Array, max_len: int) -> pa.Array:
    lengths = rng.integers(0, max_len + 1, n, dtype=np.int32)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), values.slice(0, int(offsets[-1])))


def _batch(kind: str, rng: np.random.Generator, start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    cols: dict[str, pa.Array] = {"id": pa.array(ids), "u": pa.array(_scramble(ids))}
    words = pa.array(WORDS)
    if kind in ("numeric", "v2_zstd"):
        cols["a"] = pa.array(rng.integers(0, 10**9, n))
        cols["x"] = pa.array(rng.standard_normal(n))
        cols["y"] = pa.array(np.round(rng.random(n) * 1000, 2))
        ts = 1_700_000_000_000_000 + ids * 1_000_000 + rng.integers(0, 999_999, n)
        cols["ts"] = pa.array(ts, type=pa.timestamp("us", tz="UTC"))
        cols["q"] = pa.array(rng.integers(0, 100, n).astype(np.int32))
        if kind == "v2_zstd":
            cols["s"] = random_strings(rng, n, 8, 24)
            cols["city"] = words.take(pa.array(rng.integers(0, len(WORDS), n)))
    elif kind == "strings_low":
        cols["country"] = words.take(pa.array(rng.zipf(1.3, n) % len(WORDS)))
        cols["status"] = pa.array(["active", "pending", "closed", "failed", "unknown"]).take(
            pa.array(rng.integers(0, 5, n)))
        cats = pa.array([f"category-{i:05d}" for i in range(5000)])
        cols["category"] = cats.take(pa.array(rng.integers(0, 5000, n)))
        cols["score"] = pa.array(rng.integers(0, 100, n).astype(np.int32))
    elif kind == "strings_high":
        cols["name"] = random_strings(rng, n, 8, 32)
        cols["email"] = random_strings(rng, n, 12, 40)
        cols["text"] = random_strings(rng, n, 40, 160)
    elif kind == "nested":
        cols["tags"] = _lists(rng, n, words.take(pa.array(rng.integers(0, len(WORDS), 5 * n))), 5)
        cols["vals"] = _lists(rng, n, pa.array(rng.integers(0, 10**6, 10 * n)), 10)
        cols["point"] = pa.StructArray.from_arrays(
            [pa.array(rng.standard_normal(n)), pa.array(rng.standard_normal(n))], ["lat", "lon"])
    elif kind == "wide":
        for i in range(2, 500):
            name = f"c{i:03d}"
            if i % 5 in (0, 1):
                cols[name] = pa.array(rng.integers(0, 10**6, n))
            elif i % 5 in (2, 3):
                cols[name] = pa.array(np.round(rng.random(n) * 100, 3))
            else:
                cols[name] = words.take(pa.array(rng.integers(0, 50, n)))
    else:
        raise ValueError(kind)
    return pa.table(cols)


def write_options(kind: Kind) -> dict:
    # Pages end at 1 MiB only, as legacy writers did: pyarrow >= 15 also caps pages at 20,000
    # rows by default (max_rows_per_page), which older writers never did.
    return dict(compression=kind.compression, use_dictionary=kind.use_dictionary,
                data_page_version=kind.data_page_version, data_page_size=MiB,
                max_rows_per_page=1 << 30, write_statistics=True, write_page_index=False)


@dataclass(frozen=True)
class DatasetSpec:
    kind: str
    target_bytes: int
    row_group_bytes: int
    gen_version: int = GEN_VERSION

    @property
    def label(self) -> str:
        mb = self.target_bytes / MiB
        return f"{mb / 1024:.0f}GB" if mb >= 1000 else f"{mb:.0f}MB"

    def key(self) -> str:
        blob = json.dumps(asdict(self) | {"options": write_options(KINDS[self.kind]),
                                          "pyarrow": pa.__version__}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:10]


@dataclass
class Dataset:
    spec: DatasetSpec
    path: str
    rows: int
    row_groups: int
    size: int
    seconds_to_generate: float = 0.0

    @property
    def name(self) -> str:
        return f"{self.spec.kind}-{self.spec.label}"

    @property
    def kind(self) -> Kind:
        return KINDS[self.spec.kind]


def spec_for(kind: str, target_bytes: int) -> DatasetSpec:
    """Row groups of ~128 MiB scaled down for small files (about 6 per file, at least 1 MiB)."""
    rg = int(min(128 * MiB, max(MiB, target_bytes / 6)))
    return DatasetSpec(kind, int(target_bytes), rg)


def _bytes_per_row(kind: Kind, rows: int | None = None) -> float:
    rows = rows or kind.sample_rows
    t = _batch(kind.name, np.random.default_rng(12345), 0, rows)
    sink = io.BytesIO()
    pq.write_table(t, sink, row_group_size=rows, **write_options(kind))
    return sink.tell() / rows


def ensure(spec: DatasetSpec, log=print) -> Dataset:
    """The cached file for `spec`, generated on first use."""
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    base = DATA_DIR / f"{spec.kind}-{spec.label}-{spec.key()}"
    path, meta = base.with_suffix(".parquet"), base.with_suffix(".json")
    if path.exists() and meta.exists():
        info = json.loads(meta.read_text())
        return Dataset(spec, str(path), info["rows"], info["row_groups"], path.stat().st_size,
                       info.get("seconds", 0.0))
    for stale in DATA_DIR.glob(f"{spec.kind}-{spec.label}-*"):  # older specs of this dataset
        if not stale.name.startswith(base.name):
            stale.unlink()
    kind = KINDS[spec.kind]
    started = time.monotonic()
    # Calibrate on a sample of up to one row group (compression improves with size).
    bpr = _bytes_per_row(kind)
    bpr = _bytes_per_row(kind, max(kind.sample_rows, min(int(spec.row_group_bytes / bpr), 4 * kind.sample_rows)))
    rows = max(1000, int(spec.target_bytes / bpr))
    groups = max(1, round(spec.target_bytes / spec.row_group_bytes))
    rg_rows = -(-rows // groups)
    log(f"  generating {path.name}: {rows:,} rows, {rg_rows:,} rows per row group (~{bpr:.1f} B/row)")
    tmp = path.with_suffix(".tmp")
    rng = np.random.default_rng(zlib.crc32(spec.kind.encode()))
    writer = None
    groups = 0
    try:
        for start in range(0, rows, rg_rows):
            batch = _batch(spec.kind, rng, start, min(rg_rows, rows - start))
            if writer is None:
                writer = pq.ParquetWriter(str(tmp), batch.schema, **write_options(kind))
            writer.write_table(batch, row_group_size=len(batch))
            groups += 1
        writer.close()
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    seconds = time.monotonic() - started
    meta.write_text(json.dumps({"spec": asdict(spec), "rows": rows, "row_groups": groups,
                                "seconds": seconds}, indent=2))
    return Dataset(spec, str(path), rows, groups, path.stat().st_size, seconds)


def largest_chunk(path: str) -> tuple[int, str]:
    """(total_uncompressed_size, "column@rgN") of the file's largest column chunk: a proxy for
    the largest decoded chunk (decoded Arrow data can be larger, e.g. for dictionaries)."""
    md = pq.ParquetFile(path).metadata
    best = (0, "")
    for rg in range(md.num_row_groups):
        g = md.row_group(rg)
        for c in range(g.num_columns):
            cc = g.column(c)
            if cc.total_uncompressed_size > best[0]:
                best = (cc.total_uncompressed_size, f"{cc.path_in_schema}@rg{rg}")
    return best


def tiny_file(path: str) -> str:
    """A small file for warming engines up (class loading, JIT)."""
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        pq.write_table(_batch("numeric", np.random.default_rng(1), 0, 20_000), path)
    return path
