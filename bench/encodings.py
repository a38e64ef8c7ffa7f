"""Bench files whose columns are in the other value encodings (DELTA_BINARY_PACKED, the two DELTA
byte-array encodings, BYTE_STREAM_SPLIT): one column a file, no dictionary, by kind name.

    python -m bench.scan --kinds enc_dbp_int64,enc_bss_double,...   (see ENCODED_KINDS)
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.datasets import DATA_DIR, MiB

PREFIX = "enc_"


@dataclass(frozen=True)
class EncodedKind:
    encoding: str
    data: str  # see _column
    bytes_per_value: float  # on disk, roughly: how many values make the asked size
    compression: str = "snappy"
    page_version: str = "1.0"


ENCODED_KINDS: dict[str, EncodedKind] = {
    "enc_dbp_int32": EncodedKind("DELTA_BINARY_PACKED", "int32", 2.6),
    "enc_dbp_int64": EncodedKind("DELTA_BINARY_PACKED", "int64_ts", 2.8),
    "enc_dbp_int64_v2_zstd": EncodedKind("DELTA_BINARY_PACKED", "int64_ts", 2.8, "zstd", "2.0"),
    "enc_dlba_urls": EncodedKind("DELTA_LENGTH_BYTE_ARRAY", "urls", 12.0),
    "enc_dlba_uuids": EncodedKind("DELTA_LENGTH_BYTE_ARRAY", "uuids", 25.0),
    "enc_dba_urls": EncodedKind("DELTA_BYTE_ARRAY", "urls", 5.0),
    "enc_dba_uuids": EncodedKind("DELTA_BYTE_ARRAY", "uuids", 25.0),
    "enc_bss_float": EncodedKind("BYTE_STREAM_SPLIT", "float", 3.8),
    "enc_bss_double": EncodedKind("BYTE_STREAM_SPLIT", "double", 7.5),
    "enc_bss_int32": EncodedKind("BYTE_STREAM_SPLIT", "int32", 3.0),
    "enc_bss_int64": EncodedKind("BYTE_STREAM_SPLIT", "int64_ts", 4.0),
}


def _column(data: str, rows: int, rng: np.random.Generator) -> pa.Array:
    """int32: uniform below 2**20; int64_ts: increasing timestamps (deltas below 2**21); float and
    double: normal; urls: sorted URLs sharing prefixes; uuids: random UUID text."""
    if data == "int32":
        return pa.array(rng.integers(0, 1 << 20, rows, dtype=np.int32))
    if data == "int64_ts":
        return pa.array(1_700_000_000_000_000 + np.cumsum(rng.integers(0, 1 << 21, rows)))
    if data == "float":
        return pa.array(rng.normal(0, 100, rows).astype(np.float32))
    if data == "double":
        return pa.array(rng.normal(0, 100, rows))
    if data == "uuids":
        hexd = np.frombuffer(b"0123456789abcdef", np.uint8)
        text = np.full((rows, 36), ord("-"), np.uint8)
        text[:, [i for i in range(36) if i not in (8, 13, 18, 23)]] = hexd[rng.integers(0, 16, (rows, 32))]
        return pa.Array.from_buffers(pa.string(), rows, [None, pa.py_buffer(np.arange(rows + 1, dtype=np.int32) * 36),
                                                         pa.py_buffer(text.tobytes())])
    hosts = [f"https://www.site{i:03d}.example.com/" for i in range(200)]
    paths = ["products/", "blog/posts/", "static/img/", "users/profile/", "search?q="]
    host = np.sort(rng.integers(0, len(hosts), rows))
    path = rng.integers(0, len(paths), rows)
    leaf = rng.integers(0, 10_000_000, rows)
    urls = sorted(f"{hosts[h]}{paths[p]}{n}" for h, p, n in zip(host.tolist(), path.tolist(), leaf.tolist()))
    return pa.array(urls)


def encoded_file(kind: str, target_bytes: int) -> Path:
    """The kind's file of about `target_bytes` (written once, then reused)."""
    spec = ENCODED_KINDS[kind]
    rows = int(target_bytes / spec.bytes_per_value)
    path = DATA_DIR / f"{kind}-{rows}.parquet"
    if path.exists():
        return path
    table = pa.table({"v": _column(spec.data, rows, np.random.default_rng(7))})
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    pq.write_table(table, tmp, row_group_size=-(-rows // 4), use_dictionary=False,
                   column_encoding={"v": spec.encoding}, compression=spec.compression,
                   data_page_version=spec.page_version, write_page_index=False, write_statistics=True)
    tmp.rename(path)
    return path
