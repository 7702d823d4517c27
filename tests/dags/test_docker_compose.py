"""docker-compose.yaml parses, has the services the product needs, and every host the config and its Airflow
connections name is one of its services."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from kafka_rebalancer.config import load_config
from tests.helpers import REPO


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((REPO / "docker-compose.yaml").read_text())


def env_of(compose: dict, service: str) -> dict[str, str]:
    return {k: str(v) for k, v in compose["services"][service].get("environment", {}).items()}


def test_parses_and_has_the_services(compose: dict) -> None:
    services = set(compose["services"])
    assert {"postgres", "kafka-1", "kafka-2", "kafka-3", "spark-master", "spark-worker", "airflow-init",
            "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor"} <= services


def test_hosts_named_by_connections_are_services(compose: dict) -> None:
    services = set(compose["services"])
    env = env_of(compose, "airflow-scheduler")
    kafka = json.loads(env["AIRFLOW_CONN_KAFKA_REBALANCER_DOCKER"])
    hosts = {h.split(":")[0] for h in kafka["extra"]["bootstrap.servers"].split(",")}
    spark = json.loads(env["AIRFLOW_CONN_SPARK_REBALANCER"])
    hosts.add(re.match(r"spark://([^:]+):", spark["host"]).group(1))
    hosts.add(re.search(r"@([^/:]+)/", env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]).group(1))
    assert hosts <= services, hosts - services


def test_the_config_it_mounts_matches_it(compose: dict) -> None:
    env = env_of(compose, "airflow-scheduler")
    mounted = env["KAFKA_REBALANCER_CONFIG"]
    assert mounted.startswith("/opt/kafka-rebalancer/config/")
    config = load_config(REPO / "config" / mounted.rsplit("/", 1)[1])
    assert f"AIRFLOW_CONN_{config.cluster.airflow_connection_id.upper()}" in env
    node_ids = {int(env_of(compose, s)["KAFKA_NODE_ID"]) for s in compose["services"] if s.startswith("kafka-")}
    assert {b for pool in config.pools.values() for b in pool.brokers} == node_ids
    assert any(v.endswith(":/opt/kafka-rebalancer/config") for v in compose["services"]["airflow-scheduler"]["volumes"])
