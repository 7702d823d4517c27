"""Draining a dead broker on the real local cluster, with producers (acks=all, min.insync.replicas=2) and
consumers running: the partitions it held are short of in-sync replicas, yet the drain moves its replicas to the
pool's other brokers and every partition regains its replication factor, losing and duplicating nothing.

The config keeps the default exclusion of Kafka's internal topics (`__*`): a drain moves them anyway (the broker
is going away), and the check covers every topic of the cluster that had a replica on the dead broker.

A drain of a dead broker with `--unregister` (CLI) or `unregister` (the manual DAG) ends by unregistering it from the
KRaft controller (`-k unregister`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from kafka_rebalancer.config import load_config
from kafka_rebalancer.kafka_admin import ClusterAdmin, KafkaConnection, PartitionInfo
from kafka_rebalancer.kafka_cluster_tool import ClusterTool, Registration
from tests.helpers import REPO
from tests.integration.conftest import assert_untouched_by_execution, delete_topics, demo_config, wait_until
from tests.live_traffic import LiveTraffic
from tools.demo_workload import TopicSpec, create_topics, produce
from tools.local_kafka import LIBS

pytestmark = [pytest.mark.kafka]

BROKERS = [1, 2, 3, 4, 5, 6]  # racks a: 1 and 4, b: 2 and 5, c: 3 and 6
DEAD = 3


def rack_spread(partitions: int) -> list[list[int]]:
    """One replica per rack, leaders rotating, as Kafka places them; broker 3 holds half of the partitions."""
    out = []
    for p in range(partitions):
        replicas = [1 + 3 * (p % 2), 2 + 3 * (p // 2 % 2), 3 + 3 * (p // 4 % 2)]
        out.append(replicas[p % 3:] + replicas[:p % 3])
    return out



def one_pool_config(tmp_path: Path) -> Path:
    """The six brokers in one pool. Broker 6 is left alone in rack c and takes every replica broker 3 held: a band
    that wide lets the drain's plan pass the band checks, which are not these tests' subject. The replication
    throttle is the default one."""
    cluster = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())["cluster"] | {
        "request_timeout_s": 10, "kafka_libs": str(LIBS)}
    return demo_config(tmp_path, cluster=cluster, pools={"all": {"brokers": BROKERS}},
                       topic_pools=[{"topics": "*", "pool": "all"}],
                       resources={"replica_count": {"threshold": 3.0}}, priority=["replica_count"],
                       execution={"poll_interval_s": 0.5, "move_timeout_s": 60, "urp_wait_timeout_s": 30})


def set_min_isr(bootstrap: str, topics: list[str]) -> None:
    resources = [ConfigResource(ResourceType.TOPIC, t, incremental_configs=[
        ConfigEntry("min.insync.replicas", "2", incremental_operation=AlterConfigOpType.SET)]) for t in topics]
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the futures are done
    for future in admin.incremental_alter_configs(resources).values():
        future.result()


def all_partitions(bootstrap: str) -> dict[tuple[str, int], PartitionInfo]:
    with ClusterAdmin(KafkaConnection(bootstrap, request_timeout_s=10)) as admin:
        return {(p.topic, p.partition): p for p in admin.describe_partitions()}


def live_brokers(bootstrap: str) -> frozenset[int]:
    with ClusterAdmin(KafkaConnection(bootstrap, request_timeout_s=10)) as admin:
        return admin.live_broker_ids()


def test_draining_a_dead_broker_restores_every_partition_it_held_under_live_traffic(
        kafka_cluster: Any, tmp_path: Path) -> None:
    bootstrap = kafka_cluster.load().bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    topics = [TopicSpec(f"dead-a-{suffix}", rack_spread(8), [256] * 8),
              TopicSpec(f"dead-b-{suffix}", rack_spread(6), [128] * 6)]
    names = [t.name for t in topics]
    config_path = one_pool_config(tmp_path)
    create_topics(bootstrap, topics)
    try:
        set_min_isr(bootstrap, names)
        with ClusterAdmin(KafkaConnection(bootstrap)) as admin:  # what the executor reads before such a move
            # Each broker applies the config from the metadata on its own: one may still answer with the default.
            wait_until(lambda: admin.min_insync_replicas(names) == {name: 2 for name in names}, 30,
                       "min.insync.replicas 2 on every broker")
        produce(bootstrap, topics)
        with LiveTraffic(bootstrap, {t.name: len(t.assignment) for t in topics}, prefix="dead-broker") as traffic:
            # The consumer's group creates __consumer_offsets: an internal topic on the dead broker too.
            wait_until(lambda: ("__consumer_offsets", 0) in all_partitions(bootstrap), 30, "__consumer_offsets")
            kafka_cluster.stop_broker(DEAD, hard=True)
            # Fenced by the controller once its session times out: gone from the metadata and from every ISR.
            wait_until(lambda: DEAD not in live_brokers(bootstrap)
                       and all(DEAD not in p.isr for p in all_partitions(bootstrap).values()), 60,
                       f"broker {DEAD} fenced")
            before = all_partitions(bootstrap)
            held = {k: p for k, p in before.items() if DEAD in p.replicas}
            assert {t for t, _ in held} >= {*names, "__consumer_offsets"}
            drain = subprocess.run(
                [str(Path(sys.executable).parent / "kafka-rebalancer"), "drain", "--config", str(config_path),
                 "--bootstrap-servers", bootstrap, "--brokers", str(DEAD), "--reason", "machine died", "--apply",
                 "--yes"], capture_output=True, text=True, timeout=300)
            assert drain.returncode == 0, drain.stdout[-3000:] + drain.stderr[-4000:]
            assert ", 0 skipped" in drain.stdout, drain.stdout[-3000:]
            time.sleep(1.0)
        traffic.check()
        after = all_partitions(bootstrap)
        live = set(BROKERS) - {DEAD}
        for key, old in held.items():
            now = after[key]
            assert len(now.replicas) == len(old.replicas) and set(now.replicas) <= live, (key, old, now)
            assert sorted(now.isr) == sorted(now.replicas), (key, now)
        assert [k for k, p in after.items() if DEAD in p.replicas] == []
        assert_untouched_by_execution(bootstrap, names)
    finally:
        kafka_cluster.start_broker(DEAD)
        delete_topics(bootstrap, names)


def kafka_rebalancer(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / "kafka-rebalancer"), *args], capture_output=True,
                          text=True, timeout=300)


def test_a_dead_broker_drained_with_unregister_is_forgotten_by_the_controller(
        kafka_cluster: Any, tmp_path: Path) -> None:
    """`drain --unregister`: refused (exit code 2) while the broker runs; once it is dead, drained and verified, the
    KRaft controller no longer lists it, not even as fenced. Restarted, the broker registers again: the session's
    cluster is whole for the next tests."""
    bootstrap = kafka_cluster.load().bootstrap_servers
    topic = TopicSpec(f"unregister-{uuid.uuid4().hex[:8]}", rack_spread(4), [64] * 4)
    config_path = one_pool_config(tmp_path)
    drain = ["drain", "--config", str(config_path), "--bootstrap-servers", bootstrap, "--brokers", str(DEAD),
             "--reason", "machine died", "--unregister", "--apply", "--yes"]
    tool = ClusterTool(KafkaConnection(bootstrap), LIBS)
    create_topics(bootstrap, [topic])
    try:
        alive = kafka_rebalancer(*drain)
        assert alive.returncode == 2 and f"broker(s) [{DEAD}] are running" in alive.stderr, alive.stderr[-2000:]
        kafka_cluster.stop_broker(DEAD, hard=True)
        wait_until(lambda: Registration(DEAD, fenced=True) in tool.registrations(), 60, f"broker {DEAD} fenced")
        done = kafka_rebalancer(*drain)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-4000:]
        assert f"broker {DEAD}: unregistered" in done.stdout, done.stdout[-3000:]
        assert DEAD not in {r.broker_id for r in tool.registrations()}
        assert [k for k, p in all_partitions(bootstrap).items() if DEAD in p.replicas] == []
        pools = kafka_rebalancer("pools", "--config", str(config_path), "--bootstrap-servers", bootstrap)
        # The fenced brokers listed are those an earlier test of the session left (a broker it removed), not DEAD.
        fenced = next(line for line in pools.stdout.splitlines() if line.startswith("fenced brokers holding nothing:"))
        listed = fenced.split(":", 1)[1].split("(")[0].replace(",", " ").split()
        assert pools.returncode == 0 and str(DEAD) not in listed, pools.stdout
    finally:
        kafka_cluster.start_broker(DEAD)
        wait_until(lambda: Registration(DEAD, fenced=False) in tool.registrations(), 60, f"broker {DEAD} back")
        delete_topics(bootstrap, [topic.name])


@pytest.mark.airflow
def test_the_manual_dag_drains_a_dead_broker_and_unregisters_it(kafka_cluster: Any, shared_airflow: Any,
                                                                tmp_path: Path) -> None:
    """The manual DAG's `unregister` param: approved, executed and verified, the drain's `unregister` task
    unregisters the dead broker and records it in the run's `unregister/` stage."""
    from tests.integration.shared_airflow import MANUAL

    bootstrap = kafka_cluster.load().bootstrap_servers
    topic = TopicSpec(f"unregister-dag-{uuid.uuid4().hex[:8]}", rack_spread(4), [64] * 4)
    config_path = one_pool_config(tmp_path)
    tool = ClusterTool(KafkaConnection(bootstrap), LIBS)
    create_topics(bootstrap, [topic])
    services = shared_airflow.use(config_path, bootstrap, unpaused=(MANUAL,))
    try:
        kafka_cluster.stop_broker(DEAD, hard=True)
        wait_until(lambda: Registration(DEAD, fenced=True) in tool.registrations(), 60, f"broker {DEAD} fenced")
        run_id = services.trigger(MANUAL, {"action": "drain-brokers", "brokers": [DEAD], "reason": "machine died",
                                           "unregister": True, "mode": "execute"})
        assert "unregisters broker(s) [3]" in services.wait_for_input(MANUAL, run_id)["body"]
        services.respond(MANUAL, run_id, "approve", ["Approve"])
        assert services.wait_for_run(MANUAL, run_id) == "success", services.task_states(MANUAL, run_id)
        summary = json.loads((load_config(config_path).run_dir(run_id) / "unregister" / "summary.json").read_text())
        assert summary["brokers"] == {str(DEAD): "unregistered"}, summary
        assert DEAD not in {r.broker_id for r in tool.registrations()}
    finally:
        shared_airflow.quiet()
        kafka_cluster.start_broker(DEAD)
        wait_until(lambda: Registration(DEAD, fenced=False) in tool.registrations(), 60, f"broker {DEAD} back")
        delete_topics(bootstrap, [topic.name])
