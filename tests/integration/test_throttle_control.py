"""Throttle control from measured load on the session's real local cluster and a real Prometheus scraping its JMX
exporters (README: Throttle control from measured load, issue 37).

Broker 1 leads the partitions a plan copies to broker 3 under a low throttle. A producer drives broker 1 hard for
the first seconds, over the network line: its throttle is lowered (Kafka is given less), and raised again once the
producer stops, while the copies go on; the execution log and the report's timeline say so.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer

from kafka_rebalancer.config import load_config
from kafka_rebalancer.execute.executor import run_execute
from kafka_rebalancer.kafka_admin import ClusterAdmin, KafkaConnection
from kafka_rebalancer.report.collect import collect
from kafka_rebalancer.run_folder import RunFolder
from kafka_rebalancer.snapshot import take_snapshot
from tests.helpers import REPO, write_validated_plan
from tests.integration.conftest import delete_topics, demo_config
from tools.demo_workload import TopicSpec, create_topics, produce

pytestmark = [pytest.mark.kafka, pytest.mark.prometheus]

BROKERS = [1, 2, 3, 4, 5, 6]
RATE = 1024 * 1024  # the configured throttle: the copies alone stay well below the line
LINE = 3 * 1024 * 1024  # network bytes/s of broker 1: crossed only while the producer runs
LOAD_S = 12.0


def _drive(bootstrap: str, topic: str, stop: threading.Event) -> None:
    """About 5 MiB/s of acks=all writes to broker 1's partition until `stop` or LOAD_S."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    payload, deadline = b"x" * 10_000, time.monotonic() + LOAD_S
    while not stop.is_set() and time.monotonic() < deadline:
        for _ in range(50):
            producer.produce(topic, payload, partition=0)
        producer.poll(0)
        time.sleep(0.1)
    producer.flush(30)


def _lowest_given(bootstrap: str, stop: threading.Event, seen: list[int]) -> None:
    """The rates Kafka is given on broker 1 (leader side), read every second while the execution runs."""
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        while not stop.is_set():
            configs = admin.throttle_configs([1], []).get("broker 1", {})
            if "leader.replication.throttled.rate" in configs:
                seen.append(int(configs["leader.replication.throttled.rate"]))
            stop.wait(1.0)


@pytest.fixture
def topics(kafka_cluster: Any) -> Iterator[tuple[str, str, str]]:
    bootstrap = kafka_cluster.load().bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    copied, loaded = f"copied-{suffix}", f"loaded-{suffix}"
    # Three 10 MiB partitions led by broker 1: at least 30 s of copying at RATE, well past the producer's 12 s.
    copied_spec = TopicSpec(copied, [[1, 2]] * 3, [10 * 1024] * 3)
    create_topics(bootstrap, [copied_spec, TopicSpec(loaded, [[1, 4]], [0])])
    produce(bootstrap, [copied_spec])
    try:
        yield bootstrap, copied, loaded
    finally:
        with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
            ongoing = admin.list_reassignments()
            if ongoing:
                admin.alter_reassignments({k: None for k in ongoing})
            admin.alter_throttles({b: None for b in BROKERS}, {})
        delete_topics(bootstrap, [copied, loaded])


def test_a_broker_over_its_network_line_has_its_throttle_lowered_then_raised(
        topics: tuple[str, str, str], prometheus: Any, tmp_path: Path) -> None:
    bootstrap, copied, loaded = topics
    cluster = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())["cluster"] | {"request_timeout_s": 10}
    config = load_config(demo_config(
        tmp_path, cluster=cluster, pools={"all": {"brokers": BROKERS}}, topic_pools=[{"topics": "*", "pool": "all"}],
        metrics={"source": "none", "prometheus": {"url": prometheus.url, "scrape_interval": 2, "step": 10}},
        execution={"poll_interval_s": 0.5, "throttle_bytes_per_s": RATE,
                   "throttle_control": {"network_bytes_per_s": LINE, "interval_s": 6, "lower_by": 0.5,
                                        "raise_below": 0.8, "min_bytes_per_s": 128 * 1024}}))
    run = RunFolder(config.run_dir(f"control-{copied}"))
    manifest = take_snapshot(config, KafkaConnection(bootstrap), run)
    write_validated_plan(run, config, manifest["content_hash"], [(copied, p, [1, 2], [1, 3]) for p in range(3)])

    stop, given = threading.Event(), []
    threads = [threading.Thread(target=_drive, args=(bootstrap, loaded, stop)),
               threading.Thread(target=_lowest_given, args=(bootstrap, stop, given))]
    for thread in threads:
        thread.start()
    try:
        result = run_execute(config, KafkaConnection(bootstrap), run, "all", dry_run=False)
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)

    assert result["completed"] == 3
    log_text = (run.stage_path("execute/all") / "execution_log.jsonl").read_text()
    entries = [json.loads(line) for line in log_text.splitlines()]
    changes = [e for e in entries if e["action"] in ("throttle_lowered", "throttle_raised") and e["broker"] == 1]
    assert changes and changes[0]["action"] == "throttle_lowered", changes
    assert changes[0]["measured"]["network_bytes_per_s"] > LINE and changes[0]["rate_bytes_per_s"] == RATE // 2
    raised = [e for e in changes if e["action"] == "throttle_raised"]
    assert raised and raised[-1]["measured"]["network_bytes_per_s"] <= 0.8 * LINE, changes
    # Kafka was given less than the configured rate on broker 1 while it was over the line.
    assert given and min(given) < RATE, given
    with ClusterAdmin(KafkaConnection(bootstrap)) as admin:
        assert admin.throttle_configs(BROKERS, [copied]) == {}

    timeline = collect(run).executions
    assert timeline is not None
    markers = [m for execution in timeline for m in execution.markers]
    assert {"throttle_lowered", "throttle_raised"} <= {m.label.split()[0] for m in markers}, markers
