"""The snapshot of a real cluster and the CLI's steps without Airflow (execute is a dry run unless --apply)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_rebalancer.config import load_config
from kafka_rebalancer.errors import KafkaUnreachableError
from kafka_rebalancer.kafka_admin import ClusterAdmin, KafkaConnection
from kafka_rebalancer.run_folder import RunFolder
from kafka_rebalancer.snapshot import read_snapshot
from tests.integration.conftest import delete_topics, demo_config
from tools.demo_workload import TopicSpec, create_topics, produce

pytestmark = pytest.mark.kafka
TOPICS = [TopicSpec("audit", [[1, 2], [2, 1], [1, 2], [2, 1], [1, 2], [1, 2]], [2048, 1024, 512, 512, 256, 256]),
          TopicSpec("metrics", [[4, 5], [5, 4], [4, 5], [5, 4]], [1536, 768, 512, 256])]


@pytest.fixture(scope="module")
def cli_env(kafka_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    bootstrap = kafka_cluster.load().bootstrap_servers
    create_topics(bootstrap, TOPICS)
    produce(bootstrap, TOPICS)
    root = tmp_path_factory.mktemp("cli")
    config_path = demo_config(root, topic_pools=[{"topics": "audit*", "pool": "pool-a"},
                                                 {"topics": "metrics*", "pool": "pool-b"}])
    yield {"bootstrap": bootstrap, "config_path": config_path, "config": load_config(config_path)}
    delete_topics(bootstrap, [t.name for t in TOPICS])


def cli(env: dict, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [str(Path(sys.executable).parent / "kafka-rebalancer"), *args[:1], "--config", str(env["config_path"]),
           *args[1:]]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


def assignment(bootstrap: str) -> dict:
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        return {(p.topic, p.partition): p.replicas for p in admin.describe_partitions([t.name for t in TOPICS])}


def test_snapshot_of_the_real_cluster(cli_env: dict) -> None:
    cli(cli_env, "snapshot", "--run-id", "snap", "--bootstrap-servers", cli_env["bootstrap"])
    tables, manifest = read_snapshot(RunFolder(cli_env["config"].run_dir("snap")))
    brokers = tables.brokers.set_index("broker_id")
    assert sorted(brokers.index) == [1, 2, 3, 4, 5, 6] and brokers["alive"].all()
    assert brokers.loc[1, "rack"] == "rack-a" and brokers.loc[5, "rack"] == "rack-b"
    assert brokers.loc[6, "disk_capacity_bytes"] == 512 * 2**20  # from the Cruise Control capacity file
    audit = tables.partitions[tables.partitions["topic"] == "audit"].set_index("partition")
    assert list(audit.loc[0, "replicas"]) == [1, 2] and sorted(audit.loc[0, "isr"]) == [1, 2]
    assert audit.loc[0, "size_bytes"] > 2 * 2**20 and audit.loc[0, "topic_pool"] == "pool-a"
    replicas = tables.replicas[tables.replicas["topic"] == "audit"]
    assert (replicas["size_bytes"] > 0).all() and replicas["in_isr"].all()
    assert brokers.loc[1, "disk_used_bytes"] >= replicas[replicas["broker_id"] == 1]["size_bytes"].sum()
    assert manifest["rows"]["partitions"] >= len(audit)


def test_cli_plans_validates_and_dry_runs_without_touching_the_cluster(cli_env: dict) -> None:
    before = assignment(cli_env["bootstrap"])
    cli(cli_env, "snapshot", "--bootstrap-servers", cli_env["bootstrap"])
    assert "plan " in cli(cli_env, "plan").stdout
    assert "passed" in cli(cli_env, "validate").stdout
    out = cli(cli_env, "execute", "--bootstrap-servers", cli_env["bootstrap"]).stdout
    assert "dry run" in out and "--apply" in out
    time.sleep(1)
    assert assignment(cli_env["bootstrap"]) == before
    latest = (cli_env["config"].run_root / cli_env["config"].cluster.name / "LATEST").read_text().strip()
    dry = json.loads((cli_env["config"].run_dir(latest) / "execute" / "pool-a" / "dry_run.json").read_text())
    assert dry["dry_run"] and dry["moves"] and all(m["would"] == "start" for m in dry["moves"])
    listed = next(row.split() for row in cli(cli_env, "runs").stdout.splitlines() if row.startswith(latest))
    assert {"cli", "nightly", "dry-run", "dry", "run"} <= set(listed), listed
    shown = cli(cli_env, "show").stdout
    assert f"run {latest}" in shown and "execution pool-a: dry run only" in shown


def test_status_shows_band_status_per_pool(cli_env: dict) -> None:
    out = cli(cli_env, "status", "--bootstrap-servers", cli_env["bootstrap"]).stdout
    assert "pool pool-a" in out and "pool pool-b" in out and "reassignments in progress: 0" in out


def test_unreachable_bootstrap_names_the_address_and_the_wait() -> None:
    with pytest.raises(KafkaUnreachableError, match=r"no Kafka broker at 127\.0\.0\.1:1 answered within [23]s"):
        ClusterAdmin(KafkaConnection("127.0.0.1:1", request_timeout_s=2)).check_reachable()


def test_cli_reports_bad_input_without_a_traceback(cli_env: dict, tmp_path: Path) -> None:
    result = cli(cli_env, "snapshot", "--bootstrap-servers", "127.0.0.1:1", check=False)
    assert result.returncode == 3 and "error: no Kafka broker at 127.0.0.1:1" in result.stderr
    assert "Traceback" not in result.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: {name: x}\npools: {a: {brokers: [1]}}\ntopic_pools: [{topics: 'x*', pool: b}]\n")
    result = subprocess.run([str(Path(sys.executable).parent / "kafka-rebalancer"), "status", "--config", str(bad)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert f"error: {bad}: topic_pools[0].pool: unknown pool 'b' (known: a)" in result.stderr
