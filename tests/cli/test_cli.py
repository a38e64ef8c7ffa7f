"""End-to-end CLI: `python -m pageindex retrofit | inspect | verify` in subprocesses, on small
files written by pyarrow without a page index.

Exit codes (pageindex/cli/): 0 success, 1 a refused/failed file or a violation, 2 usage errors.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import pty
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
import pageindex.cli
import pageindex.cli.commands
from pageindex.cli.progress import render
from pageindex.scan import compiled
from tests.helpers.cli import ok, run_cli
from tests.helpers.files import corrupt_first_page_min, write_sorted_int_file
from tests.helpers.paths import REPO_ROOT
from tests.helpers.retrofit_checks import assert_same_data

ROWS = 3000
ROWS_PER_PAGE = 256
PAGES = -(-ROWS // ROWS_PER_PAGE)  # 12
MAGIC_BASE = 0x1122334455667788  # little-endian bytes occur nowhere else in the index region

# One record per file, as the Spark job's --report writes them (pageindex/job/process.py).
RETROFIT_KEYS = {"path", "output", "status", "reason", "bytes_in", "bytes_out", "row_groups", "pages",
                 "chunks_with_column_index", "chunks_without_column_index", "chunks_from_page_stats",
                 "bloom_filters", "without_column_index_reasons", "violations", "bytes_read", "seconds",
                 "index_bytes_read", "copy_bytes_read", "no_page_skipping", "page_stats_fallback_reasons",
                 "notes", "retryable", "chunk_statistics", "version", "scan_path"}


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
    proc = ok(run_cli("retrofit", src, "--output", dst))
    return SimpleNamespace(dir=d, src=src, src_sha=sha(src), dst=dst, retrofit_stdout=proc.stdout)


# ---------------------------------------------------------------- retrofit

def test_retrofit_to_dst(files):
    out = files.retrofit_stdout
    assert f"{files.src}: indexed -> {files.dst}" in out
    assert f"row groups 1, pages {6 * PAGES}, chunks 6 (6 with ColumnIndex, 0 without)" in out
    assert re.search(r"size \d+ -> \d+ bytes \(\+\d+\)", out)
    assert sha(files.src) == files.src_sha, "retrofit SRC --output DST changed SRC"
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
    proc = ok(run_cli("retrofit", "--json", files.src, "--output", out))
    doc = json.loads(proc.stdout)
    assert set(doc) == RETROFIT_KEYS, set(doc) ^ RETROFIT_KEYS
    assert doc["status"] == "indexed" and doc["reason"] == ""
    assert doc["path"] == str(files.src) and doc["output"] == str(out)
    assert doc["bytes_in"] == files.src.stat().st_size
    assert doc["bytes_out"] == out.stat().st_size
    assert doc["version"] == str(files.src.stat().st_mtime_ns)  # the input, left as it was
    assert doc["row_groups"] == 1 and doc["pages"] == 6 * PAGES
    assert doc["chunks_with_column_index"] == 6 and doc["chunks_without_column_index"] == 0
    assert doc["chunks_from_page_stats"] == 0 and doc["without_column_index_reasons"] == {}
    assert doc["page_stats_fallback_reasons"] == {} and doc["no_page_skipping"] is None
    # --output: the prefix is copied from the input, so part of what was read was read to copy it
    assert doc["copy_bytes_read"] == files.src.stat().st_size  # the whole file, its footer included
    assert doc["index_bytes_read"] + doc["copy_bytes_read"] == doc["bytes_read"]
    assert out.read_bytes() == files.dst.read_bytes()
    assert proc.stderr == "", "one file: no summary"
    assert doc["scan_path"] == compiled.path()  # the subprocess runs this interpreter, this environment


def test_retrofit_bloom_filter_flags(files, tmp_path):
    out = tmp_path / "bloom.parquet"
    proc = ok(run_cli("retrofit", files.src, "--output", out, "--bloom-filter", "i,s", "--bloom-fpp", "0.05",
                      "--bloom-max-bytes", "1024"))
    assert "2 bloom filters written" in proc.stdout
    meta = pq.ParquetFile(out).metadata.row_group(0)
    assert [meta.column(c).bloom_filter_length is not None for c in range(6)] == [True, False, False, True,
                                                                                 False, False]
    for bad in (["--bloom-fpp", "1.5"], ["--bloom-max-bytes", "1000"], ["--bloom-filter", ","]):
        proc = ok(run_cli("retrofit", files.src, "--output", tmp_path / "x.parquet", "--bloom-filter", "i", *bad), 2)
        assert "bloom" in proc.stderr and not (tmp_path / "x.parquet").exists()


@pytest.mark.slow
def test_retrofit_truncate_length(files, tmp_path):
    out = tmp_path / "t8.parquet"
    ok(run_cli("retrofit", "--truncate-length", "8", files.src, "--output", out))
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
    proc = ok(run_cli("retrofit", "--force", copy, "--output", forced))
    assert f"{copy}: indexed -> {forced}" in proc.stdout
    # The same options: what the first run appended is replaced by the same bytes.
    assert forced.read_bytes() == before[1]
    assert "OK" in ok(run_cli("verify", forced)).stdout
    assert_same_data(files.src, forced)


@pytest.mark.slow
def test_dry_run_writes_nothing(files, tmp_path):
    dst = tmp_path / "never.parquet"
    proc = ok(run_cli("retrofit", "--dry-run", files.src, "--output", dst))
    assert f"{files.src}: dry_run\n" in proc.stdout  # no "-> dst": nothing was written
    assert not dst.exists()
    doc = json.loads(ok(run_cli("retrofit", "--dry-run", "--json", files.src, "--output", dst)).stdout)
    assert doc["status"] == "dry_run" and doc["output"] is None  # a record names only what was written
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
        m = re.search(r"row group 0\s+column (\S+) \((.+?)\)\s+codec=SNAPPY\s+bytes=\d+\s+pages=(\d+)", block)
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
    assert view["index_state"] == "none"
    assert {c["column"]: c["pages"] for c in view["chunks"]} == dict.fromkeys("i d dec s ts long".split(), PAGES)
    text = ok(run_cli("inspect", files.src)).stdout
    assert "page index: none (no page index" in text and "offset_index=no" in text
    assert re.search(r"column dec \(\w+ DECIMAL\(9,2\)\)  codec=SNAPPY .* pages=12 ", text), text


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
    proc = ok(run_cli("verify", bad), code=3)  # in the file's bytes: no retry mends it
    assert f"{bad}: VIOLATIONS" in proc.stdout
    assert re.search(r"row group 0, column k, page 0: min: ", proc.stdout), proc.stdout
    doc = json.loads(ok(run_cli("verify", "--json", bad), code=3).stdout)
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
    ["retrofit", "--jobs", "0", "x.parquet"],
    ["retrofit", "--threads", "0", "x.parquet"],
    ["retrofit", "--overwrite", "x.parquet"],  # --overwrite is for --output only
    ["retrofit", "a.parquet", "b.parquet"],  # the old SRC DST form, b.parquet missing
    ["inspect"],
    ["verify"],
], ids=lambda a: " ".join(a) or "no-args")
@pytest.mark.slow
def test_usage_errors_exit_2(args):
    proc = ok(run_cli(*args), code=2)
    assert "usage:" in proc.stderr


@pytest.mark.parametrize("command", ["retrofit", "inspect", "verify"])
def test_missing_file_exits_2(command, tmp_path):
    """A missing input is a usage error: a retry cannot mend it."""
    missing = tmp_path / "nope.parquet"
    proc = ok(run_cli(command, missing), code=2)
    assert "MissingInputError" in proc.stderr and str(missing) in proc.stderr
    assert "does not exist" in proc.stderr
    assert os.listdir(tmp_path) == []


def test_not_parquet_named_fails(tmp_path):
    """A file named on the command line is meant to be Parquet: it fails (found in a directory
    it would be skipped, see test_directory_mirrored_to_output)."""
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"this is not parquet at all, just some text" * 10)
    before = (junk.stat().st_mtime_ns, junk.read_bytes())
    proc = ok(run_cli("retrofit", junk, "--output", tmp_path / "out.parquet"), code=3)
    assert f"pageindex: error: {junk}: failed: NotParquetError: no Parquet magic" in proc.stderr
    doc = json.loads(ok(run_cli("retrofit", "--json", junk), code=3).stdout)
    assert doc["status"] == "failed" and doc["path"] == str(junk) and "NotParquetError" in doc["reason"]
    assert doc["retryable"] is False
    for command in ("inspect", "verify"):
        proc = ok(run_cli(command, junk), code=3)
        assert f"NotParquetError: {junk}" in proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["junk.parquet"]
    assert (junk.stat().st_mtime_ns, junk.read_bytes()) == before


def test_run_error_as_json(tmp_path):
    missing = tmp_path / "nope.parquet"
    proc = ok(run_cli("retrofit", "--json", missing), code=2)
    doc = json.loads(proc.stdout)
    assert doc == {"error": "MissingInputError", "message": f"{missing}: input does not exist", "path": str(missing)}


def test_output_into_a_closed_pipe_has_no_traceback(tmp_path):
    """`pageindex inspect --json --all-pages f | head -1` must not end in a Python traceback."""
    src = write_sorted_int_file(tmp_path / "many_pages.parquet", 100_000, page_index=False,
                                write_batch_size=256, data_page_size=1024)
    pageindex.retrofit(str(src))
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, "-m", "pageindex", "inspect", "--json", "--all-pages", str(src)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO_ROOT, env=env)
    assert proc.stdout.read(1) == b"{"
    proc.stdout.close()  # like `head -1` exiting: the output is far larger than a pipe buffer
    stderr = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert "Traceback" not in stderr, stderr
    assert proc.returncode >= 0 or proc.returncode == -signal.SIGPIPE, proc.returncode


# ---------------------------------------------------------------- many files (issue 26)

def write_rows(path: Path, first: int, rows: int = 2000) -> Path:
    """A small file without a page index whose rows start at `first` (to tell files apart)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({"k": pa.array(range(first, first + rows), pa.int64()),
                      "s": pa.array([f"v{k:07d}" for k in range(first, first + rows)])})
    pq.write_table(table, path, data_page_size=1024, write_batch_size=256, write_page_index=False)
    return path


def state(path: Path) -> tuple[int, bytes]:
    return path.stat().st_mtime_ns, path.read_bytes()


def keys(path: Path) -> list[int]:
    return pq.read_table(path).column("k").to_pylist()


def indexed(path: Path) -> bool:
    md = pq.ParquetFile(path).metadata
    return all(md.row_group(r).column(c).has_offset_index and md.row_group(r).column(c).has_column_index
               for r in range(md.num_row_groups) for c in range(md.num_columns))


def test_glob_of_two_files_indexes_both_in_place(tmp_path):
    """The data-loss report: `retrofit *.parquet` in a folder of eu.parquet and us.parquet wrote
    eu's rows over us.parquet. Every path is an input now; each file keeps its own rows."""
    eu, us = write_rows(tmp_path / "eu.parquet", 0), write_rows(tmp_path / "us.parquet", 1_000_000)
    proc = ok(run_cli("retrofit", *sorted(tmp_path.glob("*.parquet"))))
    assert f"{eu}: indexed\n" in proc.stdout and f"{us}: indexed\n" in proc.stdout
    assert "indexed ->" not in proc.stdout
    assert "pageindex retrofit: 2 files" in proc.stdout and re.search(r"indexed\s+2 files", proc.stdout)
    assert keys(eu) == list(range(0, 2000)) and keys(us) == list(range(1_000_000, 1_002_000))
    assert indexed(eu) and indexed(us)
    out = ok(run_cli("verify", eu, us)).stdout
    assert f"{eu}: OK" in out and f"{us}: OK" in out
    assert sorted(os.listdir(tmp_path)) == ["eu.parquet", "us.parquet"]


def test_old_src_dst_form_is_refused(tmp_path):
    src = write_rows(tmp_path / "src.parquet", 0)
    before = state(src)
    proc = ok(run_cli("retrofit", src, tmp_path / "dst.parquet"), code=2)
    assert "usage:" in proc.stderr and f"--output {tmp_path / 'dst.parquet'}" in proc.stderr
    assert state(src) == before and sorted(os.listdir(tmp_path)) == ["src.parquet"]


def test_existing_output_needs_overwrite(tmp_path):
    src = write_rows(tmp_path / "src.parquet", 0)
    dst = write_rows(tmp_path / "dst.parquet", 500)
    before, src_before = state(dst), state(src)
    proc = ok(run_cli("retrofit", src, "--output", dst), code=2)
    assert "OutputRefusedError" in proc.stderr and f"{dst}: exists" in proc.stderr and "--overwrite" in proc.stderr
    assert state(dst) == before and state(src) == src_before
    ok(run_cli("retrofit", src, "--output", dst, "--overwrite"))
    assert keys(dst) == keys(src) and indexed(dst) and state(src) == src_before
    expected = tmp_path / "expected.parquet"
    pageindex.retrofit(str(src), str(expected))
    assert dst.read_bytes() == expected.read_bytes()


def test_output_that_is_an_input_is_refused(tmp_path):
    src = write_rows(tmp_path / "d" / "src.parquet", 0)
    link = tmp_path / "link.parquet"
    link.symlink_to(src)
    before = state(src)
    for output in (src, link, tmp_path / "d"):  # the file, a link to it, its directory mirrored
        args = (tmp_path / "d", "--output", output) if output.is_dir() else (src, "--output", output)
        proc = ok(run_cli("retrofit", *args, "--overwrite"), code=2)
        assert "OutputRefusedError" in proc.stderr and "is one of the inputs" in proc.stderr, proc.stderr
    assert state(src) == before and link.is_symlink()


def test_directory_as_output_for_one_file(tmp_path):
    src = write_rows(tmp_path / "src.parquet", 0)
    out = tmp_path / "out"
    out.mkdir()
    proc = ok(run_cli("retrofit", src, "--output", out), code=2)
    assert "OutputRefusedError" in proc.stderr and f"{out}: is a directory" in proc.stderr
    assert os.listdir(out) == []
    ok(run_cli("retrofit", src, "--output", f"{out}/"))  # a trailing slash: into the directory
    assert os.listdir(out) == ["src.parquet"] and keys(out / "src.parquet") == keys(src)


@pytest.fixture
def tree(tmp_path):
    """A dataset directory: partitions, a hidden and an underscore entry, a non-Parquet file."""
    root = tmp_path / "data"
    for i, rel in enumerate(["a.parquet", "day=1/b.parquet", "day=2/c.parquet", "day=2/deep/d.parquet"]):
        write_rows(root / rel, i * 10_000)
    write_rows(root / "_tmp" / "x.parquet", 99)
    write_rows(root / ".hidden.parquet", 98)
    (root / "_SUCCESS").write_bytes(b"")
    (root / "day=1" / "README.txt").write_text("not data")
    return root


DATA = ["a.parquet", "day=1/b.parquet", "day=2/c.parquet", "day=2/deep/d.parquet"]


def files_below(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_directory_mirrored_to_output(tree, tmp_path):
    before = {rel: state(tree / rel) for rel in files_below(tree)}
    out = tmp_path / "out"
    report = tmp_path / "reports" / "run.jsonl"
    proc = ok(run_cli("retrofit", tree, "--output", out, "--json", "--report", report))
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    by_path = {r["path"]: r for r in records}
    assert sorted(by_path) == sorted(str(tree / rel) for rel in [*DATA, "day=1/README.txt"])
    skipped = by_path[str(tree / "day=1" / "README.txt")]
    assert skipped["status"] == "skipped" and "magic" in skipped["reason"]
    assert all(by_path[str(tree / rel)]["status"] == "indexed" for rel in DATA)
    assert all(by_path[str(tree / rel)]["output"] == str(out / rel) for rel in DATA)
    assert files_below(out) == DATA, "hidden, underscore and non-Parquet entries are not mirrored"
    for rel in DATA:
        assert keys(out / rel) == keys(tree / rel) and indexed(out / rel)
    assert {rel: state(tree / rel) for rel in files_below(tree)} == before, "an input changed"
    assert [json.loads(line) for line in report.read_text().splitlines()] == records
    assert "pageindex retrofit: 5 files" in proc.stderr and re.search(r"skipped\s+1 file ", proc.stderr)


def test_jobs_2_writes_what_jobs_1_writes(tree, tmp_path):
    ok(run_cli("retrofit", tree, "--output", tmp_path / "one", "--jobs", "1"))
    ok(run_cli("retrofit", tree, "--output", tmp_path / "two", "--jobs", "2"))
    assert files_below(tmp_path / "one") == files_below(tmp_path / "two") == DATA
    for rel in DATA:
        assert (tmp_path / "one" / rel).read_bytes() == (tmp_path / "two" / rel).read_bytes()


@pytest.mark.parametrize("command", ["retrofit", "verify"])
@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5", ""])
def test_threads_not_a_positive_number_is_one_error_line(command, value, capsys):
    with pytest.raises(SystemExit) as exited:
        pageindex.cli.main([command, "--threads", value, "x.parquet"])
    assert exited.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert errors == [f"pageindex {command}: error: argument --threads: must be a positive number or auto, "
                      f"not {value!r}"]


def test_verify_threads_reach_verify(tree, monkeypatch):
    from pageindex.index.parallel import auto_threads

    asked: list[int] = []
    verify = pageindex.cli.commands.verify
    monkeypatch.setattr(pageindex.cli.commands, "verify", lambda *a, threads: asked.append(threads) or verify(*a, threads=threads))
    assert pageindex.cli.main(["verify", str(tree / "a.parquet"), "--threads", "3"]) == 0
    assert pageindex.cli.main(["verify", str(tree / "a.parquet")]) == 0
    assert asked == [3, auto_threads()]


def test_threads_reach_each_file_auto_in_one_process_one_per_worker(tree, tmp_path, monkeypatch):
    """--threads N is each file's; without it, auto in one process (1 under --jobs above 1,
    whose worker processes already take the cores)."""
    from pageindex.index.parallel import auto_threads
    from pageindex.job import process

    asked: list[int] = []
    retrofit = process.retrofit
    monkeypatch.setattr(process, "retrofit", lambda *a, **kw: asked.append(kw["threads"]) or retrofit(*a, **kw))
    assert pageindex.cli.main(["retrofit", str(tree), "--dry-run", "--threads", "3"]) == 0
    assert asked == [3] * (len(DATA) + 1)  # README.txt too, found not Parquet
    asked.clear()
    assert pageindex.cli.main(["retrofit", str(tree / "a.parquet"), "--dry-run", "--threads", "auto"]) == 0
    assert pageindex.cli.main(["retrofit", str(tree / "a.parquet"), "--dry-run"]) == 0
    assert pageindex.cli.main(["retrofit", str(tree / "a.parquet"), "--dry-run", "--jobs", "4"]) == 0
    assert asked == [auto_threads()] * 3
    assert pageindex.cli.commands._threads(None, 4, 2) == 1 and pageindex.cli.commands._threads(2, 4, 2) == 2


def test_threads_2_writes_what_threads_1_writes(tree, tmp_path):
    ok(run_cli("retrofit", tree, "--output", tmp_path / "one", "--threads", "1"))
    ok(run_cli("retrofit", tree, "--output", tmp_path / "two", "--threads", "2"))
    for rel in DATA:
        assert (tmp_path / "one" / rel).read_bytes() == (tmp_path / "two" / rel).read_bytes()


def test_one_corrupt_file_fails_the_run_not_the_others(tree, tmp_path):
    bad = tree / "day=2" / "bad.parquet"
    bad.write_bytes(b"PAR1" + b"\0" * 200 + b"PAR1")
    bad_before = state(bad)
    report = tmp_path / "run.parquet"
    proc = ok(run_cli("retrofit", tree, "--jobs", "2", "--report", report), code=3)
    assert f"pageindex: error: {bad}: failed: MalformedFileError" in proc.stderr
    assert re.search(r"failed\s+1 file ", proc.stdout) and re.search(r"indexed\s+4 files", proc.stdout)
    assert state(bad) == bad_before
    for rel in DATA:
        assert indexed(tree / rel) and keys(tree / rel)[0] == DATA.index(rel) * 10_000
    rows = pq.read_table(report).to_pylist()
    assert {r["path"]: r["status"] for r in rows}[str(bad)] == "failed" and len(rows) == 6
    assert proc.stdout.rstrip().splitlines()[-1].split() == ["report", str(report)]
    verified = run_cli("verify", tree)
    assert verified.returncode == 3 and "MalformedFileError" in verified.stderr  # the bad file
    assert sum(": OK" in line for line in verified.stdout.splitlines()) == len(DATA)


def test_unwritable_report_found_before_any_file_changes(tree, tmp_path):
    """The report's parent is a regular file (root ignores permission bits, so not chmod):
    exit 2 with one line naming the report, before any file is touched."""
    before = {rel: state(tree / rel) for rel in DATA}
    blocker = tmp_path / "reports"
    blocker.write_text("a file where the report's directory would be\n")
    report = blocker / "run.parquet"
    proc = ok(run_cli("retrofit", tree, "--report", report), code=2)
    assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert str(report) in proc.stderr and f"{blocker} is not a directory" in proc.stderr
    assert {rel: state(tree / rel) for rel in DATA} == before


def test_exit_codes_per_class(tree, tmp_path):
    """0 ok; 3 a malformed file (no retry mends it); 2 a missing input (nothing changed)."""
    bad = tree / "day=2" / "bad.parquet"
    bad.write_bytes(b"PAR1" + b"\0" * 200 + b"PAR1")
    ok(run_cli("retrofit", tree / "a.parquet"))
    proc = ok(run_cli("retrofit", "--json", tree), code=3)
    records = {r["path"]: r for r in map(json.loads, proc.stdout.splitlines())}
    assert records[str(bad)]["status"] == "failed" and records[str(bad)]["retryable"] is False
    ok(run_cli("verify", tree), code=3)
    ok(run_cli("inspect", bad), code=3)
    before = state(tree / "a.parquet")
    # (three paths: two would read as the old `retrofit SRC DST`, a usage error of its own)
    proc = ok(run_cli("retrofit", tree / "a.parquet", tree / "day=1", tmp_path / "missing"), code=2)
    assert "MissingInputError" in proc.stderr and str(tmp_path / "missing") in proc.stderr
    assert state(tree / "a.parquet") == before
    proc = ok(run_cli("lookup", tree / "a.parquet", "--where", "no_such_column = 1"), code=2)
    assert "PredicateError" in proc.stderr and "no_such_column" in proc.stderr, proc.stderr


@pytest.mark.parametrize("command", [[], ["retrofit"], ["inspect"], ["verify"], ["lookup"]])
def test_help_lists_the_exit_codes(command):
    out = ok(run_cli(*command, "--help")).stdout
    assert "exit codes" in out
    for code in ("0", "1", "2", "3"):
        assert re.search(rf"^  {code}  \S", out, re.M), out


def test_inspect_and_verify_take_several_paths(tree, files):
    proc = ok(run_cli("verify", "--json", tree / "a.parquet", files.dst, tree / "day=2"))
    docs = [json.loads(line) for line in proc.stdout.splitlines()]
    # in path order, as the job's discovery lists them
    expected = {str(tree / "a.parquet"): 0, str(files.dst): 6, str(tree / "day=2" / "c.parquet"): 0,
                str(tree / "day=2" / "deep" / "d.parquet"): 0}
    assert [d["path"] for d in docs] == sorted(expected)
    assert {d["path"]: d["chunks_with_offset_index"] for d in docs} == expected
    proc = ok(run_cli("inspect", "--json", files.dst, tree / "day=1"))
    docs = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [d["path"] for d in docs] == sorted([str(files.dst), str(tree / "day=1" / "b.parquet")])
    assert f"{tree / 'day=1' / 'README.txt'}: skipped: no Parquet magic" in proc.stderr
    text = ok(run_cli("inspect", files.dst, tree / "a.parquet")).stdout
    assert f"file: {files.dst}" in text and f"file: {tree / 'a.parquet'}" in text


def test_in_place_refused_on_a_delta_table(tree):
    (tree / "_delta_log").mkdir()
    before = {rel: state(tree / rel) for rel in DATA}
    proc = ok(run_cli("retrofit", tree), code=2)
    error = proc.stderr.strip().splitlines()[-1]  # after the usage lines, which list --output
    assert "a Delta table" in error and "pageindex-job --input TABLE_ROOT --in-place" in error
    assert "--output" not in error, error
    assert {rel: state(tree / rel) for rel in DATA} == before


# ---------------------------------------------------------------- files that cannot be replaced

@contextlib.contextmanager
def immutable(path: Path):
    """chattr +i: not even root may rename over or into it. Skips where chattr is refused."""
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)],
                                                         capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here (needs root and ext4/xfs/btrfs)")
    try:
        yield path
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_immutable_file_in_place_is_a_typed_error(tmp_path):
    src = write_rows(tmp_path / "frozen.parquet", 0)
    before = state(src)
    with immutable(src):
        proc = ok(run_cli("retrofit", src), code=1)
        assert f"pageindex: error: {src}: failed: StorageError" in proc.stderr
        assert str(src) in proc.stderr.split("StorageError", 1)[1]
        assert state(src) == before
    assert os.listdir(tmp_path) == ["frozen.parquet"], "temporary left behind"


def test_read_only_directory_is_a_typed_error(tmp_path):
    folder = tmp_path / "ro"
    src = write_rows(folder / "data.parquet", 0)
    before = state(src)
    if os.geteuid() == 0:
        context = immutable(folder)  # root ignores permission bits
    else:
        folder.chmod(0o555)
        context = contextlib.nullcontext()
    try:
        with context:
            proc = ok(run_cli("retrofit", src), code=1)
            assert f"pageindex: error: {src}: failed: StorageError" in proc.stderr
            assert state(src) == before and os.listdir(folder) == ["data.parquet"]
    finally:
        folder.chmod(0o755)


def test_symlink_in_place_replaces_its_target(tmp_path):
    """Decided (README, --help): a link named in place stays a link; the file it points to is
    replaced atomically, as through any writer that opens the link."""
    target = write_rows(tmp_path / "store" / "real.parquet", 0)
    link = tmp_path / "link.parquet"
    link.symlink_to(target)
    expected = tmp_path / "expected.parquet"
    pageindex.retrofit(str(target), str(expected))
    proc = ok(run_cli("retrofit", link))
    assert f"{link}: indexed" in proc.stdout
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == expected.read_bytes()
    assert os.listdir(target.parent) == ["real.parquet"]


# ---------------------------------------------------------------- progress

def test_progress_bar_only_on_a_terminal(tree):
    piped = ok(run_cli("retrofit", "--dry-run", tree))
    assert "\r" not in piped.stderr and "ETA" not in piped.stderr
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    master, slave = pty.openpty()
    proc = subprocess.run([sys.executable, "-m", "pageindex", "retrofit", "--dry-run", str(tree)],
                          stdout=subprocess.PIPE, stderr=slave, cwd=REPO_ROOT, env=env, timeout=120)
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: the other side is closed
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    assert proc.returncode == 0
    bars = shown.decode().split("\r")
    assert any(re.match(r"\[#+-*\] [1-5]/5 files .*/s  (ETA|done)", bar) for bar in bars), bars
    assert any(re.match(r"\[#{24}\] 5/5 files .* done", bar) for bar in bars), bars


def test_progress_render():
    assert render(0, 4, 0, 4096, 0.0) == "[------------------------] 0/4 files  0 B/4.0 KiB  0 B/s  ETA --:--"
    assert render(2, 4, 1024, 4096, 2.0) == "[######------------------] 2/4 files  1.0 KiB/4.0 KiB  512 B/s  ETA 0:06"
    assert render(4, 4, 4096, 4096, 1.0).endswith("4.0 KiB/s  done")
    assert render(1, 2, 1 << 30, 1 << 31, 1.0).endswith("ETA 0:01")


# ---------------------------------------------------------------- object stores (moto)

def _run_cli_env(env_update: dict[str, str | None], *args: str | Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    for key, value in env_update.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return subprocess.run([sys.executable, "-m", "pageindex", *map(str, args)], capture_output=True,
                          text=True, timeout=300, cwd=REPO_ROOT, env=env, check=False)


@pytest.mark.s3
@pytest.mark.parametrize("how", ["flag", "environment"])
def test_every_command_reaches_an_s3_compatible_endpoint(how, s3_server, s3_bucket, tmp_path):
    """Through --s3-endpoint-url with no endpoint in the environment, and through
    AWS_ENDPOINT_URL_S3 (botocore's own variable) with no flag."""
    from tests.helpers import s3 as s3h

    local = tmp_path / "data.parquet"
    write_sorted_int_file(local, ROWS, page_index=False)
    client = s3h.boto3_client(s3_server)
    client.put_object(Bucket=s3_bucket, Key="t/data.parquet", Body=local.read_bytes())
    url = f"s3://{s3_bucket}/t/data.parquet"
    if how == "flag":
        env, flags = {"AWS_ENDPOINT_URL_S3": None, "AWS_ENDPOINT_URL": None}, ["--s3-endpoint-url", s3_server]
    else:
        env, flags = {"AWS_ENDPOINT_URL_S3": s3_server}, []

    ok(_run_cli_env(env, "retrofit", url, *flags))
    indexed = tmp_path / "indexed.parquet"
    indexed.write_bytes(client.get_object(Bucket=s3_bucket, Key="t/data.parquet")["Body"].read())
    assert pq.ParquetFile(indexed).metadata.row_group(0).column(0).has_column_index
    assert_same_data(local, indexed)
    assert pageindex.verify(str(indexed)).ok

    assert "VIOLATIONS" not in ok(_run_cli_env(env, "verify", url, *flags)).stdout
    view = json.loads(ok(_run_cli_env(env, "inspect", "--json", url, *flags)).stdout)
    assert view["path"].endswith("t/data.parquet")
    found = json.loads(ok(_run_cli_env(env, "lookup", url, "--where", "k = 7", "--json", *flags)).stdout)
    assert found["num_rows"] == 1


def test_without_an_endpoint_s3_is_not_reached(tmp_path):
    """The flag above is what made the difference: with neither, the CLI fails cleanly."""
    env = {"AWS_ENDPOINT_URL_S3": None, "AWS_ENDPOINT_URL": None, "AWS_ACCESS_KEY_ID": "x",
           "AWS_SECRET_ACCESS_KEY": "y", "AWS_EC2_METADATA_DISABLED": "true", "AWS_DEFAULT_REGION": "us-east-1"}
    # One attempt (a nested storage option over pageindex's retry defaults): nothing listens there.
    proc = _run_cli_env(env, "verify", "s3://no-such-bucket-pageindex/x.parquet", "--s3-endpoint-url",
                        "http://127.0.0.1:9", "--storage-option", "config_kwargs.retries.max_attempts=1")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "StorageError" in proc.stderr and "EndpointConnectionError" in proc.stderr


def test_storage_option_syntax_errors_are_usage_errors():
    proc = _run_cli_env({}, "verify", "x.parquet", "--storage-option", "novalue")
    assert proc.returncode == 2 and "KEY=VALUE" in proc.stderr


# ---------------------------------------------------------------- help

def _arguments_without_help(parser, name: str):
    """(command, option) for every argument of `parser` and its subcommands that has no help text."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, subparser in action.choices.items():
                yield from _arguments_without_help(subparser, f"{name} {sub}")
        elif not action.help or action.help == argparse.SUPPRESS:
            yield name, "/".join(action.option_strings) or action.dest


def test_every_argument_has_help():
    from pageindex.cli import parser as cli_parser
    from pageindex.job.spark import parser as job_parser

    cli, job = cli_parser(), job_parser()
    assert len([a for sub in cli._subparsers._group_actions[0].choices.values() for a in sub._actions]) > 30
    assert list(_arguments_without_help(cli, "pageindex")) == []
    assert list(_arguments_without_help(job, "pageindex-job")) == []


def test_one_file_s_report_is_named_after_its_record(files, tmp_path):
    src, report = tmp_path / "one.parquet", tmp_path / "one.jsonl"
    src.write_bytes(files.src.read_bytes())
    proc = ok(run_cli("retrofit", src, "--report", report))
    assert proc.stdout.rstrip().splitlines()[-1] == f"  report {report}"
    assert [json.loads(line)["status"] for line in report.read_text().splitlines()] == ["indexed"]

