"""Build hook: copies the deployment files (pageindex/deploy.py's KIT) into the wheel under
pageindex/_deploy/, so `pageindex-deploy` can write them out from an installed package.

They stay where they are in the repository; only the build copies them. Everything else about the
package is in pyproject.toml.
"""
from __future__ import annotations

import ast
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


def kit() -> tuple[str, tuple[str, ...]]:
    """KIT and PACKAGED from pageindex/deploy.py, read without importing the package."""
    values = {}
    for node in ast.parse((ROOT / "pageindex" / "deploy.py").read_text()).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name) and target.id in ("KIT", "PACKAGED"):
                values[target.id] = ast.literal_eval(node.value)
    return values["PACKAGED"], values["KIT"]


class BuildWithKit(build_py):
    def run(self) -> None:
        super().run()
        packaged, files = kit()
        for rel in files:
            dest = Path(self.build_lib) / "pageindex" / packaged / rel
            self.mkpath(str(dest.parent))
            self.copy_file(str(ROOT / rel), str(dest))


setup(cmdclass={"build_py": BuildWithKit})
