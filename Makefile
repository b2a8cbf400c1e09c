# s3commit_sdk: everything runs from a local virtualenv built from pyproject.toml.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

export SPARK_LOCAL_IP := 127.0.0.1
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: system-deps setup demo test faults lint format clean bench bench-quick bench-commit

setup: $(STAMP)

# Java for PySpark 4 and Debian's chromium for the browser test, from apt when missing.
system-deps:
	@if ! command -v java >/dev/null || [ ! -x /usr/bin/chromium ]; then \
	  command -v apt-get >/dev/null || { echo "install Java 17 and chromium (see README)"; exit 1; }; \
	  export DEBIAN_FRONTEND=noninteractive; apt-get update -q; \
	  command -v java >/dev/null || apt-get install -y -q openjdk-17-jre-headless; \
	  [ -x /usr/bin/chromium ] || apt-get install -y -q chromium; \
	fi

$(STAMP): pyproject.toml | system-deps
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

demo: setup
	$(PY) -m s3commit_sdk.demo

test: setup
	$(PY) -m pytest -q -p no:cacheprovider tests notebooks --nbval-lax \
		--nbval-sanitize-with notebooks/nbval_sanitize.cfg

# The correctness suite of DESIGN section 5, printed as a matrix (it also runs in `make test`).
FAULT_TESTS := tests/test_recovery.py tests/test_exclusive_commit.py tests/test_continuity.py \
	tests/test_faultproxy.py tests/test_cluster_faults.py tests/test_secrets.py \
	tests/test_spark_write.py::test_task_failing_first_attempt_gives_exactly_once_output \
	tests/test_spark_write.py::test_task_failing_every_attempt_leaves_nothing \
	tests/test_spark_write.py::test_sibling_prefix_uploads_survive \
	tests/test_spark_write.py::test_awkward_destination_paths \
	tests/test_magic.py::test_writer_raising_mid_file_leaves_no_pending_upload \
	tests/test_magic.py::test_spark_task_failing_first_attempt_is_exactly_once \
	tests/test_magic.py::test_concurrent_jobs_keep_their_magic_trees_apart

faults: setup
	PYTHONPATH=tests $(PY) -m pytest -q -p no:cacheprovider -p faults_matrix $(FAULT_TESTS)

lint: setup
	$(VENV)/bin/ruff check s3commit_sdk tests bench
	$(VENV)/bin/ruff format --check s3commit_sdk tests bench

format: setup
	$(VENV)/bin/ruff format s3commit_sdk tests bench
	$(VENV)/bin/ruff check --fix s3commit_sdk tests bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache spark-warehouse

# Benchmarks (bench/run.py): results JSON in bench/results/, report + charts in bench/reports/.
bench: setup
	$(PY) -m bench.run --full --report-dir bench/reports

bench-quick: setup
	$(PY) -m bench.run --quick

bench-commit: setup
	$(PY) -m bench.commit_compare
