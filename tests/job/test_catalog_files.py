"""A catalog table's files (pageindex.job.catalog.table_files) without Spark: the files of the
partitions the catalog lists, below the location or elsewhere, and no other."""
from __future__ import annotations

from pathlib import Path

from pageindex.job.catalog import CatalogTable, Partition, table_files


def _touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"PAR1")


def test_listed_partitions_only_and_no_prefix_confusion(tmp_path):
    table = tmp_path / "t"
    for day in ("1", "10", "2", "3"):
        _touch(table / f"day={day}" / "a.parquet")
    _touch(table / "day=1" / "sub" / "b.parquet")
    _touch(tmp_path / "elsewhere" / "x.parquet")
    partitions = (Partition(str(table / "day=1"), "day=1"), Partition(str(table / "day=3"), "day=3"),
                  Partition(str(tmp_path / "elsewhere"), "day=9"), Partition(str(tmp_path / "gone"), "day=8"))
    found = table_files(CatalogTable("db.t", str(table), "parquet", partitions), {})
    # day=10 shares day=1's prefix but is not listed; day=2 is not listed; gone/ holds nothing
    assert sorted(f.relative for f in found.files) == ["day=1/a.parquet", "day=1/sub/b.parquet",
                                                       "day=3/a.parquet", "day=9/x.parquet"]
    assert [f.url for f in found.files] == sorted(f.url for f in found.files)
