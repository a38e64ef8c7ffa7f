"""Access to the shared Parquet test corpus (../shared/corpus beside the repo) and its CATALOG.tsv."""
from __future__ import annotations

import csv
from functools import lru_cache
from pathlib import Path

from tests.helpers.paths import REPO_ROOT

# The corpus sits beside the repository.
CORPUS_DIR = REPO_ROOT.parent / "shared" / "corpus"
CATALOG_PATH = CORPUS_DIR / "CATALOG.tsv"

CATEGORIES = frozenset(
    {"candidate", "oracle", "bad_input", "encrypted", "candidate_reader_limited"}
)


def require_corpus() -> Path:
    """Return the corpus directory, failing loudly (never skipping) when it is absent."""
    if not CATALOG_PATH.is_file():
        raise FileNotFoundError(
            f"Parquet test corpus not found: expected {CATALOG_PATH} "
            f"(the shared/ directory must sit beside the repository at {REPO_ROOT})"
        )
    return CORPUS_DIR


@lru_cache(maxsize=1)
def _load_catalog() -> tuple[dict[str, str], ...]:
    require_corpus()
    with CATALOG_PATH.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    if not rows:
        raise RuntimeError(f"{CATALOG_PATH} has no rows")
    return tuple(rows)


def load_catalog() -> list[dict[str, str]]:
    """All CATALOG.tsv rows as dicts (column name -> string value; empty string when blank).

    ``row["path"]`` is relative to the corpus directory.
    """
    return [dict(r) for r in _load_catalog()]


def corpus_path(row_or_relpath: dict[str, str] | str) -> Path:
    """Absolute path of a catalog row (or of a corpus-relative path)."""
    rel = row_or_relpath["path"] if isinstance(row_or_relpath, dict) else row_or_relpath
    return require_corpus() / rel


def corpus_rows(category: str) -> list[dict[str, str]]:
    """Catalog rows of one category (see CATEGORIES)."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown corpus category {category!r}; expected one of {sorted(CATEGORIES)}")
    rows = [r for r in _load_catalog() if r["category"] == category]
    if not rows:
        raise RuntimeError(f"corpus category {category!r} has no files in {CATALOG_PATH}")
    return [dict(r) for r in rows]


def corpus_files(category: str) -> list[Path]:
    """Absolute paths of every corpus file in ``category``, in catalog order.

    Fails loudly if the corpus, the category or any listed file is missing.
    """
    paths = [corpus_path(r) for r in corpus_rows(category)]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"corpus files listed in CATALOG.tsv are missing: {missing[:5]}")
    return paths
