"""pageindex.scan.page_levels: a nested chunk's per-page facts do not depend on how its pages are
grouped for decoding, and a bad level stream is named by its own page."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from pageindex.errors import MalformedFileError
from pageindex.format.footer import read_footer
from pageindex.io.storage import open_source
from pageindex.scan import page_levels
from pageindex.scan.page_levels import needs_level_decoding, nested_levels
from pageindex.scan.page_walk import walk_chunk
from tests.helpers.tables import NESTED_KINDS, random_table


def _write(path: Path, version: str, compression: str) -> Path:
    pq.write_table(random_table(5, 4000, kinds=NESTED_KINDS), path, data_page_version=version,
                   compression=compression, data_page_size=512, write_batch_size=64,
                   write_page_index=False)
    return path


def _nested_chunks(path: Path):
    with open_source(str(path)) as source:
        footer = read_footer(source)
        for row in footer.chunks:
            for chunk in row:
                if needs_level_decoding(chunk):
                    yield chunk, walk_chunk(source, chunk, footer.footer_start)


@pytest.mark.slow
@pytest.mark.parametrize("version,compression", [("1.0", "snappy"), ("2.0", "zstd"), ("2.0", "none")])
def test_page_groups_do_not_change_the_facts(tmp_path, monkeypatch, version, compression):
    path = _write(tmp_path / "n.parquet", version, compression)
    metadata = pq.ParquetFile(path).metadata
    results = {}
    for group in (1, 300, page_levels.LEVEL_GROUP):
        monkeypatch.setattr(page_levels, "LEVEL_GROUP", group)
        results[group] = [(chunk, *nested_levels(chunk, pages, with_values=True))
                          for chunk, pages in _nested_chunks(path)]
    checked = 0
    for (chunk, levels, sections), *others in zip(*results.values()):
        assert len(levels.rows) > 3
        # pyarrow's own counts for the chunk
        meta = metadata.row_group(chunk.row_group).column(chunk.column)
        assert int(levels.rows.sum()) == metadata.row_group(chunk.row_group).num_rows
        assert int(levels.defined.sum()) == meta.statistics.num_values
        assert int(levels.nulls.sum()) == meta.statistics.null_count
        for _, other, other_sections in others:
            for field in ("rows", "nulls", "defined", "def_histograms", "rep_histograms"):
                a, b = getattr(levels, field), getattr(other, field)
                assert (a is None and b is None) or np.array_equal(a, b), field
            assert other.split_record_page == levels.split_record_page
            assert [(s.count, bytes(s.data)) for s in other_sections] == \
                   [(s.count, bytes(s.data)) for s in sections]
        checked += 1
    assert checked >= 3


def test_bad_level_stream_is_named_by_its_page(tmp_path):
    path = _write(tmp_path / "n.parquet", "2.0", "none")
    chunk, pages = next((c, p) for c, p in _nested_chunks(path) if c.leaf.max_rep)
    page = next(p for p in pages.pages[3:] if p.num_values and p.rep_levels_size)
    data = bytearray(path.read_bytes())
    body = page.offset + page.header_size
    # Zero-length runs: a stream no reader accepts.
    data[body : body + page.rep_levels_size] = bytes(page.rep_levels_size)
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(bytes(data))
    with open_source(str(bad)) as source:
        footer = read_footer(source)
        pages = walk_chunk(source, footer.chunks[chunk.row_group][chunk.column], footer.footer_start)
    assert len(pages.pages) > 4 and sum(p.num_values for p in pages.pages) <= page_levels.LEVEL_GROUP
    with pytest.raises(MalformedFileError) as caught:
        nested_levels(chunk, pages)
    assert caught.value.offset == page.offset
