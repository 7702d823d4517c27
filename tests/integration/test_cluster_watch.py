"""The cluster's watcher against the real local cluster: one look reads the registered brokers (with their racks)
from the cluster's metadata; a pool's broker that is not registered is lost once past the grace period, a
registered broker no pool holds is added to the pool whose claim takes it (or reported unclaimed); the event
trigger, run as the triggerer runs it, resolves the cluster from the config's Airflow connection id and yields the
events of its looks. The band check reads the cluster as a snapshot does: a pool with a share of its brokers out
of band, and a disk above its use, raise the events that start a rebalance of the pool. A person's CLI operation
holds the pools while it runs: the lost broker's drain is held back. The events DAG and the runs they start:
test_automation_airflow."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kafka_rebalancer.automation.events_log import read_events
from kafka_rebalancer.automation.look import look
from kafka_rebalancer.kafka_admin import KafkaConnection
from kafka_rebalancer.operations.request import run_config
from tests.integration.conftest import demo_config

pytestmark = [pytest.mark.kafka]


def _config(tmp_path: Path, bootstrap: str, **automation: Any) -> Path:
    # Brokers 99 and 100 are in pools but never registered; of the cluster's brokers, pool-a holds 1 and 2, pool-b's
    # claim takes 3-4, and no claim takes the others.
    return demo_config(tmp_path, cluster={"name": "watched", "bootstrap_servers": bootstrap},
                       pools={"pool-a": {"brokers": [1, 2, 99]},
                              "pool-b": {"brokers": [100], "claim": {"broker_ids": ["3-4"]}}},
                       topic_pools=[{"topics": "*", "pool": "pool-a"}],
                       automation={"broker_lost": {"mode": "approve", "grace_period_s": 60},
                                   "broker_added": {"mode": "approve", "settle_s": 0}, **automation})


def test_one_look_reads_the_registered_brokers_and_raises_each_event_once(kafka_cluster: Any, tmp_path: Path) -> None:
    bootstrap = kafka_cluster.load().bootstrap_servers
    config = run_config(_config(tmp_path, bootstrap))
    first = look(config, KafkaConnection(bootstrap), now=1000.0)
    registered = sorted(n.node_id for n in kafka_cluster.load().brokers)
    assert sorted((e.kind, e.broker_id) for e in first) == sorted(
        [("broker_added", 3), ("broker_added", 4)] + [("broker_unclaimed", b) for b in registered if b > 4])
    assert {e.broker_pool for e in first if e.kind == "broker_added"} == {"pool-b"}
    assert look(config, KafkaConnection(bootstrap), now=1030.0) == []  # 99 down 30 s: inside the grace period
    lost = look(config, KafkaConnection(bootstrap), now=1070.0)
    assert [(e.kind, e.broker_id, e.broker_pool) for e in lost] == [("broker_lost", 99, "pool-a"),
                                                                     ("broker_lost", 100, "pool-b")]
    recorded = read_events(config)
    assert [e["kind"] for e in recorded].count("broker_lost") == 2 and len(recorded) == len(first) + 2


def test_the_trigger_resolves_the_airflow_connection_and_yields_the_events_of_a_look(
        kafka_cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_rebalancer.airflow.cluster_watch import ClusterWatchTrigger

    bootstrap = kafka_cluster.load().bootstrap_servers
    path = _config(tmp_path, bootstrap, poll_interval_s=0.2)
    # Airflow reads connections from AIRFLOW_CONN_<ID>: the trigger's arguments carry the config's path only.
    config = run_config(path)
    monkeypatch.setenv(f"AIRFLOW_CONN_{config.cluster.airflow_connection_id.upper()}",
                       json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": bootstrap}}))
    trigger = ClusterWatchTrigger(str(path))
    assert trigger.serialize() == ("kafka_rebalancer.airflow.cluster_watch.ClusterWatchTrigger",
                                   {"config_path": str(path)})

    async def first_event() -> Any:
        async for event in trigger.run():
            return event
        return None

    event = asyncio.run(asyncio.wait_for(first_event(), timeout=60))
    assert {e["kind"] for e in event.payload["events"]} >= {"broker_added"}
    assert all(e["broker_id"] not in (1, 2) for e in event.payload["events"])


def test_the_band_check_finds_a_pool_out_of_band_and_a_full_disk(kafka_cluster: Any, tmp_path: Path) -> None:
    from kafka_rebalancer.automation.band_check import check_bands
    from tests.integration.conftest import delete_topics
    from tools.demo_workload import TopicSpec, create_topics, produce

    bootstrap = kafka_cluster.load().bootstrap_servers
    skew = TopicSpec("watched-skew", [[1, 2]] * 4, [4096] * 4)  # 16 MiB on brokers 1 and 2, none on 3
    create_topics(bootstrap, [skew])
    try:
        produce(bootstrap, [skew])
        path = demo_config(tmp_path, cluster={"name": "watched", "bootstrap_servers": bootstrap},
                           pools={"pool-a": {"brokers": [1, 2, 3]}},
                           topic_pools=[{"topics": "watched-*", "pool": "pool-a"}],
                           automation={"out_of_band": {"mode": "dry-run", "share": 0.3, "sustained_s": 60,
                                                       "disk_use": 0.000001}})
        config = run_config(path)
        connection = KafkaConnection(bootstrap)
        first = check_bands(config, connection, now=1000.0)
        assert [e.kind for e in first if e.kind == "pool_out_of_band"] == []  # out of band from now: not yet 60 s
        disks = sorted(e.broker_id for e in first if e.kind == "disk_over_use")
        assert disks == [1, 2], first  # over a millionth of their capacity: the two holding the topic
        later = check_bands(config, connection, now=1060.0)
        (pool,) = [e for e in later if e.kind == "pool_out_of_band"]
        assert pool.broker_pool == "pool-a" and "of 3 brokers of pool pool-a out of band" in pool.observed
        assert "for 60s" in pool.observed
        assert [e["kind"] for e in read_events(config)].count("pool_out_of_band") == 1
    finally:
        delete_topics(bootstrap, [skew.name])


def test_a_cli_operation_holds_the_pools_while_it_runs(kafka_cluster: Any, tmp_path: Path) -> None:
    from kafka_rebalancer.automation.decide import decide
    from kafka_rebalancer.automation.watch import BROKER_LOST, ClusterEvent
    from kafka_rebalancer.holds.claims import claimed_pools
    from tests.integration.conftest import delete_topics, wait_until
    from tools.demo_workload import TopicSpec, create_topics

    bootstrap = kafka_cluster.load().bootstrap_servers
    topic = TopicSpec("watched-held", [[1, 2]] * 2, [64] * 2)
    create_topics(bootstrap, [topic])
    path = demo_config(tmp_path, cluster={"name": "watched", "bootstrap_servers": bootstrap},
                       pools={"pool-a": {"brokers": [1, 2, 3]}},
                       topic_pools=[{"topics": "watched-*", "pool": "pool-a"}],
                       exclude={"topics": ["__*"], "brokers": []}, automation={"broker_lost": {"mode": "approve"}})
    config = run_config(path)
    # A person drains broker 2 and is asked to confirm: the command waits, holding the pool.
    drain = subprocess.Popen([str(Path(sys.executable).parent / "kafka-rebalancer"), "drain", "--config", str(path),
                              "--brokers", "2", "--reason", "disk failing", "--apply"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    nobody = lambda dag_id, run_id: False  # noqa: E731 - no Airflow run is live: only the command's claim holds
    try:
        wait_until(lambda: "pool-a" in claimed_pools(config, nobody) or drain.poll() is not None, 180,
                   "the drain command's claim", poll_s=0.5)
        claim = claimed_pools(config, nobody)["pool-a"]
        assert claim.describe().startswith(f"kafka-rebalancer drain (pid {drain.pid} on "), claim
        lost = ClusterEvent(BROKER_LOST, 3, "pool-a", "broker 3 of pool pool-a not registered", time.time())
        runs, records = decide([lost], config, {}, time.time(), {p: c.describe() for p, c in
                                                                 claimed_pools(config, nobody).items()})
        assert runs == [] and records[0]["why"].startswith("pool pool-a is held by kafka-rebalancer drain (pid ")
    finally:
        _, err = drain.communicate("no\n", timeout=300)  # not confirmed: nothing executed
        delete_topics(bootstrap, [topic.name])
    assert drain.returncode in (0, 2), err[-3000:]
    assert claimed_pools(config, nobody) == {}  # released when it ended
