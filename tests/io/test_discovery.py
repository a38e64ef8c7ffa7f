"""pageindex.io.discovery: URL normalisation, hidden entries, table-format detection, expansion."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from pageindex.errors import StorageError
from pageindex.io.discovery import (
    InputFile,
    discover,
    is_hidden,
    normalize_url,
    table_format,
)
from pageindex.io.storage import resolve


@pytest.mark.parametrize("url, expected", [
    ("s3a://bucket/a/b.parquet", "s3://bucket/a/b.parquet"),
    ("s3n://bucket/a/", "s3://bucket/a/"),
    ("s3://bucket/a", "s3://bucket/a"),
    ("file:///tmp/x/y.parquet", "/tmp/x/y.parquet"),
    ("/tmp/x/y.parquet", "/tmp/x/y.parquet"),
    ("relative/dir", "relative/dir"),
    ("gs://bucket/k", "gs://bucket/k"),
])
def test_normalize_url(url, expected):
    assert normalize_url(url) == expected


def test_s3a_and_s3_name_the_same_object():
    storage = {"client_kwargs": {"endpoint_url": "http://127.0.0.1:1"}}
    fs_a, path_a = resolve("s3a://bucket/dir/key.parquet", storage_options=storage)
    fs_s, path_s = resolve("s3://bucket/dir/key.parquet", storage_options=storage)
    assert path_a == path_s == "bucket/dir/key.parquet"
    assert fs_a is fs_s


@pytest.mark.parametrize("url", ["file:///tmp/x/y", "file:/tmp/x/y", "/tmp/x/y"])
def test_local_urls(url):
    # file:/ (one slash) is how Hadoop and Spark's catalog print local locations
    fs, path = resolve(url)
    assert path == "/tmp/x/y"
    assert "file" in fs.protocol


@pytest.mark.parametrize("relative, hidden", [
    ("_SUCCESS", True),
    ("._SUCCESS.crc", True),
    (".part-00000.parquet.crc", True),
    ("day=1/_SUCCESS", True),
    ("day=1/.part-0.parquet.crc", True),
    ("_temporary/0/task_1/part-0.parquet", True),
    ("day=1/_temporary/0/part-0.parquet", True),
    ("_delta_log/00000000000000000010.checkpoint.parquet", True),
    ("day=1/.part-0.parquet.pageindex-tmp-0123abcd", True),
    ("part-00000.parquet", False),
    ("day=1/part-00000.parquet", False),
    ("day=1/hour=2/part_00000.parquet", False),  # an underscore inside a name is fine
    ("my_table/part-0.parquet", False),
])
def test_is_hidden(relative, hidden):
    assert is_hidden(relative) is hidden


def touch(path: Path, data: bytes = b"PAR1") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.fixture
def local_fs():
    return resolve("/")[0]


def test_table_format_at_root_and_below(tmp_path, local_fs):
    delta = tmp_path / "delta_tbl"
    touch(delta / "_delta_log" / "00000000000000000000.json", b"{}")
    part = delta / "day=2024-01-01" / "hour=03"
    touch(part / "part-0.parquet")
    assert table_format(local_fs, str(delta)) == "delta"
    assert table_format(local_fs, str(part)) == "delta"           # nested partitions below the root
    assert table_format(local_fs, str(part) + "/") == "delta"

    iceberg = tmp_path / "ice"
    touch(iceberg / "metadata" / "v1.metadata.json", b"{}")
    touch(iceberg / "data" / "p=1" / "x.parquet")
    assert table_format(local_fs, str(iceberg / "data" / "p=1")) == "iceberg"

    hudi = tmp_path / "hudi"
    touch(hudi / ".hoodie" / "hoodie.properties", b"x")
    touch(hudi / "p=1" / "x.parquet")
    assert table_format(local_fs, str(hudi / "p=1")) == "hudi"

    plain = tmp_path / "plain" / "p=1"
    touch(plain / "x.parquet")
    touch(tmp_path / "plain" / "metadata" / "notes.json", b"{}")  # not Iceberg: no *.metadata.json
    assert table_format(local_fs, str(plain)) is None
    assert table_format(local_fs, str(tmp_path / "plain")) is None


def test_discover_partition_of_delta_table(tmp_path):
    delta = tmp_path / "delta_tbl"
    touch(delta / "_delta_log" / "00000000000000000000.json", b"{}")
    f = touch(delta / "day=1" / "part-0.parquet")
    found = discover([str(delta / "day=1")])
    assert found.table_formats == ((str(delta / "day=1"), "delta"),)
    assert found.files == (InputFile(str(f), 4, "part-0.parquet", str(f.stat().st_mtime_ns)),)
    found = discover([str(f)])  # a single data file of the table
    assert [kind for _, kind in found.table_formats] == ["delta"]


def test_discover_skips_hidden_and_keeps_relative_paths(tmp_path):
    root = tmp_path / "events"
    data = [touch(root / "day=1" / "part-0.parquet"), touch(root / "day=2" / "hour=1" / "part-0.parquet")]
    touch(root / "_SUCCESS", b"")
    touch(root / "day=1" / ".part-0.parquet.crc", b"crc")
    touch(root / "_temporary" / "0" / "part-9.parquet")
    touch(root / ".hive-staging_1" / "part-8.parquet")
    found = discover([str(root)])
    assert found.table_formats == ()
    assert [f.url for f in found.files] == sorted(str(p) for p in data)
    assert [f.relative for f in found.files] == ["day=1/part-0.parquet", "day=2/hour=1/part-0.parquet"]
    # a file:// URL and a trailing slash name the same files
    assert discover([f"file://{root}/"]).files == found.files


def test_discover_glob_skips_hidden(tmp_path):
    root = tmp_path / "events"
    touch(root / "day=1" / "part-0.parquet")
    touch(root / "_SUCCESS", b"")
    touch(root / "_temporary" / "0" / "part-9.parquet")
    found = discover([f"{root}/*"])
    assert [f.url for f in found.files] == [str(root / "day=1" / "part-0.parquet")]


def test_discover_overlapping_inputs_once(tmp_path):
    root = tmp_path / "events"
    f = touch(root / "day=1" / "part-0.parquet")
    found = discover([str(root), str(f), f"{root}/day=*/*.parquet"])
    assert [x.url for x in found.files] == [str(f)]


def test_discover_missing_inputs(tmp_path):
    with pytest.raises(StorageError):
        discover([str(tmp_path / "missing")])
    with pytest.raises(StorageError):
        discover([str(tmp_path / "nothing-*.parquet")])


def test_discover_s3(s3fs_fs, s3_bucket, s3_storage_options):
    fs, bucket = s3fs_fs, s3_bucket
    for key in ("tbl/day=1/part-0.parquet", "tbl/day=2/part-0.parquet", "tbl/_SUCCESS",
                "tbl/_temporary/0/part-9.parquet", "tbl/day=1/.part-0.parquet.crc",
                "delta/_delta_log/00000000000000000000.json", "delta/day=1/hour=2/part-0.parquet"):
        fs.pipe(f"{bucket}/{key}", b"PAR1")
    for url in (f"s3://{bucket}/tbl", f"s3a://{bucket}/tbl/"):
        found = discover([url], s3_storage_options)
        assert [f.url for f in found.files] == [f"s3://{bucket}/tbl/day=1/part-0.parquet",
                                                f"s3://{bucket}/tbl/day=2/part-0.parquet"]
        assert [f.relative for f in found.files] == ["day=1/part-0.parquet", "day=2/part-0.parquet"]
        assert found.table_formats == ()
    for sub in ("delta", "delta/day=1", "delta/day=1/hour=2", "delta/day=1/hour=2/part-0.parquet"):
        found = discover([f"s3a://{bucket}/{sub}"], s3_storage_options)
        assert [kind for _, kind in found.table_formats] == ["delta"], sub


def test_discover_s3_sees_objects_written_after_an_earlier_discover(s3fs_fs, s3_bucket,
                                                                     s3_storage_options):
    """One driver, two runs: what was written in between must be seen (no stale listing)."""
    fs, bucket = s3fs_fs, s3_bucket
    fs.pipe(f"{bucket}/a/part-0.parquet", b"PAR1")
    assert len(discover([f"s3://{bucket}/a"], s3_storage_options).files) == 1
    fs.pipe(f"{bucket}/b/part-0.parquet", b"PAR1")  # new data under a new prefix
    assert [f.url for f in discover([f"s3://{bucket}/b"], s3_storage_options).files] == [
        f"s3://{bucket}/b/part-0.parquet"]


def _linked_lake(root: Path) -> Path:
    """lake/a/f.parquet; lake/linked -> ../other (other/b/g.parquet); lake/twice -> ../other (the
    same files by a second link); lake/a/up -> .. (a cycle); lake/flink.parquet -> a/f.parquet."""
    lake = root / "lake"
    (lake / "a").mkdir(parents=True)
    (root / "other" / "b").mkdir(parents=True)
    (lake / "a" / "f.parquet").write_bytes(b"f" * 10)
    (root / "other" / "b" / "g.parquet").write_bytes(b"g" * 20)
    (lake / "linked").symlink_to("../other", target_is_directory=True)
    (lake / "twice").symlink_to("../other", target_is_directory=True)
    (lake / "a" / "up").symlink_to("..", target_is_directory=True)
    (lake / "flink.parquet").symlink_to("a/f.parquet")
    return lake


def test_discover_follows_directory_links_once_each_and_stops_at_cycles(tmp_path, caplog):
    lake = _linked_lake(tmp_path)
    found = discover([str(lake)], follow_links=True)
    assert [(f.relative, f.size) for f in found.files] == [("a/f.parquet", 10), ("linked/b/g.parquet", 20)]
    cycles = [r.getMessage() for r in caplog.records if "cycle" in r.getMessage()]
    assert len(cycles) == 1 and str(lake / "a" / "up") in cycles[0]
    # A link named with its target as inputs, and a second run: the same files, listed once.
    caplog.clear()
    again = discover([str(lake / "twice"), str(tmp_path / "other"), str(lake)], follow_links=True)
    assert [f.url for f in again.files] == [str(lake / "a" / "f.parquet"), str(lake / "linked" / "b" / "g.parquet")]
    assert len([r for r in caplog.records if "cycle" in r.getMessage()]) == 1


def test_discover_link_to_a_file_kept_when_it_is_the_only_path(tmp_path):
    lake = _linked_lake(tmp_path)
    (lake / "a" / "f.parquet").rename(tmp_path / "elsewhere.parquet")
    (lake / "flink.parquet").unlink()
    (lake / "flink.parquet").symlink_to(tmp_path / "elsewhere.parquet")
    assert [f.relative for f in discover([str(lake)], follow_links=True).files] == ["flink.parquet",
                                                                                    "linked/b/g.parquet"]


def test_discover_broken_link_is_skipped_with_a_warning(tmp_path, caplog):
    lake = _linked_lake(tmp_path)
    (lake / "gone.parquet").symlink_to(lake / "missing.parquet")
    assert [f.relative for f in discover([str(lake)], follow_links=True).files] == ["a/f.parquet",
                                                                                    "linked/b/g.parquet"]
    assert any("gone.parquet" in r.getMessage() and "cannot follow" in r.getMessage() for r in caplog.records)


def test_discover_skips_links_leading_outside_the_input(tmp_path, caplog):
    """A lake's links to files and directories outside its real path (and to /etc) are skipped,
    one warning each; links that stay inside are followed; --follow-links follows them all."""
    lake = _linked_lake(tmp_path)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "victim.parquet").write_bytes(b"v" * 30)
    (lake / "link.parquet").symlink_to("../outside/victim.parquet")
    (lake / "etc").symlink_to("/etc", target_is_directory=True)
    (lake / "inner").symlink_to("a", target_is_directory=True)
    found = discover([str(lake)])
    assert [f.relative for f in found.files] == ["a/f.parquet"]  # flink and inner/f: the same file
    skipped = sorted(r.getMessage() for r in caplog.records if "outside the input" in r.getMessage())
    assert skipped == [
        f"pageindex: warning: {lake}/{name}: skipped: a symbolic link to {target}, outside the input "
        f"{lake} (--follow-links follows it)"
        for name, target in (("etc", os.path.realpath("/etc")), ("link.parquet", tmp_path / "outside" / "victim.parquet"),
                             ("linked", tmp_path / "other"), ("twice", tmp_path / "other"))]
    # A glob's match that is such a link, and a glob below a linked directory that stays inside.
    caplog.clear()
    assert [f.relative for f in discover([str(lake / "*.parquet")]).files] == ["flink.parquet"]
    assert [r.getMessage() for r in caplog.records if "outside the input" in r.getMessage()] == [
        f"pageindex: warning: {lake}/link.parquet: skipped: a symbolic link to "
        f"{tmp_path / 'outside' / 'victim.parquet'}, outside the input {lake} (--follow-links follows it)"]
    assert [f.relative for f in discover([str(lake / "inner" / "*.parquet")]).files] == ["f.parquet"]
    # An input that is itself a link: its real path is the input's.
    assert [f.relative for f in discover([str(lake / "linked")]).files] == ["b/g.parquet"]
    assert [f.relative for f in discover([str(lake / "link.parquet")]).files] == ["link.parquet"]
    followed = discover([str(lake)], follow_links=True)
    assert {"link.parquet", "linked/b/g.parquet"} <= {f.relative for f in followed.files}


def test_listing_gives_each_file_its_version(tmp_path):
    """The run state's change detection: a local file's mtime in ns, from a directory's listing,
    a glob's and a named file's alike (S3's ETag: tests/system/test_state_requests.py)."""
    (tmp_path / "d").mkdir()
    for name in ("a.parquet", "b.parquet"):
        (tmp_path / "d" / name).write_bytes(b"x" * 10)
    os.utime(tmp_path / "d" / "b.parquet", ns=(1, 1_234_567_891))
    expected = {str(tmp_path / "d" / n): str((tmp_path / "d" / n).stat().st_mtime_ns) for n in ("a.parquet", "b.parquet")}
    for inputs in ([str(tmp_path / "d")], [str(tmp_path / "d" / "*.parquet")],
                   [str(tmp_path / "d" / "a.parquet"), str(tmp_path / "d" / "b.parquet")]):
        assert {f.url: f.version for f in discover(inputs).files} == expected, inputs
    assert expected[str(tmp_path / "d" / "b.parquet")] == "1234567891"
