"""The documentation: the MkDocs site builds with --strict (no broken page, link or anchor), its
charts are what bench.charts draws from bench/RESULTS.md, and the user docs stay short and speak
to users (the README's length, no work history)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench import charts
from tests.helpers.paths import REPO_ROOT

DOCS = REPO_ROOT / "docs"
# Words of a work log, not of a manual: numbered sessions, rounds and issues.
HISTORY = re.compile(r"\b(?:sessions? \d+|round \d+ of work|issues? #?\d+)\b", re.IGNORECASE)


def mkdocs_build(root: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)], cwd=root,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def test_site_builds_strict(tmp_path):
    done = mkdocs_build(REPO_ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    for page in ("index", "cli", "spark-job", "airflow", "lakehouse", "object-storage", "bloom-filters",
                 "lookup", "FORMAT-RULES", "performance", "troubleshooting", "ARCHITECTURE"):
        assert (tmp_path / "site" / ("" if page == "index" else page) / "index.html").is_file(), page


def test_strict_build_fails_on_a_broken_anchor(tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(DOCS, root / "docs")
    shutil.copy2(REPO_ROOT / "mkdocs.yml", root / "mkdocs.yml")
    page = root / "docs" / "troubleshooting.md"
    page.write_text(page.read_text() + "\nSee [the job](spark-job.md#no-such-section).\n")
    done = mkdocs_build(root, tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-section" in done.stderr


def test_charts_are_drawn_from_the_bench_results(tmp_path):
    charts.main(["--results", str(REPO_ROOT / "bench" / "RESULTS.md"), "--out", str(tmp_path)])
    for name in charts.CHARTS:
        assert (tmp_path / name).read_bytes() == (DOCS / "img" / name).read_bytes(), \
            f"docs/img/{name} is stale: run python -m bench.charts"


def test_chart_values_come_from_the_table():
    text = (REPO_ROOT / "bench" / "RESULTS.md").read_text()
    chart = charts.throughput(text)
    exact = dict(chart.series)["retrofit (exact)"]
    # The same cell found another way: the numeric-200MB row below the Throughput heading, the
    # column whose header names the exact retrofit.
    lines = text.splitlines()
    below = lines[next(i for i, line in enumerate(lines) if line.startswith("## Throughput")):]
    header = next(line for line in below if line.startswith("|")).split("|")
    row = next(line for line in below if line.startswith("| numeric-200MB |")).split("|")
    cell = row[next(i for i, h in enumerate(header) if h.strip() == "**retrofit (exact)**")]
    assert exact[chart.labels.index("numeric-200MB")] == float(cell.split("(")[0].replace(",", ""))
    assert charts.number("1,023 (0.939 s)") == 1023
    assert charts.megabytes("601.7 kB") == pytest.approx(0.6017)


def test_readme_is_short_and_starts_with_the_two_commands():
    lines = (REPO_ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250
    head = "\n".join(lines[:8])
    assert "make run" in head and "make test" in head


@pytest.mark.parametrize("path", [REPO_ROOT / "README.md", REPO_ROOT / "CHANGELOG.md", *sorted(DOCS.glob("*.md"))],
                         ids=lambda p: p.name)
def test_user_docs_have_no_work_history(path):
    found = HISTORY.findall(path.read_text())
    assert not found, f"{path.name}: {found}"
