"""lookup over lake layouts: Hive partition folders (returned, filterable, pruning whole files
unopened), schemas that evolved across files, and stray files, against pyarrow.dataset with
partitioning="hive" (and Spark) reading the same directory.
"""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import pageindex.query.lookup as lookup_module
from pageindex.cli import main
from pageindex.errors import FooterMissingError, MalformedFileError, UnsupportedFileError
from pageindex.query.lookup import lookup
from pageindex.query.predicate import PredicateError
from tests.helpers.predicates import table_difference
from tests.helpers.spark import spark_conf

ROWS = 3000
SMALL_PAGES = {"data_page_size": 2048, "write_batch_size": 256, "write_page_index": True}
# (partition folders, id type, has the column added later); the ids of file i are i*ROWS + 0..ROWS-1
LAYOUT = [
    ("day=2024-01-01/region=eu/hour=1", pa.int32(), False),
    ("day=2024-01-01/region=us/hour=2", pa.int32(), False),
    ("day=2024-01-02/region=eu/hour=1", pa.int64(), True),
    ("day=2024-01-02/region=us%2Fwest/hour=10", pa.int64(), True),
    ("day=__HIVE_DEFAULT_PARTITION__/region=eu/hour=3", pa.int64(), True),
]
# What pyarrow infers for the folders (dates stay strings, as in pyarrow) after the unified columns.
NOTES = "day=2024-01-02/region=eu/hour=1/notes.txt"  # not hidden, not Parquet: skipped, reported
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("extra", pa.float64()),
                    ("day", pa.string()), ("region", pa.string()), ("hour", pa.int32())])


def _file_table(i: int, id_type: pa.DataType, extra: bool) -> pa.Table:
    ids = pa.array(range(i * ROWS, (i + 1) * ROWS), id_type)
    columns = {"id": ids, "v": pc.cast(pc.multiply(ids, 7), pa.string())}
    if extra:
        columns["extra"] = pa.array([(k % 100) / 100 if k % 9 else None for k in range(ROWS)], pa.float64())
    return pa.table(columns)


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("lake") / "events"
    for i, (folders, id_type, extra) in enumerate(LAYOUT):
        (root / folders).mkdir(parents=True)
        pq.write_table(_file_table(i, id_type, extra), root / folders / "part-0.parquet", **SMALL_PAGES)
    (root / "day=2024-01-01" / "_SUCCESS").write_bytes(b"")
    (root / "day=2024-01-01" / ".part-0.parquet.crc").write_bytes(b"crc")
    (root / "_temporary").mkdir()
    pq.write_table(_file_table(9, pa.int64(), True), root / "_temporary" / "part-9.parquet")
    (root / NOTES).write_text("not a Parquet file, but not hidden either\n")
    return root


def _expression(filters: list[tuple]) -> ds.Expression:
    out = None
    for column, op, value in filters:
        f = pc.field(column)
        e = {"=": lambda: f == value, "!=": lambda: f != value, "<": lambda: f < value,
             ">=": lambda: f >= value, "in": lambda: f.isin(value), "is_null": f.is_null,
             "between": lambda: (f >= value[0]) & (f <= value[1])}[op]()
        out = e if out is None else out & e
    return out


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by([(name, "ascending") for name in table.column_names])


def _reference(root: Path, filters: list[tuple], columns: list[str] | None) -> pa.Table:
    dataset = ds.dataset(root, partitioning="hive", schema=SCHEMA, exclude_invalid_files=True)
    return dataset.to_table(columns=columns, filter=_expression(filters))


def _kept(root: Path, filters: list[tuple]) -> set[str]:
    """The files pyarrow's own partition pruning keeps."""
    dataset = ds.dataset(root, partitioning="hive", schema=SCHEMA, exclude_invalid_files=True)
    return {fragment.path for fragment in dataset.get_fragments(filter=_expression(filters))}


CASES = [
    ([("day", "=", "2024-01-01")], None),
    ([("day", "=", "2024-01-02"), ("id", "<", 2 * ROWS + 700)], ["id", "day", "extra"]),
    ([("hour", ">=", 2), ("id", "between", (ROWS + 100, 4 * ROWS + 50))], None),
    ([("region", "=", "us/west")], ["region", "hour", "v"]),
    ([("day", "is_null", None)], None),
    ([("region", "in", ["us", "us/west"]), ("hour", "!=", 2)], ["id", "hour"]),
    ([("extra", "is_null", None), ("hour", "=", 1)], None),
    ([("extra", ">=", 0.95)], ["id", "extra", "day"]),
    ([("id", "=", 4 * ROWS + 17)], None),
    ([("day", "=", "1999-12-31")], None),
]


@pytest.mark.parametrize("filters, columns", CASES, ids=[str(f) for f, _ in CASES])
def test_matches_pyarrow_hive_dataset(lake, filters, columns, monkeypatch):
    opened = []
    real_open = lookup_module.open_source
    monkeypatch.setattr(lookup_module, "open_source", lambda path, fs=None: opened.append(path) or real_open(path, fs))
    got, stats = lookup(str(lake), filters, columns=columns)
    expected = _reference(lake, filters, columns)
    kept = _kept(lake, filters)
    # The stray file shares a data file's folder: pruned with it, else opened and skipped.
    sibling = str(lake / NOTES).replace("notes.txt", "part-0.parquet")
    stray = {str(lake / NOTES)} if sibling in kept else set()
    # The result's schema unifies the files read (pruned files are not read, so a column only
    # they have is absent and old files' int32 stays int32): the same rows as pyarrow's, where
    # a column pyarrow adds is null throughout.
    assert [n for n in expected.column_names if n in got.column_names] == got.column_names
    assert all(expected.column(n).null_count == expected.num_rows
               for n in expected.column_names if n not in got.column_names)
    if len(kept) == len(LAYOUT):
        assert got.schema.equals(expected.schema)
    got = pa.table([got.column(n).cast(expected.schema.field(n).type) for n in got.column_names],
                   names=got.column_names)
    assert table_difference(_sorted(got), _sorted(expected.select(got.column_names))) is None
    # Pruned files are never opened (when every file is pruned, the first one's footer still
    # gives the result its columns).
    assert stats.files_pruned_by_partition == len(LAYOUT) + 1 - len(kept) - len(stray)
    assert stats.files == len(kept)
    first = str(lake / LAYOUT[0][0] / "part-0.parquet")
    assert set(opened) == (kept | stray or {first}) and len(opened) == len(set(opened))
    assert {p for p, _, _, _ in stats.reads} == set(opened)
    assert {p for p, _ in stats.files_skipped} == stray
    assert all("magic" in reason for _, reason in stats.files_skipped)


def test_partition_pruning_reads_fewer_bytes(lake):
    _, everything = lookup(str(lake), "id >= 0", columns=["id"])
    _, one_day = lookup(str(lake), "day = '2024-01-01' AND id >= 0", columns=["id"])
    assert one_day.files == 2 and everything.files == len(LAYOUT)
    assert one_day.bytes_read < everything.bytes_read * 0.6


def test_partition_values_and_schema(lake):
    got, _ = lookup(str(lake), "id IN (0, 3017, 9000)")
    assert got.schema.names == SCHEMA.names and got.schema.field("hour").type == pa.int32()
    rows = {r["id"]: r for r in got.to_pylist()}
    assert rows[0]["day"] == "2024-01-01" and rows[0]["extra"] is None and rows[0]["hour"] == 1
    assert rows[9000]["region"] == "us/west" and rows[9000]["hour"] == 10
    assert rows[3017]["region"] == "us"


def test_unknown_column_is_named(lake):
    with pytest.raises(PredicateError, match="nope"):
        lookup(str(lake), "id = 1", columns=["id", "nope"])
    with pytest.raises(PredicateError, match="nope"):
        lookup(str(lake), "nope = 1")


def test_struct_leaves_filter_across_partitions(tmp_path):
    point = pa.struct([("x", pa.int32()), ("y", pa.string())])
    for day in (1, 2):
        (tmp_path / f"day={day}").mkdir()
        rows = [{"x": k % 7 if k % 5 else None, "y": str(k)} if k % 11 else None for k in range(200)]
        pq.write_table(pa.table({"id": range(200), "point": pa.array(rows, point)}),
                       tmp_path / f"day={day}" / "a.parquet", **SMALL_PAGES)
    schema = pa.schema([("id", pa.int64()), ("point", point), ("day", pa.int32())])
    dataset = ds.dataset(tmp_path, partitioning="hive", schema=schema)
    got, _ = lookup(str(tmp_path), "point.x = 3 AND day = 2")
    want = dataset.to_table(filter=(pc.field("point", "x") == 3) & (pc.field("day") == 2))
    assert table_difference(got.sort_by("id"), want.sort_by("id")) is None and got.num_rows > 0
    # Every file pruned by its folder: the path is still checked against the schema.
    got, _ = lookup(str(tmp_path), "point.x = 3 AND day = 9")
    assert got.num_rows == 0 and got.schema.names == schema.names
    for where, bad in [("point.z = 1 AND day = 9", "point.z"), ("day.x = 1", "day.x")]:
        with pytest.raises(PredicateError, match=f"no column '{bad}'"):
            lookup(str(tmp_path), where)


def test_type_conflict_is_refused_naming_the_file(tmp_path):
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"id": pa.array(["x", "y"])}), tmp_path / "b.parquet")
    with pytest.raises(UnsupportedFileError, match="cannot be unified") as err:
        lookup(str(tmp_path), "id IS NOT NULL")
    assert err.value.path.endswith("b.parquet")


def test_partition_column_also_in_file_is_refused(tmp_path):
    (tmp_path / "day=1").mkdir()
    pq.write_table(pa.table({"day": [1], "x": [2]}), tmp_path / "day=1" / "a.parquet")
    with pytest.raises(UnsupportedFileError, match="partition"):
        lookup(str(tmp_path), "x = 2")


def test_named_non_parquet_file_still_fails(lake):
    with pytest.raises(MalformedFileError):
        lookup(str(lake / NOTES), "id = 1")


def test_cli_partitioned_json(lake, capsys):
    code = main(["lookup", str(lake), "--where", "day = '2024-01-01' AND hour = 2", "--columns", "id,day,region",
                 "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["num_rows"] == ROWS and out["io"]["files"] == 1
    assert out["io"]["files_pruned_by_partition"] == len(LAYOUT)  # and the stray file
    assert out["io"]["files_skipped"] == []
    assert {(r["day"], r["region"]) for r in out["rows"]} == {("2024-01-01", "us")}
    assert main(["lookup", str(lake), "--where", "hour = 1"]) == 0
    text = capsys.readouterr()
    assert "from 2 file(s) (3 pruned by partition" in text.out and "notes.txt: skipped" in text.err


def test_partitioned_lookup_on_s3(lake, s3fs_fs):
    fs, bucket = s3fs_fs, s3fs_fs.test_bucket
    for local in sorted(lake.rglob("*")):
        if local.is_file():
            fs.put(str(local), f"{bucket}/events/{local.relative_to(lake).as_posix()}")
    where = "day = '2024-01-02' AND region = 'eu' AND id < 7000"
    got, stats = lookup(f"s3://{bucket}/events", where, filesystem=fs)
    local, local_stats = lookup(str(lake), where)
    assert table_difference(_sorted(got), _sorted(local)) is None and got.num_rows == 1000
    assert stats.files_pruned_by_partition == local_stats.files_pruned_by_partition == 4
    assert {p.rsplit("/", 1)[-1] for p, _, _, _ in stats.reads} == {"part-0.parquet", "notes.txt"}
    assert [p.rsplit("/", 1)[-1] for p, _ in stats.files_skipped] == ["notes.txt"]


@pytest.mark.slow
def test_spark_reads_the_same_rows(lake, spark):
    """Spark's partition discovery and pruning on the same folders. (Spark refuses to merge
    int32 with int64, so it reads the day whose files agree.)"""
    got, _ = lookup(str(lake), "day = '2024-01-02' AND id < 6700", columns=["id", "extra", "day", "region"])
    settings = {"spark.sql.sources.partitionColumnTypeInference.enabled": "false",
                "spark.sql.files.ignoreCorruptFiles": "true"}  # notes.txt
    with spark_conf(spark, **settings):
        df = spark.read.option("basePath", str(lake)).option("mergeSchema", "true").parquet(
            str(lake / "day=2024-01-02"))
        rows = df.where("day = '2024-01-02' AND id < 6700").select("id", "extra", "day", "region").collect()
    assert got.num_rows == len(rows) == 700
    assert sorted(tuple(r) for r in rows) == sorted(tuple(r.values()) for r in got.to_pylist())


def _lake_with_a_broken_file(root: Path) -> Path:
    """Three files; b.parquet is Parquet cut short (its magic at the start, no footer)."""
    for name, start in (("a", 0), ("b", 100), ("c", 200)):
        pq.write_table(pa.table({"id": pa.array(range(start, start + 100), pa.int64())}),
                       root / f"{name}.parquet", **SMALL_PAGES)
    broken = root / "b.parquet"
    broken.write_bytes(broken.read_bytes()[:-30])
    return broken


def test_malformed_file_in_a_directory_is_left_out(tmp_path):
    broken = _lake_with_a_broken_file(tmp_path)
    before = broken.read_bytes()
    got, stats = lookup(str(tmp_path), "id >= 50")
    want = ds.dataset([str(tmp_path / "a.parquet"), str(tmp_path / "c.parquet")]).to_table(
        filter=pc.field("id") >= 50)
    assert table_difference(got.sort_by("id"), want.sort_by("id")) is None and got.num_rows == 150
    assert [(p.rsplit("/", 1)[-1], type(e)) for p, e in stats.files_failed] == [("b.parquet", FooterMissingError)]
    assert stats.files == 2 and stats.files_skipped == [] and broken.read_bytes() == before
    with pytest.raises(MalformedFileError) as err:
        lookup(str(tmp_path), "id >= 50", strict=True)
    assert err.value.path.endswith("b.parquet")
    with pytest.raises(MalformedFileError):  # a file named alone still fails
        lookup(str(broken), "id >= 50")


def test_cli_lookup_warns_about_a_malformed_file_and_exits_3(tmp_path, capsys):
    _lake_with_a_broken_file(tmp_path)
    assert main(["lookup", str(tmp_path), "--where", "id >= 50", "--json"]) == 3
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["num_rows"] == 150
    assert [(f["path"].rsplit("/", 1)[-1], f["error"]) for f in out["io"]["files_failed"]] == [
        ("b.parquet", "FooterMissingError")]
    warnings = [line for line in captured.err.splitlines() if "b.parquet" in line]
    assert len(warnings) == 1 and "skipped" in warnings[0] and "FooterMissingError" in warnings[0]
    # --strict fails the whole lookup (its exit code is main()'s rule for the error).
    assert main(["lookup", str(tmp_path), "--where", "id >= 50", "--strict"]) != 0
    assert "b.parquet" in capsys.readouterr().err


def test_every_file_malformed_raises_the_first_error(tmp_path):
    _lake_with_a_broken_file(tmp_path)
    for name in ("a", "c"):
        (tmp_path / f"{name}.parquet").unlink()
    with pytest.raises(MalformedFileError, match="b.parquet"):
        lookup(str(tmp_path), "id >= 50")
