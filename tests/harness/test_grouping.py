"""make test's grouping (tests/conftest.py): under two xdist workers the tests of a module that
share a module fixture run on one worker, and the others go wherever a worker is free. A pytest
or xdist upgrade can stop it without a word (pytest-dev/pytest-xdist#1386)."""
from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict

from tests.helpers.paths import REPO_ROOT

# Three of its tests share a module-scoped fixture; the rest take the corpus one file at a time.
MODULE = "tests/format/test_thrift.py"
SHARING = {"test_unknown_fields_of_every_type_survive_in_a_real_footer", "test_every_prefix_is_truncated",
           "test_fuzz_mutated_footers"}


def test_a_modules_fixture_sharing_tests_run_on_one_worker():
    run = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-n", "2",
                          "--dist", "loadgroup", MODULE], cwd=REPO_ROOT, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout[-2000:]
    ran = re.findall(r"^\[(gw\d)\] .*?PASSED (\S+)", run.stdout, re.MULTILINE)
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, nodeid in ran:
        workers[nodeid.split("::")[1].split("@")[0].split("[")[0]].add(worker)
    grouped = {nodeid.split("::")[1].split("@")[0] for _, nodeid in ran if nodeid.endswith(f"@{MODULE}")}
    assert grouped == SHARING
    assert len(set().union(*(workers[t] for t in SHARING))) == 1  # one worker built the fixture
    assert len(set().union(*workers.values())) == 2  # the others were spread
