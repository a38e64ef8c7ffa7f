"""Table runs commit from streamed records (pageindex.job.table_run): each --commit-batch-files
copies are committed as soon as their records have arrived, before the later tasks' records
exist; the report is written a part per batch; a table whose records exceed
spark.driver.maxResultSize runs through.

Real deltalake and pyiceberg tables; the Spark tests run the job on the session's local[2].
"""
from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("deltalake")
pytest.importorskip("pyiceberg")
from deltalake import ColumnProperties, DeltaTable, WriterProperties, write_deltalake  # noqa: E402

from pageindex.cli import main as cli_main  # noqa: E402
from pageindex.job import lake, parts, table_run  # noqa: E402
from pageindex.job.process import JobOptions, process_file  # noqa: E402
from pageindex.job.spark import main  # noqa: E402
from pageindex.retrofit import Status  # noqa: E402
from tests.helpers.paths import REPO_ROOT  # noqa: E402
from tests.helpers.report_parts import report_records  # noqa: E402
from tests.job import test_iceberg as ice  # noqa: E402

# Files without a ColumnIndex (chunk statistics only): every one gets an indexed copy.
NO_COLUMN_INDEX = WriterProperties(default_column_properties=ColumnProperties(statistics_enabled="CHUNK"))


def delta_table(root: Path, files: int, pad: int = 0) -> int:
    """A Delta table of `files` small files, one per partition value (`pad` characters longer
    each, and so each file's path); its version."""
    write_deltalake(str(root), pa.table({"k": [f"{i:05d}{'x' * pad}" for i in range(files)],
                                         "v": pa.array(range(files), pa.int64())}),
                    partition_by=["k"], writer_properties=NO_COLUMN_INDEX)
    return DeltaTable(str(root)).version()


def log_actions(root: Path, version: int) -> list[dict]:
    lines = (root / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    return [json.loads(line) for line in lines]


def copies(root: Path) -> list[Path]:
    return [p for p in root.rglob("*.parquet") if ".pageindex-" in p.name]


def stops_after(records: list[dict], n: int):
    """The records one by one, and an error where record n + 1 would come."""
    for i, record in enumerate(records):
        if i == n:
            raise RuntimeError("the stream broke")
        yield record


# --------------------------------------------------------------------------- the stream, without Spark

def test_delta_batch_is_committed_before_the_stream_ends(tmp_path):
    """The first batch's commit is in the table log before the stream has given its third record:
    the stream breaks there, and the first two copies are committed, their part handed on."""
    root = tmp_path / "t"
    first = delta_table(root, 5)
    run = lake.plan(str(root), JobOptions())
    records = [process_file(f, run.options) for f in run.files]
    assert len(records) == 5 and {r["status"] for r in records} == {Status.INDEXED}
    handed: list[tuple[str, list[dict]]] = []
    with pytest.raises(RuntimeError, match="the stream broke"):
        table_run.commit_stream(run, stops_after(records, 2), 2, lambda kind, part: handed.append((kind, part)))
    assert DeltaTable(str(root)).version() == first + 1
    actions = log_actions(root, first + 1)
    assert sorted(k for a in actions for k in a if k != "commitInfo") == ["add", "add", "remove", "remove"]
    assert [kind for kind, _ in handed] == ["batch"]
    [(_, part)] = handed
    assert [r["path"] for r in part] == [r["path"] for r in records[:2]]
    assert {r["table_version"] for r in part} == {first + 1}


def test_delta_batches_count_copies_and_carry_the_others(tmp_path):
    """A batch is `batch_files` copies: records of files without a copy to commit (one failed
    here) ride in the part of the batch they arrived with, and count toward no commit."""
    root = tmp_path / "t"
    first = delta_table(root, 5)
    run = lake.plan(str(root), JobOptions())
    records = [process_file(f, run.options) for f in run.files]
    records[1] = {**records[1], "status": Status.FAILED, "reason": "test: no copy", "retryable": False}
    handed: list[list[dict]] = []
    totals, commits, settled = table_run.commit_stream(run, iter(records), 2, lambda kind, part: handed.append(part))
    assert DeltaTable(str(root)).version() == first + 2  # 4 copies: two commits of 2
    assert [len(part) for part in handed] == [3, 2]
    assert {r["path"]: r["table_version"] for r in handed[0]} == {
        records[0]["path"]: first + 1, records[1]["path"]: None, records[2]["path"]: first + 1}
    assert not settled and totals.files == 5 and totals.counts[Status.FAILED] == 1
    assert commits.replaced == 4 and len(commits.lines) == 2


def test_iceberg_batch_is_committed_before_the_stream_ends(tmp_path, monkeypatch):
    ice.make_table(monkeypatch, tmp_path, f"file://{tmp_path}/warehouse")
    before = [s.snapshot_id for s in ice.load().snapshots()]
    run = lake.plan_iceberg(ice.NAME, True, JobOptions())
    records = [process_file(f, run.options) for f in run.files]
    assert len(records) > 3
    handed: list[list[dict]] = []
    with pytest.raises(RuntimeError, match="the stream broke"):
        table_run.commit_stream(run, stops_after(records, 3), 3, lambda kind, part: handed.append(part))
    snapshots = [s.snapshot_id for s in ice.load().snapshots()]
    assert snapshots[:len(before)] == before and len(snapshots) == len(before) + 1
    [part] = handed
    assert {r["table_version"] for r in part} == {snapshots[-1]} and len(part) == 3


# --------------------------------------------------------------------------- the job on Spark

def test_job_commits_each_batch_before_later_tasks_run(spark, tmp_path, capsys):
    """Ten files, a task each, batches of 2: five commits of 2 files and a report part per
    commit of its 2 records. Up to 4 tasks (2 per core) run ahead of the commits, so the copies
    of the last tasks are written after the first commit is in the log; a run that collected
    every record first would have written every copy before committing any."""
    root = tmp_path / "t"
    first = delta_table(root, 10)
    report = tmp_path / "report.parquet"
    assert main(["--input", str(root), "--in-place", "--commit-batch-files", "2", "--target-task-bytes", "1",
                 "--report", str(report)], spark=spark) == 0
    assert DeltaTable(str(root)).version() == first + 5
    for version in range(first + 1, first + 6):
        kinds = sorted(k for a in log_actions(root, version) for k in a if k != "commitInfo")
        assert kinds == ["add", "add", "remove", "remove"]
    written = parts.list_parts(str(report), {})
    assert len(written) == 5 and {p.kind for p in written} == {"batch"}
    for part in written:
        rows = report_records(part.url)
        assert len(rows) == 2 and len({r["table_version"] for r in rows}) == 1
    records = report_records(report)
    assert len(records) == 10 and {r["table_version"] for r in records} == set(range(first + 1, first + 6))
    # the folder reads as one table: pyarrow, Spark, `pageindex report`
    assert pq.read_table(report).num_rows == 10
    assert spark.read.parquet(str(report)).where("table_version is not null").count() == 10
    assert cli_main(["report", str(report)]) == 0
    assert "pageindex report: 1 report, 10 files" in capsys.readouterr().out
    first_commit = (root / "_delta_log" / f"{first + 1:020d}.json").stat().st_mtime_ns
    later = [p for p in copies(root) if p.stat().st_mtime_ns > first_commit]
    assert len(copies(root)) == 10 and len(later) >= 10 - 6, later


def test_iceberg_job_commits_a_snapshot_per_batch_as_records_arrive(spark, tmp_path, monkeypatch):
    ice.make_table(monkeypatch, tmp_path, f"file://{tmp_path}/warehouse")
    before = [s.snapshot_id for s in ice.load().snapshots()]
    files = len(list(ice.load().scan().plan_files()))
    expected = ice.rows()
    report = tmp_path / "report.jsonl"
    assert main(["--iceberg-table", ice.NAME, "--in-place", "--commit-batch-files", "2", "--target-task-bytes", "1",
                 "--report", str(report)], spark=spark) == 0
    snapshots = list(ice.load().snapshots())
    ours = snapshots[len(before):]
    assert len(ours) == -(-files // 2) >= 3
    records = report_records(report)
    assert len(records) == files and {r["table_version"] for r in records} == {s.snapshot_id for s in ours}
    assert len(parts.list_parts(str(report), {})) == len(ours)
    first_commit_ms = ours[0].timestamp_ms
    data = [Path(r["output"].removeprefix("file://")) for r in records]
    later = [p for p in data if p.stat().st_mtime_ns // 1_000_000 > first_commit_ms]
    assert len(later) >= files - 6, later
    assert ice.rows() == expected
    ice.assert_indexed()


@pytest.mark.spark
@pytest.mark.slow
def test_table_past_max_result_size(tmp_path):
    """2,000 files whose records together exceed spark.driver.maxResultSize (1m, its least), on
    a session of its own (the setting is fixed when Spark starts): the run ends well, every file
    is replaced, the report holds 2,000 rows. (Collected at once, as the job once did, Spark
    refused them: "Total size of serialized results of 2 tasks (1475.4 KiB) is bigger than
    spark.driver.maxResultSize (1024.0 KiB)", exit 1.)"""
    root = tmp_path / "t"
    first = delta_table(root, 2000, pad=200)  # long paths: records of about 700 bytes
    report = tmp_path / "report.parquet"
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYSPARK_PYTHON=sys.executable)
    proc = subprocess.run([sys.executable, "-c", "import sys; from pageindex.job.spark import main; "
                           "sys.exit(main(sys.argv[1:], master='local[2]'))",
                           "--input", str(root), "--in-place", "--report", str(report),
                           "--conf", "spark.driver.maxResultSize=1m", "--conf", "spark.ui.enabled=false"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert DeltaTable(str(root)).version() == first + 2  # --commit-batch-files 1000
    uris = DeltaTable(str(root)).file_uris()
    assert len(uris) == 2000 and all(".pageindex-" in u for u in uris)
    records = report_records(report)
    assert len(records) == 2000 and {r["status"] for r in records} == {"indexed"}
    # the records pickled as a task pickles them (each key once: the same interned string)
    assert len(pickle.dumps([{sys.intern(k): v for k, v in r.items()} for r in records])) > 1 << 20


@pytest.mark.spark
@pytest.mark.slow
def test_sigterm_keeps_the_batches_committed(tmp_path):
    """SIGTERM once the first batch is in the log: one line, exit 143 (the driver's threads
    waiting on their jobs hold nothing up); the table reads its rows, the batches committed
    hold indexed copies, which a rerun knows from their names without opening them."""
    root = tmp_path / "t"
    first = delta_table(root, 40)
    expected = sorted(DeltaTable(str(root)).to_pyarrow_table().column("v").to_pylist())
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYSPARK_PYTHON=sys.executable)
    proc = subprocess.Popen([sys.executable, "-m", "pageindex.job", "--input", str(root), "--in-place",
                             "--commit-batch-files", "2", "--target-task-bytes", "1",
                             "--conf", "spark.ui.enabled=false"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while not (root / "_delta_log" / f"{first + 1:020d}.json").exists():
            assert proc.poll() is None, proc.communicate()[1]
            time.sleep(0.001)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=180)
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    assert len([line for line in err.splitlines() if line.startswith("pageindex-job: stopped")]) == 1, err
    committed = DeltaTable(str(root)).version() - first
    assert 1 <= committed < 20  # stopped before its last batch
    assert sorted(DeltaTable(str(root)).to_pyarrow_table().column("v").to_pylist()) == expected
    rerun = lake.plan(str(root), JobOptions())
    known = [r for r in rerun.skipped if r["reason"] == lake.KNOWN_INDEXED]
    assert len(known) == 2 * committed and len(rerun.files) == 40 - len(known)
