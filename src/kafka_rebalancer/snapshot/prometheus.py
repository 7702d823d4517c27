"""Traffic per partition and CPU per broker from Prometheus (`metrics.source: prometheus`; README: Prometheus
metrics).

`query_metrics` asks Prometheus (range queries over the window, a few per metric: one per batch of brokers);
everything after it is pure, on the answers:

- each series is reduced over the window with the statistic (avg, p50, p95, max) of the samples it has;
- completeness = samples present / samples the window has; CPU per broker, bytes per topic (any broker reporting
  the topic counts: a leadership move ends one broker's series and starts another's) and offsets per partition
  below `min_completeness` are listed, and the resources they feed are left unbalanced in the topic's or the
  broker's pool (a broker whose CPU is only partly there leaves `cpu` unbalanced in its pool); a live broker
  with no CPU series at all, missing from the whole window, fails the snapshot (its load would be a guess);
- Kafka counts a topic's produced bytes in and consumed bytes out on the broker leading the partition: a
  (broker, topic) rate is shared among the topic's partitions that broker leads, by their offset growth over the
  window (the messages each received) when every one of them has it, else by their size, else evenly. The
  partition's bytes in are what its followers replicate too (the snapshot's role loads do that).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from string import Template
from typing import Any, Protocol

import numpy as np

from kafka_rebalancer.config import PrometheusSettings
from kafka_rebalancer.errors import PrometheusQueryError, SnapshotError
from kafka_rebalancer.snapshot.metrics import Traffic
from kafka_rebalancer.snapshot.prometheus_http import QueryWindow

Key = tuple[str, int]

# JMX exporter series of the brokers (job "kafka"): topic-level counters without the all-topics one (no topic
# label), summed per broker and topic in Prometheus so a query returns one series per pair, not per scrape target.
_TOPIC_RATE = ('sum by ($broker_label, topic) (rate(kafka_server_brokertopicmetrics_{name}_total'
               '{{job="kafka", topic!="", $brokers}}[$rate_range]))')
DEFAULT_QUERIES: dict[str, str] = {
    "cpu_process": 'sum by ($broker_label) (rate(process_cpu_seconds_total{job="kafka", $brokers}[$rate_range]))',
    "cpu_node": 'sum by ($broker_label) (rate(node_cpu_seconds_total{mode!="idle", $brokers}[$rate_range]))',
    "bytes_in": _TOPIC_RATE.format(name="bytesin"),
    "bytes_out": _TOPIC_RATE.format(name="bytesout"),
    # Every replica reports its log end offset; the largest is the leader's.
    "log_end_offset": 'max by (topic, partition) (kafka_log_log_logendoffset{job="kafka", $brokers})',
    # For execution.throttle_control: the broker's p99 of produce requests, and its bytes in and out (clients' by
    # topic, replication's broker-wide: Kafka counts a follower's fetch in these only).
    "produce_latency_ms": 'max by ($broker_label) (kafka_network_requestmetrics_totaltimems{job="kafka", '
                          'request="Produce", quantile="0.99", $brokers})',
    # rate() drops the name, so each counter gets a label of its own first (else in and out would collide).
    "network_bytes_per_s": 'sum by ($broker_label) (' + ' or '.join(
        f'label_replace(rate(kafka_server_brokertopicmetrics_{name}_total{{job="kafka", $brokers}}[$rate_range]), '
        f'"counter", "{name}", "", "")'
        for name in ("bytesin", "bytesout", "replicationbytesin", "replicationbytesout")) + ')',
}
# The labels that key each metric's series ("broker": metrics.prometheus.broker_label).
_KEY_LABELS = {"cpu": ("broker",), "bytes_in": ("broker", "topic"), "bytes_out": ("broker", "topic"),
               "log_end_offset": ("topic", "partition"), "produce_latency_ms": ("broker",),
               "network_bytes_per_s": ("broker",)}
# Offsets only weigh partitions against each other: this many points over the window are plenty, and keep the
# query (one series per partition) small.
OFFSET_POINTS_PER_WINDOW = 24
# Each manifest list of incomplete series holds at most this many (the least complete first); counts are exact.
LISTED_AT_MOST = 1000

STATISTICS: dict[str, Callable[[np.ndarray], float]] = {
    "avg": lambda v: float(np.mean(v)),
    "p50": lambda v: float(np.percentile(v, 50)),
    "p95": lambda v: float(np.percentile(v, 95)),
    "max": lambda v: float(np.max(v)),
}


@dataclass(frozen=True)
class Series:
    """One series of a range query's answer: its key labels (ints where they are ids) and its finite samples."""

    key: tuple[Any, ...]
    times: np.ndarray
    values: np.ndarray


class RangeQueries(Protocol):
    url: str

    def query_range(self, query: str, window: QueryWindow, shown_as: str) -> dict[str, Any]: ...


# -- queries ------------------------------------------------------------------------------------------------
def rate_range(settings: PrometheusSettings) -> str:
    """The range of rate(): the step, so each point covers its step and every sample counts once, but at least
    four scrapes so a rate has samples to work with when the step is short."""
    seconds = max(settings.step, 4 * settings.scrape_interval)
    return f"{seconds:g}s" if seconds == int(seconds) else f"{round(seconds * 1000)}ms"


def query_template(settings: PrometheusSettings, metric: str) -> str:
    override = getattr(settings.queries, metric)
    return override or DEFAULT_QUERIES[f"cpu_{settings.cpu}" if metric == "cpu" else metric]


def render_query(template: str, settings: PrometheusSettings, broker_ids: Sequence[int],
                 range_of_rate: str | None = None) -> str:
    brokers = f'{settings.broker_label}=~"{"|".join(str(b) for b in broker_ids)}"'
    # safe_substitute: a `$` of PromQL's own (a regex's end) stays; the config checked the placeholders.
    return Template(template).safe_substitute(brokers=brokers, broker_label=settings.broker_label,
                                              rate_range=range_of_rate or rate_range(settings))


def offsets_window(settings: PrometheusSettings, now: float) -> QueryWindow:
    return QueryWindow.ending_at(now, settings.window, max(settings.step, settings.window / OFFSET_POINTS_PER_WINDOW))


def query_metrics(client: RangeQueries, settings: PrometheusSettings, broker_ids: Sequence[int],
                  metrics: Iterable[str], now: float, *, latest_over_s: float | None = None
                  ) -> dict[str, list[Series]]:
    """Every series of each metric, one range query per batch of `brokers_per_query` brokers: over the window, or
    with `latest_over_s` only its value now (rates over that many seconds)."""
    ids = sorted(broker_ids)
    batches = [ids[i:i + settings.brokers_per_query] for i in range(0, len(ids), settings.brokers_per_query)]
    window = QueryWindow.ending_at(now, settings.window, settings.step) if latest_over_s is None else \
        QueryWindow(now, now, settings.step)
    range_of_rate = None if latest_over_s is None else f"{max(latest_over_s, 4 * settings.scrape_interval):.0f}s"
    out: dict[str, list[Series]] = {}
    for metric in metrics:
        template = query_template(settings, metric)
        metric_window = offsets_window(settings, now) if metric == "log_end_offset" else window
        out[metric] = []
        for batch in batches:
            shown_as = f"{metric} (brokers {batch[0]}..{batch[-1]}, {len(batch)} of {len(ids)}): {template}"
            data = client.query_range(render_query(template, settings, batch, range_of_rate), metric_window,
                                      shown_as)
            out[metric] += parse_matrix(data, _KEY_LABELS[metric], settings.broker_label,
                                        f"Prometheus at {client.url}, query {shown_as}")
    return out


def parse_matrix(data: Mapping[str, Any], key_labels: Sequence[str], broker_label: str, where: str) -> list[Series]:
    """A range query's `data` as series keyed by `key_labels` ("broker" is `broker_label`, as an int); NaN and
    infinite samples count as missing."""
    result = data.get("result")
    if data.get("resultType") != "matrix" or not isinstance(result, list):
        raise PrometheusQueryError(f"{where}: result type {data.get('resultType')!r}, expected a matrix (a range "
                                   f"query of an instant-vector expression)")
    series = []
    for entry in result:
        labels = entry.get("metric", {}) if isinstance(entry, dict) else {}
        try:
            key = tuple(_label(labels, broker_label if name == "broker" else name, name in ("broker", "partition"))
                        for name in key_labels)
            samples = np.array(entry["values"], dtype=float).reshape(-1, 2)
        except (KeyError, TypeError, ValueError) as exc:
            raise PrometheusQueryError(f"{where}: series {labels} {exc}, expected the labels "
                                       f"{', '.join(broker_label if n == 'broker' else n for n in key_labels)} "
                                       f"and [time, value] samples") from None
        finite = np.isfinite(samples[:, 1])
        series.append(Series(key, samples[finite, 0], samples[finite, 1]))
    return series


def _label(labels: Mapping[str, str], name: str, integer: bool) -> Any:
    if name not in labels:
        raise ValueError(f"lacks the label {name!r}")
    value = labels[name]
    if integer and not str(value).isdigit():
        raise ValueError(f"has {name}={value!r}, not an id")
    return int(value) if integer else value


# -- reduction and completeness -----------------------------------------------------------------------------
def reduce_values(values: np.ndarray, statistic: str) -> float:
    """The statistic over a series' samples (the ones present)."""
    return STATISTICS[statistic](values)


def completeness(times: np.ndarray, expected_samples: int) -> float:
    """Distinct sample times present over those the window has."""
    return min(len(np.unique(times)) / expected_samples, 1.0)


@dataclass
class MeasuredMetrics:
    """What the snapshot takes from Prometheus, and what the manifest says about it."""

    traffic: Traffic
    broker_cpu_cores: dict[int, float]  # empty when cpu is not balanced (the CPU model alone is used)
    completeness: dict[str, Any]
    unbalanced_resources: dict[str, dict[str, str]]  # pool -> resource -> why
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ClusterFacts:
    """What the snapshot knows of the cluster that the attribution needs."""

    live_brokers: Sequence[int]
    leaders: Mapping[Key, int]  # -1: no leader
    sizes: Mapping[Key, int]
    broker_pool: Mapping[int, str]
    topic_pool: Mapping[str, str | None]  # balanced topics only (excluded ones are left out)


def measure(results: Mapping[str, list[Series]], facts: ClusterFacts, settings: PrometheusSettings,
            balanced_resources: Iterable[str], now: float) -> MeasuredMetrics:
    """The range queries' answers as traffic per partition and cores per broker, with the completeness gate."""
    expected = QueryWindow.ending_at(now, settings.window, settings.step).expected_samples
    bar = settings.min_completeness
    gaps = _Gaps(set(balanced_resources))
    cpu: dict[int, float] = {}
    if "cpu" in results:
        cpu, below_brokers = broker_cpu(results["cpu"], facts, settings.statistic, bar, expected)
        for broker, fraction in below_brokers.items():
            gaps.add(facts.broker_pool.get(broker), ("cpu",), f"CPU of broker {broker}", fraction)
    else:
        below_brokers = {}
    growth, below_partitions = offset_growth(results["log_end_offset"], bar,
                                             offsets_window(settings, now).expected_samples)
    rates, below_topics, warnings = {}, {}, []
    for metric, resources in (("bytes_in", ("network_in", "network_out")), ("bytes_out", ("network_out",))):
        by_pair, below = topic_rates(results[metric], settings.statistic, bar, expected)
        below = {t: f for t, f in below.items() if t in facts.topic_pool}
        for topic, fraction in below.items():
            gaps.add(facts.topic_pool[topic], resources, f"{metric} of topic {topic!r}", fraction)
        rates[metric], lost = attribute(by_pair, facts.leaders, growth, facts.sizes)
        if lost:
            warnings.append(f"{metric}: {len(lost)} (broker, topic) rates have no partition to go to, the broker "
                            f"leading none of the topic's partitions now (leadership moved during the window), "
                            f"e.g. broker {lost[0][0]} topic {lost[0][1]!r}")
        below_topics[metric] = below
    section = {
        "min_completeness": bar, "expected_samples": expected, "listed_at_most": LISTED_AT_MOST,
        "brokers": _listed([{"broker_id": b, "metric": "cpu", "fraction": f} for b, f in below_brokers.items()]),
        "topics": _listed([{"topic": t, "metric": m, "fraction": f} for m, below in below_topics.items()
                           for t, f in below.items()]),
        "partitions": _listed([{"topic": k[0], "partition": k[1], "metric": "log_end_offset", "fraction": f}
                               for k, f in below_partitions.items() if k[0] in facts.topic_pool]),
    }
    return MeasuredMetrics(Traffic(rates["bytes_in"], rates["bytes_out"]), cpu, section, gaps.reasons(), warnings)


def _listed(entries: list[dict[str, Any]]) -> dict[str, Any]:
    entries.sort(key=lambda e: (e["fraction"], *[str(v) for v in e.values()]))
    return {"count": len(entries), "below": [{**e, "fraction": round(e["fraction"], 4)}
                                             for e in entries[:LISTED_AT_MOST]]}


class _Gaps:
    """Per pool and resource, the incomplete series that leave it unbalanced (balanced resources only)."""

    def __init__(self, balanced: set[str]) -> None:
        self.balanced = balanced
        self.found: dict[tuple[str, str], list[tuple[float, str]]] = defaultdict(list)

    def add(self, pool: str | None, resources: Iterable[str], what: str, fraction: float) -> None:
        for resource in resources:
            if pool is not None and resource in self.balanced:
                self.found[(pool, resource)].append((fraction, what))

    def reasons(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for (pool, resource), found in sorted(self.found.items()):
            fraction, worst = min(found)
            out.setdefault(pool, {})[resource] = (
                f"metrics incomplete: {len(found)} series below the completeness bar over the window, the least "
                f"{worst} ({fraction:.0%})")
        return out


def broker_cpu(series: list[Series], facts: ClusterFacts, statistic: str, bar: float,
               expected: int) -> tuple[dict[int, float], dict[int, float]]:
    """Cores per broker (its series' statistics summed: the default query gives one series per broker) and the
    brokers with some series below the bar (a broker with none complete gets no cores: its pool's CPU is left
    unbalanced). A live broker with no series at all, missing from the whole window, fails."""
    complete: dict[int, float] = defaultdict(float)
    below: dict[int, float] = {}
    for s in series:
        broker, fraction = s.key[0], completeness(s.times, expected)
        if fraction >= bar:
            complete[broker] += reduce_values(s.values, statistic)
        elif len(s.values):
            below[broker] = min(below.get(broker, 1.0), fraction)
    missing = sorted(b for b in facts.live_brokers if b not in complete and b not in below)
    if missing:
        raise SnapshotError(f"Prometheus has no CPU usage over the whole window for {len(missing)} live broker(s): "
                            f"{', '.join(map(str, missing[:20]))}; expected every broker scraped with its broker "
                            f"label, or the cpu resource not balanced")
    return dict(complete), {b: f for b, f in below.items() if b in facts.live_brokers}


def topic_rates(series: list[Series], statistic: str, bar: float,
                expected: int) -> tuple[dict[tuple[int, str], float], dict[str, float]]:
    """Bytes/s per (broker, topic), and the topics whose samples (any broker's) cover less than the bar."""
    rates: dict[tuple[int, str], float] = defaultdict(float)
    times: dict[str, list[np.ndarray]] = defaultdict(list)
    for s in series:
        broker, topic = s.key
        times[topic].append(s.times)
        if len(s.values):
            rates[(broker, topic)] += reduce_values(s.values, statistic)
    coverage = {topic: completeness(np.concatenate(t), expected) for topic, t in times.items()}
    return dict(rates), {topic: f for topic, f in coverage.items() if f < bar}


def offset_growth(series: list[Series], bar: float, expected: int) -> tuple[dict[Key, float], dict[Key, float]]:
    """Messages per second each partition received over the window (its end offset's rises; a fall is a
    recreated topic and is skipped), and the partitions below the bar (no growth for them)."""
    merged: dict[Key, dict[float, float]] = defaultdict(dict)
    for s in series:  # a partition's replicas may be in several batches: the largest offset is the leader's
        samples = merged[s.key]
        for t, v in zip(s.times.tolist(), s.values.tolist(), strict=True):
            samples[t] = max(v, samples.get(t, v))
    growth: dict[Key, float] = {}
    below: dict[Key, float] = {}
    for key, samples in merged.items():
        times = np.array(sorted(samples))
        fraction = completeness(times, expected)
        if fraction < bar or len(times) < 2:
            below[key] = fraction
            continue
        offsets = np.array([samples[t] for t in times])
        growth[key] = float(np.clip(np.diff(offsets), 0, None).sum() / (times[-1] - times[0]))
    return growth, below


# -- attribution ----------------------------------------------------------------------------------------------
def attribute(rates: Mapping[tuple[int, str], float], leaders: Mapping[Key, int], growth: Mapping[Key, float],
              sizes: Mapping[Key, int]) -> tuple[dict[Key, float], list[tuple[int, str]]]:
    """Each (broker, topic) rate shared among the topic's partitions the broker leads (`partition_shares`);
    returns the rates per partition and the pairs whose broker leads none of the topic's partitions."""
    led: dict[tuple[int, str], list[Key]] = defaultdict(list)
    for key, leader in leaders.items():
        led[(leader, key[0])].append(key)
    out: dict[Key, float] = {}
    lost = []
    for pair, rate in sorted(rates.items()):
        keys = led.get(pair)
        if not keys:
            if rate > 0:
                lost.append(pair)
            continue
        for key, share in zip(keys, partition_shares(keys, growth, sizes), strict=True):
            out[key] = out.get(key, 0.0) + rate * share
    return out, lost


def partition_shares(keys: Sequence[Key], growth: Mapping[Key, float], sizes: Mapping[Key, int]) -> np.ndarray:
    """How a broker's rate for a topic divides among the partitions of it that the broker leads: by offset growth
    (what each received during the window) when all have it and some grew; else by size (what each received
    over its retention); else evenly."""
    for weights in ([growth.get(k) for k in keys], [sizes.get(k, 0) for k in keys]):
        if all(w is not None for w in weights):
            array = np.array(weights, dtype=float)
            if array.sum() > 0:
                return array / array.sum()
    return np.full(len(keys), 1.0 / len(keys))
