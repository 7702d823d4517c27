"""Tiered storage (KIP-405) on a real local cluster of three brokers whose remote storage is LocalTieredStorage
(Kafka's file-system remote storage manager, from its kafka-storage test jar: tools/kafka/tiered_storage/pom.xml)
and whose followers fetch from the last tiered offset (KIP-1023). README: Tiered topics."""

from __future__ import annotations

import os
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from confluent_kafka import Producer

from kafka_rebalancer.config import load_config
from kafka_rebalancer.kafka_admin import KafkaConnection
from kafka_rebalancer.run_folder import RunFolder
from kafka_rebalancer.snapshot import read_snapshot, take_snapshot
from tests.helpers import running_cluster
from tests.integration.conftest import demo_config, wait_until
from tools.demo_workload import TopicSpec, create_topics
from tools.local_kafka import REPO, fetch

pytestmark = [pytest.mark.kafka]

TOPIC = "tiered"
MIB = 2**20
SEGMENT_BYTES = MIB  # Kafka's smallest segment: closed segments are what gets tiered
TIERED_STORAGE_POM = REPO / "tools" / "kafka" / "tiered_storage" / "pom.xml"


@pytest.fixture(scope="module")
def tiered_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Path]]:
    """Three brokers with tiered storage on, sharing one LocalTieredStorage directory: the module's own."""
    jars = fetch(TIERED_STORAGE_POM, REPO / ".cache" / "kafka-tiered-storage")
    remote = tmp_path_factory.mktemp("remote-storage")
    name = os.environ.get("KAFKA_REBALANCER_TEST_CLUSTER", "pytest") + "-tiered"
    with running_cluster(name, n_brokers=3, broker_configs={
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name":
                "org.apache.kafka.server.log.remote.storage.LocalTieredStorage",
            "remote.log.storage.manager.class.path": ":".join(str(j) for j in sorted(jars.glob("*.jar"))),
            "rsm.config.dir": str(remote),
            "remote.log.metadata.manager.listener.name": "PLAINTEXT",
            "remote.log.manager.task.interval.ms": "500",
            "log.retention.check.interval.ms": "1000",
            "follower.fetch.last.tiered.offset.enable": "true"}) as cluster:
        yield cluster, remote


def _tiered_topic_with_data(bootstrap: str, mib: int) -> None:
    """One partition on brokers 1 and 2, tiered, keeping about one segment locally; `mib` MiB written to it."""
    create_topics(bootstrap, [TopicSpec(TOPIC, [[1, 2]], [0])], configs={TOPIC: {
        "remote.storage.enable": "true", "segment.bytes": str(SEGMENT_BYTES),
        "local.retention.bytes": str(SEGMENT_BYTES)}})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(mib * 1024):
        producer.produce(TOPIC, b"x" * 1000, partition=0)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


@pytest.fixture(scope="module")
def tiered_data(tiered_cluster: tuple[Any, Path]) -> tuple[Any, Path]:
    """The tiered topic with 6 MiB written, three of its segments in the remote storage."""
    cluster, remote = tiered_cluster
    _tiered_topic_with_data(cluster.load().bootstrap_servers, mib=6)
    wait_until(lambda: len(list(remote.rglob("*.log"))) >= 3, 120, "three segments copied to the remote storage")
    return cluster, remote


def test_tiered_snapshot_on_a_real_cluster_records_the_tiered_topic_and_kip1023(
        tiered_data: tuple[Any, Path], tmp_path: Path) -> None:
    cluster, _ = tiered_data
    bootstrap = cluster.load().bootstrap_servers
    config = load_config(demo_config(
        tmp_path, cluster={"name": "tiered", "bootstrap_servers": bootstrap}, pools={"all": {"brokers": [1, 2, 3]}},
        topic_pools=[{"topics": "*", "pool": "all"}]))
    run = RunFolder(config.run_dir("r"))
    manifest = take_snapshot(config, KafkaConnection(bootstrap), run)
    assert manifest["tiered"] == {"topics": [TOPIC], "last_tiered_fetch": True,
                                  "brokers_fetching_last_tiered": [1, 2, 3]}
    tables, _ = read_snapshot(run)
    assert tables.tiered_partitions is not None
    row = tables.tiered_partitions.iloc[0]
    assert (row["topic"], row["partition"]) == (TOPIC, 0)
    # no Prometheus here: remote bytes and lag are not reported, a move is counted at the local size
    assert pd.isna(row["remote_bytes"]) and row["move_cost_bytes"] == row["local_bytes"]
    # the internal remote log metadata topic is a plain internal topic, not a tiered one
    assert "__remote_log_metadata" in set(tables.partitions["topic"])


def test_tiered_remote_bytes_are_exported_by_the_leader(tiered_data: tuple[Any, Path]) -> None:
    """The JMX exporter rules (tools/kafka/jmx_exporter/rules.yaml) export the leader's remote log size per topic
    under the name the snapshot's query reads; it agrees with what the remote storage holds."""
    cluster, remote = tiered_data
    targets = cluster.scrape_targets()

    def exported(broker: int) -> float | None:
        text = urllib.request.urlopen(f"http://{targets[broker]}/metrics", timeout=10).read().decode()
        found = re.search(r'^kafka_server_brokertopicmetrics_remotelogsizebytes\{[^}]*topic="tiered"[^}]*\} (\S+)$',
                          text, re.MULTILINE)
        return float(found.group(1)) if found else None

    def remote_segments() -> int:
        return sum(f.stat().st_size for f in remote.rglob("*.log"))

    def agree() -> bool:
        # Segments go on being copied: judge the metric against the storage while the storage stands still.
        before, value, after = remote_segments(), exported(1), remote_segments()
        return before == after > 0 and value is not None and value == pytest.approx(after, rel=0.1)

    wait_until(agree, 120, "broker 1 exporting the remote log size the remote storage holds (within 10 %)")
    assert not exported(2)  # the follower leads nothing: it reports no remote log
