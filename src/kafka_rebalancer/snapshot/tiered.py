"""Tiered topics (KIP-405): which topics keep part of their log remote, how much stays remote, and what moving one
of their replicas really copies (pure: the cluster's configs and Prometheus' answers come in as arguments).

Kafka reports the remote log per broker and topic only: `kafka.server:type=BrokerTopicMetrics,
name=RemoteLogSizeBytes,topic=<t>` (and `RemoteCopyLagBytes`, the bytes of closed segments not yet copied to
remote storage) is the sum over the topic's partitions that broker leads (BrokerTopicMetrics' aggregated gauges;
the names are RemoteStorageMetrics' in kafka-storage-api). A (broker, topic) value is shared among those
partitions by their local size, like the traffic rates (`prometheus.attribute`).

A new replica copies the leader's whole local log, unless the receiving broker runs with
`follower.fetch.last.tiered.offset.enable` (KIP-1023): it then starts at the last tiered offset and copies only
what is not yet in remote storage. The snapshot does not know which broker will receive a move, so the cheaper
cost counts only where every live broker has the config on; else a move costs the local size.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from kafka_rebalancer.config import PrometheusSettings
from kafka_rebalancer.model.schemas import TIERED_PARTITIONS
from kafka_rebalancer.run_folder import read_json, read_table
from kafka_rebalancer.snapshot.prometheus import Key, RangeQueries, Series, attribute, parse_matrix, render_query
from kafka_rebalancer.snapshot.prometheus_http import QueryWindow

REMOTE_STORAGE_ENABLE = "remote.storage.enable"
FETCH_LAST_TIERED = "follower.fetch.last.tiered.offset.enable"

# JMX exporter series (tools/kafka/jmx_exporter/rules.yaml), the latest value per broker and topic.
_REMOTE_GAUGE = ('sum by ($broker_label, topic) '
                 '(kafka_server_brokertopicmetrics_{name}{{job="kafka", topic!="", $brokers}})')
REMOTE_QUERIES: dict[str, str] = {
    "remote_log_size_bytes": _REMOTE_GAUGE.format(name="remotelogsizebytes"),
    "remote_copy_lag_bytes": _REMOTE_GAUGE.format(name="remotecopylagbytes"),
}


def is_true(value: str | None) -> bool:
    """A boolean Kafka config's value as the broker reports it ("true"/"false"; None: not set)."""
    return value is not None and value.strip().lower() == "true"


def tiered_topics(remote_storage_enable: Mapping[str, str | None]) -> frozenset[str]:
    """The topics whose remote.storage.enable is true."""
    return frozenset(t for t, value in remote_storage_enable.items() if is_true(value))


def fetches_from_last_tiered(broker_config: Mapping[int, str | None], live_brokers: Iterable[int]) -> bool:
    """Whether every live broker runs with follower.fetch.last.tiered.offset.enable (KIP-1023) on."""
    live = list(live_brokers)
    return bool(live) and all(is_true(broker_config.get(b)) for b in live)


def latest_by_pair(series: Iterable[Series]) -> dict[tuple[int, str], float]:
    """Each (broker, topic) series' latest sample (a gauge: the value now, not a statistic over the window)."""
    out: dict[tuple[int, str], float] = defaultdict(float)
    for s in series:
        if len(s.values):
            out[s.key] += float(s.values[s.times.argmax()])
    return dict(out)


def query_remote_bytes(client: RangeQueries, settings: PrometheusSettings, broker_ids: Sequence[int],
                       now: float) -> dict[str, dict[tuple[int, str], float]]:
    """REMOTE_QUERIES' values now per (broker, topic), one query per batch of `brokers_per_query` brokers."""
    ids = sorted(broker_ids)
    out: dict[str, dict[tuple[int, str], float]] = {}
    for metric, template in REMOTE_QUERIES.items():
        series: list[Series] = []
        for start in range(0, len(ids), settings.brokers_per_query):
            batch = ids[start:start + settings.brokers_per_query]
            shown_as = f"{metric} (brokers {batch[0]}..{batch[-1]}): {template}"
            data = client.query_range(render_query(template, settings, batch), QueryWindow(now, now, settings.step),
                                      shown_as)
            series += parse_matrix(data, ("broker", "topic"), settings.broker_label,
                                   f"Prometheus at {client.url}, query {shown_as}")
        out[metric] = latest_by_pair(series)
    return out


def per_partition(by_pair: Mapping[tuple[int, str], float], leaders: Mapping[Key, int],
                  sizes: Mapping[Key, int]) -> dict[Key, int]:
    """A (broker, topic) value shared among the topic's partitions that broker leads, by local size."""
    shares, _ = attribute(by_pair, leaders, {}, sizes)
    return {key: round(value) for key, value in shares.items()}


def move_cost(local_bytes: int, copy_lag_bytes: int | None, last_tiered_fetch: bool) -> int:
    """The bytes a new replica copies: past the last tiered offset (what is not yet remote) with KIP-1023 on and
    the lag known, never more than the local log; else the leader's local log. The lag counts closed segments
    only: the active segment, copied too, is left out (at most segment.bytes)."""
    if last_tiered_fetch and copy_lag_bytes is not None:
        return min(local_bytes, copy_lag_bytes)
    return local_bytes


def tiered_partitions(partitions: pd.DataFrame, tiered: Iterable[str],
                      remote_bytes: Mapping[tuple[int, str], float] | None,
                      copy_lag_bytes: Mapping[tuple[int, str], float] | None,
                      last_tiered_fetch: bool) -> pd.DataFrame:
    """The TIERED_PARTITIONS table from the snapshot's partitions (topic, partition, leader, size_bytes): one row
    per partition of a tiered topic; remote and lag bytes null where no broker reported them (None: Prometheus
    not asked)."""
    topics = set(tiered)
    rows = partitions[partitions["topic"].isin(topics)]
    keys = list(zip(rows["topic"], rows["partition"].astype(int), strict=True))
    leaders = dict(zip(keys, rows["leader"].astype(int), strict=True))
    sizes = dict(zip(keys, rows["size_bytes"].astype(int), strict=True))
    remote = per_partition(remote_bytes, leaders, sizes) if remote_bytes is not None else {}
    lag = per_partition(copy_lag_bytes, leaders, sizes) if copy_lag_bytes is not None else {}
    table = pd.DataFrame({
        "topic": [k[0] for k in keys], "partition": [k[1] for k in keys],
        "local_bytes": [sizes[k] for k in keys],
        "remote_bytes": pd.array([remote.get(k) for k in keys], dtype="Int64"),
        "copy_lag_bytes": pd.array([lag.get(k) for k in keys], dtype="Int64"),
        "move_cost_bytes": [move_cost(sizes[k], lag.get(k), last_tiered_fetch) for k in keys]},
        columns=TIERED_PARTITIONS.names)
    TIERED_PARTITIONS.to_arrow_table(table)  # the snapshot boundary: fails here, not when written
    return table


def move_costs(table: pd.DataFrame | None) -> dict[Key, int]:
    """Each tiered partition's move cost (TIERED_PARTITIONS' move_cost_bytes); none without the table."""
    if table is None:
        return {}
    return {(str(t), int(p)): int(c)
            for t, p, c in zip(table["topic"], table["partition"], table["move_cost_bytes"], strict=True)}


def tiered_summary(table: pd.DataFrame) -> list[dict[str, Any]]:
    """Per tiered topic: partitions, local bytes, remote bytes (None: not reported), and a move's cost summed."""
    out = []
    for topic, rows in table.groupby("topic", sort=True):
        remote = rows["remote_bytes"]
        out.append({"topic": topic, "partitions": len(rows), "local_bytes": int(rows["local_bytes"].sum()),
                    "remote_bytes": int(remote.sum()) if remote.notna().any() else None,
                    "move_cost_bytes": int(rows["move_cost_bytes"].sum())})
    return out


def tiered_lines(summary: list[dict[str, Any]], last_tiered_fetch: bool,
                 size: Callable[[int], str] = str) -> list[str]:
    """The report's and `show`'s lines on tiered topics (`size`: how bytes are written)."""
    if not summary:
        return []
    rule = ("moves copy only what is past the last tiered offset (every broker fetches from it, KIP-1023)"
            if last_tiered_fetch else "moves copy the whole local log (not every broker has "
            f"{FETCH_LAST_TIERED} on)")
    lines = [f"tiered topics ({len(summary)}): {rule}"]
    for t in summary:
        remote = size(t["remote_bytes"]) if t["remote_bytes"] is not None else "not reported"
        lines.append(f"  {t['topic']}: {t['partitions']} partitions, local {size(t['local_bytes'])}, "
                     f"remote {remote}, one replica of each partition moved copies {size(t['move_cost_bytes'])}")
    return lines


def snapshot_tiered(folder: Path) -> tuple[list[dict[str, Any]], bool]:
    """The tiered topics of the snapshot in `folder` (a snapshot stage; `tiered_summary`, none where it has no
    tiered topic) and whether every broker fetches from the last tiered offset."""
    if not (folder / f"{TIERED_PARTITIONS.name}.parquet").exists():
        return [], False
    facts = read_json(folder / "manifest.json").get("tiered") or {}
    return tiered_summary(read_table(folder, TIERED_PARTITIONS)), bool(facts.get("last_tiered_fetch"))
