"""The measured-load pieces for real: every broker of the session cluster runs the JMX exporter agent, a real
Prometheus (Debian's) scrapes them, and the series the rebalancer reads carry the traffic produced here."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.integration.conftest import delete_topics
from tools.demo_workload import TopicSpec, create_topics, produce
from tools.prometheus import binary

pytestmark = [pytest.mark.kafka, pytest.mark.prometheus]
# Leaders 1, 3 and 5; their followers 2, 4 and 6 count no client traffic for the topic.
TOPIC = TopicSpec("prometheus-traffic", [[1, 2], [3, 4], [5, 6]], [256, 512, 768])
LEADERS = {str(replicas[0]): p for p, replicas in enumerate(TOPIC.assignment)}
FOLLOWERS = {str(replicas[1]) for replicas in TOPIC.assignment}
# A few scrape intervals (2 s) and file_sd's refresh, with room for a loaded machine.
SERIES_TIMEOUT_S = 45.0
T = TypeVar("T")


@pytest.fixture(scope="module")
def traffic(kafka_cluster: Any) -> Iterator[str]:
    """The topic with data produced once; yields the bootstrap servers."""
    bootstrap = kafka_cluster.load().bootstrap_servers
    create_topics(bootstrap, [TOPIC])
    produce(bootstrap, [TOPIC])
    yield bootstrap
    delete_topics(bootstrap, [TOPIC.name])


def eventually(check: Callable[[], T], what: str, timeout_s: float = SERIES_TIMEOUT_S) -> T:
    """check()'s first truthy result, polled until timeout_s; fails with what and the last result."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not seen within {timeout_s:.0f}s; last result: {result!r}")
        time.sleep(0.5)


def per_broker(prometheus: Any, promql: str) -> dict[str, float]:
    """broker_id -> value of an instant query that yields one sample per broker."""
    samples = prometheus.query(promql)
    result = {s["metric"]["broker_id"]: float(s["value"][1]) for s in samples}
    assert len(result) == len(samples), f"{promql}: more than one sample per broker: {samples}"
    return result


def scraped_brokers(prometheus: Any) -> set[str]:
    """The brokers the server was started with (a broker added to the cluster later is not among them)."""
    return set(prometheus.status()["targets"])


def test_every_broker_is_scraped_with_its_process_metrics(prometheus: Any, kafka_cluster: Any) -> None:
    exporters = kafka_cluster.scrape_targets()  # one per broker
    assert len(exporters) == len(kafka_cluster.load().brokers)
    assert prometheus.status()["targets"] == {str(b): target for b, target in exporters.items()}
    up = per_broker(prometheus, 'up{job="kafka"}')
    assert up == dict.fromkeys(scraped_brokers(prometheus), 1.0)
    cpu = per_broker(prometheus, 'process_cpu_seconds_total{job="kafka"}')
    assert set(cpu) == scraped_brokers(prometheus) and all(seconds > 0 for seconds in cpu.values()), cpu


def test_bytes_and_messages_in_grow_on_the_leaders(prometheus: Any, traffic: str) -> None:
    def leaders_reached(metric: str, at_least: dict[str, float]) -> dict[str, float]:
        """The metric per broker once every leader's value reached its bound (the last scrape may predate the
        end of the produce), else {}."""
        seen = per_broker(prometheus, f'{metric}{{topic="{TOPIC.name}"}}')
        return seen if all(seen.get(b, -1.0) >= bound for b, bound in at_least.items()) else {}

    # A message per KiB, 1 KiB of value each: at least that many bytes.
    first_batch = {b: TOPIC.sizes_kib[p] * 1024.0 for b, p in LEADERS.items()}
    before = eventually(lambda: leaders_reached("kafka_server_brokertopicmetrics_bytesin_total", first_batch),
                        f"the first batch's bytes in on brokers {sorted(LEADERS)}")
    assert all(before.get(b, 0.0) == 0.0 for b in FOLLOWERS), before  # replication is not client traffic

    produce(traffic, [TOPIC], seed=8)
    second_batch = {b: before[b] + bound for b, bound in first_batch.items()}
    after = eventually(lambda: leaders_reached("kafka_server_brokertopicmetrics_bytesin_total", second_batch),
                       f"bytes in growing by the second batch on brokers {sorted(LEADERS)}")
    assert all(after.get(b, 0.0) == 0.0 for b in FOLLOWERS), after

    both_batches = {b: 2.0 * TOPIC.sizes_kib[p] for b, p in LEADERS.items()}
    messages = eventually(lambda: leaders_reached("kafka_server_brokertopicmetrics_messagesin_total", both_batches),
                          f"both batches' messages in on brokers {sorted(LEADERS)}")
    assert {b: messages[b] for b in LEADERS} == both_batches


def test_bytes_out_counts_a_consumer_on_the_leader(prometheus: Any, traffic: str) -> None:
    leader, partition = next(iter(LEADERS.items()))
    consumer = Consumer({"bootstrap.servers": traffic, "group.id": "prometheus-bytes-out",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC.name, partition, 0)])
        read = 0
        deadline = time.monotonic() + 180
        while read < TOPIC.sizes_kib[partition] and time.monotonic() < deadline:
            read += len(consumer.consume(1000, timeout=1.0))
    finally:
        consumer.close()
    assert read >= TOPIC.sizes_kib[partition], f"consumed {read} of partition {partition}'s messages within 180 s"
    bytes_out = eventually(
        lambda: per_broker(prometheus, f'kafka_server_brokertopicmetrics_bytesout_total{{topic="{TOPIC.name}"}}'),
        f"bytes out of {TOPIC.name}")
    assert bytes_out[leader] >= TOPIC.sizes_kib[partition] * 1024, bytes_out


def test_log_size_and_end_offset_of_every_replica(prometheus: Any, traffic: str) -> None:
    replicas = {(str(b), str(p)) for p, brokers in enumerate(TOPIC.assignment) for b in brokers}

    def series(metric: str) -> dict[tuple[str, str], float]:
        return {(s["metric"]["broker_id"], s["metric"]["partition"]): float(s["value"][1])
                for s in prometheus.query(f'{metric}{{topic="{TOPIC.name}"}}')}

    def every_replica_holds(metric: str, per_kib: float) -> dict[tuple[str, str], float]:
        """The metric per replica once each holds at least the first batch (a 1 KiB message per KiB), else {}."""
        seen = series(metric)
        full = seen.keys() == replicas and all(v >= TOPIC.sizes_kib[int(p)] * per_kib for (_, p), v in seen.items())
        return seen if full else {}

    eventually(lambda: every_replica_holds("kafka_log_log_size", 1024.0),
               f"kafka_log_log_size of every replica {sorted(replicas)} with the first batch")
    eventually(lambda: every_replica_holds("kafka_log_log_logendoffset", 1.0),
               f"kafka_log_log_logendoffset of every replica {sorted(replicas)} past the first batch")


def test_a_dropped_target_goes_stale_and_comes_back(prometheus: Any) -> None:
    dropped = max(scraped_brokers(prometheus), key=int)
    prometheus.drop_target(int(dropped))
    try:
        # Prometheus marks a vanished target's series stale one or two intervals after its last scrape.
        eventually(lambda: dropped not in per_broker(prometheus, 'up{job="kafka"}'),
                   f"broker {dropped}'s up series going stale")
        assert dropped not in per_broker(prometheus, 'process_cpu_seconds_total{job="kafka"}')
        assert per_broker(prometheus, 'up{job="kafka"}') == dict.fromkeys(scraped_brokers(prometheus) - {dropped}, 1.0)
    finally:
        prometheus.restore_target(int(dropped))
    assert per_broker(prometheus, 'up{job="kafka"}') == dict.fromkeys(scraped_brokers(prometheus), 1.0)
    assert dropped in per_broker(prometheus, 'process_cpu_seconds_total{job="kafka"}')


def test_the_generated_config_passes_promtool(prometheus: Any) -> None:
    """promtool reads the config and the targets file it names (file_sd) the way the server does."""
    result = subprocess.run([binary("promtool"), "check", "config", str(prometheus.config_file)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


def test_replication_bytes_and_produce_latency_for_throttle_control(prometheus: Any, traffic: str) -> None:
    """The series execution.throttle_control's default queries read: a follower's fetches counted broker-wide on
    both ends (not as client traffic), and each leader's produce latency quantiles."""
    copied = {b: TOPIC.sizes_kib[p] * 1024.0 for b, p in LEADERS.items()}
    follower_of = {b: str(TOPIC.assignment[p][1]) for b, p in LEADERS.items()}

    def followers_copied() -> dict[str, float]:
        seen = per_broker(prometheus, "kafka_server_brokertopicmetrics_replicationbytesin_total")
        return seen if all(seen.get(follower_of[b], -1.0) >= bound for b, bound in copied.items()) else {}

    replicated_in = eventually(followers_copied, "the followers' replication bytes in")
    served = per_broker(prometheus, "kafka_server_brokertopicmetrics_replicationbytesout_total")
    assert all(served[b] >= bound for b, bound in copied.items()), (served, replicated_in)
    latency = eventually(lambda: per_broker(prometheus, 'kafka_network_requestmetrics_totaltimems{request="Produce",'
                                                        'quantile="0.99"}'), "the produce latency p99")
    assert set(LEADERS) <= set(latency) and all(latency[b] > 0 for b in LEADERS), latency
