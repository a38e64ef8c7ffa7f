"""Shared pytest fixtures. The plain helper functions live in tests/helpers/ and can be imported directly.

Fixtures:
  corpus_dir        (session) Path of ../shared/corpus; fails loudly if missing.
  catalog           (session) list of CATALOG.tsv rows as dicts.
  spark             (session, lazy) local[2] SparkSession; only tests that request it pay for it.
  s3_server         (session) endpoint URL of an in-process moto S3 server on 127.0.0.1.
  s3_bucket         (function) a fresh, empty bucket name on that server.
  s3fs_fs           (function) uncached s3fs.S3FileSystem pointed at the server.
  s3_storage_options(function) fsspec storage_options dict for the server.
  paged_parquet     (session) synthetic sorted-int64 files with and without a pyarrow page index.
  duckdb_python     (session) python of .venv-duckdb (DuckDB 1.4.4 with its delta and iceberg extensions).

Markers: a test requesting `spark` is marked spark, one requesting `s3_server` (directly or through
another fixture) is marked s3.
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers import corpus as _corpus
from tests.helpers import files as _files
from tests.helpers import s3 as _s3
from tests.helpers.corpus import corpus_files, load_catalog  # noqa: F401  (re-exported for tests)
from tests.helpers.datafusion import datafusion_page_pruning  # noqa: F401
from tests.helpers.spark import column_index_violations, scan_output_rows  # noqa: F401

# ---------------------------------------------------------------- markers

# A test that requests one of these fixtures needs what the fixture starts, so it gets the marker
# (pyproject.toml registers them; `make test-fast` deselects them).
FIXTURE_MARKERS = {"spark": "spark", "s3_server": "s3"}


# Under `--dist loadgroup` (make test) the tests of a module that share a module-scoped fixture (a
# wheel, a virtualenv, a cluster) are one group, so one worker builds it once; every other test
# goes to whichever worker is free. xdist sends the groups first, largest first, so the single
# tests even out the end. (On a worker, xdist says "loadgroup" in its own option, not in --dist.)
def xdist_group(item: pytest.Item) -> str | None:
    info = getattr(item, "_fixtureinfo", None)
    scopes = {d.scope for defs in (info.name2fixturedefs.values() if info else ()) for d in defs}
    return item.nodeid.split("::", 1)[0] if scopes & {"module", "class"} else None


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook deselects by -m, and before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    grouped = getattr(config.option, "loadgroup", False)  # set on xdist's workers, which collect
    for item in items:
        for fixture, marker in FIXTURE_MARKERS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(marker)
        group = xdist_group(item) if grouped else None
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


# Seconds of test per worker, those marked spark apart: the run lasts as long as its busiest
# worker, and the summary says which one that was (CI's 40 minutes).
_WORKER_SECONDS: dict[tuple[str, bool], float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    node = getattr(report, "node", None)  # set by pytest-xdist on the controller
    if node is not None:
        key = (node.gateway.id, "spark" in report.keywords)
        _WORKER_SECONDS[key] = _WORKER_SECONDS.get(key, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for worker in sorted({worker for worker, _ in _WORKER_SECONDS}):
        spark = _WORKER_SECONDS.get((worker, True), 0.0)
        rest = _WORKER_SECONDS.get((worker, False), 0.0)
        terminalreporter.write_line(f"{worker}: {spark + rest:.0f} s of tests, {spark:.0f} s of them marked spark")


# ---------------------------------------------------------------- corpus

@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    expected = Path(__file__).resolve().parents[2] / "shared" / "corpus"
    assert expected == _corpus.CORPUS_DIR
    return _corpus.require_corpus()


@pytest.fixture(scope="session")
def catalog(corpus_dir) -> list[dict[str, str]]:
    return load_catalog()


# ---------------------------------------------------------------- spark

@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from tests.helpers.spark import make_spark_session

    session = make_spark_session(warehouse_dir=tmp_path_factory.mktemp("spark-warehouse"))
    try:
        yield session
    finally:
        session.stop()


# ---------------------------------------------------------------- S3 (moto)

@pytest.fixture(scope="session")
def s3_server():
    with _s3.moto_s3_server() as endpoint:
        yield endpoint


@pytest.fixture
def s3_bucket(s3_server) -> str:
    return _s3.create_bucket(s3_server)


@pytest.fixture
def s3_storage_options(s3_server) -> dict:
    return _s3.storage_options(s3_server)


@pytest.fixture
def s3fs_fs(s3_server, s3_bucket):
    """A fresh s3fs filesystem; the test's bucket is ``s3fs_fs.test_bucket`` (same as ``s3_bucket``)."""
    fs = _s3.make_s3fs(s3_server)
    fs.test_bucket = s3_bucket
    yield fs
    fs.invalidate_cache()
    type(fs).clear_instance_cache()


# ---------------------------------------------------------------- DuckDB lake readers

@pytest.fixture(scope="session")
def duckdb_python() -> Path:
    from tests.helpers.duckdb_lake import VENV

    return VENV.ensure()


# ---------------------------------------------------------------- synthetic files

PAGED_ROWS = 200_000


@pytest.fixture(scope="session")
def paged_parquet(tmp_path_factory) -> SimpleNamespace:
    """One row group of 200k sorted int64 ``k`` (0..199999) and double ``v``, ~1k-row pages.

    ``.with_index`` was written by pyarrow with write_page_index=True, ``.without_index`` with False.
    """
    d = tmp_path_factory.mktemp("paged")
    return SimpleNamespace(
        with_index=_files.write_sorted_int_file(d / "with_index.parquet", PAGED_ROWS, page_index=True),
        without_index=_files.write_sorted_int_file(d / "without_index.parquet", PAGED_ROWS, page_index=False),
        num_rows=PAGED_ROWS,
    )
