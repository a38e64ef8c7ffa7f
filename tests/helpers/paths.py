"""Where the repository and the test folders are, named once so that a test at any folder depth
finds them the same way."""
from __future__ import annotations

from pathlib import Path

# tests/helpers/paths.py -> parents[2] is the repository root.
REPO_ROOT = Path(__file__).resolve().parents[2]
TESTS_DIR = REPO_ROOT / "tests"
HELPERS_DIR = TESTS_DIR / "helpers"
REGRESSIONS_DIR = TESTS_DIR / "regressions"
