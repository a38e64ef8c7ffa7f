#!/usr/bin/env bash
# deploy/spark-submit.sh: build the pageindex zip and submit jobs/retrofit_job.py with spark-submit.
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
# pageindex (this checkout's): --help and usage errors (exit 2) then need no zip and no JVM.
#
# What it does:
#   1. builds deploy/build/pageindex.zip from the pageindex/ package (deterministic: sorted entries,
#      fixed timestamps and permissions, no __pycache__), which spark-submit ships with --py-files;
#   2. runs
#        spark-submit --master "${MASTER:-local[*]}" --py-files deploy/build/pageindex.zip \
#            $PAGEINDEX_SUBMIT_ARGS jobs/retrofit_job.py JOB_ARGS...
#      (exec, so the exit status is spark-submit's: in local and client deploy mode that is the job's
#      own status: 0 ok, 1 a failure a retry may mend, 2 usage/configuration error, 3 files no retry
#      can mend; in cluster deploy mode spark-submit does not pass the job's code through: see the
#      driver log).
#
# Environment:
#   MASTER                 Spark master: local[*] (default), yarn, k8s://https://HOST:PORT, spark://...
#   PAGEINDEX_SUBMIT_ARGS  extra spark-submit options, split like a shell command line (quotes work,
#                          nothing is expanded or executed), e.g.
#                          '--deploy-mode cluster --conf "spark.executor.extraJavaOptions=-Da=1 -Db=2"'.
#                          Deliberately not SPARK_SUBMIT_OPTS: Spark's launcher already reads that
#                          variable as JVM options for the spark-submit JVM itself.
#   PAGEINDEX_DRY_BUILD=1  same as --dry-build: build the zip, print the command, submit nothing.
#   PAGEINDEX_APP          application to submit (default: <repo>/jobs/retrofit_job.py); for k8s
#                          cluster mode typically local:///opt/pageindex/jobs/retrofit_job.py (in the image).
#   PAGEINDEX_PY_FILES     what to pass to --py-files (default: the freshly built zip); for k8s cluster
#                          mode typically local:///opt/pageindex/pageindex.zip (in the image).
#   SPARK_SUBMIT           explicit path of spark-submit. Otherwise: $SPARK_HOME/bin/spark-submit,
#                          then spark-submit on PATH, then the bin/ of the pyspark package importable by
#                          $PYTHON.
#   PYTHON                 Python used to build the zip and to locate pyspark (default: <repo>/.venv/bin/python
#                          if present, else python3). With a local[*] master and PYSPARK_PYTHON unset, it is
#                          also exported as PYSPARK_PYTHON, so the driver and the local executors use it.
#
# What executors need:
#   Python >= 3.10 with pyarrow, numpy, fsspec and s3fs installed (the pageindex package itself is shipped
#   in the zip; it reads and writes through fsspec/s3fs, not Hadoop's FileSystem, so no hadoop-aws jars).
#   Ways to provide them:
#   a) the cluster image / bootstrap: EMR bootstrap action, Dataproc initialization action or custom image,
#      a Spark-on-Kubernetes image (spark.kubernetes.container.image) with
#        python3 -m pip install 'pyarrow>=15' numpy 'fsspec>=2024.3.0' 's3fs>=2024.3.0'
#      and PYSPARK_PYTHON pointing at that python if it is not the default python3;
#   b) a packed virtualenv shipped with --archives (YARN and Kubernetes), built on the same OS/arch and
#      Python minor version as the cluster nodes:
#        python3 -m venv pyenv && pyenv/bin/pip install 'pyarrow>=15' numpy 'fsspec>=2024.3.0' \
#            's3fs>=2024.3.0' venv-pack && pyenv/bin/venv-pack -o pyenv.tar.gz
#        # YARN, cluster deploy mode (the driver runs on the cluster too):
#        MASTER=yarn PAGEINDEX_SUBMIT_ARGS='--deploy-mode cluster --archives pyenv.tar.gz#environment
#            --conf spark.yarn.appMasterEnv.PYSPARK_PYTHON=./environment/bin/python
#            --conf spark.executorEnv.PYSPARK_PYTHON=./environment/bin/python' \
#            deploy/spark-submit.sh --table db.t --in-place
#        # client deploy mode: the driver runs here, so it uses a local python with the same packages:
#        PYSPARK_DRIVER_PYTHON=python3 PYSPARK_PYTHON=./environment/bin/python MASTER=yarn \
#            PAGEINDEX_SUBMIT_ARGS='--deploy-mode client --archives pyenv.tar.gz#environment' \
#            deploy/spark-submit.sh --input s3://bucket/data/ --in-place
#
# Kubernetes (MASTER=k8s://https://APISERVER:PORT): set --conf spark.kubernetes.container.image=IMAGE,
#   an image whose python has the packages above (and PYSPARK_PYTHON set if needed), plus
#   spark.kubernetes.authenticate.driver.serviceAccountName for a service account allowed to create
#   executor pods (on EKS, annotate it for IRSA so s3fs finds S3 credentials). In cluster deploy mode
#   local files are not shipped unless spark.kubernetes.file.upload.path is set (that path is written
#   through Hadoop's FileSystem, so s3a:// there would need hadoop-aws); simpler is to bake the job
#   script and the zip into the image and set PAGEINDEX_APP / PAGEINDEX_PY_FILES to local:// paths.
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

# ------------------------------------------------------------------ build the zip
build_dir="$script_dir/build"
zip_path="$build_dir/pageindex.zip"
pkg_dir="$repo_root/pageindex"
[ -f "$pkg_dir/__init__.py" ] || die "package not found: $pkg_dir/__init__.py"
mkdir -p "$build_dir"

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

# ------------------------------------------------------------------ assemble the command
py_files="${PAGEINDEX_PY_FILES:-$zip_path}"
master="${MASTER:-local[*]}"

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

cmd=("$spark_submit" --master "$master" --py-files "$py_files" ${extra_args[@]+"${extra_args[@]}"} "$app" "$@")

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

case "$master" in
    local | local\[*)
        # Local mode: driver and executors run here, so check the python they will use.
        if [ -z "${PYSPARK_PYTHON:-}" ]; then
            PYSPARK_PYTHON="$(command -v "$python")"
            export PYSPARK_PYTHON
        fi
        "$PYSPARK_PYTHON" -c '
import sys
if sys.version_info < (3, 10):
    sys.exit("Python >= 3.10 is required, found " + sys.version.split()[0])
import pyarrow, numpy, fsspec, s3fs
' || die "PYSPARK_PYTHON=$PYSPARK_PYTHON lacks Python >= 3.10 with pyarrow, numpy, fsspec and s3fs"
        ;;
esac

exec "${cmd[@]}"
