"""The package as a platform installs it: an sdist and a wheel built from a copy of the sources, the
wheel installed in a fresh venv and run from a directory with no checkout (entry points, the deploy
kit, the job on a local file), and as `pip install pageindex` gives it: the compiled path."""
from __future__ import annotations

import email
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex.deploy import KIT
from pageindex.scan.compiled import MODULES
from pageindex.version import __version__
from tests.helpers.both_paths import scan_kernel
from tests.helpers.paths import REPO_ROOT
from tests.helpers.side_venv import SideVenv

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

# `python -m build`: an sdist, then the wheel from that sdist, as a release is built.
BUILD_VENV = SideVenv(Path(os.environ.get("PAGEINDEX_BUILD_VENV", REPO_ROOT / ".venv-build")),
                      ("build==1.6.1",), "build", 300)
# What an sdist is made from; the rest of the checkout (tests, bench, venvs) stays out of the copy.
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE", "CHANGELOG.md",
           "pageindex", "jobs", "deploy")
# The installed package's commands, each asked for its help.
ENTRY_POINTS = (("pageindex", "--help"), ("pageindex-job", "--help"), ("pageindex-deploy", "--help"),
                ("python", "-m", "pageindex", "--help"), ("python", "-m", "pageindex.job", "--help"))


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 300) -> str:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n{proc.stdout[-4000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """sdist and wheel, built from a copy of the sources (nothing is written into the checkout)."""
    work = tmp_path_factory.mktemp("build")
    src = work / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "build", "*.egg-info")
    for name in SOURCES:
        path = REPO_ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        else:
            shutil.copy2(path, src / name)
    run([BUILD_VENV.ensure(), "-m", "build", "--outdir", work / "dist", src], cwd=work, timeout=600)
    return work / "dist"


@pytest.fixture(scope="module")
def venv(dist, tmp_path_factory) -> Path:
    """A fresh venv holding only the wheel; its dependencies come from this interpreter's
    site-packages through a .pth file (plain paths: the .pth files there, such as an editable
    pageindex's, are not processed). No PYTHONPATH anywhere: it would put a checkout in view."""
    where = tmp_path_factory.mktemp("venv") / "v"
    run([sys.executable, "-m", "venv", "--without-pip", where], cwd=where.parent)
    wheel = next(dist.glob("*.whl"))
    run([sys.executable, "-m", "pip", "--python", where / "bin" / "python", "install", "--no-deps",
         "--no-index", "--disable-pip-version-check", "--quiet", wheel], cwd=where.parent, env=clean_env(where))
    # Only now: with the .pth in place pip would see this interpreter's pageindex as installed.
    site = next((where / "lib").glob("python*/site-packages"))
    paths = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (site / "deps.pth").write_text("".join(f"{p}\n" for p in paths))
    return where


@pytest.fixture(scope="module")
def default_install(dist, tmp_path_factory) -> Path:
    """A fresh venv where pip installed the wheel as a user's `pip install pageindex` does: no
    extra, its dependencies resolved by pip from the package index (or its cache)."""
    where = tmp_path_factory.mktemp("default") / "v"
    run([sys.executable, "-m", "venv", where], cwd=where.parent)
    wheel = next(dist.glob("*.whl"))
    run([where / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check", "--quiet", wheel],
        cwd=where.parent, env=clean_env(where), timeout=900)
    return where


def clean_env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYSPARK", "VIRTUAL_ENV"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PYSPARK_PYTHON"] = str(venv / "bin" / "python")
    return env


def test_sdist_holds_sources_license_and_deploy_files(dist):
    sdist = next(dist.glob("*.tar.gz"))
    assert sdist.name == f"pageindex-{__version__}.tar.gz"
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for need in ("LICENSE", "CHANGELOG.md", "pageindex/py.typed", "pageindex/retrofit.py", *KIT):
        assert need in names, need


def test_wheel_metadata_and_contents(dist):
    wheel = next(dist.glob("*.whl"))
    # A platform wheel: the compiled kernels are machine code for this Python and platform.
    tag = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    abi = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert wheel.name == f"pageindex-{__version__}-{abi}-{abi}-{tag}.whl"
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        meta = email.message_from_bytes(zf.read(f"pageindex-{__version__}.dist-info/METADATA"))
        license_text = zf.read(f"pageindex-{__version__}.dist-info/licenses/LICENSE").decode()
        for rel in KIT:  # the deploy files as they are in the repository, byte for byte
            assert zf.read(f"pageindex/_deploy/{rel}") == (REPO_ROOT / rel).read_bytes(), rel
    assert "pageindex/py.typed" in names
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for module in (*(f"pageindex/scan/{m}" for m in MODULES), "pageindex/index/bloom/kernel"):
        assert module + suffix in names, module  # built, and nothing of it compiled at run time
        assert module + ".pyx" not in names and module + ".c" not in names, module
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["Version"] == __version__
    requires = meta.get_all("Requires-Dist")
    assert 'pyspark>=4.3; extra == "spark"' in requires
    assert "cramjam>=2.8" in requires  # the fast decompressors come with every install
    assert not any(r.startswith(("numba", "llvmlite")) for r in requires), requires
    assert {e for e in meta.get_all("Provides-Extra")} >= {"spark", "fast", "delta", "iceberg", "test", "docs"}
    assert not any(n.startswith(("tests/", "bench/", "jobs/", "deploy/")) for n in names)


@pytest.mark.parametrize("command", ENTRY_POINTS, ids=lambda c: " ".join(c[:-1]))
def test_entry_points_run_from_the_wheel(venv, tmp_path, command):
    out = run([venv / "bin" / command[0], *command[1:]], cwd=tmp_path, env=clean_env(venv))
    assert "usage:" in out


def test_cli_version_is_the_package_version(venv, tmp_path):
    out = run([venv / "bin" / "pageindex", "--version"], cwd=tmp_path, env=clean_env(venv))
    assert out.strip() == f"pageindex {__version__}"
    where = run([venv / "bin" / "python", "-c", "import pageindex; print(pageindex.__file__)"],
                cwd=tmp_path, env=clean_env(venv))
    assert Path(where.strip()).is_relative_to(venv), where  # the wheel's copy, not the checkout's


def test_deploy_kit_written_out_and_wrapper_builds_its_zip(venv, tmp_path):
    env = clean_env(venv)
    run([venv / "bin" / "pageindex-deploy", tmp_path / "kit"], cwd=tmp_path, env=env)
    kit = tmp_path / "kit"
    for rel in KIT:
        assert (kit / rel).read_bytes() == (REPO_ROOT / rel).read_bytes(), rel
    assert os.access(kit / "deploy" / "spark-submit.sh", os.X_OK)
    assert (kit / "pageindex" / "retrofit.py").read_bytes() == (REPO_ROOT / "pageindex" / "retrofit.py").read_bytes()
    assert not (kit / "pageindex" / "_deploy").exists()
    # A second run over the same bytes is fine; other bytes are refused unless --overwrite.
    run([venv / "bin" / "pageindex-deploy", kit], cwd=tmp_path, env=env)
    (kit / "jobs" / "retrofit_job.py").write_text("# edited\n")
    refused = subprocess.run([venv / "bin" / "pageindex-deploy", kit], cwd=tmp_path, env=env,
                             capture_output=True, text=True)
    assert refused.returncode == 2 and "--overwrite" in refused.stderr
    assert (kit / "jobs" / "retrofit_job.py").read_text() == "# edited\n"
    run([venv / "bin" / "pageindex-deploy", kit, "--overwrite"], cwd=tmp_path, env=env)
    assert (kit / "jobs" / "retrofit_job.py").read_bytes() == (REPO_ROOT / "jobs" / "retrofit_job.py").read_bytes()
    # The kit has no setup.py to build the executors' wheel from: the wrapper asks which to install.
    refused = subprocess.run([kit / "deploy" / "spark-submit.sh", "--dry-build"], cwd=tmp_path,
                             env=env | {"PYTHON": str(venv / "bin" / "python")}, capture_output=True, text=True)
    assert refused.returncode == 2 and "PAGEINDEX_PACKAGE" in refused.stderr, refused.stderr
    # The wrapper zips the kit's package for --py-files, asked to.
    out = run([kit / "deploy" / "spark-submit.sh", "--dry-build", "--", "--help"], cwd=tmp_path,
              env=env | {"PYTHON": str(venv / "bin" / "python"), "PAGEINDEX_EXECUTOR_ENV": "zip"})
    assert "would run:" in out
    with zipfile.ZipFile(kit / "deploy" / "build" / "pageindex.zip") as zf:
        assert "pageindex/retrofit.py" in zf.namelist() and "pageindex/job/spark.py" in zf.namelist()


@pytest.mark.spark
def test_job_from_the_wheel_indexes_a_local_file(venv, tmp_path):
    data = tmp_path / "lake" / "part-0.parquet"
    data.parent.mkdir()
    pq.write_table(pa.table({"id": list(range(50_000))}), data, data_page_size=4096, write_page_index=False)
    before = pq.ParquetFile(data).metadata
    assert not before.row_group(0).column(0).has_column_index
    run([venv / "bin" / "pageindex-job", "--input", data.parent, "--in-place"], cwd=tmp_path,
        env=clean_env(venv), timeout=600)
    after = pq.ParquetFile(data).metadata
    assert after.row_group(0).column(0).has_column_index
    marker = after.metadata[b"pageindex"].decode()
    assert marker.startswith(f"version={__version__};"), marker
    assert pq.read_table(data).column("id").to_pylist() == list(range(50_000))


DEFAULT_RUN = """
import sys
import pageindex
from pageindex.scan.compiled import missing, path
from pageindex.index.bloom.path import kernel
result = pageindex.retrofit(sys.argv[1], sys.argv[2], bloom_filter="id")
print(result.status, path(), kernel() is not None, missing())
"""


def test_the_default_install_runs_the_compiled_path(default_install, tmp_path):
    """`pip install pageindex`, no extra: the scan and the bloom filters run compiled (no numba,
    no compiler at run time), and the index bytes are those of the fallback path, which this
    checkout's Arrow path writes."""
    source = tmp_path / "legacy.parquet"
    table = pa.table({"id": pa.array(range(60_000), pa.int64()),
                      "name": pa.array([f"user-{i % 997:04d}" for i in range(60_000)]),
                      "score": pa.array([None if i % 11 == 0 else i * 0.5 for i in range(60_000)])})
    pq.write_table(table, source, write_page_index=False, data_page_size=4096, compression="snappy")
    env = {k: v for k, v in clean_env(default_install).items() if not k.startswith("PAGEINDEX_")}
    out = run([default_install / "bin" / "python", "-c", DEFAULT_RUN, source, tmp_path / "compiled.parquet"],
              cwd=tmp_path, env=env)
    assert out.split()[-4:] == ["indexed", "compiled", "True", "None"], out
    listed = run([default_install / "bin" / "python", "-m", "pip", "list", "--format=freeze"],
                 cwd=tmp_path, env=env).lower()
    assert "numba" not in listed and "llvmlite" not in listed and "cramjam" in listed, listed
    with scan_kernel("arrow"):
        import pageindex

        assert pageindex.retrofit(str(source), str(tmp_path / "fallback.parquet"), bloom_filter="id").status == "indexed"
    assert (tmp_path / "compiled.parquet").read_bytes() == (tmp_path / "fallback.parquet").read_bytes()
