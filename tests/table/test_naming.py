"""Names of indexed copies (pageindex.table.naming): deterministic, new for every source and
option set, and carrying the options so a rerun can tell a copy it would not change by its name.
"""
from __future__ import annotations

from pageindex.index.bloom.options import bloom_options
from pageindex.index.marker import marker_value, options_key
from pageindex.table.naming import indexed_name, indexed_with, options_tag
from pageindex.version import __version__

AUTO = bloom_options("auto", 0.01, 1 << 20)


def test_options_key_is_the_marker_without_version_and_length():
    for args, kept in [((64, False), True), ((16, True), True), ((64, False, AUTO), True),
                       ((64, False, bloom_options("a,b c", 0.05, 4096)), False)]:
        key = options_key(*args, chunk_statistics=kept)
        marker = marker_value(__version__, *args, original_length=9, chunk_statistics=kept)
        assert marker == f"version={__version__};{key};original_length=9"
    assert options_key(64) == "truncate_length=64"
    assert options_key(64, chunk_statistics=False) == "truncate_length=64;chunk_statistics=kept"


def test_a_copy_names_the_options_it_was_indexed_with():
    name = indexed_name("p=c%20d/part-0.parquet", 1234, 64, False)
    assert name.startswith("p=c%20d/part-0.pageindex-") and name.endswith(".parquet")
    assert indexed_name("p=c%20d/part-0.parquet", 1234, 64, False) == name  # a rerun rewrites its orphan
    assert indexed_with(name) == options_tag(64, False)
    assert indexed_with("s3://b/t/" + name) == options_tag(64, False)
    others = [options_tag(16, False), options_tag(64, True), options_tag(64, False, AUTO),
              options_tag(64, False, chunk_statistics=False), options_tag(64, False, bloom_options("a", 0.01, 1 << 20))]
    assert len({options_tag(64, False), *others}) == 6
    # a copy of a copy (another option set, or --force) names the options of its own run
    again = indexed_name(name, 2000, 16, False)
    assert indexed_with(again) == options_tag(16, False) and again != name
    assert again.startswith("p=c%20d/part-0.pageindex-") and again.count(".pageindex-") == 1
    assert indexed_name(name, 2000, 64, False) not in (name, again)
    assert indexed_name("x.pageindex-0123456789abcdef.parquet", 9, 64, False).count(".pageindex-") == 1


def test_other_names_record_no_options():
    for path in ["part-0.parquet", "x.pageindex-0123456789abcdef.parquet",  # an older version's copy
                 "x.pageindex-0123456789abcdef-0123abcd.parquet.tmp", "x.pageindex-0123456789abcdef-0123abcd/y.parquet",
                 "x.pageindex-0123456789ABCDEF-0123abcd.parquet"]:
        assert indexed_with(path) is None, path
