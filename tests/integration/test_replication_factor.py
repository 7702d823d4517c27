"""change-replication-factor on the real local cluster, through the CLI: a topic at replication factor 1 raised to 3
and lowered again to 2 under acks=all traffic, the cluster's own replica lists and ISR checked after each, nothing
lost; a target below min.insync.replicas refused with exit code 2 before anything is planned. An internal topic is
raised with it: `__rf-...` is excluded from balancing like `__consumer_offsets` (the config's default `__*`), whose
replication factor the session's cluster already has at 3 (the tests share it).

The config is the dead-broker drain's: the six brokers in one pool on three racks (a: 1 and 4, b: 2 and 5, c: 3
and 6), so a raised partition must end on three racks.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from kafka_rebalancer.kafka_admin import ClusterAdmin, KafkaConnection, PartitionInfo
from tests.integration.conftest import delete_topics, reassign_by_hand, wait_until
from tests.integration.test_dead_broker_drain import one_pool_config, set_min_isr
from tests.live_traffic import LiveTraffic
from tools.demo_workload import TopicSpec, create_topics, produce

pytestmark = [pytest.mark.kafka]

RACK = {1: "a", 4: "a", 2: "b", 5: "b", 3: "c", 6: "c"}


def kafka_rebalancer(command: str, config: Path, bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / "kafka-rebalancer"), command, "--config", str(config),
                           "--bootstrap-servers", bootstrap, *args], capture_output=True, text=True, timeout=300)


def change_rf(config: Path, bootstrap: str, topic: str, target: int, *extra: str) -> subprocess.CompletedProcess[str]:
    return kafka_rebalancer("change-replication-factor", config, bootstrap, "--topics", topic, "--replication-factor",
                            str(target), *extra)


def partitions_of(bootstrap: str, topic: str) -> list[PartitionInfo]:
    with ClusterAdmin(KafkaConnection(bootstrap, request_timeout_s=10)) as admin:
        return admin.describe_partitions([topic])


def latest_run(config: Path, action: str = "change-replication-factor") -> Path:
    return max((config.parent / "runs").glob(f"*/cli__{action}__*"), key=lambda p: p.stat().st_mtime)


def assert_at(bootstrap: str, topic: str, target: int, leaders: dict[int, int]) -> None:
    """Every partition at `target` replicas, all in sync, on min(target, 3) racks, led by the broker that led it
    before (`leaders`)."""
    for p in partitions_of(bootstrap, topic):
        assert len(p.replicas) == target and sorted(p.isr) == sorted(p.replicas), p
        assert len({RACK[b] for b in p.replicas}) == min(target, 3), p
        assert p.leader == leaders[p.partition], (p, leaders)


def test_replication_factor_raised_to_3_and_lowered_to_2_through_the_cli_under_traffic(
        kafka_cluster: Any, tmp_path: Path) -> None:
    bootstrap = kafka_cluster.load().bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    topic, internal = f"rf-{suffix}", f"__rf-{suffix}"
    spec = TopicSpec(topic, [[1], [2], [3], [4], [5], [6]], [256] * 6)
    internal_spec = TopicSpec(internal, [[1], [5]], [64] * 2)
    config = one_pool_config(tmp_path)
    create_topics(bootstrap, [spec, internal_spec])
    try:
        produce(bootstrap, [spec, internal_spec])
        leaders = {p.partition: p.leader for p in partitions_of(bootstrap, topic)}
        # A dry run by default: the approval body names each topic's RF before and after; nothing changes.
        dry = change_rf(config, bootstrap, f"{topic},{internal}", 3)
        assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-3000:]
        assert f"| {topic} | 6 | 1 → 3 |" in dry.stdout and "dry run: nothing changed" in dry.stdout, dry.stdout
        assert all(len(p.replicas) == 1 for p in partitions_of(bootstrap, topic))
        with LiveTraffic(bootstrap, {topic: 6}, prefix="rf") as traffic:
            # The dry run's plan executed once read, throttled like any move.
            raised = kafka_rebalancer("execute-reviewed", config, bootstrap, "--run-id", latest_run(config).name,
                                      "--apply", "--yes", "--throttle-bytes-per-s", "5000000")
            assert raised.returncode == 0, raised.stdout[-3000:] + raised.stderr[-4000:]
            assert ", 0 skipped" in raised.stdout, raised.stdout[-3000:]
            assert_at(bootstrap, topic, 3, leaders)
            assert_at(bootstrap, internal, 3, {0: 1, 1: 5})
            run = latest_run(config, "execute-reviewed")
            verify = json.loads((run / "verify" / "summary.json").read_text())
            assert verify["promises_kept"], verify["promises"]
            summary = json.loads((run / "plan" / "summary.json").read_text())
            assert summary["replication_factor"]["topics"][topic]["rf_before"] == "1"
            assert summary["totals"]["replica_moves"] == 12 + 4
            # The executor throttled the added replicas (follower side) and the leaders serving them.
            log = [json.loads(line) for line in (run / "execute" / "all" / "execution_log.jsonl").read_text()
                   .splitlines()]
            (throttled,) = [e for e in log if e["action"] == "throttle_set"]
            assert throttled["topics"] == sorted([topic, internal]) and throttled["brokers"] == [1, 2, 3, 4, 5, 6]

            set_min_isr(bootstrap, [topic])  # 2
            with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
                wait_until(lambda: admin.min_insync_replicas([topic]) == {topic: 2}, 30, "min.insync.replicas 2")
            refused = change_rf(config, bootstrap, topic, 1, "--apply", "--yes")
            assert refused.returncode == 2, refused.stdout[-2000:] + refused.stderr[-2000:]
            assert "below the min.insync.replicas" in refused.stderr and "Traceback" not in refused.stderr
            assert "min.insync.replicas=1" in refused.stderr, refused.stderr

            lowered = change_rf(config, bootstrap, topic, 2, "--apply", "--yes")
            assert lowered.returncode == 0, lowered.stdout[-3000:] + lowered.stderr[-4000:]
            assert "equals its min.insync.replicas" in lowered.stdout + lowered.stderr
            assert_at(bootstrap, topic, 2, leaders)
            verify = json.loads((latest_run(config) / "verify" / "summary.json").read_text())
            assert verify["promises_kept"], verify["promises"]
        traffic.check()
    finally:
        delete_topics(bootstrap, [topic, internal])


def commit_offset(bootstrap: str, group: str, topic: str, offset: int) -> None:
    """A consumer group's committed offset (the first commit of the session's cluster creates __consumer_offsets)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})

    def committed() -> bool:
        try:
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
        except KafkaException:  # the coordinator is still loading (or the topic is being created)
            return False
        return True

    try:
        wait_until(committed, 60, f"group {group}'s offset committed", poll_s=1.0)
    finally:
        consumer.close()


def test_replication_factor_of_consumer_offsets_lowered_to_1_and_raised_back_to_3(
        kafka_cluster: Any, tmp_path: Path) -> None:
    """The classic case, backwards first: the session's cluster creates __consumer_offsets at 3 (the tests share
    it), so it is lowered to 1 and raised again to 3, its leaders kept and a group's committed offset still there.
    Its placement as it was is put back afterwards."""
    bootstrap = kafka_cluster.load().bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    topic, group, offsets = f"rf-offsets-{suffix}", f"rf-group-{suffix}", "__consumer_offsets"
    config = one_pool_config(tmp_path)
    create_topics(bootstrap, [TopicSpec(topic, [[1, 2, 3]], [64])])
    commit_offset(bootstrap, group, topic, 42)
    before = {p.partition: p for p in partitions_of(bootstrap, offsets)}
    leaders = {p: info.leader for p, info in before.items()}
    try:
        lowered = change_rf(config, bootstrap, offsets, 1, "--apply", "--yes")
        assert lowered.returncode == 0, lowered.stdout[-3000:] + lowered.stderr[-4000:]
        assert {p.partition: p.replicas for p in partitions_of(bootstrap, offsets)} == {
            p: [leader] for p, leader in leaders.items()}
        raised = change_rf(config, bootstrap, offsets, 3, "--apply", "--yes")
        assert raised.returncode == 0, raised.stdout[-3000:] + raised.stderr[-4000:]
        assert "1 → 3" in raised.stdout, raised.stdout[-3000:]
        assert_at(bootstrap, offsets, 3, leaders)
        with ClusterAdmin(KafkaConnection(bootstrap, request_timeout_s=10)) as admin:
            assert admin.committed_offsets()[group] == {(topic, 0): 42}
    finally:
        now = {p.partition: p.replicas for p in partitions_of(bootstrap, offsets)}
        back = {(offsets, p): info.replicas for p, info in before.items() if now.get(p) != info.replicas}
        if back:
            reassign_by_hand(bootstrap, back)
        delete_topics(bootstrap, [topic])
