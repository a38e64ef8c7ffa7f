"""Lookup literals against independent references (DuckDB and Spark in UTC sessions, same file):
timestamp text on UTC-adjusted columns, quoted numbers on numeric columns, nested leaves.
"""
from __future__ import annotations

import datetime as dt
import decimal
import json

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex.cli import main as cli_main
from pageindex.query.lookup import lookup
from pageindex.query.predicate import PredicateError
from pageindex.retrofit import retrofit

ROWS = 2_000
START = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)


def _table() -> pa.Table:
    ids = list(range(ROWS))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "small": pa.array([i % 100 for i in ids], pa.int16()),
        "ts": pa.array([START + dt.timedelta(minutes=7 * i) for i in ids], pa.timestamp("us", tz="UTC")),
        "local": pa.array([dt.datetime(2024, 1, 1) + dt.timedelta(minutes=7 * i) for i in ids], pa.timestamp("ms")),
        "dec": pa.array([decimal.Decimal(i) / 100 for i in ids], pa.decimal128(9, 2)),
        "f": pa.array([i / 4 for i in ids], pa.float64()),
        "point": pa.array([None if i % 10 == 3 else {"x": i % 50, "y": f"y{i % 7}"} for i in ids],
                          pa.struct([("x", pa.int32()), ("y", pa.string())])),
        "tags": pa.array([[i % 3] for i in ids], pa.list_(pa.int32())),
    })


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("literals")
    raw, out = folder / "raw.parquet", folder / "indexed.parquet"
    pq.write_table(_table(), raw, data_page_size=512, write_batch_size=64, write_page_index=False)
    retrofit(str(raw), str(out))
    return str(out)


def _ids(path: str, where: str) -> list[int]:
    table, _ = lookup(path, where, columns=["id"])
    return sorted(table.column("id").to_pylist())


def _same_as_duckdb(path: str, where: str) -> None:
    """Lookup selects the rows DuckDB in a UTC session selects, and some rows (so a wrong rule shows)."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    expected = sorted(r[0] for r in con.execute(f"SELECT id FROM read_parquet('{path}') WHERE {where}").fetchall())
    assert expected
    assert _ids(path, where) == expected


@pytest.mark.parametrize("where", [
    "ts = '2024-01-01 07:00:00'",
    "ts >= '2024-01-02' AND ts < '2024-01-02 12:00:00'",
    "ts BETWEEN '2024-01-03 00:00:00' AND '2024-01-03 01:10:00'",
    "ts IN ('2024-01-01 00:07:00', '2024-01-04 10:55:00', '2024-01-05')",
    "ts > '2024-01-02T00:00:00+02:00' AND ts <= '2024-01-02T00:00:00Z'",
    "ts <= TIMESTAMP '2024-01-01 00:35:00'",
    "local >= '2024-01-02 23:00:00' AND local < '2024-01-03'",
])
def test_timestamp_text_is_utc_as_in_a_utc_session(indexed, where):
    _same_as_duckdb(indexed, where)


def test_timestamp_text_matches_spark_in_a_utc_session(indexed, spark):
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    where = "ts >= '2024-01-02' AND ts < '2024-01-02 12:00:00'"
    expected = sorted(r.id for r in spark.read.parquet(indexed).where(where).select("id").collect())
    assert expected
    assert _ids(indexed, where) == expected


@pytest.mark.parametrize("where", [
    "id = '42'",
    "id IN ('41', 42, '1999')",
    "id BETWEEN '10' AND '12'",
    "small = '7' AND id < '500'",
    "dec = '1.23'",
    "dec IN ('1.23', 2.5, '19.99')",
    "f IN ('0.25', 10.5)",
    "f >= '499.5'",
])
def test_quoted_numbers_on_numeric_columns_are_numbers(indexed, where):
    _same_as_duckdb(indexed, where)


def test_a_quoted_fraction_on_an_integer_column_compares_as_a_number(indexed):
    assert _ids(indexed, "id = '1.5'") == []
    assert _ids(indexed, "id < '1.5'") == [0, 1]


@pytest.mark.parametrize("column", ["id", "small", "dec", "f"])
def test_text_that_is_no_number_is_refused_alike(indexed, column):
    with pytest.raises(PredicateError, match=f"does not fit column '{column}'"):
        lookup(indexed, f"{column} = 'abc'")
    with pytest.raises(PredicateError, match=f"does not fit column '{column}'"):
        lookup(indexed, f"{column} IN (1, 'abc')")


@pytest.mark.parametrize("where", [
    "point.x = 4",
    "point.x IN (3, '7') AND id < 1000",
    "point.y = 'y2' AND point.x < 10",
    "point.x IS NULL",
    "point.x >= 48",
])
def test_leaves_inside_structs_filter_by_dotted_path(indexed, where):
    _same_as_duckdb(indexed, where)
    table, _ = lookup(indexed, where, columns=["point"])
    assert table.column("point").type == _table().schema.field("point").type


@pytest.mark.parametrize("where, message", [
    ("tags = 1", "column 'tags' is nested or repeated to filter on"),
    ("point = 1", "column 'point' is nested or repeated to filter on"),
    ("point.z = 1", "no column 'point.z' to filter on"),
])
def test_other_nested_columns_are_refused_with_the_leaves_that_filter(indexed, where, message):
    with pytest.raises(PredicateError) as err:
        lookup(indexed, where)
    assert message in str(err.value)
    assert "filterable columns and leaves: id, small, ts, local, dec, f, point.x, point.y" in str(err.value)


def test_lookup_json_is_strict(tmp_path, capsys):
    path = tmp_path / "odd.parquet"
    pq.write_table(pa.table({
        "k": pa.array([1, 2, 3, 4], pa.int32()),
        "v": pa.array([float("nan"), float("inf"), float("-inf"), 1.5]),
        "b": pa.array([b"\x00\xff", b"a", None, b""], pa.binary()),
        "d": pa.array([decimal.Decimal("1.10")] * 4, pa.decimal128(5, 2)),
        "t": pa.array([START] * 4, pa.timestamp("us", tz="UTC")),
        "s": pa.array([{"t": dt.date(2024, 1, 2), "n": float("nan")}] * 4,
                      pa.struct([("t", pa.date32()), ("n", pa.float64())])),
    }), path)

    def no_constants(name: str) -> None:
        raise AssertionError(f"{name} is not JSON")

    assert cli_main(["lookup", str(path), "--where", "k >= 1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out, parse_constant=no_constants)
    assert doc["num_rows"] == 4
    assert [r["v"] for r in doc["rows"]] == ["NaN", "Infinity", "-Infinity", 1.5]
    assert [r["b"] for r in doc["rows"]] == ["0x00ff", "0x61", None, "0x"]
    assert doc["rows"][0]["d"] == "1.10"
    assert doc["rows"][0]["t"].startswith("2024-01-01 00:00:00")
    assert doc["rows"][0]["s"] == {"t": "2024-01-02", "n": "NaN"}
