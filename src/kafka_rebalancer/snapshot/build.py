"""Turn what the cluster reported into the snapshot tables (pure: no I/O, no Kafka)."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd

from kafka_rebalancer.config import RebalancerConfig
from kafka_rebalancer.kafka_admin import BrokerInfo, PartitionInfo
from kafka_rebalancer.model.resources import CPU, NETWORK_IN, NETWORK_OUT, role_loads
from kafka_rebalancer.model.schemas import BROKERS
from kafka_rebalancer.snapshot.capacity import CAPACITY_FIELDS, CruiseControlCapacity, resolve_capacities
from kafka_rebalancer.snapshot.log_dirs import log_dir_tables
from kafka_rebalancer.snapshot.measured_cpu import spread_measured_cpu
from kafka_rebalancer.snapshot.metrics import Traffic
from kafka_rebalancer.snapshot.row_checks import check_snapshot_tables

# What the cluster reports about partitions and replicas; traffic columns are added by with_traffic.
_PARTITION_FACTS = ["topic", "partition", "replication_factor", "replicas", "isr", "leader", "topic_pool", "excluded",
                    "size_bytes"]
_REPLICA_FACTS = ["topic", "partition", "broker_id", "position", "is_leader", "in_isr", "size_bytes"]


@dataclass
class SnapshotTables:
    brokers: pd.DataFrame
    replicas: pd.DataFrame
    partitions: pd.DataFrame
    warnings: list[str] = field(default_factory=list)
    # JBOD (snapshot.log_dirs): None in a snapshot taken before log directories were recorded
    log_dirs: pd.DataFrame | None = None
    replica_log_dirs: pd.DataFrame | None = None
    # tiered storage (snapshot.tiered): None where no topic is tiered, or in a snapshot from before it was recorded
    tiered_partitions: pd.DataFrame | None = None


def with_traffic(partitions: pd.DataFrame, replicas: pd.DataFrame, traffic: Traffic,
                 config: RebalancerConfig,
                 measured_cpu: Mapping[int, float] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Partition traffic and CPU (the model's estimate, or `measured_cpu` cores per broker spread by it), and each
    replica's traffic load in its current role."""
    keys = list(zip(partitions["topic"], partitions["partition"], strict=True))
    bytes_in = np.array([traffic.bytes_in.get(k, 0.0) for k in keys], dtype=float)
    bytes_out = np.array([traffic.bytes_out.get(k, 0.0) for k in keys], dtype=float)
    cpu = config.metrics.cpu_model.model()
    cpu_leader, cpu_follower = cpu.leader(bytes_in, bytes_out), cpu.follower(bytes_in)
    if measured_cpu:
        row_of = {key: row for row, key in enumerate(keys)}
        replica_partition = np.array([row_of[k] for k in zip(replicas["topic"], replicas["partition"], strict=True)],
                                     dtype=int)
        cpu_leader, cpu_follower = spread_measured_cpu(
            replica_partition, replicas["broker_id"].to_numpy(int), replicas["is_leader"].to_numpy(bool),
            cpu_leader, cpu_follower, measured_cpu)
    partitions = partitions.assign(bytes_in_per_s=bytes_in, bytes_out_per_s=bytes_out,
                                   cpu_leader_cores=cpu_leader, cpu_follower_cores=cpu_follower)
    per_replica = replicas[["topic", "partition"]].merge(
        partitions[["topic", "partition", "replication_factor", "bytes_in_per_s", "bytes_out_per_s",
                    "cpu_leader_cores", "cpu_follower_cores"]], on=["topic", "partition"], how="left")
    resources = [NETWORK_IN, NETWORK_OUT, CPU]
    leader, follower = role_loads(replicas["size_bytes"].to_numpy(float), per_replica["bytes_in_per_s"].to_numpy(),
                                  per_replica["bytes_out_per_s"].to_numpy(),
                                  per_replica["replication_factor"].to_numpy(float),
                                  per_replica["cpu_leader_cores"].to_numpy(),
                                  per_replica["cpu_follower_cores"].to_numpy(), resources)
    current = np.where(replicas["is_leader"].to_numpy(bool)[:, None], leader, follower)
    # cast: each of the three traffic resources has its replica-load column
    replicas = replicas.assign(**{cast(str, r.replica_load_column): current[:, k] for k, r in enumerate(resources)})
    return partitions, replicas


def build_snapshot_tables(config: RebalancerConfig, cluster_brokers: list[BrokerInfo],
                          partitions: list[PartitionInfo], log_dirs: dict[int, dict[str, Any]],
                          traffic: Traffic | None = None,
                          cruise_control: CruiseControlCapacity | None = None,
                          measured_cpu: Mapping[int, float] | None = None) -> SnapshotTables:
    """The snapshot tables, checked row by row (SnapshotError); `cruise_control`: the config's capacity file if
    already read; `measured_cpu`: cores per broker measured (Prometheus), else CPU is the model's estimate."""
    alive = {b.broker_id: b for b in cluster_brokers}
    pool_of = config.broker_pool_of()
    excluded_brokers = set(config.exclude.brokers)
    warnings = _unmatched_topic_rules(config, {p.topic for p in partitions}) + _undescribed_topics(partitions,
                                                                                                    log_dirs)

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
            replica_rows.append({"topic": p.topic, "partition": p.partition, "broker_id": b, "position": position,
                                 "is_leader": b == p.leader, "in_isr": b in isr,
                                 "size_bytes": size if size is not None else partition_size})
        partition_rows.append({"topic": p.topic, "partition": p.partition, "replication_factor": len(p.replicas),
                               "replicas": list(p.replicas), "isr": list(p.isr), "leader": p.leader,
                               "topic_pool": config.topic_pool(p.topic), "excluded": config.topic_excluded(p.topic),
                               "size_bytes": partition_size})

    partitions_df, replicas = with_traffic(pd.DataFrame(partition_rows, columns=_PARTITION_FACTS),
                                           pd.DataFrame(replica_rows, columns=_REPLICA_FACTS),
                                           traffic or Traffic(), config, measured_cpu)
    if traffic is not None and traffic.bytes_in:
        warnings += _uncovered_by_traffic(partitions_df, traffic)

    broker_ids = sorted(set(alive) | set(pool_of) | set(replicas["broker_id"].tolist()))
    for b in broker_ids:
        if b in pool_of and b not in alive:
            warnings.append(f"broker {b} of pool {pool_of[b]!r} is not in the cluster (dead or wrong id)")
        if b in alive and b not in pool_of:
            warnings.append(f"broker {b} is in the cluster but in no pool: it is neither balanced nor a target")
    totals = {b: log_dirs.get(b, {}).get("total_bytes") for b in broker_ids}
    capacities = resolve_capacities(config, [b for b in broker_ids if b in pool_of], totals, cruise_control)
    used = replicas.groupby("broker_id")["size_bytes"].sum().to_dict() if len(replicas) else {}
    broker_rows = []
    for b in broker_ids:
        info = alive.get(b)
        broker_rows.append({
            "broker_id": b, "rack": info.rack if info else None, "broker_pool": pool_of.get(b),
            "alive": info is not None, "excluded": b in excluded_brokers, "host": info.host if info else None,
            "port": info.port if info else None, "disk_used_bytes": int(used.get(b, 0)),
            "log_dir_total_bytes": totals.get(b), "log_dir_usable_bytes": log_dirs.get(b, {}).get("usable_bytes"),
            **{column: capacities[column].get(b, 0.0) for column in CAPACITY_FIELDS}})
    brokers = pd.DataFrame(broker_rows, columns=BROKERS.names)
    brokers["disk_capacity_bytes"] = brokers["disk_capacity_bytes"].astype("int64")
    check_snapshot_tables(brokers, replicas, partitions_df,
                          {name: f"cluster {config.cluster.name}: {name}" for name in ("brokers", "replicas",
                                                                                        "partitions")},
                          [r.name for r in config.resource_list()])
    dirs, replica_dirs, dir_warnings = log_dir_tables(log_dirs, cruise_control)
    return SnapshotTables(brokers, replicas, partitions_df, warnings + dir_warnings, dirs, replica_dirs)


def _uncovered_by_traffic(partitions: pd.DataFrame, traffic: Traffic) -> list[str]:
    """Partitions the metrics do not list plan as idle: say so, a renamed topic or a stale export looks the same."""
    balanced = partitions[~partitions["excluded"].astype(bool)]
    missing = [(t, p) for t, p in zip(balanced["topic"], balanced["partition"], strict=True)
               if (t, p) not in traffic.bytes_in]
    if not missing:
        return []
    topic, partition = missing[0]
    return [f"traffic metrics have no rates for {len(missing)} of {len(balanced)} partitions (e.g. {topic!r} "
            f"partition {partition}): they count as idle"]


def _undescribed_topics(partitions: list[PartitionInfo], log_dirs: dict[int, dict[str, Any]]) -> list[str]:
    """Kafka lists only the topics the user may DESCRIBE, but the log dirs show every replica on a broker's disks:
    a topic seen only there is load no plan accounts for."""
    described = {p.topic for p in partitions} | {"__cluster_metadata"}  # KRaft's log: never a described topic
    hidden = sorted({topic for dirs in log_dirs.values() for topic, _ in dirs.get("replicas", {})} - described)
    if not hidden:
        return []
    return [f"{len(hidden)} topic(s) have replicas in the brokers' log dirs but were not described (no DESCRIBE "
            f"permission for this user?), e.g. {', '.join(map(repr, hidden[:5]))}: their replicas are in no plan "
            "and their disk use in no band"]


def _unmatched_topic_rules(config: RebalancerConfig, topics: set[str]) -> list[str]:
    """A rule that matches no topic is most likely a typo: its topics fall to the default pool, or to none."""
    return [f"topic_pools[{i}]: pattern {rule.topics!r} (pool {rule.pool!r}) matches no topic on the cluster"
            for i, rule in enumerate(config.topic_pools)
            if not any(fnmatch.fnmatchcase(topic, rule.topics) for topic in topics)]
