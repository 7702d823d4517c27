"""Snapshots and plans from a real Prometheus (`metrics.source: prometheus`): a topic driven hard puts its leaders
above the other brokers in network in and measured CPU, and the plan relieves them; a broker whose exporter stops
mid-window, and a Prometheus that is down, are reported as the README says."""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from statistics import mean
from typing import Any

import pytest

from kafka_rebalancer.config import load_config
from kafka_rebalancer.kafka_admin import KafkaConnection
from kafka_rebalancer.plan.job import run_plan
from kafka_rebalancer.run_folder import SNAPSHOT, RunFolder
from kafka_rebalancer.runs import LATEST
from kafka_rebalancer.snapshot import read_snapshot, take_snapshot
from tests.integration.conftest import delete_topics, demo_config
from tools.demo import SteadyTraffic
from tools.demo_workload import TopicSpec, create_topics
from tools.ports import free_ports

pytestmark = [pytest.mark.kafka, pytest.mark.prometheus, pytest.mark.spark]
BROKERS = [1, 2, 3, 4, 5, 6]
HOT_LEADERS = {1, 2}
# Replication factor 3: every partition on both leaders (each leads half) and one of the other brokers, so the
# leaders receive four times the bytes of any other broker and do the produce requests' work.
HOT = TopicSpec("pm-hot", [[1, 2, 3 + p % 4] if p % 2 == 0 else [2, 1, 3 + p % 4] for p in range(8)], [0] * 8)
# Light, and led by broker 5 alone (one replica): only broker 5's exporter reports its bytes in.
STEADY = TopicSpec("pm-steady", [[5], [5]], [0, 0])
HOT_BYTES_PER_S = 6 * 2**20  # what the 2-core machine sustains beside 7 JVMs and Prometheus
STEADY_BYTES_PER_S = 64 * 1024
WINDOW_S, STEP_S = 30, 3
CAPACITY = {"nw_in_bytes_per_s": 100 * 2**20, "cpu_cores": 2.0}
DROPPED_FOR_S = 12  # of broker 5's exporter: about 40% of the window's samples


def prometheus_metrics(url: str, **settings: Any) -> dict[str, Any]:
    """A config's `metrics` section reading from Prometheus at url over the test's window (avg: the load is
    steady; a completeness bar that a missed scrape on a loaded machine does not cross)."""
    return {"source": "prometheus", "prometheus": {"url": url, "window": WINDOW_S, "step": STEP_S,
                                                   "statistic": "avg", "min_completeness": 0.8, **settings}}


def measured_config(tmp_path: Path, url: str, resources: list[str]) -> Any:
    """The demo config on one pool of every broker, balancing `resources` from Prometheus at url."""
    return load_config(demo_config(
        tmp_path, pools={"all": {"brokers": BROKERS}}, topic_pools=[{"topics": "pm-*", "pool": "all"}],
        capacity={"default": CAPACITY}, resources={r: {"threshold": 1.10} for r in resources}, priority=resources,
        metrics=prometheus_metrics(url)))


@pytest.fixture(scope="module")
def load(kafka_cluster: Any, prometheus: Any) -> Iterator[tuple[str, SteadyTraffic]]:
    """The hot and the steady topic under traffic for the whole module; yields (bootstrap servers, traffic)."""
    bootstrap = kafka_cluster.load().bootstrap_servers
    create_topics(bootstrap, [HOT, STEADY])
    traffic = SteadyTraffic(bootstrap, {HOT.name: HOT_BYTES_PER_S, STEADY.name: STEADY_BYTES_PER_S}).start()
    try:
        yield bootstrap, traffic
    finally:
        traffic.stop()
        delete_topics(bootstrap, [HOT.name, STEADY.name])
    assert traffic.failures == [], traffic.failures[:5]


def wait_for_full_window(traffic: SteadyTraffic) -> None:
    """Until the traffic has run over the whole window, the rate range before it and a couple of scrapes."""
    time.sleep(max(0.0, WINDOW_S + 8 + 6 - traffic.running_for()))


def per_broker(replicas: Any, column: str) -> dict[int, float]:
    return {int(b): float(v) for b, v in replicas.groupby("broker_id")[column].sum().items()}


def test_the_hot_topics_leaders_measure_above_the_rest_and_the_plan_relieves_them(
        load: tuple[str, SteadyTraffic], prometheus: Any, spark: Any, tmp_path: Path) -> None:
    bootstrap, traffic = load
    wait_for_full_window(traffic)
    config = measured_config(tmp_path, prometheus.url, ["network_in", "cpu"])
    run = RunFolder(config.run_dir("measured"))
    manifest = take_snapshot(config, KafkaConnection(bootstrap), run)
    produced_per_s = traffic.acked_bytes[HOT.name] / traffic.running_for()

    metrics = manifest["metrics"]
    assert metrics["source"] == "prometheus" and metrics["url"] == prometheus.url
    assert metrics["queries"] == 4  # cpu, bytes in, bytes out, log end offsets: one batch of brokers each
    assert manifest["unbalanced_resources"] == {}, manifest["metrics_completeness"]
    tables, _ = read_snapshot(run)
    network_in = per_broker(tables.replicas, "nw_in_bytes_per_s")
    cpu = {int(b): cores["measured"] for b, cores in manifest["cpu_cores"].items()}
    others = set(BROKERS) - HOT_LEADERS
    # Network in is the hot topic's measured rate on each replica: four times as many on the leaders.
    assert min(network_in[b] for b in HOT_LEADERS) > 2 * max(network_in[b] for b in others), network_in
    assert 0.5 * produced_per_s < sum(network_in.values()) / 3 < 2 * produced_per_s, (network_in, produced_per_s)
    # One broker's CPU on a shared 2-core machine jumps with GC and the neighbours' work, so the leaders are
    # compared with the others on average: the hot topic's produce work shows well above that noise.
    assert mean(cpu[b] for b in HOT_LEADERS) > 1.3 * mean(cpu[b] for b in others), cpu

    summary = run_plan(spark, config, run)
    pool = summary["pools"]["all"]
    bands = {name: body["band"] for name, body in pool["resources"].items()}
    total_capacity = {name: len(BROKERS) * CAPACITY[field] for name, field in
                      (("network_in", "nw_in_bytes_per_s"), ("cpu", "cpu_cores"))}
    assert bands["network_in"]["mean"] == pytest.approx(sum(network_in.values()) / total_capacity["network_in"])
    assert bands["cpu"]["mean"] == pytest.approx(sum(cpu.values()) / total_capacity["cpu"], rel=1e-4)
    assert bands["network_in"]["balanced"] and bands["cpu"]["balanced"]
    assert summary["totals"]["replica_moves"] + summary["totals"]["preferred_leader_changes"] > 0
    usage = {row["broker_id"]: row for row in pool["brokers"]}
    for broker in HOT_LEADERS:
        for resource in ("network_in", "cpu"):
            assert usage[broker][resource]["load_after"] < usage[broker][resource]["load_before"], usage[broker]


def test_a_broker_whose_exporter_stops_mid_window(load: tuple[str, SteadyTraffic], prometheus: Any, spark: Any,
                                                  tmp_path: Path) -> None:
    bootstrap, traffic = load
    wait_for_full_window(traffic)
    prometheus.drop_target(5)
    try:
        time.sleep(DROPPED_FOR_S)
    finally:
        prometheus.restore_target(5)

    # Its CPU is too incomplete to stand for its load: the completeness report names it, and CPU is left
    # unbalanced in its pool (no guess, no zero).
    with_cpu = measured_config(tmp_path / "cpu", prometheus.url, ["network_in", "cpu"])
    manifest = take_snapshot(with_cpu, KafkaConnection(bootstrap), RunFolder(with_cpu.run_dir("cpu")))
    brokers_below = manifest["metrics_completeness"]["brokers"]["below"]
    assert [(e["broker_id"], e["metric"]) for e in brokers_below] == [(5, "cpu")], brokers_below
    assert brokers_below[0]["fraction"] < 0.8
    assert "CPU of broker 5" in manifest["unbalanced_resources"]["all"]["cpu"], manifest["unbalanced_resources"]
    assert "5" not in manifest["cpu_cores"], manifest["cpu_cores"]  # its replicas keep the CPU model's cost

    # Without CPU: the topic only broker 5 reports is below the bar, and its pool's network in is left unbalanced.
    config = measured_config(tmp_path / "network", prometheus.url, ["network_in"])
    run = RunFolder(config.run_dir("network"))
    manifest = take_snapshot(config, KafkaConnection(bootstrap), run)
    below = manifest["metrics_completeness"]["topics"]["below"]
    assert [(e["topic"], e["metric"]) for e in below] == [(STEADY.name, "bytes_in")], below
    assert below[0]["fraction"] < 0.8
    reason = manifest["unbalanced_resources"]["all"]["network_in"]
    assert reason.startswith("metrics incomplete:") and STEADY.name in reason, reason
    band = run_plan(spark, config, run)["pools"]["all"]["resources"]["network_in"]["band"]
    assert not band["balanced"] and band["note"] == f"not balanced: {reason}"


@contextlib.contextmanager
def silent_server() -> Iterator[str]:
    """The URL of a TCP server that accepts connections and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):  # the listener shut down
            while True:
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, name="silent-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        listener.close()
        thread.join(10)
        for connection in held:
            connection.close()


def cli_snapshot(tmp_path: Path, bootstrap: str, url: str, run_id: str) -> tuple[subprocess.CompletedProcess, float]:
    """`kafka-rebalancer snapshot` of the session cluster with Prometheus at url (2 s timeout); the result and its
    duration."""
    config_path = demo_config(tmp_path, metrics=prometheus_metrics(url, timeout_s=2))
    cmd = [str(Path(sys.executable).parent / "kafka-rebalancer"), "snapshot", "--config", str(config_path),
           "--run-id", run_id, "--bootstrap-servers", bootstrap]
    started = time.monotonic()
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return result, time.monotonic() - started


def test_prometheus_down_fails_the_snapshot_with_exit_code_3(kafka_cluster: Any, prometheus: Any,
                                                            tmp_path: Path) -> None:
    bootstrap = kafka_cluster.load().bootstrap_servers
    ok, _ = cli_snapshot(tmp_path, bootstrap, prometheus.url, "before")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    latest = tmp_path / "runs" / "demo" / LATEST
    assert latest.read_text().strip() == "before"

    refused = f"http://127.0.0.1:{free_ports(1)[0]}"
    with silent_server() as silent:
        for run_id, url, why in (("refused", refused, r"is unreachable \(.*refused"),
                                 ("silent", silent, r"did not answer within 2s")):
            result, seconds = cli_snapshot(tmp_path, bootstrap, url, run_id)
            assert result.returncode == 3, result.stdout + result.stderr
            assert f"error: Prometheus at {url} " in result.stderr, result.stderr
            assert re.search(why, result.stderr), result.stderr
            assert "Traceback" not in result.stderr
            # The Kafka side of the snapshot and the process start take a few seconds; the timeout bounds the rest.
            assert seconds < 60, seconds
            assert not RunFolder(tmp_path / "runs" / "demo" / run_id).has(SNAPSHOT)
            assert latest.read_text().strip() == "before"
