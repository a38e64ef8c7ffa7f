"""`pageindex-deploy DIR`: writes out what a platform deploys, from the installed package alone:
the Spark job script, the spark-submit wrapper and its environment packer, the Airflow DAG and
the package's sources (the wrapper checks the job's arguments with them, and zips them on request).

Standard library only: setup.py loads this file to learn which repository files the wheel carries.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Sequence

# Repository paths a deployment needs, written out under DIR at the same paths, so DIR is laid out
# as a checkout is and deploy/spark-submit.sh finds jobs/ and pageindex/ beside it. A wheel carries
# them under pageindex/_deploy/ (setup.py copies them there at build time); a checkout has them in
# place.
KIT: tuple[str, ...] = (
    "jobs/retrofit_job.py",
    "deploy/spark-submit.sh",
    "deploy/pack_env.py",
    "deploy/airflow/pageindex_backfill_dag.py",
    "deploy/README.md",
)
PACKAGED = "_deploy"  # the kit's folder inside the installed package
PACKAGE_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class KitFile:
    """One file to write: its path below DIR, its bytes and whether it is a program."""

    relpath: str
    data: bytes
    executable: bool


def kit_source(relpath: str) -> bytes:
    """One KIT file's bytes: from the wheel's copy, else from the checkout this module sits in."""
    packaged = resources.files("pageindex").joinpath(PACKAGED, *relpath.split("/"))
    if packaged.is_file():
        return packaged.read_bytes()
    return (PACKAGE_DIR.parent / relpath).read_bytes()


def package_files() -> list[KitFile]:
    """The package's own Python sources (deploy/spark-submit.sh checks the job's arguments with
    them, and zips them for PAGEINDEX_EXECUTOR_ENV=zip)."""
    out = []
    for path in sorted(PACKAGE_DIR.rglob("*")):
        rel = path.relative_to(PACKAGE_DIR)
        if not path.is_file() or rel.parts[0] == PACKAGED or "__pycache__" in rel.parts:
            continue
        if path.suffix == ".py" or path.name == "py.typed":
            out.append(KitFile(f"pageindex/{rel.as_posix()}", path.read_bytes(), False))
    return out


def kit_files() -> list[KitFile]:
    """Everything `pageindex-deploy` writes, in a fixed order."""
    kit = [KitFile(rel, kit_source(rel), rel.endswith(".sh")) for rel in KIT]
    return kit + package_files()


def conflicts(target: Path, files: Sequence[KitFile]) -> list[str]:
    """Paths below `target` that exist with other bytes (or are not files)."""
    out = []
    for f in files:
        path = target / f.relpath
        if path.exists() and (not path.is_file() or path.read_bytes() != f.data):
            out.append(str(path))
    return out


def write(target: Path, files: Sequence[KitFile]) -> None:
    """Write every file below `target`; programs get mode 0755."""
    for f in files:
        path = target / f.relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f.data)
        path.chmod(0o755 if f.executable else 0o644)


def main(argv: Sequence[str] | None = None) -> int:
    """Write the kit; 0 when written, 2 when refused (nothing written)."""
    parser = argparse.ArgumentParser(
        prog="pageindex-deploy",
        description="Write the Spark job script, the spark-submit wrapper and its environment "
                    "packer, the Airflow DAG and the pageindex sources into DIR, laid out as the "
                    "repository is.",
        epilog="Then: PAGEINDEX_PACKAGE=WHEEL_OR_REQUIREMENT DIR/deploy/spark-submit.sh --dry-build "
               "builds the environment executors run (DIR/deploy/build/pageindex-env-KEY.tar.gz, for "
               "--archives: that pageindex and its dependencies). Exit codes: 0 written; 2 usage, or "
               "files that exist with other content without --overwrite (nothing written).")
    parser.add_argument("dir", metavar="DIR", type=Path, help="where to write (created if missing)")
    parser.add_argument("--overwrite", action="store_true", help="replace files that differ")
    args = parser.parse_args(argv)
    files = kit_files()
    clash = conflicts(args.dir, files)
    if clash and not args.overwrite:
        print(f"pageindex-deploy: error: {clash[0]} exists with other content "
              f"({len(clash)} such file(s)); pass --overwrite to replace", file=sys.stderr)
        return 2
    write(args.dir, files)
    for rel in KIT:
        print(args.dir / rel)
    print(f"{args.dir / 'pageindex'}/ ({len(files) - len(KIT)} files)")
    return 0


def console() -> None:
    """Console-script entry point."""
    sys.exit(main())
