"""Scale cases (full bench only): shapes that would expose quadratic behaviour.

Each case is built at full size and at half size; the time ratio full/half should be about 2
(linear). A ratio near 4 means quadratic work.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.datasets import DATA_DIR, random_strings

SCALE_VERSION = 1  # bump when a scale generator changes


@dataclass(frozen=True)
class Case:
    name: str
    what: str
    full: int  # the scaled quantity at full size
    unit: str

    def path(self, n: int) -> Path:
        suffix = "" if self.name == "files" else ".parquet"
        return DATA_DIR / f"scale-v{SCALE_VERSION}-{self.name}-{n}{suffix}"


CASES = (
    Case("files", "10,000 small files through the Spark job (pageindex.job.spark.main, local[2])", 10_000, "files"),
    Case("row_groups", "one file with 5,000 row groups (3 columns, 200 rows each)", 5_000, "row groups"),
    Case("columns", "a table with 2,000 columns (2 row groups of 5,000 rows)", 2_000, "columns"),
    Case("pages", "one column chunk with 40,000 pages (100 rows per page, int64)", 40_000, "pages"),
    Case("big_strings", "1 MiB string values, one per page (1 row group)", 200, "values"),
)


def remove_stale() -> None:
    """Delete cached scale inputs of other generator versions."""
    for path in DATA_DIR.glob("scale-*"):
        if not path.name.startswith(f"scale-v{SCALE_VERSION}-"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def _small_table(rng: np.random.Generator, start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "x": rng.standard_normal(n), "s": random_strings(rng, n, 4, 12)})


def build(case: Case, n: int) -> str:
    """Generate (once) the input for `case` at size n; returns a file or directory path."""
    path = case.path(n)
    done = Path(str(path) + ".done")
    if done.exists():
        return str(path)
    rng = np.random.default_rng(n)
    tmp = Path(str(path) + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp) if tmp.is_dir() else tmp.unlink()
    if case.name == "files":
        tmp.mkdir(parents=True)
        for i in range(n):
            sub = tmp / f"part={i // 1000:02d}"
            sub.mkdir(exist_ok=True)
            pq.write_table(_small_table(rng, i * 1000, 1000), sub / f"f{i:05d}.parquet")
    elif case.name == "row_groups":
        table = _small_table(rng, 0, 200 * n)
        pq.write_table(table, tmp, row_group_size=200)
    elif case.name == "columns":
        rows = 10_000
        cols = {f"c{i:04d}": (rng.integers(0, 1000, rows) if i % 2 else rng.standard_normal(rows))
                for i in range(n)}
        pq.write_table(pa.table(cols), tmp, row_group_size=rows // 2)
    elif case.name == "pages":
        rows = 100 * n
        pq.write_table(pa.table({"v": rng.integers(0, 10**12, rows)}), tmp, row_group_size=rows,
                       max_rows_per_page=100, data_page_size=1 << 30, use_dictionary=False)
    elif case.name == "big_strings":
        values = random_strings(rng, n, 1 << 20, 1 << 20)
        pq.write_table(pa.table({"id": np.arange(n), "s": values}), tmp, row_group_size=n,
                       max_rows_per_page=1, use_dictionary=False)
    else:
        raise ValueError(case.name)
    os.replace(tmp, path)
    done.write_text(json.dumps({"case": case.name, "n": n}))
    return str(path)


def dir_size(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
