"""Lakes as they are, for the output and bloom filter tests of the CLI and the job: table roots
whose directories hold files their tables no longer do, mixed trees, and evolved schemas."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROWS = 2_000
PAGE_ROWS = 100


def ids(first: int, n: int = ROWS) -> pa.Table:
    return pa.table({"id": pa.array(np.arange(first, first + n), pa.int64())})


def delta_with_delete(root: Path) -> Path:
    """A Delta table (delta-rs) of two appends and a DELETE that rewrote a file: its directory
    holds one data file the current version no longer has."""
    from deltalake import DeltaTable, write_deltalake

    write_deltalake(str(root), ids(0))
    write_deltalake(str(root), ids(ROWS), mode="append")
    DeltaTable(str(root)).delete("id < 500")
    return root


def delta_ids(root: Path) -> list[int]:
    """The current version's rows, through delta-rs."""
    from deltalake import DeltaTable, QueryBuilder

    table = pa.table(QueryBuilder().register("t", DeltaTable(str(root))).execute("select id from t"))
    return sorted(table.column("id").to_pylist())


def iceberg_with_delete(warehouse: Path) -> Path:
    """An Iceberg table (pyiceberg's SqlCatalog on SQLite) of two appends and a delete; its root
    (metadata/ and data/)."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.expressions import LessThan

    warehouse.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog("lakes", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=warehouse.as_uri())
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", schema=ids(0, 1).schema)
    table.append(ids(0))
    table.append(ids(ROWS))
    table.delete(LessThan("id", 500))
    return warehouse / "db" / "t"


def hudi_like(root: Path) -> Path:
    """A directory with Hudi's .hoodie/ marker and a data file (no Hudi writer is installed)."""
    (root / ".hoodie").mkdir(parents=True)
    (root / ".hoodie" / "hoodie.properties").write_text("hoodie.table.name=t\n")
    write(root / "p=1" / "part-0.parquet", ids(0))
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file below root (hidden ones too), by relative path."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def write(path: Path, table: pa.Table, page_index: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=ROWS // 2, data_page_size=1, write_batch_size=PAGE_ROWS,
                   write_page_index=page_index)
    return path


def mixed_tree(root: Path) -> dict[str, str]:
    """Files needing an index, one already indexed, one that is not Parquet: relative path -> what
    a run does with it ("index", "indexed", "not parquet")."""
    write(root / "day=1" / "a.parquet", ids(0))
    write(root / "day=1" / "b.parquet", ids(ROWS))
    write(root / "day=2" / "c.parquet", ids(2 * ROWS), page_index=True)
    (root / "day=2" / "NOTES.txt").write_text("not data\n")
    return {"day=1/a.parquet": "index", "day=1/b.parquet": "index", "day=2/c.parquet": "indexed",
            "day=2/NOTES.txt": "not parquet"}


def check_mirror(root: Path, out: Path, layout: dict[str, str], before: dict[str, bytes],
                 records: dict[str, dict]) -> None:
    """`out` is a complete mirror of the `mixed_tree` at `root`: inputs untouched, every input
    file there and nothing else, indexed files readable as their originals, the others identical
    copies; each record names the file written and its size."""
    assert snapshot(root) == before
    assert set(snapshot(out)) == set(layout), "every input file is in the mirror, nothing else"
    for rel, what in layout.items():
        record, copy = records[(root / rel).as_posix()], out / rel
        assert record["output"] == str(copy) and record["bytes_out"] == copy.stat().st_size, record
        if what == "index":
            assert record["status"] == "indexed"
            assert pq.read_table(copy).equals(pq.read_table(root / rel))
            assert pq.ParquetFile(copy).metadata.row_group(0).column(0).has_column_index
        else:
            assert record["status"] == ("already_indexed" if what == "indexed" else "skipped")
            assert copy.read_bytes() == before[rel], f"{rel} is not an identical copy"


def evolved(first: int, new_columns: bool) -> pa.Table:
    """Rows of a lake whose schema gained `b` (int64) and `lst` (a list of int64) over time, and
    whose `flag` is a boolean."""
    n = ROWS
    k = np.arange(first, first + n)
    columns = {"id": pa.array(k, pa.int64()), "flag": pa.array(k % 2 == 0)}
    if new_columns:
        columns["b"] = pa.array(k * 7 % 1009, pa.int64())
        columns["lst"] = pa.array([[int(v), int(v) + 1] for v in k], pa.list_(pa.int64()))
    return pa.table(columns)


def evolved_lake(root: Path) -> dict[str, bool]:
    """Two older files without `b` and `lst`, two newer with them: relative path -> has them."""
    layout = {"year=2023/old-0.parquet": False, "year=2023/old-1.parquet": False,
              "year=2024/new-0.parquet": True, "year=2024/new-1.parquet": True}
    for i, (rel, new) in enumerate(layout.items()):
        write(root / rel, evolved(i * ROWS, new))
    return layout


def bloom_columns(path: Path) -> dict[str, int]:
    """Columns (DuckDB's path_in_schema, e.g. "lst, list, element") -> how many of their chunks
    have a bloom filter, as DuckDB reads the footer."""
    import duckdb

    rows = duckdb.sql(f"select path_in_schema, bloom_filter_offset from parquet_metadata('{path}')").fetchall()
    counts: dict[str, int] = {}
    for column, offset in rows:
        counts[column] = counts.get(column, 0) + (offset is not None)
    return counts


def bloom_excludes(path: Path, column: str, value: object) -> list[bool]:
    """Per row group, whether DuckDB's probe of the file's bloom filter rules `value` out."""
    import duckdb

    return [excluded for _, _, excluded in
            duckdb.execute("select * from parquet_bloom_probe(?, ?, ?)", [str(path), column, value]).fetchall()]


def check_rerun_records(records: dict[str, dict], copies: set[str], appended: set[str]) -> None:
    """A table rerun's records: the copies an earlier run committed known indexed from their
    names (nothing read), the files appended since indexed and committed."""
    from pageindex.job import lake
    from pageindex.retrofit import Status

    assert set(records) == copies | appended
    for path in copies:
        assert records[path]["status"] == Status.ALREADY_INDEXED
        assert records[path]["reason"] == lake.KNOWN_INDEXED and records[path]["bytes_read"] == 0
    for path in appended:
        assert records[path]["status"] == Status.INDEXED and records[path]["table_version"] is not None
