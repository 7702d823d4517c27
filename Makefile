# kafka-rebalancer: `make demo` runs the main job end to end, `make test` runs every test.
# Both set up what they need (venv, pinned dependencies, Kafka jars) and reuse it on the next run.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.DEFAULT_GOAL := help
.PHONY: help venv kafka-jars demo test test-unit lint cluster-up cluster-down cluster-status clean distclean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-15s %s\n", $$1, $$2}'

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), f"Python 3.11 needed, found {sys.version}"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $@

venv: $(STAMP) ## create .venv with the pinned dependencies (once)

kafka-jars: $(STAMP) ## fetch the Apache Kafka broker jars from Maven Central (once)
	$(PY) -m tools.local_kafka fetch

demo: $(STAMP) kafka-jars ## local cluster + skewed workload + one nightly DAG run that plans and executes
	$(PY) -m tools.demo

test: $(STAMP) kafka-jars ## the whole test suite (starts and stops its own local Kafka cluster)
	$(VENV)/bin/ruff check .
	$(PY) -m pytest

test-unit: $(STAMP) ## only the tests that need neither Kafka nor Airflow
	$(PY) -m pytest -m "not kafka and not airflow"

lint: $(STAMP) ## ruff
	$(VENV)/bin/ruff check .

cluster-up: $(STAMP) kafka-jars ## start the local demo cluster and leave it running
	$(PY) -m tools.local_kafka start --name demo

cluster-down: $(STAMP) ## stop the local demo cluster
	$(PY) -m tools.local_kafka stop --name demo

cluster-status: $(STAMP) ## show the local demo cluster's processes
	$(PY) -m tools.local_kafka status --name demo

clean: ## remove run folders and local cluster/Airflow state (keeps .venv and jars)
	-$(PY) -m tools.local_kafka stop --name demo 2>/dev/null
	rm -rf .state runs

distclean: clean ## also remove .venv and the jar cache
	rm -rf $(VENV) .cache
