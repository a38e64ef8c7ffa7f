"""pageindex.io.commit: atomic local replace, temp-file hygiene, concurrent modification detection."""
from __future__ import annotations

import errno
import fcntl
import importlib
import mmap
import os
import posixpath
import stat
import tempfile
import threading
from pathlib import Path

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pageindex
import pageindex.io.commit as commit_mod
import pageindex.io.prefix_copy as copy_mod
from pageindex.errors import ConcurrentModificationError, StorageError
from pageindex.io.storage import Source
from pageindex.verify import verify


@pytest.fixture
def src(tmp_path) -> Path:
    path = tmp_path / "data" / "t.parquet"
    path.parent.mkdir()
    table = pa.table({"k": np.arange(20_000, dtype=np.int64), "s": [f"v{i}" for i in range(20_000)]})
    pq.write_table(table, path, data_page_size=4096, write_page_index=False)
    return path


def _kept_prefix(path: Path) -> int:
    """What a retrofit of a never-indexed file copies: the whole file, its footer included."""
    return path.stat().st_size


def _on_ext_filesystem(directory: Path) -> bool:
    """Whether `directory` sits on ext2/3/4, by the mount table (the reference for
    prefix_copy._copies_through_page_cache, which asks the kernel for the filesystem's magic)."""
    device = os.stat(directory).st_dev
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        major, minor = (int(n) for n in fields[2].split(":"))
        fstype = fields[fields.index("-") + 1]
        if os.makedev(major, minor) == device:
            return fstype in ("ext2", "ext3", "ext4")
    return False


def leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if commit_mod.TEMP_TAG in p.name]


def test_in_place_atomic_replace(src, monkeypatch):
    original = src.read_bytes()
    inode = src.stat().st_ino
    seen = {}
    real_exchange = commit_mod._exchange

    def spying_exchange(a, b):
        # at the moment of the swap the original is untouched and the temp file is complete
        seen["temp"] = os.path.basename(a)
        seen["dst_bytes_at_rename"] = Path(b).read_bytes()
        seen["temp_size"] = os.path.getsize(a)
        return real_exchange(a, b)

    monkeypatch.setattr(commit_mod, "_exchange", spying_exchange)
    result = pageindex.retrofit(str(src))
    assert result.status == "indexed" and result.output == str(src)
    assert seen["dst_bytes_at_rename"] == original
    assert seen["temp"].startswith(".") and commit_mod.TEMP_TAG in seen["temp"]  # hidden sibling
    assert seen["temp_size"] == src.stat().st_size == result.bytes_out
    assert src.stat().st_ino != inode  # replaced by rename, never rewritten in place
    assert leftovers(src.parent) == []
    assert verify(str(src)).ok
    assert pq.read_table(src).equals(pq.read_table(pa.BufferReader(original)))


@pytest.mark.parametrize("in_place", [True, False])
def test_prefix_is_copied_and_flushed_while_indexes_are_computed(src, tmp_path, monkeypatch, in_place):
    """The local commit overlaps the decoding: by the time the indexes are computed, the prefix
    already sits in the temporary file and has been flushed (fdatasync) in the background."""
    retrofit_mod = importlib.import_module("pageindex.retrofit")
    if not hasattr(os, "copy_file_range"):
        pytest.skip("no os.copy_file_range on this platform")
    dst = src if in_place else tmp_path / "out" / "o.parquet"
    prefix = _kept_prefix(src)
    flushed = threading.Event()
    real_fdatasync, real_compute = os.fdatasync, retrofit_mod.compute_indexes

    def fdatasync(fd):
        real_fdatasync(fd)
        flushed.set()

    seen = {}

    def compute(*args, **kwargs):
        assert flushed.wait(timeout=30), "the prefix copy did not run alongside the computation"
        (temp,) = [p for p in dst.parent.iterdir() if commit_mod.TEMP_TAG in p.name]
        seen["temp_bytes"] = temp.read_bytes()
        return real_compute(*args, **kwargs)

    monkeypatch.setattr(commit_mod.os, "fdatasync", fdatasync)
    monkeypatch.setattr(retrofit_mod, "compute_indexes", compute)
    original = src.read_bytes()
    pageindex.retrofit(str(src), None if in_place else str(dst))
    assert seen["temp_bytes"] == original[:prefix]
    assert dst.read_bytes()[:prefix] == original[:prefix]
    assert verify(str(dst)).ok


def test_kernel_copy_starts_writeback_block_by_block(src, monkeypatch):
    """Each copied block is handed to the disk as soon as it is copied (sync_file_range), so
    the final fdatasync waits for the last block only, not for the whole prefix."""
    if not hasattr(os, "copy_file_range") or copy_mod._SYNC_FILE_RANGE is None:
        pytest.skip("no copy_file_range or sync_file_range on this platform")
    prefix = _kept_prefix(src)
    calls = []
    real = copy_mod.start_writeback

    def spy(fd, offset, length):
        started = real(fd, offset, length)
        calls.append((offset, length, started))
        return started

    monkeypatch.setattr(copy_mod, "COPY_BLOCK", 16 << 10)
    monkeypatch.setattr(copy_mod, "start_writeback", spy)
    monkeypatch.setattr(copy_mod, "_copies_through_page_cache", lambda fd: False)
    pageindex.retrofit(str(src))
    assert len(calls) == -(-prefix // (16 << 10)) > 2
    assert all(started for _, _, started in calls)  # the real system call accepted each range
    ends = [offset + length for offset, length, _ in calls]
    assert [offset for offset, _, _ in calls] == [0] + ends[:-1] and ends[-1] == prefix
    assert verify(str(src)).ok


def test_start_writeback_reports_a_refused_range(tmp_path):
    if copy_mod._SYNC_FILE_RANGE is None:
        pytest.skip("no sync_file_range on this platform")
    with open(tmp_path / "f", "wb") as out:
        out.write(b"x" * 10_000)
        out.flush()
        assert copy_mod.start_writeback(out.fileno(), 0, 10_000)
        assert not copy_mod.start_writeback(out.fileno(), -1, 10)  # EINVAL


def _has_direct_flag(fd: int) -> bool:
    return bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT)


def test_direct_copy_writes_the_aligned_bulk_past_the_page_cache(src, monkeypatch):
    """On ext2/3/4 the block-aligned part of the prefix is written with O_DIRECT, block after
    block from offset 0, each straight from a read-only mapping of the source's bytes (no copy
    through a buffer of ours); only the unaligned rest goes through copy_file_range, with the
    flag taken off the descriptor again."""
    if not _on_ext_filesystem(src.parent):
        pytest.skip("direct I/O copies are made on ext2/3/4 only")
    block = 16 << 10
    monkeypatch.setattr(copy_mod, "DIRECT_BLOCK", block)
    writes, kernel, mapped = [], [], []
    real_pwritev, real_copy = os.pwritev, os.copy_file_range
    original = src.read_bytes()

    def pwritev(fd, buffers, offset):
        writes.append((offset, sum(len(b) for b in buffers), _has_direct_flag(fd)))
        (window,) = buffers
        mapped.append(isinstance(window, mmap.mmap) and window[:] == original[offset:offset + len(window)])
        return real_pwritev(fd, buffers, offset)

    def copy_file_range(src_fd, dst_fd, count, offset_src, offset_dst):
        kernel.append((offset_dst, count, _has_direct_flag(dst_fd)))
        return real_copy(src_fd, dst_fd, count, offset_src, offset_dst)

    monkeypatch.setattr(os, "pwritev", pwritev)
    monkeypatch.setattr(os, "copy_file_range", copy_file_range)
    prefix = _kept_prefix(src)
    aligned = prefix - prefix % copy_mod.DIRECT_ALIGN
    pageindex.retrofit(str(src))
    assert aligned > 2 * block
    assert [offset for offset, _, _ in writes] == list(range(0, aligned, block))
    assert all(mapped)
    assert sum(n for _, n, _ in writes) == aligned and all(direct for _, _, direct in writes)
    assert kernel == ([(aligned, prefix - aligned, False)] if prefix > aligned else [])
    assert src.read_bytes()[:prefix] == original[:prefix]
    assert verify(str(src)).ok


def test_direct_copy_refused_midway_goes_on_buffered(src, monkeypatch):
    """A direct write the filesystem refuses (EINVAL) ends the direct copy, not the run: the
    buffered copy goes on from where it stopped."""
    if not _on_ext_filesystem(src.parent):
        pytest.skip("direct I/O copies are made on ext2/3/4 only")
    monkeypatch.setattr(copy_mod, "DIRECT_BLOCK", 16 << 10)
    real_pwritev, calls = os.pwritev, []

    def pwritev(fd, buffers, offset):
        calls.append(offset)
        if len(calls) == 3:
            raise OSError(errno.EINVAL, "refused")
        return real_pwritev(fd, buffers, offset)

    monkeypatch.setattr(os, "pwritev", pwritev)
    original, prefix = src.read_bytes(), _kept_prefix(src)
    assert pageindex.retrofit(str(src)).status == "indexed"
    assert calls == [0, 16 << 10, 32 << 10]
    assert src.read_bytes()[:prefix] == original[:prefix]
    assert verify(str(src)).ok


@pytest.mark.parametrize("where", ["tmp", "/dev/shm"])
def test_direct_copy_is_chosen_by_filesystem(tmp_path, where):
    directory = tmp_path if where == "tmp" else Path(where)
    if not directory.is_dir():
        pytest.skip(f"no {where} here")
    with tempfile.TemporaryFile(dir=directory) as f:
        assert copy_mod._copies_through_page_cache(f.fileno()) == _on_ext_filesystem(directory)


@pytest.mark.parametrize("how", ["renamed_over", "written_in_place"])
def test_writer_after_the_check_gets_its_file_back(src, tmp_path, monkeypatch, how):
    """Another writer changes the file after the commit's check, just before the rename: the
    exchange shows that what it replaced is not the file read, so the writer's file is swapped
    back and the run refuses. (With check-then-rename that writer's bytes were lost.)"""
    theirs = pq.read_table(src).slice(0, 100)
    other = tmp_path / "other.parquet"
    pq.write_table(theirs, other)
    real_exchange = commit_mod._exchange
    calls = []

    def writer_first(a, b):
        if not calls:
            if how == "renamed_over":
                os.replace(other, src)
            else:
                with open(src, "r+b") as fh:  # same inode: size and mtime tell
                    fh.write(b"PAR1")
                    fh.truncate(50)
        calls.append((a, b))
        return real_exchange(a, b)

    monkeypatch.setattr(commit_mod, "_exchange", writer_first)
    with pytest.raises(ConcurrentModificationError, match="put back"):
        pageindex.retrofit(str(src))
    assert len(calls) == 2  # swapped in, looked, swapped back
    if how == "renamed_over":
        assert pq.read_table(src).equals(theirs)
    else:
        assert src.stat().st_size == 50
    assert leftovers(src.parent) == []


def test_rename_without_exchange_support(src, monkeypatch):
    """Where renameat2(RENAME_EXCHANGE) is missing the commit checks, then renames."""
    monkeypatch.setattr(commit_mod, "_RENAMEAT2", None)
    original = src.read_bytes()
    assert pageindex.retrofit(str(src)).status == "indexed"
    assert verify(str(src)).ok
    assert src.read_bytes()[:100] == original[:100]
    assert leftovers(src.parent) == []


def test_in_place_keeps_file_mode(src):
    """A private file must stay private: the replacement must carry the original's mode."""
    os.chmod(src, 0o600)
    pageindex.retrofit(str(src))
    assert stat.S_IMODE(src.stat().st_mode) == 0o600


def test_temp_names_are_unique():
    names = {commit_mod.temp_name("/x/y.parquet") for _ in range(100)}
    assert len(names) == 100 and all(n.startswith("/x/.y.parquet" + commit_mod.TEMP_TAG) for n in names)


@pytest.mark.parametrize("name", ["y" * 247 + ".parquet", "é" * 123 + ".parquet"])
def test_temp_names_of_long_names_fit_in_a_directory_entry(name):
    assert len(os.fsencode(name)) <= commit_mod.NAME_MAX
    tmp = os.path.basename(commit_mod.temp_name(f"/x/{name}"))
    assert len(os.fsencode(tmp)) <= commit_mod.NAME_MAX
    assert tmp.startswith(commit_mod.temp_prefix(name)) and commit_mod.TEMP_TAG in tmp


def test_destination_with_the_longest_allowed_name(src, tmp_path):
    dst = tmp_path / "new" / ("n" * 247 + ".parquet")
    pageindex.retrofit(str(src), str(dst))
    assert verify(str(dst)).ok and leftovers(dst.parent) == []


@pytest.fixture(params=["python", "kernel", "direct"])
def copy_path(request, monkeypatch, tmp_path):
    """The prefix copy goes through Source.read, or (local to local) os.copy_file_range, or
    (on ext2/3/4) O_DIRECT writes of the aligned bulk, in blocks of 16 KiB here."""
    if request.param == "direct":
        if not _on_ext_filesystem(tmp_path):
            pytest.skip("direct I/O copies are made on ext2/3/4 only")
        monkeypatch.setattr(copy_mod, "DIRECT_BLOCK", 16 << 10)
        return request.param
    monkeypatch.setattr(copy_mod, "_copies_through_page_cache", lambda fd: False)
    if request.param == "python":
        monkeypatch.delattr(os, "copy_file_range", raising=False)
    elif not hasattr(os, "copy_file_range"):
        pytest.skip("no os.copy_file_range on this platform")
    return request.param


def _on_copy(monkeypatch, copy_path: str, action) -> dict:
    """Run `action` at the first os.copy_file_range ("kernel") or os.pwritev ("direct") call."""
    name = "pwritev" if copy_path == "direct" else "copy_file_range"
    real = getattr(os, name)
    state = {"calls": 0}

    def wrapped(*args, **kwargs):
        state["calls"] += 1
        if state["calls"] == 1:
            action()
        return real(*args, **kwargs)

    monkeypatch.setattr(os, name, wrapped)
    return state


def _failing_read(monkeypatch, fail_after: int):
    calls = {"n": 0}
    real_read = Source.read

    def read(self, offset, length, *rest):
        calls["n"] += 1
        if calls["n"] > fail_after:
            raise StorageError("injected read failure", path=self.path, offset=offset)
        return real_read(self, offset, length, *rest)

    monkeypatch.setattr(Source, "read", read)
    return calls


def _count_dry_run_reads(path: Path) -> int:
    from pageindex.format.footer import read_footer
    from pageindex.index.compute import compute_indexes
    from pageindex.index.plan import plan_chunks
    from pageindex.io.storage import open_source

    with open_source(str(path)) as s:
        footer = read_footer(s)
        compute_indexes(s, footer, plan_chunks(footer, False), 64)
        return s.stats.requests


@pytest.mark.parametrize("in_place", [True, False])
def test_failure_mid_copy_leaves_no_temp_file(src, tmp_path, monkeypatch, in_place, copy_path):
    original = src.read_bytes()
    dst = None if in_place else tmp_path / "out" / "o.parquet"
    if copy_path == "python":
        before = _count_dry_run_reads(src)
        monkeypatch.setattr(copy_mod, "COPY_BLOCK", 4096)  # many reads while copying
        calls = _failing_read(monkeypatch, before + 3)
    else:
        def fail():
            raise OSError(5, "injected kernel copy failure")
        calls = _on_copy(monkeypatch, copy_path, fail)
    with pytest.raises(StorageError, match="injected"):
        pageindex.retrofit(str(src), None if dst is None else str(dst))
    if copy_path == "python":
        assert calls["n"] > before + 3  # it failed during the copy, not before
    else:
        assert calls["calls"] == 1
    assert leftovers(src.parent) == []
    assert src.read_bytes() == original
    if dst is not None:
        assert not dst.parent.exists()  # the directory the run created is gone again


def test_failure_before_commit_creates_nothing(src, tmp_path, monkeypatch):
    _failing_read(monkeypatch, 2)
    dst = tmp_path / "never" / "o.parquet"
    with pytest.raises(StorageError):
        pageindex.retrofit(str(src), str(dst))
    assert not dst.parent.exists()


def _modify_during_copy(monkeypatch, path: Path, how: str, copy_path: str):
    """Change the file on disk when the prefix copy starts."""
    state = {"done": False}

    def modify():
        state["done"] = True
        if how == "append":
            with open(path, "ab") as f:
                f.write(b"appended by someone else")
        elif how == "truncate":  # the direct copy's mapped source pages vanish under it
            os.truncate(path, 50)
        else:  # same size, new bytes and a new mtime
            data = bytearray(path.read_bytes())
            data[100] ^= 0xFF
            path.write_bytes(bytes(data))
            st = os.stat(path)
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))

    if copy_path != "python":
        _on_copy(monkeypatch, copy_path, modify)
        return state
    real_read = Source.read

    def read(self, offset, length, *rest):
        purpose = rest[0] if rest else None
        if not state["done"] and purpose == "copy":
            modify()
        return real_read(self, offset, length, *rest)

    monkeypatch.setattr(Source, "read", read)
    monkeypatch.setattr(copy_mod, "COPY_BLOCK", 1 << 20)
    return state


@pytest.mark.parametrize("how", ["append", "rewrite", "truncate"])
def test_concurrent_modification_in_place(src, monkeypatch, how, copy_path):
    state = _modify_during_copy(monkeypatch, src, how, copy_path)
    with pytest.raises(ConcurrentModificationError) as err:
        pageindex.retrofit(str(src))
    assert state["done"]
    assert str(src) in str(err.value)
    assert leftovers(src.parent) == []
    # the other writer's version is what stays on disk
    if how == "append":
        assert src.read_bytes().endswith(b"appended by someone else")
    elif how == "truncate":
        assert src.stat().st_size == 50


def test_concurrent_modification_to_other_destination(src, tmp_path, monkeypatch, copy_path):
    """Writing to another path while the source's data bytes change would pair the NEW prefix
    bytes with an index computed from the OLD data: that must be refused as well, not committed.
    """
    state = _modify_during_copy(monkeypatch, src, "rewrite", copy_path)
    dst = tmp_path / "elsewhere.parquet"
    with pytest.raises(ConcurrentModificationError):
        pageindex.retrofit(str(src), str(dst))
    assert state["done"]
    assert not dst.exists()


@pytest.mark.parametrize("how", ["url", "dst_filesystem"])
def test_local_source_to_another_filesystem(src, tmp_path, how):
    """A local file retrofitted to another filesystem (fsspec's in-memory one): its file objects
    have a fileno() that refuses, so the prefix goes through Python, and the result is the bytes
    a local destination gets."""
    fs = fsspec.filesystem("memory")
    target = f"/pageindex-{tmp_path.name}/o.parquet"
    try:
        if how == "url":
            result = pageindex.retrofit(str(src), f"memory://{target}")
        else:
            result = pageindex.retrofit(str(src), target, dst_filesystem=fs)
        local = tmp_path / "o.parquet"
        pageindex.retrofit(str(src), str(local))
        assert result.status == "indexed"
        assert fs.cat_file(target) == local.read_bytes()
    finally:
        fs.rm(posixpath.dirname(target), recursive=True)


def test_destination_directory_created(src, tmp_path):
    dst = tmp_path / "a" / "b" / "c" / "out.parquet"
    result = pageindex.retrofit(str(src), str(dst))
    assert result.output == str(dst) and dst.is_file()
    assert leftovers(dst.parent) == []
    assert verify(str(dst)).ok
    assert dst.read_bytes()[:1000] == src.read_bytes()[:1000]


@pytest.mark.parametrize("dst", ["t.parquet/sub/o.parquet", "new/deeper/" + "n" * 256 + ".parquet"])
def test_destination_that_cannot_be_created_is_a_storage_error(src, tmp_path, dst):
    """Under a regular file, or a name longer than a directory entry: a typed error naming the
    destination, the source untouched, and no directory left behind."""
    original, before = src.read_bytes(), sorted(tmp_path.rglob("*"))
    target = src.parent / dst
    with pytest.raises(StorageError) as err:
        pageindex.retrofit(str(src), str(target))
    assert str(target) in str(err.value)
    assert src.read_bytes() == original
    assert sorted(tmp_path.rglob("*")) == before


def test_directories_created_for_a_temporary_that_cannot_be_opened_are_removed(src, tmp_path,
                                                                               monkeypatch):
    monkeypatch.setattr(commit_mod, "temp_name", lambda dst: os.path.join(tmp_path, "gone", "t"))
    dst = tmp_path / "a" / "b" / "o.parquet"
    with pytest.raises(StorageError, match="create the temporary file"):
        pageindex.retrofit(str(src), str(dst))
    assert not (tmp_path / "a").exists()


def test_stale_temporaries_of_names_that_look_like_patterns(tmp_path):
    target = tmp_path / "part[1].parquet"
    stale = tmp_path / (commit_mod.temp_prefix(target.name) + "0" * 32)
    lookalike = tmp_path / (commit_mod.temp_prefix("part1.parquet") + "1" * 32)
    for path in (stale, lookalike):
        path.write_bytes(b"x")
        os.utime(path, (1e9, 1e9))
    fs = fsspec.filesystem("file")
    assert commit_mod.clean_stale_temporaries(fs, str(target), 60) == 1
    assert not stale.exists() and lookalike.exists()


def test_destination_overwritten_atomically(src, tmp_path):
    dst = tmp_path / "o.parquet"
    dst.write_bytes(b"old content")
    pageindex.retrofit(str(src), str(dst))
    assert dst.read_bytes()[:4] == b"PAR1" and verify(str(dst)).ok


def _ended_pid() -> int:
    """A PID no process has now: a child that ended and was reaped."""
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_temp_names_say_their_writer():
    suffix = os.path.basename(commit_mod.temp_name("/x/y.parquet"))[len(commit_mod.temp_prefix("y.parquet")):]
    host, pid, unique = suffix.split("-")
    assert host == commit_mod.host_token() and int(pid) == os.getpid() and len(unique) == 32
    assert not commit_mod.writer_gone(suffix)  # this process: alive


def test_writer_gone_only_when_known_dead_on_this_machine():
    here, unique = commit_mod.host_token(), "ab" * 16
    other = "0" * 8 if here != "0" * 8 else "1" * 8
    dead = _ended_pid()
    assert commit_mod.writer_gone(f"{here}-{dead}-{unique}")
    assert not commit_mod.writer_gone(f"{here}-{os.getppid()}-{unique}")  # alive
    assert not commit_mod.writer_gone(f"{here}-1-{unique}")  # init: alive
    assert not commit_mod.writer_gone(f"{other}-{dead}-{unique}")  # another machine's
    assert not commit_mod.writer_gone(unique)  # a name without its writer
    assert not commit_mod.writer_gone(f"{here}-{dead}-{unique}x")


def test_dead_writers_temporary_removed_at_once_live_ones_wait(tmp_path):
    target = tmp_path / "t.parquet"
    prefix = commit_mod.temp_prefix(target.name)
    dead = tmp_path / f"{prefix}{commit_mod.host_token()}-{_ended_pid()}-{'c' * 32}"
    live = tmp_path / f"{prefix}{commit_mod.host_token()}-{os.getppid()}-{'d' * 32}"
    for path in (dead, live):
        path.write_bytes(b"x")  # just written: far younger than the hour
    assert commit_mod.clean_stale_temporaries(fsspec.filesystem("file"), str(target), 3600) == 1
    assert not dead.exists() and live.exists()


def test_prefix_copy_across_filesystems_goes_through_the_process(src, monkeypatch):
    """copy_file_range refusing two filesystems (EXDEV, as between a disk and a tmpfs) leaves
    the rest of the prefix to the buffered copy: the same bytes, no error."""
    real = os.copy_file_range
    calls = []

    def cross_device(*args):
        calls.append(args)
        if len(calls) > 1:
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))
        return real(args[0], args[1], min(args[2], 4096), *args[3:])

    monkeypatch.setattr(copy_mod.os, "copy_file_range", cross_device)
    monkeypatch.setattr(copy_mod, "_copies_through_page_cache", lambda fd: False)
    from pageindex.io.storage import open_source

    data = src.read_bytes()
    with open_source(str(src)) as source, tempfile.TemporaryFile() as out:
        copy_mod.copy_prefix(source, out, len(data))
        out.seek(0)
        assert out.read() == data
    assert len(calls) == 2  # one block in the kernel, then refused
