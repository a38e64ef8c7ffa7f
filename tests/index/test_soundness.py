"""pageindex.index.soundness: each structural impossibility is found from the index blocks alone,
a valid index has none, and suspect writers are recognized by created_by."""
from __future__ import annotations

from pathlib import Path

import pytest

from pageindex.format.footer import TAIL_READ, read_footer
from pageindex.format.parquet_thrift import BoundaryOrder, ColumnIndex, OffsetIndex, PageLocation
from pageindex.format.thrift import Struct, T, TList
from pageindex.index.marker import MARKER_KEY
from pageindex.index.soundness import structural_flaws, suspect_writer
from pageindex.io.storage import open_source
from tests.helpers.files import write_sorted_int_file
from tests.helpers.strip import rewrite_footer, rewrite_page_index


def set_item(s: Struct, field_id: int, index: int, value) -> Struct:
    lst = s.get(field_id)
    items = list(lst.items)
    items[index] = value
    return s.set(field_id, T.LIST, TList(lst.elem_type, tuple(items), lst.is_set))


def drop_last(s: Struct, *field_ids: int) -> Struct:
    for field_id in field_ids:
        lst = s.get(field_id)
        s = s.set(field_id, T.LIST, TList(lst.elem_type, lst.items[:-1], lst.is_set))
    return s


def set_location(oi: Struct, page: int, field_id: int, value: int) -> Struct:
    loc = oi.get(OffsetIndex.PAGE_LOCATIONS).items[page]
    kind = T.I32 if field_id == PageLocation.COMPRESSED_PAGE_SIZE else T.I64
    return set_item(oi, OffsetIndex.PAGE_LOCATIONS, page, loc.set(field_id, kind, value))


def swap_bounds(ci: Struct, page: int) -> Struct:
    lo, hi = ci.get(ColumnIndex.MIN_VALUES).items[page], ci.get(ColumnIndex.MAX_VALUES).items[page]
    return set_item(set_item(ci, ColumnIndex.MIN_VALUES, page, hi), ColumnIndex.MAX_VALUES, page, lo)


# (name, edit of column k's (ColumnIndex, OffsetIndex), the check that must fire)
BREAKS = [
    ("null page with a wrong null count",
     lambda ci, oi: (set_item(ci, ColumnIndex.NULL_PAGES, 1, True), oi), "null_pages"),
    ("negative null count", lambda ci, oi: (set_item(ci, ColumnIndex.NULL_COUNTS, 2, -1), oi), "null_counts"),
    ("min above max", lambda ci, oi: (swap_bounds(ci, 3), oi), "bounds"),
    ("offset outside the chunk", lambda ci, oi: (ci, set_location(oi, 0, PageLocation.OFFSET, 0)), "page location"),
    ("first rows not increasing",
     lambda ci, oi: (ci, set_location(oi, 2, PageLocation.FIRST_ROW_INDEX, 1024)), "first_row_index"),
    ("page counts differ",
     lambda ci, oi: (drop_last(ci, ColumnIndex.NULL_PAGES, ColumnIndex.MIN_VALUES, ColumnIndex.MAX_VALUES,
                               ColumnIndex.NULL_COUNTS), oi), "page count"),
    ("boundary order broken",
     lambda ci, oi: (ci.set(ColumnIndex.BOUNDARY_ORDER, T.I32, BoundaryOrder.DESCENDING), oi), "boundary_order"),
]


@pytest.fixture(scope="module")
def sorted_file(tmp_path_factory) -> Path:
    """k sorted int64 and v double, 20 000 rows in 1024-row pages, pyarrow's page index."""
    return write_sorted_int_file(tmp_path_factory.mktemp("soundness") / "sorted.parquet", 20_000,
                                 page_index=True)


def broken(sorted_file: Path, dst: Path, edit) -> Path:
    """sorted_file with column k's index passed through `edit`; column v's left as it is."""
    return rewrite_page_index(sorted_file, dst, lambda r, c, ci, oi: edit(ci, oi) if c == 0 else (ci, oi))


def flaws(path: Path):
    with open_source(str(path)) as source:
        return structural_flaws(source, read_footer(source))


def test_a_valid_index_has_no_flaws(sorted_file):
    assert flaws(sorted_file) == ()


@pytest.mark.parametrize("name,edit,check", BREAKS, ids=[b[0] for b in BREAKS])
def test_each_impossibility_is_found(sorted_file, tmp_path, name, edit, check):
    found = flaws(broken(sorted_file, tmp_path / "broken.parquet", edit))
    assert check in {f.check for f in found}, [str(f) for f in found]
    assert {f.column for f in found} == {"k"}


@pytest.mark.parametrize("tail_bytes,reads", [(TAIL_READ, []), (8, ["index"])],
                         ids=["held by the footer read", "one read"])
def test_the_index_blocks_cost_at_most_one_read(sorted_file, tail_bytes, reads):
    with open_source(str(sorted_file)) as source:
        footer = read_footer(source, tail_bytes=tail_bytes)
        seen = []
        original = source.read

        def counting(offset, length, purpose="data"):
            seen.append(purpose)
            return original(offset, length, purpose)

        source.read = counting
        assert structural_flaws(source, footer) == ()
    assert seen == reads


def test_an_unreadable_block_is_a_flaw(sorted_file, tmp_path):
    def garble(ci, oi):
        return ci.without(ColumnIndex.MIN_VALUES), oi

    found = flaws(broken(sorted_file, tmp_path / "garbled.parquet", garble))
    assert [f.check for f in found] == ["unreadable"]


@pytest.mark.parametrize("created_by,suspect", [
    ("parquet-mr version 1.13.0-SNAPSHOT (build 019361e0da0677360788f0ad96c520fb8c296d7d)", True),
    ("parquet-mr version 1.13.1 (build db4183109d5b734ec5930d870cdae161e408ddba)", False),
    ("parquet-rs version 52.2.0", True),
    ("parquet-rs version 42.0.0", True),
    ("parquet-rs version 53.0.0", False),
    ("parquet-rs version 8.0.0", True),
    ("parquet-go version latest", True),
    ("parquet-go version 13.0.0", False),  # Arrow Go, not xitongsys/parquet-go
    ("parquet-cpp-arrow version 17.0.0", False),
])
def test_suspect_writers_by_created_by(sorted_file, tmp_path, created_by, suspect):
    from pageindex.format.parquet_thrift import FileMetaData

    path = rewrite_footer(sorted_file, tmp_path / "w.parquet",
                          lambda m: m.set(FileMetaData.CREATED_BY, T.BINARY, created_by.encode()))
    with open_source(str(path)) as source:
        assert (suspect_writer(read_footer(source)) is not None) == suspect


def test_an_index_pageindex_built_is_not_suspect(sorted_file, tmp_path):
    from pageindex.format.parquet_thrift import FileMetaData, KeyValue

    def edit(m: Struct) -> Struct:
        marker = Struct().set(KeyValue.KEY, T.BINARY, MARKER_KEY.encode()).set(KeyValue.VALUE, T.BINARY, b"x")
        m = m.set(FileMetaData.CREATED_BY, T.BINARY, b"parquet-rs version 52.2.0")
        return m.set(FileMetaData.KEY_VALUE_METADATA, T.LIST, TList(T.STRUCT, (marker,)))

    with open_source(str(rewrite_footer(sorted_file, tmp_path / "ours.parquet", edit))) as source:
        assert suspect_writer(read_footer(source)) is None
