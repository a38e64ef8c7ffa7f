"""Every bad_input and encrypted corpus file: a clear, typed refusal, never a crash or a write.

pyarrow 26 aborts the whole process on some of these files (CATALOG column pyarrow_abort), and
pageindex decodes pages with pyarrow, so the library runs in child processes
(tests/helpers/bad_input_runner.py): one child handles every file and reports one JSON line per
file; if it dies, the file it was processing is reported as crashed and a new child takes the rest.
Each file runs three times: into a destination, in place on a copy, and with force=True.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest

from pageindex.io.commit import TEMP_TAG
from pageindex.verify import verify
from tests.helpers.bad_input_runner import REPO_ROOT, run_jobs
from tests.helpers.corpus import CORPUS_DIR, corpus_files, corpus_rows
from tests.helpers.report_parts import report_records
from tests.helpers.retrofit_checks import (
    assert_same_data,
    check_layout,
    footer_difference,
    footer_of,
    validator_violations_or_skip,
)

pytestmark = pytest.mark.slow  # every bad corpus file through a child process

# bad_input files that are valid Parquet and must be indexed, not refused.
VALID_BAD_INPUT = {
    "parquet-testing/data/nation.dict-malformed.parquet":
        "PARQUET-816: old parquet-mr wrote a dictionary chunk's total_compressed_size too small, "
        "so pages overrun the chunk; the spec requires readers (and us) to handle the quirk",
    "parquet-testing/bad_data/ARROW-GH-43605.parquet":
        "dictionary indices encoded with RLE bit width 0 (all indices 0): unusual but decodable",
    "arrow-testing/fuzzing/crash-649c71a618ae2fd80cec177a9676eb3e280fc1fa":
        "a copy of nullable.impala.parquet with one schema name changed ('key' -> 'iey'): valid",
}
# Corrupt files that already carry a complete page index, each broken or by a suspect writer
# (docs/FORMAT-RULES.md R18): retrofit does not trust that index, and the pages it then reads are
# refused with a typed error, as with --force; nothing is written.
INDEXED_CORRUPT = {
    "arrow-testing/fuzzing/crash-61d6204d481340860da54e30f1937b67234ad0f7",
    "parquet-testing/bad_data/ARROW-GH-47662.parquet",
    "parquet-testing/data/datapage_v1-corrupt-checksum.parquet",
    "parquet-testing/data/rle-dict-uncompressed-corrupt-checksum.parquet",
}
TYPED_ERRORS = {"MalformedFileError", "FooterMissingError", "EncryptedFileError", "UnsupportedFileError"}
# The corpus's files are broken, not being written, however recently they were copied or fetched.
BROKEN_NOW = ("--being-written-seconds", "0")

BAD = corpus_files("bad_input")
ENCRYPTED = corpus_files("encrypted")
ALL = BAD + ENCRYPTED
ABORT_PRONE = {r["path"] for r in corpus_rows("bad_input") + corpus_rows("encrypted") if r["pyarrow_abort"]}
MODES = ("dst", "in_place", "force")


def _rel(p: Path) -> str:
    return str(p.relative_to(CORPUS_DIR))


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


REFUSED = [p for p in ALL if _rel(p) not in VALID_BAD_INPUT]
INDEXED = [p for p in ALL if _rel(p) in VALID_BAD_INPUT]


def test_runner_survives_a_dying_child(tmp_path):
    """The harness itself: a child that aborts mid-list is reported as crashed (SIGABRT) for
    that file, and the files after it still run in a new child."""
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"not parquet")
    jobs = [{"src": str(junk), "dst": str(tmp_path / "a")},
            {"src": "second", "dst": None, "abort_for_test": True},
            {"src": str(junk), "dst": str(tmp_path / "c")}]
    first, second, third = run_jobs(jobs, batch_timeout=120)
    assert first["status"] == third["status"] == "error" and first["pageindex_error"]
    assert second["status"] == "crashed" and second["returncode"] == -6, second
    assert second["src"] == "second"


def test_valid_exceptions_are_in_the_corpus():
    assert sorted(_rel(p) for p in INDEXED) == sorted(VALID_BAD_INPUT)
    assert len(ENCRYPTED) > 0 and len(REFUSED) == len(ALL) - 3
    from pageindex.format.footer import read_footer
    from pageindex.index.marker import is_fully_indexed
    from pageindex.index.soundness import structural_flaws, suspect_writer
    from pageindex.io.storage import open_source

    for rel in INDEXED_CORRUPT:
        with open_source(str(CORPUS_DIR / rel)) as source:
            footer = read_footer(source)
            assert is_fully_indexed(footer), rel
            assert structural_flaws(source, footer) or suspect_writer(footer), rel


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every file in three modes, in child processes. Returns, per file: the outcome of each
    mode, the destination paths, the in-place copy, and the source hashes before and after."""
    work = tmp_path_factory.mktemp("bad_input")
    out_dir = work / "out"
    out_dir.mkdir()
    files, jobs = {}, []
    for i, src in enumerate(ALL):
        copy_dir = work / "inplace" / f"{i:03d}"
        copy_dir.mkdir(parents=True)
        copy = copy_dir / src.name
        shutil.copyfile(src, copy)
        f = SimpleNamespace(src=src, copy=copy, copy_dir=copy_dir, sha_before=_sha(src),
                            dst=out_dir / f"{i:03d}-dst-{src.name}",
                            forced=out_dir / f"{i:03d}-force-{src.name}")
        files[src] = f
        jobs += [{"src": str(src), "dst": str(f.dst)},
                 {"src": str(copy), "dst": None},
                 {"src": str(src), "dst": str(f.forced), "force": True}]
    outcomes = run_jobs(jobs, batch_timeout=300)
    assert len(outcomes) == len(jobs)
    for i, src in enumerate(ALL):
        f = files[src]
        f.outcome = dict(zip(MODES, outcomes[3 * i : 3 * i + 3]))
        f.sha_after = _sha(src)
    return SimpleNamespace(files=files, out_dir=out_dir)


def _alive(rec: dict, where: str) -> None:
    assert rec["status"] not in ("crashed", "timeout"), (
        f"{where}: the child process {rec['status']} (returncode {rec.get('returncode')}):\n"
        f"{rec.get('stderr', '')}")


@pytest.mark.parametrize("src", REFUSED, ids=_rel)
@pytest.mark.parametrize("mode", MODES)
def test_refused_with_typed_error(runs, src, mode):
    f = runs.files[src]
    rec = f.outcome[mode]
    where = f"{mode} {_rel(src)}"
    _alive(rec, where)
    assert rec["status"] == "error", f"{where}: expected a typed error, got status {rec['status']!r}"
    assert rec["pageindex_error"] and TYPED_ERRORS & set(rec["mro"]), (
        f"{where}: {rec['type']} is not a MalformedFileError/EncryptedFileError/UnsupportedFileError:\n"
        f"{rec['traceback']}")
    if src in ENCRYPTED:
        assert "EncryptedFileError" in rec["mro"], f"{where}: {rec['type']}: {rec['message']}"
    named = str(f.copy) if mode == "in_place" else str(src)
    assert named in rec["message"], f"{where}: message does not name the file: {rec['message']}"
    assert rec["path"] == named
    # nothing written, nothing changed
    assert not f.dst.exists() and not f.forced.exists()
    assert f.sha_after == f.sha_before, "the input file changed"
    assert _sha(f.copy) == f.sha_before, "the in-place copy changed"
    assert sorted(os.listdir(f.copy_dir)) == [src.name], "in-place mode left a temporary file"


@pytest.mark.parametrize("src", INDEXED, ids=_rel)
def test_valid_bad_input_is_indexed(runs, src):
    f = runs.files[src]
    for mode in MODES:
        _alive(f.outcome[mode], f"{mode} {_rel(src)}")
        assert f.outcome[mode]["status"] == "indexed", f"{mode}: {f.outcome[mode]}"
    assert f.sha_after == f.sha_before
    md = pq.ParquetFile(f.dst).metadata
    for rg in range(md.num_row_groups):
        for c in range(md.num_columns):
            assert md.row_group(rg).column(c).has_offset_index
    assert_same_data(src, f.dst)
    result = verify(str(f.dst))
    assert result.ok, [str(v) for v in result.violations]
    old_data, new_data = src.read_bytes(), f.dst.read_bytes()
    old = footer_of(old_data)
    assert new_data[: len(old_data)] == old_data
    check_layout(new_data, len(old_data))
    old_rest, new_rest = footer_difference(old.metadata, footer_of(new_data).metadata, md.num_columns)
    assert old_rest == new_rest
    # in place gives the same bytes; force rebuilds the same output (the source had no full index)
    assert f.copy.read_bytes() == new_data
    assert sorted(os.listdir(f.copy_dir)) == [src.name]
    assert f.forced.read_bytes() == new_data


@pytest.mark.parametrize("src", INDEXED, ids=_rel)
def test_valid_bad_input_parquet_java_validator(runs, src, spark):
    assert validator_violations_or_skip(spark, runs.files[src].dst, src) == []


def test_only_valid_files_produced_output(runs):
    expected = sorted(p for src in INDEXED for p in (runs.files[src].dst.name, runs.files[src].forced.name))
    assert sorted(os.listdir(runs.out_dir)) == expected, "outputs or temporary files left for refused files"


# ---------------------------------------------------------------- the CLI on bad files

CLI_NAMED = [
    "parquet-testing/bad_data/PARQUET-1481.parquet",  # invalid physical type in the schema
    "parquet-testing/bad_data/ARROW-GH-41321.parquet",  # page data that does not decode
    "parquet-testing/bad_data/ARROW-GH-45185.parquet",  # a chunk starting with repetition level 1
    "parquet-testing/bad_data/ARROW-RS-GH-6229-LEVELS.parquet",
    "arrow-testing/fuzzing/crash-9840a7b1a0d24996069f6ee0779bbe9875e8aca3",
    "parquet-testing/data/uniform_encryption.parquet.encrypted",  # PARE footer
    "parquet-testing/data/encrypt_columns_plaintext_footer.parquet.encrypted",  # aborts pyarrow
]


def _cli_sample() -> list[Path]:
    prone = sorted(p for p in ABORT_PRONE if p not in CLI_NAMED)
    step = max(1, len(prone) // 8)
    picked = CLI_NAMED + prone[::step][:8]
    return [CORPUS_DIR / p for p in picked]


CLI_SAMPLE = _cli_sample()


def _run_cli(args: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "pageindex", *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT, env=env, check=False)


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli_bad")
    dsts = {src: out / f"{i:02d}-{src.name}" for i, src in enumerate(CLI_SAMPLE)}
    with ThreadPoolExecutor(max_workers=2) as pool:
        procs = dict(zip(CLI_SAMPLE, pool.map(lambda s: _run_cli(["retrofit", str(s), "--output", str(dsts[s]), *BROKEN_NOW]),
                                              CLI_SAMPLE)))
    return SimpleNamespace(procs=procs, dsts=dsts, out=out)


def test_cli_sample_is_mixed():
    assert len(CLI_SAMPLE) == len(set(CLI_SAMPLE)) >= 15
    assert sum(_rel(p) in ABORT_PRONE for p in CLI_SAMPLE) >= 9
    assert all(p.is_file() for p in CLI_SAMPLE)


@pytest.mark.parametrize("src", CLI_SAMPLE, ids=_rel)
def test_cli_refuses_bad_file(cli_runs, runs, src):
    proc = cli_runs.procs[src]
    assert proc.returncode >= 0, f"killed by signal {-proc.returncode}:\n{proc.stderr[-3000:]}"
    # malformed, unsupported or encrypted: no retry mends it
    assert proc.returncode == 3, f"exit {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    expected_type = runs.files[src].outcome["dst"].get("type")
    assert expected_type and expected_type in proc.stderr, proc.stderr
    assert str(src) in proc.stderr, proc.stderr
    assert "error" in proc.stderr.lower()
    assert not cli_runs.dsts[src].exists()
    assert _sha(src) == runs.files[src].sha_before


def test_spark_job_over_every_bad_file(spark, tmp_path):
    """The Spark job over all bad_input and encrypted files at once, in place: it finishes (no
    worker dies), every file gets a record within a bounded time, refused files are reported
    failed (or skipped when they are not Parquet at all) with a typed reason, exit code 3, and
    no file is changed except the three valid ones, which are indexed."""
    import json

    from pageindex.job.spark import main

    root = tmp_path / "bad"
    names = {}
    for i, src in enumerate(ALL):
        dst = root / f"{i:03d}-{src.name.lstrip('._')}"  # never hidden: every file must be seen
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        names[str(dst)] = src
    before = {p: _sha(Path(p)) for p in names}
    report = tmp_path / "report.jsonl"
    code = main(["--input", str(root), "--in-place", "--report", str(report), *BROKEN_NOW], spark=spark)
    assert code == 3  # every failure is in the files' bytes: nothing for a retry to mend
    records = {r["path"]: r for r in report_records(report)}
    assert set(records) == set(names)
    for path, rec in records.items():
        rel = _rel(names[path])
        assert rec["seconds"] < 60, (rel, rec["seconds"])
        if rel in VALID_BAD_INPUT:
            assert rec["status"] == "indexed", (rel, rec)
            continue
        if rec["status"] == "skipped":
            assert "magic" in rec["reason"], (rel, rec)
        else:
            assert rec["status"] == "failed", (rel, rec)
            assert rec["reason"].split(":")[0] in TYPED_ERRORS, (rel, rec["reason"])
        assert _sha(Path(path)) == before[path], f"{rel} changed"
    assert not [p for p in root.iterdir() if TEMP_TAG in p.name]
