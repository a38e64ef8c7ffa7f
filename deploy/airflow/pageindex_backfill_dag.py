"""pageindex on Airflow 3: give every Parquet file of a source a page index with the Spark job.

Two DAGs: `pageindex_backfill` runs the job once over one source (input paths, a catalog table, a
Delta table root or an Iceberg table); `pageindex_backfill_tables` runs it once per entry of a list
of sources (dynamic task mapping), each a task of its own with its own report, so one source's
failure leaves the others running. Both run `jobs/retrofit_job.py` with SparkSubmitOperator
(apache-airflow-providers-apache-spark).

Configuration, in the order a value wins:
  1. the params of a manual trigger (`dag_run.conf`);
  2. the Airflow Variable `pageindex_backfill_params` (`pageindex_backfill_tables_params` for the
     tables DAG): a JSON object of param values, read when the task runs, so scheduled runs follow
     it without the DAG being parsed again;
  3. the params' defaults, some from the environment of the dag processor (PAGEINDEX_BACKFILL_TABLE,
     PAGEINDEX_BACKFILL_INPUTS (whitespace-separated), PAGEINDEX_BACKFILL_DELTA_TABLE,
     PAGEINDEX_BACKFILL_ICEBERG_TABLE).
  Variables `pageindex_job_script`, `pageindex_archives`, `pageindex_py_files`,
  `pageindex_report_prefix` (run time; defaults PAGEINDEX_JOB_SCRIPT, PAGEINDEX_ARCHIVES,
  PAGEINDEX_PY_FILES, PAGEINDEX_REPORT_PREFIX). The Spark connection
  is PAGEINDEX_SPARK_CONN_ID (default spark_default). Airflow's pool, queue and priority weight are
  fixed when the scheduler queues a task, before any param is read: PAGEINDEX_POOL, PAGEINDEX_QUEUE,
  PAGEINDEX_PRIORITY_WEIGHT (dag processor environment) set them.

What executors get: the packed environment of deploy/pack_env.py when pageindex_archives names it
(`PATH#environment`; executors run its Python, with the compiled kernels), else pageindex.zip on
--py-files (executors then index by the Arrow fallback, 2-3x the CPU; the job warns).

Job exit codes: 0 success; 1 a failure a retry may mend: the task is retried; 2 usage or
configuration, 3 files no retry can mend: the task fails at once, the job's summary in its message.
"""
from __future__ import annotations

import copy
import json
import os
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

try:  # Airflow 3
    from airflow.sdk import DAG, Param, Variable, task
    from airflow.sdk.exceptions import AirflowException, AirflowFailException
except ImportError:  # Airflow 2
    from airflow import DAG
    from airflow.decorators import task
    from airflow.exceptions import AirflowException, AirflowFailException
    from airflow.models import Variable
    from airflow.models.param import Param

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

DAG_ID = "pageindex_backfill"
TABLES_DAG_ID = "pageindex_backfill_tables"
PARAMS_VARIABLE = "pageindex_backfill_params"
TABLES_PARAMS_VARIABLE = "pageindex_backfill_tables_params"

DEFAULT_JOB_SCRIPT = os.environ.get("PAGEINDEX_JOB_SCRIPT", "/opt/pageindex/jobs/retrofit_job.py")
DEFAULT_PY_FILES = os.environ.get("PAGEINDEX_PY_FILES", "/opt/pageindex/deploy/build/pageindex.zip")
DEFAULT_ARCHIVES = os.environ.get("PAGEINDEX_ARCHIVES", "")
DEFAULT_REPORT_PREFIX = os.environ.get("PAGEINDEX_REPORT_PREFIX", "s3://bucket/pageindex/reports")
SPARK_CONN_ID = os.environ.get("PAGEINDEX_SPARK_CONN_ID", "spark_default")
# Scheduling settings: read where the DAG is parsed, since the scheduler uses them before a task runs.
SCHEDULING = {key: value for key, value in (
    ("pool", os.environ.get("PAGEINDEX_POOL")),
    ("queue", os.environ.get("PAGEINDEX_QUEUE")),
    ("priority_weight", int(os.environ["PAGEINDEX_PRIORITY_WEIGHT"])
     if os.environ.get("PAGEINDEX_PRIORITY_WEIGHT") else None),
) if value is not None}

# A run's source: the first of these its params name; "no source" is each one's empty value.
SOURCES = {"input_paths": [], "table": None, "delta_table": None, "iceberg_table": None}
# What the job's exit code means for the task (the job's --help lists the same codes).
NOT_RETRIED = {
    2: "usage or configuration error (exit 2): nothing was changed, a retry cannot help",
    3: "files failed for reasons no retry can mend (exit 3): see the report {report}",
}

SUMMARY_LINES = 300


def _jinja_str(value: str) -> str:
    """A Python/Jinja string literal for `value` (JSON string syntax is valid in both)."""
    return json.dumps(value)


# Rendered by Airflow when the task runs: the Variable if set, else the environment default above.
JOB_SCRIPT = "{{ var.value.get('pageindex_job_script', " + _jinja_str(DEFAULT_JOB_SCRIPT) + ") }}"


def _source_params() -> dict[str, Param]:
    return {
        "input_paths": Param(os.environ.get("PAGEINDEX_BACKFILL_INPUTS", "").split(), type="array",
                             items={"type": "string"},
                             description="Files, directories (recursive), globs; local, s3://, s3a://"),
        "table": Param(os.environ.get("PAGEINDEX_BACKFILL_TABLE") or None, type=["null", "string"],
                       description="DB.TABLE from the Spark catalog, instead of input_paths"),
        "delta_table": Param(os.environ.get("PAGEINDEX_BACKFILL_DELTA_TABLE") or None, type=["null", "string"],
                             description="A Delta table root: indexed copies committed to its log"),
        "iceberg_table": Param(os.environ.get("PAGEINDEX_BACKFILL_ICEBERG_TABLE") or None,
                               type=["null", "string"],
                               description="CATALOG.NAMESPACE.TABLE (pyiceberg catalog): copies committed "
                                           "as a new snapshot"),
    }


def _run_params() -> dict[str, Param]:
    return {
        "in_place": Param(True, type="boolean", description="Replace each file atomically"),
        "output_dir": Param(None, type=["null", "string"], description="Write indexed copies here instead"),
        "copy_unchanged": Param(False, type="boolean", description="With output_dir: copy files needing no change"),
        "commit_batch_files": Param(None, type=["null", "integer"], minimum=1,
                                    description="Delta/Iceberg tables: files replaced per commit (job default 1000)"),
        "max_failures": Param(0, type="integer", minimum=0,
                              description="The job fails when more files than this fail"),
        "target_task_bytes": Param("256m", type="string", pattern=r"^[0-9]+[kKmMgG]?$",
                                   description="Bytes of input per Spark task"),
        "dry_run": Param(False, type="boolean", description="Compute and report, write nothing"),
        "force": Param(False, type="boolean", description="Rebuild page indexes that already exist"),
        "s3_endpoint_url": Param(None, type=["null", "string"], description="S3-compatible endpoint"),
        "report_prefix": Param(None, type=["null", "string"],
                               description="Overrides Variable pageindex_report_prefix for this run"),
        "state": Param(None, type=["null", "string"],
                       description="The run state (--state), one per source: files listed as it "
                                   "recorded them are not opened"),
        "extra_args": Param([], type="array", items={"type": "string"},
                            description="Further job arguments, appended verbatim"),
        "spark_conf": Param({}, type="object", additionalProperties={"type": "string"},
                            description="Spark properties, passed to spark-submit as --conf KEY=VALUE"),
        "env_vars": Param({}, type="object", additionalProperties={"type": "string"},
                          description="Environment variables of the driver and the executors"),
        "yarn_queue": Param(None, type=["null", "string"], description="YARN queue (overrides the connection's)"),
    }


SINGLE_PARAMS = {**_source_params(), **_run_params()}
TABLES_PARAMS = {
    "targets": Param([], type="array", items={"type": "object"},
                     description='One task per entry: {"table": "db.t"}, {"input_paths": ["s3://b/t/"]}, '
                                 '{"delta_table": ROOT} or {"iceberg_table": NAME}, plus any other param '
                                 "to override for that entry"),
    **_run_params(),
}


def checked(declared: Mapping[str, Param], values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """`values` validated against the declared params; ValueError names `where` and the key."""
    out = {}
    for key, value in values.items():
        if key not in declared:
            raise ValueError(f"{where}: unknown param {key!r} (known: {', '.join(sorted(declared))})")
        try:
            out[key] = copy.copy(declared[key]).resolve(value)
        except Exception as err:  # noqa: BLE001 - Airflow's ParamValidationError across versions
            raise ValueError(f"{where}: param {key!r}: {err}") from None
    return out


def effective_params(params: Mapping[str, Any], run_conf: Mapping[str, Any] | None,
                     variable: Mapping[str, Any], declared: Mapping[str, Param], variable_name: str
                     ) -> dict[str, Any]:
    """The run's params: trigger conf over the Variable's values over the defaults. `params` is
    Airflow's merge of defaults and conf, so a Variable value applies where conf left a key out.
    A layer that names a source replaces the lower layers' sources, not adds to them."""
    if not isinstance(variable, Mapping):
        raise ValueError(f"Variable {variable_name} must hold a JSON object")
    given = run_conf or {}
    from_variable = checked(declared, {k: v for k, v in variable.items() if k not in given},
                            f"Variable {variable_name}")
    merged = {**dict(params), **from_variable}
    for layer in (given, from_variable):
        if any(name in layer for name in SOURCES):
            merged.update({name: layer.get(name, empty) for name, empty in SOURCES.items() if name in declared})
            break
    return merged


def for_target(params: Mapping[str, Any], target: Mapping[str, Any]) -> dict[str, Any]:
    """One entry of the tables DAG's targets applied over the run's params: its own source only."""
    if not isinstance(target, Mapping):
        raise ValueError(f"a target must be a JSON object, not {target!r}")
    base = {k: v for k, v in params.items() if k != "targets"}
    base.update(SOURCES)  # the defaults' sources do not apply to a target
    return {**base, **checked(SINGLE_PARAMS, target, f"target {json.dumps(target, sort_keys=True)}")}


def params_to_args(params: Mapping[str, Any]) -> list[str]:
    """The job arguments the params give, the report aside.

    Raises ValueError for an inconsistent combination (the task then fails without retries, as the
    job's own exit code 2 would).
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
            f"(for scheduled runs: in the Variable {PARAMS_VARIABLE})")
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
    if params.get("state"):
        if given[0] in ("delta_table", "iceberg_table"):
            raise ValueError(f"state applies to input_paths and table, not {given[0]} (its log says "
                             "which files are new)")
        args += ["--state", str(params["state"])]
    args += ["--max-failures", str(params.get("max_failures", 0)),
             "--target-task-bytes", str(params.get("target_task_bytes", "256m")),
             "--progress-seconds", "60"]
    args += [str(a) for a in (params.get("extra_args") or [])]
    return args


def _named(flag: str, value: Any, *more: str) -> list[str] | None:
    """`flag value more...` for a non-blank string param, else None."""
    name = (value or "").strip()
    return [flag, name, *more] if name else None


def safe_name(text: str) -> str:
    """`text` with every run of characters outside [A-Za-z0-9._-] as one '_': a run id such as
    manual__2026-06-01T02:00:00+00:00 becomes a file name Hadoop's paths and S3 keys take as is."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")


def report_path(prefix: str, run_id: str, run_after: datetime, try_number: int, map_index: int = -1) -> str:
    """Where one try of a task writes its report: a file of its own, so retries and reruns never
    overwrite one another, under a Hive-style run_date= directory (the day the run was due to
    start; a run may have no logical date), so an engine reads the prefix as one table."""
    mapped = f"-map{map_index}" if map_index >= 0 else ""
    return (f"{prefix.rstrip('/')}/run_date={run_after:%Y-%m-%d}/"
            f"{safe_name(run_id)}{mapped}-try{try_number}.parquet")


def spark_conf(params: Mapping[str, Any]) -> dict[str, str]:
    """spark-submit's --conf: the spark_conf param, and env_vars for the executors (the driver gets
    them from the operator, whatever the deploy mode)."""
    conf = {str(k): str(v) for k, v in (params.get("spark_conf") or {}).items()}
    for name, value in (params.get("env_vars") or {}).items():
        conf.setdefault(f"spark.executorEnv.{name}", str(value))
    return conf


# The alias a packed environment gets when pageindex_archives names none (as deploy/spark-submit.sh ships it).
ENVIRONMENT_ALIAS = "environment"


@dataclass(frozen=True)
class Shipment:
    """What spark-submit ships for the executors: --archives, --py-files and the Spark conf."""

    archives: str | None
    py_files: str | None
    conf: dict[str, str]


def shipment(archives: str, py_files: str, conf: Mapping[str, str]) -> Shipment:
    """A packed environment when `archives` names one (its first entry, `PATH#ALIAS`, alias
    `environment` if none): executors run ./ALIAS/bin/python unless `conf` sets
    spark.pyspark.python, and no zip goes on --py-files, as it would come first on the workers'
    sys.path and hide the environment's compiled modules. Else `py_files` (the zip: the fallback)."""
    entries = [entry.strip() for entry in archives.split(",") if entry.strip()]
    if not entries:
        return Shipment(None, py_files.strip() or None, dict(conf))
    if "#" not in entries[0]:
        entries[0] += f"#{ENVIRONMENT_ALIAS}"
    alias = entries[0].rsplit("#", 1)[1]
    return Shipment(",".join(entries), None,
                    {**dict(conf), "spark.pyspark.python": conf.get("spark.pyspark.python", f"./{alias}/bin/python")})


def job_summary(lines: Any) -> str:
    """The job's own last words from spark-submit's output tail: from its summary's first line on,
    or else its error lines."""
    lines = [str(line) for line in (lines or ())]
    starts = [i for i, line in enumerate(lines) if re.match(r"pageindex job: \d+ files? in ", line)]
    if starts:
        return "\n".join(lines[starts[-1]:])
    return "\n".join(line for line in lines if "error" in line.lower()) or "(no summary in the output)"


class PageindexSparkSubmitOperator(SparkSubmitOperator):
    """SparkSubmitOperator that builds the job's arguments, Spark conf and report path from the run's
    params when it runs, and fails without retries where a retry cannot help.

    `target`: a source of the tables DAG (mapped with `.expand(target=...)`), applied over the params.
    """

    def __init__(self, *, target: dict[str, Any] | None = None, params_variable: str = PARAMS_VARIABLE,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.target = target
        self.params_variable = params_variable

    def execute(self, context: Any) -> Any:
        ti, dag_run = context["ti"], context["dag_run"]
        try:
            params = self.run_params(context)
            args = params_to_args(params)
        except ValueError as exc:
            raise AirflowFailException(f"invalid params: {exc}") from exc
        prefix = params.get("report_prefix") or self.report_prefix
        run_after = getattr(dag_run, "run_after", None) or dag_run.logical_date  # Airflow 2: no run_after
        report = report_path(prefix, dag_run.run_id, run_after, ti.try_number, ti.map_index)
        self.log.info("report of this try: %s", report)
        # Set from scratch on every execute: the operator object may serve several runs in one process.
        self.application_args = [*args, "--report", report]
        shipped = shipment(Variable.get("pageindex_archives", DEFAULT_ARCHIVES),
                           Variable.get("pageindex_py_files", DEFAULT_PY_FILES), spark_conf(params))
        self._archives, self.py_files, self.conf = shipped.archives, shipped.py_files, shipped.conf
        if shipped.py_files:  # nothing shipped when neither is set: the nodes have pageindex installed
            self.log.warning("executors get %s on --py-files: the compiled kernels cannot load from a zip, so "
                             "files are indexed by the Arrow fallback (2-3x the CPU); set the Variable "
                             "pageindex_archives to the packed environment (see docs/airflow.md)", shipped.py_files)
        self.env_vars = {str(k): str(v) for k, v in (params.get("env_vars") or {}).items()} or None
        self._yarn_queue = params.get("yarn_queue") or None
        self.name = f"pageindex-{safe_name(dag_run.run_id)}" + (f"-{ti.map_index}" if ti.map_index >= 0 else "")
        self._hook = self._get_hook()
        # spark-submit's output tail, for the job's summary in a failure's message (the hook keeps 20 lines)
        self._hook._last_submit_log_lines = deque(self._hook._last_submit_log_lines, maxlen=SUMMARY_LINES)
        try:
            return super().execute(context)
        except AirflowException as exc:
            if isinstance(exc, AirflowFailException):
                raise
            hook = self._hook
            code = getattr(getattr(hook, "_submit_sp", None), "returncode", None)
            if code in NOT_RETRIED:
                summary = job_summary(getattr(hook, "_last_submit_log_lines", ()))
                raise AirflowFailException(f"pageindex job: {NOT_RETRIED[code].format(report=report)}; "
                                           f"not retrying.\n{summary}") from exc
            raise

    @property
    def report_prefix(self) -> str:
        """The Variable pageindex_report_prefix when the task runs, else the environment default."""
        return Variable.get("pageindex_report_prefix", DEFAULT_REPORT_PREFIX)

    def run_params(self, context: Any) -> dict[str, Any]:
        dag_run = context["dag_run"]
        declared = TABLES_PARAMS if self.params_variable == TABLES_PARAMS_VARIABLE else SINGLE_PARAMS
        variable = Variable.get(self.params_variable, {}, deserialize_json=True)
        params = effective_params(context["params"], dag_run.conf, variable, declared, self.params_variable)
        return for_target(params, self.target) if self.target is not None else params


DOC_MD = """
### pageindex backfill

Runs the pageindex Spark job (`jobs/retrofit_job.py`), appending Parquet page indexes
(ColumnIndex/OffsetIndex) to files that lack them, without rewriting data pages. Executors run the
packed environment the Variable `pageindex_archives` names (`PATH#environment`, built by
`deploy/pack_env.py`), with the compiled kernels; without it they get `pageindex.zip` on `--py-files`
and index by the Arrow fallback (2-3x the CPU). Each try writes its own report:
`<report prefix>/run_date=<YYYY-MM-DD>/<run id>[-map<i>]-try<n>.parquet`.

| job exit | meaning | the task |
| --- | --- | --- |
| 0 | every file ended well (or failures within `max_failures`) | success |
| 1 | a failure a retry may mend (storage, throttling, lost executors, Spark) | fails, **retried** (2 retries, 10 min doubling, at most 1 h) |
| 2 | usage or configuration (nothing was changed) | fails **at once** |
| 3 | files no retry can mend (malformed, unsupported, encrypted) | fails **at once**, summary in the message |

In cluster deploy mode spark-submit does not pass the job's code through: every failure is retried.
Scheduled runs take their params from the Variable `pageindex_backfill_params`
(`pageindex_backfill_tables_params` for the tables DAG), a JSON object; a trigger's params win.
"""

DEFAULT_ARGS = {
    "owner": "data-platform",
    "retries": 2,
    "retry_delay": timedelta(minutes=10),
    # Airflow 3.x: a multiplier (2.0 doubles the delay; True would mean 1.0, i.e. no backoff).
    "retry_exponential_backoff": 2.0,
    "max_retry_delay": timedelta(hours=1),
    "execution_timeout": timedelta(hours=6),
    **SCHEDULING,
}
DAG_SETTINGS: dict[str, Any] = {
    "doc_md": DOC_MD,
    "schedule": "0 2 * * *",
    "start_date": datetime(2025, 1, 1, tzinfo=timezone.utc),
    "catchup": False,
    "max_active_runs": 1,
    "dagrun_timeout": timedelta(hours=20),
    "default_args": DEFAULT_ARGS,
}
OPERATOR_SETTINGS: dict[str, Any] = {"conn_id": SPARK_CONN_ID, "application": JOB_SCRIPT}


with DAG(dag_id=DAG_ID, description="Append Parquet page indexes to files that lack them (pageindex Spark job)",
         tags=["pageindex", "parquet", "spark", "backfill"], params=SINGLE_PARAMS, **DAG_SETTINGS) as dag:
    retrofit = PageindexSparkSubmitOperator(task_id="retrofit", **OPERATOR_SETTINGS)


with DAG(dag_id=TABLES_DAG_ID, description="pageindex job over many tables or roots, one task each",
         tags=["pageindex", "parquet", "spark", "backfill"], params=TABLES_PARAMS, **DAG_SETTINGS) as tables_dag:

    @task(retries=0)
    def targets(params: dict[str, Any] | None = None, dag_run: Any = None) -> list[dict[str, Any]]:
        """The list to map over: the run's targets, each checked (a bad entry fails the run here)."""
        try:
            merged = effective_params(params or {}, dag_run.conf, Variable.get(
                TABLES_PARAMS_VARIABLE, {}, deserialize_json=True), TABLES_PARAMS, TABLES_PARAMS_VARIABLE)
            for target in merged["targets"]:
                params_to_args(for_target(merged, target))
        except ValueError as exc:
            raise AirflowFailException(f"invalid params: {exc}") from exc
        return list(merged["targets"])

    PageindexSparkSubmitOperator.partial(
        task_id="retrofit", params_variable=TABLES_PARAMS_VARIABLE, **OPERATOR_SETTINGS,
        # spark-submits of one run at once (PAGEINDEX_TABLES_PARALLEL, default 4); the pool caps all runs
        max_active_tis_per_dagrun=int(os.environ.get("PAGEINDEX_TABLES_PARALLEL", "4")),
    ).expand(target=targets())
