"""Output bytes are fixed: every corpus candidate and oracle, and a generated writer matrix,
retrofitted under each option set, must hash to what tests/data/output_hashes.json recorded.

The table was written by the code before the package layout moved (tests.helpers.golden); a
change that alters any output byte fails here and must say why in its commit, then re-record.
"""
from __future__ import annotations

import json

import pytest

from tests.helpers.golden import HASHES_PATH, OPTION_SETS, compute

pytestmark = pytest.mark.slow  # retrofits every corpus file and a writer matrix under four option sets


@pytest.fixture(scope="module")
def recorded() -> dict[str, dict[str, str]]:
    return json.loads(HASHES_PATH.read_text())


@pytest.fixture(scope="module")
def current(tmp_path_factory) -> dict[str, dict[str, str]]:
    return compute(tmp_path_factory.mktemp("golden"))


def test_same_cases(recorded, current):
    assert sorted(current) == sorted(recorded)
    assert len(recorded) > 100


def test_inputs_unchanged(recorded, current):
    """The inputs themselves (corpus, pyarrow's writer) are what they were when recorded."""
    changed = [name for name in recorded if current[name]["input"] != recorded[name]["input"]]
    assert not changed, f"inputs differ from the recorded ones: {changed[:5]}"


@pytest.mark.parametrize("option_set", sorted(OPTION_SETS))
def test_outputs_unchanged(recorded, current, option_set):
    differ = [name for name in recorded if current[name][option_set] != recorded[name][option_set]]
    assert not differ, f"{len(differ)} outputs differ under {option_set!r}: {differ[:5]}"
