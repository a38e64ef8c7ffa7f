#!/usr/bin/env bash
# deploy/spark-submit.sh: build what executors run and submit jobs/retrofit_job.py with spark-submit.
#
# Usage:
#   deploy/spark-submit.sh [--dry-build] [--] JOB_ARGS...
#   deploy/spark-submit.sh --help
#
# Everything after the wrapper's own leading options goes unchanged to jobs/retrofit_job.py, e.g.
#   MASTER=yarn PAGEINDEX_SUBMIT_ARGS='--deploy-mode cluster --executor-memory 4g' \
#       deploy/spark-submit.sh --table sales.orders --in-place --report s3://bucket/reports/today.parquet
# To see the job's own help: deploy/spark-submit.sh -- --help
# Before submitting jobs/retrofit_job.py, its arguments are checked here when $PYTHON can import
# pageindex (this checkout's): --help and usage errors (exit 2) then need nothing built and no JVM.
#
# What it does (PAGEINDEX_EXECUTOR_ENV=build, the default):
#   1. builds, once for a given source tree, deploy/build/pageindex-env-KEY.tar.gz with
#      deploy/pack_env.py: a venv holding the pageindex wheel built from this checkout (the
#      compiled kernels are machine code in it: a C compiler is needed here, once, not on the
#      cluster) and its runtime dependencies (pyarrow, numpy, fsspec, s3fs, cramjam, from the
#      package index pip is configured with), packed as Spark's --archives expects. About 100 MB;
#      a few minutes to build the first time, nothing after that until the sources change;
#   2. runs
#        spark-submit --master "${MASTER:-local[*]}" \
#            --archives deploy/build/pageindex-env-KEY.tar.gz#environment \
#            --conf spark.pyspark.python=./environment/bin/python \
#            --conf spark.pyspark.driver.python=deploy/build/pageindex-env-KEY/bin/python \
#            $PAGEINDEX_SUBMIT_ARGS jobs/retrofit_job.py JOB_ARGS...
#      so executors (and, in cluster deploy mode, the driver) run the shipped environment's
#      Python, and in client deploy mode the driver runs the same environment unpacked here. With a
#      local master nothing is shipped: driver and workers run the unpacked environment.
#      (exec, so the exit status is spark-submit's: in local and client deploy mode that is the job's
#      own status: 0 ok, 1 a failure a retry may mend, 2 usage/configuration error, 3 files no retry
#      can mend; in cluster deploy mode spark-submit does not pass the job's code through: see the
#      driver log).
#   The job asks its executors at start which scan path they take and warns when it is the Arrow
#   fallback (2-3x the CPU); its --require-compiled makes that an error (exit 2).
#
# Environment:
#   MASTER                 Spark master: local[*] (default), yarn, k8s://https://HOST:PORT, spark://...
#   PAGEINDEX_SUBMIT_ARGS  extra spark-submit options, split like a shell command line (quotes work,
#                          nothing is expanded or executed), e.g.
#                          '--deploy-mode cluster --conf "spark.executor.extraJavaOptions=-Da=1 -Db=2"'.
#                          Deliberately not SPARK_SUBMIT_OPTS: Spark's launcher already reads that
#                          variable as JVM options for the spark-submit JVM itself.
#   PAGEINDEX_EXECUTOR_ENV what the executors get:
#                          build      (default) the packed environment above, through --archives;
#                          installed  nothing: the cluster's Python already has pageindex installed
#                                     (an image or bootstrap that ran pip install pageindex); set
#                                     PYSPARK_PYTHON if that Python is not the default;
#                          zip        deploy/build/pageindex.zip of the package's sources on
#                                     --py-files (PAGEINDEX_PY_FILES overrides it), over the
#                                     executors' own pyarrow, numpy, fsspec and s3fs. Compiled
#                                     modules cannot load from a zip: executors then scan with the
#                                     Arrow fallback, at 2-3x the CPU.
#   PAGEINDEX_PACKAGE      build: install this instead of a wheel built from the checkout (a wheel
#                          file, or a requirement such as pageindex==1.2.3 from your package index);
#                          needed where there is no setup.py (a directory written by pageindex-deploy).
#   PAGEINDEX_PIP_ARGS     build: more `pip install` arguments for the environment, split like a
#                          shell command line (--index-url URL, --constraint FILE, --find-links DIR).
#   PAGEINDEX_DRY_BUILD=1  same as --dry-build: build what is shipped, print the command, submit nothing.
#   PAGEINDEX_APP          application to submit (default: <repo>/jobs/retrofit_job.py); for k8s
#                          cluster mode typically local:///opt/pageindex/jobs/retrofit_job.py (in the image).
#   PAGEINDEX_PY_FILES     zip: what to pass to --py-files (default: the freshly built zip).
#   SPARK_SUBMIT           explicit path of spark-submit. Otherwise: $SPARK_HOME/bin/spark-submit,
#                          then spark-submit on PATH, then the bin/ of the pyspark package importable by
#                          $PYTHON.
#   PYTHON                 Python that builds the environment (its venv links to this interpreter)
#                          and locates pyspark (default: <repo>/.venv/bin/python if present, else
#                          python3). With PAGEINDEX_EXECUTOR_ENV=installed or zip, a local[*] master
#                          and PYSPARK_PYTHON unset, it is also exported as PYSPARK_PYTHON.
#
# What executors need:
#   build: the Python the environment was built with, at the same path, on every node (the venv's
#      bin/python is a link to it, as with venv-pack): build on a machine like the nodes (same OS,
#      CPU architecture and Python at the same path, e.g. the cluster's image, or EMR's
#      /usr/bin/python3 with PYTHON=/usr/bin/python3). Everything else travels in the archive:
#      Spark (>= 3.1) unpacks spark.archives into each executor's working directory on standalone,
#      YARN and Kubernetes clusters.
#   installed: Python >= 3.10 with pageindex installed (pip install pageindex: the wheel carries the
#      compiled kernels; its dependencies come with it), e.g. in a Spark-on-Kubernetes image
#      (spark.kubernetes.container.image), an EMR bootstrap action or a Dataproc initialization
#      action; PYSPARK_PYTHON pointing at that python if it is not the default python3.
#   zip: Python >= 3.10 with pyarrow, numpy, fsspec, s3fs and cramjam installed.
#   pageindex reads and writes through fsspec/s3fs, not Hadoop's FileSystem, so no hadoop-aws jars.
#
# Kubernetes (MASTER=k8s://https://APISERVER:PORT): set --conf spark.kubernetes.container.image=IMAGE
#   plus spark.kubernetes.authenticate.driver.serviceAccountName for a service account allowed to
#   create executor pods (on EKS, annotate it for IRSA so s3fs finds S3 credentials). In cluster
#   deploy mode local files (the archive, the job script) are only shipped when
#   spark.kubernetes.file.upload.path is set (written through Hadoop's FileSystem, so s3a:// there
#   needs hadoop-aws); simpler is an image with pageindex installed (PAGEINDEX_EXECUTOR_ENV=installed)
#   and the job script in it (PAGEINDEX_APP=local:///opt/pageindex/jobs/retrofit_job.py).
set -euo pipefail

usage() {
    sed -n '2,/^set -euo pipefail$/{/^set -euo pipefail$/d;s/^# \{0,1\}//;p;}' "${BASH_SOURCE[0]}"
}

die() {
    echo "spark-submit.sh: error: $*" >&2
    exit 2
}

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/.." && pwd)"

dry_build="${PAGEINDEX_DRY_BUILD:-0}"
case "$dry_build" in
    1 | true | yes) dry_build=1 ;;
    *) dry_build=0 ;;
esac

# Only leading arguments belong to the wrapper; the first other argument (or --) starts the job's.
while [ "$#" -gt 0 ]; do
    case "$1" in
        --dry-build) dry_build=1; shift ;;
        -h | --help) usage; exit 0 ;;
        --) shift; break ;;
        *) break ;;
    esac
done

if [ -n "${PYTHON:-}" ]; then
    python="$PYTHON"
elif [ -x "$repo_root/.venv/bin/python" ]; then
    python="$repo_root/.venv/bin/python"
else
    python="python3"
fi
command -v "$python" >/dev/null 2>&1 || die "python not found: $python (set PYTHON)"

app="${PAGEINDEX_APP:-$repo_root/jobs/retrofit_job.py}"

# ------------------------------------------------------------------ check the job's arguments
# Exit 100: this python cannot import pageindex (a thin client, say); the job checks them itself.
check_job_args() {
    PYTHONPATH="$repo_root${PYTHONPATH:+:$PYTHONPATH}" "$python" - "$@" <<'PY'
import sys
try:
    from pageindex.job.config import check_argv
except ImportError:
    sys.exit(100)
sys.exit(check_argv(sys.argv[1:]))
PY
}

case "$app" in
    */retrofit_job.py)
        if [ "$dry_build" != 1 ]; then
            status=0
            check_job_args "$@" || status=$?
            case "$status" in
                0)
                    for arg in "$@"; do
                        case "$arg" in -h | --help) exit 0 ;; esac  # the help is printed
                    done
                    ;;
                100) ;;
                *) exit "$status" ;;
            esac
        fi
        ;;
esac

# ------------------------------------------------------------------ check the settings
executor_env="${PAGEINDEX_EXECUTOR_ENV:-build}"
case "$executor_env" in
    build | installed | zip) ;;
    *) die "PAGEINDEX_EXECUTOR_ENV must be build, installed or zip, not: $executor_env" ;;
esac
extra_args=()
if [ -n "${PAGEINDEX_SUBMIT_ARGS:-}" ]; then
    split_py='
import shlex, sys
try:
    words = shlex.split(sys.argv[1])
except ValueError as exc:
    sys.exit(f"{exc}")
sys.stdout.write("".join(w + "\0" for w in words))'
    # Parse once to catch errors (unbalanced quotes); a process substitution's status is lost.
    "$python" -c "$split_py" "$PAGEINDEX_SUBMIT_ARGS" >/dev/null \
        || die "cannot parse PAGEINDEX_SUBMIT_ARGS: $PAGEINDEX_SUBMIT_ARGS"
    mapfile -d '' -t extra_args < <("$python" -c "$split_py" "$PAGEINDEX_SUBMIT_ARGS")
fi

# ------------------------------------------------------------------ build what executors run
build_dir="$script_dir/build"
pkg_dir="$repo_root/pageindex"
[ -f "$pkg_dir/__init__.py" ] || die "package not found: $pkg_dir/__init__.py"
mkdir -p "$build_dir"

if [ "$executor_env" = build ]; then
    [ -f "$script_dir/pack_env.py" ] || die "not found: $script_dir/pack_env.py"
    if [ ! -f "$repo_root/setup.py" ] && [ -z "${PAGEINDEX_PACKAGE:-}" ]; then
        die "no setup.py in $repo_root to build the pageindex wheel from: set PAGEINDEX_PACKAGE to the wheel or requirement to install (e.g. pageindex==VERSION from your package index), or PAGEINDEX_EXECUTOR_ENV=installed"
    fi
    # Two lines: the archive, and the same environment unpacked here (the local driver's Python).
    built="$("$python" "$script_dir/pack_env.py" "$repo_root" "$build_dir" \
        --package="${PAGEINDEX_PACKAGE:-}" --pip-args="${PAGEINDEX_PIP_ARGS:-}")" || {
        # Often the package index out of reach: exit 1, as for a failure a retry may mend.
        echo "spark-submit.sh: error: could not build the executors' environment (deploy/pack_env.py, above)" >&2
        exit 1
    }
    env_archive="$(printf '%s\n' "$built" | sed -n 1p)"
    env_dir="$(printf '%s\n' "$built" | sed -n 2p)"
fi

zip_path="$build_dir/pageindex.zip"
if [ "$executor_env" = zip ]; then
"$python" - "$repo_root" "$zip_path" <<'PY'
import hashlib
import os
import sys
import zipfile

repo_root, zip_path = sys.argv[1], sys.argv[2]
FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # earliest timestamp a zip entry can hold

entries = []
for dirpath, dirnames, filenames in os.walk(os.path.join(repo_root, "pageindex")):
    dirnames[:] = [d for d in dirnames if d != "__pycache__" and not d.startswith(".")]
    for name in filenames:
        if name.startswith(".") or name.endswith((".pyc", ".pyo")):
            continue
        full = os.path.join(dirpath, name)
        entries.append((os.path.relpath(full, repo_root).replace(os.sep, "/"), full))
entries.sort()

# One temporary name per builder: two submits building at once (two DAG tasks on one host)
# each replace the zip atomically with the same bytes.
tmp_path = f"{zip_path}.{os.getpid()}.tmp"
with zipfile.ZipFile(tmp_path, "w") as zf:
    for arcname, full in entries:
        info = zipfile.ZipInfo(arcname, date_time=FIXED_TIME)
        info.create_system = 3  # unix, so external_attr is read as a mode
        info.external_attr = 0o100644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        with open(full, "rb") as fh:
            zf.writestr(info, fh.read(), compresslevel=9)
os.replace(tmp_path, zip_path)

with open(zip_path, "rb") as fh:
    digest = hashlib.sha256(fh.read()).hexdigest()
print(f"built {zip_path} ({len(entries)} files, sha256 {digest})", file=sys.stderr)
PY
fi

# ------------------------------------------------------------------ assemble the command
master="${MASTER:-local[*]}"

find_spark_submit() {
    if [ -n "${SPARK_SUBMIT:-}" ]; then
        printf '%s\n' "$SPARK_SUBMIT"
        return 0
    fi
    if [ -n "${SPARK_HOME:-}" ] && [ -x "$SPARK_HOME/bin/spark-submit" ]; then
        printf '%s\n' "$SPARK_HOME/bin/spark-submit"
        return 0
    fi
    if command -v spark-submit >/dev/null 2>&1; then
        command -v spark-submit
        return 0
    fi
    local pyspark_dir
    if pyspark_dir="$("$python" -c 'import pyspark, os; print(os.path.dirname(pyspark.__file__))' 2>/dev/null)" \
        && [ -x "$pyspark_dir/bin/spark-submit" ]; then
        printf '%s\n' "$pyspark_dir/bin/spark-submit"
        return 0
    fi
    return 1
}

if spark_submit="$(find_spark_submit)"; then
    :
elif [ "$dry_build" = 1 ]; then
    spark_submit="spark-submit"
    echo "spark-submit.sh: warning: spark-submit not found (SPARK_HOME, PATH, pyspark for $python)" >&2
else
    die "spark-submit not found: set SPARK_HOME or SPARK_SUBMIT, put spark-submit on PATH, or install pyspark for $python"
fi

is_local=0
case "$master" in
    local | local\[*) is_local=1 ;;
esac
# The driver runs on the cluster in cluster deploy mode: it uses the shipped environment too.
cluster_mode=0
previous=""
for arg in ${extra_args[@]+"${extra_args[@]}"}; do
    case "$previous=$arg" in
        --deploy-mode=cluster | *=--deploy-mode=cluster | *=spark.submit.deployMode=cluster) cluster_mode=1 ;;
    esac
    previous="$arg"
done

shipped=()
case "$executor_env" in
    build)
        if [ "$is_local" = 1 ]; then
            shipped=(--conf "spark.pyspark.python=$env_dir/bin/python")
        else
            shipped=(--archives "$env_archive#environment" --conf spark.pyspark.python=./environment/bin/python)
            if [ "$cluster_mode" = 0 ]; then
                shipped+=(--conf "spark.pyspark.driver.python=$env_dir/bin/python")
            fi
        fi
        ;;
    zip) shipped=(--py-files "${PAGEINDEX_PY_FILES:-$zip_path}") ;;
esac

cmd=("$spark_submit" --master "$master" ${shipped[@]+"${shipped[@]}"} ${extra_args[@]+"${extra_args[@]}"} "$app" "$@")

if [ "$dry_build" = 1 ]; then
    case "$app" in
        *://*) ;;
        *) [ -f "$app" ] || echo "spark-submit.sh: warning: application not found: $app" >&2 ;;
    esac
    printf 'would run:'
    printf ' %q' "${cmd[@]}"
    printf '\n'
    exit 0
fi

case "$app" in
    *://*) ;;
    *) [ -f "$app" ] || die "application not found: $app (set PAGEINDEX_APP)" ;;
esac

if [ "$is_local" = 1 ] && [ "$executor_env" != build ]; then
    # Local mode: driver and executors run here, so check the python they will use.
    if [ -z "${PYSPARK_PYTHON:-}" ]; then
        PYSPARK_PYTHON="$(command -v "$python")"
        export PYSPARK_PYTHON
    fi
    if [ "$executor_env" = installed ]; then
        needs="import pageindex"
        lacks="pageindex installed"
    else
        needs="import pyarrow, numpy, fsspec, s3fs"
        lacks="pyarrow, numpy, fsspec and s3fs"
    fi
    "$PYSPARK_PYTHON" -c '
import sys
if sys.version_info < (3, 10):
    sys.exit("Python >= 3.10 is required, found " + sys.version.split()[0])
exec(sys.argv[1])
' "$needs" || die "PYSPARK_PYTHON=$PYSPARK_PYTHON lacks Python >= 3.10 with $lacks"
fi

exec "${cmd[@]}"
