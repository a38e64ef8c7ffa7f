"""Concurrent runs on one local file.

- Two in-place retrofits of the same file at once, in two processes, many times: the file is
  always the complete, valid result (verify ok, data equal; never a mix of the two runs, never
  torn) and no temporaries are left.  Each run either indexes the file, finds it already
  indexed, or (when the other one committed while it ran) refuses with
  ConcurrentModificationError: exit 3 (no retry can mend it) with "changed" in the message.
- Another writer rewriting the file while a retrofit runs: the retrofit ends with
  ConcurrentModificationError and the other writer's bytes stay.  Held at each step of the run
  (tests/helpers/crash_runner.py holds the child there while the writer rewrites the file: in
  place with the same size, with another size, or by renaming a new file over it), and with a
  writer process started at random moments during an unheld CLI run.
"""
from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest

import pageindex
from pageindex.errors import ConcurrentModificationError
from tests.helpers.big_files import write_wide_file
from tests.helpers.paths import REPO_ROOT
from tests.helpers.retrofit_checks import assert_same_data

pytestmark = pytest.mark.slow  # races real processes against each other, many times over

SEED = int(os.environ.get("PAGEINDEX_CONCURRENCY_SEED", "777"))
PAIRS = 20
ROWS = 6_000  # ~5 MB: a run takes a fraction of a second after Python starts


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def temporaries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".pageindex-tmp-" in p.name)


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> SimpleNamespace:
    d = tmp_path_factory.mktemp("conc")
    original = write_wide_file(d / "a.parquet", ROWS)
    pageindex.retrofit(str(d / "a.parquet"), str(d / "a.ref.parquet"))
    other = write_wide_file(d / "b.parquet", ROWS + 123, seed=99)  # another writer's content
    return SimpleNamespace(original=original, reference=(d / "a.ref.parquet").read_bytes(),
                           original_path=d / "a.parquet", other=other, other_path=d / "b.parquet")


def _check_result(path: Path, made: SimpleNamespace) -> None:
    """The complete result (byte-identical to the reference, which test_result_verifies checks
    with pageindex.verify), readable with the original data, no temporaries."""
    assert path.read_bytes() == made.reference, "not the complete result"
    assert_same_data(made.original_path, path)
    md = pq.ParquetFile(path).metadata
    assert all(md.row_group(rg).column(c).has_offset_index
               for rg in range(md.num_row_groups) for c in range(md.num_columns))
    assert temporaries(path.parent) == []


def test_result_verifies(made, tmp_path):
    """The file every concurrent run must leave: pageindex.verify finds its index exact."""
    path = tmp_path / "ref.parquet"
    path.write_bytes(made.reference)
    result = pageindex.verify(str(path))
    assert result.ok, [str(v) for v in result.violations]


# ---------------------------------------------------------------- two retrofits at once

def _outcome(code: int, out: str) -> str:
    """indexed | already_indexed | changed, from the CLI's or the crash runner's output."""
    if code == 0 and "already" in out:
        return "already_indexed"
    if code == 0 and "indexed" in out:
        return "indexed"
    # the CLI exits 3 (no retry can mend it), tests.helpers.crash_runner (the library) exits 1
    if (code == 3 if out.startswith("pageindex: error:") else code == 1) \
            and "ConcurrentModificationError" in out and "changed" in out:
        assert "Traceback" not in out, out
        return "changed"
    raise AssertionError(f"unexpected outcome (exit {code}):\n{out}")


def _spawn(cmd: list[str]) -> subprocess.Popen:
    return subprocess.Popen(cmd, cwd=REPO_ROOT, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _finish(proc: subprocess.Popen, timeout: float = 120) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def test_two_retrofits_of_one_file_at_once(made, tmp_path):
    path = tmp_path / "data.parquet"
    outcomes = []
    for i in range(PAIRS):
        path.write_bytes(made.original)
        go = tmp_path / f"go-{i}"
        if i % 2:
            # the library in two processes released at the same instant (after their imports)
            cmd = [sys.executable, "-m", "tests.helpers.crash_runner", str(path), "--wait-for", str(go)]
            procs = [_spawn(cmd), _spawn(cmd)]
            time.sleep(1.5)  # both are past their imports, spinning on the barrier
            go.touch()
        else:
            # the CLI, two processes spawned together
            cmd = [sys.executable, "-m", "pageindex", "retrofit", str(path)]
            procs = [_spawn(cmd), _spawn(cmd)]
        pair = [_finish(p) for p in procs]
        kinds = [_outcome(code, out) for code, out in pair]
        outcomes.append(tuple(sorted(kinds)))
        assert "indexed" in kinds, f"iteration {i}: neither run indexed the file: {pair}"
        _check_result(path, made)
    print(f"\n{PAIRS} pairs: {sorted(outcomes)}")
    # The runs really overlapped: at least once, neither found the file already indexed.
    assert any(k != ("already_indexed", "indexed") for k in outcomes), outcomes


# ---------------------------------------------------------------- another writer

def _rewrite(path: Path, how: str, made: SimpleNamespace) -> bytes:
    """Another writer changes the file; returns the bytes it left."""
    if how == "same_size_in_place":
        data = bytearray(path.read_bytes())
        data[100:108] = b"OTHERWRT"  # inside the first column chunk: same size, same inode
        with open(path, "r+b") as fh:
            fh.seek(100)
            fh.write(b"OTHERWRT")
        return bytes(data)
    if how == "new_content_in_place":
        with open(path, "wb") as fh:  # truncate and rewrite: same inode, another size
            fh.write(made.other)
        return made.other
    if how == "renamed_over":
        tmp = path.with_name(".writer-tmp")
        tmp.write_bytes(made.other)
        os.replace(tmp, path)  # a new inode, as Spark/Hive commits do
        return made.other
    raise ValueError(how)


# All but the last come before the commit's check; at before_rename the check has passed and
# only the atomic exchange (and the look at what it replaced) stands between the writer and loss.
HOLD_PHASES = ["footer", "before_copy", "after_copy", "fsync", "before_rename"]
REWRITES = ["same_size_in_place", "new_content_in_place", "renamed_over"]


@pytest.mark.parametrize("how", REWRITES)
@pytest.mark.parametrize("phase", HOLD_PHASES)
def test_file_rewritten_during_run_is_not_overwritten(made, tmp_path, phase, how):
    path = tmp_path / "data.parquet"
    path.write_bytes(made.original)
    release = tmp_path / "release"
    proc = _spawn([sys.executable, "-m", "tests.helpers.crash_runner", str(path),
                   "--hold-at", phase, "--release", str(release)])
    watchdog = threading.Timer(120, proc.kill)
    watchdog.start()
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("HELD "):
                expected = _rewrite(path, how, made)
                release.touch()
                break
        rest, _ = proc.communicate(timeout=120)
    finally:
        watchdog.cancel()
    out = "\n".join(lines) + "\n" + rest
    assert f"HELD {phase}" in out, out
    assert proc.returncode == 1, out
    assert "ERROR ConcurrentModificationError" in out and "changed" in out, out
    assert path.read_bytes() == expected, "the other writer's bytes were overwritten"
    assert temporaries(tmp_path) == []


def test_in_place_rewrite_before_the_scan_is_reported_changed(made, tmp_path, monkeypatch):
    """Minimal, in-process: another writer truncates and rewrites the file (same inode) after
    the footer was read.  The run then reads the new bytes at the old footer's offsets; whatever
    it makes of them, the file changed, and that is what it must report."""
    import importlib

    retrofit_mod = importlib.import_module("pageindex.retrofit")
    path = tmp_path / "data.parquet"
    path.write_bytes(made.original)
    real = retrofit_mod.compute_indexes

    def racing(*args, **kwargs):
        with open(path, "wb") as fh:
            fh.write(made.other)
        return real(*args, **kwargs)

    monkeypatch.setattr(retrofit_mod, "compute_indexes", racing)
    with pytest.raises(ConcurrentModificationError):
        pageindex.retrofit(str(path))
    assert path.read_bytes() == made.other
    assert temporaries(tmp_path) == []


def test_cli_reports_rewrite_as_changed(made, tmp_path, monkeypatch):
    """The CLI's own report of the refusal: exit 3 (another writer owns the file now: not for a
    retry of this run to redo), "changed", no traceback (the rewrite is
    made inside the run, deterministically, by holding the library at its commit)."""
    path = tmp_path / "data.parquet"
    path.write_bytes(made.original)
    release = tmp_path / "release"
    driver = (
        "import sys, runpy, tests.helpers.crash_runner as r;"
        f"r._HOLD.update(at='before_copy', release={str(release)!r});"
        "r._instrument(None);"
        f"sys.argv=['pageindex', 'retrofit', {str(path)!r}];"
        "runpy.run_module('pageindex', run_name='__main__')"
    )
    proc = _spawn([sys.executable, "-c", driver])
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("HELD"):
            expected = _rewrite(path, "renamed_over", made)
            release.touch()
            break
    rest, _ = proc.communicate(timeout=120)
    out = "".join(lines) + rest
    assert proc.returncode == 3, out
    assert f"pageindex: error: {path}: changed: ConcurrentModificationError: file changed" in out, out
    assert "Traceback" not in out
    assert path.read_bytes() == expected
    assert temporaries(tmp_path) == []


def test_writer_at_random_moments_never_loses_its_bytes(made, tmp_path):
    """A writer process renames new content over the file at a random moment while the CLI
    retrofits it.  Whatever the order, the writer's content survives: either the retrofit
    refused (changed), or it indexed the writer's file (it opened it after the rename), or the
    writer replaced the retrofitted file afterwards."""
    path = tmp_path / "data.parquet"
    other_ref = tmp_path.parent / f"{tmp_path.name}-other.ref.parquet"
    pageindex.retrofit(str(made.other_path), str(other_ref))
    other_indexed = other_ref.read_bytes()
    writer = (
        "import os, sys, time; time.sleep(float(sys.argv[2]));"
        "tmp = sys.argv[1] + '.w'; open(tmp, 'wb').write(open(sys.argv[3], 'rb').read());"
        "os.replace(tmp, sys.argv[1])"
    )
    cli = [sys.executable, "-m", "pageindex", "retrofit", str(path)]
    # how long an undisturbed CLI run takes, to spread the writer over it
    path.write_bytes(made.original)
    t0 = time.monotonic()
    assert _finish(_spawn(cli))[0] == 0
    span = time.monotonic() - t0
    rng = random.Random(SEED)
    seen = []
    for _ in range(12):
        path.write_bytes(made.original)
        delay = rng.uniform(0, span)
        w = _spawn([sys.executable, "-c", writer, str(path), f"{delay:.3f}", str(made.other_path)])
        code, out = _finish(_spawn(cli))
        assert _finish(w)[0] == 0
        final = path.read_bytes()
        if final == made.other:
            seen.append("writer_bytes" + ("/refused" if code == 3 else "/after_commit"))
            if code == 3:
                assert "changed" in out and "Traceback" not in out, out
            else:
                assert code == 0, out
        elif final == other_indexed:
            seen.append("writer_bytes_indexed")
            assert code == 0, out
        else:
            raise AssertionError(f"the writer's content was lost (exit {code}):\n{out}")
        assert not temporaries(tmp_path)
    print(f"\nwriter at random moments over {span:.2f}s: {sorted(seen)}")
