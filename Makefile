# s3commit_sdk: everything runs from a local virtualenv built from pyproject.toml.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

export SPARK_LOCAL_IP := 127.0.0.1
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: system-deps setup demo test test-fast faults lint format clean bench bench-quick bench-commit

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
	$(PY) -m pip install --quiet -e '.[spark,notebook,testing,delta,dev,bench]'
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

demo: setup
	$(PY) -m s3commit_sdk.demo

test: setup
	$(PY) -m pytest -q -p no:cacheprovider tests notebooks --nbval-lax \
		--nbval-sanitize-with notebooks/nbval_sanitize.cfg

# The in-process tests on moto, under 2 minutes: no Spark, cluster, browser, notebook or RGW, and
# not the fault suite (its killed drivers and retry storms take minutes: `make faults`).
FAST := not spark and not cluster and not browser and not notebook and not rgw and not slow
test-fast: setup
	S3COMMIT_TEST_ENDPOINTS=moto $(PY) -m pytest -q -p no:cacheprovider tests \
		-m "$(FAST) and not fault"

# The correctness suite under injected faults (tests marked `fault`), printed as a matrix; it
# also runs in `make test`.
faults: setup
	PYTHONPATH=tests $(PY) -m pytest -q -p no:cacheprovider -p faults_matrix -m fault tests

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
