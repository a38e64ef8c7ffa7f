# pageindex developer entry points. Everything runs inside ./.venv.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.pageindex-installed

.PHONY: env test test-fast run bench bench-quick clean distclean check-java

env: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

# Re-install only when the package definition changes.
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

test: env
	$(PY) -m pytest -q tests

# The unit layer: no Spark, no S3 server, no fuzzing, nothing slow (markers in pyproject.toml).
test-fast: env
	$(PY) -m pytest -q -m "not spark and not s3 and not fuzz and not slow" tests

check-java:
	@if ! command -v java >/dev/null 2>&1 && [ ! -x "$${JAVA_HOME:-/nonexistent}/bin/java" ]; then \
		echo "error: Java (17+) is required for the Spark parts of pageindex but 'java' is not on PATH." >&2; \
		echo "  Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless" >&2; \
		echo "  or set JAVA_HOME to an existing JDK/JRE 17 installation." >&2; \
		exit 1; \
	fi

run: env check-java
	$(PY) jobs/demo.py

# BENCH_ARGS: more options, e.g. BENCH_ARGS='--reflink-dir /mnt/xfs' (see bench/README.md).
bench: env
	$(PY) -m bench.run $(BENCH_ARGS)

bench-quick: env
	$(PY) -m bench.run --quick

clean:
	rm -rf build dist *.egg-info .pytest_cache spark-warehouse metastore_db derby.log
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
