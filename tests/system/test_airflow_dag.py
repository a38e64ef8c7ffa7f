"""The DAGs in deploy/airflow under a real Airflow 3: `dag.test()` runs with no logical date, the
job's exit codes decide retries, each try keeps its own report, mapping over sources isolates them.

Airflow is far too heavy (and too tightly pinned) to share .venv, so it lives in its own venv,
`.venv-airflow` at the repo root, created on first use and reused while its stamp matches the pins
below (about 1-2 min to install). The runs happen in a subprocess with that venv's python
(tests/helpers/airflow_dag_runner.py) on a SQLite metadata database in a temporary AIRFLOW_HOME; a
failed install fails the tests, it does not skip them. Set PAGEINDEX_AIRFLOW_VENV to use another
location.

Two kinds of runs: against a stand-in spark-submit that exits with the code its --conf asks for
(the DAG's side of the contract, no JVM), and against the real jobs/retrofit_job.py through the
pyspark package's spark-submit (local[2]; a local-cluster for the packed environment, whose
executors unpack it in working directories of their own).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pyspark
import pytest

from tests.helpers.paths import HELPERS_DIR, REPO_ROOT
from tests.helpers.side_venv import SideVenv

DAG_DIR = REPO_ROOT / "deploy" / "airflow"
DAG_ID, TABLES_DAG_ID = "pageindex_backfill", "pageindex_backfill_tables"
RUNNER = HELPERS_DIR / "airflow_dag_runner.py"

AIRFLOW_VERSION = "3.3.2"
SPARK_PROVIDER_VERSION = "6.3.4"
PINS = [
    f"apache-airflow=={AIRFLOW_VERSION}",
    f"apache-airflow-providers-apache-spark=={SPARK_PROVIDER_VERSION}",
]
INSTALL_TIMEOUT_S = 1500
AIRFLOW_VENV = SideVenv(Path(os.environ.get("PAGEINDEX_AIRFLOW_VENV", REPO_ROOT / ".venv-airflow")), tuple(PINS),
                        "airflow", INSTALL_TIMEOUT_S)

# The first test pays for the install; pytest's default per-test timeout (600 s) is too tight for that.
pytestmark = [pytest.mark.timeout(INSTALL_TIMEOUT_S + 600), pytest.mark.slow, pytest.mark.airflow]

# Exits with the code of --conf spark.fake.exit=N (default 0) after printing a job-like summary
# (longer than the 20 lines of output the provider's hook keeps for a failure's message);
# appends its arguments, tab-separated, one line per call, to $FAKE_SPARK_LOG.
FAKE_SPARK_SUBMIT = r"""#!/bin/sh
for a in "$@"; do printf '%s\t' "$a"; done >> "$FAKE_SPARK_LOG"
echo >> "$FAKE_SPARK_LOG"
code=0
for a in "$@"; do case "$a" in spark.fake.exit=*) code="${a#spark.fake.exit=}" ;; esac; done
echo "pageindex job: 2 files in 0.5s"
echo "  failed                  1 file         4.0 KiB"
echo "  failures by reason:"
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25; do
    echo "         1  failed: reason $i"
done
echo "         1  failed: NotParquetError: bad magic"
exit "$code"
"""


def airflow_env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PAGEINDEX_", "PYSPARK_"))}
    env.pop("VIRTUAL_ENV", None)
    env.update({"AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__DAGS_FOLDER": str(DAG_DIR), "DAG_DIR": str(DAG_DIR),
                "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"})})
    env.update(extra)
    return env


def run_dags(python: Path, workdir: Path, runs: list[dict], extra_env: dict[str, str]) -> tuple[dict, list[str]]:
    """The runner's result for `runs` (dag.test each) on a fresh metadata database, and each run's
    output (task logs included)."""
    home = workdir / "airflow-home"
    home.mkdir(parents=True)
    env = airflow_env(home, extra_env)
    airflow = str(python.parent / "airflow")
    for cmd in ([airflow, "db", "migrate"], [airflow, "pools", "set", "pageindex", "2", "pageindex jobs"]):
        proc = subprocess.run(cmd, env=env, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=300, stdin=subprocess.DEVNULL, check=False)
        assert proc.returncode == 0, proc.stdout[-4000:]
    spec, out = workdir / "spec.json", workdir / "result.json"
    spec.write_text(json.dumps({"runs": runs}))
    proc = subprocess.run([str(python), str(RUNNER), str(spec), str(out)], env=env, cwd=workdir,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1200,
                          stdin=subprocess.DEVNULL, check=False)
    assert proc.returncode == 0 and out.exists(), f"dag runs failed:\n{proc.stdout[-8000:]}"
    result = json.loads(out.read_text())
    assert result["airflow_version"] == AIRFLOW_VERSION
    assert result["import_errors"] == {}
    logs = proc.stdout.split("RUN DONE ")[:-1]
    assert len(logs) == len(runs) == len(result["runs"])
    return result, logs


def states(run: dict) -> dict[tuple[str, int], tuple[str, int]]:
    """(task id, map index) -> (state, try number)."""
    return {(t["task_id"], t["map_index"]): (t["state"], t["try_number"]) for t in run["tasks"]}


def reports(prefix: Path) -> list[str]:
    """The reports below `prefix` (the job's: folders of part files, each one report)."""
    return sorted(p.relative_to(prefix).as_posix() for p in prefix.rglob("*.parquet") if not p.name.startswith("part-"))


def run_date_dir(run: dict) -> str:
    return "run_date=" + run["run_after"][:10]


def safe(run_id: str) -> str:
    """The run id as the report's file name has it (the run ids here have single ':' and '+')."""
    return run_id.replace(":", "_").replace("+", "_")


@pytest.fixture(scope="module")
def airflow_python() -> Path:
    return AIRFLOW_VENV.ensure()


# ---------------------------------------------------------------- the DAGs' side, no JVM

ENV_ARCHIVE = "s3://artifacts/pageindex/pageindex-env-0123abcd.tar.gz#environment"
FAKE_VARIABLE = {"input_paths": ["/data/events"], "spark_conf": {"spark.executor.memoryOverhead": "2g"},
                 "env_vars": {"PAGEINDEX_PROBE": "on"}, "max_failures": 2, "yarn_queue": "etl"}


def _fake_runs(tmp: Path) -> list[dict]:
    prefix = {"pageindex_report_prefix": str(tmp / "reports")}
    return [
        # 0: scheduled-like run: everything from Variables, read when the task runs
        dict(dag_id=DAG_ID, run_after="2026-06-01T02:00:00+00:00", conf=None,
             variables={**prefix, "pageindex_backfill_params": FAKE_VARIABLE,
                        "pageindex_py_files": "s3://artifacts/pageindex/pageindex.zip"}),
        # 1-3: the job's exit codes 1 (retried), 2 and 3 (failed at once)
        *(dict(dag_id=DAG_ID, run_after=f"2026-06-0{2 + i}T02:00:00+00:00", variables=prefix,
               conf={"table": "db.events", "spark_conf": {"spark.fake.exit": str(code)}})
          for i, code in enumerate((1, 2, 3))),
        # 4: params that cannot make a command line: failed at once, spark-submit never starts
        dict(dag_id=DAG_ID, run_after="2026-06-05T02:00:00+00:00", variables=prefix,
             conf={"table": "db.events", "in_place": False}),
        # 5: many sources, one task each; the second fails (exit 2), the others do not care
        dict(dag_id=TABLES_DAG_ID, run_after="2026-06-06T02:00:00+00:00", variables=prefix,
             conf={"targets": [{"table": "db.a"}, {"table": "db.b", "spark_conf": {"spark.fake.exit": "2"}},
                               {"input_paths": ["/data/c"], "max_failures": 5, "state": "/state/c.parquet"}]}),
        # 6: a Variable naming a source the trigger replaces; a param the Variable gets wrong fails the run
        dict(dag_id=DAG_ID, run_after="2026-06-07T02:00:00+00:00",
             conf={"delta_table": "/lake/t"},
             variables={**prefix, "pageindex_backfill_params": {"table": "db.x", "max_failures": -1}}),
        # 7: the packed environment: shipped with --archives, executors run its python, no zip
        # (in_place and spark_conf given: under dag.test, the confs of runs 3 and 4 stay in the DAG's
        # params for the later runs of this process)
        dict(dag_id=DAG_ID, run_after="2026-06-08T02:00:00+00:00",
             conf={"table": "db.events", "in_place": True, "spark_conf": {}},
             variables={**prefix, "pageindex_archives": ENV_ARCHIVE,
                        "pageindex_py_files": "s3://artifacts/pageindex/pageindex.zip"}),
        # 8: the environment without an alias gets `environment`; a python the user's conf names wins
        dict(dag_id=TABLES_DAG_ID, run_after="2026-06-09T02:00:00+00:00", variables={
            **prefix, "pageindex_archives": ENV_ARCHIVE.split("#")[0],
            "pageindex_backfill_tables_params": {"spark_conf": {"spark.executor.memoryOverhead": "2g"}}},
             conf={"targets": [{"table": "db.a"},
                               {"table": "db.b", "spark_conf": {"spark.pyspark.python": "/opt/py/bin/python3"}}]}),
    ]


@pytest.fixture(scope="module")
def fake(airflow_python, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("airflow-fake")
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "spark-submit").write_text(FAKE_SPARK_SUBMIT)
    (bin_dir / "spark-submit").chmod(0o755)
    log = tmp / "spark-submit.log"
    runs = _fake_runs(tmp)
    result, logs = run_dags(airflow_python, tmp, runs, {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "FAKE_SPARK_LOG": str(log),
        "PAGEINDEX_POOL": "pageindex", "PAGEINDEX_QUEUE": "spark", "PAGEINDEX_PRIORITY_WEIGHT": "5"})
    calls = [line.rstrip("\t").split("\t") for line in log.read_text().splitlines()] if log.exists() else []
    for run, spec in zip(result["runs"], runs):
        run["run_after"] = spec["run_after"]
    return {"result": result, "logs": logs, "calls": calls, "reports": tmp / "reports"}


def _calls_of(fake: dict, run: dict) -> list[list[str]]:
    return [c for c in fake["calls"] if f"/{run_date_dir(run)}/" in c[c.index("--report") + 1]]


def _conf(argv: list[str]) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--conf")


def test_dags_load_with_their_retry_policy_and_scheduling(fake):
    dags = fake["result"]["dags"]
    assert sorted(dags) == [DAG_ID, TABLES_DAG_ID]
    single, tables = dags[DAG_ID], dags[TABLES_DAG_ID]
    assert single["serialized_task_ids"] == ["retrofit"]
    assert tables["serialized_task_ids"] == ["retrofit", "targets"]
    assert tables["tasks"]["retrofit"]["is_mapped"]
    for task in (single["tasks"]["retrofit"], tables["tasks"]["retrofit"]):
        assert task["retries"] == 2 and task["retry_delay_s"] == 600 and task["max_retry_delay_s"] == 3600
        assert task["retry_exponential_backoff"] > 1  # a real multiplier; 1.0 (or True) means no backoff
        assert (task["pool"], task["queue"], task["priority_weight"]) == ("pageindex", "spark", 5)
    for dag in (single, tables):
        assert dag["max_active_runs"] == 1 and dag["catchup"] is False
        assert "exit" in dag["doc_md"] and "{{" not in json.dumps(dag["params"])
    assert {"spark_conf", "env_vars", "yarn_queue"} <= set(single["params"]) & set(tables["params"])


def test_run_without_logical_date_takes_variables_at_run_time(fake):
    run = fake["result"]["runs"][0]
    assert run["logical_date"] is None
    assert states(run) == {("retrofit", -1): ("success", 1)}
    [argv] = _calls_of(fake, run)
    assert argv[:2] == ["--master", "local[2]"]
    assert _conf(argv) == {"spark.executor.memoryOverhead": "2g", "spark.executorEnv.PAGEINDEX_PROBE": "on"}
    assert argv[argv.index("--queue") + 1] == "etl"
    assert argv[argv.index("--py-files") + 1] == "s3://artifacts/pageindex/pageindex.zip"
    assert "--archives" not in argv
    assert "Arrow fallback" in fake["logs"][0]  # the task warns that the zip cannot run the compiled kernels
    app = argv.index("/opt/pageindex/jobs/retrofit_job.py")
    report = argv[-1]
    assert argv[app + 1:] == ["--input", "/data/events", "--in-place", "--max-failures", "2",
                              "--target-task-bytes", "256m", "--progress-seconds", "60", "--report", report]
    # its own file: under the run's date, named by the run id (made path-safe) and the try
    assert report == f"{fake['reports']}/{run_date_dir(run)}/{safe(run['run_id'])}-try1.parquet"


def test_exit_1_is_retried_2_and_3_fail_at_once_with_the_summary(fake):
    retried, usage, unmendable = fake["result"]["runs"][1:4]
    assert states(retried) == {("retrofit", -1): ("up_for_retry", 1)}
    assert states(usage) == {("retrofit", -1): ("failed", 1)} and usage["waited"] is None
    assert states(unmendable) == {("retrofit", -1): ("failed", 1)} and unmendable["waited"] is None
    usage_log, unmendable_log = fake["logs"][2:4]
    assert "usage or configuration error (exit 2)" in usage_log and "not retrying" in usage_log
    assert "no retry can mend (exit 3)" in unmendable_log
    # the job's whole summary is in the task's error, not only in the lines logged before it
    summary = "not retrying.\npageindex job: 2 files in 0.5s\nfailed                  1 file         4.0 KiB"
    assert "AirflowFailException" in unmendable_log and summary in unmendable_log
    assert "reason 25\n1  failed: NotParquetError: bad magic" in unmendable_log
    assert "AirflowFailException" not in fake["logs"][1]


def test_bad_params_fail_before_spark_submit(fake):
    bad = fake["result"]["runs"][4]
    assert states(bad) == {("retrofit", -1): ("failed", 1)}
    assert not _calls_of(fake, bad)
    assert "set in_place to true or give an output_dir" in fake["logs"][4]

    variable_wrong = fake["result"]["runs"][6]
    assert states(variable_wrong) == {("retrofit", -1): ("failed", 1)}
    assert "Variable pageindex_backfill_params: param 'max_failures'" in fake["logs"][6]


def test_mapped_sources_each_run_alone_with_their_own_report(fake):
    run = fake["result"]["runs"][5]
    assert states(run) == {("targets", -1): ("success", 1), ("retrofit", 0): ("success", 1),
                           ("retrofit", 1): ("failed", 1), ("retrofit", 2): ("success", 1)}
    calls = sorted(_calls_of(fake, run), key=lambda c: c[-1])
    sources = [c[c.index("/opt/pageindex/jobs/retrofit_job.py") + 1:][:2] for c in calls]
    assert sources == [["--table", "db.a"], ["--table", "db.b"], ["--input", "/data/c"]]
    assert [c[-1].rsplit("/", 1)[1].split("-map")[1] for c in calls] == ["0-try1.parquet", "1-try1.parquet",
                                                                         "2-try1.parquet"]
    assert calls[2][calls[2].index("--max-failures") + 1] == "5"
    assert calls[2][calls[2].index("--state") + 1] == "/state/c.parquet"
    assert "--state" not in calls[0] + calls[1]


def test_packed_environment_is_shipped_instead_of_the_zip(fake):
    """pageindex_archives set: --archives ENV#environment, executors run ./environment/bin/python
    (unless the run's spark_conf names a python), no --py-files whose zip would hide the compiled
    kernels, whatever pageindex_py_files says."""
    single, mapped = fake["result"]["runs"][7:9]
    assert states(single) == {("retrofit", -1): ("success", 1)}, fake["logs"][7][-4000:]
    [argv] = _calls_of(fake, single)
    assert argv[argv.index("--archives") + 1] == ENV_ARCHIVE
    assert "--py-files" not in argv
    assert _conf(argv) == {"spark.pyspark.python": "./environment/bin/python"}
    assert "Arrow fallback" not in fake["logs"][7]
    app = argv.index("/opt/pageindex/jobs/retrofit_job.py")
    assert argv[app + 1:app + 4] == ["--table", "db.events", "--in-place"]

    assert states(mapped) == {("targets", -1): ("success", 1), ("retrofit", 0): ("success", 1),
                              ("retrofit", 1): ("success", 1)}, fake["logs"][8][-4000:]
    first, second = sorted(_calls_of(fake, mapped), key=lambda c: c[-1])
    for argv in (first, second):
        assert argv[argv.index("--archives") + 1] == ENV_ARCHIVE and "--py-files" not in argv
    assert _conf(first) == {"spark.executor.memoryOverhead": "2g", "spark.pyspark.python": "./environment/bin/python"}
    assert _conf(second) == {"spark.pyspark.python": "/opt/py/bin/python3"}


# ---------------------------------------------------------------- the real job through spark-submit

def _indexless(path: Path, rows: int = 20_000) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table({"id": pa.array(range(rows), pa.int64()), "s": [f"v{i:05d}" for i in range(rows)]})
    pq.write_table(table, path, write_page_index=False, data_page_size=2048)


def _has_index(path: Path) -> bool:
    meta = pq.ParquetFile(path).metadata
    return all(meta.row_group(0).column(c).has_column_index for c in range(meta.num_columns))


def real_runs(airflow_python: Path, workdir: Path, runs: list[dict], extra_env: dict[str, str] | None = None
              ) -> tuple[dict, list[str]]:
    """run_dags with the pyspark package's spark-submit and the real job (zip built first)."""
    build = subprocess.run(["bash", str(REPO_ROOT / "deploy" / "spark-submit.sh"), "--dry-build"], check=False,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
                           env={**os.environ, "PAGEINDEX_EXECUTOR_ENV": "zip"})
    assert build.returncode == 0, build.stdout
    spark_bin = Path(sys.executable).parent  # .venv/bin: spark-submit from the pyspark package
    assert (spark_bin / "spark-submit").exists()
    result, logs = run_dags(airflow_python, workdir, runs, {
        "PATH": f"{spark_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "PAGEINDEX_JOB_SCRIPT": str(REPO_ROOT / "jobs" / "retrofit_job.py"),
        "PAGEINDEX_PY_FILES": str(REPO_ROOT / "deploy" / "build" / "pageindex.zip"),
        **(extra_env or {})})
    for run, spec in zip(result["runs"], runs):
        run["run_after"] = spec["run_after"]
    return result, logs


# The job's python reaches the driver and executors through the env_vars param (not the worker's
# environment): PYSPARK_PYTHON unset, spark-submit would start python3 without pyarrow.
WORKER_ENV = {"env_vars": {"PYSPARK_PYTHON": sys.executable}}


@pytest.mark.spark
def test_real_job_nights_and_mapped_roots(airflow_python, tmp_path):
    """Two nights with no logical date over the same files keep two reports; over two roots, the
    one with a usage error (exit 2) fails at once, alone."""
    good, other = tmp_path / "data" / "good" / "part-0.parquet", tmp_path / "data" / "other" / "part-0.parquet"
    _indexless(good)
    _indexless(other)
    prefix = tmp_path / "reports"
    variables = {"pageindex_report_prefix": str(prefix),
                 "pageindex_backfill_params": {"input_paths": [str(good.parent)], **WORKER_ENV},
                 "pageindex_backfill_tables_params": WORKER_ENV}
    runs = [
        dict(dag_id=DAG_ID, run_after="2026-06-01T02:00:00+00:00", conf=None, variables=variables),
        dict(dag_id=DAG_ID, run_after="2026-06-02T02:00:00+00:00", conf=None, variables=variables),
        dict(dag_id=TABLES_DAG_ID, run_after="2026-06-03T02:00:00+00:00", variables=variables,
             conf={"targets": [{"input_paths": [str(other.parent)]},
                               {"input_paths": [str(good.parent)], "extra_args": ["--truncate-length", "0"]}]}),
    ]
    result, logs = real_runs(airflow_python, tmp_path / "work", runs)
    first, second, mapped = result["runs"]

    assert first["logical_date"] is None and second["logical_date"] is None
    assert states(first) == states(second) == {("retrofit", -1): ("success", 1)}, logs[:2]
    assert _has_index(good)
    night1, night2 = (f"{run_date_dir(r)}/{safe(r['run_id'])}-try1.parquet" for r in (first, second))
    # the zip on --py-files: the compiled kernels cannot load from it, the Arrow fallback indexed the file
    assert [(r["path"], r["status"], r["scan_path"]) for r in pq.read_table(prefix / night1).to_pylist()] == [
        (str(good), "indexed", "arrow")]
    assert [(r["path"], r["status"]) for r in pq.read_table(prefix / night2).to_pylist()] == [
        (str(good), "already_indexed")]

    assert states(mapped) == {("targets", -1): ("success", 1), ("retrofit", 0): ("success", 1),
                              ("retrofit", 1): ("failed", 1)}, logs[2][-6000:]
    assert "usage or configuration error (exit 2)" in logs[2]
    assert _has_index(other)
    assert [r for r in reports(prefix) if r.startswith(run_date_dir(mapped))] == [
        f"{run_date_dir(mapped)}/{safe(mapped['run_id'])}-map0-try1.parquet"]


@pytest.mark.spark
def test_real_job_corrupt_file_fails_without_retry(airflow_python, tmp_path):
    """A corrupt file: the job exits 3, the task fails on its first try, never up_for_retry, with
    the job's summary in its error."""
    corrupt = tmp_path / "data" / "part-0.parquet"
    _indexless(corrupt)
    corrupt.write_bytes(corrupt.read_bytes()[:3000] + b"PAR1")
    prefix = tmp_path / "reports"
    runs = [dict(dag_id=DAG_ID, run_after="2026-06-04T02:00:00+00:00", conf={"input_paths": [str(corrupt.parent)]},
                 variables={"pageindex_report_prefix": str(prefix), "pageindex_backfill_params": WORKER_ENV})]
    result, logs = real_runs(airflow_python, tmp_path / "work", runs)
    [broken] = result["runs"]
    assert broken["waited"] is None, broken
    assert states(broken) == {("retrofit", -1): ("failed", 1)}, logs[0][-6000:]
    assert "no retry can mend (exit 3)" in logs[0] and "pageindex job: 1 file in " in logs[0]
    [row] = pq.read_table(prefix / run_date_dir(broken) / f"{safe(broken['run_id'])}-try1.parquet").to_pylist()
    assert (row["path"], row["status"], row["retryable"]) == (str(corrupt), "failed", False)


# A stand-in for deploy/pack_env.py's environment (building that one installs pyarrow & co from the
# package index, minutes; tests/system/test_deploy_submit.py covers it): bin/python runs this
# checkout's pageindex, its compiled kernels built in place, with .venv's interpreter.
STAND_IN_PYTHON = f"""#!/bin/sh
PYTHONPATH={REPO_ROOT} exec {sys.executable} "$@"
"""


@pytest.mark.spark
def test_real_job_runs_the_packed_environment_with_the_compiled_kernels(airflow_python, tmp_path):
    """pageindex_archives set: executors (a local-cluster's, in their own working directories)
    unpack it and run ./environment/bin/python; no zip hides the compiled kernels, though
    pageindex_py_files names one, so the file is indexed by them (the report says so)."""
    kernels = [p for p in (REPO_ROOT / "pageindex").rglob("*.pyx") if not list(p.parent.glob(f"{p.stem}.*.so"))]
    assert not kernels, f"build the kernels in place first (setup.py build_ext --inplace): {kernels}"
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text(STAND_IN_PYTHON)
    (env / "bin" / "python").chmod(0o755)
    archive = tmp_path / "pageindex-env.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(env / "bin", arcname="bin")
    data = tmp_path / "data" / "part-0.parquet"
    _indexless(data)
    prefix = tmp_path / "reports"
    runs = [dict(dag_id=DAG_ID, run_after="2026-06-05T02:00:00+00:00", conf={"input_paths": [str(data.parent)]},
                 variables={"pageindex_report_prefix": str(prefix), "pageindex_archives": f"{archive}#environment",
                            # client deploy mode: the driver runs here, in the same environment unpacked
                            "pageindex_backfill_params": {
                                "spark_conf": {"spark.pyspark.driver.python": str(env / "bin" / "python")}}})]
    result, logs = real_runs(airflow_python, tmp_path / "work", runs, {
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local-cluster[1,1,1024]"})})
    [run] = result["runs"]
    assert states(run) == {("retrofit", -1): ("success", 1)}, logs[0][-6000:]
    assert "executors scan with the compiled kernels" in logs[0] and "Arrow fallback" not in logs[0]
    assert _has_index(data)
    [row] = pq.read_table(prefix / run_date_dir(run) / f"{safe(run['run_id'])}-try1.parquet").to_pylist()
    assert (row["path"], row["status"], row["scan_path"]) == (str(data), "indexed", "compiled")


def _lake_rows(first: int, n: int):
    return pa.table({"p": [("a", "b")[i % 2] for i in range(first, first + n)],
                     "id": pa.array(range(first, first + n), pa.int64())})


def _sorted_rows(table) -> list[tuple]:
    return sorted(zip(*(table.column(c).to_pylist() for c in ("p", "id"))))


@pytest.mark.spark
def test_real_job_maps_over_lake_tables(airflow_python, tmp_path):
    """The tables DAG over a Delta table and an Iceberg table: each mapped task commits a new
    version or snapshot of indexed copies, both tables read back the same rows."""
    deltalake = pytest.importorskip("deltalake")
    pytest.importorskip("pyiceberg")
    from pyiceberg.catalog.sql import SqlCatalog

    delta_root = str(tmp_path / "delta")
    # arrow-rs writes a ColumnIndex unless page statistics are off
    kw = dict(partition_by=["p"], writer_properties=deltalake.WriterProperties(
        default_column_properties=deltalake.ColumnProperties(statistics_enabled="CHUNK")))
    deltalake.write_deltalake(delta_root, _lake_rows(0, 2000), **kw)
    deltalake.write_deltalake(delta_root, _lake_rows(2000, 500), mode="append", **kw)
    delta_before = deltalake.DeltaTable(delta_root)
    files = len(delta_before.file_uris())
    delta_rows = _sorted_rows(delta_before.to_pyarrow_table())

    settings = {"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": f"file://{tmp_path}/wh"}
    catalog = SqlCatalog("lake", **{k: v for k, v in settings.items() if k != "type"})
    catalog.create_namespace("db")
    iceberg = catalog.create_table("db.t", schema=_lake_rows(0, 1).schema)
    iceberg.append(_lake_rows(0, 2000))
    iceberg.append(_lake_rows(2000, 500))
    iceberg_before = iceberg.current_snapshot().snapshot_id
    iceberg_rows = _sorted_rows(iceberg.scan().to_arrow())

    prefix = tmp_path / "reports"
    runs = [dict(dag_id=TABLES_DAG_ID, run_after="2026-06-01T02:00:00+00:00",
                 variables={"pageindex_report_prefix": str(prefix), "pageindex_backfill_tables_params": WORKER_ENV},
                 conf={"targets": [{"delta_table": delta_root, "commit_batch_files": 1},
                                   {"iceberg_table": "lake.db.t"}]})]
    result, logs = real_runs(airflow_python, tmp_path / "work", runs,
                             {f"PYICEBERG_CATALOG__LAKE__{k.upper()}": v for k, v in settings.items()})
    [run] = result["runs"]
    assert states(run) == {("targets", -1): ("success", 1), ("retrofit", 0): ("success", 1),
                           ("retrofit", 1): ("success", 1)}, logs[0][-6000:]

    delta_after = deltalake.DeltaTable(delta_root)
    ours = list(range(delta_before.version() + 1, delta_before.version() + 1 + files))  # a commit per file
    assert delta_after.version() == ours[-1]
    assert all(".pageindex-" in uri for uri in delta_after.file_uris())
    assert _sorted_rows(delta_after.to_pyarrow_table()) == delta_rows
    [delta_report] = prefix.glob("run_date=2026-06-01/*-map0-try1.parquet")
    assert sorted(r["table_version"] for r in pq.read_table(delta_report).to_pylist()) == ours

    iceberg = catalog.load_table("db.t")
    snapshot = iceberg.current_snapshot()
    assert snapshot.snapshot_id != iceberg_before and snapshot.summary["pageindex"]
    assert _sorted_rows(iceberg.scan().to_arrow()) == iceberg_rows
    [iceberg_report] = prefix.glob("run_date=2026-06-01/*-map1-try1.parquet")
    assert {r["table_version"] for r in pq.read_table(iceberg_report).to_pylist()} == {snapshot.snapshot_id}
