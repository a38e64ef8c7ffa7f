"""pageindex.scan.values: a chunk's synthesized file decodes to the original chunk's values."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from pageindex.format.footer import read_footer
from pageindex.io.storage import open_source
from pageindex.scan.page_walk import walk_chunk
from pageindex.scan.synthetic import Synthesized
from pageindex.scan.values import bare_path, decode, synthesize


def test_synthesized_chunk_decodes_to_the_original_values(tmp_path):
    values = pa.array([None if i % 11 == 0 else i * 7 for i in range(20_000)], pa.int64())
    path = tmp_path / "v.parquet"
    pq.write_table(pa.table({"v": values}), path, data_page_size=4096, write_page_index=False)
    with open_source(str(path)) as source:
        footer = read_footer(source)
        chunk = footer.chunks[0][0]
        pages = walk_chunk(source, chunk, footer.footer_start)
    rows = footer.row_group_rows[0]
    file = synthesize([bare_path(chunk)], [(chunk, pages)], rows, footer.created_by_raw)
    assert isinstance(file, Synthesized) and any(part is pages.data for part in file.parts)
    assert decode(file, rows).combine_chunks().equals(values)
