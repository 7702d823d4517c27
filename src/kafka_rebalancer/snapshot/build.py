"""Turn what the cluster reported into the snapshot tables (pure: no I/O, no Kafka)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.kafka_admin import BrokerInfo, PartitionInfo
from kafka_rebalancer.model.schemas import BROKERS, PARTITIONS, REPLICAS
from kafka_rebalancer.snapshot.capacity import resolve_disk_capacities


@dataclass
class SnapshotTables:
    brokers: pd.DataFrame
    replicas: pd.DataFrame
    partitions: pd.DataFrame
    warnings: list[str] = field(default_factory=list)


def build_snapshot_tables(config: RebalancerConfig, cluster_brokers: list[BrokerInfo],
                          partitions: list[PartitionInfo],
                          log_dirs: dict[int, dict[str, Any]]) -> SnapshotTables:
    alive = {b.broker_id: b for b in cluster_brokers}
    pool_of = config.broker_pool_of()
    excluded_brokers = set(config.exclude.brokers)
    warnings: list[str] = []

    replica_rows = []
    partition_rows = []
    for p in partitions:
        reported = {b: log_dirs.get(b, {}).get("replicas", {}).get((p.topic, p.partition)) for b in p.replicas}
        known_sizes = [s for s in reported.values() if s is not None]
        # Moving a replica copies the leader's log; a dead broker's replica will need as much once restored.
        leader_size = reported.get(p.leader)
        partition_size = leader_size if leader_size is not None else max(known_sizes, default=0)
        isr = set(p.isr)
        for position, b in enumerate(p.replicas):
            size = reported[b]
            replica_rows.append((p.topic, p.partition, b, position, b == p.leader, b in isr,
                                 size if size is not None else partition_size))
        partition_rows.append((p.topic, p.partition, len(p.replicas), list(p.replicas), list(p.isr), p.leader,
                               config.topic_pool(p.topic), config.topic_excluded(p.topic), partition_size))

    replicas = pd.DataFrame(replica_rows, columns=REPLICAS.names)
    partitions_df = pd.DataFrame(partition_rows, columns=PARTITIONS.names)

    broker_ids = sorted(set(alive) | set(pool_of) | set(replicas["broker_id"].tolist()))
    for b in broker_ids:
        if b in pool_of and b not in alive:
            warnings.append(f"broker {b} of pool {pool_of[b]!r} is not in the cluster (dead or wrong id)")
        if b in alive and b not in pool_of:
            warnings.append(f"broker {b} is in the cluster but in no pool: it is neither balanced nor a target")
    totals = {b: log_dirs.get(b, {}).get("total_bytes") for b in broker_ids}
    capacities = resolve_disk_capacities(config, [b for b in broker_ids if b in pool_of], totals)
    used = replicas.groupby("broker_id")["size_bytes"].sum().to_dict() if len(replicas) else {}
    broker_rows = []
    for b in broker_ids:
        info = alive.get(b)
        broker_rows.append((
            b, info.rack if info else None, pool_of.get(b), info is not None, b in excluded_brokers,
            info.host if info else None, info.port if info else None, capacities.get(b, 0), int(used.get(b, 0)),
            totals.get(b), log_dirs.get(b, {}).get("usable_bytes")))
    brokers = pd.DataFrame(broker_rows, columns=BROKERS.names)
    return SnapshotTables(brokers, replicas, partitions_df, warnings)
