"""whole_file: what it writes appears whole or not at all, on a local disk and on S3."""
from __future__ import annotations

import pytest
from fsspec.implementations.local import LocalFileSystem

from pageindex.io.commit import TEMP_TAG
from pageindex.io.whole_file import whole_file


class Stopped(Exception):
    pass


def test_local_file_appears_when_written_and_not_before(tmp_path):
    path = tmp_path / "f.bin"
    with whole_file(LocalFileSystem(), str(path)) as out:
        out.write(b"abc")
        assert not path.exists()  # readers see nothing until the block ends
    assert path.read_bytes() == b"abc"
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]


@pytest.mark.parametrize("text", [False, True])
def test_local_error_midway_keeps_the_old_file_and_leaves_no_temporary(tmp_path, text):
    path = tmp_path / "f.txt"
    path.write_bytes(b"old")
    with pytest.raises(Stopped), whole_file(LocalFileSystem(), str(path), text=text) as out:
        out.write("new, half" if text else b"new, half")
        raise Stopped
    assert path.read_bytes() == b"old"
    assert not [p for p in tmp_path.iterdir() if TEMP_TAG in p.name]


def test_s3_object_appears_whole_and_not_after_an_error(s3fs_fs):
    path = f"{s3fs_fs.test_bucket}/report/part-1.jsonl"
    with pytest.raises(Stopped), whole_file(s3fs_fs, path, text=True) as out:
        out.write("one line\n")
        raise Stopped
    s3fs_fs.invalidate_cache()
    assert not s3fs_fs.exists(path)
    with whole_file(s3fs_fs, path, text=True) as out:
        out.write("one line\n")
    s3fs_fs.invalidate_cache()
    assert s3fs_fs.cat_file(path) == b"one line\n"
