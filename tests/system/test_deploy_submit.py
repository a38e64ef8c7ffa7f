"""deploy/spark-submit.sh: the zip it builds, the command it runs, and a real local[2] submission."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers.paths import REPO_ROOT
from tests.helpers.report_parts import report_records

pytestmark = pytest.mark.slow  # every test builds the zip or runs the wrapper in a subprocess

SCRIPT = REPO_ROOT / "deploy" / "spark-submit.sh"
ZIP = REPO_ROOT / "deploy" / "build" / "pageindex.zip"


def wrapper(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 60) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("MASTER", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_SUBMIT_OPTS")
                and not k.startswith("PAGEINDEX_")}
    full_env.update(env or {})
    return subprocess.run(["bash", str(SCRIPT), *args], check=False, env=full_env, cwd=cwd or REPO_ROOT,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def would_run(proc: subprocess.CompletedProcess) -> list[str]:
    assert proc.returncode == 0, proc.stderr
    [line] = [ln for ln in proc.stdout.splitlines() if ln.startswith("would run:")]
    return shlex.split(line[len("would run:"):])


def test_dry_build_zip_is_deterministic_and_complete():
    first = wrapper("--dry-build")
    assert first.returncode == 0, first.stderr
    data = ZIP.read_bytes()
    second = wrapper("--dry-build")
    assert second.returncode == 0, second.stderr
    assert ZIP.read_bytes() == data

    with zipfile.ZipFile(ZIP) as zf:
        infos = zf.infolist()
    names = [i.filename for i in infos]
    assert names == sorted(names)
    assert all(i.date_time == (1980, 1, 1, 0, 0, 0) for i in infos)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    expected = sorted(p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "pageindex").rglob("*.py")
                      if "__pycache__" not in p.parts)
    assert [n for n in names if n.endswith(".py")] == expected
    assert "pageindex/__init__.py" in names and "pageindex/job/spark.py" in names


def test_dry_build_prints_the_spark_submit_command():
    proc = wrapper("--dry-build", "--table", "db.t", "--in-place", "--report", "s3://b/r.parquet",
                   env={"MASTER": "yarn",
                        "PAGEINDEX_SUBMIT_ARGS": "--deploy-mode cluster "
                                                 "--conf 'spark.executor.extraJavaOptions=-Da=1 -Db=2'"})
    argv = would_run(proc)
    assert Path(argv[0]).name == "spark-submit"
    assert argv[1:] == [
        "--master", "yarn", "--py-files", str(ZIP),
        "--deploy-mode", "cluster", "--conf", "spark.executor.extraJavaOptions=-Da=1 -Db=2",
        str(REPO_ROOT / "jobs" / "retrofit_job.py"),
        "--table", "db.t", "--in-place", "--report", "s3://b/r.parquet"]

    # defaults: local[*]; `--` hands a --help through to the job
    argv = would_run(wrapper("--dry-build", "--", "--help"))
    assert argv[1:3] == ["--master", "local[*]"] and argv[-1] == "--help"
    # PAGEINDEX_DRY_BUILD=1 works like --dry-build; PAGEINDEX_APP / PAGEINDEX_PY_FILES override
    argv = would_run(wrapper("--input", "s3://b/", env={
        "PAGEINDEX_DRY_BUILD": "1", "PAGEINDEX_APP": "local:///opt/pageindex/jobs/retrofit_job.py",
        "PAGEINDEX_PY_FILES": "local:///opt/pageindex/pageindex.zip"}))
    assert argv[3:] == ["--py-files", "local:///opt/pageindex/pageindex.zip",
                        "local:///opt/pageindex/jobs/retrofit_job.py", "--input", "s3://b/"]


def test_usage_errors_exit_2():
    proc = wrapper("--dry-build", env={"PAGEINDEX_SUBMIT_ARGS": "--conf 'unbalanced"})
    assert proc.returncode == 2 and "PAGEINDEX_SUBMIT_ARGS" in proc.stderr
    proc = wrapper("--input", "/x", "--in-place", env={"PAGEINDEX_APP": "/nonexistent/job.py", "PYTHON": sys.executable})
    assert proc.returncode == 2 and "application not found" in proc.stderr


def _no_submit_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """PYTHON with pageindex importable, and a spark-submit that only leaves a mark if started."""
    mark = tmp_path / "spark-submit-started"
    fake = tmp_path / "spark-submit"
    fake.write_text(f"#!/bin/sh\ntouch {mark}\n")
    fake.chmod(0o755)
    return {"PYTHON": sys.executable, "SPARK_SUBMIT": str(fake)}, mark


def test_job_help_builds_nothing_and_starts_no_jvm(tmp_path):
    env, mark = _no_submit_env(tmp_path)
    proc = wrapper("--", "--help", env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for option in ("--input", "--table", "--in-place", "--report", "--max-failures"):
        assert option in proc.stdout, option
    assert "built " not in proc.stderr  # the zip is not built
    assert not mark.exists()


def test_job_usage_error_found_before_spark_submit(tmp_path):
    env, mark = _no_submit_env(tmp_path)
    proc = wrapper("--in-place", "--report", str(tmp_path / "r.parquet"), env=env, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "error:" in last and "--input" in last, proc.stderr
    assert "built " not in proc.stderr
    assert not mark.exists()


def test_help_names_executor_requirements():
    proc = wrapper("--help")
    assert proc.returncode == 0
    for word in ("Python >= 3.10", "pyarrow", "numpy", "fsspec", "s3fs", "--archives", "PYSPARK_PYTHON",
                 "venv-pack", "spark.kubernetes.container.image"):
        assert word in proc.stdout, word


def test_shellcheck_clean():
    if not shutil.which("shellcheck"):
        pytest.skip("shellcheck not installed")
    proc = subprocess.run(["shellcheck", str(SCRIPT)], check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout


# ---------------------------------------------------------------- real local submissions

PROBE_APP = """
import json
from pyspark import SparkContext  # no SparkSession: its start-up costs ~10 s more here
sc = SparkContext.getOrCreate()
def where(_):
    import pageindex
    yield pageindex.__file__
found = sorted(set(sc.parallelize(range(4), 2).mapPartitions(where).collect()))
print("PROBE " + json.dumps(found))
sc.stop()
"""


def _local_env() -> dict[str, str]:
    return {"MASTER": "local[2]", "PYSPARK_PYTHON": sys.executable}


@pytest.mark.spark
def test_executors_import_pageindex_from_the_shipped_zip(tmp_path):
    app = tmp_path / "probe.py"
    app.write_text(PROBE_APP)
    # cwd outside the repo: local executors would otherwise find ./pageindex through the working directory
    proc = wrapper(env={**_local_env(), "PAGEINDEX_APP": str(app)}, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    [line] = [ln for ln in proc.stdout.splitlines() if ln.startswith("PROBE ")]
    files = json.loads(line[len("PROBE "):])
    assert files and all("pageindex.zip" in f for f in files), files


@pytest.mark.spark
def test_local_job_exit_codes(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = tmp_path / "in"
    data.mkdir()
    table = pa.table({"id": pa.array(range(20_000), pa.int64())})
    pq.write_table(table, data / "good.parquet", write_page_index=False, data_page_size=2048)
    good = (data / "good.parquet").read_bytes()
    (data / "bad.parquet").write_bytes(good[:3000] + b"PAR1")

    # usage error: neither --in-place nor --output
    proc = wrapper("--input", str(data), env=_local_env(), cwd=tmp_path, timeout=300)
    assert proc.returncode == 2, proc.stderr[-4000:]

    # one file fails (malformed: no retry mends it), --max-failures 0: exit 3, the good file is
    # still indexed, the report says why
    out, report = tmp_path / "out", tmp_path / "report.jsonl"
    proc = wrapper("--input", str(data), "--output", str(out), "--report", str(report),
                   "--target-task-bytes", "1m", env=_local_env(), cwd=tmp_path, timeout=300)
    assert proc.returncode == 3, proc.stderr[-4000:]
    rows = {Path(r["path"]).name: r["status"] for r in report_records(report)}
    assert rows == {"good.parquet": "indexed", "bad.parquet": "failed"}
    meta = pq.ParquetFile(out / "good.parquet").metadata
    assert meta.row_group(0).column(0).has_column_index
