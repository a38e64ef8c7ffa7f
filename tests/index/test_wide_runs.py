"""Wide row groups of small chunks: read a run at a time (compute._held_runs, Source.holding) and
their small byte-array dictionaries ranked by the compiled sort give pyarrow's own page index.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex.format.footer import read_footer
from pageindex.index import compute, parallel
from pageindex.index.reader import read_column_index, read_offset_index
from pageindex.io import storage
from pageindex.io.storage import open_source
from pageindex.retrofit import retrofit
from tests.helpers.strip import strip_page_index


ROWS = 600
ROW_GROUP = 200
# Byte strings that order unlike their first bytes would: prefixes, zero and high bytes, ties.
WORDS = [b"", b"a", b"ab", b"ab\x00", b"b", b"\x7f", b"\x80", b"\xff", b"\xff\x00", b"abc" * 5, b"zz"]

WRITES = {
    "dict_v1_snappy": {"use_dictionary": True, "data_page_version": "1.0", "compression": "snappy"},
    "dict_v2_zstd": {"use_dictionary": True, "data_page_version": "2.0", "compression": "zstd"},
    "plain_v1_none": {"use_dictionary": False, "data_page_version": "1.0", "compression": "none"},
    "dict_v1_small_pages": {"use_dictionary": True, "data_page_version": "1.0", "compression": "snappy",
                            "data_page_size": 512, "write_batch_size": 50},
}


def _table(seed: int) -> pa.Table:
    """Many small columns: integers, doubles and byte strings (few distinct: ranked
    dictionaries), some with nulls, some with a null page's worth of nulls."""
    rng = np.random.default_rng(seed)
    columns = {}
    for i in range(40):
        kind = i % 4
        nulls = rng.random(ROWS) < (0.0 if i % 3 == 0 else 0.2)
        if i % 7 == 6:
            nulls[:ROW_GROUP] = True  # a row group of this column holds only nulls
        if kind == 0:
            values = pa.array(rng.integers(-(1 << 40), 1 << 40, ROWS), pa.int64(), mask=nulls)
        elif kind == 1:
            values = pa.array(rng.normal(size=ROWS), pa.float64(), mask=nulls)
        else:
            words = rng.choice(len(WORDS), ROWS, replace=True)
            values = pa.array([WORDS[w] for w in words], pa.binary(), mask=nulls)
        columns[f"c{i:02d}"] = values
    return pa.table(columns)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """Per writer variant: pyarrow's twin with its own page index, and the same file without it."""
    directory = tmp_path_factory.mktemp("wide")
    out = {}
    for seed, (name, options) in enumerate(WRITES.items()):
        twin = directory / f"{name}-twin.parquet"
        pq.write_table(_table(seed), twin, row_group_size=ROW_GROUP, write_page_index=True,
                       store_schema=False, **options)
        out[name] = (twin, strip_page_index(twin, directory / f"{name}.parquet"))
    return out


def _indexes(path: Path) -> dict:
    with open_source(str(path)) as source:
        footer = read_footer(source)
        return {(chunk.row_group, chunk.leaf.dotted): (read_offset_index(source, chunk),
                                                      read_column_index(source, chunk))
                for row in footer.chunks for chunk in row}


@pytest.mark.parametrize("name", WRITES)
@pytest.mark.parametrize("threads", [1, 2])
def test_runs_of_small_chunks_give_pyarrows_index(files, tmp_path, monkeypatch, name, threads):
    twin, plain = files[name]
    runs = []
    holding = storage.Source.holding

    def counted(self, offset, length, purpose="data"):
        runs.append(length)
        return holding(self, offset, length, purpose)

    monkeypatch.setattr(storage.Source, "holding", counted)
    monkeypatch.setattr(parallel, "MIN_MEAN_CHUNK_BYTES", 0)  # a pool for chunks this small too
    out = tmp_path / "out.parquet"
    retrofit(str(plain), str(out), threads=threads)
    ours, theirs = _indexes(out), _indexes(twin)
    # Each row group's 40 small chunks come in one or a few reads, not one each.
    assert 3 <= len(runs) <= 12, runs
    assert ours.keys() == theirs.keys()
    for key, (oi, ci) in ours.items():
        their_oi, their_ci = theirs[key]
        assert oi.pages == their_oi.pages, key
        assert ci is not None and their_ci is not None, key
        assert (ci.null_pages, ci.min_values, ci.max_values, ci.null_counts, ci.boundary_order) == (
            their_ci.null_pages, their_ci.min_values, their_ci.max_values, their_ci.null_counts,
            their_ci.boundary_order), key


@pytest.mark.parametrize("name", WRITES)
def test_runs_change_no_byte(files, tmp_path, monkeypatch, name):
    """Chunks read a run at a time or each by itself: the same output, byte for byte."""
    _, plain = files[name]
    outputs = []
    for hold in (compute.HOLD_CHUNK_BYTES, 0):
        monkeypatch.setattr(compute, "HOLD_CHUNK_BYTES", hold)
        out = tmp_path / f"out-{hold}.parquet"
        retrofit(str(plain), str(out))
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]


def test_a_bad_page_in_a_run_is_reported_as_by_itself(files, tmp_path, monkeypatch):
    """A page header broken in a chunk inside a run: the same error, naming the same chunk."""
    _, plain = files["dict_v1_snappy"]
    with open_source(str(plain)) as source:
        chunk = read_footer(source).chunks[1][17]
    data = bytearray(plain.read_bytes())
    data[chunk.start] = 0xFF  # not a field header a PageHeader can start with
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(bytes(data))
    errors = []
    for hold in (compute.HOLD_CHUNK_BYTES, 0):
        monkeypatch.setattr(compute, "HOLD_CHUNK_BYTES", hold)
        with pytest.raises(Exception) as err:
            retrofit(str(bad), str(tmp_path / "out.parquet"))
        errors.append((type(err.value), str(err.value)))
    assert errors[0] == errors[1]
    assert "c17" in errors[0][1]


def test_held_runs_split_at_big_chunks_gaps_and_the_cap(monkeypatch):
    """Runs: consecutive small chunks, at most HOLD_RUN_BYTES long, no gap over HOLD_GAP_BYTES;
    a big chunk (or one placed nowhere) alone."""
    from types import SimpleNamespace

    def planned(start, size):
        return SimpleNamespace(chunk=SimpleNamespace(start=start, total_compressed_size=size))

    monkeypatch.setattr(compute, "HOLD_RUN_BYTES", 1000)
    monkeypatch.setattr(compute, "HOLD_CHUNK_BYTES", 500)
    monkeypatch.setattr(compute, "HOLD_GAP_BYTES", 10)
    row = [planned(4, 100), planned(104, 100), planned(210, 100),  # a gap of 6: one run
           planned(400, 100),  # a gap of 90: a new run
           planned(500, 600),  # big: alone
           planned(1100, 400), planned(1500, 400), planned(1900, 400),  # the cap splits these
           planned(-5, 10)]  # nowhere: alone
    spans = [[(p.chunk.start, p.chunk.total_compressed_size) for p in run] for run in compute._held_runs(row)]
    assert spans == [[(4, 100), (104, 100), (210, 100)], [(400, 100)], [(500, 600)],
                     [(1100, 400), (1500, 400)], [(1900, 400)], [(-5, 10)]]
