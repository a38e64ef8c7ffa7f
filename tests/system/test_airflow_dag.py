"""The Airflow DAG in deploy/airflow: it loads, is configured as documented, and drives spark-submit.

Airflow is far too heavy (and too tightly pinned) to share .venv, so it lives in its own venv,
`.venv-airflow` at the repo root, created here on first use and reused while its stamp file matches the
pins below (about 1m45s to install from scratch with an empty pip cache on a 2-core machine). The checks
run in a subprocess with that venv's python; a failed install fails the tests, it does not skip them.

Set PAGEINDEX_AIRFLOW_VENV to use another location.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers.paths import REPO_ROOT
from tests.helpers.side_venv import SideVenv

DAG_DIR = REPO_ROOT / "deploy" / "airflow"
DAG_ID = "pageindex_backfill"

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
# Every test runs Airflow in its own virtualenv, in a subprocess.
pytestmark = [pytest.mark.timeout(INSTALL_TIMEOUT_S + 300), pytest.mark.slow]


def ensure_airflow_venv() -> Path:
    """Create or reuse .venv-airflow; pytest.fail (never skip) when the install fails."""
    return AIRFLOW_VENV.ensure()


# Runs inside .venv-airflow. argv: mode ("inspect" or "e2e"), output JSON path.
CHECK_SCRIPT = textwrap.dedent(r'''
    import json, os, sys, traceback
    from datetime import timedelta

    mode, out_path = sys.argv[1], sys.argv[2]
    result = {}

    import airflow
    result["airflow_version"] = airflow.__version__
    try:
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:
        from airflow.models.dagbag import DagBag
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
    try:
        from airflow.sdk.exceptions import AirflowException, AirflowFailException
    except ImportError:
        from airflow.exceptions import AirflowException, AirflowFailException

    bag = DagBag(dag_folder=os.environ["DAG_DIR"])
    result["import_errors"] = {str(k): str(v) for k, v in bag.import_errors.items()}
    result["dag_ids"] = sorted(bag.dags)
    dag = bag.dags.get(os.environ["DAG_ID"])

    class _Values:  # stands in for the `var` template accessor: every Variable is unset
        @staticmethod
        def get(name, default=None):
            return default

    class _Var:
        value = _Values

    def context_for(**overrides):
        params = dict(dag.params.dump())
        params.update(overrides)
        return {"ds": "2025-06-01", "params": params, "var": _Var}

    def fresh_task():
        # a new copy per scenario: execute() extends application_args
        return dag.partial_subset(task_ids=["retrofit"], include_upstream=False).get_task("retrofit")

    def run_task(ctx):
        task = fresh_task()
        task.render_template_fields(ctx)
        try:
            task.execute(ctx)
            return {"outcome": "ok"}
        except AirflowFailException as exc:
            return {"outcome": "fail_no_retry", "message": str(exc)}
        except AirflowException as exc:
            return {"outcome": "fail_retry", "message": str(exc)}

    def run_fake(exit_code, **params):
        argv_file = os.environ["FAKE_SPARK_ARGV"]
        if os.path.exists(argv_file):
            os.remove(argv_file)
        os.environ["FAKE_SPARK_EXIT"] = str(exit_code)
        res = run_task(context_for(**params))
        res["argv"] = open(argv_file).read().splitlines() if os.path.exists(argv_file) else None
        return res

    if dag is not None and mode == "inspect":
        task = dag.get_task("retrofit")
        result["task_ids"] = sorted(dag.task_ids)
        result["is_spark_submit"] = isinstance(task, SparkSubmitOperator)
        result["application"] = task.application
        result["py_files"] = task.py_files
        result["application_args"] = list(task.application_args)
        result["conn_id"] = getattr(task, "_conn_id", None)
        result["retries"] = task.retries
        result["retry_delay_s"] = task.retry_delay.total_seconds()
        result["retry_exponential_backoff"] = float(task.retry_exponential_backoff)
        result["max_retry_delay_s"] = (task.max_retry_delay.total_seconds()
                                       if isinstance(task.max_retry_delay, timedelta) else task.max_retry_delay)
        result["execution_timeout_s"] = task.execution_timeout.total_seconds() if task.execution_timeout else None
        result["max_active_runs"] = dag.max_active_runs
        result["catchup"] = dag.catchup
        result["tags"] = sorted(dag.tags)
        result["has_doc_md"] = bool(dag.doc_md) and "exit" in dag.doc_md.lower()
        result["param_defaults"] = dict(dag.params.dump())

        rendered = fresh_task()
        rendered.render_template_fields(context_for(report_prefix="s3://reports-bucket/pi/"))
        result["rendered"] = {"application": rendered.application, "py_files": rendered.py_files,
                              "name": rendered.name, "application_args": list(rendered.application_args)}

        params_to_args = sys.modules[type(task).__module__].params_to_args
        cases = {
            "inputs_in_place": dict(input_paths=["s3://b/t/", "s3a://b/u/*.parquet"], in_place=True),
            "table_output": dict(table="db.t", in_place=False, output_dir="s3://b/out", copy_unchanged=True,
                                 dry_run=True, force=True, s3_endpoint_url="http://127.0.0.1:9000",
                                 extra_args=["--truncate-length", "16"]),
            "both_sources": dict(input_paths=["/a"], table="db.t", in_place=True),
            "no_source": dict(in_place=True),
            "both_modes": dict(table="db.t", in_place=True, output_dir="/o"),
            "no_mode": dict(table="db.t", in_place=False),
            "copy_unchanged_in_place": dict(table="db.t", in_place=True, copy_unchanged=True),
            "delta_table": dict(delta_table="s3://b/lake/t", in_place=True, commit_batch_files=50),
            "iceberg_table": dict(iceberg_table="prod.db.t", in_place=True),
            "delta_output": dict(delta_table="/t", in_place=False, output_dir="/o"),
            "iceberg_not_in_place": dict(iceberg_table="prod.db.t", in_place=False),
            "two_tables": dict(delta_table="/t", iceberg_table="prod.db.t", in_place=True),
        }
        result["params_to_args"] = {}
        for name, overrides in cases.items():
            params = dict(dag.params.dump())
            params.update(overrides)
            try:
                result["params_to_args"][name] = params_to_args(params)
            except ValueError as exc:
                result["params_to_args"][name] = "ValueError: " + str(exc)

        result["fake"] = {
            "ok": run_fake(0, input_paths=["s3://b/t/", "s3://b/u/"], max_failures=3),
            "too_many_failures": run_fake(1, table="db.t"),
            "usage_error": run_fake(2, table="db.t"),
            "bad_params": run_fake(0),
        }

        try:
            from airflow.serialization.serialized_objects import DagSerialization as _Ser
        except ImportError:
            from airflow.serialization.serialized_objects import SerializedDAG as _Ser
        try:
            data = _Ser.to_dict(dag)
            back = _Ser.from_dict(json.loads(json.dumps(data)))
            result["serialized_task_ids"] = sorted(back.task_ids)
        except Exception:
            result["serialized_task_ids"] = traceback.format_exc()

    if dag is not None and mode == "e2e":  # E2E_RUNS: a JSON list of param overrides, one task run each
        result["runs"] = [run_task(context_for(**params)) for params in json.loads(os.environ["E2E_RUNS"])]

    with open(out_path, "w") as fh:
        json.dump(result, fh, indent=1, default=str)
''')

FAKE_SPARK_SUBMIT = """#!/bin/sh
printf '%s\\n' "$@" > "$FAKE_SPARK_ARGV"
exit "${FAKE_SPARK_EXIT:-0}"
"""


def run_check(python: Path, mode: str, workdir: Path, extra_env: dict[str, str]) -> dict:
    home = workdir / "airflow-home"
    home.mkdir(parents=True, exist_ok=True)
    out = workdir / f"{mode}.json"
    script = workdir / "check_dag.py"
    script.write_text(CHECK_SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PAGEINDEX_", "PYSPARK_"))}
    env.pop("VIRTUAL_ENV", None)
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAG_DIR),
        "DAG_DIR": str(DAG_DIR),
        "DAG_ID": DAG_ID,
    })
    env.update(extra_env)
    proc = subprocess.run([str(python), str(script), mode, str(out)], check=False, cwd=workdir, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0 and out.exists(), f"DAG check ({mode}) failed:\n{proc.stdout[-6000:]}"
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def airflow_python() -> Path:
    return ensure_airflow_venv()


@pytest.fixture(scope="module")
def dag_info(airflow_python, tmp_path_factory) -> dict:
    workdir = tmp_path_factory.mktemp("airflow-inspect")
    fake_bin = workdir / "bin"
    fake_bin.mkdir()
    fake = fake_bin / "spark-submit"
    fake.write_text(FAKE_SPARK_SUBMIT)
    fake.chmod(0o755)
    return run_check(airflow_python, "inspect", workdir, {
        "PATH": f"{fake_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "FAKE_SPARK_ARGV": str(workdir / "argv.txt"),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[*]"}),
    })


def test_airflow_version(dag_info):
    assert dag_info["airflow_version"] == AIRFLOW_VERSION


def test_dag_loads_without_import_errors(dag_info):
    assert dag_info["import_errors"] == {}
    assert DAG_ID in dag_info["dag_ids"]


def test_dag_shape_and_retry_policy(dag_info):
    assert dag_info["task_ids"] == ["retrofit"]
    assert dag_info["is_spark_submit"]
    assert dag_info["conn_id"] == "spark_default"
    assert dag_info["retries"] == 2
    assert dag_info["retry_delay_s"] == 600
    assert dag_info["retry_exponential_backoff"] > 1  # a real multiplier; 1.0 (or True) means no backoff
    assert dag_info["max_retry_delay_s"] == 3600
    assert dag_info["execution_timeout_s"] and dag_info["execution_timeout_s"] > 0
    assert dag_info["max_active_runs"] == 1
    assert dag_info["catchup"] is False
    assert "pageindex" in dag_info["tags"]
    assert dag_info["has_doc_md"]
    assert dag_info["serialized_task_ids"] == ["retrofit"]


def test_application_args_contain_templated_report_path(dag_info):
    args = dag_info["application_args"]
    report = args[args.index("--report") + 1]
    assert "{{ ds }}" in report and report.endswith(".parquet")
    assert args[args.index("--max-failures") + 1] == "{{ params.max_failures }}"
    assert "var.value.get('pageindex_job_script'" in dag_info["application"]
    assert "var.value.get('pageindex_py_files'" in dag_info["py_files"]

    rendered = dag_info["rendered"]
    r_args = rendered["application_args"]
    assert r_args[r_args.index("--report") + 1] == "s3://reports-bucket/pi/2025-06-01.parquet"
    assert r_args[r_args.index("--max-failures") + 1] == "0"
    assert rendered["application"] == "/opt/pageindex/jobs/retrofit_job.py"
    assert rendered["py_files"] == "/opt/pageindex/deploy/build/pageindex.zip"
    assert rendered["name"] == "pageindex-backfill-2025-06-01"


def test_params_to_args(dag_info):
    cases = dag_info["params_to_args"]
    assert cases["inputs_in_place"] == ["--input", "s3://b/t/", "s3a://b/u/*.parquet", "--in-place"]
    assert cases["table_output"] == [
        "--table", "db.t", "--output", "s3://b/out", "--copy-unchanged", "--dry-run", "--force",
        "--s3-endpoint-url", "http://127.0.0.1:9000", "--truncate-length", "16"]
    assert cases["delta_table"] == [
        "--input", "s3://b/lake/t", "--table-format", "delta", "--in-place", "--commit-batch-files", "50"]
    assert cases["iceberg_table"] == ["--iceberg-table", "prod.db.t", "--in-place"]
    for bad in ("both_sources", "no_source", "both_modes", "no_mode", "copy_unchanged_in_place",
                "delta_output", "iceberg_not_in_place", "two_tables"):
        assert cases[bad].startswith("ValueError: "), (bad, cases[bad])


def test_spark_submit_command_and_exit_codes(dag_info):
    fake = dag_info["fake"]
    ok = fake["ok"]
    assert ok["outcome"] == "ok", ok
    argv = ok["argv"]
    assert argv[:2] == ["--master", "local[*]"]
    assert argv[argv.index("--py-files") + 1] == "/opt/pageindex/deploy/build/pageindex.zip"
    app = argv.index("/opt/pageindex/jobs/retrofit_job.py")
    assert argv[app + 1:] == [
        "--input", "s3://b/t/", "s3://b/u/", "--in-place",
        "--report", "s3://bucket/pageindex/reports/2025-06-01.parquet",
        "--max-failures", "3", "--target-task-bytes", "256m", "--progress-seconds", "60"]
    # exit 1 (more failures than allowed): an ordinary failure, retried by Airflow
    assert fake["too_many_failures"]["outcome"] == "fail_retry", fake["too_many_failures"]
    # exit 2 (usage/configuration error) and bad params: failed without retries
    assert fake["usage_error"]["outcome"] == "fail_no_retry", fake["usage_error"]
    assert fake["bad_params"]["outcome"] == "fail_no_retry", fake["bad_params"]
    assert fake["bad_params"]["argv"] is None  # spark-submit never started


def _java_available() -> bool:
    java_home = os.environ.get("JAVA_HOME")
    return bool(shutil.which("java") or (java_home and Path(java_home, "bin", "java").exists()))


def run_e2e(airflow_python: Path, workdir: Path, runs: list[dict], extra_env: dict[str, str] | None = None) -> list:
    """Run the DAG's operator once per param overrides in `runs`, with a local[2] Spark connection
    and the real jobs/retrofit_job.py; the task outcomes."""
    if not _java_available():
        pytest.fail("java is required (see `make check-java`)")
    build = subprocess.run(["bash", str(REPO_ROOT / "deploy" / "spark-submit.sh"), "--dry-build"], check=False,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert build.returncode == 0, build.stdout
    spark_bin = Path(sys.executable).parent  # .venv/bin: spark-submit from the pyspark package
    assert (spark_bin / "spark-submit").exists()
    info = run_check(airflow_python, "e2e", workdir, {
        "PATH": f"{spark_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYSPARK_PYTHON": sys.executable,
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "PAGEINDEX_JOB_SCRIPT": str(REPO_ROOT / "jobs" / "retrofit_job.py"),
        "PAGEINDEX_PY_FILES": str(REPO_ROOT / "deploy" / "build" / "pageindex.zip"),
        "E2E_RUNS": json.dumps(runs),
        **(extra_env or {}),
    })
    assert info["import_errors"] == {}
    return info["runs"]


@pytest.mark.spark
def test_dag_runs_the_real_job_locally(airflow_python, tmp_path):
    """The DAG's operator, with a local[2] Spark connection, runs jobs/retrofit_job.py on a real file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = tmp_path / "data" / "dt=2025-06-01"
    data.mkdir(parents=True)
    table = pa.table({"id": pa.array(range(20_000), pa.int64()), "s": [f"v{i:05d}" for i in range(20_000)]})
    pq.write_table(table, data / "part-0.parquet", write_page_index=False, data_page_size=2048)
    assert pq.ParquetFile(data / "part-0.parquet").metadata.row_group(0).column(0).has_column_index is False

    reports = tmp_path / "reports"
    [run] = run_e2e(airflow_python, tmp_path / "work", [
        dict(input_paths=[str(tmp_path / "data")], in_place=True, report_prefix=str(reports))])
    assert run["outcome"] == "ok", run

    report = pq.read_table(reports / "2025-06-01.parquet").to_pylist()
    assert [(r["path"].rsplit("/", 1)[-1], r["status"]) for r in report] == [("part-0.parquet", "indexed")]
    meta = pq.ParquetFile(data / "part-0.parquet").metadata
    assert all(meta.row_group(0).column(c).has_column_index for c in range(meta.num_columns))


def _lake_rows(first: int, n: int):
    import pyarrow as pa

    return pa.table({"p": [("a", "b")[i % 2] for i in range(first, first + n)],
                     "id": pa.array(range(first, first + n), pa.int64())})


def _sorted_rows(table) -> list[tuple]:
    return sorted(zip(*(table.column(c).to_pylist() for c in ("p", "id"))))


@pytest.mark.spark
def test_dag_runs_the_real_job_on_lake_tables(airflow_python, tmp_path):
    """delta_table and iceberg_table params: the operator's real job commits a new Delta version
    and a new Iceberg snapshot of indexed copies, and both tables read back the same rows."""
    deltalake = pytest.importorskip("deltalake")
    pytest.importorskip("pyiceberg")
    import pyarrow.parquet as pq
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

    reports = tmp_path / "reports"
    runs = run_e2e(airflow_python, tmp_path / "work", [
        dict(delta_table=delta_root, in_place=True, commit_batch_files=1, report_prefix=str(reports / "delta")),
        dict(iceberg_table="lake.db.t", in_place=True, report_prefix=str(reports / "iceberg")),
    ], {f"PYICEBERG_CATALOG__LAKE__{k.upper()}": v for k, v in settings.items()})
    assert [r["outcome"] for r in runs] == ["ok", "ok"], runs

    delta_after = deltalake.DeltaTable(delta_root)
    ours = list(range(delta_before.version() + 1, delta_before.version() + 1 + files))  # a commit per file
    assert delta_after.version() == ours[-1]
    assert all(".pageindex-" in uri for uri in delta_after.file_uris())
    assert all(h["pageindex"]["version"] for h in delta_after.history(files))
    assert _sorted_rows(delta_after.to_pyarrow_table()) == delta_rows
    report = pq.read_table(reports / "delta" / "2025-06-01.parquet").to_pylist()
    assert sorted(r["table_version"] for r in report) == ours

    iceberg = catalog.load_table("db.t")
    snapshot = iceberg.current_snapshot()
    assert snapshot.snapshot_id != iceberg_before and snapshot.summary["pageindex"]
    assert all(".pageindex-" in task.file.file_path for task in iceberg.scan().plan_files())
    assert _sorted_rows(iceberg.scan().to_arrow()) == iceberg_rows
    assert _sorted_rows(iceberg.scan(snapshot_id=iceberg_before).to_arrow()) == iceberg_rows
    report = pq.read_table(reports / "iceberg" / "2025-06-01.parquet").to_pylist()
    assert {r["table_version"] for r in report} == {snapshot.snapshot_id}
