"""pageindex.scan.plain_values: PLAIN number sections read in place are, bit for bit, what Arrow
decodes from the same sections, on every corpus file and on pages written here."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex.errors import MalformedFileError, PageIndexError
from pageindex.format.footer import read_footer
from pageindex.io.storage import open_source
from pageindex.scan import values
from pageindex.scan.page_levels import nested_levels
from pageindex.scan.page_walk import walk_chunk
from pageindex.scan.plain_values import ARROW_TYPES, plain_values, readable
from tests.helpers.corpus import corpus_files


def _sections(path: Path):
    """(chunk, head, section, created_by) for each section with values of every number chunk."""
    with open_source(str(path)) as source:
        footer = read_footer(source)
        for row in footer.chunks:
            for chunk in row:
                if chunk.leaf.physical_type not in ARROW_TYPES:
                    continue
                pages = walk_chunk(source, chunk, footer.footer_start)
                _, sections = nested_levels(chunk, pages, with_values=True)
                head = values.sections_head(chunk, pages, sections)
                for section in sections:
                    if section.count:
                        yield chunk, head, section, footer.created_by_raw


def _arrow(chunk, head, section, created_by) -> pa.Array:
    file = values.synthesize_values(chunk, head, [section], created_by)
    return values.decode(file, section.count).combine_chunks()


def _bits(array: pa.Array) -> bytes:
    width = array.type.bit_width // 8
    return array.buffers()[1].to_pybytes()[array.offset * width : (array.offset + len(array)) * width]


def _compare(path: Path) -> int:
    compared = 0
    for chunk, head, section, created_by in _sections(path):
        if not readable(chunk.leaf.physical_type, section):
            continue
        got = plain_values(chunk.leaf.physical_type, chunk.codec, section)
        want = _arrow(chunk, head, section, created_by)
        assert got.type == want.type and _bits(got) == _bits(want), (path.name, chunk.leaf.dotted)
        compared += 1
    return compared


def test_corpus_sections_match_arrow():
    compared = {p.name: _compare(p) for p in corpus_files("candidate") + corpus_files("oracle")}
    # The corpus has PLAIN numbers from several writers, in v1 and v2 pages.
    assert sum(1 for n in compared.values() if n) >= 10, compared


@pytest.mark.parametrize("version,compression", [("1.0", "snappy"), ("2.0", "zstd"), ("2.0", "none"),
                                                 ("1.0", "none"), ("2.0", "gzip")])
def test_written_sections_match_arrow(tmp_path, version, compression):
    rng = np.random.default_rng(3)
    n = 5000
    floats = rng.normal(size=n)
    floats[::7] = np.nan
    floats[::11] = -0.0
    table = pa.table({
        "i32": pa.array(rng.integers(-2**31, 2**31, n, dtype=np.int32), mask=rng.random(n) < 0.2),
        "i64": rng.integers(-2**63, 2**63 - 1, n, dtype=np.int64),
        "f32": pa.array(floats.astype(np.float32), mask=rng.random(n) < 0.1),
        "f64": floats,
        "nested": pa.array([[1.5, None, 2.5]] * (n // 2) + [None] * (n - n // 2), pa.list_(pa.float64())),
    })
    path = tmp_path / "p.parquet"
    pq.write_table(table, path, data_page_version=version, compression=compression, use_dictionary=False,
                   data_page_size=2048)
    assert _compare(path) >= 5 * 4


def test_too_few_value_bytes_fail_as_in_arrow(tmp_path):
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"x": np.arange(100, dtype=np.int64)}), path, use_dictionary=False,
                   compression="none", data_page_version="2.0")
    chunk, head, section, created_by = next(_sections(path))
    short = replace(section, data=section.data[:-8], uncompressed_size=section.uncompressed_size - 8)
    assert readable(chunk.leaf.physical_type, short)
    with pytest.raises(MalformedFileError, match="too few for 100 values"):
        plain_values(chunk.leaf.physical_type, chunk.codec, short)
    with pytest.raises(PageIndexError):
        _arrow(chunk, head, short, created_by)


def test_uncompressed_flag_with_compressed_bytes_is_left_to_arrow(tmp_path):
    """A v2 page may say its values are stored uncompressed yet hold compressed bytes (a known
    writer bug): the sizes disagree, and such a section is not read in place."""
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"x": np.zeros(1000, dtype=np.int64)}), path, use_dictionary=False,
                   compression="snappy", data_page_version="2.0")
    chunk, _, section, _ = next(_sections(path))
    assert section.compressed and readable(chunk.leaf.physical_type, section)
    assert not readable(chunk.leaf.physical_type, replace(section, compressed=False))
