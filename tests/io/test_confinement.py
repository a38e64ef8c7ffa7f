"""Confinement: a table's relative paths and URLs normalised against its root, local links
resolved against an input's real path."""
from __future__ import annotations

import os

import pytest

from pageindex.io.confinement import below, escapes, outside


@pytest.mark.parametrize("relative, out", [
    ("part-0.parquet", False), ("p=a/part-0.parquet", False), ("a/../b.parquet", False),
    ("./x/./y.parquet", False), ("../x.parquet", True), ("..", True), ("a/../../x.parquet", True),
    ("/etc/passwd", True), ("a/b/../../../x", True), ("..x/y.parquet", False),
])
def test_escapes(relative, out):
    assert escapes(relative) is out


@pytest.mark.parametrize("url, inside", [
    ("s3://b/t/data/x.parquet", True), ("s3://b/t/../x.parquet", False), ("s3://b/t2/x.parquet", False),
    ("s3://b/t", False), ("s3a://b/t/x.parquet", False), ("/b/t/x.parquet", False),
    ("s3://b/t/a/../../t/x.parquet", True),
])
def test_below(url, inside):
    assert below("s3://b/t", url) is inside


def test_outside_resolves_links(tmp_path):
    (tmp_path / "lake" / "a").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "lake" / "in").symlink_to("a", target_is_directory=True)
    (tmp_path / "lake" / "out").symlink_to("../elsewhere", target_is_directory=True)
    (tmp_path / "lakeside").mkdir()  # a sibling whose name starts like the root's
    (tmp_path / "lake" / "side").symlink_to("../lakeside", target_is_directory=True)
    root = os.path.realpath(tmp_path / "lake")
    assert outside(str(tmp_path / "lake" / "in"), root) is None
    assert outside(str(tmp_path / "lake" / "out"), root) == os.path.realpath(tmp_path / "elsewhere")
    assert outside(str(tmp_path / "lake" / "side"), root) == os.path.realpath(tmp_path / "lakeside")
    assert outside(str(tmp_path / "lake" / "out"), None) is None
