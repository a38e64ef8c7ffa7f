"""Golden outputs: sha256 of every retrofit output over the corpus and a generated writer matrix.

`python -m tests.helpers.golden --write` records them (tests/data/output_hashes.json) from the
code as it is; test_output_hashes compares every later tree against that table, byte for byte.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pageindex
from pageindex.errors import PageIndexError
from pageindex.retrofit import Status
from tests.helpers.corpus import CORPUS_DIR, corpus_files
from tests.helpers.tables import FULL_GRID, SMALL_GRID, random_table, write_variants

HASHES_PATH = Path(__file__).resolve().parents[1] / "data" / "output_hashes.json"

# Each option set is a distinct path through the code: exact, header statistics, a short
# truncation, and a forced rebuild of whatever index a file already has.
OPTION_SETS: dict[str, dict[str, object]] = {
    "exact": {},
    "trust": {"trust_page_stats": True},
    "truncate16": {"truncate_length": 16},
    "force": {"force": True},
}

# The generated matrix: (name, random_table kwargs, grid).
MATRIX_TABLES: tuple[tuple[str, dict[str, object], tuple], ...] = (
    ("sorted", {"seed": 11, "num_rows": 700}, FULL_GRID),
    ("unsorted-nan", {"seed": 12, "num_rows": 500, "sorted_key": False, "nan_fraction": 0.05,
                      "nan_payloads": True, "null_fraction": 0.3}, SMALL_GRID),
)


@dataclass(frozen=True)
class Case:
    """One input file, named stably across machines."""

    name: str
    path: Path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def corpus_cases() -> list[Case]:
    paths = corpus_files("candidate") + corpus_files("oracle")
    return [Case(f"corpus/{p.relative_to(CORPUS_DIR)}", p) for p in paths]


def matrix_cases(directory: Path) -> list[Case]:
    cases = []
    for name, kwargs, grid in MATRIX_TABLES:
        table = random_table(**kwargs)
        for written in write_variants(table, directory / name, grid):
            cases.append(Case(f"matrix/{name}/{written.name}", written.path))
    return cases


def outcome(case: Case, options: dict[str, object], out: Path) -> str:
    """The output's sha256, or the status / error class when no output is written."""
    try:
        result = pageindex.retrofit(str(case.path), str(out), **options)
    except PageIndexError as err:
        return f"error:{type(err).__name__}"
    if result.status not in (Status.INDEXED, Status.REPAIRED):
        return f"status:{result.status}"
    return sha256(out)


def all_outcomes(cases: list[Case], workdir: Path) -> Iterator[tuple[str, dict[str, str]]]:
    for case in cases:
        row = {"input": sha256(case.path)}
        for option_name, options in OPTION_SETS.items():
            out = workdir / "out.parquet"
            out.unlink(missing_ok=True)
            row[option_name] = outcome(case, options, out)
        yield case.name, row


def compute(workdir: Path) -> dict[str, dict[str, str]]:
    cases = corpus_cases() + matrix_cases(workdir / "matrix")
    return dict(all_outcomes(cases, workdir))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help=f"write {HASHES_PATH}")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        table = compute(Path(tmp))
    text = json.dumps(table, indent=1, sort_keys=True) + "\n"
    if args.write:
        HASHES_PATH.write_text(text)
        print(f"wrote {len(table)} cases to {HASHES_PATH}")
    else:
        print(text)


if __name__ == "__main__":
    main()
