"""The package layout is the pipeline: every import inside pageindex goes down the layers, never
up, and modules of one layer may use each other (README "How it works", docs/ARCHITECTURE.md)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "pageindex"

# Lowest first. A module may import from its own layer and the ones before it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("pageindex.errors", "pageindex.version"),
    ("pageindex.io",),
    ("pageindex.format",),
    ("pageindex.scan",),
    ("pageindex.index",),
    ("pageindex.query",),
    ("pageindex.retrofit", "pageindex.verify", "pageindex.inspection"),
    # Table formats plan and commit around retrofit; only the job and the CLI drive them.
    ("pageindex.table",),
    ("pageindex.cli", "pageindex.job", "pageindex.shutdown", "pageindex.__main__", "pageindex.deploy",
     "pageindex"),
)


def layer_of(module: str) -> int:
    best = None
    for rank, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (rank, len(prefix))
    if best is None:
        raise AssertionError(f"{module} belongs to no layer: add it to LAYERS")
    return best[0]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> set[str]:
    """Every pageindex module `path` imports, at any depth of the file."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pageindex"):
            assert node.level == 0, f"{path}: relative import; use absolute pageindex.* imports"
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("pageindex"))
    return out


SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer():
    assert len(SOURCES) > 30
    for path in SOURCES:
        layer_of(module_name(path))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_only_go_down(path):
    me = module_name(path)
    upward = sorted(m for m in imported(path) if layer_of(m) > layer_of(me))
    assert not upward, f"{me} (layer {layer_of(me)}) imports from above: {upward}"


def test_layer_check_can_fail():
    assert layer_of("pageindex.scan.values") > layer_of("pageindex.format.footer")
    assert layer_of("pageindex.job.spark") > layer_of("pageindex.retrofit")
