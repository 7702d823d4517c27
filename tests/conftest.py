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
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


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
