"""The Airflow DAG's choice of what executors get, without Airflow: the packed environment on
--archives with its python in the conf and no zip, or the zip (tests/system/test_airflow_dag.py
runs the same through Airflow and a stand-in spark-submit)."""
from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tests.helpers.paths import REPO_ROOT

NAMES = {"ENVIRONMENT_ALIAS", "Shipment", "shipment"}


def _dag_names() -> dict[str, Any]:
    """The DAG module's shipment code compiled alone from its source (the module imports Airflow)."""
    source = (REPO_ROOT / "deploy" / "airflow" / "pageindex_backfill_dag.py").read_text()
    nodes = [n for n in ast.parse(source).body
             if (isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in NAMES)
             or (isinstance(n, ast.Assign) and {getattr(t, "id", None) for t in n.targets} & NAMES)]
    assert len(nodes) == len(NAMES)
    scope: dict[str, Any] = {"dataclass": dataclass, "Mapping": Mapping, "__name__": __name__}
    exec(compile(ast.Module(body=nodes, type_ignores=[]), "pageindex_backfill_dag.py", "exec"), scope)
    return scope


SHIPMENT = _dag_names()["shipment"]
ZIP = "s3://b/pageindex.zip"


def test_environment_goes_on_archives_with_its_python_and_no_zip():
    got = SHIPMENT("s3://b/pageindex-env-ab12.tar.gz#environment", ZIP, {"spark.executor.memory": "4g"})
    assert (got.archives, got.py_files) == ("s3://b/pageindex-env-ab12.tar.gz#environment", None)
    assert got.conf == {"spark.executor.memory": "4g", "spark.pyspark.python": "./environment/bin/python"}


def test_alias_defaults_to_environment_and_names_the_python():
    assert SHIPMENT(" /opt/env.tar.gz ", ZIP, {}).archives == "/opt/env.tar.gz#environment"
    other = SHIPMENT("/opt/env.tar.gz#pyenv,/opt/data.zip#data", ZIP, {})
    assert other.archives == "/opt/env.tar.gz#pyenv,/opt/data.zip#data"
    assert other.conf == {"spark.pyspark.python": "./pyenv/bin/python"}


def test_a_python_the_user_names_wins():
    conf = {"spark.pyspark.python": "/opt/py/bin/python3"}
    got = SHIPMENT("/opt/env.tar.gz#environment", ZIP, conf)
    assert got.conf == conf and got.py_files is None


def test_without_environment_the_zip_and_the_conf_as_given():
    got = SHIPMENT("  ", ZIP, {"spark.executor.memory": "4g"})
    assert (got.archives, got.py_files, got.conf) == (None, ZIP, {"spark.executor.memory": "4g"})
    assert SHIPMENT("", "", {}).py_files is None  # nothing shipped: pageindex installed on the nodes
