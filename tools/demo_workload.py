"""An unbalanced workload for the demo cluster: topics of each pool created with explicit replica assignments
that pile replicas on some brokers, skewed partition sizes, and real data produced with acks=all. A manifest
of message counts and checksums per partition lets tests prove nothing was lost after rebalancing."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

MESSAGE_BYTES = 1024


@dataclass(frozen=True)
class TopicSpec:
    name: str
    assignment: list[list[int]]  # per partition, replicas (first = preferred leader)
    sizes_kib: list[int]  # data per partition, KiB


def _skewed(n: int, largest_kib: int) -> list[int]:
    """Zipf-like sizes: the k-th partition gets largest/k (at least 64 KiB)."""
    return [max(largest_kib // (k + 1), 64) for k in range(n)]


def demo_topics() -> list[TopicSpec]:
    """Pool a (brokers 1-3) and pool b (4-6): replicas piled on two brokers of each pool, the third nearly idle."""
    return [
        TopicSpec("orders", [[1, 2] if p % 2 else [2, 1] for p in range(12)], _skewed(12, 8192)),
        TopicSpec("payments", [[1, 2], [2, 1], [1, 3], [1, 2], [2, 1], [2, 1]], _skewed(6, 3072)),
        TopicSpec("clicks", [[4, 5] if p % 2 else [5, 4] for p in range(12)], _skewed(12, 6144)),
        TopicSpec("logs", [[4, 5], [5, 4], [4, 6], [5, 4], [4, 5], [5, 4]], _skewed(6, 4096)),
    ]


def create_topics(bootstrap: str, topics: list[TopicSpec], timeout_s: float = 60.0,
                  configs: Mapping[str, Mapping[str, str]] | None = None) -> None:
    """Create the topics with their explicit assignments (`configs`: topic configs by name) and wait until every
    partition has a leader."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # confluent-kafka needs num_partitions to match the explicit assignment's length.
    new = [NewTopic(t.name, num_partitions=len(t.assignment), replica_assignment=t.assignment,
                    config=dict((configs or {}).get(t.name, {}))) for t in topics]
    for future in admin.create_topics(new, request_timeout=timeout_s).values():
        future.result(timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    names = {t.name for t in topics}
    while time.monotonic() < deadline:  # until every partition has a leader
        md = admin.list_topics(timeout=10)
        if all(n in md.topics and all(p.leader >= 0 for p in md.topics[n].partitions.values()) for n in names):
            return
        time.sleep(0.2)
    raise TimeoutError(f"topics {sorted(names)} have no leaders after {timeout_s}s")


def produce(bootstrap: str, topics: list[TopicSpec], seed: int = 7) -> dict[str, dict[str, dict]]:
    """Write the data; returns {topic: {partition: {"count", "sha256"}}} of what the brokers acknowledged."""
    # log_level 3: the idempotent producer's "coordinator load in progress, retrying" right after topic
    # creation is expected; delivery failures are still collected below.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5, "compression.type": "none", "batch.size": 262144, "log_level": 3})
    failures: list[str] = []

    def on_delivery(err: object, msg: Message) -> None:
        if err is not None:
            failures.append(f"{msg.topic()}-{msg.partition()}: {err}")

    manifest: dict[str, dict[str, dict]] = {}
    for spec in topics:
        manifest[spec.name] = {}
        for p, kib in enumerate(spec.sizes_kib):
            digest = hashlib.sha256()
            count = kib * 1024 // MESSAGE_BYTES
            for i in range(count):
                value = hashlib.sha256(f"{seed}/{spec.name}/{p}/{i}".encode()).digest() * (MESSAGE_BYTES // 32)
                digest.update(value)
                while True:
                    try:
                        producer.produce(spec.name, value=value, key=str(i).encode(), partition=p,
                                         on_delivery=on_delivery)
                        break
                    except BufferError:
                        producer.poll(0.05)
            manifest[spec.name][str(p)] = {"count": count, "sha256": digest.hexdigest()}
    remaining = producer.flush(120)
    if remaining or failures:
        raise RuntimeError(f"{remaining} message(s) unacknowledged, failures: {failures[:5]}")
    return manifest


def consume_and_check(bootstrap: str, manifest: dict[str, dict[str, dict]], timeout_s: float = 120.0) -> int:
    """Read every partition from the start; raise unless counts and checksums equal the manifest."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"demo-check-{os.getpid()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        total = 0
        for topic, parts in manifest.items():
            for p, expected in parts.items():
                tp = TopicPartition(topic, int(p), 0)
                consumer.assign([tp])
                _, high = consumer.get_watermark_offsets(tp, timeout=30)
                digest, count = hashlib.sha256(), 0
                deadline = time.monotonic() + timeout_s
                while count < high and time.monotonic() < deadline:
                    for msg in consumer.consume(1000, timeout=1.0):
                        if msg.error():
                            raise RuntimeError(f"{topic}-{p}: {msg.error()}")
                        digest.update(msg.value())
                        count += 1
                if count != expected["count"] or digest.hexdigest() != expected["sha256"]:
                    raise AssertionError(f"{topic}-{p}: consumed {count} messages (checksum "
                                         f"{digest.hexdigest()[:12]}), expected {expected['count']} "
                                         f"({expected['sha256'][:12]})")
                total += count
        return total
    finally:
        consumer.close()


def create_workload(bootstrap: str, manifest_path: Path) -> dict[str, dict[str, dict]]:
    topics = demo_topics()
    create_topics(bootstrap, topics)
    manifest = produce(bootstrap, topics)
    manifest_path.parent.mkdir(parents=True, exist_ok=True)
    manifest_path.write_text(json.dumps(manifest, indent=1))
    return manifest
