"""Fixtures for the index tests: bloom filter tests run on both paths (numpy and compiled)."""
from __future__ import annotations

from types import ModuleType

import pytest

from pageindex.index.bloom import hashing
from pageindex.index.bloom.path import COMPILED, ENV, NUMPY, kernel


@pytest.fixture(params=[NUMPY, COMPILED])
def bloom_path(request, monkeypatch) -> str:
    """Forces one path for the test (PAGEINDEX_BLOOM_KERNEL)."""
    monkeypatch.setenv(ENV, request.param)
    return request.param


@pytest.fixture
def xxh64(bloom_path) -> ModuleType:
    """The XXH64 functions of the path in force."""
    return kernel() or hashing
