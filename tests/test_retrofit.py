"""pageindex.retrofit: the per-row-group loop holds one decoded chunk at a time."""
from __future__ import annotations

import gc

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pageindex.retrofit import retrofit
from pageindex.scan import chunk_scan, encoded
from pageindex.verify import verify


def _note_at_each_decode(monkeypatch, note, step: str = "decode"):
    """A list that gets note() each time a chunk is about to be decoded by Arrow (or, with
    step="page_extrema", read from its encoded pages). Arrow decodes every chunk unless asked."""
    if step == "decode":
        monkeypatch.setenv(encoded.ENV, encoded.ARROW)
    notes = []
    original = getattr(chunk_scan, step)

    def recording(*args, **kwargs):
        notes.append(note())
        return original(*args, **kwargs)

    monkeypatch.setattr(chunk_scan, step, recording)
    return notes


def test_a_decoded_chunk_is_released_before_the_next_one_decodes(tmp_path, monkeypatch):
    rows = 400_000  # 3.2 MB per int64 column: each chunk is decoded on its own, not batched
    rng = np.random.default_rng(7)
    table = pa.table({f"c{i}": pa.array(rng.integers(0, 1 << 62, rows)) for i in range(3)})
    path = tmp_path / "big_chunks.parquet"
    pq.write_table(table, path, compression="none", use_dictionary=False, write_page_index=False)
    held_before_decode = _note_at_each_decode(monkeypatch, pa.total_allocated_bytes)
    held_by_earlier_tests = pa.total_allocated_bytes()  # the pool is per process, not per test
    retrofit(str(path), dry_run=True)
    assert len(held_before_decode) == 3
    # Each column decodes to 3.2 MB; none of it may still be held when the next one starts.
    assert max(held_before_decode) - held_by_earlier_tests < 1_000_000, (held_by_earlier_tests, held_before_decode)


def test_retrofit_and_verify_run_with_the_collector_paused(tmp_path, monkeypatch):
    path = tmp_path / "one_column.parquet"
    pq.write_table(pa.table({"a": list(range(100))}), path)
    collector_on_while_decoding = _note_at_each_decode(monkeypatch, gc.isenabled)
    gc.enable()
    retrofit(str(path))
    assert verify(str(path)).ok
    assert collector_on_while_decoding == [False, False]  # retrofit's decode, then verify's
    assert gc.isenabled()


def test_encoded_scans_run_with_the_collector_paused(tmp_path, monkeypatch):
    path = tmp_path / "one_column.parquet"
    pq.write_table(pa.table({"a": list(range(100))}), path)
    monkeypatch.setenv(encoded.ENV, encoded.COMPILED)
    collector_on_while_reading = _note_at_each_decode(monkeypatch, gc.isenabled, "page_extrema")
    gc.enable()
    retrofit(str(path))
    assert collector_on_while_reading == [False]
    assert gc.isenabled()
