"""The job started from a directory that holds a folder named `pageindex` (the parent of a clone).

Python workers run `python -m pyspark.daemon` in the driver's working directory, which `-m` puts
first on sys.path: the clone folder became a namespace package `pageindex` with no attributes.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers.report_parts import report_records

TREE = Path(__file__).resolve().parents[2] / "pageindex"

# Maps `pageindex` to this tree as an editable install's meta-path finder does: after the
# path-based finder, so a namespace package found on sys.path wins over it, as in the bug.
FINDER = f"""
import sys
from importlib.machinery import PathFinder
from importlib.util import spec_from_file_location

class _Tree:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name == "pageindex":
            return spec_from_file_location(name, {str(TREE / "__init__.py")!r},
                                           submodule_search_locations=[{str(TREE)!r}])
        return None

sys.meta_path.insert(sys.meta_path.index(PathFinder) + 1, _Tree)
"""

# The job as the console script runs it, then a probe on the job's own session's workers.
DRIVER = """
import json, sys
from pageindex.job.spark import main

def probe(_):
    from pageindex import __version__
    return __version__

rc = main(sys.argv[1:], master="local[1]")
from pyspark import SparkContext
print(json.dumps({"rc": rc, "workers": SparkContext.getOrCreate().parallelize([0], 1).map(probe).collect()}))
"""


@pytest.mark.spark
def test_job_from_the_parent_of_a_clone(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(FINDER))
    (tmp_path / "driver.py").write_text(DRIVER)
    cwd = tmp_path / "lake"
    (cwd / "pageindex" / "pageindex").mkdir(parents=True)
    for name in ("__init__.py", "version.py", "cli.py"):
        (cwd / "pageindex" / "pageindex" / name).write_text("")
    (cwd / "pageindex" / "pyproject.toml").write_text("")
    data = cwd / "data.parquet"
    pq.write_table(pa.table({"a": list(range(2000))}), data, data_page_size=512)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    env.update(PYTHONPATH=str(site), PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    run = subprocess.run([sys.executable, str(tmp_path / "driver.py"), "--input", str(data), "--in-place",
                          "--report", str(tmp_path / "report.json")],
                         cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    from pageindex.version import __version__

    assert out == {"rc": 0, "workers": [__version__]}
    [record] = report_records(tmp_path / "report.json")
    assert record["status"] == "indexed"
    assert pq.ParquetFile(data).metadata.row_group(0).column(0).has_column_index
