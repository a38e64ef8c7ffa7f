"""The run state (--state, pageindex.job.state) on local files through `pageindex retrofit`: what
is skipped, what is opened again, what is written, and what survives a crash.

Requests on an object store are counted in tests/system/test_state_requests.py.
"""
from __future__ import annotations

import datetime
import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex import cli
from pageindex.job.config import check_argv
from pageindex.job.state import STATE_SCHEMA, Entry, read_state, state_table, write_state
from tests.helpers.paths import REPO_ROOT

FILES = 6


def _table(i: int) -> pa.Table:
    return pa.table({"x": pa.array(range(i * 5000, (i + 1) * 5000), pa.int64())})


def _lake(root: Path, n: int = FILES, start: int = 0) -> list[Path]:
    paths = []
    for i in range(start, start + n):
        path = root / f"part={i % 2}" / f"f{i:02d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(_table(i), path, data_page_size=4096)
        paths.append(path)
    return paths


def _run(*args: object) -> tuple[int, dict[str, dict]]:
    """`pageindex retrofit ARGS --report R`: the exit code and the report's records by path."""
    report = Path(os.environ["PYTEST_STATE_TMP"]) / f"report-{_run.count}.jsonl"
    _run.count += 1
    code = cli.main(["retrofit", *map(str, args), "--report", str(report)])
    records = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
    return code, {r["path"]: r for r in records}


_run.count = 0


@pytest.fixture(autouse=True)
def _tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_STATE_TMP", str(tmp_path))


def _statuses(records: dict[str, dict]) -> dict[str, str]:
    return {path: r["status"] for path, r in records.items()}


def test_rerun_opens_only_new_and_changed_files(tmp_path):
    lake, state = tmp_path / "lake", tmp_path / "state" / "lake.parquet"
    old = _lake(lake)
    code, first = _run(lake, "--state", state)
    assert code == 0 and set(_statuses(first).values()) == {"indexed"}
    new = _lake(lake, 2, start=FILES)
    changed = old[0]
    pq.write_table(_table(40), changed, data_page_size=4096)  # rewritten: not indexed any more
    code, second = _run(lake, "--state", state)
    assert code == 0
    assert _statuses(second) == {**{str(p): "unchanged" for p in old[1:]},
                                 **{str(p): "indexed" for p in [changed, *new]}}
    unchanged = second[str(old[1])]
    assert unchanged["bytes_read"] == 0 and "indexed" in unchanged["reason"]
    assert unchanged["bytes_in"] == old[1].stat().st_size
    # the state now holds every file as it is on disk after the run
    entries = read_state(str(state), {})
    assert {p: (e.size, e.version) for p, e in entries.items()} == {
        str(p): (p.stat().st_size, str(p.stat().st_mtime_ns)) for p in [*old, *new]}


def test_same_size_new_version_is_opened(tmp_path):
    lake, state = tmp_path / "lake", tmp_path / "state.parquet"
    paths = _lake(lake, 2)
    assert _run(lake, "--state", state)[0] == 0
    data = paths[0].read_bytes()
    paths[0].write_bytes(data)  # the same size, a new mtime: the listing says it may have changed
    os.utime(paths[0], ns=(paths[0].stat().st_atime_ns, paths[0].stat().st_mtime_ns + 1_000))
    code, records = _run(lake, "--state", state)
    assert code == 0
    assert _statuses(records) == {str(paths[0]): "already_indexed", str(paths[1]): "unchanged"}


def test_failures_are_retried_and_other_options_reopen(tmp_path):
    lake, state = tmp_path / "lake", tmp_path / "state.parquet"
    paths = _lake(lake, 2)
    bad = lake / "part=0" / "bad.parquet"
    bad.write_bytes(b"PAR1" + b"\0" * 100 + b"PAR1")
    code, first = _run(lake, "--state", state)
    assert first[str(bad)]["status"] == "failed" and code == 3
    code, second = _run(lake, "--state", state)
    assert second[str(bad)]["status"] == "failed", "a failure is tried again"
    assert {second[str(p)]["status"] for p in paths} == {"unchanged"}
    code, third = _run(lake, "--state", state, "--truncate-length", "16")
    assert {third[str(p)]["status"] for p in paths} == {"already_indexed"}, "other options: opened"
    assert {e.options for p, e in read_state(str(state), {}).items() if p != str(bad)} == {"truncate_length=16"}


def test_force_opens_every_file_and_dry_run_writes_no_state(tmp_path):
    lake, state = tmp_path / "lake", tmp_path / "state.parquet"
    paths = _lake(lake, 2)
    code, dry = _run(lake, "--state", state, "--dry-run")
    assert code == 0 and not state.exists()
    assert _run(lake, "--state", state)[0] == 0
    before = state.read_bytes()
    code, forced = _run(lake, "--state", state, "--force")
    assert {r["status"] for r in forced.values()} == {"indexed"}
    assert state.read_bytes() != before, "the forced run's outcomes are recorded"
    assert {e.size for e in read_state(str(state), {}).values()} == {p.stat().st_size for p in paths}
    code, dry = _run(lake, "--state", state, "--dry-run")
    assert {r["status"] for r in dry.values()} == {"unchanged"}


def test_corrupt_state_warns_once_opens_every_file_and_is_rewritten(tmp_path, caplog):
    lake, state = tmp_path / "lake", tmp_path / "state.parquet"
    paths = _lake(lake, 3)
    assert _run(lake, "--state", state)[0] == 0
    state.write_bytes(state.read_bytes()[:50])  # cut short, as a full disk would leave it
    with caplog.at_level(logging.WARNING, logger="pageindex.job.state"):
        code, records = _run(lake, "--state", state)
    warnings = [r.getMessage() for r in caplog.records if r.name == "pageindex.job.state"]
    assert len(warnings) == 1 and str(state) in warnings[0] and "every file is opened" in warnings[0]
    assert code == 0 and {r["status"] for r in records.values()} == {"already_indexed"}
    assert set(read_state(str(state), {})) == {str(p) for p in paths}


def test_not_a_state_warns_and_is_replaced(tmp_path, caplog):
    lake, state = tmp_path / "lake", tmp_path / "state.parquet"
    _lake(lake, 1)
    pq.write_table(pa.table({"path": ["x"]}), state)
    with caplog.at_level(logging.WARNING, logger="pageindex.job.state"):
        assert _run(lake, "--state", state)[0] == 0
    assert any("no column size" in r.getMessage() for r in caplog.records)
    assert pq.read_table(state).schema == STATE_SCHEMA


def test_records_of_other_inputs_kept_of_gone_files_dropped(tmp_path):
    a, b, state = tmp_path / "a", tmp_path / "b", tmp_path / "state.parquet"
    in_a, in_b = _lake(a, 2), _lake(b, 2)
    assert _run(a, b, "--state", state)[0] == 0
    in_a[0].unlink()
    assert _run(a, "--state", state)[0] == 0
    assert set(read_state(str(state), {})) == {str(p) for p in [in_a[1], *in_b]}


def test_state_bytes_are_deterministic_and_read_back_in_pyarrow(tmp_path):
    when = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    entries = [Entry(f"s3://b/k{i}", 100 + i, f'"etag{i}"', "indexed", "truncate_length=64", None, "0.1.0", when)
               for i in (3, 1, 2)]
    write_state(entries, str(tmp_path / "one.parquet"), {})
    write_state(list(reversed(entries)), str(tmp_path / "two.parquet"), {})
    assert (tmp_path / "one.parquet").read_bytes() == (tmp_path / "two.parquet").read_bytes()
    table = pq.read_table(tmp_path / "one.parquet")
    assert table.schema == STATE_SCHEMA
    assert table.column("path").to_pylist() == ["s3://b/k1", "s3://b/k2", "s3://b/k3"]
    assert table.column("decided_at").to_pylist() == [when] * 3
    assert state_table(entries).equals(table)
    assert not list(tmp_path.glob(".*")), "no temporary left"


def _crash(tmp_path: Path, signal_name: str, after: int, checkpoint_files: int) -> subprocess.CompletedProcess:
    lake, state = tmp_path / "lake", tmp_path / "state.parquet"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "tests.helpers.state_crash_runner", "--after", str(after), "--signal", signal_name,
         "--checkpoint-files", str(checkpoint_files), "--", "retrofit", str(lake), "--state", str(state)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("signal_name, checkpoint_files, code", [
    ("KILL", 1, -signal.SIGKILL),  # the checkpoints written before the kill survive
    ("TERM", 10_000, 128 + signal.SIGTERM),  # no checkpoint due: the stop writes what was decided
])
def test_crash_leaves_a_readable_state(tmp_path, signal_name, checkpoint_files, code):
    lake, state = tmp_path / "lake", tmp_path / "state.parquet"
    paths = _lake(lake, 8)
    other = _lake(tmp_path / "other", 1)
    assert _run(tmp_path / "other", "--state", state)[0] == 0  # an earlier run's, under another input
    done = _crash(tmp_path, signal_name, after=3, checkpoint_files=checkpoint_files)
    assert done.returncode == code, done.stderr
    assert "STOPPING after 3 files" in done.stdout
    entries = read_state(str(state), {})  # readable: pyarrow reads it whole
    assert pq.read_table(state).schema == STATE_SCHEMA
    first_three = {str(p) for p in sorted(paths, key=str)[:3]}
    assert first_three | {str(other[0])} <= set(entries)
    assert all(e.status in ("indexed", "already_indexed") for e in entries.values())
    assert not [p for p in tmp_path.rglob(".*") if p.is_file()], "no temporary left"
    code_after, records = _run(lake, "--state", state)
    assert code_after == 0
    assert {p for p, r in records.items() if r["status"] == "unchanged"} >= first_three
    assert {r["status"] for r in records.values()} <= {"unchanged", "indexed", "already_indexed"}


@pytest.mark.parametrize("argv", [
    ["--input", "/lake/t", "--in-place", "--table-format", "delta"],
    ["--iceberg-table", "c.ns.t", "--in-place"],
])
def test_job_refuses_a_state_for_table_formats(argv, capsys):
    assert check_argv([*argv, "--state", "/state.parquet"]) == 2
    assert "--state applies to plain files" in capsys.readouterr().err
    assert check_argv(["--input", "/lake", "--in-place", "--state", "/state.parquet"]) == 0
