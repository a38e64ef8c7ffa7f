"""A lake with a symbolic link to a directory (and a link back up, a cycle): lookup, and retrofit
and verify with --follow-links, follow the link, handle each file once, say once that the cycle was
not followed, and retrofit in place replaces the files the links lead to (the links stay links).
Without --follow-links, links leading outside the lake are skipped and what they lead to is untouched.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pageindex.cli import main
from pageindex.verify import verify
from tests.helpers.paths import REPO_ROOT

PAGES = {"data_page_size": 1024, "write_batch_size": 128}


def _lake(root: Path) -> Path:
    """lake/a/f.parquet (ids 0..999); other/b/g.parquet (1000..1999), reached by lake/linked and
    lake/twice; lake/a/up -> .. (a cycle); lake/flink.parquet -> a/f.parquet."""
    lake = root / "lake"
    (lake / "a").mkdir(parents=True)
    (root / "other" / "b").mkdir(parents=True)
    pq.write_table(pa.table({"id": range(1000)}), lake / "a" / "f.parquet", **PAGES)
    pq.write_table(pa.table({"id": range(1000, 2000)}), root / "other" / "b" / "g.parquet", **PAGES)
    (lake / "linked").symlink_to("../other", target_is_directory=True)
    (lake / "twice").symlink_to("../other", target_is_directory=True)
    (lake / "a" / "up").symlink_to("..", target_is_directory=True)
    (lake / "flink.parquet").symlink_to("a/f.parquet")
    return lake


def _cycle_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "cycle" in r.getMessage()]


def test_lookup_follows_links_once(tmp_path):
    """The command as users run it: the cycle is one line on stderr."""
    lake = _lake(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    run = subprocess.run([sys.executable, "-m", "pageindex", "lookup", str(lake), "--where",
                          "id >= 990 AND id < 1010", "--json"], capture_output=True, text=True, env=env, check=False)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert sorted(r["id"] for r in out["rows"]) == list(range(990, 1010)) and out["io"]["files"] == 2
    assert run.stderr.splitlines() == [f"pageindex: warning: {lake}/a/up: not followed: a symbolic link to "
                                       f"{lake}, a directory it lies in (a cycle)"]


def test_verify_and_retrofit_in_place_through_links(tmp_path, capsys, caplog):
    lake = _lake(tmp_path)
    target = tmp_path / "other" / "b" / "g.parquet"
    before = pq.read_table(target)
    assert main(["retrofit", str(lake), "--json", "--follow-links"]) == 0
    captured = capsys.readouterr()
    records = [json.loads(line) for line in captured.out.splitlines() if line.startswith("{")]
    assert [(Path(r["path"]).relative_to(lake).as_posix(), r["status"]) for r in records] == [
        ("a/f.parquet", "indexed"), ("linked/b/g.parquet", "indexed")]
    assert len(_cycle_lines(caplog)) == 1
    caplog.clear()
    # The links are links still; the files they lead to were replaced, indexed, with the same rows.
    assert os.path.islink(lake / "linked") and os.path.islink(lake / "flink.parquet")
    assert not target.is_symlink() and pq.read_table(target).equals(before)
    assert verify(str(target)).chunks_with_column_index == 1
    assert main(["verify", str(lake), "--follow-links"]) == 0
    captured = capsys.readouterr()
    assert captured.out.count(": OK") == 2 and len(_cycle_lines(caplog)) == 1


def test_retrofit_output_mirrors_each_file_once(tmp_path, caplog):
    lake = _lake(tmp_path)
    out = tmp_path / "out"
    assert main(["retrofit", str(lake), "--output", str(out), "--follow-links"]) == 0
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert written == ["a/f.parquet", "linked/b/g.parquet"]
    assert len(_cycle_lines(caplog)) == 1


def test_retrofit_leaves_what_links_outside_lead_to(tmp_path):
    """The command as a nightly run gives it: a lake holding a link to a file and one to a
    directory outside it. Both are skipped with a warning each, the files they lead to are not
    changed (not even opened: a copy's bytes and mtime are the same), the lake's own files are
    indexed; in place and with --output alike."""
    lake = _lake(tmp_path)
    (tmp_path / "outside").mkdir()
    victim = tmp_path / "outside" / "victim.parquet"
    pq.write_table(pa.table({"id": range(5)}), victim)
    (lake / "link.parquet").symlink_to("../outside/victim.parquet")
    outside = [victim, tmp_path / "other" / "b" / "g.parquet"]
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in outside}
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    for extra in (["--output", str(tmp_path / "out")], []):
        run = subprocess.run([sys.executable, "-m", "pageindex", "retrofit", str(lake), "--json", *extra],
                             capture_output=True, text=True, env=env, check=False)
        assert run.returncode == 0, run.stderr
        records = [json.loads(line) for line in run.stdout.splitlines()]
        assert [(Path(r["path"]).relative_to(lake).as_posix(), r["status"]) for r in records] == [
            ("a/f.parquet", "indexed")]
        warnings = [line for line in run.stderr.splitlines() if "outside the input" in line]
        assert [w.split(": skipped")[0] for w in warnings] == [
            f"pageindex: warning: {lake}/{name}" for name in ("link.parquet", "linked", "twice")]
        assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in outside} == before
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*")
                  if p.is_file()) == ["a/f.parquet"]
