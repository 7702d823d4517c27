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
# The tests on the session's services (its Kafka cluster, its Airflow) run in one worker of `make test`'s two
# (pytest-xdist, --dist loadgroup), one after another as without workers; the other worker takes the rest, a
# module of the integration and Spark tests at a time (each starts its module's own cluster, Spark session or
# services once). Most of the services' tests wait on the cluster (grace periods, copies, looks) while the unit
# tests use the CPU: side by side they take about the longer of the two.
SESSION_SERVICES = frozenset({"kafka_cluster", "shared_airflow"})
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A module stays whole: one of its tests on the session's services takes the module along (test_jbod's own
    # cluster would otherwise start in both workers).
    on_services = {item.path for item in items if SESSION_SERVICES & set(getattr(item, "fixturenames", ()))}
    for item in items:
        if item.path in on_services:
            item.add_marker(pytest.mark.xdist_group("session-services"))
        elif item.path.parent.name in ("integration", "spark", "dags"):
            item.add_marker(pytest.mark.xdist_group(item.path.stem))


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
