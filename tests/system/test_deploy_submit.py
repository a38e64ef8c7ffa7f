"""deploy/spark-submit.sh: what it builds for executors (the packed environment, or the zip), the
command it runs, real local[2] submissions, and the job on a standalone cluster whose executors have
only what the wrapper ships."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from pageindex.scan import compiled
from tests.helpers.paths import REPO_ROOT
from tests.helpers.report_parts import report_records
from tests.helpers.standalone import standalone_cluster

pytestmark = pytest.mark.slow  # every test builds the zip or runs the wrapper in a subprocess

SCRIPT = REPO_ROOT / "deploy" / "spark-submit.sh"
ZIP = REPO_ROOT / "deploy" / "build" / "pageindex.zip"
ZIP_MODE = {"PAGEINDEX_EXECUTOR_ENV": "zip"}
# Building the environment (a wheel, a venv from the package index, packed) takes minutes the first
# time; later runs over the same sources reuse it.
BUILD_TIMEOUT = 1500


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
    first = wrapper("--dry-build", env=ZIP_MODE)
    assert first.returncode == 0, first.stderr
    data = ZIP.read_bytes()
    second = wrapper("--dry-build", env=ZIP_MODE)
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
                   env={"MASTER": "yarn", **ZIP_MODE,
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
    argv = would_run(wrapper("--dry-build", "--", "--help", env=ZIP_MODE))
    assert argv[1:3] == ["--master", "local[*]"] and argv[-1] == "--help"
    # PAGEINDEX_DRY_BUILD=1 works like --dry-build; PAGEINDEX_APP / PAGEINDEX_PY_FILES override
    argv = would_run(wrapper("--input", "s3://b/", env={
        **ZIP_MODE, "PAGEINDEX_DRY_BUILD": "1", "PAGEINDEX_APP": "local:///opt/pageindex/jobs/retrofit_job.py",
        "PAGEINDEX_PY_FILES": "local:///opt/pageindex/pageindex.zip"}))
    assert argv[3:] == ["--py-files", "local:///opt/pageindex/pageindex.zip",
                        "local:///opt/pageindex/jobs/retrofit_job.py", "--input", "s3://b/"]


def test_usage_errors_exit_2():
    proc = wrapper("--dry-build", env={"PAGEINDEX_SUBMIT_ARGS": "--conf 'unbalanced"})
    assert proc.returncode == 2 and "PAGEINDEX_SUBMIT_ARGS" in proc.stderr
    proc = wrapper("--input", "/x", "--in-place", env={"PAGEINDEX_APP": "/nonexistent/job.py", "PYTHON": sys.executable,
                                                        **ZIP_MODE})
    assert proc.returncode == 2 and "application not found" in proc.stderr
    proc = wrapper("--dry-build", env={"PAGEINDEX_EXECUTOR_ENV": "conda"})
    assert proc.returncode == 2 and "PAGEINDEX_EXECUTOR_ENV must be build, installed or zip" in proc.stderr


def test_installed_ships_nothing():
    argv = would_run(wrapper("--dry-build", "--input", "s3://b/", env={"MASTER": "yarn",
                                                                      "PAGEINDEX_EXECUTOR_ENV": "installed"}))
    assert argv[1:] == ["--master", "yarn", str(REPO_ROOT / "jobs" / "retrofit_job.py"), "--input", "s3://b/"]


def _built(proc: subprocess.CompletedProcess) -> tuple[list[str], Path, Path]:
    """The command, the archive and the unpacked environment of a --dry-build in build mode."""
    argv = would_run(proc)
    [archive] = [a[:-len("#environment")] for a in argv if a.endswith("#environment")]
    env = Path(archive[:-len(".tar.gz")])
    return argv, Path(archive), env


def test_build_ships_the_environment_and_sets_the_pythons():
    argv, archive, env = _built(wrapper("--dry-build", "--input", "s3://b/", env={"MASTER": "yarn"},
                                        timeout=BUILD_TIMEOUT))
    assert archive.parent == REPO_ROOT / "deploy" / "build" and archive.name.startswith("pageindex-env-")
    # client deploy mode: executors run the shipped environment, the driver the same one unpacked here
    assert argv[1:] == ["--master", "yarn", "--archives", f"{archive}#environment",
                        "--conf", "spark.pyspark.python=./environment/bin/python",
                        "--conf", f"spark.pyspark.driver.python={env}/bin/python",
                        str(REPO_ROOT / "jobs" / "retrofit_job.py"), "--input", "s3://b/"]
    assert "--py-files" not in argv  # a zip first on the workers' path would hide the compiled modules
    # cluster deploy mode: the driver runs on the cluster, from the archive too
    argv, _, _ = _built(wrapper("--dry-build", env={"MASTER": "yarn", "PAGEINDEX_SUBMIT_ARGS": "--deploy-mode cluster"}))
    assert not [a for a in argv if a.startswith("spark.pyspark.driver.python")]
    # local: nothing shipped, driver and workers run the environment built here
    argv = would_run(wrapper("--dry-build"))
    assert argv[1:5] == ["--master", "local[*]", "--conf", f"spark.pyspark.python={env}/bin/python"]
    # the archive unpacks into a venv that runs anywhere the building Python is, with no PYTHONPATH
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        assert "bin/python" in names and "pyvenv.cfg" in names
        assert not [n for n in names if n.startswith(("lib/python3", "lib64")) and "/site-packages/pip/" in n]


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
                 "venv-pack", "spark.kubernetes.container.image", "PAGEINDEX_EXECUTOR_ENV", "installed",
                 "pip install pageindex", "compiled kernels", "Arrow fallback"):
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
    return {"MASTER": "local[2]", "PYSPARK_PYTHON": sys.executable, "PYTHON": sys.executable}


@pytest.mark.spark
def test_executors_import_pageindex_from_the_shipped_zip(tmp_path):
    app = tmp_path / "probe.py"
    app.write_text(PROBE_APP)
    # cwd outside the repo: local executors would otherwise find ./pageindex through the working directory
    proc = wrapper(env={**_local_env(), **ZIP_MODE, "PAGEINDEX_APP": str(app)}, cwd=tmp_path, timeout=300)
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
    proc = wrapper("--input", str(data), env=_local_env(), cwd=tmp_path, timeout=BUILD_TIMEOUT)
    assert proc.returncode == 2, proc.stderr[-4000:]

    # one file fails (malformed: no retry mends it), --max-failures 0: exit 3, the good file is
    # still indexed, the report says why
    out, report = tmp_path / "out", tmp_path / "report.jsonl"
    proc = wrapper("--input", str(data), "--output", str(out), "--report", str(report),
                   "--target-task-bytes", "1m", env=_local_env(), cwd=tmp_path, timeout=BUILD_TIMEOUT)
    assert proc.returncode == 3, proc.stderr[-4000:]
    rows = {Path(r["path"]).name: r["status"] for r in report_records(report)}
    assert rows == {"good.parquet": "indexed", "bad.parquet": "failed"}
    meta = pq.ParquetFile(out / "good.parquet").metadata
    assert meta.row_group(0).column(0).has_column_index


# ---------------------------------------------------------------- a standalone cluster

# The job's line at start saying what the executors run (pageindex.job.kernel_probe).
PROBED = re.compile(r"executors scan with the compiled kernels: (?P<python>\S+), pageindex \S+ from (?P<package>\S+)")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with standalone_cluster(tmp_path_factory.mktemp("standalone")) as running:
        yield running


def _lake(root: Path, files: int = 3) -> dict[str, bytes]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    root.mkdir()
    for i in range(files):
        table = pa.table({"id": pa.array(range(i, 30_000 + i), pa.int64()),
                          "name": pa.array([f"n{j % 97:03d}" for j in range(30_000)])})
        pq.write_table(table, root / f"part-{i}.parquet", write_page_index=False, data_page_size=4096)
    return {p.name: p.read_bytes() for p in sorted(root.iterdir())}


def _ours(proc: subprocess.CompletedProcess) -> str:
    """What the wrapper and the job said, without Spark's own log lines: for failure messages."""
    spark_log = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (INFO|WARN) ")
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if not spark_log.match(ln)]
    return f"exit {proc.returncode}\n" + "\n".join(lines)[-6000:]


def _on_cluster(cluster, *job_args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """The wrapper submitting the job to `cluster` (spark-submit runs the driver's Python with its
    stderr merged into stdout: the job's log lines are in stdout)."""
    submit = "--conf spark.executor.memory=512m --conf spark.cores.max=2 --conf spark.ui.enabled=false"
    return wrapper(*job_args, cwd=cwd, timeout=BUILD_TIMEOUT,
                   env={"MASTER": cluster.url, "PYTHON": sys.executable, "PAGEINDEX_SUBMIT_ARGS": submit, **env})


@pytest.mark.spark
def test_standalone_executors_run_the_shipped_environment_and_the_compiled_path(cluster, tmp_path):
    if not list(REPO_ROOT.glob("pageindex/**/*.pyx")):
        pytest.skip("no compiled kernels (pageindex/**/*.pyx) in this tree to build into the wheel")
    import pyarrow.parquet as pq

    before = _lake(tmp_path / "lake")
    report = tmp_path / "report.jsonl"
    proc = _on_cluster(cluster, "--input", str(tmp_path / "lake"), "--in-place", "--report", str(report),
                       "--require-compiled", cwd=tmp_path)
    assert proc.returncode == 0, _ours(proc)
    # The executors' Python is the shipped environment's, unpacked in their working directory
    # below the Worker's: not this test's interpreter, nor anything of the checkout.
    said = [m.groupdict() for m in PROBED.finditer(proc.stdout)]
    assert said, _ours(proc)
    for where in said:
        python, package = Path(where["python"]), Path(where["package"])
        assert python.is_relative_to(cluster.work_dir), where
        assert python.parent.parent.name == "environment" and python != Path(sys.executable)
        assert package.is_relative_to(python.parent.parent) and "site-packages" in package.parts, where
    rows = report_records(report)
    assert sorted(Path(r["path"]).name for r in rows) == sorted(before)
    assert {(r["status"], r["scan_path"]) for r in rows} == {("indexed", "compiled")}
    assert "Arrow fallback" not in proc.stdout + proc.stderr
    for name in before:
        meta = pq.ParquetFile(tmp_path / "lake" / name).metadata
        assert all(meta.row_group(0).column(c).has_column_index for c in range(meta.num_columns))


@pytest.mark.spark
def test_standalone_fallback_executors_are_said_counted_and_refused(cluster, tmp_path):
    """Executors given the package as a zip (what the wrapper once shipped) cannot load compiled
    modules from it: a warning at start, the count in the summary; --require-compiled: exit 2."""
    before = _lake(tmp_path / "lake", files=2)
    built = _built(wrapper("--dry-build", env={"MASTER": cluster.url, "PYTHON": sys.executable},
                           timeout=BUILD_TIMEOUT))
    env_python = str(built[2] / "bin" / "python")  # pageindex's dependencies, and its compiled wheel
    zipped = {**ZIP_MODE, "PYSPARK_PYTHON": env_python}
    report = tmp_path / "report.jsonl"
    proc = _on_cluster(cluster, "--input", str(tmp_path / "lake"), "--in-place", "--report", str(report),
                       "--require-compiled", cwd=tmp_path, **zipped)
    assert proc.returncode == 2, _ours(proc)
    assert "--require-compiled: the compiled kernels did not load on" in proc.stdout
    assert {p.name: p.read_bytes() for p in (tmp_path / "lake").iterdir()} == before and not report.exists()

    proc = _on_cluster(cluster, "--input", str(tmp_path / "lake"), "--in-place", "--report", str(report),
                       cwd=tmp_path, **zipped)
    assert proc.returncode == 0, _ours(proc)
    warned = [ln for ln in proc.stdout.splitlines() if "executors index files by the Arrow fallback" in ln]
    assert len(warned) == 1 and f"(python {env_python})" in warned[0], _ours(proc)
    rows = report_records(report)
    assert {(r["status"], r["scan_path"]) for r in rows} == {("indexed", compiled.ARROW)}
    assert "  2 files indexed by the Arrow fallback: the compiled kernels did not load on " in proc.stdout
