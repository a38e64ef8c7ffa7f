"""The bloom filter test data (issue 27): a table of every kind a filter hashes differently,
written by pyarrow without index or filters and retrofitted with filters on every column."""
from __future__ import annotations

import math
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pageindex.retrofit import RetrofitResult, retrofit

N, GROUP = 8000, 2000


def table() -> pa.Table:
    """The same table on every call: one column per kind a bloom filter hashes differently."""
    rng = np.random.default_rng(2728)
    ints = rng.permutation(N).astype(np.int64) * 2  # even: odd values within range are absent
    floats = rng.normal(size=N)
    floats[[5, 2100, 4100]] = [-0.0, 0.0, math.nan]
    return pa.table({
        "i64": pa.array(ints),
        "i32": pa.array(ints.astype(np.int32)),
        "u32": pa.array((ints + (1 << 31)).astype(np.uint32)),
        "s": pa.array(["" if i % 11 == 0 else f"k{x}" for i, x in enumerate(ints)]),
        "f64": pa.array(floats),
        "dec": pa.array([Decimal(int(x)).scaleb(-2) for x in ints], pa.decimal128(9, 2)),
        "date": pa.array((ints % 20000).astype(np.int32), pa.date32()),
        "ts": pa.array(ints * 1_000_003, pa.timestamp("us")),
        "uuid": pa.array([int(x).to_bytes(16, "big") for x in ints], pa.binary(16)),
    })


def write_filtered(directory: Path, decimals_as_integer: bool) -> tuple[pa.Table, Path, Path, RetrofitResult]:
    """The table, its plain file, the file retrofitted with a filter on every column, the result."""
    t = table()
    src = directory / "in.parquet"
    pq.write_table(t, src, row_group_size=GROUP, write_page_index=False, dictionary_pagesize_limit=1024,
                   store_decimal_as_integer=decimals_as_integer)
    out = directory / "out.parquet"
    return t, src, out, retrofit(str(src), str(out), bloom_filter=t.column_names)
