"""Crash safety: a retrofit SIGKILLed at any point leaves the original or the complete result.

Local: `python -m pageindex retrofit FILE` (in place) on a ~20 MB file is killed after seeded,
stratified random delays spread over the length of one undisturbed run, and also exactly at each
step of the commit (tests/helpers/crash_runner.py pauses there).  After every kill the path holds
either the original bytes or the complete retrofitted file (byte-identical to a reference
retrofit made separately: the output is deterministic), pyarrow reads it, and a rerun with
stale_temp_seconds=0 (so the dead run's temporary counts as stale) finishes the job and leaves no
`.NAME.pageindex-tmp-*` temporary.

S3 (moto server): the same with a runner calling retrofit(filesystem=s3fs) on an object whose
prefix is over 5 MiB (multipart upload with server-side part copies) and, at the commit steps,
on a small object (single PUT).  The object is always the original or the complete result.  A
rerun that commits the object lists no uploads, so the dead run's incomplete multipart uploads
are still there after it; the first later run that finds the object indexed aborts them (none
are listed afterwards: io.commit.cleanup_point).
"""
from __future__ import annotations

import io
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest

import pageindex
from tests.helpers import s3 as s3h
from tests.helpers.big_files import write_wide_file
from tests.helpers.paths import REPO_ROOT

pytestmark = pytest.mark.slow  # kills retrofits at random points, dozens of times

SEED = int(os.environ.get("PAGEINDEX_CRASH_SEED", "4242"))
LOCAL_KILLS = 30
S3_KILLS = 16


def write_file(path: Path, rows: int) -> bytes:
    return write_wide_file(path, rows)


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _made(tmp: Path, name: str, rows: int) -> SimpleNamespace:
    """The original and its reference retrofit (made separately, to another path)."""
    src = tmp / f"{name}.parquet"
    original = write_file(src, rows)
    ref = tmp / f"{name}.reference.parquet"
    pageindex.retrofit(str(src), str(ref))
    reference = ref.read_bytes()
    assert reference != original and reference[:4096] == original[:4096]
    t_orig, t_ref = pq.read_table(io.BytesIO(original)), pq.read_table(io.BytesIO(reference))
    assert t_orig.equals(t_ref)
    assert pq.ParquetFile(io.BytesIO(reference)).metadata.row_group(0).column(0).has_column_index
    return SimpleNamespace(original=original, reference=reference, rows=rows)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> SimpleNamespace:
    tmp = tmp_path_factory.mktemp("crash_sources")
    return SimpleNamespace(big=_made(tmp, "big", 40_000),      # ~33 MB, local
                           mid=_made(tmp, "mid", 9_000),       # ~7.5 MB: S3 multipart
                           small=_made(tmp, "small", 1_500))   # ~1.2 MB: S3 single PUT


def temporaries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".pageindex-tmp-" in p.name)


def state_of(data: bytes, f: SimpleNamespace) -> str:
    if data == f.original:
        return "original"
    if data == f.reference:
        return "complete"
    raise AssertionError(f"neither the original nor the complete result ({len(data)} bytes; "
                         f"original {len(f.original)}, complete {len(f.reference)})")


def run_killed_after(cmd: list[str], delay: float) -> tuple[int, str]:
    """Start `cmd`, SIGKILL it after `delay` seconds unless it ended first."""
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out


def run_paused_and_killed(cmd: list[str], phase: str, timeout: float = 90.0) -> list[str]:
    """Run the crash runner until it pauses at `phase`, then SIGKILL it; its output lines."""
    proc = subprocess.Popen(cmd + ["--pause-at", phase], cwd=REPO_ROOT, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watchdog = threading.Timer(timeout, proc.kill)
    watchdog.start()
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("PAUSED "):
                proc.send_signal(signal.SIGKILL)
                break
    finally:
        watchdog.cancel()
        proc.wait(timeout=30)
        proc.stdout.close()
    assert f"PAUSED {phase}" in lines, f"never reached {phase}:\n" + "\n".join(lines[-40:])
    assert proc.returncode == -signal.SIGKILL
    return lines


def stratified_delays(rng: random.Random, n: int, span: float) -> list[float]:
    """n delays over [0, span], one drawn at random in each of n equal slices, shuffled."""
    delays = [span * (i + rng.random()) / n for i in range(n)]
    rng.shuffle(delays)
    return delays


# ---------------------------------------------------------------- local

def _check_local_after_kill(path: Path, f: SimpleNamespace) -> tuple[str, bool]:
    state = state_of(path.read_bytes(), f)
    md = pq.read_metadata(path)
    assert md.num_rows == f.rows
    left = bool(temporaries(path.parent))
    result = pageindex.retrofit(str(path), stale_temp_seconds=0)
    assert result.status == ("indexed" if state == "original" else "already_indexed"), result
    assert path.read_bytes() == f.reference
    assert temporaries(path.parent) == [], "the rerun left temporaries"
    return state, left


def test_local_cli_sigkill_at_random_points(files, tmp_path):
    f = files.big
    path = tmp_path / "data.parquet"
    cli = [sys.executable, "-m", "pageindex", "retrofit", str(path)]
    # The kills spread over the undisturbed run's length: the shorter of two runs, as the first
    # one may pay for cold caches and a busy machine would stretch a single measurement.
    durations = []
    for _ in range(2):
        path.write_bytes(f.original)
        t0 = time.monotonic()
        code, out = run_killed_after(cli, 300)
        durations.append(time.monotonic() - t0)
        assert code == 0, out
        assert path.read_bytes() == f.reference and not temporaries(tmp_path)
    undisturbed = min(durations)

    rng = random.Random(SEED)
    seen = []
    for delay in stratified_delays(rng, LOCAL_KILLS, 1.3 * undisturbed):
        path.write_bytes(f.original)
        code, out = run_killed_after(cli, delay)
        assert code in (0, -signal.SIGKILL), out  # finished, or killed: never failed
        state, left = _check_local_after_kill(path, f)
        seen.append((round(delay, 2), code, state, left))
    print(f"\nundisturbed run {undisturbed:.2f}s; kills (delay, code, state, temporary left): {sorted(seen)}")
    # the kills spread over the run: some before the commit, most of them really killed
    assert "original" in {s for _, _, s, _ in seen}, seen
    assert sum(code == -signal.SIGKILL for _, code, _, _ in seen) >= len(seen) // 2, seen


LOCAL_PHASES = ["footer", "before_copy", "after_copy", "fsync", "before_rename", "after_rename"]


@pytest.mark.parametrize("phase", LOCAL_PHASES)
def test_local_sigkill_at_commit_phase(files, tmp_path, phase):
    f = files.big
    path = tmp_path / "data.parquet"
    path.write_bytes(f.original)
    run_paused_and_killed([sys.executable, "-m", "tests.helpers.crash_runner", str(path)], phase)
    expected = "complete" if phase == "after_rename" else "original"
    assert state_of(path.read_bytes(), f) == expected
    if phase in ("before_copy", "after_copy", "fsync", "before_rename"):
        assert len(temporaries(tmp_path)) == 1, "the dead run's temporary should be there"
    # A rerun removes the dead run's temporary at once, young as it is: its writer was a process
    # on this host, and that process is gone.
    assert pageindex.retrofit(str(path), stale_temp_seconds=3600).status in ("indexed", "already_indexed")
    assert path.read_bytes() == f.reference
    assert temporaries(tmp_path) == []


# ---------------------------------------------------------------- S3

def _uploads(client, bucket: str) -> list[dict]:
    return client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])


def _check_s3_after_kill(fs, client, bucket: str, key: str, f: SimpleNamespace) -> tuple[str, int]:
    fs.invalidate_cache()
    state = state_of(fs.cat_file(f"{bucket}/{key}"), f)
    left = len(_uploads(client, bucket))
    result = pageindex.retrofit(f"{bucket}/{key}", filesystem=fs, stale_temp_seconds=0)
    assert result.status == ("indexed" if state == "original" else "already_indexed"), result
    fs.invalidate_cache()
    assert fs.cat_file(f"{bucket}/{key}") == f.reference
    assert pq.read_table(io.BytesIO(f.reference)).num_rows == f.rows
    if result.status == "indexed":
        assert len(_uploads(client, bucket)) == left, "a commit in place aborted uploads (it lists none)"
        again = pageindex.retrofit(f"{bucket}/{key}", filesystem=fs, stale_temp_seconds=0)
        assert again.status == "already_indexed", again
    assert _uploads(client, bucket) == [], "the run that found the object indexed left incomplete uploads"
    assert fs.find(bucket) == [f"{bucket}/{key}"], "a temporary object was left"
    return state, left


def _s3_runner(s3_server: str, bucket: str, key: str) -> list[str]:
    return [sys.executable, "-m", "tests.helpers.crash_runner", f"{bucket}/{key}",
            "--s3-endpoint", s3_server]


def test_s3_sigkill_at_random_points(files, s3fs_fs, s3_bucket, s3_server):
    f, fs, bucket, key = files.mid, s3fs_fs, s3_bucket, "data/part-0.parquet"
    client = s3h.boto3_client(s3_server)
    runner = _s3_runner(s3_server, bucket, key)
    # The quicker of two undisturbed runs sets the span the kills are drawn over: a first run's
    # cold start alone would put many kills after the run's end.
    runs = []
    for _ in range(2):
        fs.pipe(f"{bucket}/{key}", f.original)
        t0 = time.monotonic()
        code, out = run_killed_after(runner, 300)
        runs.append(time.monotonic() - t0)
        assert code == 0 and "DONE indexed" in out, out
        fs.invalidate_cache()
        assert fs.cat_file(f"{bucket}/{key}") == f.reference
        # the commit copies the prefix server side: the ETag is that of a multipart upload
        assert "-" in client.head_object(Bucket=bucket, Key=key)["ETag"]
    undisturbed = min(runs)

    rng = random.Random(SEED + 1)
    seen = []
    for delay in stratified_delays(rng, S3_KILLS, 1.3 * undisturbed):
        fs.pipe(f"{bucket}/{key}", f.original)
        code, out = run_killed_after(runner, delay)
        assert code in (0, -signal.SIGKILL), out
        state, left = _check_s3_after_kill(fs, client, bucket, key, f)
        seen.append((round(delay, 2), code, state, left))
    print(f"\nundisturbed run {undisturbed:.2f}s; kills (delay, code, state, uploads left): {sorted(seen)}")
    assert "original" in {s for _, _, s, _ in seen}, seen
    assert sum(code == -signal.SIGKILL for _, code, _, _ in seen) >= len(seen) // 2, seen


S3_PHASES = [
    ("mid", "after_create_multipart_upload", "original", 1),
    ("mid", "after_upload_part_copy", "original", 1),
    ("mid", "after_upload_part", "original", 1),
    ("mid", "before_complete_multipart_upload", "original", 1),
    ("mid", "after_complete_multipart_upload", "complete", 0),
    ("small", "before_put_object", "original", 0),
    ("small", "after_put_object", "complete", 0),
]


@pytest.mark.parametrize("size,phase,expected,uploads_left", S3_PHASES,
                         ids=[f"{s}-{p}" for s, p, _, _ in S3_PHASES])
def test_s3_sigkill_at_commit_phase(files, s3fs_fs, s3_bucket, s3_server, size, phase, expected,
                                    uploads_left):
    f, fs, bucket, key = getattr(files, size), s3fs_fs, s3_bucket, "t/part-0.parquet"
    client = s3h.boto3_client(s3_server)
    fs.pipe(f"{bucket}/{key}", f.original)
    lines = run_paused_and_killed(_s3_runner(s3_server, bucket, key), phase)
    if size == "mid":
        assert "PHASE after_upload_part_copy" in lines or phase == "after_create_multipart_upload"
    state, left = _check_s3_after_kill(fs, client, bucket, key, f)
    assert (state, left) == (expected, uploads_left)
