"""pageindex.scan.chunk_scan: decoding small chunks in groups gives what one chunk at a time gives,
dictionary strings stay indices, and a corrupt chunk inside a group is still named.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex.errors import MalformedFileError
from pageindex.format.column_order import order_for
from pageindex.format.footer import read_footer
from pageindex.format.parquet_thrift import Encoding, Type
from pageindex.io.storage import open_source
from pageindex.scan import chunk_scan, plain_values, values
from pageindex.scan.chunk_scan import needs_values, scan_chunk, scan_chunks
from pageindex.scan.page_levels import needs_level_decoding
from pageindex.scan.plain_values import ARROW_TYPES
from tests.helpers.tables import ALL_KINDS, NESTED_KINDS, random_table


def _write(path: Path, table: pa.Table, **options) -> Path:
    options = {"data_page_size": 2048, "row_group_size": 1500, "write_page_index": False, **options}
    pq.write_table(table, path, **options)
    return path


def _requests(footer, row):
    return [(c, needs_values(c, order_for(c.leaf, footer.declared_order(c.column)))) for c in row]


def _same(a: chunk_scan.ChunkScan, b: chunk_scan.ChunkScan) -> None:
    assert [p.offset for p in a.pages.pages] == [p.offset for p in b.pages.pages]
    for field in ("rows", "nulls", "defined"):
        x, y = getattr(a.levels, field), getattr(b.levels, field)
        assert (x is None and y is None) or np.array_equal(x, y), field
    assert (a.values is None) == (b.values is None)
    if a.values is not None:
        plain = lambda v: v.cast(v.type.value_type) if pa.types.is_dictionary(v.type) else v  # noqa: E731
        assert plain(a.values).equals(plain(b.values))


def test_groups_equal_one_chunk_at_a_time(tmp_path, monkeypatch):
    path = _write(tmp_path / "all.parquet", random_table(5, 3000, kinds=ALL_KINDS))
    reads = []
    original = chunk_scan.decode_columns
    monkeypatch.setattr(chunk_scan, "decode_columns", lambda *a: reads.append(a[1]) or original(*a))
    with open_source(str(path)) as source:
        footer = read_footer(source)
        for row in footer.chunks:
            grouped = list(scan_chunks(source, footer, _requests(footer, row)))
            single = [scan_chunk(source, footer, chunk, with_values) for chunk, with_values in _requests(footer, row)]
            assert len(grouped) == len(single) == len(row)
            for a, b in zip(grouped, single):
                _same(a, b)
    # Every multi-chunk read stayed within the column cap, and grouping happened.
    assert reads and max(reads) <= chunk_scan.GROUP_CHUNKS
    assert sum(reads) > len(reads)


def test_groups_hold_what_arrow_decodes_within_the_byte_cap(tmp_path, monkeypatch):
    """Dictionary-encoded columns store a few bytes per row that decode to 8: a group is capped by
    the values Arrow hands back (its own nbytes), not only by the pages' bytes."""
    monkeypatch.setattr(chunk_scan, "GROUP_BYTES", 1 << 20)
    rows = 20_000
    table = pa.table({f"c{i}": pa.array(np.arange(rows, dtype=np.int64) % 5 + i) for i in range(60)})
    path = _write(tmp_path / "dict.parquet", table, row_group_size=rows, data_page_size=1 << 20)
    groups = []
    original = chunk_scan.decode_columns

    def recorded(*args):
        arrays = original(*args)
        groups.append(sum(a.nbytes for a in arrays))
        return arrays
    monkeypatch.setattr(chunk_scan, "decode_columns", recorded)
    with open_source(str(path)) as source:
        footer = read_footer(source)
        scans = list(scan_chunks(source, footer, _requests(footer, footer.chunks[0])))
    assert [scan.values.to_pylist() for scan in scans] == [c.to_pylist() for c in table.columns]
    assert len(groups) > 1 and max(groups) <= chunk_scan.GROUP_BYTES


def test_dictionary_encoded_strings_stay_indices(tmp_path):
    table = pa.table({"s": pa.array([f"v{i % 7}" for i in range(5000)]),
                      "p": pa.array([f"plain{i}" for i in range(5000)])})
    path = _write(tmp_path / "d.parquet", table, use_dictionary=["s"])
    with open_source(str(path)) as source:
        footer = read_footer(source)
        s, p = (scan_chunk(source, footer, chunk, True) for chunk in footer.chunks[0][:2])
    assert pa.types.is_dictionary(s.values.type)
    assert not pa.types.is_dictionary(p.values.type)
    assert s.values.cast(pa.binary()).to_pylist() == [f"v{i % 7}".encode() for i in range(1500)]


def test_page_bytes_are_released_after_decoding(tmp_path):
    path = _write(tmp_path / "r.parquet", random_table(2, 2000, kinds=("int64", "string")))
    with open_source(str(path)) as source:
        footer = read_footer(source)
        scans = list(scan_chunks(source, footer, _requests(footer, footer.chunks[0])))
    assert all(scan.pages.data == b"" and scan.pages.pages for scan in scans)


def test_big_local_chunks_are_decoded_from_the_file_again(tmp_path, monkeypatch):
    """A local chunk of at least STREAM_CHUNK_BYTES, in pages of STREAM_PAGE_BYTES on average, is
    not held while Arrow decodes it: Arrow streams its pages from the file again, and they decode
    to the same values and counts. A flat one is walked through windows of WALK_WINDOW bytes:
    no read takes more than a window or a page."""
    path = _write(tmp_path / "s.parquet", random_table(9, 3000, kinds=ALL_KINDS))
    streamed = []
    original = chunk_scan.decode
    monkeypatch.setattr(chunk_scan, "decode", lambda file, *a: streamed.append(file.streamed) or original(file, *a))
    with open_source(str(path)) as source:
        footer = read_footer(source)
        requests = [r for row in footer.chunks for r in _requests(footer, row)]
        held = [scan_chunk(source, footer, chunk, with_values) for chunk, with_values in requests]
        read_once = source.stats.bytes_read
        assert streamed and not any(streamed)
        streamed.clear()
        monkeypatch.setattr(chunk_scan, "STREAM_CHUNK_BYTES", 1)
        monkeypatch.setattr(chunk_scan, "WALK_WINDOW", 4096)
        for chunk, with_values in requests:
            scan_chunk(source, footer, chunk, with_values)
        assert streamed and not any(streamed)  # pages of 2 KiB: held, not streamed one by one
        streamed.clear()
        before = source.stats.bytes_read
        monkeypatch.setattr(chunk_scan, "STREAM_PAGE_BYTES", 1)
        walk_reads = {}
        walk = chunk_scan.walk_chunk

        def recorded_walk(source, chunk, *args, **kwargs):
            first = len(source.stats.ranges)
            pages = walk(source, chunk, *args, **kwargs)
            walk_reads[chunk.start] = [length for _, length, _ in source.stats.ranges[first:]]
            return pages
        monkeypatch.setattr(chunk_scan, "walk_chunk", recorded_walk)
        again = [scan_chunk(source, footer, chunk, with_values) for chunk, with_values in requests]
        assert streamed and all(streamed)
        windowed = 0
        for (chunk, _), scan in zip(requests, again):
            pages = scan.pages.pages + ((scan.pages.dictionary,) if scan.pages.dictionary else ())
            most = max(4096, *(p.size for p in pages))  # a window, or a page bigger than that
            if needs_level_decoding(chunk):
                assert walk_reads[chunk.start] == [chunk.total_compressed_size]
            elif chunk.total_compressed_size > most:
                assert max(walk_reads[chunk.start]) <= most
                windowed += 1
        assert windowed
        # The streamed chunks' pages were read twice: once walked, once decoded.
        assert source.stats.bytes_read - before > read_once
    for a, b in zip(held, again):
        _same(a, b)


def _corrupt_first_page_body(path: Path, column: int) -> Path:
    """Garble the snappy body of one column's first data page (the header stays valid)."""
    meta = pq.ParquetFile(path).metadata.row_group(0).column(column)
    data = bytearray(path.read_bytes())
    start = meta.data_page_offset
    # Far enough past the page header to hit the compressed body; garbage Snappy cannot decode.
    for i in range(start + 40, start + 200):
        data[i] = 0xFF
    out = path.with_name("corrupt.parquet")
    out.write_bytes(bytes(data))
    return out


def test_corrupt_chunk_inside_a_group_is_named(tmp_path):
    table = pa.table({f"c{i}": pa.array(np.arange(1000, dtype=np.int64) * (i + 1)) for i in range(6)})
    path = _write(tmp_path / "w.parquet", table, compression="snappy", use_dictionary=False,
                  data_page_size=1 << 20)
    bad = _corrupt_first_page_body(path, 3)
    with open_source(str(bad)) as source:
        footer = read_footer(source)
        with pytest.raises(MalformedFileError) as caught:
            list(scan_chunks(source, footer, _requests(footer, footer.chunks[0])))
    assert caught.value.column == "c3" and caught.value.row_group == 0


def _leaf_reference(path: Path, row_group: int, column: int) -> list:
    """The column's defined leaf values in file order, as pyarrow reads them from the file."""
    reader = pq.ParquetFile(path)
    dotted = reader.metadata.schema.column(column).path
    array = reader.read_row_group(row_group, columns=[dotted]).column(0).combine_chunks()
    while True:
        t = array.type
        if pa.types.is_struct(t):
            array = array.flatten()[0]
        elif pa.types.is_map(t):
            array = array.keys if dotted.endswith(".key") else array.items
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            array = array.flatten()
        else:
            return array.drop_null().to_pylist()


@pytest.mark.slow
@pytest.mark.parametrize("group_bytes", [values.SECTION_RUN_BYTES, 600])
@pytest.mark.parametrize("version", ["1.0", "2.0"])
@pytest.mark.parametrize("compression,dictionary", [("snappy", True), ("zstd", False), ("none", True)])
def test_nested_leaves_decode_from_their_values_sections(tmp_path, monkeypatch, version, compression,
                                                         dictionary, group_bytes):
    """A nested leaf's values are decoded from its pages' values sections alone (no levels, no
    lists), in runs of sections when the chunk is bigger than a run, and are the values pyarrow
    reads from the file."""
    path = _write(tmp_path / "n.parquet", random_table(7, 3000, kinds=NESTED_KINDS),
                  data_page_version=version, compression=compression, use_dictionary=dictionary,
                  data_page_size=256, write_batch_size=50)  # small pages: some hold no defined value
    monkeypatch.setattr(values, "SECTION_RUN_BYTES", group_bytes)
    flat_reads, runs = [], []
    decode_sections, synthesize_values = values.decode_sections, values.synthesize_values
    monkeypatch.setattr(chunk_scan, "decode_sections",
                        lambda chunk, *a: flat_reads.append(chunk.leaf.dotted) or decode_sections(chunk, *a))
    monkeypatch.setattr(values, "synthesize_values",
                        lambda chunk, *a: runs.append(chunk.leaf.dotted) or synthesize_values(chunk, *a))
    in_place = []
    read_in_place = plain_values.plain_values
    monkeypatch.setattr(plain_values, "plain_values",
                        lambda ptype, codec, section: in_place.append(section) or read_in_place(ptype, codec, section))
    nested = whole_runs = 0
    with open_source(str(path)) as source:
        footer = read_footer(source)
        for row in footer.chunks:
            for chunk, scan in zip(row, scan_chunks(source, footer, _requests(footer, row))):
                if not needs_level_decoding(chunk) or scan.values is None:
                    continue
                nested += 1
                # Without a dictionary, numbers are all PLAIN and read in place: no Arrow run.
                whole_runs += 0 if (chunk.leaf.physical_type in ARROW_TYPES and not dictionary
                                    and len(scan.values)) else 1
                got_values = scan.values
                if pa.types.is_dictionary(got_values.type):
                    got_values = got_values.cast(got_values.type.value_type)
                got = got_values.to_pylist()
                if chunk.leaf.physical_type == Type.BYTE_ARRAY:
                    got = [v if isinstance(v, bytes) else v.encode() for v in got]
                want = _leaf_reference(path, chunk.row_group, chunk.column)
                want = [v.encode() if isinstance(v, str) else v for v in want]
                assert got == want, chunk.leaf.dotted
    assert nested and len(flat_reads) == nested
    # PLAIN numbers are read in place, so without a dictionary some chunks need no Arrow run.
    assert bool(in_place) == (not dictionary) and all(s.encoding == Encoding.PLAIN for s in in_place)
    # Small runs split every chunk of several pages; the default keeps these small chunks whole.
    assert (len(runs) > 2 * whole_runs) if group_bytes < 1000 else (len(runs) == whole_runs)
