"""The Spark job on lakes as they are: table roots refused for --output (and in place) with the
ways that do index them, --copy-unchanged's complete mirror, records that name only what was
written, bloom filters on evolved schemas, the bloom flags' usage errors, and a run's stderr free
of pyspark's pandas warning."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pageindex.job.spark import main
from tests.helpers import lakes
from tests.helpers.paths import REPO_ROOT
from tests.helpers.report_parts import report_records


def run_job(spark, *argv) -> int:
    return main([str(a) for a in argv], spark=spark)


def report(path: Path) -> dict[str, dict]:
    return {Path(r["path"]).as_posix(): r for r in report_records(path)}


# ---------------------------------------------------------------- table roots

TABLES = {
    "delta": (lambda tmp: lakes.delta_with_delete(tmp / "events"), "a Delta table",
              "pageindex-job --input TABLE_ROOT --in-place"),
    "iceberg": (lambda tmp: lakes.iceberg_with_delete(tmp / "warehouse"), "an Iceberg table",
                "pageindex-job --iceberg-table CATALOG.NAMESPACE.TABLE --in-place"),
}


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_output_on_a_table_root_is_refused(spark, tmp_path, capsys, kind):
    """A mirror of a table's directory would bring back the rows a DELETE removed and leave out
    the log: refused (exit 2) for the root and for a directory holding it; nothing written."""
    make, article, way = TABLES[kind]
    root = make(tmp_path)
    before = lakes.snapshot(root)
    out = tmp_path / "mirror"
    for target in (root, root.parent):
        capsys.readouterr()
        assert run_job(spark, "--input", target, "--output", out, "--copy-unchanged") == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        assert f"{root} is (or holds) {article}" in err and way in err, err
        assert not out.exists()
    assert lakes.snapshot(root) == before


def test_in_place_refusal_of_an_iceberg_root_names_its_catalog_way(spark, tmp_path, capsys):
    root = lakes.iceberg_with_delete(tmp_path / "warehouse")
    before = lakes.snapshot(root)
    assert run_job(spark, "--input", root, "--in-place") == 2
    err = capsys.readouterr().err
    assert "an Iceberg table" in err and "--iceberg-table CATALOG.NAMESPACE.TABLE" in err
    assert "--output" not in err, err
    assert lakes.snapshot(root) == before


def test_in_place_on_a_delta_root_gives_the_current_snapshot(spark, tmp_path):
    """The supported way: copies committed to the log; the table still reads its current rows
    (not the DELETE's removed file) and every file it now lists is indexed."""
    from deltalake import DeltaTable

    root = lakes.delta_with_delete(tmp_path / "events")
    expected = lakes.delta_ids(root)
    assert expected == list(range(500, 2 * lakes.ROWS))
    assert run_job(spark, "--input", root, "--in-place") == 0
    assert lakes.delta_ids(root) == expected
    for uri in DeltaTable(str(root)).file_uris():
        assert pq.ParquetFile(uri).metadata.row_group(0).column(0).has_column_index, uri


# ---------------------------------------------------------------- --copy-unchanged, truthful records

def test_copy_unchanged_writes_a_complete_mirror(spark, tmp_path):
    root = tmp_path / "lake"
    layout = lakes.mixed_tree(root)
    before = lakes.snapshot(root)
    out, path = tmp_path / "mirror", tmp_path / "r.jsonl"
    assert run_job(spark, "--input", root, "--output", out, "--copy-unchanged", "--report", path) == 0
    lakes.check_mirror(root, out, layout, before, report(path))


def test_without_copy_unchanged_records_name_only_what_was_written(spark, tmp_path):
    root = tmp_path / "lake"
    layout = lakes.mixed_tree(root)
    out, path = tmp_path / "mirror", tmp_path / "r.jsonl"
    assert run_job(spark, "--input", root, "--output", out, "--report", path) == 0
    written = {rel for rel, what in layout.items() if what == "index"}
    assert set(lakes.snapshot(out)) == written
    recs = report(path)
    assert recs[(root / "day=2/c.parquet").as_posix()]["status"] == "already_indexed"
    for rel in layout:
        record = recs[(root / rel).as_posix()]
        expected = str(out / rel) if rel in written else None
        assert record["output"] == expected, record
        assert record["bytes_out"] == ((out / rel).stat().st_size if rel in written else 0)


# ---------------------------------------------------------------- bloom filters

def test_bloom_filter_on_an_evolved_lake(spark, tmp_path, capsys):
    """Older files lack b and lst: indexed without them, each with a note in the report; the
    newer get filters on b and lst's elements (lst named by its own name), as DuckDB reads them."""
    root = tmp_path / "lake"
    layout = lakes.evolved_lake(root)
    path = tmp_path / "r.jsonl"
    assert run_job(spark, "--input", root, "--in-place", "--bloom-filter", "b,lst", "--report", path) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    assert "2  bloom filter: column b not in this file" in out, out  # the summary counts the notes
    recs = report(path)
    for rel, new in layout.items():
        record = recs[(root / rel).as_posix()]
        assert record["status"] == "indexed", record
        if new:
            assert record["notes"] == [] and record["bloom_filters"] == 4
            assert lakes.bloom_columns(root / rel) == {"id": 0, "flag": 0, "b": 2, "lst, list, element": 2}
        else:
            assert record["notes"] == ["bloom filter: column b not in this file",
                                       "bloom filter: column lst not in this file"]
            assert set(lakes.bloom_columns(root / rel).values()) == {0}
    parquet_report = tmp_path / "r.parquet"
    assert run_job(spark, "--input", root, "--in-place", "--force", "--bloom-filter", "flag",
                   "--report", parquet_report) == 0
    notes = {Path(p).as_posix(): n for p, n in
             zip(*pq.read_table(parquet_report, columns=["path", "notes"]).to_pydict().values())}
    assert all("column flag is BOOLEAN, which has no bloom filter" in str(n) for n in notes.values()), notes


@pytest.mark.parametrize("flags", [["--bloom-fpp", "0.1"], ["--bloom-max-bytes", "4096"]])
def test_bloom_tuning_without_a_filter_is_a_usage_error(tmp_path, capsys, flags):
    """Refused before Spark starts (no session is given, none is created)."""
    path = lakes.write(tmp_path / "f.parquet", lakes.ids(0))
    before = path.read_bytes()
    assert main(["--input", str(path), "--in-place", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{flags[0]} tunes bloom filters" in err, err
    assert path.read_bytes() == before


# ---------------------------------------------------------------- messages

@pytest.mark.spark
def test_a_run_prints_no_pandas_warning(tmp_path):
    """pyspark warns on import that pandas 3 is not fully supported; the job starts its own Spark
    without passing that on (a fresh process: the test session's Spark is already started)."""
    path = lakes.write(tmp_path / "f.parquet", lakes.ids(0))
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYSPARK_PYTHON=sys.executable)
    proc = subprocess.run([sys.executable, "-c", "import sys; from pageindex.job.spark import main; "
                           "sys.exit(main(sys.argv[1:], master='local[1]'))",
                           "--input", str(path), "--in-place"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    assert pq.ParquetFile(path).metadata.row_group(0).column(0).has_column_index
    assert "Warning" not in proc.stderr and "pandas" not in proc.stderr, proc.stderr
