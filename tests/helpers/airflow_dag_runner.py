"""Runs deploy/airflow's DAGs with Airflow's own `dag.test()`, inside .venv-airflow (not .venv).

argv: a JSON spec file, an output JSON file. The spec: {"runs": [{"dag_id", "run_after" (ISO),
"conf" (or null), "variables" ({name: value}, set for that run only)}]}. Each run has no logical
date. A run whose task waits for a retry stops there (dag.test would sleep through the delay) and
is reported as it stands. The output: the DAGs' import errors, an inspection of the DAGs and, per
run, its id, logical date and every task instance's state and try number.
"""
from __future__ import annotations

import json
import logging
import os
import sys
from datetime import datetime


class Waiting(Exception):
    """dag.test found only tasks it must wait for (up_for_retry): the run stops here."""


class StopOnWait(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if str(record.msg).startswith("No tasks to run"):
            raise Waiting(record.getMessage())
        return True


def inspect(bag) -> dict:
    from airflow.serialization.serialized_objects import DagSerialization

    out = {}
    for dag_id, dag in sorted(bag.dags.items()):
        tasks = {}
        for task in dag.tasks:
            retry_delay = getattr(task, "retry_delay", None)
            tasks[task.task_id] = {
                "type": type(task).__name__, "retries": task.retries,
                "retry_delay_s": retry_delay.total_seconds() if retry_delay else None,
                "retry_exponential_backoff": float(task.retry_exponential_backoff),
                "max_retry_delay_s": task.max_retry_delay.total_seconds() if task.max_retry_delay else None,
                "pool": task.pool, "queue": task.queue, "priority_weight": task.priority_weight,
                "is_mapped": type(task).__name__ == "MappedOperator",
            }
        back = DagSerialization.from_dict(json.loads(json.dumps(DagSerialization.to_dict(dag))))
        out[dag_id] = {"tasks": tasks, "max_active_runs": dag.max_active_runs, "catchup": dag.catchup,
                       "params": dict(dag.params.dump()), "doc_md": dag.doc_md,
                       "serialized_task_ids": sorted(back.task_ids)}
    return out


def run(bag, spec: dict) -> dict:
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    dag = bag.get_dag(spec["dag_id"])
    run_after = datetime.fromisoformat(spec["run_after"])
    names = [f"AIRFLOW_VAR_{name.upper()}" for name in spec.get("variables", {})]
    for name, value in zip(names, spec.get("variables", {}).values()):
        os.environ[name] = value if isinstance(value, str) else json.dumps(value)
    waited = None
    try:
        dag.test(run_after=run_after, logical_date=None, run_conf=spec.get("conf"))
    except Waiting as exc:
        waited = str(exc)
    finally:
        for name in names:
            del os.environ[name]
    with create_session() as session:
        dag_run = session.query(DagRun).filter_by(dag_id=dag.dag_id, run_after=run_after).one()
        tis = session.query(TaskInstance).filter_by(dag_id=dag.dag_id, run_id=dag_run.run_id).all()
        return {
            "run_id": dag_run.run_id, "state": str(dag_run.state), "waited": waited,
            "logical_date": dag_run.logical_date.isoformat() if dag_run.logical_date else None,
            "tasks": sorted(({"task_id": ti.task_id, "map_index": ti.map_index, "state": str(ti.state),
                              "try_number": ti.try_number} for ti in tis),
                            key=lambda t: (t["task_id"], t["map_index"])),
        }


def main() -> None:
    spec_path, out_path = sys.argv[1], sys.argv[2]
    with open(spec_path) as fh:
        spec = json.load(fh)
    logging.getLogger("airflow.sdk.definitions.dag").addFilter(StopOnWait())

    import airflow
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=os.environ["DAG_DIR"])
    result = {"airflow_version": airflow.__version__,
              "import_errors": {str(k): str(v) for k, v in bag.import_errors.items()},
              "dags": inspect(bag), "runs": []}
    for one in spec.get("runs", []):
        result["runs"].append(run(bag, one))
        print(f"RUN DONE {json.dumps(result['runs'][-1])}", flush=True)
    with open(out_path, "w") as fh:
        json.dump(result, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
