"""Prometheus as the metrics source, on recorded range-query answers (tests/fixtures/prometheus): reduction,
completeness, attribution to partitions, measured CPU spread over replicas, the completeness gate, the config's
checks, the HTTP client's failures, and the planner leaving an incomplete resource unbalanced."""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import numpy as np
import pandas as pd
import pytest

from kafka_rebalancer.config import PrometheusSettings
from kafka_rebalancer.errors import (
    ConfigError,
    PrometheusQueryError,
    PrometheusUnreachableError,
    SnapshotError,
    UnreachableError,
)
from kafka_rebalancer.kafka_admin import BrokerInfo, KafkaConnection, PartitionInfo
from kafka_rebalancer.plan.job import unbalanced_by_metrics
from kafka_rebalancer.snapshot import capture
from kafka_rebalancer.snapshot.measured_cpu import spread_measured_cpu
from kafka_rebalancer.snapshot.prometheus import (
    ClusterFacts,
    Series,
    attribute,
    broker_cpu,
    measure,
    offset_growth,
    parse_matrix,
    partition_shares,
    query_metrics,
    rate_range,
    reduce_values,
)
from kafka_rebalancer.snapshot.prometheus_http import PrometheusHttp, QueryWindow, prometheus_http
from tests.helpers import FIXTURES, fake_admin

RECORDED = FIXTURES / "prometheus"
# The recorded answers' window: 1h at 15m steps ending at 1700002800 (5 samples per series).
NOW = 1_700_002_810.0
SETTINGS = PrometheusSettings(url="http://prometheus:9090", window="1h", step="15m", min_completeness=0.9)
CLUSTER = [BrokerInfo(b, f"r{b}", "h", 9090 + b) for b in (1, 2, 3)]
PARTITIONS = [PartitionInfo("orders", 0, [1, 2], [1, 2], 1), PartitionInfo("orders", 1, [2, 3], [2, 3], 2),
              PartitionInfo("orders", 2, [1, 3], [1, 3], 1), PartitionInfo("logs", 0, [3, 1], [3, 1], 3)]
SIZES = {("orders", 0): 300, ("orders", 1): 100, ("orders", 2): 100, ("logs", 0): 50}
FACTS = ClusterFacts([1, 2, 3], {(p.topic, p.partition): p.leader for p in PARTITIONS}, SIZES,
                     {1: "a", 2: "a", 3: "a"}, {"orders": "a", "logs": "a"})
BALANCED = ["disk", "network_in", "network_out", "cpu"]
CONFIG = {"cluster": {"name": "c1"}, "pools": {"a": {"brokers": [1, 2, 3]}},
          "topic_pools": [{"topics": "*", "pool": "a"}],
          "capacity": {"default": {"disk_bytes": 10**9, "nw_in_bytes_per_s": 10**9, "nw_out_bytes_per_s": 10**9,
                                   "cpu_cores": 8}},
          "resources": {name: {} for name in BALANCED}}
KEY_LABELS = {"cpu": ("broker",), "bytes_in": ("broker", "topic"), "bytes_out": ("broker", "topic"),
              "log_end_offset": ("topic", "partition")}


def recorded(name: str) -> dict[str, Any]:
    return json.loads((RECORDED / f"{name}.json").read_text())


def recorded_series(metric: str, name: str | None = None) -> list[Series]:
    return parse_matrix(recorded(name or metric)["data"], KEY_LABELS[metric], "broker_id", "test")


def results(cpu: str = "cpu") -> dict[str, list[Series]]:
    return {"cpu": recorded_series("cpu", cpu), **{m: recorded_series(m) for m in
                                                    ("bytes_in", "bytes_out", "log_end_offset")}}


# -- reduction and completeness -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("statistic", "expected"), [("avg", 3000.0), ("p50", 3000.0), ("p95", 4800.0),
                                                     ("max", 5000.0)])
def test_each_statistic_reduces_a_series_over_the_window(statistic: str, expected: float) -> None:
    orders_on_1 = next(s for s in recorded_series("bytes_in") if s.key == (1, "orders"))
    assert reduce_values(orders_on_1.values, statistic) == pytest.approx(expected)


def test_nan_samples_are_missing_and_completeness_counts_present_ones() -> None:
    logs_on_3 = next(s for s in recorded_series("bytes_in") if s.key == (3, "logs"))
    assert logs_on_3.values.tolist() == [100.0, 100.0]  # the NaN is not a sample
    window = QueryWindow.ending_at(NOW, SETTINGS.window, SETTINGS.step)
    assert (window.start, window.end, window.expected_samples) == (1_699_999_200, 1_700_002_800, 5)
    measured = measure(results(), FACTS, SETTINGS, BALANCED, NOW)
    # 'logs' was reported by broker 2 (2 samples) then broker 3 (2 of 3): 4 of the window's 5 sample times.
    assert measured.completeness["topics"] == {"count": 1, "below": [
        {"topic": "logs", "metric": "bytes_in", "fraction": 0.8}]}
    assert measured.completeness["partitions"]["below"] == [
        {"topic": "logs", "partition": 0, "metric": "log_end_offset", "fraction": 0.4}]
    assert measured.completeness["brokers"] == {"count": 0, "below": []}
    assert measured.completeness["expected_samples"] == 5


def test_offset_growth_skips_a_reset_and_needs_the_bar() -> None:
    times = np.array([0.0, 900, 1800, 2700, 3600])
    reset = Series(("t", 0), times, np.array([100.0, 200, 10, 20, 30]))  # recreated between 900 and 1800
    sparse = Series(("t", 1), times[:2], np.array([1.0, 2]))
    growth, below = offset_growth([reset, sparse], 0.9, 5)
    assert growth == {("t", 0): pytest.approx(120 / 3600)} and below == {("t", 1): 0.4}


def test_rate_range_covers_the_step_and_at_least_four_scrapes() -> None:
    assert rate_range(PrometheusSettings(url="http://p", step="5m")) == "300s"
    assert rate_range(PrometheusSettings(url="http://p", step="2s", scrape_interval="2s")) == "8s"
    assert rate_range(PrometheusSettings(url="http://p", step="1s", scrape_interval="0.5s")) == "2s"


# -- attribution ---------------------------------------------------------------------------------------------

def test_topic_rates_go_to_the_partitions_led_there_by_offset_growth() -> None:
    measured = measure(results(), FACTS, SETTINGS, BALANCED, NOW)
    # Broker 1 leads orders 0 and 2, which grew 400 and 1200 messages: its p95 of 4800 B/s splits 1:3.
    assert measured.traffic.bytes_in == pytest.approx({("orders", 0): 1200.0, ("orders", 2): 3600.0,
                                                       ("orders", 1): 500.0, ("logs", 0): 100.0})
    assert measured.traffic.bytes_out == pytest.approx({("orders", 0): 500.0, ("orders", 2): 1500.0,
                                                        ("orders", 1): 1000.0, ("logs", 0): 0.0})
    # Broker 2 led 'logs' early in the window and leads none of its partitions now.
    assert measured.warnings == [
        "bytes_in: 1 (broker, topic) rates have no partition to go to, the broker leading none of the topic's "
        "partitions now (leadership moved during the window), e.g. broker 2 topic 'logs'"]


def test_shares_fall_back_to_size_then_evenly() -> None:
    keys = [("t", 0), ("t", 1)]
    assert partition_shares(keys, {("t", 0): 3.0, ("t", 1): 1.0}, {}).tolist() == [0.75, 0.25]
    # One partition without offset growth: sizes for both (rates in different units never mix).
    assert partition_shares(keys, {("t", 0): 3.0}, {("t", 0): 100, ("t", 1): 300}).tolist() == [0.25, 0.75]
    assert partition_shares(keys, {("t", 0): 0.0, ("t", 1): 0.0}, {("t", 0): 0, ("t", 1): 0}).tolist() == [0.5, 0.5]
    rates, lost = attribute({(1, "t"): 10.0, (2, "t"): 0.0}, {("t", 0): 1, ("t", 1): 1}, {}, {})
    assert rates == {("t", 0): 5.0, ("t", 1): 5.0} and lost == []


# -- measured CPU ----------------------------------------------------------------------------------------------

def test_measured_cpu_is_spread_by_the_models_weights_and_adds_up_per_broker() -> None:
    # Partitions: p0 led by broker 1 (follower on 2), p1 led by 2 (follower on 1). Model: leader 2, follower 1.
    replica_partition, broker, leader = np.array([0, 0, 1, 1]), np.array([1, 2, 2, 1]), np.array([1, 0, 1, 0])
    model_leader, model_follower = np.array([2.0, 2.0]), np.array([1.0, 1.0])
    lead, follow = spread_measured_cpu(replica_partition, broker, leader, model_leader, model_follower,
                                       {1: 6.0, 2: 1.5})
    # Broker 1 models 3 cores and measured 6 (x2); broker 2 models 3 and measured 1.5 (x0.5).
    assert lead.tolist() == [4.0, 1.0] and follow.tolist() == [0.5, 2.0]
    per_broker = np.bincount(broker, weights=np.where(leader == 1, lead[replica_partition],
                                                      follow[replica_partition]))
    assert per_broker[1:].tolist() == [6.0, 1.5]


def test_a_broker_with_cpu_but_no_traffic_spreads_it_evenly_and_unmeasured_keep_the_model() -> None:
    # Broker 1 leads p0 and follows p1, no traffic at all; broker 3 (dead: no measurement) follows p0.
    lead, follow = spread_measured_cpu(np.array([0, 0, 1, 1]), np.array([1, 3, 2, 1]), np.array([1, 0, 1, 0]),
                                       np.array([0.0, 0.0]), np.array([0.0, 0.0]), {1: 4.0, 2: 1.0})
    assert lead.tolist() == [2.0, 1.0] and follow.tolist() == [0.0, 2.0]


def test_snapshot_cpu_columns_add_up_to_the_measurement(config_factory: Callable[..., Any],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kafka_rebalancer.snapshot.ClusterAdmin", FakeAdmin)
    with FakePrometheus({"process_cpu": "cpu"}) as url:
        tables, manifest = capture(prometheus_config(config_factory, url), KafkaConnection("k:9092"), now=NOW)
    cpu = tables.replicas.groupby("broker_id")["cpu_cores"].sum()
    # Leaders carry their broker's share exactly; followers the mean of their partition's followers' (RF 2: one).
    assert cpu.to_dict() == pytest.approx({1: 1.92, 2: 0.5, 3: 3.0})
    assert manifest["cpu_cores"]["1"] == {"measured": 1.92, "planned": 1.92}


# -- the completeness gate ---------------------------------------------------------------------------------------

def test_a_broker_missing_from_the_whole_window_fails_the_snapshot() -> None:
    with pytest.raises(SnapshotError) as err:
        measure(results("cpu_gaps"), FACTS, SETTINGS, BALANCED, NOW)
    assert "no CPU usage over the whole window for 1 live broker(s): 2;" in str(err.value)  # 3 is only partial
    assert isinstance(err.value, SnapshotError) and not isinstance(err.value, UnreachableError)  # exit 2


def test_a_broker_with_part_of_its_cpu_leaves_cpu_unbalanced_in_its_pool_and_is_named() -> None:
    full, gappy = np.arange(5.0) * 900, np.arange(2.0) * 900  # an exporter that stopped after two samples
    cpu = [Series((b,), full, np.ones(5)) for b in (1, 2)] + [Series((3,), gappy, np.ones(2))]
    measured = measure({**results(), "cpu": cpu}, FACTS, SETTINGS, BALANCED, NOW)
    assert measured.broker_cpu_cores == {1: 1.0, 2: 1.0}  # no guess for broker 3
    assert measured.unbalanced_resources["a"]["cpu"].endswith("the least CPU of broker 3 (40%)")
    assert measured.completeness["brokers"]["below"] == [{"broker_id": 3, "metric": "cpu", "fraction": 0.4}]


def test_cpu_is_not_asked_when_not_balanced() -> None:
    measured = measure({m: s for m, s in results("cpu_gaps").items() if m != "cpu"}, FACTS, SETTINGS,
                       ["disk", "network_in"], NOW)
    assert measured.broker_cpu_cores == {}
    assert measured.unbalanced_resources == {"a": {"network_in": "metrics incomplete: 1 series below the "
                                                   "completeness bar over the window, the least bytes_in of topic "
                                                   "'logs' (80%)"}}


def test_incomplete_series_leave_their_resources_unbalanced_in_the_pool() -> None:
    measured = measure(results(), FACTS, SETTINGS, BALANCED, NOW)
    assert set(measured.unbalanced_resources) == {"a"}
    assert set(measured.unbalanced_resources["a"]) == {"network_in", "network_out"}  # bytes in feed both
    # A broker with one of two CPU series (per instance, by a custom query) below the bar: cpu unbalanced.
    full, gappy = np.arange(5.0) * 900, np.arange(2.0) * 900
    cpu = [Series((b,), full, np.ones(5)) for b in (1, 2, 3)] + [Series((3,), gappy, np.ones(2))]
    cores, below = broker_cpu(cpu, FACTS, "max", 0.9, 5)
    assert cores == {1: 1.0, 2: 1.0, 3: 1.0} and below == {3: 0.4}
    measured = measure({**results(), "cpu": cpu}, FACTS, SETTINGS, BALANCED, NOW)
    assert measured.unbalanced_resources["a"]["cpu"].endswith("the least CPU of broker 3 (40%)")
    lenient = measure(results(), FACTS, SETTINGS.model_copy(update={"min_completeness": 0.8}), BALANCED, NOW)
    assert lenient.unbalanced_resources == {}


def test_the_planner_leaves_an_unbalanced_resource_alone_and_says_why() -> None:
    bands = pd.DataFrame({"broker_pool": ["a", "a", "b"], "resource": ["cpu", "disk", "cpu"],
                          "balanced": [True, True, True], "note": [None, None, None]})
    marked = unbalanced_by_metrics(bands, {"a": {"cpu": "metrics incomplete: ..."}})
    assert marked["balanced"].tolist() == [False, True, True]
    assert marked["note"].tolist() == ["not balanced: metrics incomplete: ...", None, None]
    assert unbalanced_by_metrics(bands, {}) is bands


# -- queries --------------------------------------------------------------------------------------------------

class RecordingClient:
    url = "http://prometheus:9090"

    def __init__(self) -> None:
        self.asked: list[tuple[str, QueryWindow, str]] = []

    def query_range(self, query: str, window: QueryWindow, shown_as: str) -> dict[str, Any]:
        self.asked.append((query, window, shown_as))
        return {"resultType": "matrix", "result": []}


def test_queries_group_in_promql_and_batch_brokers() -> None:
    client = RecordingClient()
    settings = SETTINGS.model_copy(update={"brokers_per_query": 2})
    query_metrics(client, settings, [3, 1, 2], ["cpu", "bytes_in", "log_end_offset"], NOW)
    assert len(client.asked) == 6  # two batches per metric
    cpu_query, window, shown_as = client.asked[0]
    assert cpu_query == ('sum by (broker_id) (rate(process_cpu_seconds_total{job="kafka", broker_id=~"1|2"}'
                         '[900s]))')
    assert shown_as.startswith("cpu (brokers 1..2, 2 of 3): sum by ($broker_label)")
    assert (window.start, window.end, window.step) == (1_699_999_200, 1_700_002_800, 900)
    assert client.asked[3][0] == ('sum by (broker_id, topic) (rate(kafka_server_brokertopicmetrics_bytesin_total'
                                  '{job="kafka", topic!="", broker_id=~"3"}[900s]))')
    assert client.asked[4][0] == 'max by (topic, partition) (kafka_log_log_logendoffset{job="kafka", broker_id=~"1|2"})'
    node = query_metrics(client, settings.model_copy(update={"cpu": "node", "broker_label": "kafka_broker"}),
                         [1], ["cpu"], NOW)
    assert node == {"cpu": []}
    assert client.asked[-1][0] == ('sum by (kafka_broker) (rate(node_cpu_seconds_total{mode!="idle", '
                                   'kafka_broker=~"1"}[900s]))')


def test_a_series_without_the_broker_label_is_an_error_naming_the_query() -> None:
    data = {"resultType": "matrix", "result": [{"metric": {"instance": "b1:7071"}, "values": [[1, "1"]]}]}
    with pytest.raises(PrometheusQueryError, match=r"^q: series \{'instance': 'b1:7071'\} lacks the label "
                                                   r"'broker_id', expected the labels broker_id"):
        parse_matrix(data, ("broker",), "broker_id", "q")
    with pytest.raises(PrometheusQueryError, match="result type 'vector', expected a matrix"):
        parse_matrix({"resultType": "vector", "result": []}, ("broker",), "broker_id", "q")


# -- config --------------------------------------------------------------------------------------------------

def prometheus_config(config_factory: Callable[..., Any], url: str, **prometheus: Any) -> Any:
    return config_factory({**CONFIG, "metrics": {"source": "prometheus", "prometheus": {
        "url": url, "window": "1h", "step": "15m", "min_completeness": 0.8, "timeout_s": 5, **prometheus}}})


@pytest.mark.parametrize(("prometheus", "field", "message"), [
    ({}, "metrics.prometheus.url", "Field required"),
    ({"url": "prometheus:9090"}, "metrics.prometheus.url", "should match pattern"),
    ({"url": "https://me:pw@prom"}, "metrics.prometheus.url", "credentials in the url, expected them under "
                                                              "metrics.prometheus.auth"),
    ({"statistic": "p99"}, "metrics.prometheus.statistic", "Input should be 'avg', 'p50', 'p95' or 'max'"),
    ({"min_completeness": 1.5}, "metrics.prometheus.min_completeness", "less than or equal to 1"),
    ({"window": "1h", "step": "2h"}, "metrics.prometheus", "step (7200s) is not below window (3600s)"),
    ({"step": "1s"}, "metrics.prometheus", "step (1s) is below scrape_interval (2s)"),
    ({"cpu": "jvm"}, "metrics.prometheus.cpu", "Input should be 'process' or 'node'"),
    ({"queries": {"cpu": "sum(rate(cpu_total[$range]))"}}, "metrics.prometheus.queries.cpu",
     "unknown placeholder $range, expected only $brokers, $broker_label, $rate_range"),
    ({"queries": {"bytes_in": "sum by (broker_id, topic) (rate(x[5m]))"}}, "metrics.prometheus.queries.bytes_in",
     "expected the placeholder $brokers"),
    ({"queries": {"messages_in": "x"}}, "metrics.prometheus.queries.messages_in", "unknown field"),
    ({"auth": {"username": "u"}}, "metrics.prometheus.auth", "username and password go together"),
    ({"auth": {"username": "u", "password": "p", "bearer_token": "t"}}, "metrics.prometheus.auth",
     "expected exactly one of username and password, bearer_token or airflow_connection_id, got username and "
     "password and bearer_token"),
    ({"tls": {"ca_file": "missing.pem"}}, "metrics.prometheus.tls.ca_file", "file not found"),
])
def test_bad_prometheus_settings_name_the_field(config_factory: Callable[..., Any], prometheus: dict[str, Any],
                                               field: str, message: str) -> None:
    body = {"url": "http://prom:9090", **prometheus} if "url" not in prometheus and prometheus else prometheus
    with pytest.raises(ConfigError) as err:
        config_factory({**CONFIG, "metrics": {"source": "prometheus", "prometheus": body}})
    assert err.value.field == field and message in err.value.message


def test_prometheus_source_needs_its_settings_and_secrets_stay_out(config_factory: Callable[..., Any],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"metrics\.source is 'prometheus' but metrics\.prometheus is not set"):
        config_factory({**CONFIG, "metrics": {"source": "prometheus"}})
    monkeypatch.setenv("PROM_PASSWORD", "s3cret-pw")
    config = prometheus_config(config_factory, "http://prom:9090",
                               auth={"username": "rebalancer", "password": "${PROM_PASSWORD}"})
    assert "s3cret-pw" not in repr(config) and "s3cret-pw" not in config.model_dump_json()
    rotated = prometheus_config(config_factory, "http://other:9090", auth={"bearer_token": "t"}, timeout_s=9)
    assert config.fingerprint() == rotated.fingerprint()  # how Prometheus is reached does not shape a plan


# -- the HTTP client --------------------------------------------------------------------------------------------

FakeAdmin = fake_admin(CLUSTER, PARTITIONS, SIZES)


ANSWERS = {"process_cpu": "cpu", "bytesin": "bytes_in", "bytesout": "bytes_out", "logendoffset": "log_end_offset"}


class FakePrometheus:
    """A stdlib HTTP server answering range queries with the recorded answers (by a word of the query), or with
    `status` and the named answer; it keeps the requests it got."""

    def __init__(self, answers: dict[str, str] | None = None, status: int = 200) -> None:
        self.answers, self.status, self.requests = {**ANSWERS, **(answers or {})}, status, []

    def __enter__(self) -> str:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
                fake.requests.append((self.path, dict(self.headers), form))
                name = next(n for word, n in fake.answers.items() if word in form["query"][0])
                body = (RECORDED / f"{name}.json").read_bytes()
                self.send_response(fake.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_capture_queries_prometheus_and_records_what_it_found(config_factory: Callable[..., Any],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kafka_rebalancer.snapshot.ClusterAdmin", FakeAdmin)
    monkeypatch.setenv("PROM_PASSWORD", "s3cret-pw")
    server = FakePrometheus()
    with server as url:
        config = prometheus_config(config_factory, url, min_completeness=0.9,
                                   auth={"username": "rebalancer", "password": "${PROM_PASSWORD}"})
        tables, manifest = capture(config, KafkaConnection("k:9092"), now=NOW)
    path, headers, form = server.requests[0]
    assert path == "/api/v1/query_range" and form["start"] == ["1699999200.000"] and form["step"] == ["900"]
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"rebalancer:s3cret-pw").decode()
    assert manifest["metrics"]["queries"] == 4 and manifest["metrics"]["rate_range"] == "900s"
    assert manifest["unbalanced_resources"]["a"].keys() == {"network_in", "network_out"}
    assert manifest["metrics_completeness"]["topics"]["below"][0]["topic"] == "logs"
    partitions = tables.partitions.set_index(["topic", "partition"])
    assert partitions.loc[("orders", 2), "bytes_in_per_s"] == pytest.approx(3600.0)
    assert any("leadership moved during the window" in w for w in tables.warnings)
    assert "s3cret-pw" not in json.dumps(manifest)


def test_bad_query_and_server_errors() -> None:
    window = QueryWindow.ending_at(NOW, 3600, 900)
    with FakePrometheus({"bad": "bad_query"}, status=400) as url:
        client = PrometheusHttp(url, 5.0)
        with pytest.raises(PrometheusQueryError) as err:
            client.query_range("bad}", window, "cpu: bad}")
    assert str(err.value) == (f"Prometheus at {url} refused the query cpu: bad}}: HTTP 400 (invalid parameter "
                              f"\"query\": 1:15: parse error: unexpected \"}}\")")
    assert not isinstance(err.value, UnreachableError)  # exit 2: retrying does not help
    with FakePrometheus({"x": "bad_query"}, status=503) as url, pytest.raises(PrometheusUnreachableError,
                                                                            match=r"answered HTTP 503"):
        PrometheusHttp(url, 5.0).query_range("x", window, "x")
    assert client.queries == 1


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A port that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


def test_a_silent_prometheus_fails_within_the_timeout_naming_url_and_query(silent_server: str) -> None:
    settings = PrometheusSettings(url=silent_server, timeout_s=0.5,
                                  auth={"username": "rebalancer", "password": "s3cret-pw"})
    client = prometheus_http(settings, "config.yaml")
    started = time.monotonic()
    with pytest.raises(PrometheusUnreachableError) as err:
        query_metrics(client, settings, [1, 2], ["bytes_in"], NOW)
    assert time.monotonic() - started < 3
    assert str(err.value).startswith(f"Prometheus at {silent_server} did not answer within 0.5s "
                                     f"(metrics.prometheus.timeout_s) to the query bytes_in (brokers 1..2, 2 of 2): "
                                     f"sum by ($broker_label, topic)")
    assert "s3cret-pw" not in str(err.value) and isinstance(err.value, UnreachableError)  # exit code 3
    assert client.queries == 1 and client.seconds >= 0.5


def test_a_closed_port_is_unreachable() -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()
    with pytest.raises(PrometheusUnreachableError, match=rf"^Prometheus at {url} is unreachable \(.*refused"):
        PrometheusHttp(url, 2.0).query_range("up", QueryWindow(0, 60, 15), "up")


def test_credentials_from_an_airflow_connection(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_PROM_BEARER", json.dumps({"conn_type": "http", "extra": {"bearer_token":
                                                                                               "tok-123456"}}))
    monkeypatch.setenv("AIRFLOW_CONN_PROM_BASIC", json.dumps({"conn_type": "http", "login": "rebalancer",
                                                              "password": "pw-123456"}))
    bearer = prometheus_http(PrometheusSettings(url="http://p", auth={"airflow_connection_id": "prom_bearer"}), "c")
    basic = prometheus_http(PrometheusSettings(url="http://p", auth={"airflow_connection_id": "prom_basic"}), "c")
    assert bearer.headers == {"Authorization": "Bearer tok-123456"}
    assert basic.headers == {"Authorization": "Basic " + base64.b64encode(b"rebalancer:pw-123456").decode()}
    assert "pw-123456" not in repr(basic)
    with pytest.raises(ConfigError, match="no Airflow connection 'prom_missing'"):
        prometheus_http(PrometheusSettings(url="http://p", auth={"airflow_connection_id": "prom_missing"}), "c")
