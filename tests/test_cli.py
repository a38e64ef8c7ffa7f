"""End-to-end CLI: `python -m pageindex retrofit | inspect | verify` in subprocesses, on small
files written by pyarrow without a page index.

Exit codes (pageindex/cli.py): 0 success, 1 a refused/failed file or a violation, 2 usage errors.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pageindex
from tests.helpers.files import corrupt_first_page_min, write_sorted_int_file
from tests.helpers.paths import REPO_ROOT
from tests.helpers.retrofit_checks import assert_same_data, footer_of

ROWS = 3000
ROWS_PER_PAGE = 256
PAGES = -(-ROWS // ROWS_PER_PAGE)  # 12
MAGIC_BASE = 0x1122334455667788  # little-endian bytes occur nowhere else in the index region

RETROFIT_KEYS = {"path", "output", "status", "bytes_in", "bytes_out", "row_groups", "pages",
                 "chunks_with_column_index", "chunks_without_column_index", "chunks",
                 "bytes_read", "seconds"}
CHUNK_KEYS = {"row_group", "column", "pages", "offset_index", "column_index", "reason"}


def run_cli(*args: str | Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "pageindex", *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=REPO_ROOT, env=env, check=False)


def ok(proc: subprocess.CompletedProcess, code: int = 0) -> subprocess.CompletedProcess:
    assert proc.returncode == code, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def write_typed_file(path: Path) -> Path:
    """One row group, 12 pages of 256 rows per column, no page index, sorted values of several
    logical types; `long` holds 105-byte strings (longer than the default truncation, 64)."""
    table = pa.table({
        "i": pa.array(range(ROWS), pa.int64()),
        "d": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=k) for k in range(ROWS)], pa.date32()),
        "dec": pa.array([Decimal("12.34") + Decimal(k) / 100 for k in range(ROWS)], pa.decimal128(9, 2)),
        "s": pa.array([f"name{k:05d}" for k in range(ROWS)]),
        "ts": pa.array([dt.datetime(2024, 1, 2, 3, 4, 5) + dt.timedelta(seconds=k) for k in range(ROWS)],
                       pa.timestamp("us")),
        "long": pa.array([("x" * 100) + f"{k:05d}" for k in range(ROWS)]),
    })
    pq.write_table(table, path, data_page_size=1024, write_batch_size=ROWS_PER_PAGE,
                   use_dictionary=False, write_page_index=False)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    src = write_typed_file(d / "typed.parquet")
    md = pq.ParquetFile(src).metadata
    assert not md.row_group(0).column(0).has_offset_index
    dst = d / "out" / "typed.indexed.parquet"
    proc = ok(run_cli("retrofit", src, dst))
    return SimpleNamespace(dir=d, src=src, src_sha=sha(src), dst=dst, retrofit_stdout=proc.stdout)


# ---------------------------------------------------------------- retrofit

def test_retrofit_to_dst(files):
    out = files.retrofit_stdout
    assert f"{files.src}: indexed -> {files.dst}" in out
    assert f"row groups 1, pages {6 * PAGES}, chunks 6 (6 with ColumnIndex, 0 without)" in out
    assert re.search(r"size \d+ -> \d+ bytes \(\+\d+\)", out)
    assert sha(files.src) == files.src_sha, "retrofit SRC DST changed SRC"
    md = pq.ParquetFile(files.dst).metadata
    assert all(md.row_group(0).column(c).has_offset_index and md.row_group(0).column(c).has_column_index
               for c in range(md.num_columns))
    assert_same_data(files.src, files.dst)
    assert sorted(os.listdir(files.dst.parent)) == [files.dst.name]


def test_retrofit_in_place(files, tmp_path):
    copy = tmp_path / "copy.parquet"
    shutil.copyfile(files.src, copy)
    proc = ok(run_cli("retrofit", copy))
    assert f"{copy}: indexed" in proc.stdout
    assert "->" not in proc.stdout.splitlines()[0]
    assert copy.read_bytes() == files.dst.read_bytes()
    assert os.listdir(tmp_path) == ["copy.parquet"], "temporary file left behind"


def test_retrofit_json(files, tmp_path):
    out = tmp_path / "j.parquet"
    proc = ok(run_cli("retrofit", "--json", files.src, out))
    doc = json.loads(proc.stdout)
    assert RETROFIT_KEYS <= set(doc), RETROFIT_KEYS - set(doc)
    assert doc["status"] == "indexed"
    assert doc["path"] == str(files.src) and doc["output"] == str(out)
    assert doc["bytes_in"] == files.src.stat().st_size
    assert doc["bytes_out"] == out.stat().st_size
    assert doc["row_groups"] == 1 and doc["pages"] == 6 * PAGES
    assert doc["chunks_with_column_index"] == 6 and doc["chunks_without_column_index"] == 0
    assert [c["column"] for c in doc["chunks"]] == ["i", "d", "dec", "s", "ts", "long"]
    for c in doc["chunks"]:
        assert CHUNK_KEYS <= set(c), CHUNK_KEYS - set(c)
        assert c["pages"] == PAGES and c["offset_index"] and c["column_index"] and c["reason"] == ""
    assert out.read_bytes() == files.dst.read_bytes()


@pytest.mark.slow
def test_retrofit_truncate_length(files, tmp_path):
    out = tmp_path / "t8.parquet"
    ok(run_cli("retrofit", "--truncate-length", "8", files.src, out))
    view = json.loads(ok(run_cli("inspect", "--json", "--all-pages", out)).stdout)
    assert "truncate_length=8" in view["indexed_by_pageindex"]
    chunks = {c["column"]: c for c in view["chunks"]}
    first = chunks["long"]["page_rows"][0]
    assert (first["min"], first["max"]) == ("'xxxxxxxx'", "'xxxxxxxy'")  # prefix; prefix + 1
    first = chunks["s"]["page_rows"][0]  # 'name00000'..'name00255' are 9 bytes
    assert (first["min"], first["max"]) == ("'name0000'", "'name0026'")
    # a decimal is never truncated
    assert chunks["dec"]["page_rows"][0]["min"] == "12.34"
    ok(run_cli("verify", out))
    # the default (64) keeps 9-byte strings whole
    default = json.loads(ok(run_cli("inspect", "--json", files.dst)).stdout)
    s = {c["column"]: c for c in default["chunks"]}["s"]["page_rows"][0]
    assert (s["min"], s["max"]) == ("'name00000'", "'name00255'")
    assert "truncate_length=64" in default["indexed_by_pageindex"]


@pytest.mark.slow
def test_second_run_reports_already_indexed_and_force_rebuilds(files, tmp_path):
    copy = tmp_path / "indexed.parquet"
    shutil.copy2(files.dst, copy)
    before = (copy.stat().st_mtime_ns, copy.read_bytes())
    proc = ok(run_cli("retrofit", copy))
    assert "already has a complete page index" in proc.stdout
    assert (copy.stat().st_mtime_ns, copy.read_bytes()) == before
    doc = json.loads(ok(run_cli("retrofit", "--json", copy)).stdout)
    assert doc["status"] == "already_indexed"
    assert (copy.stat().st_mtime_ns, copy.read_bytes()) == before
    forced = tmp_path / "forced.parquet"
    proc = ok(run_cli("retrofit", "--force", copy, forced))
    assert f"{copy}: indexed -> {forced}" in proc.stdout
    old_footer_start = footer_of(before[1]).start
    assert forced.read_bytes()[:old_footer_start] == before[1][:old_footer_start]
    assert "OK" in ok(run_cli("verify", forced)).stdout
    assert_same_data(files.src, forced)


@pytest.mark.slow
def test_dry_run_writes_nothing(files, tmp_path):
    dst = tmp_path / "never.parquet"
    proc = ok(run_cli("retrofit", "--dry-run", files.src, dst))
    assert f"{files.src}: dry_run" in proc.stdout
    assert not dst.exists()
    doc = json.loads(ok(run_cli("retrofit", "--dry-run", "--json", files.src, dst)).stdout)
    assert doc["status"] == "dry_run" and doc["output"] is None
    assert doc["bytes_out"] == files.dst.stat().st_size  # the size it would have written
    assert not dst.exists()
    copy = tmp_path / "copy.parquet"
    shutil.copy2(files.src, copy)
    before = (copy.stat().st_mtime_ns, copy.read_bytes())
    ok(run_cli("retrofit", "--dry-run", copy))
    assert (copy.stat().st_mtime_ns, copy.read_bytes()) == before
    assert sorted(os.listdir(tmp_path)) == ["copy.parquet"]
    assert sha(files.src) == files.src_sha


# ---------------------------------------------------------------- inspect

EXPECTED_FIRST_PAGE = {  # column -> (min, max) of page 0, rendered by logical type
    "i": ("0", "255"),
    "d": ("2024-01-01", "2024-09-12"),
    "dec": ("12.34", "14.89"),
    "s": ("'name00000'", "'name00255'"),
    "ts": ("2024-01-02T03:04:05", "2024-01-02T03:08:20"),
}


def test_inspect_text(files):
    out = ok(run_cli("inspect", files.dst)).stdout
    assert f"file: {files.dst}" in out
    assert "rows: 3000" in out and "page index: complete" in out
    sections = {}
    for block in out.split("\n\n"):
        m = re.search(r"row group 0\s+column (\S+) \((\w+)\)\s+pages=(\d+)", block)
        if m:
            sections[m.group(1)] = block
            assert int(m.group(3)) == PAGES
            assert "offset_index=yes" in block and "column_index=yes" in block
            assert "boundary_order=ASCENDING" in block
    assert set(sections) == {"i", "d", "dec", "s", "ts", "long"}
    for column, (lo, hi) in EXPECTED_FIRST_PAGE.items():
        page0 = next(line for line in sections[column].splitlines() if re.match(r"\s+0\s+0\s", line))
        assert lo in page0 and hi in page0, f"{column}: {page0!r}"
    assert "(--all-pages to show them)" not in out  # 12 pages < the default 20
    limited = ok(run_cli("inspect", "--max-pages", "2", files.dst)).stdout
    assert f"{PAGES - 2} more pages (--all-pages to show them)" in limited


def test_inspect_json(files):
    view = json.loads(ok(run_cli("inspect", "--json", files.dst)).stdout)
    assert view["path"] == str(files.dst) and view["num_rows"] == ROWS
    assert view["fully_indexed"] is True and view["indexed_by_pageindex"]
    chunks = {c["column"]: c for c in view["chunks"]}
    assert list(chunks) == ["i", "d", "dec", "s", "ts", "long"]
    for name, c in chunks.items():
        assert c["has_offset_index"] and c["has_column_index"] and c["boundary_order"] == "ASCENDING"
        assert c["pages"] == PAGES == len(c["page_rows"])
        assert [p["first_row"] for p in c["page_rows"]] == list(range(0, ROWS, ROWS_PER_PAGE))
        assert all(p["null_count"] == 0 and not p["null_page"] for p in c["page_rows"])
        if name in EXPECTED_FIRST_PAGE:
            lo, hi = EXPECTED_FIRST_PAGE[name]
            first = c["page_rows"][0]
            assert first["min"].startswith(lo) and first["max"].startswith(hi), (name, first)
    last = chunks["d"]["page_rows"][-1]
    assert last["max"] == (dt.date(2024, 1, 1) + dt.timedelta(days=ROWS - 1)).isoformat()


def test_inspect_file_without_index(files):
    view = json.loads(ok(run_cli("inspect", "--json", files.src)).stdout)
    assert view["fully_indexed"] is False and not view["indexed_by_pageindex"]
    assert all(not c["has_offset_index"] and not c["has_column_index"] for c in view["chunks"])
    text = ok(run_cli("inspect", files.src)).stdout
    assert "page index: incomplete" in text and "offset_index=no" in text


# ---------------------------------------------------------------- verify

def test_verify_ok(files):
    out = ok(run_cli("verify", files.dst)).stdout
    assert f"{files.dst}: OK" in out and "6 with OffsetIndex, 6 with ColumnIndex" in out
    doc = json.loads(ok(run_cli("verify", "--json", files.dst)).stdout)
    assert doc["ok"] is True and doc["violations"] == []
    assert doc["chunks"] == doc["chunks_with_offset_index"] == doc["chunks_with_column_index"] == 6
    assert doc["pages_checked"] == 6 * PAGES


def test_verify_reports_corrupted_column_index(tmp_path):
    plain = write_sorted_int_file(tmp_path / "plain.parquet", 4096, page_index=False, start=MAGIC_BASE,
                                  compression="none", use_dictionary=False, write_batch_size=512,
                                  data_page_size=1024)
    good = tmp_path / "good.parquet"
    pageindex.retrofit(str(plain), str(good))
    bad = corrupt_first_page_min(good, tmp_path / "bad.parquet", MAGIC_BASE)
    ok(run_cli("verify", good))
    proc = ok(run_cli("verify", bad), code=1)
    assert f"{bad}: VIOLATIONS" in proc.stdout
    assert re.search(r"row group 0, column k, page 0: min: ", proc.stdout), proc.stdout
    doc = json.loads(ok(run_cli("verify", "--json", bad), code=1).stdout)
    assert doc["ok"] is False
    assert [(v["column"], v["page"], v["check"]) for v in doc["violations"]] == [("k", 0, "min")]


def test_verify_file_without_index(files):
    proc = ok(run_cli("verify", files.src))
    assert "0 with OffsetIndex, 0 with ColumnIndex" in proc.stdout
    assert "(the file has no page index to verify)" in proc.stdout


# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("args", [
    [],
    ["bogus"],
    ["retrofit"],
    ["retrofit", "--no-such-flag", "x.parquet"],
    ["retrofit", "--truncate-length", "0", "x.parquet"],
    ["retrofit", "--truncate-length", "many", "x.parquet"],
    ["retrofit", "a.parquet", "b.parquet", "c.parquet"],
    ["inspect"],
    ["verify"],
], ids=lambda a: " ".join(a) or "no-args")
@pytest.mark.slow
def test_usage_errors_exit_2(args):
    proc = ok(run_cli(*args), code=2)
    assert "usage:" in proc.stderr


@pytest.mark.parametrize("command", ["retrofit", "inspect", "verify"])
def test_missing_file_exits_1(command, tmp_path):
    missing = tmp_path / "nope.parquet"
    proc = ok(run_cli(command, missing), code=1)
    assert "StorageError" in proc.stderr and str(missing) in proc.stderr
    assert "not found" in proc.stderr
    assert os.listdir(tmp_path) == []


def test_not_parquet_exits_1_and_json_error(tmp_path):
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"this is not parquet at all, just some text" * 10)
    proc = ok(run_cli("retrofit", junk, tmp_path / "out.parquet"), code=1)
    assert "MalformedFileError" in proc.stderr or "NotParquetError" in proc.stderr
    assert str(junk) in proc.stderr
    proc = ok(run_cli("retrofit", "--json", junk), code=1)
    doc = json.loads(proc.stdout)
    assert set(doc) >= {"error", "message", "path"} and doc["path"] == str(junk)
    assert sorted(os.listdir(tmp_path)) == ["junk.parquet"]


def test_output_into_a_closed_pipe_has_no_traceback(tmp_path):
    """`pageindex inspect --json --all-pages f | head -1` must not end in a Python traceback."""
    src = write_sorted_int_file(tmp_path / "many_pages.parquet", 100_000, page_index=False,
                                write_batch_size=256, data_page_size=1024)
    pageindex.retrofit(str(src))
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, "-m", "pageindex", "inspect", "--json", "--all-pages", str(src)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO_ROOT, env=env)
    assert proc.stdout.readline().strip() == b"{"
    proc.stdout.close()  # like `head -1` exiting: the output is far larger than a pipe buffer
    stderr = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert "Traceback" not in stderr, stderr
    assert proc.returncode >= 0 or proc.returncode == -signal.SIGPIPE, proc.returncode
