"""Capture the cluster's state (brokers, partitions with ISR, replica sizes, capacities) into a run folder."""

from __future__ import annotations

import logging
import time
from typing import Any

from kafka_rebalancer.config import PrometheusSettings, RebalancerConfig
from kafka_rebalancer.errors import PermissionDenied
from kafka_rebalancer.kafka_admin import BrokerInfo, ClusterAdmin, KafkaConnection, PartitionInfo
from kafka_rebalancer.operations.replication_factor import MIN_INSYNC, requested_topics
from kafka_rebalancer.operations.request import read_request
from kafka_rebalancer.run_folder import SNAPSHOT, RunFolder
from kafka_rebalancer.snapshot.build import SnapshotTables, build_snapshot_tables
from kafka_rebalancer.snapshot.capacity import read_capacity_file
from kafka_rebalancer.snapshot.log_size_history import snapshot_history
from kafka_rebalancer.snapshot.metrics import Key, read_traffic_file, sample_traffic
from kafka_rebalancer.snapshot.prometheus import ClusterFacts, MeasuredMetrics, measure, query_metrics, rate_range
from kafka_rebalancer.snapshot.prometheus_http import PrometheusHttp, prometheus_http
from kafka_rebalancer.snapshot.store import read_snapshot, write_snapshot
from kafka_rebalancer.snapshot.tiered import (
    FETCH_LAST_TIERED,
    REMOTE_STORAGE_ENABLE,
    fetches_from_last_tiered,
    is_true,
    query_remote_bytes,
    tiered_partitions,
    tiered_topics,
)
from kafka_rebalancer.terminal_progress import Phases, sleeping

__all__ = ["SnapshotTables", "capture", "read_snapshot", "take_snapshot", "write_snapshot"]

log = logging.getLogger(__name__)


def capture(config: RebalancerConfig, connection: KafkaConnection, now: float | None = None,
            min_insync_topics: tuple[str, ...] = ()) -> tuple[SnapshotTables, dict[str, Any]]:
    """Query the cluster (and Prometheus, over the window ending `now`, default: now) and build the snapshot tables
    (nothing written). `min_insync_topics`: names or patterns of the topics whose min.insync.replicas the manifest
    records (a replication factor change's)."""
    started = time.monotonic()
    # The files and credentials are checked before the first network call: a bad one is reported at once, not
    # after a timeout.
    capacity_file = read_capacity_file(config)
    traffic_file = (read_traffic_file(config.metrics.file)  # type: ignore[arg-type]  # set when source is file
                    if config.metrics.source == "file" else None)
    prometheus = config.metrics.prometheus if config.metrics.source == "prometheus" else None
    prometheus_client = prometheus_http(prometheus, str(config.source_file)) if prometheus is not None else None
    phase = Phases("snapshot", 5)
    with ClusterAdmin(connection) as admin:
        phase("brokers")
        admin.check_reachable()
        cluster_id, brokers = admin.describe_cluster()
        log.info("cluster %s: %d live brokers", cluster_id, len(brokers))
        phase("partitions")
        partitions = admin.describe_partitions()
        log.info("%d partitions described", len(partitions))
        min_insync = (admin.min_insync_replicas(requested_topics(min_insync_topics, {p.topic for p in partitions}))
                      if min_insync_topics else None)
        tiered, fetch_config, tiered_warning = _tiered_configs(admin, partitions, brokers)
        phase("log dirs")
        log_dirs = admin.describe_log_dirs([b.broker_id for b in brokers])
        sizes = _partition_sizes(partitions, log_dirs)
        phase(f"traffic ({config.metrics.source})")
        traffic = (sample_traffic(admin, sizes, sizes, config.metrics.sample_seconds,
                                  sleeping("snapshot", "sampling traffic"))
                   if config.metrics.source == "sampled" else traffic_file)
    measured = (_measure_with_prometheus(config, prometheus, prometheus_client, brokers, partitions, sizes,
                                         time.time() if now is None else now)
                if prometheus is not None and prometheus_client is not None else None)
    if measured is not None:
        traffic = measured.traffic
    phase("tables")
    tables = build_snapshot_tables(config, brokers, partitions, log_dirs, traffic, capacity_file,
                                   measured.broker_cpu_cores if measured else None)
    if measured is not None:
        tables.warnings += measured.warnings
    tables.warnings += tiered_warning
    last_tiered_fetch = fetches_from_last_tiered(fetch_config, [b.broker_id for b in brokers])
    if tiered:
        remote = (query_remote_bytes(prometheus_client, prometheus, [b.broker_id for b in brokers],
                                     time.time() if now is None else now)
                  if prometheus is not None and prometheus_client is not None else {})
        tables.tiered_partitions = tiered_partitions(tables.partitions, tiered, remote.get("remote_log_size_bytes"),
                                                     remote.get("remote_copy_lag_bytes"), last_tiered_fetch)
    for warning in tables.warnings:
        log.warning("snapshot: %s", warning)
    manifest: dict[str, Any] = {"cluster": config.cluster.name, "cluster_id": cluster_id,
                "bootstrap_servers": connection.bootstrap_servers,
                "config_fingerprint": config.fingerprint(),
                # read_snapshot checks these resources' capacities (the tables alone do not say which are balanced)
                "balanced_resources": [r.name for r in config.resource_list()],
                # KIP-1066: Kafka places no new partition on these, but accepts reassignments onto them, so the
                # planner must not target them either
                "cordoned_brokers": sorted(b for b, dirs in log_dirs.items() if dirs.get("cordoned"))}
    if tiered:
        manifest["tiered"] = {"topics": sorted(tiered), "last_tiered_fetch": last_tiered_fetch,
                              "brokers_fetching_last_tiered": sorted(b for b, v in fetch_config.items() if is_true(v))}
    if min_insync is not None:
        manifest[MIN_INSYNC] = min_insync
    if manifest["cordoned_brokers"]:
        log.info("cordoned brokers (no new partitions): %s", manifest["cordoned_brokers"])
    if measured is not None and prometheus is not None and prometheus_client is not None:  # measured: both are set
        manifest |= _prometheus_manifest(prometheus, prometheus_client, measured, tables)
    manifest["capture_seconds"] = round(time.monotonic() - started, 3)
    return tables, manifest


def _tiered_configs(admin: ClusterAdmin, partitions: list[PartitionInfo], brokers: list[BrokerInfo]
                    ) -> tuple[frozenset[str], dict[int, str | None], list[str]]:
    """The tiered topics and, where there are any, each broker's KIP-1023 config; a user who may not read the
    configs gets a warning, not a failed snapshot (the sizes are then the local ones, as before tiering)."""
    try:
        tiered = tiered_topics(admin.topic_config({p.topic for p in partitions}, REMOTE_STORAGE_ENABLE,
                                                  "to read which topics are tiered"))
        fetch = (admin.broker_config([b.broker_id for b in brokers], FETCH_LAST_TIERED, "to read whether followers "
                                     "fetch from the last tiered offset (KIP-1023)") if tiered else {})
    except PermissionDenied as exc:
        return frozenset(), {}, [f"tiered topics not known, their remote bytes not recorded: {exc}"]
    if tiered:
        log.info("%d tiered topics (%s)", len(tiered), REMOTE_STORAGE_ENABLE)
    return tiered, fetch, []


def _partition_sizes(partitions: list[PartitionInfo], log_dirs: dict[int, dict[str, Any]]) -> dict[Key, int]:
    """Each partition's size on its leader (0 when unknown)."""
    return {(p.topic, p.partition): log_dirs.get(p.leader, {}).get("replicas", {}).get((p.topic, p.partition), 0)
            for p in partitions}


def _measure_with_prometheus(config: RebalancerConfig, settings: PrometheusSettings, client: PrometheusHttp,
                             brokers: list[BrokerInfo], partitions: list[PartitionInfo], sizes: dict[Key, int],
                             now: float) -> MeasuredMetrics:
    balanced = [r.name for r in config.resource_list()]
    metrics = ["cpu"] * ("cpu" in balanced) + ["bytes_in", "bytes_out", "log_end_offset"]
    live = [b.broker_id for b in brokers]
    log.info("querying Prometheus at %s: %s of %d brokers over %gs", settings.url, ", ".join(metrics), len(live),
             settings.window)
    results = query_metrics(client, settings, live, metrics, now)
    topics = {p.topic for p in partitions if not config.topic_excluded(p.topic)}
    facts = ClusterFacts(live, {(p.topic, p.partition): p.leader for p in partitions}, sizes,
                         config.broker_pool_of(), {t: config.topic_pool(t) for t in topics})
    measured = measure(results, facts, settings, balanced, now)
    for pool, reasons in measured.unbalanced_resources.items():
        for resource, reason in reasons.items():
            log.warning("pool %s: %s is left unbalanced: %s", pool, resource, reason)
    return measured


def _prometheus_manifest(settings: PrometheusSettings, client: PrometheusHttp, measured: MeasuredMetrics,
                         tables: SnapshotTables) -> dict[str, Any]:
    """What was asked, how complete the answers were, what is left unbalanced, and the CPU measured per broker
    beside the CPU the snapshot's replicas now carry (they agree up to the follower-cost averaging)."""
    planned = tables.replicas.groupby("broker_id")["cpu_cores"].sum().to_dict() if len(tables.replicas) else {}
    return {
        "metrics": {"source": "prometheus", "url": settings.url, "window_s": settings.window,
                    "step_s": settings.step, "rate_range": rate_range(settings), "statistic": settings.statistic,
                    "cpu": settings.cpu, "queries": client.queries, "query_seconds": round(client.seconds, 3)},
        "metrics_completeness": measured.completeness,
        "unbalanced_resources": measured.unbalanced_resources,
        "cpu_cores": {str(b): {"measured": round(cores, 6), "planned": round(float(planned.get(b, 0.0)), 6)}
                      for b, cores in sorted(measured.broker_cpu_cores.items())},
    }


def take_snapshot(config: RebalancerConfig, connection: KafkaConnection, run: RunFolder,
                  stage: str = SNAPSHOT) -> dict[str, Any]:
    """Capture the cluster into `run/<stage>` atomically; returns the manifest. A run's own snapshot keeps the log
    size history its capacity forecast reads (`log_size_history.snapshot_history`; never fails the snapshot)."""
    request = read_request(run)
    rf_topics = request.scope.topics if request is not None and request.scope.replication_factor else ()
    tables, manifest = capture(config, connection, min_insync_topics=rf_topics)
    history = None
    if stage == SNAPSHOT:
        live = tables.brokers.loc[tables.brokers["alive"], "broker_id"].astype(int).tolist()
        history, manifest["forecast_history"] = snapshot_history(config, live, time.time())
    manifest = write_snapshot(run, tables, manifest, stage, history)
    log.info("snapshot written to %s (%d brokers, %d partitions, %d replicas, hash %s)", run.stage_path(stage),
             manifest["rows"]["brokers"], manifest["rows"]["partitions"], manifest["rows"]["replicas"],
             manifest["content_hash"][:12])
    return manifest

