"""Nightly pageindex backfill: give every Parquet file under the configured inputs a page index.

Runs `jobs/retrofit_job.py` with SparkSubmitOperator (apache-airflow-providers-apache-spark).
Written for Airflow 3 (`airflow.sdk`); falls back to the Airflow 2 import paths.

Configuration (all optional; the defaults below apply when nothing is set):

  Airflow Variables (read when the task's templates are rendered, not at parse time):
    pageindex_job_script     path of jobs/retrofit_job.py on the machine that runs spark-submit
    pageindex_py_files       path of pageindex.zip (built by `deploy/spark-submit.sh --dry-build`)
    pageindex_report_prefix  where reports go; the run writes <prefix>/<ds>.parquet
  Environment of the dag processor and the workers (used as the defaults of the above and of the params):
    PAGEINDEX_JOB_SCRIPT, PAGEINDEX_PY_FILES, PAGEINDEX_REPORT_PREFIX,
    PAGEINDEX_SPARK_CONN_ID (Spark connection, default spark_default: its host is the master,
        e.g. yarn, local[*] or k8s://https://HOST:PORT, its extra may hold deploy-mode, queue, ...),
    PAGEINDEX_BACKFILL_TABLE (DB.TABLE), PAGEINDEX_BACKFILL_INPUTS (whitespace-separated paths),
    PAGEINDEX_BACKFILL_DELTA_TABLE (a Delta table root) or PAGEINDEX_BACKFILL_ICEBERG_TABLE
        (CATALOG.NAMESPACE.TABLE): what the scheduled nightly run processes.
  DAG params (override per manual trigger): see `params` below.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

try:  # Airflow 3
    from airflow.sdk import DAG, Param
except ImportError:  # Airflow 2
    from airflow import DAG
    from airflow.models.param import Param

try:
    from airflow.sdk.exceptions import AirflowException, AirflowFailException
except ImportError:
    from airflow.exceptions import AirflowException, AirflowFailException

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

DAG_ID = "pageindex_backfill"

DEFAULT_JOB_SCRIPT = os.environ.get("PAGEINDEX_JOB_SCRIPT", "/opt/pageindex/jobs/retrofit_job.py")
DEFAULT_PY_FILES = os.environ.get("PAGEINDEX_PY_FILES", "/opt/pageindex/deploy/build/pageindex.zip")
DEFAULT_REPORT_PREFIX = os.environ.get("PAGEINDEX_REPORT_PREFIX", "s3://bucket/pageindex/reports")
SPARK_CONN_ID = os.environ.get("PAGEINDEX_SPARK_CONN_ID", "spark_default")
DEFAULT_TABLE = os.environ.get("PAGEINDEX_BACKFILL_TABLE") or None
DEFAULT_INPUTS = os.environ.get("PAGEINDEX_BACKFILL_INPUTS", "").split()
DEFAULT_DELTA_TABLE = os.environ.get("PAGEINDEX_BACKFILL_DELTA_TABLE") or None
DEFAULT_ICEBERG_TABLE = os.environ.get("PAGEINDEX_BACKFILL_ICEBERG_TABLE") or None


def _jinja_str(value: str) -> str:
    """A Python/Jinja string literal for `value` (JSON string syntax is valid in both)."""
    return json.dumps(value)


# Rendered by Airflow at run time: Variable if set, else the environment default above.
JOB_SCRIPT = "{{ var.value.get('pageindex_job_script', " + _jinja_str(DEFAULT_JOB_SCRIPT) + ") }}"
PY_FILES = "{{ var.value.get('pageindex_py_files', " + _jinja_str(DEFAULT_PY_FILES) + ") }}"
REPORT_PATH = (
    "{{ (params.report_prefix or var.value.get('pageindex_report_prefix', "
    + _jinja_str(DEFAULT_REPORT_PREFIX)
    + ")).rstrip('/') }}/{{ ds }}.parquet"
)

# Arguments that do not depend on the shape of the params; each is one argv element, rendered by Jinja.
FIXED_ARGS = [
    "--report", REPORT_PATH,
    "--max-failures", "{{ params.max_failures }}",
    "--target-task-bytes", "{{ params.target_task_bytes }}",
    "--progress-seconds", "60",
]


def params_to_args(params: Mapping[str, Any]) -> list[str]:
    """The job arguments that vary in number with the params: the source, in-place or output, flags.

    Raises ValueError for an inconsistent combination (the operator turns that into a failure
    without retries, like the job's own exit code 2).
    """
    inputs = [str(p) for p in (params.get("input_paths") or []) if str(p).strip()]
    sources = {
        "input_paths": ["--input", *inputs] if inputs else None,
        "table": _named("--table", params.get("table")),
        # A lakehouse table gets a new version (Delta) or snapshot (Iceberg) naming indexed
        # copies of its files, so it is always in place: its files themselves never change.
        "delta_table": _named("--input", params.get("delta_table"), "--table-format", "delta"),
        "iceberg_table": _named("--iceberg-table", params.get("iceberg_table")),
    }
    given = [name for name, args in sources.items() if args]
    in_place = bool(params.get("in_place"))
    output = (params.get("output_dir") or "").strip()

    if len(given) > 1:
        raise ValueError(f"set one of input_paths, table, delta_table, iceberg_table, not {' and '.join(given)}")
    if not given:
        raise ValueError(
            "nothing to process: set the input_paths, table, delta_table or iceberg_table param "
            "(or the matching PAGEINDEX_BACKFILL_* variable for the scheduled runs)")
    if given[0] in ("delta_table", "iceberg_table") and (output or not in_place):
        raise ValueError(f"{given[0]} is retrofitted in place (through the table's log): "
                         "set in_place, not output_dir")
    if in_place and output:
        raise ValueError("set either in_place or output_dir, not both")
    if not in_place and not output:
        raise ValueError("set in_place to true or give an output_dir")

    args = sources[given[0]]
    args += ["--in-place"] if in_place else ["--output", output]
    if params.get("copy_unchanged"):
        if in_place:
            raise ValueError("copy_unchanged only applies with output_dir")
        args.append("--copy-unchanged")
    if params.get("commit_batch_files"):
        args += ["--commit-batch-files", str(params["commit_batch_files"])]
    if params.get("dry_run"):
        args.append("--dry-run")
    if params.get("force"):
        args.append("--force")
    if params.get("s3_endpoint_url"):
        args += ["--s3-endpoint-url", str(params["s3_endpoint_url"])]
    args += [str(a) for a in (params.get("extra_args") or [])]
    return args


def _named(flag: str, value: Any, *more: str) -> list[str] | None:
    """`flag value more...` for a non-blank string param, else None."""
    name = (value or "").strip()
    return [flag, name, *more] if name else None


class PageindexSparkSubmitOperator(SparkSubmitOperator):
    """SparkSubmitOperator that puts the param-dependent job arguments before `application_args`.

    A usage error (bad params, or spark-submit exiting 2 = the job's usage/configuration error in
    local/client deploy mode) fails the task without retries: retrying cannot fix it.
    """

    def execute(self, context: Any) -> Any:
        try:
            varying = params_to_args(context["params"])
        except ValueError as exc:
            raise AirflowFailException(f"invalid params: {exc}") from exc
        self.application_args = varying + [str(a) for a in (self.application_args or [])]
        try:
            return super().execute(context)
        except AirflowException as exc:
            if isinstance(exc, AirflowFailException):
                raise
            submit_process = getattr(getattr(self, "_hook", None), "_submit_sp", None)
            if getattr(submit_process, "returncode", None) == 2:
                raise AirflowFailException(
                    "pageindex job: usage/configuration error (exit 2); not retrying") from exc
            raise


DOC_MD = """
### pageindex nightly backfill

Runs the pageindex Spark job (`jobs/retrofit_job.py`, shipped with `pageindex.zip` via `--py-files`)
over the configured table or input paths, appending Parquet page indexes (ColumnIndex/OffsetIndex)
to files that lack them, without rewriting data pages. A per-file report is written to
`<report prefix>/<ds>.parquet` (Variable `pageindex_report_prefix`, or the `report_prefix` param).

**Exit codes of the job** (the task sees them directly with a local master or client deploy mode;
in cluster deploy mode spark-submit does not pass the code through, so every failure is retried):

| code | meaning | what the task does |
| --- | --- | --- |
| 0 | all files indexed, skipped (already indexed) or within `max_failures` | success |
| 1 | more files failed than `max_failures` allows | task fails and is **retried** (2 retries, 10 min delay with exponential backoff, at most 1 h) |
| 2 | usage/configuration error (bad arguments, unknown table, in-place on a Hudi table, ...) | task fails **without retry** |

Rerunning is safe: the job is idempotent and resumable. Files that already carry a page index
are skipped (unless `force`), each file is replaced atomically, so a retry or the next night's run
only does the work that is left. `max_active_runs=1` keeps two runs from working on the same table at once.

Params: `input_paths` (list) **or** `table` (`DB.TABLE`) **or** `delta_table` (a Delta table root)
**or** `iceberg_table` (`CATALOG.NAMESPACE.TABLE`, from the pyiceberg catalog configuration of the
machine running the driver); `in_place` (default true) **or** `output_dir` (Delta and Iceberg tables:
in place only, each batch of indexed copies is committed as a new table version or snapshot);
`commit_batch_files`; `max_failures`; `target_task_bytes`; `dry_run`; `force`; `copy_unchanged`;
`s3_endpoint_url`; `report_prefix`; `extra_args` (appended verbatim).
"""

with DAG(
    dag_id=DAG_ID,
    description="Append Parquet page indexes to files that lack them (pageindex Spark job)",
    doc_md=DOC_MD,
    schedule="0 2 * * *",
    start_date=datetime(2025, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(hours=20),
    tags=["pageindex", "parquet", "spark", "backfill"],
    default_args={
        "owner": "data-platform",
        "retries": 2,
        "retry_delay": timedelta(minutes=10),
        # Airflow 3.x: a multiplier (2.0 doubles the delay; True would mean 1.0, i.e. no backoff).
        "retry_exponential_backoff": 2.0,
        "max_retry_delay": timedelta(hours=1),
        "execution_timeout": timedelta(hours=6),
    },
    params={
        "input_paths": Param(DEFAULT_INPUTS, type="array", items={"type": "string"},
                             description="Files, directories (recursive), globs; local, s3://, s3a://"),
        "table": Param(DEFAULT_TABLE, type=["null", "string"], description="DB.TABLE instead of input_paths"),
        "delta_table": Param(DEFAULT_DELTA_TABLE, type=["null", "string"],
                             description="A Delta table root: indexed copies committed to its log"),
        "iceberg_table": Param(DEFAULT_ICEBERG_TABLE, type=["null", "string"],
                               description="CATALOG.NAMESPACE.TABLE (pyiceberg catalog): copies committed "
                                           "as a new snapshot"),
        "commit_batch_files": Param(None, type=["null", "integer"], minimum=1,
                                    description="Delta/Iceberg tables: files replaced per commit (job default 1000)"),
        "in_place": Param(True, type="boolean", description="Replace each file atomically"),
        "output_dir": Param(None, type=["null", "string"], description="Write indexed copies here instead"),
        "copy_unchanged": Param(False, type="boolean", description="With output_dir: copy files needing no change"),
        "max_failures": Param(0, type="integer", minimum=0,
                              description="The run fails (exit 1) when more files than this fail"),
        "target_task_bytes": Param("256m", type="string", pattern=r"^[0-9]+[kKmMgG]?$",
                                   description="Bytes of input per Spark task"),
        "dry_run": Param(False, type="boolean", description="Compute and report, write nothing"),
        "force": Param(False, type="boolean", description="Rebuild page indexes that already exist"),
        "s3_endpoint_url": Param(None, type=["null", "string"], description="S3-compatible endpoint"),
        "report_prefix": Param(None, type=["null", "string"],
                               description="Overrides Variable pageindex_report_prefix for this run"),
        "extra_args": Param([], type="array", items={"type": "string"},
                            description="Further job arguments, appended verbatim"),
    },
) as dag:
    retrofit = PageindexSparkSubmitOperator(
        task_id="retrofit",
        conn_id=SPARK_CONN_ID,
        application=JOB_SCRIPT,
        py_files=PY_FILES,
        name="pageindex-backfill-{{ ds }}",
        application_args=FIXED_ARGS,
    )
