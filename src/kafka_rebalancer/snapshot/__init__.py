"""Capture the cluster's state (brokers, partitions with ISR, replica sizes, capacities) into a run folder."""

from __future__ import annotations

import logging
import time
from typing import Any

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.kafka_admin import ClusterAdmin, KafkaConnection, PartitionInfo
from kafka_rebalancer.run_folder import SNAPSHOT, RunFolder
from kafka_rebalancer.snapshot.build import SnapshotTables, build_snapshot_tables
from kafka_rebalancer.snapshot.capacity import read_capacity_file
from kafka_rebalancer.snapshot.metrics import Traffic, read_traffic_file, sample_traffic
from kafka_rebalancer.snapshot.store import read_snapshot, write_snapshot

__all__ = ["SnapshotTables", "capture", "read_snapshot", "take_snapshot", "write_snapshot"]

log = logging.getLogger(__name__)


def capture(config: RebalancerConfig, connection: KafkaConnection) -> tuple[SnapshotTables, dict[str, Any]]:
    """Query the cluster and build the snapshot tables (nothing written)."""
    started = time.monotonic()
    # The files are checked before the first network call: a bad one is reported at once, not after a timeout.
    capacity_file = read_capacity_file(config)
    traffic_file = (read_traffic_file(config.metrics.file)  # type: ignore[arg-type]  # set when source is file
                    if config.metrics.source == "file" else None)
    with ClusterAdmin(connection) as admin:
        admin.check_reachable()
        cluster_id, brokers = admin.describe_cluster()
        log.info("cluster %s: %d live brokers", cluster_id, len(brokers))
        partitions = admin.describe_partitions()
        log.info("%d partitions described", len(partitions))
        log_dirs = admin.describe_log_dirs([b.broker_id for b in brokers])
        traffic = traffic_file if traffic_file is not None else _cluster_traffic(config, admin, partitions, log_dirs)
    tables = build_snapshot_tables(config, brokers, partitions, log_dirs, traffic, capacity_file)
    for warning in tables.warnings:
        log.warning("snapshot: %s", warning)
    manifest = {"cluster": config.cluster.name, "cluster_id": cluster_id,
                "bootstrap_servers": connection.bootstrap_servers,
                "config_fingerprint": config.fingerprint(),
                # read_snapshot checks these resources' capacities (the tables alone do not say which are balanced)
                "balanced_resources": [r.name for r in config.resource_list()],
                "capture_seconds": round(time.monotonic() - started, 3)}
    return tables, manifest


def _cluster_traffic(config: RebalancerConfig, admin: ClusterAdmin, partitions: list[PartitionInfo],
                     log_dirs: dict[int, dict[str, Any]]) -> Traffic:
    if config.metrics.source == "sampled":
        sizes = {(p.topic, p.partition): log_dirs.get(p.leader, {}).get("replicas", {}).get((p.topic, p.partition), 0)
                 for p in partitions}
        return sample_traffic(admin, sizes, sizes, config.metrics.sample_seconds)
    return Traffic()


def take_snapshot(config: RebalancerConfig, connection: KafkaConnection, run: RunFolder,
                  stage: str = SNAPSHOT) -> dict[str, Any]:
    """Capture the cluster into `run/<stage>` atomically; returns the manifest."""
    tables, manifest = capture(config, connection)
    manifest = write_snapshot(run, tables, manifest, stage)
    log.info("snapshot written to %s (%d brokers, %d partitions, %d replicas, hash %s)", run.stage_path(stage),
             manifest["rows"]["brokers"], manifest["rows"]["partitions"], manifest["rows"]["replicas"],
             manifest["content_hash"][:12])
    return manifest

