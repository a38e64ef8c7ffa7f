"""Fixtures for the index tests: bloom filter tests run on both paths (numpy and compiled)."""
from __future__ import annotations

from types import ModuleType

import pytest

from pageindex.index.bloom import hashing
from pageindex.index.bloom.path import ENV, NUMBA, NUMPY, kernel


@pytest.fixture(params=[NUMPY, NUMBA])
def bloom_path(request, monkeypatch) -> str:
    """Forces one path for the test (PAGEINDEX_BLOOM_KERNEL); the compiled one needs numba."""
    if request.param == NUMBA:
        pytest.importorskip("numba")
    monkeypatch.setenv(ENV, request.param)
    return request.param


@pytest.fixture
def xxh64(bloom_path) -> ModuleType:
    """The XXH64 functions of the path in force."""
    return kernel() or hashing
