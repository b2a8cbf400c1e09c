# s3commit_sdk: everything runs from a local virtualenv built from pyproject.toml.
#
# Each target installs only what it needs, once (a stamp per set of extras in the venv):
#   make demo / setup   Java 17+ and the venv with the spark, notebook, testing, delta, iceberg extras
#   make test           adds chromium, Ceph's radosgw (+ ceph-mon, ceph-osd), PostgreSQL, the dev,
#                       docs and bench extras (the suite builds the docs and tests the benchmarks' code)
#   make lint           the dev extra (ruff) only
#   make bench          adds Ceph's radosgw and the bench extra
# System packages come from apt-get when there is one; elsewhere make names them and stops.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python

export SPARK_LOCAL_IP := 127.0.0.1
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: system-deps-demo system-deps system-deps-bench setup demo test test-all test-fast faults lint \
	format clean bench bench-quick bench-commit docs wheel explore

# ---- system packages -----------------------------------------------------------------------
# Each need: a shell test that it is there, why it is needed, its Debian/Ubuntu packages and
# where macOS gets it.
HAVE_java = v=$$("$${JAVA_HOME:+$$JAVA_HOME/bin/}java" -version 2>&1 | \
	sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1); [ "$${v:-0}" -ge 17 ]
WHY_java  = Java 17 or newer, which PySpark 4 runs on
APT_java  = openjdk-17-jre-headless
MAC_java  = brew install openjdk@17, then put $$(brew --prefix openjdk@17)/bin on PATH

HAVE_chromium = [ -x /usr/bin/chromium ]
WHY_chromium  = chromium, for the browser test (tests/test_browser.py drives /usr/bin/chromium)
APT_chromium  = chromium
MAC_chromium  = brew install --cask chromium, or Google Chrome; the test looks for \
	/usr/bin/chromium, so there run it with S3COMMIT_SKIP_BROWSER=1

HAVE_rgw = command -v radosgw && command -v ceph-mon && command -v ceph-osd
WHY_rgw  = the Ceph radosgw with a monitor and an OSD: the second S3 server of the test suite
APT_rgw  = --no-install-recommends ceph-mon ceph-osd radosgw
MAC_rgw  = no Homebrew package: run the suite on moto alone, S3COMMIT_TEST_ENDPOINTS=moto make test

HAVE_postgres = command -v initdb || for f in /usr/lib/postgresql/*/bin/initdb \
	/opt/homebrew/opt/postgresql@*/bin/initdb /usr/local/opt/postgresql@*/bin/initdb; do \
	[ -x "$$f" ] && break; done
WHY_postgres  = PostgreSQL's server: the Iceberg SQL catalog's database in the test suite
APT_postgres  = --no-install-recommends postgresql
MAC_postgres  = brew install postgresql@17 (testing/postgres.py finds its bin directory)

# What each target needs. The suite's RGW runs are skipped when S3COMMIT_TEST_ENDPOINTS names
# only moto, its browser test when S3COMMIT_SKIP_BROWSER=1.
DEMO_NEEDS  := java
TEST_NEEDS  := java postgres $(if $(filter 1,$(S3COMMIT_SKIP_BROWSER)),,chromium) \
	$(if $(findstring rgw,$(or $(S3COMMIT_TEST_ENDPOINTS),rgw)),rgw)
BENCH_NEEDS := java rgw

# $(call system_check,NEEDS): installs the missing NEEDS with apt-get (through sudo when not
# root), or, on a machine without apt-get, names their packages per platform and fails.
define system_check
@missing=; \
$(foreach n,$(1),if { $(HAVE_$(n)); } >/dev/null 2>&1; then :; else missing="$$missing $(n)"; fi; ) \
[ -z "$$missing" ] && exit 0; \
if command -v apt-get >/dev/null; then \
  apt="env DEBIAN_FRONTEND=noninteractive apt-get"; [ "$$(id -u)" = 0 ] || apt="sudo $$apt"; \
  $$apt update -q || exit 1; \
  $(foreach n,$(1),case "$$missing " in (*" $(n) "*) \
    echo 'make: installing $(WHY_$(n)): apt-get install $(APT_$(n))'; \
    $$apt install -y -q $(APT_$(n)) || exit 1;; esac; ) \
else \
  echo 'make: this machine has no apt-get; install these, then run make again:'; \
  $(foreach n,$(1),case "$$missing " in (*" $(n) "*) \
    echo '  - $(WHY_$(n))'; \
    echo '      Debian/Ubuntu: apt-get install $(APT_$(n))'; \
    echo '      macOS (Homebrew): $(MAC_$(n))';; esac; ) \
  exit 1; \
fi
endef

system-deps-demo:
	$(call system_check,$(DEMO_NEEDS))

# what `make test` needs (rgw.py's error message points here)
system-deps:
	$(call system_check,$(TEST_NEEDS))

system-deps-bench:
	$(call system_check,$(BENCH_NEEDS))

# ---- the virtualenv: one stamp per set of extras -------------------------------------------
EXTRAS_demo  := spark,notebook,testing,delta,iceberg
WHY_demo     := Spark, the widgets, the local S3 server, Delta and Iceberg output: make demo and the notebooks
EXTRAS_dev   := dev
WHY_dev      := pytest, nbval, papermill, voila, jupyterlab, playwright, ruff: the test suite and lint
AFTER_dev     = $(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
EXTRAS_docs  := docs
WHY_docs     := MkDocs, Material, mkdocs-jupyter, mkdocstrings: the documentation site
EXTRAS_bench := bench
WHY_bench    := matplotlib, awswrangler, py-spy: the benchmarks and their charts

$(PY):
	@echo "make: creating the virtualenv $(VENV) with $(PYTHON)"
	$(PYTHON) -m venv $(VENV) || { echo "make: $(PYTHON) -m venv failed; on Debian/Ubuntu: \
		apt-get install python3-venv"; exit 1; }
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.extras-%: pyproject.toml | $(PY)
	@echo "make: installing the extras [$(EXTRAS_$*)] into $(VENV): $(WHY_$*)"
	$(PY) -m pip install --quiet -e '.[$(EXTRAS_$*)]'
	$(AFTER_$*)
	touch $@

DEMO  := $(VENV)/.extras-demo
DEV   := $(VENV)/.extras-dev
DOCS  := $(VENV)/.extras-docs
BENCH := $(VENV)/.extras-bench

# ---- targets -------------------------------------------------------------------------------
setup: system-deps-demo $(DEMO)

demo: setup
	$(PY) -m s3commit_sdk.demo

SUITE := $(PY) -m pytest -q -p no:cacheprovider tests notebooks --nbval-lax --durations=30 \
	--nbval-sanitize-with notebooks/nbval_sanitize.cfg

# The suite CI runs: every test but those marked `long` (minutes each), on moto; on Ceph RGW
# the in-process tests with their first parameter set (tests/rgw_matrix.py).
test: system-deps $(DEMO) $(DEV) $(DOCS) $(BENCH)
	@echo "make test: the suite but its long tests, notebooks and browser on moto$(if $(filter rgw,$(TEST_NEEDS)), and Ceph RGW): about 60 minutes on 2 cores (make test-all: about 2 hours; make test-fast: about 13 minutes)"
	$(SUITE) -m "not long"

# make test and the tests marked `long`: Spark workers, executors and streams killed and
# restarted, the interrupt sweep at every request of job commit, the fault-schedule explorer.
test-all: system-deps $(DEMO) $(DEV) $(DOCS) $(BENCH)
	$(SUITE)

# The in-process tests on moto, about 13 minutes: no Spark, cluster, browser, notebook or RGW, and
# not the fault suite (its killed drivers and retry storms take minutes: `make faults`).
FAST := not spark and not cluster and not browser and not notebook and not rgw and not slow
test-fast: setup $(DEV)
	S3COMMIT_TEST_ENDPOINTS=moto $(PY) -m pytest -q -p no:cacheprovider tests \
		-m "$(FAST) and not fault"

# The correctness suite under injected faults (tests marked `fault`), printed as a matrix; it
# also runs in `make test` (but for its long tests) and `make test-all`.
faults: system-deps $(DEMO) $(DEV)
	PYTHONPATH=tests $(PY) -m pytest -q -p no:cacheprovider -p faults_matrix -m fault tests

# The documentation site (docs/, mkdocs.yml) into site/, strict: a broken link or a missing name
# fails it. tests/test_docs.py builds it too, so `make test` (CI) checks it.
docs: $(DEMO) $(DOCS)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

# The wheel to install on a cluster (Databricks, EMR): dist/s3commit_sdk-<version>-py3-none-any.whl
wheel: | $(PY)
	$(PY) -m pip wheel --quiet --no-deps --wheel-dir dist .

# The randomized fault-schedule explorer (tests/test_explorer.py, s3commit_sdk/testing/explorer.py):
# N random schedules per S3 server (default 200) instead of the fixed-seed budget `make faults`
# runs; SEED=... picks them, SUMMARY=... (default explore-summary.jsonl) gets one JSON line per
# server: schedules, steps, jobs, faults, kills, recoveries and each violation with its schedule.
explore: system-deps $(DEMO) $(DEV)
	S3COMMIT_EXPLORE_EXAMPLES=$(or $(N),200) \
	S3COMMIT_EXPLORE_SUMMARY=$(or $(SUMMARY),explore-summary.jsonl) \
	$(PY) -m pytest -q -p no:cacheprovider -s tests/test_explorer.py \
	$(if $(SEED),--hypothesis-seed=$(SEED))

lint: $(DEV)
	$(VENV)/bin/ruff check s3commit_sdk tests bench docs/hooks
	$(VENV)/bin/ruff format --check s3commit_sdk tests bench docs/hooks

format: $(DEV)
	$(VENV)/bin/ruff format s3commit_sdk tests bench docs/hooks
	$(VENV)/bin/ruff check --fix s3commit_sdk tests bench docs/hooks

clean:
	rm -rf $(VENV) build dist site explore-summary.jsonl *.egg-info .pytest_cache .ruff_cache spark-warehouse

# Benchmarks (bench/run.py), every scenario on Ceph RGW (the reference) and on moto: results JSON
# in bench/results/, report + charts in bench/reports/ (full run) or bench/results/ (quick).
bench: system-deps-bench $(DEMO) $(BENCH)
	$(PY) -m bench.run --full --report-dir bench/reports

# ENDPOINTS=rgw (or moto) runs it on one server (CI: rgw, the reference).
bench-quick: system-deps-bench $(DEMO) $(BENCH)
	$(PY) -m bench.run --quick $(if $(ENDPOINTS),--endpoints $(ENDPOINTS))

bench-commit: setup $(BENCH)
	$(PY) -m bench.commit_compare
