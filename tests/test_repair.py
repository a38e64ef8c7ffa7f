"""Broken existing indexes are never trusted: retrofit repairs what the cheap checks or
--verify-existing find wrong (and suspect writers' indexes), leaves valid ones untouched, and
inspect says broken / suspect."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pageindex.format.parquet_thrift import FileMetaData
from pageindex.format.thrift import T
from pageindex.inspection import format_text, inspect_file
from pageindex.retrofit import Status, retrofit
from pageindex.verify import verify
from tests.helpers.corpus import corpus_path
from tests.helpers.files import corrupt_first_page_min, write_sorted_int_file
from tests.helpers.paths import REPO_ROOT
from tests.helpers.spark import to_uri
from tests.helpers.strip import rewrite_footer, rewrite_page_index
from tests.index.test_soundness import BREAKS

BASE = 0x1122334455667788
BROKEN_CORPUS = "parquet-testing/data/datapage_v1-uncompressed-checksum.parquet"


@pytest.fixture(scope="module")
def sorted_file(tmp_path_factory) -> Path:
    return write_sorted_int_file(tmp_path_factory.mktemp("repair") / "sorted.parquet", 20_000,
                                 page_index=True, start=BASE)


@pytest.fixture
def broken_corpus_file(tmp_path) -> Path:
    """The corpus file parquet-mr 1.13.0-SNAPSHOT wrote with every page marked null, null_count -1."""
    path = tmp_path / "checksum.parquet"
    shutil.copyfile(corpus_path(BROKEN_CORPUS), path)
    return path


def wrong_min(sorted_file: Path, dst: Path) -> Path:
    """A structurally sound index whose first page min is above the page's smallest value."""
    return corrupt_first_page_min(sorted_file, dst, BASE)


def as_written_by(src: Path, dst: Path, created_by: str) -> Path:
    return rewrite_footer(src, dst, lambda m: m.set(FileMetaData.CREATED_BY, T.BINARY, created_by.encode()))


@pytest.mark.parametrize("name,edit,check", BREAKS, ids=[b[0] for b in BREAKS])
def test_cheap_checks_make_retrofit_repair(sorted_file, tmp_path, name, edit, check):
    path = rewrite_page_index(sorted_file, tmp_path / "broken.parquet",
                              lambda r, c, ci, oi: edit(ci, oi) if c == 0 else (ci, oi))
    result = retrofit(str(path))
    assert result.status == Status.REPAIRED
    assert check in {v.check for v in result.violations}
    assert result.to_dict()["violations"]
    assert verify(str(path)).ok
    assert retrofit(str(path)).status == Status.ALREADY_INDEXED


def test_the_broken_corpus_file_is_repaired_by_the_cheap_checks(broken_corpus_file):
    before = pq.read_table(broken_corpus_file)
    assert not verify(str(broken_corpus_file)).ok
    result = retrofit(str(broken_corpus_file))
    assert result.status == Status.REPAIRED
    assert {v.check for v in result.violations} == {"null_counts"}
    assert verify(str(broken_corpus_file)).ok
    assert pq.read_table(broken_corpus_file).equals(before)


def test_dry_run_reports_repair_needed_and_writes_nothing(broken_corpus_file):
    data = broken_corpus_file.read_bytes()
    result = retrofit(str(broken_corpus_file), dry_run=True)
    assert result.status == Status.REPAIR_NEEDED and result.violations
    assert broken_corpus_file.read_bytes() == data


def test_verify_existing_repairs_an_index_only_the_data_shows_wrong(sorted_file, tmp_path):
    path = wrong_min(sorted_file, tmp_path / "wrong.parquet")
    assert retrofit(str(path), dry_run=True).status == Status.ALREADY_INDEXED  # structurally sound
    result = retrofit(str(path), verify_existing=True)
    assert result.status == Status.REPAIRED
    assert {v.check for v in result.violations} == {"min"}
    assert verify(str(path)).ok


def test_verify_existing_leaves_a_valid_index_untouched(sorted_file, tmp_path):
    path = tmp_path / "valid.parquet"
    shutil.copyfile(sorted_file, path)
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    result = retrofit(str(path), verify_existing=True)
    assert result.status == Status.ALREADY_INDEXED and result.violations == ()
    assert path.stat().st_mtime_ns == 1_000_000_000
    assert path.read_bytes() == sorted_file.read_bytes()


def test_a_suspect_writers_index_is_verified_without_the_flag(sorted_file, tmp_path):
    wrong = wrong_min(sorted_file, tmp_path / "wrong.parquet")
    trusted = as_written_by(wrong, tmp_path / "trusted.parquet", "parquet-cpp-arrow version 17.0.0")
    suspect = as_written_by(wrong, tmp_path / "suspect.parquet", "parquet-rs version 52.2.0")
    assert retrofit(str(trusted)).status == Status.ALREADY_INDEXED
    assert retrofit(str(suspect)).status == Status.REPAIRED
    assert verify(str(suspect)).ok


def test_inspect_says_broken_and_suspect(broken_corpus_file, sorted_file, tmp_path):
    broken = inspect_file(str(broken_corpus_file))
    assert broken.index_state == "broken" and broken.flaws
    assert "page index: broken" in format_text(broken)
    assert broken.to_dict()["index_state"] == "broken"
    suspect = inspect_file(str(as_written_by(sorted_file, tmp_path / "s.parquet", "parquet-rs version 52.2.0")))
    assert suspect.index_state == "suspect" and "page index: suspect" in format_text(suspect)
    assert inspect_file(str(sorted_file)).index_state == "complete"
    retrofit(str(broken_corpus_file))
    assert inspect_file(str(broken_corpus_file)).index_state == "complete"


def test_cli_verify_existing(sorted_file, tmp_path):
    path = wrong_min(sorted_file, tmp_path / "wrong.parquet")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pageindex", "retrofit", *args], capture_output=True,
                              text=True, env=env, check=True)

    assert "already has a complete page index" in run(str(path)).stdout
    record = json.loads(run(str(path), "--verify-existing", "--json").stdout)
    assert record["status"] == Status.REPAIRED and record["violations"]
    assert verify(str(path)).ok


@pytest.mark.spark
def test_spark_answers_right_after_the_repair(spark, broken_corpus_file):
    def matching() -> int:
        return spark.read.parquet(to_uri(broken_corpus_file)).where("a >= 0").count()

    assert matching() == 0  # the broken index hides every page
    assert retrofit(str(broken_corpus_file), verify_existing=True).status == Status.REPAIRED
    assert matching() == 2560
    table = pq.read_table(broken_corpus_file)
    assert pc.sum(pc.greater_equal(table["a"], 0)).as_py() == 2560  # the truth, without any index
