"""Build hooks: the compiled kernels (every pageindex/**/*.pyx, Cython to C) built into the wheel,
and the deployment files (pageindex/deploy.py's KIT) copied into it under pageindex/_deploy/.

A compiler is needed to build the wheel, not to install it: the kernels are machine code in the
wheel, so no process compiles anything at run time. Everything else is in pyproject.toml.
"""
from __future__ import annotations

import ast
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup
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


# Bounds are the kernels' own business (each checks what it reads against the buffer's length, and
# its tests run every status on cut-off input), so no per-index checks; division as C does it.
DIRECTIVES = {"language_level": 3, "boundscheck": False, "wraparound": False, "cdivision": True,
              "initializedcheck": False, "embedsignature": True}
# Portable code (no -march=native): the wheel runs on any x86-64 or aarch64 machine.
FLAGS = ["-O3"]


def kernels() -> list[Extension]:
    """One extension module per .pyx, named by its path (pageindex/scan/plain_kernels.pyx is
    pageindex.scan.plain_kernels), sorted so that every build lists them alike."""
    sources = sorted(ROOT.glob("pageindex/**/*.pyx"))
    modules = [Extension(".".join(s.relative_to(ROOT).with_suffix("").parts), [str(s.relative_to(ROOT))],
                         extra_compile_args=FLAGS) for s in sources]
    return cythonize(modules, compiler_directives=DIRECTIVES, quiet=True) if modules else []


setup(cmdclass={"build_py": BuildWithKit}, ext_modules=kernels())
