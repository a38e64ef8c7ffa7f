# pageindex developer entry points. Everything runs inside ./.venv.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.pageindex-installed

.PHONY: env bench-env test test-fast run bench bench-quick docs docs-serve clean distclean check-java

env: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

# The compiled kernels' sources: the editable install builds them in place (setup.py).
KERNELS := $(shell find pageindex -name '*.pyx' -o -name '*.pxd')

# Re-install only when the package definition or a kernel's source changes.
$(STAMP): pyproject.toml setup.py $(KERNELS) | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# Test workers (pytest-xdist): TEST_WORKERS=auto is one per CPU, at most TEST_MAX_WORKERS (each
# worker imports everything and may start a Spark JVM); TEST_WORKERS=0 runs in this process.
# loadgroup keeps the tests that share a module fixture on one worker (tests/conftest.py).
TEST_WORKERS     ?= 2
TEST_MAX_WORKERS ?= 4
PYTEST_WORKERS   := -n $(TEST_WORKERS) --maxprocesses $(TEST_MAX_WORKERS) --dist loadgroup

# --durations: CI's log names the slowest tests, where its 40 minutes go.
test: env
	$(PY) -m pytest -q --durations=40 $(PYTEST_WORKERS) tests

# The unit layer: no Spark, no S3 server, no fuzzing, nothing slow (markers in pyproject.toml).
test-fast: env
	$(PY) -m pytest -q $(PYTEST_WORKERS) -m "not spark and not s3 and not fuzz and not slow" tests

check-java:
	@if ! command -v java >/dev/null 2>&1 && [ ! -x "$${JAVA_HOME:-/nonexistent}/bin/java" ]; then \
		echo "error: Java (17+) is required for the Spark parts of pageindex but 'java' is not on PATH." >&2; \
		echo "  Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless" >&2; \
		echo "  or set JAVA_HOME to an existing JDK/JRE 17 installation." >&2; \
		exit 1; \
	fi

run: env check-java
	$(PY) jobs/demo.py

# The benchmark measures the install users get: pageindex from its wheel with no extra (`pip install .`,
# the compiled kernels built in), in a venv of its own beside the tools it is compared with and the
# servers it starts. PYTHONSAFEPATH keeps the checkout's pageindex/ off sys.path; bench/ and tests/
# (its helpers) are found through a folder that links only those two.
BENCH_VENV  := .venv-bench
BENCH_PY    := $(BENCH_VENV)/bin/python
BENCH_STAMP := $(BENCH_VENV)/.pageindex-installed
BENCH_TOOLS := pyspark==4.3.0 pyarrow==26.0.1 'moto[server]' boto3 datafusion duckdb deltalake pytest
BENCH_RUN   := PYTHONSAFEPATH=1 PYTHONPATH=$(CURDIR)/$(BENCH_VENV)/src $(BENCH_PY)

bench-env: $(BENCH_STAMP)

$(BENCH_STAMP): pyproject.toml setup.py $(KERNELS) $(shell find pageindex -name '*.py')
	test -x $(BENCH_PY) || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_PY) -m pip install --quiet --upgrade pip
	$(BENCH_PY) -m pip install --quiet --force-reinstall --no-deps .
	$(BENCH_PY) -m pip install --quiet . $(BENCH_TOOLS)
	mkdir -p $(BENCH_VENV)/src
	ln -sfn $(CURDIR)/bench $(BENCH_VENV)/src/bench
	ln -sfn $(CURDIR)/tests $(BENCH_VENV)/src/tests
	touch $(BENCH_STAMP)

# BENCH_ARGS: more options, e.g. BENCH_ARGS='--reflink-dir /mnt/xfs' (see bench/README.md).
# bench.charts draws docs/img/*.svg from the RESULTS.md the run just wrote.
bench: bench-env
	$(BENCH_RUN) -m bench.run $(BENCH_ARGS)
	$(BENCH_RUN) -m bench.charts

bench-quick: bench-env
	$(BENCH_RUN) -m bench.run --quick

# The documentation site (mkdocs.yml, docs/) into site/; docs-serve previews it while you edit.
docs: env
	$(PY) -m mkdocs build --strict

docs-serve: env
	$(PY) -m mkdocs serve

clean:
	rm -rf build dist site *.egg-info .pytest_cache spark-warehouse metastore_db derby.log
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
