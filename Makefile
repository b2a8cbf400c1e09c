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

# Java for PySpark 4, Debian's chromium for the browser test and Ceph's radosgw (with a monitor
# and an OSD) for the tests against a real S3 server, from apt when missing.
system-deps:
	@if ! command -v java >/dev/null || [ ! -x /usr/bin/chromium ] || ! command -v radosgw >/dev/null; then \
	  command -v apt-get >/dev/null || { echo "install Java 17, chromium and Ceph's radosgw (see README)"; exit 1; }; \
	  export DEBIAN_FRONTEND=noninteractive; apt-get update -q; \
	  command -v java >/dev/null || apt-get install -y -q openjdk-17-jre-headless; \
	  [ -x /usr/bin/chromium ] || apt-get install -y -q chromium; \
	  command -v radosgw >/dev/null || \
	    apt-get install -y -q --no-install-recommends ceph-mon ceph-osd radosgw; \
	fi

$(STAMP): pyproject.toml | system-deps
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,bench,delta]'
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

demo: setup
	$(PY) -m s3commit_sdk.demo

test: setup
	$(PY) -m pytest -q -p no:cacheprovider tests notebooks --nbval-lax \
		--nbval-sanitize-with notebooks/nbval_sanitize.cfg

# The correctness suite of DESIGN section 5, printed as a matrix (it also runs in `make test`).
FAULT_TESTS := tests/test_recovery.py tests/test_exclusive_commit.py tests/test_commit_truth.py \
	tests/test_interrupts.py tests/test_continuity.py \
	tests/test_faultproxy.py tests/test_cluster_faults.py tests/test_secrets.py \
	tests/test_spark_write.py::test_task_failing_first_attempt_gives_exactly_once_output \
	tests/test_spark_write.py::test_task_failing_every_attempt_leaves_nothing \
	tests/test_spark_write.py::test_sibling_prefix_uploads_survive \
	tests/test_spark_write.py::test_awkward_destination_paths \
	tests/test_magic.py::test_writer_raising_mid_file_leaves_no_pending_upload \
	tests/test_magic.py::test_spark_task_failing_first_attempt_is_exactly_once \
	tests/test_magic.py::test_concurrent_jobs_keep_their_magic_trees_apart \
	tests/test_magic.py::test_failed_pending_put_and_failed_abort_do_not_deadlock \
	tests/test_magic.py::test_stream_dropped_open_on_its_pool_worker_waits_for_nothing \
	tests/test_cli.py::test_job_must_be_a_full_uuid \
	tests/test_paths.py::test_nul_in_a_partition_value_is_escaped_and_reads_back \
	tests/test_paths.py::test_partition_key_over_1024_bytes_is_refused_naming_it \
	tests/test_paths.py::test_destinations_s3_cannot_carry_are_refused

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

# Benchmarks (bench/run.py), every scenario on Ceph RGW (the reference) and on moto: results JSON
# in bench/results/, report + charts in bench/reports/ (full run) or bench/results/ (quick).
bench: setup
	$(PY) -m bench.run --full --report-dir bench/reports

bench-quick: setup
	$(PY) -m bench.run --quick

bench-commit: setup
	$(PY) -m bench.commit_compare
