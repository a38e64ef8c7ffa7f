"""Writers other than pyarrow for the writer matrices of the tests (fastparquet, DuckDB, polars):
each a function (table, path) writing row groups of a given size, as those tools write by default."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pyarrow as pa

Writer = Callable[[pa.Table, Path], None]


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
