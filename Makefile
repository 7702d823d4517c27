# kafka-rebalancer: `make demo` runs the main job end to end, `make test` runs every test.
# Both set up what they need (venv, pinned dependencies, Kafka jars) and reuse it on the next run.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))
# The plan job's driver JVM starts from this class-data archive (tools/jvm_archive.py; built by `jvm-archive`).
export KAFKA_REBALANCER_JVM_ARCHIVE := $(abspath .cache/jvm/plan-driver.jsa)

.DEFAULT_GOAL := help
.PHONY: help venv kafka-jars jvm-archive browser prometheus demo test test-unit lint bench bench-optimum bench-vs bench-shapes bench-execute cluster-up cluster-down airflow-up airflow-down cluster-status spark-up spark-down \
	clean distclean
PACKAGE_ZIP := dist/kafka_rebalancer.zip
# pytest workers (pytest-xdist): the session's Airflow tests in one, its other Kafka tests in another, everything
# else wherever a worker is free (tests/conftest.py groups them); 0 runs the suite in one process.
TEST_WORKERS ?= 3

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-15s %s\n", $$1, $$2}'

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), f"Python 3.11 needed, found {sys.version}"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $@

venv: $(STAMP) ## create .venv with the pinned dependencies (once)

$(PACKAGE_ZIP): $(STAMP) $(shell find src -name '*.py')
	$(PY) -m tools.package_zip $@

kafka-jars: $(STAMP) ## fetch the Apache Kafka broker jars from Maven Central (once)
	$(PY) -m tools.local_kafka fetch

jvm-archive: $(STAMP) ## class-data archive of the plan job's driver JVM (once per Java and Spark install)
	$(PY) -m tools.jvm_archive

demo: $(STAMP) $(PACKAGE_ZIP) kafka-jars jvm-archive prometheus ## local cluster + skewed workload + one nightly DAG run that plans and executes
	$(PY) -m tools.demo

browser: $(STAMP) ## Debian's Chromium for the report's browser tests (apt-get, once)
	$(PY) -m tools.browser ensure

prometheus: $(STAMP) ## Debian's Prometheus server, which scrapes the local brokers' JMX exporters (apt-get, once)
	$(PY) -m tools.prometheus ensure

test: $(STAMP) $(PACKAGE_ZIP) kafka-jars jvm-archive browser prometheus ## the whole test suite (starts and stops its own local Kafka cluster)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup

test-unit: $(STAMP) ## only the tests that need neither Kafka, Airflow nor a browser
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup -m "not kafka and not airflow and not browser"

lint: $(STAMP) ## ruff, the layers of the package (import-linter) and its types (mypy)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

bench: $(STAMP) jvm-archive ## plan synthetic clusters at five scales, then against the exact optimum; writes bench/*.json and BENCHMARKS.md
	$(PY) -m bench.run
	$(PY) -m bench.optimum

bench-optimum: $(STAMP) jvm-archive ## the planner against the exact optimum (HiGHS MILP) on four 12-broker clusters
	$(PY) -m bench.optimum

bench-vs: $(STAMP) jvm-archive ## plan speed as a ratio against another checkout: make bench-vs BASELINE=../other [SCALES=single-200] [RUNS=3] [WARMUPS=1] [TAG=t TARGET=1.05] [WITHOUT_RECORD=1]
	@test -n "$(BASELINE)" || { echo "make bench-vs: set BASELINE to a checkout of the code to compare against" >&2; exit 2; }
	$(PY) -m bench.side_by_side --baseline "$(BASELINE)" $(if $(SCALES),--scales $(SCALES)) $(if $(RUNS),-n $(RUNS)) $(if $(WARMUPS),--warm-ups $(WARMUPS)) \
		$(if $(TAG),--tag $(TAG) --target $(TARGET)) $(if $(WITHOUT_RECORD),--without-record)

bench-shapes: $(STAMP) jvm-archive ## the planner on many cluster shapes, one factor at a time around a base (QUICK=1: 12-broker rows only); writes bench/shapes-results.json and BENCHMARKS.md
	$(PY) -m bench.shapes $(if $(QUICK),--quick)

bench-execute: $(STAMP) kafka-jars jvm-archive ## the executor on a real local 4-broker cluster, per execution order (ORDERS=a,b to choose): efficiency against the throttle-bound minimum, estimate error, ISR gate, traffic impact; writes bench/execute-results.json and BENCHMARKS.md
	$(PY) -m bench.execute $(if $(ORDERS),--orders $(ORDERS))

cluster-up: $(STAMP) kafka-jars ## start the local demo cluster and leave it running
	$(PY) -m tools.local_kafka start --name demo

airflow-up: $(STAMP) $(PACKAGE_ZIP) ## a local Airflow (UI and REST API on :8080) for the demo cluster and its Prometheus (KEEP_CLUSTER=1 make demo)
	KAFKA_REBALANCER_PROMETHEUS_URL="$$($(PY) -m tools.prometheus url --name demo)" \
	$(PY) -m tools.airflow_services start --config config/demo.yaml --bootstrap "$$($(PY) -m tools.local_kafka bootstrap --name demo)"

airflow-down: $(STAMP) ## stop the local Airflow
	$(PY) -m tools.airflow_services stop

cluster-down: $(STAMP) ## stop the local demo cluster
	$(PY) -m tools.local_kafka stop --name demo

cluster-status: $(STAMP) ## show the local demo cluster's processes
	$(PY) -m tools.local_kafka status --name demo

spark-up: $(STAMP) ## start a local Spark standalone cluster (master + 2 workers) and leave it running
	$(PY) -m tools.local_spark start --name demo

spark-down: $(STAMP) ## stop the local Spark standalone cluster
	$(PY) -m tools.local_spark stop --name demo

clean: ## remove run folders and local cluster/Airflow state (keeps .venv and jars)
	-$(PY) -m tools.local_kafka stop --name demo 2>/dev/null
	-$(PY) -m tools.local_spark stop --name demo 2>/dev/null
	rm -rf .state runs dist

distclean: clean ## also remove .venv and the jar cache
	rm -rf $(VENV) .cache
