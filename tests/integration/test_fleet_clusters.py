"""A fleet on two real local Kafka clusters (this module's own, three brokers each), two configs in one folder
sharing one run root: a drain on one cluster from the CLI leaves the other untouched (its partitions, its
throttles, its pools), each cluster's run folders, execution locks and pool overrides stay its own, and a plan on
the other cluster still plans the broker the first one drained; `runs --all` lists each run under its cluster."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kafka_rebalancer.kafka_admin import ClusterAdmin, KafkaConnection
from tests.helpers import REPO, running_cluster, write_config
from tests.integration.conftest import assert_untouched_by_execution
from tools.demo_workload import TopicSpec, create_topics, produce

pytestmark = pytest.mark.kafka
CLUSTERS = ("fleet-a", "fleet-b")
TOPIC = TopicSpec("fleet-t", [[1, 2], [2, 3], [3, 1], [1, 3], [2, 1], [3, 2]], [256] * 6)
DRAINED = 3


def cluster_config(name: str, bootstrap: str, runs: Path) -> dict[str, Any]:
    body = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    body["cluster"].update({"name": name, "bootstrap_servers": bootstrap, "airflow_connection_id": f"kafka_{name}",
                            "kafka_libs": str(REPO / ".cache" / "kafka-libs")})
    body.update({"run_root": str(runs), "metrics": {"source": "none"},
                 "capacity": {"default": {"disk_bytes": "256MiB"}}, "pools": {"pool-a": {"brokers": [1, 2, 3]}},
                 "topic_pools": [{"topics": "*", "pool": "pool-a"}]})
    return body


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("fleet-clusters")
    base = os.environ.get("KAFKA_REBALANCER_TEST_CLUSTER", "pytest")
    with running_cluster(f"{base}-{CLUSTERS[0]}", n_brokers=3) as first, \
            running_cluster(f"{base}-{CLUSTERS[1]}", n_brokers=3) as second:
        bootstrap = {}
        for name, cluster in zip(CLUSTERS, (first, second), strict=True):
            bootstrap[name] = cluster.load().bootstrap_servers
            write_config(root / "clusters" / f"{name}.yaml", cluster_config(name, bootstrap[name], root / "runs"))
            create_topics(bootstrap[name], [TOPIC])
            produce(bootstrap[name], [TOPIC])
        yield {"folder": root / "clusters", "runs": root / "runs", "bootstrap": bootstrap}


def cli(fleet: dict[str, Any], command: str, *args: str, cluster: str | None = None) -> str:
    where = ["--config", str(fleet["folder"] / f"{cluster}.yaml")] if cluster else []
    result = subprocess.run([str(Path(sys.executable).parent / "kafka-rebalancer"), command, *where, *args],
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return result.stdout


def assignment(bootstrap: str) -> dict[tuple[str, int], list[int]]:
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        return {(p.topic, p.partition): p.replicas for p in admin.describe_partitions()}


def run_folders(fleet: dict[str, Any], cluster: str) -> list[str]:
    folder = fleet["runs"] / cluster
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")) \
        if folder.is_dir() else []


def test_fleet_drain_on_one_cluster_leaves_the_other_untouched(fleet: dict[str, Any]) -> None:
    a, b = CLUSTERS
    before_b = assignment(fleet["bootstrap"][b])
    out = cli(fleet, "drain", "--brokers", str(DRAINED), "--reason", "fleet test", "--apply", "--yes", cluster=a)
    assert "pool override recorded" in out
    assert [k for k, replicas in assignment(fleet["bootstrap"][a]).items() if DRAINED in replicas] == []
    assert assignment(fleet["bootstrap"][b]) == before_b
    assert_untouched_by_execution(fleet["bootstrap"][b], [TOPIC.name])
    # One run root, each cluster's state its own: the drain's run folder, lock and override are a's.
    assert len(run_folders(fleet, a)) == 1 and run_folders(fleet, b) == []
    assert sorted(p.name for p in (fleet["runs"] / ".locks").iterdir()) == [f"{a}.pool-a.lock"]
    assert (fleet["runs"] / a / "pool_overrides.json").is_file()
    assert not (fleet["runs"] / b / "pool_overrides.json").exists()
    assert f"drained: broker {DRAINED}" in cli(fleet, "pools", cluster=a)
    assert "drained" not in cli(fleet, "pools", cluster=b)


def test_fleet_a_plan_on_the_other_cluster_keeps_its_own_pools(fleet: dict[str, Any]) -> None:
    a, b = CLUSTERS
    cli(fleet, "snapshot", "--run-id", "cli__fleet-b-plan", cluster=b)
    cli(fleet, "plan", "--run-id", "cli__fleet-b-plan", cluster=b)
    summary = yaml.safe_load((fleet["runs"] / b / "cli__fleet-b-plan" / "plan" / "summary.json").read_text())
    assert summary["cluster"] == b
    assert [broker["broker_id"] for broker in summary["pools"]["pool-a"]["brokers"]] == [1, 2, DRAINED]
    assert run_folders(fleet, b) == ["cli__fleet-b-plan"] and len(run_folders(fleet, a)) == 1
    rows = cli(fleet, "runs", "--all", "--config-dir", str(fleet["folder"])).splitlines()[1:]
    assert [(row.split()[0], row.split()[1].split("__")[1]) for row in rows if row.strip()] == [
        (b, "fleet-b-plan"), (a, "drain-brokers")]  # newest first, each under its cluster
