"""Deterministic multi-megabyte Parquet files for the crash, fault and concurrency tests."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def wide_table(rows: int, seed: int | None = None) -> pa.Table:
    """int64 k = 0..rows-1, a random double and an 800-character string a row (~830 bytes)."""
    rng = np.random.default_rng(rows if seed is None else seed)
    return pa.table({
        "k": np.arange(rows, dtype=np.int64),
        "v": rng.random(rows),
        "s": pa.array([rng.bytes(400).hex() for _ in range(rows)]),
    })


def write_wide_file(path: str | Path, rows: int, seed: int | None = None) -> bytes:
    """Uncompressed, no dictionary, no page index, four row groups; returns the bytes."""
    path = Path(path)
    pq.write_table(wide_table(rows, seed), path, compression="none", use_dictionary=False,
                   write_page_index=False, row_group_size=max(1, rows // 4),
                   data_page_size=256 << 10)
    return path.read_bytes()
