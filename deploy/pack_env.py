"""deploy/pack_env.py: the Python environment deploy/spark-submit.sh ships to executors, built once.

A venv holding the pageindex wheel (its compiled kernels in it) and the runtime dependencies,
packed as a tar.gz that Spark unpacks with `--archives ENV.tar.gz#environment`, so executors run
`./environment/bin/python`. The venv's bin/python is a link to the interpreter that built it: the
nodes need that same Python at the same path (as with venv-pack), nothing else.

Usage: python deploy/pack_env.py REPO_ROOT BUILD_DIR [--package=SPEC] [--pip-args=ARGS]
Prints two lines: the archive and the unpacked venv (whose python the local driver runs). Both are
kept under BUILD_DIR named by a key of what went in (sources, package, pip arguments, this
Python), so a second run with the same inputs builds nothing. Standard library only.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.metadata
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

PREFIX = "pageindex-env-"
# What building the wheel reads, beside pageindex/: the first ones make what executors run (the
# environment's key), the others are only carried (setup.py copies the deploy kit into the wheel).
KEY_FILES = ("pyproject.toml", "setup.py", "MANIFEST.in", "deploy/pack_env.py")
CARRIED = ("README.md", "LICENSE", "CHANGELOG.md", "jobs/retrofit_job.py", "deploy/spark-submit.sh",
           "deploy/airflow/pageindex_backfill_dag.py", "deploy/README.md")
# Built in place by an editable install: never part of a wheel built from the sources.
NOT_SOURCES = (".so", ".c", ".pyc", ".pyd")
# Not needed at run time; ~25 MB unpacked.
DROPPED = ("pip", "setuptools")
# Build requirements (pyproject.toml's [build-system]) present here: the wheel is then built
# without an isolated build environment, so no package index is needed for them (setuptools 77
# builds wheels itself: the `wheel` package is needed only by older ones).
BUILD_REQUIRES = {"setuptools": (77,), "Cython": (3, 1)}


def main() -> int:
    p = argparse.ArgumentParser(prog="pack_env.py", description=__doc__.split("\n\n")[0])
    p.add_argument("repo", type=Path, help="the checkout (or pageindex-deploy directory)")
    p.add_argument("build_dir", type=Path, help="where the archive and the venv are kept")
    p.add_argument("--package", default="",
                   help="what to install instead of a wheel built from REPO (which then needs no "
                        "setup.py): a wheel file or a requirement")
    p.add_argument("--pip-args", default="", help="more `pip install` arguments (an index, constraints)")
    args = p.parse_args()
    repo, build = args.repo.resolve(), args.build_dir.resolve()
    package = str(Path(args.package).resolve()) if args.package.endswith(".whl") else args.package
    if not package and not (repo / "setup.py").is_file():
        raise SystemExit(f"pack_env.py: no setup.py in {repo} to build the wheel from: give --package")
    key = env_key(repo, package, args.pip_args)
    archive, env = build / f"{PREFIX}{key}.tar.gz", build / f"{PREFIX}{key}"
    if not (archive.is_file() and (env / "bin" / "python").exists()):
        build.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=".pack-", dir=build) as tmp:
            made = make_env(repo, Path(tmp), package, shlex.split(args.pip_args))
            installed = time.monotonic()
            packed = Path(tmp) / "env.tar.gz"
            pack(made, packed)
            publish(made, env, packed, archive)
        remove_others(build, key)
        print(f"pack_env.py: built {archive} ({archive.stat().st_size / 2**20:.1f} MiB): "
              f"{installed - started:.0f}s to build and install, {time.monotonic() - installed:.0f}s to pack",
              file=sys.stderr)
    print(archive)
    print(env)
    return 0


def sources(repo: Path, carried: bool = True) -> list[Path]:
    """The files a wheel is built from, sorted (`carried`: with those it only carries)."""
    found = [p for p in (repo / "pageindex").rglob("*") if p.is_file() and "__pycache__" not in p.parts
             and "_deploy" not in p.relative_to(repo).parts and not p.name.endswith(NOT_SOURCES)]
    found += [repo / rel for rel in KEY_FILES + (CARRIED if carried else ()) if (repo / rel).is_file()]
    return sorted(found)


def env_key(repo: Path, package: str, pip_args: str) -> str:
    """A digest of everything the environment is made from."""
    h = hashlib.sha256()
    for part in (sys.version, os.path.realpath(sys.executable), platform.machine(), package, pip_args):
        h.update(part.encode() + b"\0")
    if package and Path(package).is_file():
        h.update(Path(package).read_bytes())
    if not package:
        for path in sources(repo, carried=False):
            h.update(path.relative_to(repo).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def run(cmd: list[str], cwd: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode:
        sys.stderr.write(proc.stdout[-6000:])
        raise SystemExit(f"pack_env.py: {shlex.join(cmd)} exited {proc.returncode}")


def make_env(repo: Path, tmp: Path, package: str, pip_args: list[str]) -> Path:
    """A venv in `tmp` with the package (a wheel built from `repo` unless `package` says) and its
    dependencies, pip and setuptools removed."""
    target = package
    if not package:
        target = str(build_wheel(repo, tmp))
    env = tmp / "env"
    run([sys.executable, "-m", "venv", str(env)], tmp)
    python = str(env / "bin" / "python")
    run([python, "-m", "pip", "install", "--disable-pip-version-check", "--quiet", target, *pip_args], tmp)
    run([python, "-m", "pip", "uninstall", "--disable-pip-version-check", "--quiet", "--yes", *DROPPED], tmp)
    return env


def build_wheel(repo: Path, tmp: Path) -> Path:
    """pageindex's wheel from a copy of the sources (the checkout gets no build/ or .c files); a
    C compiler is needed here, and only here."""
    src = tmp / "src"
    for path in sources(repo):
        dest = src / path.relative_to(repo)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest)
    isolation = ["--no-build-isolation"] if can_build_here() else []
    run([sys.executable, "-m", "pip", "wheel", "--disable-pip-version-check", "--quiet", "--no-deps",
         *isolation, "-w", str(tmp / "wheel"), str(src)], tmp)
    [wheel] = (tmp / "wheel").glob("pageindex-*.whl")
    return wheel


def can_build_here() -> bool:
    """Whether this Python has the build requirements (else pip fetches them into an isolated
    build environment)."""
    for name, least in BUILD_REQUIRES.items():
        try:
            have = tuple(int(x) for x in importlib.metadata.version(name).split(".")[:len(least)])
        except (importlib.metadata.PackageNotFoundError, ValueError):
            return False
        if have < least:
            return False
    return True


def pack(env: Path, out: Path) -> None:
    """`env` as a tar.gz (sorted, no times or owners), links kept as links: the venv's python
    points at the interpreter that made it."""
    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
        return info

    paths = sorted(env.rglob("*"), key=lambda p: p.relative_to(env).as_posix())
    with open(out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0, filename="") as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in paths:
            tar.add(path, arcname=path.relative_to(env).as_posix(), recursive=False, filter=clean)


def publish(env: Path, final_env: Path, packed: Path, archive: Path) -> None:
    """Both into place by rename; a concurrent build that got there first wins (same inputs)."""
    try:
        env.rename(final_env)
    except OSError:
        if not (final_env / "bin" / "python").exists():
            raise
    os.replace(packed, archive)


def remove_others(build: Path, key: str) -> None:
    """Environments of older sources: only the current one is kept."""
    for path in build.glob(f"{PREFIX}*"):
        if key not in path.name:
            shutil.rmtree(path) if path.is_dir() else path.unlink()


if __name__ == "__main__":
    sys.exit(main())
