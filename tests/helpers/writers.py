"""Writers for the writer matrices of the tests: pyarrow once per set of options, and fastparquet,
DuckDB and polars, each a function (table, path) writing row groups of a given size as they do by default."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

Writer = Callable[[pa.Table, Path], None]


def pyarrow_each(directory: Path, table: pa.Table, writes: dict[str, dict[str, Any]], **common: Any
                 ) -> dict[str, Path]:
    """`table` written by pyarrow once per named set of options in `writes` (each with `common`),
    as <directory>/<name>.parquet."""
    out = {}
    for name, options in writes.items():
        out[name] = directory / f"{name}.parquet"
        pq.write_table(table, out[name], **common, **options)
    return out


def fastparquet_writer(row_group: int, **options: Any) -> Writer:
    def write(table: pa.Table, path: Path) -> None:
        import fastparquet
        fastparquet.write(str(path), table.to_pandas(), row_group_offsets=row_group, **options)
    return write


def duckdb_writer(row_group: int) -> Writer:
    def write(table: pa.Table, path: Path) -> None:
        import duckdb
        con = duckdb.connect()
        con.register("t", table)
        con.execute(f"COPY (SELECT * FROM t) TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE {row_group})")
        con.close()
    return write


def polars_writer(row_group: int, **options: Any) -> Writer:
    def write(table: pa.Table, path: Path) -> None:
        import polars as pl
        pl.from_arrow(table).write_parquet(path, row_group_size=row_group, **options)
    return write
