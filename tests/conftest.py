"""Shared fixtures: one Spark session for the whole run, and the real local Kafka cluster (started once per
session, stopped at the end; tests that need it never skip)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import running_cluster, write_config

REPO = Path(__file__).resolve().parents[1]
pytest_plugins = ["tests.sigterm"]
# `make test`'s three workers (pytest-xdist, --dist loadgroup) each take a group of modules at a time: the tests on
# the session's Airflow in one (with a Kafka cluster of that worker's own), the other tests on the session's Kafka
# cluster in another, in order, as without workers; a module of the integration and Spark tests, or a unit test,
# wherever a worker is free (each module starts its own cluster, Spark session or services once). Most of the
# services' tests wait on the cluster (grace periods, copies, looks) while the unit tests use the CPU: side by side
# they take about the longest of the three.
SESSION_GROUPS = (("shared_airflow", "session-airflow"), ("kafka_cluster", "session-kafka"))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not getattr(config.option, "loadgroup", False):  # a worker of --dist loadgroup; else nothing to group
        return
    from _pytest.nodeid import coerce_node_id

    # A module stays whole: one of its tests on the session's services takes the module along (test_jbod's own
    # cluster would otherwise start in two workers).
    group_of = {}
    for fixture, group in reversed(SESSION_GROUPS):  # the first that a module's tests use wins
        group_of |= {item.path: group for item in items if fixture in getattr(item, "fixturenames", ())}
    for item in items:
        if item.path in group_of:
            group = group_of[item.path]
        elif item.path.parent.name in ("integration", "spark", "dags"):
            group = item.path.stem
        else:
            continue
        # The "@group" suffix of the test's id is what xdist's loadgroup schedules by. xdist 3.8 writes it into
        # item._nodeid (from an xdist_group mark), which pytest 9's nodeid no longer reads: the groups were ignored
        # and both workers started the session's cluster under one name.
        item._id = coerce_node_id(f"{item.nodeid}@{group}")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    from kafka_rebalancer.spark_settings import plan_spark_conf

    log_config = REPO / "spark" / "conf" / "log4j2.properties"
    session = (SparkSession.builder.master("local[2]").appName("kafka-rebalancer-tests")
               .config("spark.ui.enabled", "false")
               .config(map=plan_spark_conf(f"-Dlog4j2.configurationFile={log_config}"))
               .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    yield session
    session.stop()


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[Any]:
    """The session's cluster of six brokers, shared by every test that can share it (the secured and the JBOD
    clusters are their modules' own: they differ in how the brokers are started)."""
    # Another name lets two test sessions run side by side on one machine (each cluster has its own state folder).
    with running_cluster(os.environ.get("KAFKA_REBALANCER_TEST_CLUSTER", "pytest")) as cluster:
        yield cluster


@pytest.fixture
def config_factory(tmp_path: Path) -> Callable[..., Any]:
    """Write a config file into tmp_path and load it: factory(body) -> RebalancerConfig."""
    from kafka_rebalancer.config import load_config

    def make(body: dict[str, Any], name: str = "config.yaml") -> Any:
        body = {"run_root": str(tmp_path / "runs"), **body}
        return load_config(write_config(tmp_path / name, body))

    return make
