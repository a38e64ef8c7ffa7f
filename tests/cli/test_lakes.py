"""`pageindex retrofit` on lakes as they are: table roots refused for --output (and in place) with
the ways that do index them, --copy-unchanged's complete mirror, records that name only what was
written, bloom filters on evolved schemas, and the bloom flags' usage errors."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.helpers import lakes
from tests.helpers.cli import run_cli


def exits(proc: subprocess.CompletedProcess, code: int) -> subprocess.CompletedProcess:
    assert proc.returncode == code, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def error_line(proc: subprocess.CompletedProcess) -> str:
    """The error argparse prints after the usage lines (which list every option, --output too)."""
    return proc.stderr.strip().splitlines()[-1]


# ---------------------------------------------------------------- table roots

TABLES = {
    "delta": (lambda tmp: lakes.delta_with_delete(tmp / "events"), "a Delta table",
              "pageindex-job --input TABLE_ROOT --in-place"),
    "iceberg": (lambda tmp: lakes.iceberg_with_delete(tmp / "warehouse"), "an Iceberg table",
                "pageindex-job --iceberg-table CATALOG.NAMESPACE.TABLE --in-place"),
    "hudi": (lambda tmp: lakes.hudi_like(tmp / "hudi"), "a Hudi table", "pageindex does not index Hudi"),
}


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_output_on_a_table_root_is_refused_with_the_ways_that_index_it(tmp_path, kind):
    """A copy of a table's directory is not the table (a Delta DELETE's files would come back,
    its log would be missing): refused, for the root and for a directory holding it, nothing
    written, the table untouched."""
    make, article, way = TABLES[kind]
    root = make(tmp_path)
    before = lakes.snapshot(root)
    out = tmp_path / "mirror"
    for target in (root, root.parent):  # the table root; a warehouse directory holding it
        proc = exits(run_cli("retrofit", target, "--output", out), 2)
        line = error_line(proc)
        assert f"{root} is (or holds) {article}" in line and "--output would mirror its directory" in line
        assert way in line, line
        assert not out.exists()
    assert lakes.snapshot(root) == before


@pytest.mark.parametrize("kind", sorted(TABLES))
def test_in_place_refusal_names_no_output(tmp_path, kind):
    make, article, way = TABLES[kind]
    root = make(tmp_path)
    before = lakes.snapshot(root)
    line = error_line(exits(run_cli("retrofit", root), 2))
    assert f"is (or holds) {article}" in line and way in line and "--output" not in line, line
    assert lakes.snapshot(root) == before


# ---------------------------------------------------------------- --copy-unchanged, truthful records

def records(proc: subprocess.CompletedProcess) -> dict[str, dict]:
    return {Path(r["path"]).as_posix(): r for r in map(json.loads, proc.stdout.splitlines())}


def test_copy_unchanged_writes_a_complete_mirror(tmp_path):
    root = tmp_path / "lake"
    layout = lakes.mixed_tree(root)
    before = lakes.snapshot(root)
    out = tmp_path / "mirror"
    proc = exits(run_cli("retrofit", "--json", root, "--output", out, "--copy-unchanged"), 0)
    lakes.check_mirror(root, out, layout, before, records(proc))
    text = exits(run_cli("retrofit", root, "--output", tmp_path / "again", "--copy-unchanged"), 0).stdout
    assert f"(copied to {tmp_path / 'again' / 'day=2' / 'c.parquet'})" in text


def test_without_copy_unchanged_records_name_only_what_was_written(tmp_path):
    root = tmp_path / "lake"
    layout = lakes.mixed_tree(root)
    out = tmp_path / "mirror"
    recs = records(exits(run_cli("retrofit", "--json", root, "--output", out), 0))
    written = {rel for rel, what in layout.items() if what == "index"}
    assert set(lakes.snapshot(out)) == written
    for rel in layout:
        record = recs[(root / rel).as_posix()]
        if rel in written:
            assert record["output"] == str(out / rel) and record["bytes_out"] == (out / rel).stat().st_size
        else:
            assert record["output"] is None and record["bytes_out"] == 0, record
    # one already indexed file named alone, --output naming the file: nothing is written
    single = tmp_path / "single.parquet"
    recs = records(exits(run_cli("retrofit", "--json", root / "day=2" / "c.parquet", "--output", single), 0))
    assert [r["output"] for r in recs.values()] == [None] and not single.exists()
    # a dry run writes nothing and says so
    recs = records(exits(run_cli("retrofit", "--json", "--dry-run", root, "--output", tmp_path / "dry"), 0))
    assert {r["output"] for r in recs.values()} == {None} and not (tmp_path / "dry").exists()


def test_copy_unchanged_needs_output(tmp_path):
    root = tmp_path / "lake"
    lakes.mixed_tree(root)
    before = lakes.snapshot(root)
    assert "--copy-unchanged applies to --output only" in error_line(
        exits(run_cli("retrofit", root, "--copy-unchanged"), 2))
    assert lakes.snapshot(root) == before


# ---------------------------------------------------------------- bloom filters on evolved schemas

def test_bloom_filter_on_an_evolved_lake_notes_the_older_files(tmp_path):
    """Older files lack b and lst: each is indexed without them, with a note; the newer get a
    filter on b and on lst's elements (a list named by its own name), as DuckDB reads them."""
    root = tmp_path / "lake"
    layout = lakes.evolved_lake(root)
    proc = exits(run_cli("retrofit", "--json", root, "--bloom-filter", "b,lst"), 0)
    recs = records(proc)
    for rel, new in layout.items():
        record, path = recs[(root / rel).as_posix()], root / rel
        assert record["status"] == "indexed", record
        assert pq.ParquetFile(path).metadata.row_group(0).column(0).has_column_index
        if new:
            assert record["notes"] == [] and record["bloom_filters"] == 4
            assert lakes.bloom_columns(path) == {"id": 0, "flag": 0, "b": 2, "lst, list, element": 2}
            present = int(pq.read_table(path).column("b")[0].as_py())
            assert lakes.bloom_excludes(path, "b", present) == [False, False]
        else:
            assert record["notes"] == ["bloom filter: column b not in this file",
                                       "bloom filter: column lst not in this file"]
            assert record["bloom_filters"] == 0 and set(lakes.bloom_columns(path).values()) == {0}
    text = exits(run_cli("retrofit", "--force", root / "year=2023", "--bloom-filter", "b"), 0).stdout
    assert "  note: bloom filter: column b not in this file" in text


def test_a_boolean_column_named_gets_a_note_and_the_count_is_what_was_built(tmp_path):
    path = lakes.write(tmp_path / "f.parquet", lakes.evolved(0, new_columns=True))
    before = path.read_bytes()
    text = exits(run_cli("retrofit", "--dry-run", path, "--bloom-filter", "id,flag"), 0).stdout
    assert "2 bloom filters to write" in text, text  # id's two row groups; flag has none
    assert "note: bloom filter: column flag is BOOLEAN, which has no bloom filter" in text
    assert path.read_bytes() == before
    text = exits(run_cli("retrofit", path, "--bloom-filter", "id,flag"), 0).stdout
    assert "2 bloom filters written" in text
    assert lakes.bloom_columns(path) == {"id": 2, "flag": 0, "b": 0, "lst, list, element": 0}


@pytest.mark.parametrize("flags", [["--bloom-fpp", "0.1"], ["--bloom-max-bytes", "4096"],
                                   ["--bloom-filter", "none", "--bloom-fpp", "0.1"]])
def test_bloom_tuning_without_a_filter_is_a_usage_error(tmp_path, flags):
    path = lakes.write(tmp_path / "f.parquet", lakes.ids(0))
    before = path.read_bytes()
    line = error_line(exits(run_cli("retrofit", path, *flags), 2))
    assert f"{flags[-2]} tunes bloom filters: give --bloom-filter" in line, line
    assert path.read_bytes() == before
