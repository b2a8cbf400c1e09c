# s3commit_sdk: everything runs from a local virtualenv built from pyproject.toml.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

export SPARK_LOCAL_IP := 127.0.0.1
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: setup demo test lint format clean bench-memory

setup: $(STAMP)

$(STAMP): pyproject.toml
	@command -v java >/dev/null || { echo "Java 17+ is required by PySpark 4 (apt-get install openjdk-17-jre-headless)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

demo: setup
	$(PY) -m s3commit_sdk.demo

test: setup
	$(PY) -m pytest -q -p no:cacheprovider tests notebooks --nbval-lax

lint: setup
	$(VENV)/bin/ruff check s3commit_sdk tests bench
	$(VENV)/bin/ruff format --check s3commit_sdk tests bench

format: setup
	$(VENV)/bin/ruff format s3commit_sdk tests
	$(VENV)/bin/ruff check --fix s3commit_sdk tests

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache spark-warehouse

bench-memory: setup
	$(PY) -m bench.magic_memory --size-mib 1024 --part 16M
