"""The exact-scan bench (bench.scan): its per-kernel figures time the kernels the scan itself calls,
on flat and nested files."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.scan import kernel_figures
from pageindex.scan import encoded



@pytest.fixture
def called(monkeypatch) -> list[str]:
    """The names of the compiled kernels bench.scan takes, in the order it takes them."""
    names: list[str] = []
    real = encoded.kernels

    class Counting:
        def __init__(self, module):
            self.module = module

        def __getattr__(self, name):
            names.append(name)
            return getattr(self.module, name)

    monkeypatch.setattr(encoded, "kernels", lambda: Counting(real()))
    return names


def test_a_ranked_dictionary_is_timed_by_rank(tmp_path, called):
    """A string dictionary of few entries is ranked by the scan (each value a rank lookup): the
    bench times index_ranks over it, not the byte comparisons of an unranked dictionary."""
    path = tmp_path / "dictionary.parquet"
    pq.write_table(pa.table({"s": [f"v{i % 20:02d}" for i in range(20_000)]}), path)
    figures = kernel_figures(str(path))
    assert "index_ranks" in called and "index_bytes" not in called
    assert figures["dictionary indices"] > 0


def test_nested_levels_are_timed(tmp_path, called):
    path = tmp_path / "nested.parquet"
    pq.write_table(pa.table({"l": [[i, None, i + 1] if i % 7 else None for i in range(20_000)]}), path)
    figures = kernel_figures(str(path))
    assert figures["nested levels"] > 0 and figures["dictionary indices"] > 0
