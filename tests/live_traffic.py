"""Producers (acks=all, idempotent) and consumers running while the cluster is changed, and the check afterwards:
every acknowledged message consumed, none written twice, no produce error.

"Written twice" means at two offsets of the log. The consumer may be handed the same offset again after a leader
change (librdkafka re-fetching from its position on the new leader); that is the client's, not the log's. Nor is
a message written twice in one partition under two leader epochs: librdkafka's idempotent producer, after an
error in a leader change, bumps its epoch and resends what was in flight, which the new leader cannot tell from
new messages (confluentinc/librdkafka#4953). Any leader change can cause it, with or without this product; the
check reports such copies as a warning and fails on any other."""

from __future__ import annotations

import threading
import time
import uuid
import warnings
from typing import Any


class LiveTraffic:
    """`with LiveTraffic(bootstrap, {topic: partitions}) as traffic: ...`, then `traffic.check()`."""

    def __init__(self, bootstrap: str, topics: dict[str, int], prefix: str = "live") -> None:
        self.bootstrap, self.topics, self.prefix = bootstrap, topics, prefix.encode()
        self.acked: list[bytes] = []
        self.failed: list[str] = []
        self.consumed: list[bytes] = []
        # (topic, partition, offset, leader epoch or None) of each consumed message
        self.offsets: list[tuple[str, int, int, int | None]] = []
        self._stop = threading.Event()
        self._deadline = time.monotonic() + 3600
        self._producer = threading.Thread(target=self._produce, name="live-producer")
        self._consumer = threading.Thread(target=self._consume, name="live-consumer")

    def __enter__(self) -> LiveTraffic:
        self._producer.start()
        self._consumer.start()
        time.sleep(1.0)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self, drain_s: float = 60.0) -> None:
        self._stop.set()
        self._producer.join(90)
        self._deadline = min(self._deadline, time.monotonic() + drain_s)
        self._consumer.join(drain_s + 30)

    def _produce(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5, "log_level": 3})

        def on_delivery(err: Any, msg: Any) -> None:
            (self.failed.append(str(err)) if err is not None else self.acked.append(msg.value()))

        n = 0
        names = sorted(self.topics)
        while not self._stop.is_set():
            producer.produce(names[n % len(names)], value=self.prefix + f"-{n:08d}".encode(), on_delivery=on_delivery)
            producer.poll(0)
            n += 1
            time.sleep(0.004)
        producer.flush(60)

    def _consume(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"live-{uuid.uuid4().hex}",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 3})
        consumer.assign([TopicPartition(t, p, 0) for t, n in self.topics.items() for p in range(n)])
        try:
            while time.monotonic() < self._deadline:
                for msg in consumer.consume(500, timeout=0.5):
                    if msg.error() is None and msg.value().startswith(self.prefix + b"-"):
                        self.consumed.append(msg.value())
                        self.offsets.append((msg.topic(), msg.partition(), msg.offset(), msg.leader_epoch()))
                if self._stop.is_set() and not self._producer.is_alive() and set(self.acked) <= set(self.consumed):
                    return
        finally:
            consumer.close()

    def check(self, min_acked: int = 1000) -> None:
        assert self._stop.is_set(), "stop() the traffic before checking it"
        assert self.failed == [], self.failed[:5]
        assert len(self.acked) >= min_acked, f"only {len(self.acked)} messages acknowledged"
        offsets_of: dict[bytes, dict[tuple[str, int, int], int | None]] = {}
        for value, (topic, partition, offset, epoch) in zip(self.consumed, self.offsets, strict=True):
            offsets_of.setdefault(value, {})[(topic, partition, offset)] = epoch
        duplicates = {value: where for value, where in offsets_of.items() if len(where) > 1}
        resent = {value: where for value, where in duplicates.items() if _resent_to_a_new_leader(where)}
        if resent:
            warnings.warn(f"{len(resent)} message(s) written again under a new leader epoch by the client "
                          f"(librdkafka#4953): {list(resent.items())[:5]}", stacklevel=2)
        written_twice = {value: sorted(where) for value, where in duplicates.items() if value not in resent}
        assert written_twice == {}, f"written at more than one offset: {list(written_twice.items())[:5]}"
        missing = set(self.acked) - set(self.consumed)
        assert missing == set(), f"{len(missing)} acknowledged messages were not consumed"


def _resent_to_a_new_leader(copies: dict[tuple[str, int, int], int | None]) -> bool:
    """Copies of one message ((topic, partition, offset) -> leader epoch) all in one partition, each under a leader
    epoch of its own: the client's resend after a leader change, not a write the log repeated."""
    epochs = list(copies.values())
    return (len({(topic, partition) for topic, partition, _ in copies}) == 1 and None not in epochs
            and len(set(epochs)) == len(epochs))
