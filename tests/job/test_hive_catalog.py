"""`pageindex-job --table` on a Hive-catalog table (Derby metastore, pyspark's Hive 2.3 jars) whose
partitions live below its root and elsewhere, with the metastore reached through `--conf` alone.

Each Spark runs in its own process (one JVM per Derby database at a time): the table is built in
one, the job (`python -m pageindex.job`) runs in another, and a third reads the table back.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.helpers import hive_catalog as hive
from tests.helpers.paths import REPO_ROOT
from tests.helpers.report_parts import report_records

pytestmark = pytest.mark.spark


def _run(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYSPARK_PYTHON": sys.executable}
    # cwd: Derby's derby.log and Spark's scratch files stay in the test's directory
    return subprocess.run([sys.executable, *args], cwd=tmp, env=env, capture_output=True, text=True,
                          timeout=900, check=False)


def _expected(tmp: Path) -> dict[str, list[int]]:
    """Rows and key sum per day, from the files themselves (pyarrow)."""
    out = {}
    for day, files in hive.partition_files(tmp).items():
        keys = [pq.read_table(f, columns=["k"])["k"] for f in files]
        out[str(day)] = [sum(len(k) for k in keys), sum(pc.sum(k).as_py() for k in keys)]
    return out


def test_every_partition_indexed_wherever_it_lives(tmp_path):
    setup = _run(tmp_path, "-m", "tests.helpers.hive_catalog", "setup", str(tmp_path))
    assert setup.returncode == 0, setup.stderr[-3000:]
    files = hive.data_files(tmp_path)
    assert not hive.external_dir(tmp_path).is_relative_to(hive.table_root(tmp_path))
    expected = _expected(tmp_path)
    assert sorted(expected) == ["1", "2", "3"] and all(n > 0 for n, _ in expected.values())
    unregistered = hive.table_root(tmp_path) / "day=9" / "part-00000.parquet"
    unregistered_before = (unregistered.read_bytes(), unregistered.stat().st_mtime_ns)
    assert not any(pq.ParquetFile(f).metadata.row_group(0).column(0).has_column_index for f in files)

    report = tmp_path / "report.jsonl"
    job = _run(tmp_path, "-m", "pageindex.job", "--table", hive.TABLE, "--in-place", "--report", str(report),
               *hive.conf_args(tmp_path), "--conf", "spark.ui.showConsoleProgress=false")
    assert job.returncode == 0, job.stderr[-3000:]
    assert "found 6 files" in job.stderr and f"in 3 partitions of table {hive.TABLE}" in job.stderr, job.stderr

    records = report_records(report)
    assert sorted(r["path"] for r in records) == sorted(map(str, files))
    assert {r["status"] for r in records} == {"indexed"}
    for f in files:  # the external partition's files included
        md = pq.ParquetFile(f).metadata
        assert all(md.row_group(g).column(c).has_column_index and md.row_group(g).column(c).has_offset_index
                   for g in range(md.num_row_groups) for c in range(md.num_columns)), f
    # a folder below the root that is no partition: Spark does not read it, the job leaves it
    assert (unregistered.read_bytes(), unregistered.stat().st_mtime_ns) == unregistered_before

    read = _run(tmp_path, "-m", "tests.helpers.hive_catalog", "read", str(tmp_path))
    assert read.returncode == 0, read.stderr[-3000:]
    assert json.loads(read.stdout.strip().splitlines()[-1]) == expected
