"""The job's report and state read back as the folders of part files they are (pyarrow reads a
Parquet folder as one table; JSON lines parts are read line by line), for the tests' checks."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

JSON_FIELDS = ("without_column_index_reasons", "page_stats_fallback_reasons", "violations", "notes",
               "chunk_statistics")


def report_records(path: Path | str, decode: bool = True) -> list[dict]:
    """The records of a report folder (or a single report file), sorted by path; with `decode`,
    a Parquet report's JSON text columns as the values they encode."""
    path = Path(path)
    files = sorted(p for p in path.iterdir() if p.name.startswith("part-")) if path.is_dir() else [path]
    rows: list[dict] = []
    for f in files:
        if f.suffix == ".parquet":
            table = pq.read_table(f)
            for r in table.to_pylist():
                if decode:
                    for name in JSON_FIELDS:
                        if name in r and r[name] is not None:
                            r[name] = json.loads(r[name])
                rows.append(r)
        else:
            rows += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return sorted(rows, key=lambda r: r["path"])


def state_paths(path: Path | str) -> set[str]:
    """The paths a state folder's parts record (pyarrow reads the folder as one table)."""
    return set(pq.read_table(Path(path)).column("path").to_pylist())
