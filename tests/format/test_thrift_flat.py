"""The compiled footer decode (format.thrift_flat) against the Python codec and pyarrow: every corpus
footer decodes to the same tree, bytes and errors, and malformed bytes go to the Python codec."""
from __future__ import annotations

import random
import struct
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pageindex.errors import PageIndexError
from pageindex.format import thrift_flat
from pageindex.format.footer import decode_footer
from pageindex.format.parquet_thrift import ColumnChunk, ColumnMetaData, FileMetaData, RowGroup, Statistics
from pageindex.format.thrift import Struct, TList, decode_struct, encode_struct
from tests.helpers.corpus import corpus_path, load_catalog

KERNEL = thrift_flat.kernel()
pytestmark = pytest.mark.skipif(KERNEL is None, reason="numba is not installed: decode_large is decode_struct")


def _footer_bytes(path: Path) -> bytes | None:
    data = path.read_bytes()
    if len(data) < 12 or data[-4:] != b"PAR1":
        return None
    (n,) = struct.unpack("<I", data[-8:-4])
    return data[-8 - n:-8] if 0 < n <= len(data) - 12 else None


def _footers() -> list[tuple[str, bytes]]:
    out = []
    for row in load_catalog():
        path = corpus_path(row)
        raw = _footer_bytes(path) if path.suffix == ".parquet" and path.is_file() else None
        if raw is not None:
            out.append((row["path"], raw))
    return out


FOOTERS = _footers()


def _same(a: object, b: object, where: str = "") -> None:
    """Equal, and alike in what equality ignores: every struct's raw bytes, the classes of values
    (bytes, not a view; T members; bool, not int)."""
    assert type(a) is type(b), where
    if isinstance(a, Struct):
        assert a.raw == b.raw and type(a.raw) is bytes, where
        assert len(a.fields) == len(b.fields), where
        for f, g in zip(a.fields, b.fields):
            assert type(f) is type(g) and f.id == g.id and f.type is g.type, where
            _same(f.value, g.value, f"{where}.{f.id}")
    elif isinstance(a, TList):
        assert a.elem_type is b.elem_type and a.is_set == b.is_set and len(a.items) == len(b.items), where
        for i, (x, y) in enumerate(zip(a.items, b.items)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def test_the_corpus_has_footers_to_compare():
    assert len(FOOTERS) > 80


@pytest.mark.parametrize("lazy_depth", [1, 6, 100])
def test_every_corpus_footer_decodes_as_the_python_codec_decodes_it(lazy_depth):
    """Catches a wrong value (zigzag, a binary's offset), field id, type, raw span or end, a lazy
    struct that decodes to something else, and a scan that accepts what the Python codec refuses."""
    compared = 0
    for name, raw in FOOTERS:
        try:
            expected = decode_struct(raw)
        except PageIndexError:
            assert thrift_flat.decode_flat(KERNEL, raw, lazy_depth) is None, name
            continue
        got = thrift_flat.decode_flat(KERNEL, raw, lazy_depth)
        assert got is not None, name  # footers hold only what the scan reads
        assert got[1] == expected[1], name
        _same(got[0], expected[0], name)
        compared += 1
    assert compared > 80


def test_structs_deep_enough_hold_only_their_bytes_until_used():
    """A chunk's Statistics is decoded on first use (catches a lazy depth that builds it, or a
    lazy struct whose fields are not its own)."""
    raw = next(raw for name, raw in FOOTERS if name.endswith("alltypes_tiny_pages.parquet"))
    meta, _ = thrift_flat.decode_flat(KERNEL, raw)
    cc = meta.get(FileMetaData.ROW_GROUPS).items[0].get(RowGroup.COLUMNS).items[0]
    stats = cc.get(ColumnChunk.META_DATA).get(ColumnMetaData.STATISTICS)
    assert "fields" not in stats.__dict__ and stats.raw is not None
    assert stats.fields == decode_struct(stats.raw)[0].fields
    assert "fields" in stats.__dict__
    assert stats.has(Statistics.NULL_COUNT)


def test_footers_round_trip_to_their_bytes():
    """Re-encoded from their fields (no struct's raw reused), the trees give the footer's bytes."""
    def rebuilt(value: object) -> object:
        if isinstance(value, Struct):
            return Struct(tuple(f._replace(value=rebuilt(f.value)) for f in value.fields))
        if isinstance(value, TList):
            return TList(value.elem_type, tuple(rebuilt(i) for i in value.items), value.is_set)
        return value

    for name, raw in FOOTERS:
        got = thrift_flat.decode_flat(KERNEL, raw)
        if got is not None and got[1] == len(raw):
            assert encode_struct(rebuilt(got[0])) == raw, name


def test_decoded_footers_agree_with_pyarrow():
    """An independent reader: rows, row groups, column paths, offsets, sizes, null counts."""
    checked = 0
    for name, raw in FOOTERS:
        path = corpus_path(name)
        try:
            arrow = pq.ParquetFile(path).metadata
        except Exception:  # noqa: BLE001 - files pyarrow refuses have nothing to compare
            continue
        got = thrift_flat.decode_flat(KERNEL, raw)
        if got is None:
            continue
        meta = got[0]
        assert meta.get(FileMetaData.NUM_ROWS) == arrow.num_rows, name
        groups = meta.get(FileMetaData.ROW_GROUPS).items
        assert len(groups) == arrow.num_row_groups, name
        for r, group in enumerate(groups):
            arrow_group = arrow.row_group(r)
            assert group.get(RowGroup.NUM_ROWS) == arrow_group.num_rows, name
            for c, cc in enumerate(group.get(RowGroup.COLUMNS).items):
                col = arrow_group.column(c)
                cmd = cc.get(ColumnChunk.META_DATA)
                path_in_schema = [p.decode() for p in cmd.get(ColumnMetaData.PATH_IN_SCHEMA).items]
                assert ".".join(path_in_schema) == col.path_in_schema, name
                assert cmd.get(ColumnMetaData.DATA_PAGE_OFFSET) == col.data_page_offset, name
                assert cmd.get(ColumnMetaData.TOTAL_COMPRESSED_SIZE) == col.total_compressed_size, name
                assert cmd.get(ColumnMetaData.NUM_VALUES) == col.num_values, name
                stats = cmd.get(ColumnMetaData.STATISTICS)
                if col.is_stats_set and col.statistics.has_null_count and stats is not None:
                    assert stats.get(Statistics.NULL_COUNT) == col.statistics.null_count, name
        checked += 1
    assert checked > 60


def test_mutated_footers_decode_as_the_python_codec_decodes_them():
    """Bytes flipped, cut off or lengthened: the scan gives the Python codec's tree or gives up,
    never a tree the codec would not give (catches a missing range, length or type check)."""
    rng = random.Random(45)
    sources = [raw for _, raw in FOOTERS if len(raw) < 20000][:40]
    for _ in range(1500):
        raw = bytearray(rng.choice(sources))
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(raw))
            what = rng.random()
            if what < 0.6:
                raw[at] = rng.randrange(256)
            elif what < 0.8:
                del raw[at:]
                if not raw:
                    raw.append(0)
            else:
                raw[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
        data = bytes(raw)
        try:
            expected = decode_struct(data)
        except PageIndexError:
            expected = None
        got = thrift_flat.decode_flat(KERNEL, data)
        if expected is None:
            assert got is None, data.hex()
        elif got is not None:
            assert got[1] == expected[1]
            _same(got[0], expected[0])


def test_decode_footer_errors_are_the_python_codecs(monkeypatch):
    """Large malformed footers (through the scan) fail as they do with the scan turned off."""
    raw = max((raw for _, raw in FOOTERS), key=len)
    monkeypatch.setattr(thrift_flat, "MIN_BYTES", 0)
    for cut in (1, 7, len(raw) // 2, len(raw) - 1):
        bad = raw[:cut]
        errors = []
        for kernel in ("auto", "arrow"):
            monkeypatch.setenv("PAGEINDEX_SCAN_KERNEL", kernel)
            with pytest.raises(PageIndexError) as err:
                decode_footer(bad, 10_000_000, "f.parquet")
            errors.append((type(err.value), str(err.value)))
        assert errors[0] == errors[1]
