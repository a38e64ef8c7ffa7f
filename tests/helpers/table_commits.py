"""A table run's commit step over records at hand (table_run.commit_stream, the job's own), for the
tests that run the steps without Spark."""
from __future__ import annotations

from typing import Any

from pageindex.job import lake, table_run


def commit_records(run: lake.TableRun, records: list[dict[str, Any]], batch_files: int = 1000
                   ) -> tuple[list[dict[str, Any]], str]:
    """Every record as the report gets it (the plan's skipped files too, `table_version` filled
    in), by path, and the summary's table lines."""
    out: list[dict[str, Any]] = []
    totals, commits, _ = table_run.commit_stream(run, records, batch_files, lambda kind, part: out.extend(part))
    return sorted(out, key=lambda r: r["path"]), commits.summary(run, totals)


def settled(records: list[dict[str, Any]]) -> bool:
    """Whether a run of these records settled every file (what lake.remember is told)."""
    return all(lake.settles(r) for r in records)
