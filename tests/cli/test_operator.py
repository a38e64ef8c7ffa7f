"""What `pageindex retrofit` tells an operator, and that it is true: output paths proven writable
before any file changes, files still being written and read-only files left for later, state
keys that do not depend on how a path was typed, copies across filesystems, malformed storage
options, and the temporaries of writers that died.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pageindex.io.commit import host_token, temp_prefix
from pageindex.job.state import Entry, read_state, write_state
from tests.helpers.files import write_sorted_int_file
from tests.helpers.cli import ok, run_cli

ROWS = 3000


def write_file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_sorted_int_file(path, ROWS, page_index=False, data_page_size=1024, write_batch_size=256)


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file below `root` (or `root` itself) with its mtime and bytes."""
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    return {str(p): (p.stat().st_mtime_ns, p.read_bytes()) for p in files}


def records(proc: subprocess.CompletedProcess) -> dict[str, dict]:
    return {r["path"]: r for r in map(json.loads, proc.stdout.splitlines())}


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    root = tmp_path / "lake"
    for name in ("a.parquet", "day=1/b.parquet", "day=2/c.parquet"):
        write_file(root / name)
    return root


@contextlib.contextmanager
def mounted_tmpfs(where: Path, read_only: bool):
    """A tmpfs mounted at `where` (another filesystem, read-only if asked); skips where mounting
    is not allowed (not root, no CAP_SYS_ADMIN)."""
    where.mkdir(parents=True, exist_ok=True)
    options = "ro,size=4m" if read_only else "size=64m"
    if shutil.which("mount") is None or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


# ---------------------------------------------------------------- output paths proven writable

@pytest.mark.parametrize("flag", ["--report", "--state"])
@pytest.mark.parametrize("where", ["proc", "read-only mount"])
def test_unwritable_output_is_exit_2_before_any_file_changes(lake, tmp_path, flag, where):
    """/proc and a read-only mount pass every permission-bit check a root process makes: only
    writing shows they refuse. Exit 2 and one line naming the path; no input touched."""
    before = snapshot(lake)
    with contextlib.ExitStack() as stack:
        if where == "proc":
            target = Path("/proc/nope") / "out.parquet"
        else:
            target = stack.enter_context(mounted_tmpfs(tmp_path / "ro", read_only=True)) / "out.parquet"
        proc = ok(run_cli("retrofit", lake, flag, target), code=2)
        assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert str(target) in proc.stderr and "cannot be written here" in proc.stderr
        assert not target.exists()
    assert snapshot(lake) == before


# ---------------------------------------------------------------- a file still being written

def truncated(src: Path, dst: Path) -> Path:
    """The first half of `src`: a file a direct writer (pyarrow, DuckDB) has not finished, its
    footer not written yet."""
    data = src.read_bytes()
    dst.write_bytes(data[: len(data) // 2])
    return dst


def test_file_being_written_is_left_for_the_next_run(lake):
    writing = truncated(lake / "a.parquet", lake / "day=2" / "writing.parquet")
    before = snapshot(writing)
    proc = ok(run_cli("retrofit", "--json", lake))
    got = records(proc)[str(writing)]
    assert got["status"] == "being_written" and "no Parquet magic at end of file" in got["reason"]
    assert "left for the next run" in got["reason"] and not got["retryable"]
    assert snapshot(writing) == before
    assert "being_written           1 file" in proc.stderr  # the summary counts it
    # the writer finishes: the next run indexes it
    write_file(writing)
    assert records(ok(run_cli("retrofit", "--json", writing)))[str(writing)]["status"] == "indexed"


def test_old_file_without_footer_is_broken(lake):
    broken = truncated(lake / "a.parquet", lake / "broken.parquet")
    hour_ago = time.time() - 3600
    os.utime(broken, (hour_ago, hour_ago))
    proc = ok(run_cli("retrofit", "--json", lake), code=3)
    got = records(proc)[str(broken)]
    assert got["status"] == "failed" and got["reason"].startswith("FooterMissingError: no Parquet magic")
    # the age is configurable: with 2 hours the same file is still being written
    proc = ok(run_cli("retrofit", "--json", "--being-written-seconds", "7200", broken))
    assert records(proc)[str(broken)]["status"] == "being_written"


# ---------------------------------------------------------------- state keys however typed

def test_state_keys_do_not_depend_on_how_the_input_was_typed(lake, tmp_path):
    """`../lake` from a sibling directory, then the absolute path, then through a linked parent:
    one file, one state row; the second and third runs open nothing."""
    work = tmp_path / "work"
    work.mkdir()
    linked = tmp_path / "linked"
    linked.symlink_to(tmp_path, target_is_directory=True)
    state = tmp_path / "state.parquet"
    ok(run_cli("retrofit", "--json", "../lake", "--state", "../state.parquet", cwd=work))
    for path, state_path in ((lake, state), (linked / "lake", linked / "state.parquet")):
        proc = ok(run_cli("retrofit", "--json", path, "--state", state_path))
        assert {r["status"] for r in records(proc).values()} == {"unchanged"}, proc.stdout
    expected = sorted(str(p) for p in lake.rglob("*.parquet"))
    assert pq.read_table(state).column("path").to_pylist() == expected


def test_state_written_with_untidy_keys_still_matches(lake, tmp_path):
    """A state written while keys were the paths as typed (`..`, a linked parent): a rerun
    still finds every file unchanged, and the state is written back once per file."""
    first = ok(run_cli("retrofit", "--json", lake, "--state", tmp_path / "fresh.parquet"))
    assert {r["status"] for r in records(first).values()} == {"indexed"}
    linked = tmp_path / "linked"
    linked.symlink_to(tmp_path, target_is_directory=True)
    good = read_state(str(tmp_path / "fresh.parquet"), {})
    untidy = []
    for i, entry in enumerate(sorted(good.values(), key=lambda e: e.path)):
        relative = Path(entry.path).relative_to(tmp_path)
        spelled = (f"{tmp_path}/work/../{relative}" if i % 2 else f"{linked}/./{relative}")
        untidy.append(Entry(**{**entry.__dict__, "path": spelled}))
    old = tmp_path / "old.parquet"
    write_state(untidy, str(old), {})
    assert not set(pq.read_table(old).column("path").to_pylist()) & set(good)
    proc = ok(run_cli("retrofit", "--json", lake, "--state", old))
    assert {r["status"] for r in records(proc).values()} == {"unchanged"}, proc.stdout
    # the report path is absolute and tidy too
    report = ok(run_cli("retrofit", lake, "--state", old, "--report", "../r.jsonl", cwd=lake))
    assert f"report           {tmp_path / 'r.jsonl'}" in report.stdout, report.stdout
    assert sorted(pq.read_table(old).column("path").to_pylist()) == sorted(good)


# ---------------------------------------------------------------- read-only files

def test_read_only_file_is_never_rewritten_in_place(lake, tmp_path):
    frozen = lake / "day=1" / "b.parquet"
    frozen.chmod(0o444)
    try:
        before = snapshot(frozen)
        proc = ok(run_cli("retrofit", "--json", lake))
        got = records(proc)
        assert got[str(frozen)]["status"] == "read_only" and "mode 0444" in got[str(frozen)]["reason"]
        assert got[str(lake / "a.parquet")]["status"] == "indexed"
        assert snapshot(frozen) == before
        assert "read_only               1 file" in proc.stderr
        text = ok(run_cli("retrofit", frozen)).stdout
        assert f"{frozen}: read_only: read-only (mode 0444): left as is" in text
        # elsewhere (--output) it is read, never changed: indexed as any other
        out = tmp_path / "copy.parquet"
        assert records(ok(run_cli("retrofit", "--json", frozen, "--output", out)))[str(frozen)]["status"] == "indexed"
        assert snapshot(frozen) == before
    finally:
        frozen.chmod(0o644)


# ---------------------------------------------------------------- --output on another filesystem

def test_output_on_another_filesystem_copies_the_bytes(lake, tmp_path):
    """The prefix copy's copy_file_range refuses two filesystems (EXDEV); the bytes are then
    copied through the process, and the output is the same as on the same filesystem."""
    same = tmp_path / "same"
    ok(run_cli("retrofit", lake, "--output", same))
    with mounted_tmpfs(tmp_path / "other", read_only=False) as other:
        assert os.stat(other).st_dev != os.stat(lake).st_dev
        proc = ok(run_cli("retrofit", "--json", lake, "--output", other / "mirror"))
        assert {r["status"] for r in records(proc).values()} == {"indexed"}
        for p in same.rglob("*.parquet"):
            copy = other / "mirror" / p.relative_to(same)
            assert copy.read_bytes() == p.read_bytes()
            assert pq.read_table(copy).equals(pq.read_table(lake / p.relative_to(same)))


# ---------------------------------------------------------------- storage options

@pytest.mark.parametrize("option", ["client_kwargs=notjson", "config_kwargs=3", "s3_additional_kwargs=[1]"])
def test_malformed_storage_option_is_one_usage_line(lake, option):
    before = snapshot(lake)
    proc = ok(run_cli("retrofit", lake, "--storage-option", option), code=2)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "takes a JSON object" in lines[0] and option.split("=")[0] in lines[0], proc.stderr
    assert snapshot(lake) == before


# ---------------------------------------------------------------- temporaries of dead writers

def _dead_pid() -> int:
    """The PID of a process that has ended (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_temporary_of_a_dead_writer_is_removed_by_the_next_run(lake):
    """Named after their writer: this machine's, its process gone, removed now, however young;
    a live writer's (this test's own process) and another machine's keep the hour's rule."""
    target = lake / "a.parquet"
    prefix = temp_prefix(target.name)
    dead = lake / f"{prefix}{host_token()}-{_dead_pid()}-{uuid.uuid4().hex}"
    alive = lake / f"{prefix}{host_token()}-{os.getpid()}-{uuid.uuid4().hex}"
    elsewhere = lake / f"{prefix}{'0' * 8 if host_token() != '0' * 8 else '1' * 8}-{_dead_pid()}-{uuid.uuid4().hex}"
    for p in (dead, alive, elsewhere):
        p.write_bytes(b"PAR1 half written")
    ok(run_cli("retrofit", target))
    assert not dead.exists()
    assert alive.exists() and elsewhere.exists()


def test_an_existing_part_folder_on_a_read_only_mount_is_refused_before_the_run(tmp_path):
    """The job's report and state are folders of parts: an earlier run's folder that can no longer
    be written in is proven so by a probe inside it, as a new path is by one beside it."""
    from pageindex.errors import UsageError
    from pageindex.job.parts import check_folder_path

    with mounted_tmpfs(tmp_path / "ro", read_only=True) as folder:
        with pytest.raises(UsageError, match="cannot be written here"):
            check_folder_path(str(folder), {}, "the report")
    writable = tmp_path / "report"
    writable.mkdir()
    check_folder_path(str(writable), {}, "the report")
    assert list(writable.iterdir()) == []  # the probe is gone
