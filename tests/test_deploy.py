"""pageindex-deploy in a checkout: the kit written out byte for byte, other content refused
unless --overwrite (tests/system/test_package.py runs it from an installed wheel)."""
from __future__ import annotations

import os

from pageindex.deploy import KIT, main
from tests.helpers.paths import REPO_ROOT


def test_writes_the_kit_as_the_repository_lays_it_out(tmp_path, capsys):
    assert main([str(tmp_path)]) == 0
    for rel in KIT:
        assert (tmp_path / rel).read_bytes() == (REPO_ROOT / rel).read_bytes(), rel
    assert os.access(tmp_path / "deploy" / "spark-submit.sh", os.X_OK)
    assert not os.access(tmp_path / "jobs" / "retrofit_job.py", os.X_OK)
    sources = sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "pageindex").rglob("*") if p.is_file())
    expected = sorted(p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "pageindex").rglob("*")
                      if p.is_file() and (p.suffix == ".py" or p.name == "py.typed") and "__pycache__" not in p.parts)
    assert sources == expected
    assert "deploy/spark-submit.sh" in capsys.readouterr().out


def test_refuses_other_content_unless_overwrite(tmp_path, capsys):
    assert main([str(tmp_path)]) == 0
    assert main([str(tmp_path)]) == 0  # the same bytes again: nothing to refuse
    dag = tmp_path / "deploy" / "airflow" / "pageindex_backfill_dag.py"
    dag.write_text("# local edit\n")
    capsys.readouterr()
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pageindex-deploy: error: ") and str(dag) in err and err.count("\n") == 1
    assert dag.read_text() == "# local edit\n"  # nothing written
    assert main([str(tmp_path), "--overwrite"]) == 0
    assert dag.read_bytes() == (REPO_ROOT / "deploy" / "airflow" / "pageindex_backfill_dag.py").read_bytes()
