"""docker-compose.yaml parses, has the services the product needs, every host the config and its Airflow
connections name is one of its services, and its Prometheus scrapes every broker's JMX exporter."""

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
            "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "prometheus"} <= services


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



def mounts(compose: dict, service: str) -> dict[str, str]:
    """Container path -> host path (or volume name) of a service's volumes."""
    return {v.split(":")[1]: v.split(":")[0] for v in compose["services"][service].get("volumes", [])}


def kafka_services(compose: dict) -> list[str]:
    return [s for s in compose["services"] if s.startswith("kafka-")]


def exporter_agent(compose: dict, service: str) -> tuple[str, str, str]:
    """The broker's -javaagent option: (agent jar, exporter port, rules file), container paths."""
    option = env_of(compose, service)["KAFKA_OPTS"]
    agent = re.fullmatch(r"-javaagent:(\S+)=(\d+):(\S+)", option)
    assert agent, f"{service}: KAFKA_OPTS {option!r} is not the exporter agent"
    return agent.group(1), agent.group(2), agent.group(3)


def test_every_broker_runs_the_exporter_agent_with_the_repo_rules(compose: dict) -> None:
    download = compose["services"]["jmx-exporter-agent"]["command"][0]
    pinned = re.search(r"<jmx-exporter.version>(.+)</jmx-exporter.version>",
                       (REPO / "tools/kafka/jmx_exporter/pom.xml").read_text()).group(1)
    assert f"/jmx_prometheus_javaagent/{pinned}/jmx_prometheus_javaagent-{pinned}.jar" in download
    for service in kafka_services(compose):
        jar, _, rules = exporter_agent(compose, service)
        folder, jar_name = jar.rsplit("/", 1)
        volumes = mounts(compose, service)
        assert volumes[folder] == "jmx-exporter-agent" and f"-o /agent/{jar_name} " in download
        assert volumes[rules] == "./tools/kafka/jmx_exporter/rules.yaml" and (REPO / volumes[rules]).exists()
        assert compose["services"][service]["depends_on"]["jmx-exporter-agent"] == {
            "condition": "service_completed_successfully"}


def test_prometheus_scrapes_each_broker_labelled_with_its_node_id(compose: dict) -> None:
    prometheus = compose["services"]["prometheus"]
    assert prometheus["image"].startswith("prom/prometheus:")
    config = yaml.safe_load((REPO / mounts(compose, "prometheus")["/etc/prometheus/prometheus.yml"]).read_text())
    [job] = config["scrape_configs"]
    assert job["job_name"] == "kafka"
    scraped = {group["labels"]["broker_id"]: target for group in job["static_configs"] for target in group["targets"]}
    exporters = {env_of(compose, s)["KAFKA_NODE_ID"]: f"{s}:{exporter_agent(compose, s)[1]}"
                 for s in kafka_services(compose)}
    assert scraped == exporters
    assert set(prometheus["depends_on"]) == set(kafka_services(compose))
