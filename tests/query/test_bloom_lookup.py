"""lookup with bloom filters (issue 27): = and IN skip the row groups whose filters rule the
literals out, and return exactly the rows pyarrow's filter returns, for every kind of literal."""
from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pageindex.query.lookup import lookup
from tests.helpers.bloom_files import GROUP, N, write_filtered


@pytest.fixture(scope="module", params=[False, True], ids=["dec-flba", "dec-int"])
def files(request, tmp_path_factory):
    t, src, out, result = write_filtered(tmp_path_factory.mktemp("bloom_lookup"), request.param)
    assert result.to_dict()["bloom_filters"] == t.num_columns * (N // GROUP)
    return t, src, out


def expected(t: pa.Table, column: str, values: list) -> int:
    col = t[column]
    if any(isinstance(v, float) and math.isnan(v) for v in values):
        return int(pc.sum(pc.is_nan(col)).as_py())
    hits = [pc.equal(col, pa.scalar(v, col.type)) for v in values]  # -0.0 = 0.0, as in SQL
    return sum(int(pc.sum(h).as_py() or 0) for h in hits)


CASES = [
    ("i64", lambda t: [t["i64"][7].as_py()]),
    ("i32", lambda t: [t["i32"][2500].as_py(), t["i32"][6500].as_py()]),
    ("u32", lambda t: [t["u32"][3].as_py()]),
    ("s", lambda t: [""]),
    ("s", lambda t: [t["s"][1].as_py(), t["s"][4001].as_py()]),
    ("f64", lambda t: [0.0]),
    ("f64", lambda t: [-0.0]),
    ("f64", lambda t: [t["f64"][9].as_py()]),
    ("dec", lambda t: [t["dec"][10].as_py()]),
    ("date", lambda t: [t["date"][11].as_py()]),
    ("ts", lambda t: [t["ts"][12].as_py()]),
    ("uuid", lambda t: [t["uuid"][13].as_py()]),
]


@pytest.mark.parametrize("column, pick", CASES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(CASES)])
def test_present_values_return_the_same_rows(files, column, pick):
    t, src, out = files
    values = pick(t)
    where = [(column, "in", values)] if len(values) > 1 else [(column, "=", values[0])]
    with_filters, stats = lookup(str(out), where)
    without, _ = lookup(str(src), where)
    assert with_filters.num_rows == without.num_rows == expected(t, column, values) > 0
    assert with_filters.sort_by("i64").equals(without.sort_by("i64"))
    assert stats.row_groups_read + stats.row_groups_pruned_by_bloom_filter <= stats.row_groups


def test_nan_is_found(files):
    t, src, out = files
    rows, _ = lookup(str(out), [("f64", "=", math.nan)])
    plain, _ = lookup(str(src), [("f64", "=", math.nan)])
    assert rows.num_rows == plain.num_rows


@pytest.mark.parametrize("column, absent", [
    ("i64", 8001), ("i32", 8003), ("s", "k8001"), ("dec", Decimal("80.01")),
    ("date", dt.date(1970, 1, 1) + dt.timedelta(days=8001)), ("uuid", (8001).to_bytes(16, "big")),
    ("ts", dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=8001 * 1_000_003)), ("f64", 0.123456789),
])
def test_absent_values_are_skipped_by_the_filters(files, column, absent):
    t, _, out = files
    rows, stats = lookup(str(out), [(column, "=", absent)])
    assert rows.num_rows == 0
    assert stats.row_groups_pruned_by_bloom_filter >= N // GROUP - 1
    assert stats.to_dict()["row_groups_pruned_by_bloom_filter"] == stats.row_groups_pruned_by_bloom_filter
