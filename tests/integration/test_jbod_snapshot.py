"""Log directories in the snapshot, on a real local cluster whose brokers each have two (`tools/local_kafka.py
--log-dirs 2`; README: JBOD): each directory's usage and its capacity from the capacity file, each replica's
directory, and a replica moving between directories (AlterReplicaLogDirs under the broker's intra-broker throttle)
counted once, where it is, with its future directory beside it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from kafka_rebalancer.config import load_config
from kafka_rebalancer.kafka_admin import ClusterAdmin, KafkaConnection
from kafka_rebalancer.run_folder import RunFolder
from kafka_rebalancer.snapshot import read_snapshot, take_snapshot
from tests.integration.conftest import demo_config, wait_until
from tools.demo_workload import TopicSpec, create_topics

pytestmark = [pytest.mark.kafka]

TOPIC = "jbod"
MIB = 2**20


@pytest.fixture(scope="module")
def jbod_cluster() -> Iterator[Any]:
    """Three brokers with two log directories each; stopped by its pids at the end."""
    from tools.local_kafka import LocalKafkaCluster

    cluster = LocalKafkaCluster("pytest-jbod")
    cluster.stop(quiet=True)
    cluster.start(3, log_dirs=2)
    try:
        yield cluster
    finally:
        cluster.stop(quiet=True)


def _intra_broker_throttle(bootstrap: str, broker: int, rate: int | None) -> None:
    op = AlterConfigOpType.SET if rate is not None else AlterConfigOpType.DELETE
    resource = ConfigResource(ResourceType.BROKER, str(broker), incremental_configs=[
        ConfigEntry("replica.alter.log.dirs.io.max.bytes.per.second", str(rate or ""), incremental_operation=op)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.incremental_alter_configs([resource]).values():
        future.result()


def _capacity_file(path: Path, cluster: Any) -> Path:
    """DISK per log dir, as Cruise Control's capacityJBOD.json gives it: 1 GiB and 3 GiB on every broker."""
    state = cluster.load()
    path.write_text(json.dumps({"brokerCapacities": [
        {"brokerId": str(node.node_id), "capacity": {
            "DISK": {str(d): str(size) for d, size in zip(cluster.log_dirs(node, state), (1024, 3072), strict=True)},
            "CPU": {"num.cores": "4"}, "NW_IN": "100000", "NW_OUT": "100000"}}
        for node in state.brokers]}))
    return path


def test_a_replica_moving_between_directories_counts_once_where_it_is(jbod_cluster: Any, tmp_path: Path) -> None:
    state = jbod_cluster.load()
    bootstrap = state.bootstrap_servers
    create_topics(bootstrap, [TopicSpec(TOPIC, [[1, 2], [2, 3]], [0, 0])])
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(12_000):  # about 12 MiB into partition 0
        producer.produce(TOPIC, b"x" * 1000, partition=0)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    config = load_config(demo_config(
        tmp_path, pools={"all": {"brokers": [1, 2, 3]}}, topic_pools=[{"topics": "*", "pool": "all"}],
        capacity={"cruise_control_file": str(_capacity_file(tmp_path / "capacity.json", jbod_cluster))}))
    broker_1 = next(n for n in state.brokers if n.node_id == 1)
    first, second = (str(d) for d in jbod_cluster.log_dirs(broker_1, state))
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        now_in = admin.describe_log_dirs([1])[1]["replica_dirs"][(TOPIC, 0)]
        target = second if now_in == first else first
        _intra_broker_throttle(bootstrap, 1, MIB)  # about 12 s for the copy: long enough to look at it
        try:
            assert admin.alter_replica_log_dirs({(TOPIC, 0, 1): target}) == {}
            wait_until(lambda: (TOPIC, 0) in admin.describe_log_dirs([1])[1]["future_dirs"], 30,
                       "the future copy in the target directory")
            run = RunFolder(config.run_dir("jbod-moving"))
            take_snapshot(config, KafkaConnection(bootstrap), run)
            tables, manifest = read_snapshot(run)
            wait_until(lambda: admin.describe_log_dirs([1])[1]["replica_dirs"].get((TOPIC, 0)) == target, 90,
                       "the replica in its new directory")
        finally:
            _intra_broker_throttle(bootstrap, 1, None)

    assert tables.log_dirs is not None and tables.replica_log_dirs is not None
    dirs = tables.log_dirs.set_index(["broker_id", "log_dir"])
    assert dirs.loc[(1, first), "capacity_bytes"] == 1024 * MIB
    assert dirs.loc[(1, second), "capacity_bytes"] == 3072 * MIB
    assert set(dirs["capacity_source"]) == {"capacity file"}
    moving = tables.replica_log_dirs.set_index(["topic", "partition", "broker_id"]).loc[(TOPIC, 0, 1)]
    assert moving["log_dir"] == now_in and moving["future_log_dir"] == target
    size = int(moving["size_bytes"])
    assert size > 10 * MIB
    # Counted once: in its directory's usage, and in the broker's disk use.
    assert dirs.loc[(1, now_in), "used_bytes"] >= size and dirs.loc[(1, target), "used_bytes"] < size
    brokers = tables.brokers.set_index("broker_id")
    assert brokers.loc[1, "disk_used_bytes"] < 2 * size
    assert any("moving between log dirs" in w and f"{TOPIC}-0 to {target}" in w for w in manifest["warnings"])

    after = RunFolder(config.run_dir("jbod-moved"))
    take_snapshot(config, KafkaConnection(bootstrap), after)
    moved = read_snapshot(after)[0].replica_log_dirs
    assert moved is not None
    row = moved.set_index(["topic", "partition", "broker_id"]).loc[(TOPIC, 0, 1)]
    assert row["log_dir"] == target and row["future_log_dir"] is None
